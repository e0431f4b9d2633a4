// The Fashion-MNIST example's CNN, shared by the example (fashion_mnist.cc),
// the interop suite (which builds the same tf_keras Sequential) and the
// benchmarks:
//
//   Conv2D(32, 3x3) -> BatchNormalization -> ReLU -> MaxPooling2D
//   -> Conv2D(64, 3x3) -> BatchNormalization -> ReLU -> MaxPooling2D
//   -> Flatten -> Dropout -> Dense(128, relu) -> Dense(10)
//
// on [batch, 28, 28, 1] images; the output is [batch, 10] logits. The
// layers are Keras' with Keras' defaults, so the model's SaveWeights file is
// the one tf_keras writes for the same Sequential.

#ifndef CKFLOW_EXAMPLES_FASHION_MNIST_MODEL_H_
#define CKFLOW_EXAMPLES_FASHION_MNIST_MODEL_H_

#include <memory>

#include "ops/conv_layers.h"
#include "ops/core_layers.h"
#include "ops/layers.h"
#include "ops/nn_ops.h"
#include "ops/normalization_layers.h"
#include "ops/pooling_layers.h"

namespace ckflow::examples {

// `dropout` is the Dropout layer's rate (0 keeps the layer but drops
// nothing: the interop suite compares training steps without random masks).
inline std::shared_ptr<Sequential> FashionMnistModel(double dropout = 0.25) {
  return Sequential::Make({
      Conv2D::Make(32, 3),
      BatchNormalization::Make(),
      ReLU::Make(),
      MaxPooling2D::Make(),
      Conv2D::Make(64, 3),
      BatchNormalization::Make(),
      ReLU::Make(),
      MaxPooling2D::Make(),
      Flatten::Make(),
      Dropout::Make(dropout),
      Dense::Make(128, {.activation = ops::Relu}),
      Dense::Make(10),
  });
}

}  // namespace ckflow::examples

#endif  // CKFLOW_EXAMPLES_FASHION_MNIST_MODEL_H_
