// What the Keras layers share (ops/layers.h, conv_layers.h, pooling_layers.h,
// normalization_layers.h, core_layers.h): the checks of a call's input and
// arguments, each message naming the input or argument and its value.
//
// Thread safety: pure functions.

#ifndef CKFLOW_OPS_LAYERS_INTERNAL_H_
#define CKFLOW_OPS_LAYERS_INTERNAL_H_

#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "graph/graph.h"
#include "ops/layers.h"

namespace ckflow::internal {

// InvalidArgument unless `input` is float32 or float64.
Status CheckFloatInput(const Output& input);
// InvalidArgument unless `input` is [batch, rows, cols, channels] (rank 4)
// with known channels, float32 or float64.
Status CheckImageInput(const Output& input);
// InvalidArgument unless both of `size` are positive: "kernel_size must be
// positive, got (0, 3)".
Status CheckPositive(const Size2D& size, std::string_view what);
// The op's padding attribute ("VALID", "SAME") for Keras' padding ("valid",
// "same", in any case); InvalidArgument otherwise.
StatusOr<std::string> OpPadding(std::string_view padding);
// The shape of a weight from sizes a user gave; InvalidArgument if one is
// negative or their product overflows.
StatusOr<TensorShape> WeightShape(std::initializer_list<int64_t> dims);
// y + bias (if any), then the activation (if any): the tail of Dense's,
// Conv2D's and DepthwiseConv2D's Call.
Output BiasAndActivation(const Scope& scope, Output y, const std::shared_ptr<Variable>& bias,
                         const Activation& activation);
// x's last `contracted` dimensions (known: `in_features` elements) times a
// [in_features, out_features] matrix, as one MatMul over x viewed as
// [-1, in_features]; the result has x's leading dimensions (known or not)
// followed by `out_dims`. What Keras' Dense on rank > 2 and EinsumDense
// compute. `bias`, if any, is [out_features].
Output ContractLastAxes(const Scope& scope, Output x, int contracted, int64_t in_features,
                        Output matrix, Output bias, const std::vector<int64_t>& out_dims);
// `initializer`, or `fallback` where it is empty.
inline Initializer OrDefault(const Initializer& initializer, Initializer fallback) {
  return initializer ? initializer : std::move(fallback);
}

}  // namespace ckflow::internal

#endif  // CKFLOW_OPS_LAYERS_INTERNAL_H_
