// Convolution op builders: TensorFlow's Conv2D and DepthwiseConv2dNative on
// NHWC tensors, and the ops of their gradients.
//
//   // x [batch, 28, 28, 1], w [3, 3, 1, 32] (rows, columns, in, out)
//   Output y = ops::Conv2D(scope, x, w, {.strides = {1, 2, 2, 1}, .padding = "SAME"});
//
// Builders follow array_ops.h: one node through `scope`, its output
// returned, errors sticky in the scope and naming the node, the input or
// attribute and its value. Dtypes: float32 and float64. Attributes and
// output sizes are TensorFlow's (window_internal.h spells out the rules):
// strides and dilations are [1, rows, columns, 1], padding is "SAME",
// "VALID" or "EXPLICIT" (with explicit_paddings, 8 values: before and after
// each NHWC dimension, zero on batch and depth), data_format is "NHWC".
// The kernels give the same bits on any number of threads.
//
// Thread safety: graph building is single-threaded (see graph/graph.h).

#ifndef CKFLOW_OPS_CONV_OPS_H_
#define CKFLOW_OPS_CONV_OPS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "ops/input.h"

namespace ckflow::ops {

struct Conv2DAttrs {
  std::vector<int64_t> strides = {1, 1, 1, 1};
  std::string padding = "VALID";
  std::vector<int64_t> explicit_paddings = {};
  std::vector<int64_t> dilations = {1, 1, 1, 1};
  std::string data_format = "NHWC";
};

// input [batch, in_rows, in_cols, in_depth] convolved with filter
// [rows, cols, in_depth, out_depth]: [batch, out_rows, out_cols, out_depth]
// (a cross-correlation, as TensorFlow's).
Output Conv2D(const Scope& scope, Input input, Input filter, const Conv2DAttrs& attrs = {});
// The gradient of Conv2D with respect to its input, of shape input_sizes
// (an int32/int64 vector of 4), from the gradient of its output.
Output Conv2DBackpropInput(const Scope& scope, Input input_sizes, Input filter, Input out_backprop,
                           const Conv2DAttrs& attrs = {});
// The gradient with respect to the filter, of shape filter_sizes.
Output Conv2DBackpropFilter(const Scope& scope, Input input, Input filter_sizes, Input out_backprop,
                            const Conv2DAttrs& attrs = {});

// Each input channel convolved with its own channel_multiplier filters:
// input [batch, in_rows, in_cols, in_depth], filter [rows, cols, in_depth,
// channel_multiplier] give [batch, out_rows, out_cols, in_depth *
// channel_multiplier], output channel c * channel_multiplier + m from input
// channel c and filter [:, :, c, m].
Output DepthwiseConv2dNative(const Scope& scope, Input input, Input filter,
                             const Conv2DAttrs& attrs = {});
Output DepthwiseConv2dNativeBackpropInput(const Scope& scope, Input input_sizes, Input filter,
                                          Input out_backprop, const Conv2DAttrs& attrs = {});
Output DepthwiseConv2dNativeBackpropFilter(const Scope& scope, Input input, Input filter_sizes,
                                           Input out_backprop, const Conv2DAttrs& attrs = {});

}  // namespace ckflow::ops

#endif  // CKFLOW_OPS_CONV_OPS_H_
