// NN ops: BiasAdd, BiasAddGrad, Softmax, LogSoftmax and the cross-entropy
// losses against naive references (long double, unshifted, so the
// reference shares none of the kernels' tricks); the activations (Relu6,
// LeakyRelu, Elu, Selu, Softplus) and their gradient ops, TensorFlow's
// kinks and thresholds.
#include "ops/nn_ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "tests/ops/op_test_util.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

using testing::Evaluate;
using testing::ExpectNear;
using testing::RandomTensor;
using testing::ToDoubles;

TEST(BiasAdd, AddsAlongTheLastDimension) {
  std::mt19937 rng(31);
  for (DataType dtype : {DT_FLOAT, DT_DOUBLE, DT_INT32}) {
    // The last shapes are split over threads, in blocks of rows.
    for (TensorShape shape :
         {TensorShape({4, 3}), TensorShape({2, 5, 3}), TensorShape({0, 3}), TensorShape({3, 0}),
          TensorShape({20001, 3}), TensorShape({3, 127, 131})}) {
      const int64_t channels = shape.dim(shape.rank() - 1);
      Tensor v = RandomTensor(dtype, shape, rng);
      Tensor b = RandomTensor(dtype, {channels}, rng);
      std::vector<double> vv = ToDoubles(v), bv = ToDoubles(b), want(vv.size());
      for (size_t i = 0; i < vv.size(); ++i) want[i] = vv[i] + bv[i % channels];
      Scope root = Scope::NewRootScope();
      Output y = ops::BiasAdd(root, ops::Const(root, v), ops::Const(root, b));
      ASSERT_TRUE(root.ok()) << root.status();
      CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor got, Evaluate(y));
      ExpectNear(got, shape, want, 1e-6, 1e-6, "BiasAdd");

      Output g = ops::BiasAddGrad(root, ops::Const(root, v));
      CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor gv, Evaluate(g));
      std::vector<double> sums(channels, 0);
      for (size_t i = 0; i < vv.size(); ++i) sums[i % channels] += vv[i];
      // Float sums of many rows round more.
      ExpectNear(gv, {channels}, sums, 1e-5, 1e-5 + 1e-6 * static_cast<double>(vv.size()),
                 "BiasAddGrad");
    }
  }
}

TEST(BiasAdd, MismatchedBiasFailsAtBuildAndRunTime) {
  Scope root = Scope::NewRootScope();
  Output v = ops::Placeholder(root.WithOpName("v"), DT_FLOAT, {.shape = {2, 3}});
  Output b = ops::Placeholder(root.WithOpName("b"), DT_FLOAT, {.shape = {4}});
  ops::BiasAdd(root.WithOpName("ba"), v, b);
  EXPECT_EQ(root.status().message(),
            "ba (BiasAdd): bias is [4] (b:0), but must match the last dimension of value, [2,3] "
            "(v:0)");

  Status s = testing::RunWithFedShapes(ops::BiasAdd, "ba", {2, 3}, {1});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "ba (BiasAdd): bias is [1], but must be a vector as long as the last dimension of "
            "value, [2,3] (of rank >= 2)");
}

// Softmax of each row of the last dimension, unshifted in long double.
std::vector<double> NaiveSoftmax(const std::vector<double>& x, int64_t cols, bool log) {
  std::vector<double> out(x.size());
  for (size_t r = 0; r * cols < x.size(); ++r) {
    long double sum = 0;
    for (int64_t c = 0; c < cols; ++c) sum += std::exp(static_cast<long double>(x[r * cols + c]));
    for (int64_t c = 0; c < cols; ++c) {
      long double e = std::exp(static_cast<long double>(x[r * cols + c]));
      out[r * cols + c] = static_cast<double>(log ? std::log(e / sum) : e / sum);
    }
  }
  return out;
}

TEST(Softmax, MatchesReferenceAndSurvivesLargeLogits) {
  std::mt19937 rng(32);
  struct Case {
    TensorShape shape;
    double lo, hi;
  };
  const Case cases[] = {{{5}, -3, 3},        {{4, 7}, -3, 3},       {{2, 3, 6}, -3, 3},
                        {{3, 4}, 900, 1000}, {{3, 4}, -1000, -900}, {{0, 4}, 0, 1},
                        {{300, 200}, -5, 5}};
  for (DataType dtype : {DT_FLOAT, DT_DOUBLE}) {
    for (const Case& c : cases) {
      for (bool log : {false, true}) {
        SCOPED_TRACE(c.shape.ToString() + (log ? " log" : "") + " " +
                     std::string(DataTypeName(dtype)));
        Tensor x = RandomTensor(dtype, c.shape, rng, c.lo, c.hi);
        Scope root = Scope::NewRootScope();
        Output in = ops::Const(root, x);
        Output y = log ? ops::LogSoftmax(root, in) : ops::Softmax(root, in);
        CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor got, Evaluate(y));
        std::vector<double> want = NaiveSoftmax(ToDoubles(x), c.shape.dim(c.shape.rank() - 1), log);
        // float logits near 1000 carry an absolute error of ~6e-5 each.
        const double tol = dtype == DT_FLOAT ? (c.hi > 100 || c.lo < -100 ? 2e-4 : 1e-5) : 1e-10;
        ExpectNear(got, c.shape, want, tol, tol, log ? "LogSoftmax" : "Softmax");
      }
    }
  }
}

TEST(SoftmaxCrossEntropy, MatchesReferenceLossAndGradient) {
  std::mt19937 rng(33);
  for (DataType dtype : {DT_FLOAT, DT_DOUBLE}) {
    for (auto [lo, hi] : {std::pair{-3.0, 3.0}, std::pair{500.0, 600.0}}) {
      const int64_t batch = 5, classes = 7;
      Tensor f = RandomTensor(dtype, {batch, classes}, rng, lo, hi);
      // Labels: rows of random probability distributions.
      std::vector<double> labels(batch * classes);
      for (int64_t r = 0; r < batch; ++r) {
        double sum = 0;
        for (int64_t c = 0; c < classes; ++c) sum += labels[r * classes + c] = rng() % 5;
        for (int64_t c = 0; c < classes; ++c) labels[r * classes + c] /= sum > 0 ? sum : 1;
      }
      Tensor z = testing::MakeTensor(dtype, {batch, classes}, labels);
      std::vector<double> p = NaiveSoftmax(ToDoubles(f), classes, false);
      std::vector<double> logp = NaiveSoftmax(ToDoubles(f), classes, true);
      std::vector<double> loss(batch, 0), backprop(batch * classes);
      std::vector<double> zv = ToDoubles(z);
      for (int64_t i = 0; i < batch * classes; ++i) {
        loss[i / classes] -= zv[i] * logp[i];
        backprop[i] = p[i] - zv[i];
      }
      Scope root = Scope::NewRootScope();
      auto xent =
          ops::SoftmaxCrossEntropyWithLogits(root, ops::Const(root, f), ops::Const(root, z));
      ASSERT_TRUE(root.ok()) << root.status();
      EXPECT_EQ(xent.loss.shape().ToString(), "[5]");
      testing::Evaluator eval(root.graph());
      CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> got,
                                  eval.Run({}, {xent.loss, xent.backprop}));
      const double tol = dtype == DT_FLOAT ? 2e-4 : 1e-10;
      ExpectNear(got[0], {batch}, loss, tol, tol, "loss");
      ExpectNear(got[1], {batch, classes}, backprop, tol, tol, "backprop");
    }
  }
}

TEST(SparseSoftmaxCrossEntropy, MatchesDenseOneHotVersion) {
  std::mt19937 rng(34);
  for (DataType label_type : {DT_INT32, DT_INT64}) {
    const int64_t batch = 6, classes = 4;
    Tensor f = RandomTensor(DT_DOUBLE, {batch, classes}, rng, -4, 4);
    std::vector<double> labels(batch), one_hot(batch * classes, 0);
    for (int64_t r = 0; r < batch; ++r) {
      labels[r] = rng() % classes;
      one_hot[r * classes + static_cast<int64_t>(labels[r])] = 1;
    }
    std::vector<double> logp = NaiveSoftmax(ToDoubles(f), classes, true);
    std::vector<double> p = NaiveSoftmax(ToDoubles(f), classes, false);
    std::vector<double> loss(batch), backprop(batch * classes);
    for (int64_t i = 0; i < batch * classes; ++i) {
      if (one_hot[i] != 0) loss[i / classes] = -logp[i];
      backprop[i] = p[i] - one_hot[i];
    }
    Scope root = Scope::NewRootScope();
    auto xent = ops::SparseSoftmaxCrossEntropyWithLogits(
        root, ops::Const(root, f),
        ops::Const(root, testing::MakeTensor(label_type, {batch}, labels)));
    ASSERT_TRUE(root.ok()) << root.status();
    testing::Evaluator eval(root.graph());
    CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> got, eval.Run({}, {xent.loss, xent.backprop}));
    ExpectNear(got[0], {batch}, loss, 1e-10, 1e-10, "loss");
    ExpectNear(got[1], {batch, classes}, backprop, 1e-10, 1e-10, "backprop");
  }
}

TEST(SparseSoftmaxCrossEntropy, LabelOutOfRangeFailsNamingIt) {
  Scope root = Scope::NewRootScope();
  Output f = ops::Placeholder(root, DT_FLOAT, {.shape = {-1, 10}});
  Output l = ops::Placeholder(root, DT_INT64, {.shape = {-1}});
  auto xent = ops::SparseSoftmaxCrossEntropyWithLogits(root.WithOpName("xent"), f, l);
  ASSERT_TRUE(root.ok()) << root.status();
  for (int64_t bad : {int64_t{10}, int64_t{-1}}) {
    Status s = Evaluate(xent.loss, {{f, Tensor(DT_FLOAT, {3, 10})},
                                    {l, Tensor::FromVector<int64_t>({1, bad, 2})}})
                   .status();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message(), "xent (SparseSoftmaxCrossEntropyWithLogits): labels[1] = " +
                               std::to_string(bad) + " is outside the valid range [0, 10)");
  }
}

TEST(CrossEntropy, ShapeChecksAtBuildTime) {
  Scope root = Scope::NewRootScope();
  Output f = ops::Placeholder(root.WithOpName("f"), DT_FLOAT, {.shape = {-1, 10}});
  Output l = ops::Placeholder(root.WithOpName("l"), DT_FLOAT, {.shape = {-1, 9}});
  ops::SoftmaxCrossEntropyWithLogits(root.WithOpName("x"), f, l);
  EXPECT_EQ(root.status().message(),
            "x (SoftmaxCrossEntropyWithLogits): shapes must be equal: features is [?,10] (f:0), "
            "labels is [?,9] (l:0)");
}

// ------------------------------------------------------------ activations

using UnaryBuilder = std::function<Output(const Scope&, Output)>;
using BinaryFn = std::function<Output(const Scope&, Output, Output)>;

// SELU's constants.
constexpr long double kSeluScale = 1.0507009873554804934193349852946L;
constexpr long double kSeluAlpha = 1.6732632423543772848170429916717L;

struct ActivationCase {
  std::string name;
  UnaryBuilder op;
  std::function<long double(long double)> reference;
  double lo, hi;
};

// TensorFlow's formulas, in long double.
std::vector<ActivationCase> ActivationCases() {
  return {
      {"Relu6", [](const Scope& s, Output x) { return ops::Relu6(s, x); },
       [](long double x) { return std::min(std::max(x, 0.0L), 6.0L); }, -3, 9},
      {"LeakyRelu", [](const Scope& s, Output x) { return ops::LeakyRelu(s, x); },
       [](long double x) { return x > 0 ? x : 0.2f * x; }, -3, 3},
      {"LeakyReluAlpha", [](const Scope& s, Output x) { return ops::LeakyRelu(s, x, 1.5f); },
       [](long double x) { return x > 0 ? x : 1.5L * x; }, -3, 3},
      {"Elu", [](const Scope& s, Output x) { return ops::Elu(s, x); },
       [](long double x) { return x < 0 ? std::expm1(x) : x; }, -5, 3},
      {"Selu", [](const Scope& s, Output x) { return ops::Selu(s, x); },
       [](long double x) {
         return x < 0 ? kSeluScale * kSeluAlpha * std::expm1(x) : kSeluScale * x;
       },
       -5, 3},
      {"Softplus", [](const Scope& s, Output x) { return ops::Softplus(s, x); },
       [](long double x) { return std::log1p(std::exp(x)); }, -50, 50},
  };
}

TEST(Activations, MatchNaiveReferences) {
  std::mt19937 rng(35);
  for (DataType dtype : {DT_FLOAT, DT_DOUBLE}) {
    for (const ActivationCase& c : ActivationCases()) {
      SCOPED_TRACE(c.name + " " + std::string(DataTypeName(dtype)));
      // Large enough for several parallel blocks.
      Tensor x = RandomTensor(dtype, {300, 70}, rng, c.lo, c.hi);
      Scope root = Scope::NewRootScope();
      Output y = c.op(root, ops::Const(root, x));
      ASSERT_TRUE(root.ok()) << root.status();
      CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor got, Evaluate(y));
      std::vector<double> want;
      for (double v : ToDoubles(x)) want.push_back(static_cast<double>(c.reference(v)));
      // Relative: exp's float rounding.
      const double tol = dtype == DT_FLOAT ? 2e-6 : 1e-14;
      ExpectNear(got, x.shape(), want, tol, tol, c.name);
    }
  }
}

TEST(Activations, SoftplusSwitchesFormulasAtTensorFlowsThresholds) {
  // log(epsilon) + 2: -13.94 for float32, -34.04 for float64. Beyond them
  // softplus(x) is x (above) or exp(x) (below), exactly; just below the
  // threshold log1p(exp(x)) would differ from exp(x) in the last bits.
  for (DataType dtype : {DT_FLOAT, DT_DOUBLE}) {
    const double threshold = dtype == DT_FLOAT
                                 ? std::log(std::numeric_limits<float>::epsilon()) + 2
                                 : std::log(std::numeric_limits<double>::epsilon()) + 2;
    const std::vector<double> x = {-threshold + 0.5, threshold - 0.5, 100};
    Scope root = Scope::NewRootScope();
    CKFLOW_ASSERT_OK_AND_ASSIGN(
        Tensor got,
        Evaluate(ops::Softplus(root, ops::Const(root, testing::MakeTensor(dtype, {3}, x)))));
    const Tensor xt = testing::MakeTensor(dtype, {3}, x);
    EXPECT_EQ(got.ElementAsDouble(0), xt.ElementAsDouble(0));
    EXPECT_EQ(got.ElementAsDouble(2), xt.ElementAsDouble(2));
    if (dtype == DT_FLOAT) {
      EXPECT_EQ(got.ElementAsDouble(1), static_cast<float>(std::exp(xt.flat<float>()[1])));
    } else {
      EXPECT_EQ(got.ElementAsDouble(1), std::exp(xt.ElementAsDouble(1)));
    }
  }
}

struct ActivationGradCase {
  std::string name;
  BinaryFn op;
  // d activation / dx at the given second input (features or outputs).
  std::function<long double(long double)> derivative;
  double lo, hi;
};

std::vector<ActivationGradCase> ActivationGradCases() {
  return {
      {"Relu6Grad", [](const Scope& s, Output g, Output f) { return ops::Relu6Grad(s, g, f); },
       [](long double f) { return f > 0 && f < 6 ? 1.0L : 0.0L; }, -3, 9},
      {"LeakyReluGrad",
       [](const Scope& s, Output g, Output f) { return ops::LeakyReluGrad(s, g, f, 0.3f); },
       [](long double f) { return f > 0 ? 1.0L : 0.3f; }, -3, 3},
      {"EluGrad", [](const Scope& s, Output g, Output y) { return ops::EluGrad(s, g, y); },
       [](long double y) { return y < 0 ? y + 1 : 1.0L; }, -1, 3},
      {"SeluGrad", [](const Scope& s, Output g, Output y) { return ops::SeluGrad(s, g, y); },
       [](long double y) { return y < 0 ? y + kSeluScale * kSeluAlpha : kSeluScale; }, -1.7, 3},
      {"SoftplusGrad",
       [](const Scope& s, Output g, Output f) { return ops::SoftplusGrad(s, g, f); },
       [](long double f) { return 1 / (1 + std::exp(-f)); }, -20, 20},
  };
}

TEST(ActivationGradients, MatchNaiveReferences) {
  std::mt19937 rng(36);
  for (DataType dtype : {DT_FLOAT, DT_DOUBLE}) {
    for (const ActivationGradCase& c : ActivationGradCases()) {
      SCOPED_TRACE(c.name + " " + std::string(DataTypeName(dtype)));
      Tensor g = RandomTensor(dtype, {200, 60}, rng);
      Tensor f = RandomTensor(dtype, {200, 60}, rng, c.lo, c.hi);
      Scope root = Scope::NewRootScope();
      Output y = c.op(root, ops::Const(root, g), ops::Const(root, f));
      ASSERT_TRUE(root.ok()) << root.status();
      CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor got, Evaluate(y));
      std::vector<double> gv = ToDoubles(g), fv = ToDoubles(f), want(gv.size());
      for (size_t i = 0; i < gv.size(); ++i) {
        want[i] = static_cast<double>(gv[i] * c.derivative(fv[i]));
      }
      const double tol = dtype == DT_FLOAT ? 2e-6 : 1e-14;
      ExpectNear(got, g.shape(), want, tol, tol, c.name);
    }
  }
}

TEST(ActivationGradients, KinksFollowTensorFlow) {
  // Relu6: nothing at 0 or 6; LeakyRelu: alpha at 0; Elu and Selu: the
  // x >= 0 branch at an output of 0.
  Scope root = Scope::NewRootScope();
  Output ones = ops::Const<float>(root, {1, 1, 1, 1, 1}, {5});
  Output at = ops::Const<float>(root, {-1, 0, 3, 6, 7}, {5});
  struct Want {
    Output got;
    std::vector<double> want;
  };
  const Want cases[] = {
      {ops::Relu6Grad(root, ones, at), {0, 0, 1, 0, 0}},
      {ops::LeakyReluGrad(root, ones, at), {0.2f, 0.2f, 1, 1, 1}},
      {ops::EluGrad(root, ones, at), {0, 1, 1, 1, 1}},
      {ops::SeluGrad(root, ones, at),
       {1.0507009873554804934 * 1.6732632423543772848 - 1, 1.0507009873554804934,
        1.0507009873554804934, 1.0507009873554804934, 1.0507009873554804934}},
  };
  for (const Want& c : cases) {
    CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor got, Evaluate(c.got));
    ExpectNear(got, {5}, c.want, 1e-6, 0, c.got.name());
  }
}

TEST(ActivationGradients, BitIdenticalUnderOneTwoAndFourThreads) {
  std::mt19937 rng(37);
  Scope root = Scope::NewRootScope();
  Output x = ops::Const(root, RandomTensor(DT_FLOAT, {1000, 300}, rng, -20, 20));
  Output g = ops::Const(root, RandomTensor(DT_FLOAT, {1000, 300}, rng));
  const Output outputs[] = {ops::Softplus(root, x),  ops::SoftplusGrad(root, g, x),
                            ops::LeakyRelu(root, x), ops::LeakyReluGrad(root, g, x),
                            ops::Elu(root, x),       ops::Relu6Grad(root, g, x)};
  for (const Output& y : outputs) {
    CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor one, testing::EvaluateWithThreads(y, 1));
    for (int threads : {2, 4}) {
      CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor many, testing::EvaluateWithThreads(y, threads));
      testing::ExpectIdentical(many, one, y.name());
    }
  }
}

TEST(ActivationGradients, ShapesMustBeEqual) {
  Scope root = Scope::NewRootScope();
  Output g = ops::Placeholder(root.WithOpName("g"), DT_FLOAT, {.shape = {2, 3}});
  Output f = ops::Placeholder(root.WithOpName("f"), DT_FLOAT, {.shape = {3}});
  ops::LeakyReluGrad(root.WithOpName("lg"), g, f);
  EXPECT_EQ(root.status().message(),
            "lg (LeakyReluGrad): shapes must be equal: gradients is [2,3] (g:0), features is [3] "
            "(f:0)");
  auto leaky_grad = [](const Scope& s, ops::Input a, ops::Input b) {
    return ops::LeakyReluGrad(s, a, b);
  };
  for (testing::BinaryBuilder build : {static_cast<testing::BinaryBuilder>(leaky_grad),
                                       static_cast<testing::BinaryBuilder>(ops::Relu6Grad)}) {
    Status s = testing::RunWithFedShapes(build, "grad", {2, 3}, {3});
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("shapes must be equal: gradients is [2,3]"), std::string::npos) << s;
  }
}

TEST(Activations, RejectIntegersAndNonFiniteAlpha) {
  Scope root = Scope::NewRootScope();
  Output i = ops::Placeholder(root.WithOpName("i"), DT_INT32);
  ops::Relu6(root.WithOpName("r"), i);
  EXPECT_EQ(root.status().message(),
            "r (Relu6): features is int32 (i:0), but must be one of float32, float64");
  Scope other = Scope::NewRootScope();
  ops::LeakyRelu(other.WithOpName("l"), ops::Const(other, 1.0f),
                 std::numeric_limits<float>::infinity());
  EXPECT_EQ(other.status().message(), "l (LeakyRelu): attribute alpha is inf, but must be finite");
}

}  // namespace
}  // namespace ckflow
