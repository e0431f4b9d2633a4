// BatchNormalization: Keras' variables in Keras' order and trainability,
// training calls normalizing with the batch's statistics and updating the
// moving ones (checked by hand over several steps, with the Bessel-corrected
// variance), inference calls with the moving ones and updating nothing, and
// errors naming the layer.

#include "ops/normalization_layers.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "ops/array_ops.h"
#include "ops/gradients.h"
#include "ops/initializers.h"
#include "runtime/session.h"
#include "tests/ops/gradient_check.h"
#include "tests/ops/layer_test_util.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

using ::ckflow::testing::FilledTensor;
using ::ckflow::testing::MaxAbsDifference;
using ::ckflow::testing::RunLayer;
using ::ckflow::testing::StatusIs;
using ::ckflow::testing::VariableNames;
using ::testing::ElementsAre;

std::vector<std::string> ChildNames(const Trackable& t) {
  std::vector<std::string> names;
  for (const auto& [name, child] : t.Children()) names.push_back(name);
  return names;
}

int64_t LastDim(const Tensor& x) {
  return x.shape().dim(static_cast<int>(x.shape().dims().size()) - 1);
}

// Per channel (the last axis): the mean and the biased variance.
struct Moments {
  std::vector<double> mean, variance;
  int64_t count = 0;
};
Moments ChannelMoments(const Tensor& x) {
  const int64_t c = LastDim(x), n = x.NumElements() / c;
  Moments m{std::vector<double>(c, 0.0), std::vector<double>(c, 0.0), n};
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t k = 0; k < c; ++k) m.mean[k] += x.flat<float>()[i * c + k] / double(n);
  }
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t k = 0; k < c; ++k) {
      const double d = x.flat<float>()[i * c + k] - m.mean[k];
      m.variance[k] += d * d / double(n);
    }
  }
  return m;
}

// (x - mean) * gamma / sqrt(variance + epsilon) + beta, per channel.
std::vector<double> Normalized(const Tensor& x, const std::vector<double>& mean,
                               const std::vector<double>& variance, double gamma, double beta,
                               double epsilon) {
  const int64_t c = LastDim(x);
  std::vector<double> out;
  for (int64_t i = 0; i < x.NumElements(); ++i) {
    const int64_t k = i % c;
    out.push_back((x.flat<float>()[i] - mean[k]) * gamma / std::sqrt(variance[k] + epsilon) + beta);
  }
  return out;
}

std::vector<double> Values(const Tensor& t) {
  return std::vector<double>(t.flat<float>().begin(), t.flat<float>().end());
}

TEST(BatchNormalizationTest, CreatesKerasVariablesInKerasOrder) {
  Scope root = Scope::NewRootScope();
  auto bn = BatchNormalization::Make();
  auto bn2 = BatchNormalization::Make();
  Output x = ops::Placeholder(root, DT_FLOAT, {.shape = {-1, 5, 5, 3}});
  Output y = (*bn2)(root, (*bn)(root, x));
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(y.shape(), PartialShape({-1, 5, 5, 3}));
  EXPECT_THAT(ChildNames(*bn),
              ElementsAre("axis", "gamma", "beta", "moving_mean", "moving_variance"));
  EXPECT_THAT(VariableNames(bn->trainable_variables()),
              ElementsAre("batch_normalization/gamma", "batch_normalization/beta"));
  EXPECT_THAT(
      VariableNames(bn->non_trainable_variables()),
      ElementsAre("batch_normalization/moving_mean", "batch_normalization/moving_variance"));
  EXPECT_THAT(
      VariableNames(bn2->variables()),
      ElementsAre("batch_normalization_1/gamma", "batch_normalization_1/beta",
                  "batch_normalization_1/moving_mean", "batch_normalization_1/moving_variance"));
  EXPECT_EQ(bn->moving_variance()->shape(), PartialShape({3}));
  EXPECT_EQ(bn->LookupChild("axis")->TypeName(), "ListWrapper");
}

TEST(BatchNormalizationTest, WithoutScaleAndCenterHasOnlyTheMovingStatistics) {
  auto bn = BatchNormalization::Make({.center = false, .scale = false});
  const Tensor x = FilledTensor({4, 3, 2, 2}, 41);
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto run, RunLayer(*bn, x, /*training=*/true));
  EXPECT_THAT(ChildNames(*bn), ElementsAre("axis", "moving_mean", "moving_variance"));
  EXPECT_EQ(bn->gamma(), nullptr);
  const Moments m = ChannelMoments(x);
  EXPECT_LT(MaxAbsDifference(run.output, Normalized(x, m.mean, m.variance, 1, 0, 1e-3)), 1e-5);
}

TEST(BatchNormalizationTest, InferenceNormalizesWithTheMovingStatisticsAndUpdatesNothing) {
  auto bn = BatchNormalization::Make({.epsilon = 0.01,
                                      .beta_initializer = initializers::Constant(0.5),
                                      .gamma_initializer = initializers::Constant(2.0),
                                      .moving_mean_initializer = initializers::Constant(0.25),
                                      .moving_variance_initializer = initializers::Constant(4.0)});
  const Tensor x = FilledTensor({3, 4, 4, 2}, 42);
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto run, RunLayer(*bn, x, /*training=*/false));
  EXPECT_LT(MaxAbsDifference(run.output, Normalized(x, {0.25, 0.25}, {4, 4}, 2, 0.5, 0.01)), 1e-5);
  EXPECT_EQ(Values(run.Value(bn->moving_mean())), std::vector<double>({0.25, 0.25}));
  EXPECT_EQ(Values(run.Value(bn->moving_variance())), std::vector<double>({4, 4}));
}

TEST(BatchNormalizationTest, TrainingStepsUpdateTheMovingStatisticsAsKeras) {
  Scope root = Scope::NewRootScope();
  const double momentum = 0.9;
  auto bn = BatchNormalization::Make({.momentum = momentum});
  Output x = ops::Placeholder(root, DT_FLOAT, {.shape = {-1, 3, 3, 2}});
  Output train_y = (*bn)(root, x, true);
  Output infer_y = (*bn)(root, x, false);
  Output init = GlobalVariablesInitializer(root);
  ASSERT_TRUE(root.ok()) << root.status();
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto session, Session::Create(root.graph()));
  CKFLOW_ASSERT_OK(session->Run({}, {}, {init}).status());

  std::vector<double> mean = {0, 0}, variance = {1, 1};
  for (int step = 0; step < 4; ++step) {
    SCOPED_TRACE(step);
    Tensor batch = FilledTensor({2 + step, 3, 3, 2}, 50 + step);
    // Fetching the training output alone runs the updates.
    CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, session->Run({{x, batch}}, {train_y}));
    const Moments m = ChannelMoments(batch);
    EXPECT_LT(MaxAbsDifference(out[0], Normalized(batch, m.mean, m.variance, 1, 0, 1e-3)), 1e-5);
    const double bessel = double(m.count) / double(m.count - 1);
    for (int k = 0; k < 2; ++k) {
      mean[k] -= (mean[k] - m.mean[k]) * (1 - momentum);
      variance[k] -= (variance[k] - m.variance[k] * bessel) * (1 - momentum);
    }
    CKFLOW_ASSERT_OK_AND_ASSIGN(
        std::vector<Tensor> stats,
        session->Run({}, {bn->moving_mean()->value(), bn->moving_variance()->value()}));
    EXPECT_LT(MaxAbsDifference(stats[0], mean), 1e-6);
    EXPECT_LT(MaxAbsDifference(stats[1], variance), 1e-6);
    // The inference output reads them and changes nothing.
    CKFLOW_ASSERT_OK_AND_ASSIGN(out, session->Run({{x, batch}}, {infer_y}));
    EXPECT_LT(MaxAbsDifference(out[0], Normalized(batch, mean, variance, 1, 0, 1e-3)), 1e-5);
    CKFLOW_ASSERT_OK_AND_ASSIGN(stats, session->Run({}, {bn->moving_mean()->value()}));
    EXPECT_LT(MaxAbsDifference(stats[0], mean), 1e-6);
  }
}

TEST(BatchNormalizationTest, ASmallEpsilonIsRaisedAsTensorFlowDoes) {
  auto bn = BatchNormalization::Make({.epsilon = 1e-9});
  const Tensor x = FilledTensor({2, 1, 1, 1}, 43);  // two values: variance (a-b)^2/4
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto run, RunLayer(*bn, x, /*training=*/true));
  const Moments m = ChannelMoments(x);
  EXPECT_LT(MaxAbsDifference(run.output, Normalized(x, m.mean, m.variance, 1, 0, 1.001e-5)), 1e-6);
}

// Keras' non-fused path: the moments over every axis but the last, the
// biased variance in the moving average (no Bessel correction), epsilon as
// given.
TEST(BatchNormalizationTest, FeaturesOfRankTwoAndThreeNormalizeOverAllButTheLastAxis) {
  for (const std::vector<int64_t>& dims : {std::vector<int64_t>{6, 4}, {3, 5, 4}}) {
    SCOPED_TRACE(dims.size());
    const double momentum = 0.9;
    auto bn = BatchNormalization::Make({.momentum = momentum,
                                        .beta_initializer = initializers::Constant(0.5),
                                        .gamma_initializer = initializers::Constant(2.0)});
    const Tensor x = FilledTensor(dims, 44);
    CKFLOW_ASSERT_OK_AND_ASSIGN(auto run, RunLayer(*bn, x, /*training=*/true));
    EXPECT_EQ(bn->moving_mean()->shape(), PartialShape({4}));
    const Moments m = ChannelMoments(x);
    EXPECT_LT(MaxAbsDifference(run.output, Normalized(x, m.mean, m.variance, 2, 0.5, 1e-3)), 1e-5);
    std::vector<double> mean(4), variance(4);
    for (int k = 0; k < 4; ++k) {
      mean[k] = -(0 - m.mean[k]) * (1 - momentum);
      variance[k] = 1 - (1 - m.variance[k]) * (1 - momentum);
    }
    EXPECT_LT(MaxAbsDifference(run.Value(bn->moving_mean()), mean), 1e-6);
    EXPECT_LT(MaxAbsDifference(run.Value(bn->moving_variance()), variance), 1e-6);
  }
}

TEST(BatchNormalizationTest, FeaturesKeepASmallEpsilon) {
  auto bn = BatchNormalization::Make({.epsilon = 1e-9});
  // Two rows 0.002 apart: the variance is 1e-6, where raising epsilon to
  // 1.001e-5 would shrink the output from about 1 to 0.3.
  const Tensor x = Tensor::FromVector<float>({0.f, 0.002f}, TensorShape({2, 1}));
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto run, RunLayer(*bn, x, /*training=*/true));
  EXPECT_LT(MaxAbsDifference(run.output, {-1 / std::sqrt(1 + 1e-3), 1 / std::sqrt(1 + 1e-3)}),
            1e-3);
}

// TensorFlow's fused kernel has no float64, so Keras normalizes float64
// images the non-fused way, and so does the layer: no Bessel correction.
TEST(BatchNormalizationTest, Float64ImagesTakeKerasNonFusedPath) {
  auto bn = BatchNormalization::Make({.momentum = 0.5});
  const Tensor x32 = FilledTensor({2, 2, 2, 3}, 45);
  Tensor x(DT_DOUBLE, x32.shape());
  for (int64_t i = 0; i < x.NumElements(); ++i) x.flat<double>()[i] = x32.flat<float>()[i];
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto run, RunLayer(*bn, x, /*training=*/true));
  const Moments m = ChannelMoments(x32);
  const Tensor variance = run.Value(bn->moving_variance());
  ASSERT_EQ(variance.dtype(), DT_DOUBLE);
  for (int k = 0; k < 3; ++k) {
    EXPECT_NEAR(variance.flat<double>()[k], 1 - (1 - m.variance[k]) * 0.5, 1e-12) << k;
  }
}

// Through the moments and the normalization to x (the moving statistics'
// updates run with every step and take no part).
TEST(BatchNormalizationTest, FeaturesGradientsMatchFiniteDifferences) {
  std::mt19937 rng(46);
  Scope root = Scope::NewRootScope();
  auto bn = BatchNormalization::Make({.gamma_initializer = initializers::Constant(1.5)});
  Output x = ops::Placeholder(root, DT_DOUBLE, {.shape = {5, 3}});
  Output y = (*bn)(root, x, true);
  const Tensor w = testing::RandomDoubles({5, 3}, -1, 1, rng);
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Output> grads,
                              AddGradients(root, {y}, {x}, {ops::Const(root, w)}));
  Output init = GlobalVariablesInitializer(root);
  ASSERT_TRUE(root.ok()) << root.status();
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Session> session, Session::Create(root.graph()));
  CKFLOW_ASSERT_OK(session->Run({}, {}, {init}).status());
  const Tensor x0 = testing::RandomDoubles({5, 3}, -2, 2, rng);
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> analytic, session->Run({{x, x0}}, grads));
  auto weighted = [&](int64_t j, double delta) {
    Tensor moved = x0.Clone();
    moved.flat<double>()[j] += delta;
    StatusOr<std::vector<Tensor>> out = session->Run({{x, moved}}, {y});
    double sum = 0;
    for (int64_t k = 0; out.ok() && k < w.NumElements(); ++k) {
      sum += w.flat<double>()[k] * (*out)[0].flat<double>()[k];
    }
    return sum;
  };
  for (int64_t j = 0; j < x0.NumElements(); ++j) {
    const double numeric = (weighted(j, 1e-6) - weighted(j, -1e-6)) / 2e-6;
    EXPECT_NEAR(analytic[0].flat<double>()[j], numeric, 1e-6 * std::max(1.0, std::abs(numeric)))
        << j;
  }
}

TEST(BatchNormalizationTest, BadInputsAreStickyErrorsNamingTheLayer) {
  const struct {
    std::string name;
    BatchNormalizationOptions options;
    PartialShape input;
    std::string message;
  } cases[] = {
      {"rank1",
       {},
       PartialShape({-1}),
       "layer 'batch_normalization': expects an input of rank 2 or more with known features"},
      {"channels", {}, PartialShape({-1, 4, 4, -1}), "with known features"},
      {"axis",
       {.axis = 1},
       PartialShape({-1, 4, 4, 3}),
       "layer 'batch_normalization': axis must be -1 or 3 (the last, the features or channels), "
       "got 1"},
      {"axis_of_rank2", {.axis = 0}, PartialShape({-1, 3}), "axis must be -1 or 1"},
  };
  for (const auto& c : cases) {
    Scope root = Scope::NewRootScope();
    auto bn = BatchNormalization::Make(c.options);
    Output y = (*bn)(root, ops::Placeholder(root, DT_FLOAT, {.shape = c.input}), true);
    EXPECT_FALSE(y.valid()) << c.name;
    EXPECT_THAT(root.status(), StatusIs(StatusCode::kInvalidArgument, c.message)) << c.name;
    EXPECT_TRUE(ChildNames(*bn).empty()) << c.name;
  }
}

}  // namespace
}  // namespace ckflow
