// How a restore hands its BundleReader to the restore ops a session runs.

#ifndef CKFLOW_OPS_CHECKPOINT_OPS_INTERNAL_H_
#define CKFLOW_OPS_CHECKPOINT_OPS_INTERNAL_H_

#include <memory>

#include "base/resource.h"
#include "base/status.h"
#include "bundle/bundle_reader.h"

namespace ckflow::internal {

// Makes `reader` the one that the RestoreV2 and RestoreVariables kernels of
// the session owning `resources` read reader->prefix() through, replacing
// any reader handed over before for that prefix. The session keeps the few
// most recent ones; a SaveV2 or MergeV2Checkpoints that writes the prefix in
// that session drops it, so no restore reads a checkpoint it overwrote.
Status HandOverBundleReader(ResourceMgr& resources, std::shared_ptr<const BundleReader> reader);

}  // namespace ckflow::internal

#endif  // CKFLOW_OPS_CHECKPOINT_OPS_INTERNAL_H_
