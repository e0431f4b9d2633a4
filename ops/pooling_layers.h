// Keras' pooling layers on NHWC images (tf_keras' layers/pooling/):
// MaxPooling2D, AveragePooling2D and GlobalAveragePooling2D, with Keras'
// argument names and defaults. They have no variables.
//
//   Output y = (*MaxPooling2D::Make())(scope, x);  // [b, 26, 26, c] -> [b, 13, 13, c]
//
// MaxPooling2D and AveragePooling2D call MaxPool and AvgPool (ops/
// pooling_ops.h) with the window pool_size, strides (pool_size when not
// given, as Keras) and padding "valid" or "same" (any case); a "same"
// average divides by the elements inside the input, as TensorFlow's.
// GlobalAveragePooling2D is the mean over rows and columns: [batch,
// channels], or [batch, 1, 1, channels] with keepdims. Errors of a call
// (InvalidArgument, sticky, prefixed with the layer's name): an input not of
// rank 4, a dtype other than float32 or float64, a non-positive pool size or
// stride, an unknown padding, a window larger than a "valid" input.
//
// Thread safety: building is single-threaded (see ops/layers.h).

#ifndef CKFLOW_OPS_POOLING_LAYERS_H_
#define CKFLOW_OPS_POOLING_LAYERS_H_

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "ops/layers.h"
#include "ops/pooling_ops.h"

namespace ckflow {

struct Pooling2DOptions {
  Size2D pool_size = 2;
  std::optional<Size2D> strides;  // pool_size if not given
  std::string padding = "valid";
  std::string name;  // "max_pooling2d" or "average_pooling2d" if empty
};

// What MaxPooling2D and AveragePooling2D share (Keras' Pooling2D): the
// arguments, checked by the first call.
class Pooling2D : public Layer {
 protected:
  Pooling2D(std::string type_name, const char* default_name, Pooling2DOptions options);
  Status Build(const Scope& scope, const Output& input) override;
  // The op's attributes. REQUIRES: built.
  const ops::PoolAttrs& attrs() const { return attrs_; }

 private:
  const Pooling2DOptions options_;
  ops::PoolAttrs attrs_;  // set by Build
};

// The window's largest element.
class MaxPooling2D : public Pooling2D {
 public:
  static std::shared_ptr<MaxPooling2D> Make(Pooling2DOptions options = {});

 protected:
  Output Call(const Scope& scope, Output input) override;

 private:
  explicit MaxPooling2D(Pooling2DOptions options)
      : Pooling2D("MaxPooling2D", "max_pooling2d", std::move(options)) {}
};

// The mean of the window's elements inside the input.
class AveragePooling2D : public Pooling2D {
 public:
  static std::shared_ptr<AveragePooling2D> Make(Pooling2DOptions options = {});

 protected:
  Output Call(const Scope& scope, Output input) override;

 private:
  explicit AveragePooling2D(Pooling2DOptions options)
      : Pooling2D("AveragePooling2D", "average_pooling2d", std::move(options)) {}
};

struct GlobalAveragePooling2DOptions {
  bool keepdims = false;
  std::string name = "global_average_pooling2d";
};

// The mean over each image's rows and columns.
class GlobalAveragePooling2D : public Layer {
 public:
  static std::shared_ptr<GlobalAveragePooling2D> Make(GlobalAveragePooling2DOptions options = {});

 protected:
  Status Build(const Scope& scope, const Output& input) override;
  Output Call(const Scope& scope, Output input) override;

 private:
  explicit GlobalAveragePooling2D(GlobalAveragePooling2DOptions options);

  const GlobalAveragePooling2DOptions options_;
};

}  // namespace ckflow

#endif  // CKFLOW_OPS_POOLING_LAYERS_H_
