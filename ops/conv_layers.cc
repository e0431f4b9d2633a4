#include "ops/conv_layers.h"

#include <utility>

#include "ops/conv_ops.h"
#include "ops/initializers.h"
#include "ops/layers_internal.h"

namespace ckflow {
namespace {

// What Conv2D and DepthwiseConv2D check of their arguments (Keras refuses
// the same in its constructors).
Status CheckWindowArguments(const Size2D& kernel_size, const Size2D& strides,
                            const Size2D& dilation_rate) {
  CKFLOW_RETURN_IF_ERROR(internal::CheckPositive(kernel_size, "kernel_size"));
  CKFLOW_RETURN_IF_ERROR(internal::CheckPositive(strides, "strides"));
  CKFLOW_RETURN_IF_ERROR(internal::CheckPositive(dilation_rate, "dilation_rate"));
  if ((strides.rows > 1 || strides.cols > 1) &&
      (dilation_rate.rows > 1 || dilation_rate.cols > 1)) {
    return InvalidArgumentError("strides > 1 are not supported together with dilation_rate > 1");
  }
  return OkStatus();
}

ops::Conv2DAttrs WindowAttrs(const Size2D& strides, const std::string& padding,
                             const Size2D& dilation_rate) {
  return {.strides = {1, strides.rows, strides.cols, 1},
          .padding = padding,
          .dilations = {1, dilation_rate.rows, dilation_rate.cols, 1}};
}

}  // namespace

// --------------------------------------------------------------- Conv2D

Conv2D::Conv2D(int64_t filters, Size2D kernel_size, Conv2DOptions options)
    : Layer("Conv2D", options.name),
      filters_(filters),
      kernel_size_(kernel_size),
      options_(std::move(options)) {}

std::shared_ptr<Conv2D> Conv2D::Make(int64_t filters, Size2D kernel_size, Conv2DOptions options) {
  return std::shared_ptr<Conv2D>(new Conv2D(filters, kernel_size, std::move(options)));
}

Status Conv2D::Build(const Scope& scope, const Output& input) {
  if (filters_ <= 0) return InvalidArgumentError("filters must be positive, got ", filters_);
  CKFLOW_RETURN_IF_ERROR(
      CheckWindowArguments(kernel_size_, options_.strides, options_.dilation_rate));
  CKFLOW_ASSIGN_OR_RETURN(padding_, internal::OpPadding(options_.padding));
  CKFLOW_RETURN_IF_ERROR(internal::CheckImageInput(input));
  const int64_t channels = input.shape().dim(3);
  CKFLOW_ASSIGN_OR_RETURN(
      TensorShape kernel_shape,
      internal::WeightShape({kernel_size_.rows, kernel_size_.cols, channels, filters_}));
  kernel_ =
      AddWeight(scope, "kernel", input.dtype(), kernel_shape,
                internal::OrDefault(options_.kernel_initializer, initializers::GlorotUniform()));
  if (options_.use_bias) {
    bias_ = AddWeight(scope, "bias", input.dtype(), TensorShape({filters_}),
                      internal::OrDefault(options_.bias_initializer, initializers::Zeros()));
  }
  return OkStatus();
}

Output Conv2D::Call(const Scope& scope, Output input) {
  Output y = ops::Conv2D(scope, input, kernel_->Read(scope),
                         WindowAttrs(options_.strides, padding_, options_.dilation_rate));
  return internal::BiasAndActivation(scope, y, bias_, options_.activation);
}

// ------------------------------------------------------ DepthwiseConv2D

DepthwiseConv2D::DepthwiseConv2D(Size2D kernel_size, DepthwiseConv2DOptions options)
    : Layer("DepthwiseConv2D", options.name),
      kernel_size_(kernel_size),
      options_(std::move(options)) {}

std::shared_ptr<DepthwiseConv2D> DepthwiseConv2D::Make(Size2D kernel_size,
                                                       DepthwiseConv2DOptions options) {
  return std::shared_ptr<DepthwiseConv2D>(new DepthwiseConv2D(kernel_size, std::move(options)));
}

Status DepthwiseConv2D::Build(const Scope& scope, const Output& input) {
  if (options_.depth_multiplier <= 0) {
    return InvalidArgumentError("depth_multiplier must be positive, got ",
                                options_.depth_multiplier);
  }
  CKFLOW_RETURN_IF_ERROR(
      CheckWindowArguments(kernel_size_, options_.strides, options_.dilation_rate));
  CKFLOW_ASSIGN_OR_RETURN(padding_, internal::OpPadding(options_.padding));
  CKFLOW_RETURN_IF_ERROR(internal::CheckImageInput(input));
  const int64_t channels = input.shape().dim(3);
  CKFLOW_ASSIGN_OR_RETURN(TensorShape kernel_shape,
                          internal::WeightShape({kernel_size_.rows, kernel_size_.cols, channels,
                                                 options_.depth_multiplier}));
  depthwise_kernel_ =
      AddWeight(scope, "depthwise_kernel", input.dtype(), kernel_shape,
                internal::OrDefault(options_.depthwise_initializer, initializers::GlorotUniform()));
  if (options_.use_bias) {
    // channels * depth_multiplier: no overflow, the kernel's shape holds it.
    bias_ =
        AddWeight(scope, "bias", input.dtype(), TensorShape({channels * options_.depth_multiplier}),
                  internal::OrDefault(options_.bias_initializer, initializers::Zeros()));
  }
  return OkStatus();
}

Output DepthwiseConv2D::Call(const Scope& scope, Output input) {
  Output y =
      ops::DepthwiseConv2dNative(scope, input, depthwise_kernel_->Read(scope),
                                 WindowAttrs(options_.strides, padding_, options_.dilation_rate));
  return internal::BiasAndActivation(scope, y, bias_, options_.activation);
}

}  // namespace ckflow
