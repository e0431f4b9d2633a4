// MergeBundles: TensorFlow's MergeV2Checkpoints. Combines single- or
// multi-shard bundles (one per device or worker, typically written under
// P_temp/part-0000i-of-0000N) into one checkpoint P.
//
// Files, for inputs I_0 .. I_k and output P:
//   reads    I_j.index (every entry, in key order)
//   renames  each data file referenced by an entry, I_j.data-s-of-n, to
//            P.data-<id>-of-<N>, ids given in first-seen order (input order,
//            then key order), N = number of such files: data is moved, never
//            copied
//   writes   P.index: header {num_shards: N, the inputs' common endianness
//            and version}, then every entry sorted by key with shard_id
//            rewritten; built under a temp name and renamed last
//   deletes  each I_j.index, unreferenced data files of single-shard inputs
//            and (with delete_old_dirs) each input directory other than
//            P's, if empty
//
// One input with a single data file (I.data-00000-of-00001, what one
// BundleWriter or SaveV2 writes) is renamed, data then index, without
// reading or rewriting its index: it is already the one the merge would
// write. Its index is then the writer's to sync, as data files always are.
//
// Differences from TensorFlow, none visible in a valid result: P.index goes
// through a temp file; num_shards is N rather than the sum of the inputs'
// num_shards, which differ only when an input has a data file without
// entries (TensorFlow then writes an index whose data file names do not
// exist).
//
// Errors: those of reading the inputs (NotFound, DataLoss naming the file);
// InvalidArgument for a key in two inputs (naming the key and both
// prefixes) or inputs with different endianness or version; file-system
// errors of the renames, after which the moved data files are moved back.
//
// Thread safety: not for concurrent use on the same files.

#ifndef CKFLOW_BUNDLE_MERGE_H_
#define CKFLOW_BUNDLE_MERGE_H_

#include <span>
#include <string>

#include "base/file_system.h"
#include "base/status.h"

namespace ckflow {

struct MergeOptions {
  FileSystem* fs = nullptr;     // null: FileSystem::Default()
  bool delete_old_dirs = true;  // as TensorFlow's MergeV2Checkpoints op
  // fsync P.index before it is renamed into place and P's directory after
  // the renames (the inputs' data files are the writers' to sync). An
  // error of that last sync comes after the checkpoint is in place: the
  // merged files are then removed again, so an error always means no new
  // checkpoint under P.
  bool sync = false;
};

Status MergeBundles(std::span<const std::string> input_prefixes, const std::string& prefix,
                    const MergeOptions& options);
inline Status MergeBundles(std::span<const std::string> input_prefixes, const std::string& prefix) {
  return MergeBundles(input_prefixes, prefix, MergeOptions());
}

}  // namespace ckflow

#endif  // CKFLOW_BUNDLE_MERGE_H_
