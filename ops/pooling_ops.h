// Pooling op builders: TensorFlow's MaxPool and AvgPool on NHWC tensors, and
// the ops of their gradients.
//
//   // x [batch, 26, 26, 32] -> [batch, 13, 13, 32]
//   Output y = ops::MaxPool(scope, x, {.ksize = {1, 2, 2, 1}, .strides = {1, 2, 2, 1}});
//
// Builders follow array_ops.h: one node through `scope`, its output
// returned, errors sticky in the scope and naming the node, the input or
// attribute and its value. Dtypes: float32 and float64. Attributes and
// output sizes are TensorFlow's (window_internal.h spells out the rules):
// ksize and strides are [1, rows, columns, 1], padding is "SAME" or
// "VALID", data_format is "NHWC". Windows never reach into the padding:
// a SAME max pools the elements inside the input, and a SAME average
// divides by how many of them there are, as TensorFlow's do. The kernels
// give the same bits on any number of threads.
//
// Thread safety: graph building is single-threaded (see graph/graph.h).

#ifndef CKFLOW_OPS_POOLING_OPS_H_
#define CKFLOW_OPS_POOLING_OPS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "ops/input.h"

namespace ckflow::ops {

struct PoolAttrs {
  std::vector<int64_t> ksize = {1, 2, 2, 1};
  std::vector<int64_t> strides = {1, 2, 2, 1};
  std::string padding = "VALID";
  std::string data_format = "NHWC";
};

// The largest element of each window: [batch, out_rows, out_cols, depth].
Output MaxPool(const Scope& scope, Input input, const PoolAttrs& attrs = {});
// MaxPool's gradient with respect to orig_input: each element of grad goes
// to the first maximum of its window in row-major order (TensorFlow's
// choice among ties), found again from orig_input; orig_output is MaxPool's
// output, checked for its shape only.
Output MaxPoolGrad(const Scope& scope, Input orig_input, Input orig_output, Input grad,
                   const PoolAttrs& attrs = {});

// The mean of each window's elements inside the input.
Output AvgPool(const Scope& scope, Input value, const PoolAttrs& attrs = {});
// AvgPool's gradient with respect to its input, whose shape orig_input_shape
// is (an int32/int64 vector of 4): each element of grad spread evenly over
// its window's elements inside the input.
Output AvgPoolGrad(const Scope& scope, Input orig_input_shape, Input grad,
                   const PoolAttrs& attrs = {});

}  // namespace ckflow::ops

#endif  // CKFLOW_OPS_POOLING_OPS_H_
