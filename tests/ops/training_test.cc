// Whole training loops through the Session: a linear regression that must
// converge, and a two-layer MLP that must learn a class boundary no linear
// model can draw, each under several oneTBB parallelism limits.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "ops/array_ops.h"
#include "ops/layers.h"
#include "ops/losses.h"
#include "ops/nn_ops.h"
#include "ops/optimizers.h"
#include "ops/variables.h"
#include "runtime/session.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

// Points uniform in [-1, 1]^features.
Tensor UniformPoints(std::mt19937& rng, int64_t n, int64_t features) {
  std::uniform_real_distribution<float> u(-1, 1);
  Tensor t(DT_FLOAT, TensorShape({n, features}));
  for (float& x : t.flat<float>()) x = u(rng);
  return t;
}

class TrainingTest : public ::testing::TestWithParam<int> {
 protected:
  TrainingTest() : parallelism_(tbb::global_control::max_allowed_parallelism, GetParam()) {}
  tbb::global_control parallelism_;
};

TEST_P(TrainingTest, LinearRegressionConverges) {
  // y = x · [2, -3, 0.5] + 1, noise free.
  std::mt19937 rng(1);
  Tensor x_data = UniformPoints(rng, 256, 3);
  Tensor y_data(DT_FLOAT, TensorShape({256, 1}));
  for (int i = 0; i < 256; ++i) {
    auto x = x_data.flat<float>().subspan(3 * i, 3);
    y_data.flat<float>()[i] = 2 * x[0] - 3 * x[1] + 0.5f * x[2] + 1;
  }

  Scope root = Scope::NewRootScope();
  root.graph().set_seed(3);
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, {.shape = {-1, 3}});
  Output y = ops::Placeholder(root.WithOpName("y"), DT_FLOAT, {.shape = {-1, 1}});
  auto linear = Dense::Make(1);
  Output loss = losses::MeanSquaredError(root, y, (*linear)(root, x));
  Output train = GradientDescent::Make(0.3f)->Minimize(root, loss);
  Output init = GlobalVariablesInitializer(root);
  ASSERT_TRUE(root.ok()) << root.status();

  CKFLOW_ASSERT_OK_AND_ASSIGN(auto session, Session::Create(root.graph()));
  CKFLOW_ASSERT_OK(session->Run({}, {}, {init}).status());
  std::vector<Feed> feeds = {{x, x_data}, {y, y_data}};
  for (int step = 0; step < 300; ++step)
    CKFLOW_ASSERT_OK(session->Run(feeds, {}, {train}).status());
  CKFLOW_ASSERT_OK_AND_ASSIGN(
      std::vector<Tensor> out,
      session->Run(feeds, {loss, linear->kernel()->value(), linear->bias()->value()}));
  EXPECT_LT(out[0].scalar<float>(), 1e-4f);
  EXPECT_NEAR(out[1].flat<float>()[0], 2.0f, 1e-2f);
  EXPECT_NEAR(out[1].flat<float>()[1], -3.0f, 1e-2f);
  EXPECT_NEAR(out[1].flat<float>()[2], 0.5f, 1e-2f);
  EXPECT_NEAR(out[2].flat<float>()[0], 1.0f, 1e-2f);
}

// Class 1 inside the circle of radius 0.7, class 0 outside: no straight line
// separates them, a hidden layer must.
void CircleData(std::mt19937& rng, int64_t n, Tensor* points, Tensor* one_hot,
                std::vector<int>* labels) {
  *points = UniformPoints(rng, n, 2);
  *one_hot = Tensor(DT_FLOAT, TensorShape({n, 2}));
  labels->clear();
  for (int64_t i = 0; i < n; ++i) {
    const float a = points->flat<float>()[2 * i], b = points->flat<float>()[2 * i + 1];
    const int label = a * a + b * b < 0.49f ? 1 : 0;
    labels->push_back(label);
    one_hot->flat<float>()[2 * i] = label == 0 ? 1.0f : 0.0f;
    one_hot->flat<float>()[2 * i + 1] = label == 1 ? 1.0f : 0.0f;
  }
}

double Accuracy(const Tensor& logits, const std::vector<int>& labels) {
  int correct = 0;
  for (size_t i = 0; i < labels.size(); ++i) {
    const int predicted = logits.flat<float>()[2 * i + 1] > logits.flat<float>()[2 * i] ? 1 : 0;
    correct += predicted == labels[i];
  }
  return static_cast<double>(correct) / static_cast<double>(labels.size());
}

TEST_P(TrainingTest, TwoLayerPerceptronClassifiesAboveNinetyFivePercent) {
  std::mt19937 rng(2);
  Tensor train_x, train_y, test_x, test_y;
  std::vector<int> train_labels, test_labels;
  CircleData(rng, 1024, &train_x, &train_y, &train_labels);
  CircleData(rng, 1024, &test_x, &test_y, &test_labels);

  Scope root = Scope::NewRootScope();
  root.graph().set_seed(5);
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, {.shape = {-1, 2}});
  Output y = ops::Placeholder(root.WithOpName("y"), DT_FLOAT, {.shape = {-1, 2}});
  auto mlp = Sequential::Make({Dense::Make(32, {.activation = ops::Relu}), Dense::Make(2)});
  Output logits = (*mlp)(root, x);
  Output loss = losses::SoftmaxCrossEntropyWithLogits(root, y, logits);
  Output train = Adam::Make({.learning_rate = 0.02f})->Minimize(root, loss);
  Output init = GlobalVariablesInitializer(root);
  ASSERT_TRUE(root.ok()) << root.status();

  CKFLOW_ASSERT_OK_AND_ASSIGN(auto session, Session::Create(root.graph()));
  CKFLOW_ASSERT_OK(session->Run({}, {}, {init}).status());
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> before, session->Run({{x, test_x}}, {logits}));
  std::vector<Feed> feeds = {{x, train_x}, {y, train_y}};
  for (int step = 0; step < 400; ++step)
    CKFLOW_ASSERT_OK(session->Run(feeds, {}, {train}).status());
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> after, session->Run({{x, test_x}}, {logits}));
  EXPECT_LT(Accuracy(before[0], test_labels), 0.9);  // not solved by the initial weights
  EXPECT_GT(Accuracy(after[0], test_labels), 0.95);
}

INSTANTIATE_TEST_SUITE_P(Parallelism, TrainingTest, ::testing::Values(1, 2, 4),
                         [](const auto& test) { return "Threads" + std::to_string(test.param); });

}  // namespace
}  // namespace ckflow
