// Writing files so that no reader, and no crash, ever finds half of one:
// the contents go to a temp name beside the final one, are completed (and,
// when durable, fsynced), and only then renamed over the final name
// (rename(2) replaces atomically); a durable writer syncs the directory
// after. Every such write in the library goes through these helpers, and
// the names they make are fixed here, so that what a dead writer left
// behind is recognized by its name alone (checkpoint/save_files_internal.h):
//
//   <final>.tempstate<decimal digits>  a file being written (TensorFlow's
//                                      temp-file suffix)
//   <final>.old<decimal digits>        a final file set aside while its
//                                      replacement moves in
//   <final>.tmp<32 hex digits>         a whole file being replaced (the
//                                      checkpoint state file)
//
// Thread safety: as thread-safe as the FileSystem (FileSystem methods may be
// called concurrently); temp names are random, so concurrent writers of
// different final names never collide.

#ifndef CKFLOW_BASE_ATOMIC_FILE_INTERNAL_H_
#define CKFLOW_BASE_ATOMIC_FILE_INTERNAL_H_

#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "base/file_system.h"
#include "base/status.h"

namespace ckflow::internal {

// ".tempstate<decimal random uint64>", TensorFlow's temp-file suffix.
std::string TempStateSuffix();
// Whether `suffix` is ".tempstate" or ".old" (a set-aside file, see
// MoveIntoPlace) followed by 1 to 32 decimal digits and nothing else.
bool IsTempStateSuffix(std::string_view suffix);
bool IsSetAsideSuffix(std::string_view suffix);

// Whether `name` is the temp name ReplaceFile gives `final_name` in its
// directory: final_name, ".tmp" and 32 lowercase hex digits.
bool IsReplaceTempName(std::string_view name, std::string_view final_name);

// Creates `path` holding `contents` (fsynced with `sync`); on failure
// deletes what it created.
Status WriteNewFile(FileSystem* fs, const std::string& path, std::string_view contents,
                    bool sync = false);

// Renames each moves[i].first to moves[i].second, in order (put the file
// readers look for first, an index, last), so that a failure leaves every
// final name as it was: a file already under a final name is first moved
// aside (to "<name>.old<random>"), and if any rename fails the moves are
// undone and the old files put back. On success the old files are deleted.
// A crash in between can leave an old file under its ".old" name, never a
// mix of old and new files under the final names.
Status MoveIntoPlace(FileSystem* fs, std::span<const std::pair<std::string, std::string>> moves);

// MoveIntoPlace, then with `sync` the directory of the last final name
// (every move's final name must lie in it) is synced, so the renames
// survive a power loss; if that sync fails, the files moved into place are
// deleted again, last first, and the sync's error is returned with the
// context "making <what> durable".
Status MoveIntoPlaceDurably(FileSystem* fs,
                            std::span<const std::pair<std::string, std::string>> moves, bool sync,
                            std::string_view what);

// Replaces (or creates) file `name` in directory `dir` by `contents`: they
// go to "<name>.tmp<32 random hex digits>", which is renamed over `name`.
// With `durable`, the temp file is fsynced before the rename and `dir`
// after it; if that last sync fails, the previous contents are put back
// the same way (or the new file deleted if there was none), so an error
// always means the previous file. Errors name the file and the step; on
// error the temp file is removed.
Status ReplaceFile(FileSystem* fs, const std::string& dir, std::string_view name,
                   std::string_view contents, bool durable);

}  // namespace ckflow::internal

#endif  // CKFLOW_BASE_ATOMIC_FILE_INTERNAL_H_
