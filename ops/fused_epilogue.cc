#include <cmath>
#include <string>
#include <vector>

#include "ops/fused_epilogue_internal.h"

namespace ckflow::internal {

StatusOr<EpilogueSpec> ParseEpilogueSpec(const AttrMap& attrs, bool batch_norm_allowed) {
  EpilogueSpec spec;
  const auto ops = attrs.GetOr<std::vector<std::string>>("fused_ops", {});
  size_t i = 0;
  bool valid = i < ops.size() && ops[i++] == "BiasAdd";
  if (valid && i < ops.size() && ops[i] == "FusedBatchNorm" && batch_norm_allowed) {
    spec.batch_norm = true;
    ++i;
  }
  if (valid && i < ops.size() && (ops[i] == "Relu" || ops[i] == "Relu6")) {
    spec.activation = ops[i] == "Relu" ? Activation::kRelu : Activation::kRelu6;
    ++i;
  }
  if (!valid || i != ops.size()) {
    std::string list;
    for (const std::string& op : ops) list += (list.empty() ? "" : ", ") + op;
    return InvalidArgumentError("attribute fused_ops is [", list, "], but must be BiasAdd, ",
                                batch_norm_allowed ? "then optionally FusedBatchNorm, " : "",
                                "then optionally Relu or Relu6");
  }
  spec.epsilon = attrs.GetOr<float>("epsilon", 1e-3f);
  if (!std::isfinite(spec.epsilon) || spec.epsilon < 0) {
    return InvalidArgumentError("attribute epsilon is ", spec.epsilon,
                                ", but must be finite and >= 0");
  }
  spec.nodes = attrs.GetOr<std::vector<std::string>>("fused_nodes", {});
  if (spec.nodes.size() != ops.size() + 1) {
    return InvalidArgumentError("attribute fused_nodes has ", spec.nodes.size(),
                                " names, but must name the product and each of the ", ops.size(),
                                " fused ops");
  }
  return spec;
}

}  // namespace ckflow::internal
