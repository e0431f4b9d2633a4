#include "ops/pooling_layers.h"

#include <utility>

#include "ops/array_ops.h"
#include "ops/layers_internal.h"
#include "ops/math_ops.h"

namespace ckflow {

Pooling2D::Pooling2D(std::string type_name, const char* default_name, Pooling2DOptions options)
    : Layer(std::move(type_name), options.name.empty() ? default_name : options.name),
      options_(std::move(options)) {}

Status Pooling2D::Build(const Scope&, const Output& input) {
  const Size2D strides = options_.strides.value_or(options_.pool_size);
  CKFLOW_RETURN_IF_ERROR(internal::CheckPositive(options_.pool_size, "pool_size"));
  CKFLOW_RETURN_IF_ERROR(internal::CheckPositive(strides, "strides"));
  CKFLOW_ASSIGN_OR_RETURN(std::string padding, internal::OpPadding(options_.padding));
  CKFLOW_RETURN_IF_ERROR(internal::CheckImageInput(input));
  attrs_ = {.ksize = {1, options_.pool_size.rows, options_.pool_size.cols, 1},
            .strides = {1, strides.rows, strides.cols, 1},
            .padding = padding};
  return OkStatus();
}

std::shared_ptr<MaxPooling2D> MaxPooling2D::Make(Pooling2DOptions options) {
  return std::shared_ptr<MaxPooling2D>(new MaxPooling2D(std::move(options)));
}

Output MaxPooling2D::Call(const Scope& scope, Output input) {
  return ops::MaxPool(scope, input, attrs());
}

std::shared_ptr<AveragePooling2D> AveragePooling2D::Make(Pooling2DOptions options) {
  return std::shared_ptr<AveragePooling2D>(new AveragePooling2D(std::move(options)));
}

Output AveragePooling2D::Call(const Scope& scope, Output input) {
  return ops::AvgPool(scope, input, attrs());
}

GlobalAveragePooling2D::GlobalAveragePooling2D(GlobalAveragePooling2DOptions options)
    : Layer("GlobalAveragePooling2D", options.name), options_(std::move(options)) {}

std::shared_ptr<GlobalAveragePooling2D> GlobalAveragePooling2D::Make(
    GlobalAveragePooling2DOptions options) {
  return std::shared_ptr<GlobalAveragePooling2D>(new GlobalAveragePooling2D(std::move(options)));
}

Status GlobalAveragePooling2D::Build(const Scope&, const Output& input) {
  return internal::CheckImageInput(input);
}

Output GlobalAveragePooling2D::Call(const Scope& scope, Output input) {
  return ops::Mean(scope, input, ops::Const<int32_t>(scope, {1, 2}),
                   {.keep_dims = options_.keepdims});
}

}  // namespace ckflow
