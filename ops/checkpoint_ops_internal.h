// How an eager restore reads values without an op. (A graph-mode restore
// hands its BundleReader to the restore ops with each run:
// RunOptions::bundle_reader.)

#ifndef CKFLOW_OPS_CHECKPOINT_OPS_INTERNAL_H_
#define CKFLOW_OPS_CHECKPOINT_OPS_INTERNAL_H_

#include <memory>
#include <string>
#include <vector>

#include "base/cast.h"
#include "base/status.h"
#include "bundle/bundle_reader.h"
#include "graph/graph.h"

namespace ckflow::internal {

// Restore-on-create in an eager scope: what running a RestoreVariables op
// does (small values read in batches), without building one. Per variable,
// an op would cost a node, its list attributes, a kernel and a lookup of the
// variable by name; here `handles[i]`, an executed eager VarHandleOp,
// already points at its variable. Reads `reader`'s key `keys[i]` or its part
// `slices[i]` (if not empty) into it. The entry found at `positions[i]`
// must have been checked to fit the variable (dtype, shape) by the caller,
// as a restore does when it matches; a key found elsewhere (-1: search) and
// a part get RestoreVariables' checks and errors. `cast` as RestoreVariables'.
Status RestoreVariablesNow(const BundleReader& reader, const std::vector<Output>& handles,
                           const std::vector<std::string>& keys,
                           const std::vector<int64_t>& positions,
                           const std::vector<std::string>& slices, CastRule cast);

}  // namespace ckflow::internal

#endif  // CKFLOW_OPS_CHECKPOINT_OPS_INTERNAL_H_
