// NN ops: BiasAdd, BiasAddGrad, Softmax, LogSoftmax and the cross-entropy
// losses against naive references (long double, unshifted, so the
// reference shares none of the kernels' tricks).
#include "ops/nn_ops.h"

#include <gtest/gtest.h>

#include <cmath>

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

}  // namespace
}  // namespace ckflow
