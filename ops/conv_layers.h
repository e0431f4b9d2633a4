// Keras' convolution layers: Conv2D and DepthwiseConv2D on NHWC images
// (tf_keras' layers/convolutional/), with Keras' argument names, variable
// names and defaults.
//
//   auto conv = Conv2D::Make(32, 3, {.padding = "same", .activation = ops::Relu});
//   Output y = (*conv)(scope, images);  // images [batch, rows, cols, channels]
//
// Each builds on its first call, from the input's channel count, the
// variables Keras creates under the same names (conv2d/kernel,
// conv2d/bias), and computes what Keras' call computes in graph mode: the
// convolution op (ops/conv_ops.h), then BiasAdd, then the activation.
// Strides and dilation rates are (rows, columns); padding is "valid" or
// "same" (any case, as Keras). Errors of a call (InvalidArgument, sticky in
// the scope, prefixed with the layer's name, see ops/layers.h): an input
// that is not [batch, rows, cols, channels] with known channels, a dtype
// other than float32 or float64, a non-positive size, stride or dilation,
// strides and dilation both above 1 (as Keras refuses), an unknown padding,
// and any error of the op (a window larger than a "valid" input).
//
// Thread safety: building is single-threaded (see ops/layers.h).

#ifndef CKFLOW_OPS_CONV_LAYERS_H_
#define CKFLOW_OPS_CONV_LAYERS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "ops/layers.h"

namespace ckflow {

struct Conv2DOptions {
  Size2D strides = 1;
  std::string padding = "valid";
  Size2D dilation_rate = 1;
  Activation activation;  // none if empty
  bool use_bias = true;
  Initializer kernel_initializer;  // GlorotUniform() if empty
  Initializer bias_initializer;    // Zeros() if empty
  std::string name = "conv2d";
};

// output = activation(conv2d(input, kernel) + bias): kernel is [rows, cols,
// in_channels, filters], bias [filters]; the output is [batch, out_rows,
// out_cols, filters], the sizes TensorFlow's for the padding.
class Conv2D : public Layer {
 public:
  static std::shared_ptr<Conv2D> Make(int64_t filters, Size2D kernel_size,
                                      Conv2DOptions options = {});

  int64_t filters() const { return filters_; }
  // Null before the first call (and bias without use_bias).
  const std::shared_ptr<Variable>& kernel() const { return kernel_; }
  const std::shared_ptr<Variable>& bias() const { return bias_; }

 protected:
  Status Build(const Scope& scope, const Output& input) override;
  Output Call(const Scope& scope, Output input) override;

 private:
  Conv2D(int64_t filters, Size2D kernel_size, Conv2DOptions options);

  const int64_t filters_;
  const Size2D kernel_size_;
  const Conv2DOptions options_;
  std::string padding_;  // "VALID" or "SAME", set by Build
  std::shared_ptr<Variable> kernel_;
  std::shared_ptr<Variable> bias_;
};

struct DepthwiseConv2DOptions {
  Size2D strides = 1;
  std::string padding = "valid";
  int64_t depth_multiplier = 1;
  Size2D dilation_rate = 1;
  Activation activation;  // none if empty
  bool use_bias = true;
  Initializer depthwise_initializer;  // GlorotUniform() if empty
  Initializer bias_initializer;       // Zeros() if empty
  std::string name = "depthwise_conv2d";
};

// Each input channel convolved with its own depth_multiplier filters:
// depthwise_kernel is [rows, cols, in_channels, depth_multiplier], bias
// [in_channels * depth_multiplier]; output channel c * depth_multiplier + m
// comes from input channel c (DepthwiseConv2dNative's order).
class DepthwiseConv2D : public Layer {
 public:
  static std::shared_ptr<DepthwiseConv2D> Make(Size2D kernel_size,
                                               DepthwiseConv2DOptions options = {});

  // Null before the first call (and bias without use_bias).
  const std::shared_ptr<Variable>& depthwise_kernel() const { return depthwise_kernel_; }
  const std::shared_ptr<Variable>& bias() const { return bias_; }

 protected:
  Status Build(const Scope& scope, const Output& input) override;
  Output Call(const Scope& scope, Output input) override;

 private:
  DepthwiseConv2D(Size2D kernel_size, DepthwiseConv2DOptions options);

  const Size2D kernel_size_;
  const DepthwiseConv2DOptions options_;
  std::string padding_;  // "VALID" or "SAME", set by Build
  std::shared_ptr<Variable> depthwise_kernel_;
  std::shared_ptr<Variable> bias_;
};

}  // namespace ckflow

#endif  // CKFLOW_OPS_CONV_LAYERS_H_
