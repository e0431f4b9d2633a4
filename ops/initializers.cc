#include "ops/initializers.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "ops/ops_internal.h"
#include "ops/random_ops.h"

namespace ckflow::initializers {
namespace {

Tensor ShapeTensor(const TensorShape& shape) {
  return Tensor::FromVector<int64_t>(shape.dim_sizes(), TensorShape({shape.rank()}));
}

// A scalar of `dtype`, or an invalid Output with the error sticky.
Output ScalarConst(const Scope& scope, DataType dtype, double value) {
  StatusOr<Tensor> t = internal::ScalarOfType(dtype, value);
  if (!t.ok()) {
    scope.UpdateStatus(t.status());
    return Output();
  }
  return ops::Const(scope, *t);
}

// x * scale + offset, skipping the identities.
Output Affine(const Scope& scope, Output x, DataType dtype, double scale, double offset) {
  if (scale != 1.0) x = ops::Mul(scope, x, ScalarConst(scope, dtype, scale));
  if (offset != 0.0) x = ops::Add(scope, x, ScalarConst(scope, dtype, offset));
  return x;
}

Initializer Uniform(double minval, double maxval, std::optional<int64_t> seed) {
  return [=](const Scope& scope, DataType dtype, const TensorShape& shape) {
    Output u = ops::RandomUniform(scope, ShapeTensor(shape), dtype, {.seed = seed});
    return Affine(scope, u, dtype, maxval - minval, minval);
  };
}

}  // namespace

Initializer Constant(double value) {
  return [value](const Scope& scope, DataType dtype, const TensorShape& shape) {
    return ops::Fill(scope, ShapeTensor(shape), ScalarConst(scope, dtype, value));
  };
}

Initializer Zeros() { return Constant(0.0); }
Initializer Ones() { return Constant(1.0); }

Initializer RandomUniform(double minval, double maxval, std::optional<int64_t> seed) {
  return Uniform(minval, maxval, seed);
}

Initializer RandomNormal(double mean, double stddev, std::optional<int64_t> seed) {
  return [=](const Scope& scope, DataType dtype, const TensorShape& shape) {
    Output n = ops::RandomNormal(scope, ShapeTensor(shape), dtype, {.seed = seed});
    return Affine(scope, n, dtype, stddev, mean);
  };
}

Initializer TruncatedNormal(double mean, double stddev, std::optional<int64_t> seed) {
  return [=](const Scope& scope, DataType dtype, const TensorShape& shape) {
    Output n = ops::TruncatedNormal(scope, ShapeTensor(shape), dtype, {.seed = seed});
    return Affine(scope, n, dtype, stddev, mean);
  };
}

Initializer GlorotUniform(std::optional<int64_t> seed) {
  return [seed](const Scope& scope, DataType dtype, const TensorShape& shape) {
    // Keras' _compute_fans.
    double fan_in = 1, fan_out = 1;
    if (shape.rank() == 1) {
      fan_in = fan_out = static_cast<double>(shape.dim(0));
    } else if (shape.rank() >= 2) {
      double receptive_field = 1;
      for (int i = 0; i < shape.rank() - 2; ++i)
        receptive_field *= static_cast<double>(shape.dim(i));
      fan_in = static_cast<double>(shape.dim(shape.rank() - 2)) * receptive_field;
      fan_out = static_cast<double>(shape.dim(shape.rank() - 1)) * receptive_field;
    }
    const double limit = std::sqrt(6.0 / std::max(1.0, fan_in + fan_out));
    return Uniform(-limit, limit, seed)(scope, dtype, shape);
  };
}

}  // namespace ckflow::initializers
