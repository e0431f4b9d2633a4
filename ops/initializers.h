// Variable initializers, as Keras names them: each returns an Initializer
// (ops/variables.h) that builds the initial value of a variable of a given
// dtype and shape.
//
//   auto w = Variable::Create(scope, "w", DT_FLOAT, {784, 256},
//                             initializers::GlorotUniform());
//
// Random initializers take an optional op seed. With a seed, or with a
// graph-level seed (Graph::set_seed), the values are the same on every run
// and for every thread count; with neither they differ per graph, as in
// TensorFlow.
//
// Thread safety: Initializers are values; calling one builds ops, which is
// single-threaded like all graph building.

#ifndef CKFLOW_OPS_INITIALIZERS_H_
#define CKFLOW_OPS_INITIALIZERS_H_

#include <cstdint>
#include <optional>

#include "ops/variables.h"

namespace ckflow::initializers {

Initializer Zeros();
Initializer Ones();
// Every element `value`, converted to the variable's dtype.
Initializer Constant(double value);

// Uniform in [minval, maxval).
Initializer RandomUniform(double minval = -0.05, double maxval = 0.05,
                          std::optional<int64_t> seed = std::nullopt);
// Normal with `mean` and `stddev`.
Initializer RandomNormal(double mean = 0.0, double stddev = 0.05,
                         std::optional<int64_t> seed = std::nullopt);
// Normal with `mean` and `stddev`, redrawn beyond two standard deviations.
Initializer TruncatedNormal(double mean = 0.0, double stddev = 0.05,
                            std::optional<int64_t> seed = std::nullopt);
// Keras' default kernel initializer: uniform in [-limit, limit) with
// limit = sqrt(6 / (fan_in + fan_out)), the fans computed from the shape as
// Keras does (a [in, out] matrix: fan_in = in, fan_out = out).
Initializer GlorotUniform(std::optional<int64_t> seed = std::nullopt);

}  // namespace ckflow::initializers

#endif  // CKFLOW_OPS_INITIALIZERS_H_
