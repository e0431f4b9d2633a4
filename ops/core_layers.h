// Keras' layers without weights that shape or gate what flows between the
// others (tf_keras' layers/activation/, reshaping/, regularization/): ReLU,
// Flatten and Dropout, with Keras' names and defaults.
//
//   auto model = Sequential::Make({Conv2D::Make(8, 3), ReLU::Make(), Flatten::Make(),
//                                  Dropout::Make(0.25), Dense::Make(10)});
//
// Dropout is the one whose computation depends on the training flag
// (ops/layers.h): a training call drops, an inference call passes its
// input through.
//
// Thread safety: building is single-threaded (see ops/layers.h).

#ifndef CKFLOW_OPS_CORE_LAYERS_H_
#define CKFLOW_OPS_CORE_LAYERS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ops/layers.h"

namespace ckflow {

// max(input, 0) (keras.layers.ReLU with its defaults): the Relu op.
class ReLU : public Layer {
 public:
  static std::shared_ptr<ReLU> Make(std::string name = "re_lu");

 protected:
  Output Call(const Scope& scope, Output input) override;

 private:
  explicit ReLU(std::string name) : Layer("ReLU", std::move(name)) {}
};

// [batch, d1, d2, ...] reshaped to [batch, d1 * d2 * ...] (a rank-1 input to
// [batch, 1]), as Keras' Flatten: a Reshape to [-1, d1 * d2 * ...] when those
// are known, else to [batch, -1] when the batch is. InvalidArgument for a
// scalar input or one where neither is known.
class Flatten : public Layer {
 public:
  static std::shared_ptr<Flatten> Make(std::string name = "flatten");

 protected:
  Status Build(const Scope& scope, const Output& input) override;
  Output Call(const Scope& scope, Output input) override;

 private:
  explicit Flatten(std::string name) : Layer("Flatten", std::move(name)) {}
};

struct DropoutOptions {
  // The op seed of the random draw (with the graph's seed, as random_ops.h
  // describes): the same seeds give the same masks in every session.
  std::optional<int64_t> seed;
  // The mask's shape, broadcast against the input (Keras' noise_shape); -1
  // takes the input's dimension. Default: the input's shape.
  std::optional<std::vector<int64_t>> noise_shape;
  std::string name = "dropout";
};

// A training call keeps each element with probability 1 - rate, scaled by
// 1 / (1 - rate), and zeroes the others, drawing a new mask every run
// (ops::Dropout, TensorFlow's tf.nn.dropout); an inference call returns its
// input. InvalidArgument for a rate outside [0, 1) or an input other than
// float32 or float64.
class Dropout : public Layer {
 public:
  static std::shared_ptr<Dropout> Make(double rate, DropoutOptions options = {});

  double rate() const { return rate_; }

 protected:
  Status Build(const Scope& scope, const Output& input) override;
  Output Call(const Scope& scope, Output input) override;

 private:
  Dropout(double rate, DropoutOptions options);

  const double rate_;
  const DropoutOptions options_;
};

}  // namespace ckflow

#endif  // CKFLOW_OPS_CORE_LAYERS_H_
