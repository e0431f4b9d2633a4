// The Keras image layers executed eagerly: a small CNN (Conv2D,
// BatchNormalization, ReLU, MaxPooling2D, DepthwiseConv2D,
// GlobalAveragePooling2D, Flatten, Dropout, Dense) trained by Adam in an
// eager scope ends where the same program through a Session ends, moving
// statistics included, and its inference calls agree.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>
#include <vector>

#include "ops/array_ops.h"
#include "ops/conv_layers.h"
#include "ops/core_layers.h"
#include "ops/initializers.h"
#include "ops/layers.h"
#include "ops/losses.h"
#include "ops/normalization_layers.h"
#include "ops/optimizers.h"
#include "ops/pooling_layers.h"
#include "runtime/session.h"
#include "tests/ops/layer_test_util.h"
#include "tests/ops/op_test_util.h"

namespace ckflow {
namespace {

using ::ckflow::testing::FilledTensor;

std::shared_ptr<Sequential> SmallCnn() {
  auto init = [](int64_t seed) { return initializers::RandomUniform(-0.5, 0.5, seed); };
  return Sequential::Make({
      Conv2D::Make(4, 3, {.kernel_initializer = init(1)}),
      BatchNormalization::Make({.momentum = 0.9}),
      ReLU::Make(),
      MaxPooling2D::Make(),
      DepthwiseConv2D::Make(
          2, {.padding = "same", .depth_multiplier = 2, .depthwise_initializer = init(2)}),
      BatchNormalization::Make(),
      GlobalAveragePooling2D::Make({.keepdims = true}),
      Flatten::Make(),
      Dropout::Make(0.0),
      Dense::Make(3, {.kernel_initializer = init(3)}),
  });
}

std::vector<std::pair<Tensor, Tensor>> Batches(int n) {
  std::vector<std::pair<Tensor, Tensor>> out;
  for (int i = 0; i < n; ++i) {
    Tensor labels(DT_INT32, TensorShape({6}));
    for (int k = 0; k < 6; ++k) labels.flat<int32_t>()[k] = (k + i) % 3;
    out.emplace_back(FilledTensor({6, 9, 9, 2}, 60 + i), labels);
  }
  return out;
}

TEST(KerasLayersEagerTest, ACnnTrainsEagerlyAsThroughASession) {
  const auto batches = Batches(5);

  Scope graph = Scope::NewRootScope();
  graph.graph().set_seed(4);
  auto graph_model = SmallCnn();
  auto graph_adam = Adam::Make({.learning_rate = 0.01f});
  Output x = ops::Placeholder(graph, DT_FLOAT, {.shape = {-1, 9, 9, 2}});
  Output y = ops::Placeholder(graph, DT_INT32, {.shape = {-1}});
  Output loss =
      losses::SparseSoftmaxCrossEntropyWithLogits(graph, y, (*graph_model)(graph, x, true));
  Output train = graph_adam->Minimize(graph, loss);
  Output inference = (*graph_model)(graph, x, false);
  ASSERT_TRUE(graph.ok()) << graph.status();
  auto session = *Session::Create(graph.graph());
  ASSERT_TRUE(session->Run({}, {}, {GlobalVariablesInitializer(graph)}).ok());
  for (const auto& [bx, by] : batches) {
    ASSERT_TRUE(session->Run({{x, bx}, {y, by}}, {}, {train}).ok());
  }

  Scope eager = Scope::NewEagerScope();
  eager.graph().set_seed(4);
  auto eager_model = SmallCnn();
  auto eager_adam = Adam::Make({.learning_rate = 0.01f});
  for (const auto& [bx, by] : batches) {
    eager_adam->Minimize(eager, [&] {
      return losses::SparseSoftmaxCrossEntropyWithLogits(
          eager, ops::Const(eager, by), (*eager_model)(eager, ops::Const(eager, bx), true));
    });
  }
  ASSERT_TRUE(eager.ok()) << eager.status();

  const auto graph_vars = graph_model->variables();
  const auto eager_vars = eager_model->variables();
  // Conv2D's, DepthwiseConv2D's and Dense's kernel and bias; each BatchNormalization's four.
  ASSERT_EQ(graph_vars.size(), 14u);
  testing::ExpectSameVariables(
      graph_vars, [&](const Variable& v) { return (*session->Run({}, {v.value()}))[0]; },
      eager_vars, 1e-5f, 1e-2f);

  // The inference path reads the moving statistics in both.
  Tensor g = (*session->Run({{x, batches[0].first}}, {inference}))[0];
  Tensor e = (*eager_model)(eager, ops::Const(eager, batches[0].first), false).value();
  ASSERT_EQ(g.shape(), e.shape());
  for (int64_t k = 0; k < g.NumElements(); ++k) {
    EXPECT_NEAR(g.flat<float>()[k], e.flat<float>()[k], 1e-4f) << k;
  }
}

}  // namespace
}  // namespace ckflow
