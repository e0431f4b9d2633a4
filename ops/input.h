// ops::Input: what an op builder accepts for a data input, as in
// TensorFlow's C++ API. Either an Output, or a value (a Tensor, a scalar, a
// braced list) that the builder turns into a Const node in its own scope:
//
//   ops::Mul(scope, x, 2.0f);              // 2.0f becomes a float32 Const
//   ops::Reshape(scope, x, {-1, 784});     // an int32 [2] Const
//   ops::Sum(scope, x, {0});               // axes
//
// A literal's dtype is its C++ type's (2.0 is float64, 2 is int32), so
// ops::Add(scope, float_x, 1) fails to build with a dtype mismatch, exactly
// as in TensorFlow's C++ API.
//
// Thread safety: a value type.

#ifndef CKFLOW_OPS_INPUT_H_
#define CKFLOW_OPS_INPUT_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/tensor.h"
#include "base/types.h"
#include "graph/graph.h"

namespace ckflow::ops {

// The C++ types a literal input or Const may have.
template <typename T>
concept ConstElement = std::is_same_v<T, float> || std::is_same_v<T, double> ||
    std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t> || std::is_same_v<T, int8_t> ||
    std::is_same_v<T, int16_t> || std::is_same_v<T, uint8_t> || std::is_same_v<T, uint16_t> ||
    std::is_same_v<T, uint32_t> || std::is_same_v<T, uint64_t> || std::is_same_v<T, bool> ||
    std::is_same_v<T, bfloat16> || std::is_same_v<T, float16>;

class Input {
 public:
  Input(Output output) : output_(output) {}          // NOLINT: implicit by design
  Input(Tensor value) : value_(std::move(value)) {}  // NOLINT
  template <ConstElement T>
  Input(T scalar) : value_(Tensor::Scalar(scalar)) {}  // NOLINT
  template <ConstElement T>
  Input(std::initializer_list<T> values)  // NOLINT: a vector Const
      : value_(Tensor::FromVector(std::vector<T>(values))) {}

  // The Output, or a new Const holding the value, built through `scope`
  // (but never under the scope's WithOpName name, which is the op's).
  Output ToOutput(const Scope& scope) const;

 private:
  Output output_;
  Tensor value_;
};

}  // namespace ckflow::ops

#endif  // CKFLOW_OPS_INPUT_H_
