// The reverse-accumulation pass behind AddGradients and GradientTape.
// Internal to ops/.

#ifndef CKFLOW_OPS_GRADIENTS_INTERNAL_H_
#define CKFLOW_OPS_GRADIENTS_INTERNAL_H_

#include <vector>

#include "base/status.h"
#include "graph/graph.h"
#include "ops/gradients.h"

namespace ckflow::internal {

// AddGradients (same checks, rules and errors) over `order`: the nodes that
// may lie on a path from xs to ys, each after its inputs (a graph's ids
// from the first x on, or the ops a tape recorded). The gradient ops are
// built through `scope`, so an eager scope runs them.
StatusOr<std::vector<Output>> GradientsAlong(const Scope& scope, const std::vector<Output>& ys,
                                             const std::vector<Output>& xs,
                                             const std::vector<const Node*>& order,
                                             const std::vector<Output>& grad_ys = {},
                                             const GradientRegistry* registry = nullptr);

}  // namespace ckflow::internal

#endif  // CKFLOW_OPS_GRADIENTS_INTERNAL_H_
