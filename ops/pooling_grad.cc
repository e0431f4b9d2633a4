// The gradients of the pooling ops (pooling_ops.cc): their gradient ops,
// with the forward op's attributes.

#include <string>
#include <vector>

#include "ops/grad_internal.h"
#include "ops/pooling_ops.h"

namespace ckflow::internal {
namespace {

ops::PoolAttrs PoolAttrsOf(const Node& op) {
  const AttrMap& a = op.attrs();
  ops::PoolAttrs attrs;
  attrs.ksize = a.GetOr<std::vector<int64_t>>("ksize", attrs.ksize);
  attrs.strides = a.GetOr<std::vector<int64_t>>("strides", attrs.strides);
  attrs.padding = a.GetOr<std::string>("padding", attrs.padding);
  attrs.data_format = a.GetOr<std::string>("data_format", attrs.data_format);
  return attrs;
}

Status MaxPoolGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                   std::vector<Output>* dx) {
  (*dx)[0] = ops::MaxPoolGrad(scope, op.input(0), OutputOf(op), dz[0], PoolAttrsOf(op));
  return OkStatus();
}

Status AvgPoolGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                   std::vector<Output>* dx) {
  (*dx)[0] = ops::AvgPoolGrad(scope, ShapeOf(scope, op.input(0)), dz[0], PoolAttrsOf(op));
  return OkStatus();
}

}  // namespace

Status RegisterPoolingGradients(GradientRegistry& r) {
  CKFLOW_RETURN_IF_ERROR(r.Register("MaxPool", MaxPoolGrad));
  return r.Register("AvgPool", AvgPoolGrad);
}

}  // namespace ckflow::internal
