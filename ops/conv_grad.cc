// The gradients of the convolutions (conv_ops.cc): each is its two backprop
// ops, with the forward op's attributes.

#include <string>
#include <vector>

#include "ops/conv_ops.h"
#include "ops/grad_internal.h"

namespace ckflow::internal {
namespace {

ops::Conv2DAttrs ConvAttrsOf(const Node& op) {
  const AttrMap& a = op.attrs();
  ops::Conv2DAttrs attrs;
  attrs.strides = a.GetOr<std::vector<int64_t>>("strides", attrs.strides);
  attrs.padding = a.GetOr<std::string>("padding", attrs.padding);
  attrs.explicit_paddings = a.GetOr<std::vector<int64_t>>("explicit_paddings", {});
  attrs.dilations = a.GetOr<std::vector<int64_t>>("dilations", attrs.dilations);
  attrs.data_format = a.GetOr<std::string>("data_format", attrs.data_format);
  return attrs;
}

Status Conv2DGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                  std::vector<Output>* dx) {
  const ops::Conv2DAttrs attrs = ConvAttrsOf(op);
  (*dx)[0] =
      ops::Conv2DBackpropInput(scope, ShapeOf(scope, op.input(0)), op.input(1), dz[0], attrs);
  (*dx)[1] =
      ops::Conv2DBackpropFilter(scope, op.input(0), ShapeOf(scope, op.input(1)), dz[0], attrs);
  return OkStatus();
}

Status DepthwiseConv2dNativeGrad(const Scope& scope, const Node& op, const std::vector<Output>& dz,
                                 std::vector<Output>* dx) {
  const ops::Conv2DAttrs attrs = ConvAttrsOf(op);
  (*dx)[0] = ops::DepthwiseConv2dNativeBackpropInput(scope, ShapeOf(scope, op.input(0)),
                                                     op.input(1), dz[0], attrs);
  (*dx)[1] = ops::DepthwiseConv2dNativeBackpropFilter(scope, op.input(0),
                                                      ShapeOf(scope, op.input(1)), dz[0], attrs);
  return OkStatus();
}

}  // namespace

Status RegisterConvGradients(GradientRegistry& r) {
  CKFLOW_RETURN_IF_ERROR(r.Register("Conv2D", Conv2DGrad));
  return r.Register("DepthwiseConv2dNative", DepthwiseConv2dNativeGrad);
}

}  // namespace ckflow::internal
