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
#include <string>
#include <vector>

#include "ops/array_ops.h"
#include "ops/initializers.h"
#include "runtime/session.h"
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

// Per channel of an NHWC tensor: the mean and the biased variance.
struct Moments {
  std::vector<double> mean, variance;
  int64_t count = 0;
};
Moments ChannelMoments(const Tensor& x) {
  const int64_t c = x.shape().dim(3), n = x.NumElements() / c;
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
  const int64_t c = x.shape().dim(3);
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

TEST(BatchNormalizationTest, BadInputsAreStickyErrorsNamingTheLayer) {
  const struct {
    std::string name;
    BatchNormalizationOptions options;
    PartialShape input;
    std::string message;
  } cases[] = {
      {"rank2",
       {},
       PartialShape({-1, 10}),
       "layer 'batch_normalization': expects an input [batch, rows, cols, channels]"},
      {"channels", {}, PartialShape({-1, 4, 4, -1}), "with known channels"},
      {"axis",
       {.axis = 1},
       PartialShape({-1, 4, 4, 3}),
       "layer 'batch_normalization': axis must be -1 or 3 (the channels of NHWC), got 1"},
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
