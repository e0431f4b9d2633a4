#include <cmath>
#include <string>
#include <vector>

#include "ops/fused_epilogue_internal.h"

namespace ckflow::internal {

StatusOr<EpilogueSpec> ParseEpilogueSpec(const AttrMap& attrs, bool convolution) {
  EpilogueSpec spec;
  const auto ops = attrs.GetOr<std::vector<std::string>>("fused_ops", {});
  size_t i = 0;
  bool valid = i < ops.size() && ops[i++] == "BiasAdd";
  if (valid && i < ops.size() && ops[i] == "FusedBatchNorm" && convolution) {
    spec.batch_norm = true;
    ++i;
  }
  if (valid && i < ops.size() && (ops[i] == "Relu" || ops[i] == "Relu6")) {
    spec.activation = ops[i] == "Relu" ? Activation::kRelu : Activation::kRelu6;
    ++i;
  }
  if (valid && i < ops.size() && ops[i] == "MaxPool" && convolution) {
    spec.max_pool = true;
    ++i;
  }
  if (!valid || i != ops.size()) {
    std::string list;
    for (const std::string& op : ops) list += (list.empty() ? "" : ", ") + op;
    return InvalidArgumentError("attribute fused_ops is [", list, "], but must be BiasAdd, ",
                                convolution ? "then optionally FusedBatchNorm, " : "",
                                "then optionally Relu or Relu6",
                                convolution ? ", then optionally MaxPool" : "");
  }
  spec.epsilon = attrs.GetOr<float>("epsilon", 1e-3f);
  if (!std::isfinite(spec.epsilon) || spec.epsilon < 0) {
    return InvalidArgumentError("attribute epsilon is ", spec.epsilon,
                                ", but must be finite and >= 0");
  }
  if (spec.max_pool) {
    AttrMap pool;
    pool.Set("ksize", attrs.GetOr<std::vector<int64_t>>("pool_ksize", {}));
    pool.Set("strides", attrs.GetOr<std::vector<int64_t>>("pool_strides", {}));
    pool.Set("padding", attrs.GetOr<std::string>("pool_padding", ""));
    StatusOr<WindowAttrs> parsed = ParsePoolAttrs(pool);
    if (!parsed.ok()) {
      return InvalidArgumentError("the fused MaxPool's (attributes pool_ksize, pool_strides, ",
                                  "pool_padding) ", parsed.status().message());
    }
    spec.pool = *parsed;
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
