// The files a checkpoint save makes in its directory, by name, so that what
// a dead save left behind can be found and removed without touching
// anything else.
//
// A save of prefix D/B-N (Checkpoint::Save, CheckpointManager) makes, in D:
//
//   B-N_temp/part-SSSSS-of-NNNNN.index[.tempstate<digits>]    SaveV2's bundles,
//   B-N_temp/part-SSSSS-of-NNNNN.data-00000-of-00001[.tempstate<digits>]
//   B-N.index.tempstate<digits>                           the merged index
//   B-N.index.old<digits>, B-N.data-SSSSS-of-NNNNN.old<digits>
//                                   a checkpoint saved over, set aside
//   checkpoint.tmp<32 hex digits>                          the state file
//
// and finally B-N.data-SSSSS-of-NNNNN, then B-N.index, and `checkpoint`. A
// save that is killed can leave any of the first kind, or data files under
// their final names without the index; they are "debris".
// A Checkpoint::Write of exactly D/B makes the same with B for B-N.
//
// Thread safety: the functions may be called concurrently, but removing
// debris while another process saves into the same directory would remove
// its temp files: one writer per directory (as TensorFlow assumes).

#ifndef CKFLOW_CHECKPOINT_SAVE_FILES_INTERNAL_H_
#define CKFLOW_CHECKPOINT_SAVE_FILES_INTERNAL_H_

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/file_system.h"
#include "base/status.h"

namespace ckflow::internal {

// How a save names its checkpoints: `base` ("ckpt") alone (Write), or
// followed by "-<digits>" (Save, CheckpointManager).
struct CheckpointNaming {
  std::string base;
  bool numbered = true;
  // Whether `name` is the prefix of such a checkpoint ("ckpt-12").
  bool IsCheckpointName(std::string_view name) const;
};

// Whether `name`, an entry of the checkpoint directory, is debris of a save
// under `naming` (see above); a `_temp` directory counts.
bool IsDebrisName(const CheckpointNaming& naming, std::string_view name);

// Whether `name` is debris of a save under `naming` in a directory holding
// the names `present`: IsDebrisName, or a data file under its final name
// whose checkpoint has no index.
bool IsDebrisIn(const CheckpointNaming& naming, const std::string& name,
                const std::set<std::string>& present);

// The names in `dir` that RemoveSaveDebris would remove (or put back under
// their own name), touching nothing; empty if `dir` does not exist.
StatusOr<std::vector<std::string>> ListSaveDebris(FileSystem* fs, const std::string& dir,
                                                  const CheckpointNaming& naming);

struct DebrisRemoved {
  int files = 0;
  uint64_t bytes = 0;
};

// Removes the debris of saves under `naming` from `dir`: the temp files,
// data files of a checkpoint without an index, set-aside files (put back
// under their name if nothing took it), and each "_temp" directory's part
// files and then the directory (kept if anything else is in it). Returns what it removed;
// the first error, naming the file, after trying the rest.
StatusOr<DebrisRemoved> RemoveSaveDebris(FileSystem* fs, const std::string& dir,
                                         const CheckpointNaming& naming);

// Removes checkpoint `prefix`: P.index first (so a reader never finds an
// index without its data), then every P.data-SSSSS-of-NNNNN. NotFound
// files are no error; the first other error is returned after trying the
// rest.
Status RemoveCheckpointFiles(FileSystem* fs, const std::string& prefix);

}  // namespace ckflow::internal

#endif  // CKFLOW_CHECKPOINT_SAVE_FILES_INTERNAL_H_
