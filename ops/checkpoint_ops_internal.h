// How a restore hands its BundleReader to the restore ops a session runs,
// and how an eager restore reads values without an op.

#ifndef CKFLOW_OPS_CHECKPOINT_OPS_INTERNAL_H_
#define CKFLOW_OPS_CHECKPOINT_OPS_INTERNAL_H_

#include <memory>
#include <string>
#include <vector>

#include "base/resource.h"
#include "base/status.h"
#include "bundle/bundle_reader.h"
#include "graph/graph.h"

namespace ckflow::internal {

// Makes `reader` the one that the RestoreV2 and RestoreVariables kernels of
// the session owning `resources` read reader->prefix() through, replacing
// any reader handed over before for that prefix. The session keeps the few
// most recent ones; a SaveV2 or MergeV2Checkpoints that writes the prefix in
// that session drops it, so no restore reads a checkpoint it overwrote.
Status HandOverBundleReader(ResourceMgr& resources, std::shared_ptr<const BundleReader> reader);

// Restore-on-create in an eager scope: what running a RestoreVariables op
// does (small values read in batches), without building one. Per variable,
// an op would cost a node, its list attributes, a kernel and a lookup of the
// variable by name; here `handles[i]`, an executed eager VarHandleOp,
// already points at its variable. Reads `reader`'s key `keys[i]` or its part
// `slices[i]` (if not empty) into it. The entry found at `positions[i]`
// must have been checked to fit the variable (dtype, shape) by the caller,
// as a restore does when it matches; a key found elsewhere (-1: search) and
// a part get RestoreVariables' checks and errors.
Status RestoreVariablesNow(const BundleReader& reader, const std::vector<Output>& handles,
                           const std::vector<std::string>& keys,
                           const std::vector<int64_t>& positions,
                           const std::vector<std::string>& slices);

}  // namespace ckflow::internal

#endif  // CKFLOW_OPS_CHECKPOINT_OPS_INTERNAL_H_
