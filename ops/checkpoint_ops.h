// Checkpoint ops: TensorFlow's SaveV2, RestoreV2 and MergeV2Checkpoints, and
// ckflow's RestoreVariables, which reads checkpointed tensors straight into
// the buffers of the variables they restore (no intermediate tensor, no
// fresh memory when the variable already has a buffer of the right shape),
// and SaveVariables, which writes variables it reads itself.
//
// A restore's statuses pass the reader they matched with to each run of their
// restore ops (RunOptions::bundle_reader), so the restore ops read through
// it: the index is parsed once, by Checkpoint::Restore, however many restore
// ops run. Without a reader of the prefix it is fed, a kernel opens the
// checkpoint itself for that run, as TensorFlow's do; nothing is kept from
// run to run, so a kernel never reads a checkpoint overwritten since.
//
// Every file these kernels create, write, sync, rename, remove or read goes
// through KernelContext::file_system() (the run's or the session's).
//
// Thread safety: the kernels may run concurrently (the session runs a
// checkpoint's restore ops in parallel); each locks the variable it writes.

#ifndef CKFLOW_OPS_CHECKPOINT_OPS_H_
#define CKFLOW_OPS_CHECKPOINT_OPS_H_

#include <string>
#include <vector>

#include "base/cast.h"
#include "graph/graph.h"
#include "graph/op_def.h"

namespace ckflow {

Status RegisterCheckpointOps(OpRegistry& registry);

namespace ops {

// Writes `tensors` under `tensor_names` (a string vector) into a
// single-shard bundle at `prefix`. `shape_and_slices` holds, per tensor, ""
// or TensorFlow's "<full shape dims> <slice spec>" ("10 4 0,4:-", see
// bundle/tensor_slice.h): the tensor is then that slice of the one saved
// under its name (a part of a partitioned variable). With `sync`, the files are fsynced before
// they are renamed into place. Returns the op (no outputs).
Output SaveV2(const Scope& scope, Output prefix, Output tensor_names, Output shape_and_slices,
              const std::vector<Output>& tensors, bool sync = false);

// Reads the tensors `tensor_names` (string vector) of dtypes `dtypes` from
// the checkpoint at `prefix`, or with a non-empty `shape_and_slices` entry
// that slice of the tensor (whose full shape must be the one stored,
// InvalidArgument otherwise), whatever slices the checkpoint stores it in.
std::vector<Output> RestoreV2(const Scope& scope, Output prefix, Output tensor_names,
                              Output shape_and_slices, const std::vector<DataType>& dtypes);

// Merges single-shard bundles `checkpoint_prefixes` (string vector) into one
// checkpoint at `destination_prefix`, renaming their data files and removing
// their indexes (and, with delete_old_dirs, their directories if empty).
// With `sync` (ckflow's attribute; TensorFlow has none) the merged index is
// fsynced before it is renamed into place and the destination directory
// after, so the checkpoint survives a power loss.
Output MergeV2Checkpoints(const Scope& scope, Output checkpoint_prefixes, Output destination_prefix,
                          bool delete_old_dirs = true, bool sync = false);

// Restores the variable behind each of `handles` (VarHandleOp outputs) from
// the tensor `keys[i]` of the checkpoint at `prefix`: dtype and shape are
// checked against the variable; the bytes are read, and checksummed,
// straight into its buffer. The op names the variables rather than taking
// the handles as inputs, so running it does not run a handle op per
// variable; it creates a variable not yet in the session, as its handle op
// would.
Output RestoreVariables(const Scope& scope, Output prefix, std::vector<std::string> keys,
                        const std::vector<Output>& handles);

// The same in two steps, for building many restore ops at once: what the op
// records of each handle's variable, read from the graph (only reads, so
// several threads may call it), then the op.
struct VariableDeclarations {
  std::vector<std::string> shared_names;
  std::vector<DataType> dtypes;
  std::vector<PartialShape> shapes;
};
StatusOr<VariableDeclarations> DeclarationsOf(const std::vector<Output>& handles);
// `positions`, if given, holds where each key was among the entries of the
// checkpoint the op is built for (BundleReader::entries()); the op looks
// there first. Only a hint: a checkpoint with other entries still restores
// correctly, through a search. `slices`, if given, holds per key "" or the
// shape_and_slice (as RestoreV2's) of the part of the key's tensor that the
// variable is: a part of a partitioned variable.
// `cast` lets a key whose dtype is not the variable's restore, converted
// as base/cast.h says, where the rule allows it (RestoreOptions::cast).
Output RestoreVariables(const Scope& scope, Output prefix, std::vector<std::string> keys,
                        VariableDeclarations variables, std::vector<int64_t> positions = {},
                        std::vector<std::string> slices = {}, CastRule cast = CastRule::kNone);

// Writes a single-shard bundle at `prefix`, as SaveV2 does, of the
// variables `variables` declares (what DeclarationsOf reads off their
// handles), each under keys[i] (and, with a non-empty slices[i], as that
// part of the tensor saved under keys[i]), and of `tensors` under
// `tensor_names`. As RestoreVariables, the op names the variables rather
// than taking their values as inputs, so a save of thousands of variables
// runs one op, not a handle op and a read per variable. A variable is read
// when the op reaches it (sharing its buffer, no copy); saving one never
// initialized fails with FailedPrecondition naming it. Keys in sorted order
// are written fastest (both lists; the op interleaves them).
Output SaveVariables(const Scope& scope, Output prefix, std::vector<std::string> keys,
                     VariableDeclarations variables, std::vector<std::string> slices,
                     std::vector<std::string> tensor_names, const std::vector<Output>& tensors,
                     bool sync = false);

}  // namespace ops
}  // namespace ckflow

#endif  // CKFLOW_OPS_CHECKPOINT_OPS_H_
