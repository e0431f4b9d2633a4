// Losses against naive double-precision references, on ordinary and on
// extreme logits (where the naive formula overflows and ours must not), their
// gradients, and mismatched inputs.
#include "ops/losses.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "ops/array_ops.h"
#include "ops/gradients.h"
#include "runtime/session.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

using ::testing::HasSubstr;

using LossFn = std::function<Output(const Scope&, Output labels, Output predictions)>;
using Reference = std::function<double(const std::vector<double>& labels,
                                       const std::vector<double>& predictions, int rows)>;

double MseReference(const std::vector<double>& z, const std::vector<double>& p, int) {
  double sum = 0;
  for (size_t i = 0; i < z.size(); ++i) sum += (p[i] - z[i]) * (p[i] - z[i]);
  return sum / static_cast<double>(z.size());
}

// log-sum-exp shifted by the row maximum: exact in double for any logits.
double SoftmaxReference(const std::vector<double>& z, const std::vector<double>& x, int rows) {
  const size_t cols = z.size() / rows;
  double total = 0;
  for (int r = 0; r < rows; ++r) {
    double max = x[r * cols];
    for (size_t j = 0; j < cols; ++j) max = std::max(max, x[r * cols + j]);
    double sum = 0;
    for (size_t j = 0; j < cols; ++j) sum += std::exp(x[r * cols + j] - max);
    const double lse = max + std::log(sum);
    for (size_t j = 0; j < cols; ++j) total -= z[r * cols + j] * (x[r * cols + j] - lse);
  }
  return total / rows;
}

// -z log(sigmoid(x)) - (1 - z) log(1 - sigmoid(x)), each log evaluated on
// its stable side.
double SigmoidReference(const std::vector<double>& z, const std::vector<double>& x, int) {
  auto log_sigmoid = [](double v) {
    return v >= 0 ? -std::log1p(std::exp(-v)) : v - std::log1p(std::exp(v));
  };
  double total = 0;
  for (size_t i = 0; i < z.size(); ++i) {
    total -= z[i] * log_sigmoid(x[i]) + (1 - z[i]) * log_sigmoid(-x[i]);
  }
  return total / static_cast<double>(z.size());
}

struct LossCase {
  std::string name;
  LossFn loss;
  Reference reference;
  std::vector<double> labels;
  std::vector<double> predictions;
  int rows;
};

std::vector<LossCase> Cases() {
  return {
      {"MeanSquaredError",
       losses::MeanSquaredError,
       MseReference,
       {1, 2, 3, 4, 5, 6},
       {1.5, 1, 3, 8, -5, 6.25},
       2},
      {"Softmax",
       losses::SoftmaxCrossEntropyWithLogits,
       SoftmaxReference,
       {0, 1, 0, 0.25, 0.25, 0.5},
       {1, 2, 3, -1, 0, 4},
       2},
      {"SoftmaxHugeLogits",
       losses::SoftmaxCrossEntropyWithLogits,
       SoftmaxReference,
       {0, 1, 0, 1, 0, 0},
       {1000, 0, -1000, -500, 500, 0},
       2},
      {"Sigmoid",
       losses::SigmoidCrossEntropyWithLogits,
       SigmoidReference,
       {0, 1, 1, 0, 0.5, 1},
       {-1, 2, 0.5, 3, 0, -0.25},
       2},
      {"SigmoidHugeLogits",
       losses::SigmoidCrossEntropyWithLogits,
       SigmoidReference,
       {0, 1, 1, 0, 0.5, 1},
       {1000, -1000, 800, -800, 500, 90},
       2},
  };
}

Tensor Matrix(const std::vector<double>& values, int rows) {
  return Tensor::FromVector<double>(
      values, TensorShape({rows, static_cast<int64_t>(values.size()) / rows}));
}

TEST(Losses, MatchTheReferenceInFloat64AndFloat32) {
  for (const LossCase& c : Cases()) {
    for (DataType dtype : {DT_DOUBLE, DT_FLOAT}) {
      SCOPED_TRACE(c.name + " " + std::string(DataTypeName(dtype)));
      Scope root = Scope::NewRootScope();
      Output labels = ops::Cast(root, ops::Const(root, Matrix(c.labels, c.rows)), dtype);
      Output predictions = ops::Cast(root, ops::Const(root, Matrix(c.predictions, c.rows)), dtype);
      Output loss = c.loss(root, labels, predictions);
      ASSERT_TRUE(root.ok()) << root.status();
      EXPECT_EQ(loss.shape(), PartialShape::Scalar());
      CKFLOW_ASSERT_OK_AND_ASSIGN(auto session, Session::Create(root.graph()));
      CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, session->Run({}, {loss}));
      const double expected = c.reference(c.labels, c.predictions, c.rows);
      const double got = out[0].ElementAsDouble(0);
      ASSERT_TRUE(std::isfinite(got));
      EXPECT_NEAR(got, expected, (dtype == DT_DOUBLE ? 1e-12 : 1e-5) * (1 + std::abs(expected)));
    }
  }
}

TEST(Losses, GradientsWithRespectToPredictions) {
  // d/dp mean((p - z)^2) = 2 (p - z) / n; d/dx softmax xent = (softmax(x) - z) / rows.
  Scope root = Scope::NewRootScope();
  Output z = ops::Const(root, Matrix({0, 1, 1, 0}, 2));
  Output x = ops::Const(root, Matrix({0, 0, std::log(3.0), 0}, 2));
  Output mse = losses::MeanSquaredError(root, z, x);
  Output xent = losses::SoftmaxCrossEntropyWithLogits(root, z, x);
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Output> mse_grad, AddGradients(root, {mse}, {x}));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Output> xent_grad, AddGradients(root, {xent}, {x}));
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto session, Session::Create(root.graph()));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out,
                              session->Run({}, {mse_grad[0], xent_grad[0]}));
  const std::vector<double> mse_expected = {0, -0.5, 2 * (std::log(3.0) - 1) / 4, 0};
  const std::vector<double> xent_expected = {0.5 / 2, -0.5 / 2, (0.75 - 1) / 2, 0.25 / 2};
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(out[0].flat<double>()[i], mse_expected[i], 1e-12) << i;
    EXPECT_NEAR(out[1].flat<double>()[i], xent_expected[i], 1e-12) << i;
  }
}

TEST(Losses, MismatchedLabelsAreABuildErrorNamingBoth) {
  struct Case {
    std::string name;
    LossFn loss;
    std::vector<int64_t> label_shape;
    DataType label_dtype;
    std::string message;
  };
  std::vector<Case> cases = {
      {"MseColumnVsVector",
       losses::MeanSquaredError,
       {4, 1},
       DT_FLOAT,
       "MeanSquaredError: labels labels:0 are float32[4,1] but predictions predictions:0 are "
       "float32[4]"},
      {"SoftmaxDtype",
       losses::SoftmaxCrossEntropyWithLogits,
       {4},
       DT_DOUBLE,
       "labels labels:0 are float64[4] but logits predictions:0 are float32[4]"},
      {"SigmoidShape",
       losses::SigmoidCrossEntropyWithLogits,
       {3},
       DT_FLOAT,
       "SigmoidCrossEntropyWithLogits: labels labels:0 are float32[3]"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Scope root = Scope::NewRootScope();
    Output labels = ops::Placeholder(root.WithOpName("labels"), c.label_dtype,
                                     {.shape = PartialShape(c.label_shape)});
    Output predictions = ops::Placeholder(root.WithOpName("predictions"), DT_FLOAT, {.shape = {4}});
    EXPECT_FALSE(c.loss(root, labels, predictions).valid());
    EXPECT_EQ(root.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(root.status().message()), HasSubstr(c.message));
  }
}

}  // namespace
}  // namespace ckflow
