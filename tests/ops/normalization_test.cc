// FusedBatchNormV3 and FusedBatchNormGradV3 against a naive long double
// reference (training and inference, every output), bit-identical under 1,
// 2 and 4 threads, their build- and run-time errors; the rank-2 builder;
// Keras' moving-average update through a Session. (Finite-difference
// checks of the gradient are in gradients_test.cc.)
#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ops/array_ops.h"
#include "ops/normalization_ops.h"
#include "ops/variables.h"
#include "runtime/session.h"
#include "tests/ops/op_test_util.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

using testing::ExpectNear;
using testing::MakeTensor;
using testing::RandomTensor;
using testing::ToDoubles;

// The six outputs, in order.
std::vector<Output> AllOutputs(const ops::FusedBatchNormOutputs& bn) {
  return {bn.y,
          bn.batch_mean,
          bn.batch_variance,
          bn.reserve_space_1,
          bn.reserve_space_2,
          bn.reserve_space_3};
}

struct NaiveBatchNorm {
  std::vector<double> y, batch_mean, batch_variance, saved_mean, saved_variance;
};

// FusedBatchNormV3's definition in long double, channel by channel.
NaiveBatchNorm Reference(const std::vector<double>& x, int64_t channels,
                         const std::vector<double>& scale, const std::vector<double>& offset,
                         const std::vector<double>& mean, const std::vector<double>& variance,
                         double epsilon, double factor, bool training) {
  const int64_t rows = static_cast<int64_t>(x.size()) / channels;
  NaiveBatchNorm out;
  out.y.resize(x.size());
  for (int64_t c = 0; c < channels; ++c) {
    long double m = 0, v = 0;
    for (int64_t r = 0; r < rows; ++r) m += x[r * channels + c];
    m /= rows;
    for (int64_t r = 0; r < rows; ++r) {
      v += (x[r * channels + c] - m) * (x[r * channels + c] - m);
    }
    v /= rows;
    const long double bessel = rows > 1 ? static_cast<long double>(rows) / (rows - 1) : 1;
    const long double use_m = training ? m : mean[c];
    const long double use_v = training ? v : variance[c];
    for (int64_t r = 0; r < rows; ++r) {
      out.y[r * channels + c] = static_cast<double>(
          (x[r * channels + c] - use_m) / std::sqrt(use_v + epsilon) * scale[c] + offset[c]);
    }
    if (!training) {
      out.batch_mean.push_back(mean[c]);
      out.batch_variance.push_back(variance[c]);
      out.saved_mean.push_back(mean[c]);
      out.saved_variance.push_back(variance[c]);
    } else if (factor == 1) {
      out.batch_mean.push_back(static_cast<double>(m));
      out.batch_variance.push_back(static_cast<double>(v * bessel));
    } else {
      out.batch_mean.push_back(static_cast<double>((1 - factor) * mean[c] + factor * m));
      out.batch_variance.push_back(
          static_cast<double>((1 - factor) * variance[c] + factor * bessel * v));
    }
    if (training) {
      out.saved_mean.push_back(static_cast<double>(m));
      out.saved_variance.push_back(static_cast<double>(v));
    }
  }
  return out;
}

struct ForwardCase {
  TensorShape shape;
  float epsilon;
  float factor;
  bool training;
};

TEST(FusedBatchNorm, MatchesNaiveReferenceInTrainingAndInference) {
  const ForwardCase cases[] = {
      {{2, 3, 3, 4}, 1e-3f, 1.0f, true},    {{2, 3, 3, 4}, 1e-4f, 0.3f, true},
      {{1, 1, 1, 3}, 1e-3f, 1.0f, true},  // one value per channel: no Bessel correction
      {{4, 5, 5, 1}, 1e-3f, 0.01f, true},   {{3, 1, 1, 700}, 1e-5f, 1.0f, true},
      {{16, 14, 14, 8}, 1e-3f, 1.0f, true},  // several blocks of rows
      {{2, 3, 3, 4}, 1e-3f, 1.0f, false},   {{5, 2, 2, 3}, 0.5f, 0.3f, false},
  };
  std::mt19937 rng(51);
  for (DataType dtype : {DT_FLOAT, DT_DOUBLE}) {
    for (const ForwardCase& c : cases) {
      SCOPED_TRACE(c.shape.ToString() + " " + std::string(DataTypeName(dtype)) +
                   (c.training ? " training" : " inference") + " factor " +
                   std::to_string(c.factor));
      const int64_t channels = c.shape.dim(3);
      // An offset mean, so that centering matters.
      Tensor x = RandomTensor(dtype, c.shape, rng, 3, 7);
      Tensor scale = RandomTensor(dtype, {channels}, rng, 0.5, 2);
      Tensor offset = RandomTensor(dtype, {channels}, rng);
      Tensor mean = RandomTensor(dtype, {channels}, rng);
      Tensor variance = RandomTensor(dtype, {channels}, rng, 0.5, 3);
      Scope root = Scope::NewRootScope();
      auto bn = ops::FusedBatchNorm(
          root, ops::Const(root, x), ops::Const(root, scale), ops::Const(root, offset),
          ops::Const(root, mean), ops::Const(root, variance),
          {.epsilon = c.epsilon, .exponential_avg_factor = c.factor, .is_training = c.training});
      ASSERT_TRUE(root.ok()) << root.status();
      testing::Evaluator eval(root.graph());
      CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> got, eval.Run({}, AllOutputs(bn)));
      NaiveBatchNorm want =
          Reference(ToDoubles(x), channels, ToDoubles(scale), ToDoubles(offset), ToDoubles(mean),
                    ToDoubles(variance), c.epsilon, c.factor, c.training);
      const double tol = dtype == DT_FLOAT ? 2e-5 : 1e-12;
      ExpectNear(got[0], c.shape, want.y, tol, tol, "y");
      ExpectNear(got[1], {channels}, want.batch_mean, tol, tol, "batch_mean");
      ExpectNear(got[2], {channels}, want.batch_variance, tol, tol, "batch_variance");
      ExpectNear(got[3], {channels}, want.saved_mean, tol, tol, "reserve_space_1");
      ExpectNear(got[4], {channels}, want.saved_variance, tol, tol, "reserve_space_2");
      EXPECT_EQ(got[5].shape(), TensorShape({0})) << "reserve_space_3";
      EXPECT_EQ(got[5].dtype(), dtype);
    }
  }
}

// The moments come from one pass of shifted sums: a channel far from 0
// keeps its small variance's digits, and a constant one has none.
TEST(FusedBatchNorm, AFarOffChannelKeepsItsVarianceAndAConstantOneHasNone) {
  std::mt19937 rng(53);
  std::uniform_real_distribution<float> u(-0.01f, 0.01f);
  Tensor x(DT_FLOAT, TensorShape({8, 9, 9, 2}));
  for (int64_t i = 0; i < x.NumElements(); i += 2) {
    x.flat<float>()[i] = 1e4f + u(rng);
    x.flat<float>()[i + 1] = 3.5f;
  }
  Scope root = Scope::NewRootScope();
  Tensor ones = Tensor::FromVector<float>({1, 1}), zeros = Tensor::FromVector<float>({0, 0});
  auto bn = ops::FusedBatchNorm(root, x, ones, zeros, zeros, ones);
  ASSERT_TRUE(root.ok()) << root.status();
  testing::Evaluator eval(root.graph());
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> got, eval.Run({}, AllOutputs(bn)));
  NaiveBatchNorm want = Reference(ToDoubles(x), 2, {1, 1}, {0, 0}, {}, {}, 1e-3, 1, true);
  ExpectNear(got[4], {2}, want.saved_variance, 1e-5, 0, "reserve_space_2");
  EXPECT_EQ(got[4].flat<float>()[1], 0.0f);
  EXPECT_EQ(got[2].flat<float>()[1], 0.0f);
  EXPECT_EQ(got[3].flat<float>()[1], 3.5f);
}

TEST(FusedBatchNorm, TrainingIgnoresEmptyMeanAndVariance) {
  std::mt19937 rng(52);
  Tensor x = RandomTensor(DT_FLOAT, {2, 2, 2, 3}, rng);
  Scope root = Scope::NewRootScope();
  Tensor empty(DT_FLOAT, TensorShape({0}));
  auto bn = ops::FusedBatchNorm(root, x, Tensor::FromVector<float>({1, 1, 1}),
                                Tensor::FromVector<float>({0, 0, 0}), empty, empty);
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(bn.batch_mean.shape().ToString(), "[3]");
  testing::Evaluator eval(root.graph());
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> got, eval.Run({}, {bn.y, bn.batch_mean}));
  NaiveBatchNorm want = Reference(ToDoubles(x), 3, {1, 1, 1}, {0, 0, 0}, {}, {}, 1e-4, 1, true);
  ExpectNear(got[0], x.shape(), want.y, 2e-5, 2e-5, "y");
  ExpectNear(got[1], {3}, want.batch_mean, 2e-5, 2e-5, "batch_mean");
}

TEST(FusedBatchNorm, EmptyBatchGivesNaNStatistics) {
  for (bool training : {true, false}) {
    Scope root = Scope::NewRootScope();
    Tensor two = Tensor::FromVector<float>({1, 2});
    auto bn = ops::FusedBatchNorm(root, Tensor(DT_FLOAT, TensorShape({0, 3, 3, 2})), two, two, two,
                                  two, {.is_training = training});
    testing::Evaluator eval(root.graph());
    CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> got, eval.Run({}, AllOutputs(bn)));
    EXPECT_EQ(got[0].shape(), TensorShape({0, 3, 3, 2}));
    for (int i = 1; i < 5; ++i) {
      ASSERT_EQ(got[i].shape(), TensorShape({2}));
      for (double v : ToDoubles(got[i])) EXPECT_TRUE(std::isnan(v)) << "output " << i;
    }
  }
}

// FusedBatchNormGradV3's definition in long double: training normalizes
// with (mean, variance) = the batch's, so the gradient flows through them;
// inference with constants.
std::vector<std::vector<double>> ReferenceGrad(const std::vector<double>& dy,
                                               const std::vector<double>& x, int64_t channels,
                                               const std::vector<double>& scale,
                                               const std::vector<double>& mean,
                                               const std::vector<double>& variance, double epsilon,
                                               bool training) {
  const int64_t rows = static_cast<int64_t>(x.size()) / channels;
  std::vector<double> dx(x.size()), dscale(channels), doffset(channels);
  for (int64_t c = 0; c < channels; ++c) {
    long double sum_dy = 0, sum_dy_xhat = 0;
    const long double inv = 1 / std::sqrt(static_cast<long double>(variance[c]) + epsilon);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = r * channels + c;
      sum_dy += dy[i];
      sum_dy_xhat += dy[i] * (x[i] - mean[c]) * inv;
    }
    doffset[c] = static_cast<double>(sum_dy);
    dscale[c] = static_cast<double>(sum_dy_xhat);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = r * channels + c;
      const long double xhat = (x[i] - mean[c]) * inv;
      dx[i] = static_cast<double>(training ? scale[c] * inv *
                                                 (dy[i] - sum_dy / rows - xhat * sum_dy_xhat / rows)
                                           : scale[c] * inv * dy[i]);
    }
  }
  return {dx, dscale, doffset};
}

TEST(FusedBatchNormGrad, MatchesNaiveReference) {
  std::mt19937 rng(53);
  for (DataType dtype : {DT_FLOAT, DT_DOUBLE}) {
    for (bool training : {true, false}) {
      for (TensorShape shape : {TensorShape({2, 3, 3, 4}), TensorShape({8, 9, 9, 5})}) {
        SCOPED_TRACE(shape.ToString() + (training ? " training " : " inference ") +
                     std::string(DataTypeName(dtype)));
        const int64_t channels = shape.dim(3);
        Tensor x = RandomTensor(dtype, shape, rng, -1, 3);
        Tensor dy = RandomTensor(dtype, shape, rng);
        Tensor scale = RandomTensor(dtype, {channels}, rng, 0.5, 2);
        Tensor mean = RandomTensor(dtype, {channels}, rng);
        Tensor variance = RandomTensor(dtype, {channels}, rng, 0.5, 2);
        Scope root = Scope::NewRootScope();
        auto g = ops::FusedBatchNormGrad(root, dy, x, scale, mean, variance,
                                         Tensor(dtype, TensorShape({0})),
                                         {.epsilon = 1e-3f, .is_training = training});
        ASSERT_TRUE(root.ok()) << root.status();
        testing::Evaluator eval(root.graph());
        CKFLOW_ASSERT_OK_AND_ASSIGN(
            std::vector<Tensor> got,
            eval.Run({}, {g.x_backprop, g.scale_backprop, g.offset_backprop}));
        auto want = ReferenceGrad(ToDoubles(dy), ToDoubles(x), channels, ToDoubles(scale),
                                  ToDoubles(mean), ToDoubles(variance), 1e-3f, training);
        const double tol = dtype == DT_FLOAT ? 1e-4 : 1e-11;
        ExpectNear(got[0], shape, want[0], tol, tol, "x_backprop");
        ExpectNear(got[1], {channels}, want[1], tol, tol, "scale_backprop");
        ExpectNear(got[2], {channels}, want[2], tol, tol, "offset_backprop");
      }
    }
  }
}

TEST(FusedBatchNormGrad, EmptyBatchGivesZeroScaleAndOffsetGradients) {
  Scope root = Scope::NewRootScope();
  Tensor empty(DT_DOUBLE, TensorShape({0, 2, 2, 3}));
  Tensor three = Tensor::FromVector<double>({1, 2, 3});
  auto g = ops::FusedBatchNormGrad(root, empty, empty, three, three, three,
                                   Tensor(DT_DOUBLE, TensorShape({0})));
  testing::Evaluator eval(root.graph());
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> got,
                              eval.Run({}, {g.x_backprop, g.scale_backprop, g.offset_backprop}));
  EXPECT_EQ(got[0].shape(), empty.shape());
  EXPECT_EQ(ToDoubles(got[1]), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(ToDoubles(got[2]), (std::vector<double>{0, 0, 0}));
}

// Every output of the forward and gradient ops under a thread limit.
std::vector<Tensor> RunWithThreads(const Graph& graph, const std::vector<Output>& fetches,
                                   int threads) {
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, threads);
  testing::Evaluator eval(graph);
  StatusOr<std::vector<Tensor>> out = eval.Run({}, fetches);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : std::vector<Tensor>();
}

TEST(FusedBatchNorm, BitIdenticalUnderOneTwoAndFourThreads) {
  std::mt19937 rng(54);
  // Enough rows for many blocks and parallel loops, in both dtypes.
  for (DataType dtype : {DT_FLOAT, DT_DOUBLE}) {
    const TensorShape shape({32, 16, 16, 24});
    Scope root = Scope::NewRootScope();
    Output x = ops::Const(root, RandomTensor(dtype, shape, rng, 1, 5));
    Output scale = ops::Const(root, RandomTensor(dtype, {24}, rng));
    Output offset = ops::Const(root, RandomTensor(dtype, {24}, rng));
    Output mean = ops::Const(root, RandomTensor(dtype, {24}, rng));
    Output variance = ops::Const(root, RandomTensor(dtype, {24}, rng, 1, 2));
    auto bn = ops::FusedBatchNorm(root, x, scale, offset, mean, variance,
                                  {.exponential_avg_factor = 0.1f});
    auto g =
        ops::FusedBatchNormGrad(root, ops::Const(root, RandomTensor(dtype, shape, rng)), x, scale,
                                bn.reserve_space_1, bn.reserve_space_2, bn.reserve_space_3);
    ASSERT_TRUE(root.ok()) << root.status();
    std::vector<Output> fetches = AllOutputs(bn);
    fetches.insert(fetches.end(), {g.x_backprop, g.scale_backprop, g.offset_backprop});
    const std::vector<Tensor> one = RunWithThreads(root.graph(), fetches, 1);
    ASSERT_EQ(one.size(), fetches.size());
    for (int threads : {2, 4}) {
      const std::vector<Tensor> many = RunWithThreads(root.graph(), fetches, threads);
      ASSERT_EQ(many.size(), fetches.size());
      for (size_t i = 0; i < fetches.size(); ++i) {
        testing::ExpectIdentical(
            many[i], one[i], fetches[i].name() + " with " + std::to_string(threads) + " threads");
      }
    }
  }
}

TEST(FusedBatchNorm, RankTwoInputIsNormalizedAsOnePixelImages) {
  std::mt19937 rng(55);
  Tensor x = RandomTensor(DT_FLOAT, {6, 3}, rng);
  Tensor scale = RandomTensor(DT_FLOAT, {3}, rng);
  Tensor offset = RandomTensor(DT_FLOAT, {3}, rng);
  Tensor empty(DT_FLOAT, TensorShape({0}));
  Scope root = Scope::NewRootScope();
  Output dense = ops::Placeholder(root, DT_FLOAT, {.shape = {-1, 3}});
  auto bn2 = ops::FusedBatchNorm(root, dense, scale, offset, empty, empty);
  auto bn4 = ops::FusedBatchNorm(root, ops::Reshape(root, dense, {6, 1, 1, 3}), scale, offset,
                                 empty, empty);
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(bn2.y.shape().ToString(), "[?,3]");
  testing::Evaluator eval(root.graph());
  CKFLOW_ASSERT_OK_AND_ASSIGN(
      std::vector<Tensor> got,
      eval.Run({{dense, x}}, {bn2.y, bn4.y, bn2.batch_variance, bn4.batch_variance}));
  EXPECT_EQ(got[0].shape(), TensorShape({6, 3}));
  EXPECT_EQ(ToDoubles(got[0]), ToDoubles(got[1]));
  EXPECT_EQ(ToDoubles(got[2]), ToDoubles(got[3]));
}

TEST(FusedBatchNorm, RankTwoInputNeedsAKnownChannelCount) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, {.shape = {-1, -1}});
  Output scale = ops::Placeholder(root.WithOpName("scale"), DT_FLOAT);
  ops::FusedBatchNorm(root, x, scale, scale, scale, scale);
  EXPECT_EQ(root.status().message(),
            "FusedBatchNorm: x is [?,?] (x:0) and scale is <unknown> (scale:0): a rank-2 x needs "
            "its channel count known when the graph is built");
}

// ------------------------------------------------------------------ errors

// The inputs' declared shapes and dtype, and the attributes: valid as
// they start, then changed by one case each.
struct BuildSpec {
  PartialShape x = {2, 3, 3, 4};
  PartialShape scale = {4}, offset = {4}, mean = {4}, variance = {4};
  DataType vector_dtype = DT_FLOAT;
  ops::FusedBatchNormAttrs attrs;
};

struct BuildErrorCase {
  std::string name;
  std::function<void(BuildSpec&)> change;
  std::string message;  // after "bn (FusedBatchNormV3): "
};

TEST(FusedBatchNorm, BuildErrorsNameTheInputOrAttribute) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const BuildErrorCase cases[] = {
      {"Rank3",
       [](BuildSpec& b) {
         b.x = {2, 3, 4};
       },
       "x is [2,3,4] (x:0), but must have rank 4"},
      {"Scale", [](BuildSpec& b) { b.scale = {5}; },
       "channel counts differ: x is [2,3,3,4] (x:0), scale is [5] (scale:0)"},
      {"ScaleMatrix",
       [](BuildSpec& b) {
         b.scale = {4, 1};
       },
       "scale is [4,1] (scale:0), but must have rank 1"},
      {"Offset",
       [](BuildSpec& b) {
         b.x = {2, 3, 3, -1}, b.offset = {3};
       },
       "channel counts differ: scale is [4] (scale:0), offset is [3] (offset:0)"},
      {"MeanInInference", [](BuildSpec& b) { b.mean = {3}, b.attrs.is_training = false; },
       "channel counts differ: x is [2,3,3,4] (x:0), mean is [3] (mean:0)"},
      {"VarianceWhenAveraging",
       [](BuildSpec& b) { b.variance = {2}, b.attrs.exponential_avg_factor = 0.5f; },
       "channel counts differ: x is [2,3,3,4] (x:0), variance is [2] (variance:0)"},
      {"Dtype", [](BuildSpec& b) { b.vector_dtype = DT_DOUBLE; },
       "dtype mismatch: x is float32 (x:0), scale is float64 (scale:0)"},
      {"NegativeEpsilon", [](BuildSpec& b) { b.attrs.epsilon = -1e-3f; },
       "attribute epsilon is -0.001, but must be finite and >= 0"},
      {"NaNEpsilon", [nan](BuildSpec& b) { b.attrs.epsilon = nan; },
       "attribute epsilon is nan, but must be finite and >= 0"},
      {"InfiniteFactor", [inf](BuildSpec& b) { b.attrs.exponential_avg_factor = inf; },
       "attribute exponential_avg_factor is inf, but must be finite"},
      {"DataFormat", [](BuildSpec& b) { b.attrs.data_format = "NCHW"; },
       "attribute data_format is 'NCHW', but only 'NHWC' (channels last) is supported"},
  };
  for (const BuildErrorCase& c : cases) {
    SCOPED_TRACE(c.name);
    BuildSpec b;
    c.change(b);
    Scope root = Scope::NewRootScope();
    auto in = [&](const char* name, DataType dtype, const PartialShape& shape) {
      return ops::Placeholder(root.WithOpName(name), dtype, {.shape = shape});
    };
    auto bn = ops::FusedBatchNorm(
        root.WithOpName("bn"), in("x", DT_FLOAT, b.x), in("scale", b.vector_dtype, b.scale),
        in("offset", b.vector_dtype, b.offset), in("mean", b.vector_dtype, b.mean),
        in("variance", b.vector_dtype, b.variance), b.attrs);
    EXPECT_FALSE(bn.y.valid());
    EXPECT_EQ(root.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(root.status().message(), "bn (FusedBatchNormV3): " + c.message);
  }
}

TEST(FusedBatchNorm, IntegerInputIsRejected) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_INT32, {.shape = {1, 1, 1, 1}});
  ops::FusedBatchNorm(root.WithOpName("bn"), x, x, x, x, x);
  EXPECT_EQ(root.status().message(),
            "bn (FusedBatchNormV3): x is int32 (x:0), but must be one of float32, float64");
}

TEST(FusedBatchNormGrad, MismatchedYBackpropFailsAtBuildTime) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, {.shape = {2, 3, 3, 4}});
  Output dy = ops::Placeholder(root.WithOpName("dy"), DT_FLOAT, {.shape = {2, 3, 4, 4}});
  Output v = ops::Placeholder(root.WithOpName("v"), DT_FLOAT, {.shape = {4}});
  ops::FusedBatchNormGrad(root.WithOpName("g"), dy, x, v, v, v, v);
  EXPECT_EQ(root.status().message(),
            "g (FusedBatchNormGradV3): shapes must be equal: y_backprop is [2,3,4,4] (dy:0), x is "
            "[2,3,3,4] (x:0)");
}

struct RunErrorCase {
  std::string name;
  TensorShape x, scale, mean;
  bool training;
  std::string message;  // after "bn (FusedBatchNormV3): "
};

TEST(FusedBatchNorm, RunTimeShapeErrorsNameTheInput) {
  const RunErrorCase cases[] = {
      {"Rank2", {6, 4}, {4}, {4}, true, "x must have rank 4 (NHWC), got [6,4]"},
      {"Scale",
       {1, 2, 2, 4},
       {3},
       {4},
       true,
       "scale must be a vector of 4 elements (the channels of [1,2,2,4]), got [3]"},
      {"MeanInInference",
       {1, 2, 2, 4},
       {4},
       {0},
       false,
       "mean must be a vector of 4 elements (the channels of [1,2,2,4]), got [0]"},
      {"MeanMatrix", {1, 2, 2, 4}, {4}, {2, 2}, true, "mean must be a vector, got [2,2]"},
  };
  for (const RunErrorCase& c : cases) {
    SCOPED_TRACE(c.name);
    Scope root = Scope::NewRootScope();
    Output x = ops::Placeholder(root, DT_FLOAT);
    Output scale = ops::Placeholder(root, DT_FLOAT);
    Output mean = ops::Placeholder(root, DT_FLOAT);
    auto bn = ops::FusedBatchNorm(root.WithOpName("bn"), x, scale, scale, mean, scale,
                                  {.is_training = c.training});
    ASSERT_TRUE(root.ok()) << root.status();
    Status s = testing::Evaluate(bn.y, {{x, Tensor(DT_FLOAT, c.x)},
                                        {scale, Tensor(DT_FLOAT, c.scale)},
                                        {mean, Tensor(DT_FLOAT, c.mean)}})
                   .status();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message(), "bn (FusedBatchNormV3): " + c.message);
  }
}

TEST(FusedBatchNormGrad, RunTimeShapeErrorsNameTheInput) {
  Scope root = Scope::NewRootScope();
  Output dy = ops::Placeholder(root, DT_FLOAT);
  Output x = ops::Placeholder(root, DT_FLOAT);
  Output v = ops::Placeholder(root, DT_FLOAT);
  auto g = ops::FusedBatchNormGrad(root.WithOpName("g"), dy, x, v, v, v, v);
  ASSERT_TRUE(root.ok()) << root.status();
  Status s = testing::Evaluate(g.x_backprop, {{dy, Tensor(DT_FLOAT, {1, 2, 2, 3})},
                                              {x, Tensor(DT_FLOAT, {1, 2, 3, 3})},
                                              {v, Tensor(DT_FLOAT, {3})}})
                 .status();
  EXPECT_EQ(s.message(),
            "g (FusedBatchNormGradV3): shapes must be equal: y_backprop is [1,2,2,3], x is "
            "[1,2,3,3]");
  s = testing::Evaluate(g.x_backprop, {{dy, Tensor(DT_FLOAT, {1, 2, 2, 3})},
                                       {x, Tensor(DT_FLOAT, {1, 2, 2, 3})},
                                       {v, Tensor(DT_FLOAT, {2})}})
          .status();
  EXPECT_EQ(s.message(),
            "g (FusedBatchNormGradV3): scale must be a vector of 3 elements (the channels of "
            "[1,2,2,3]), got [2]");
}

// ------------------------------------------------- Keras' moving averages

// ------------------------------------------------------------- LayerNorm

// Rows of the last axis against a naive double reference, forward and
// gradient: d/dx of sum(dy * y) is inv_std * (dy - mean(dy) - y * mean(dy *
// y)), and the same bits on 1, 2 and 4 threads (2,600 rows: parallel).
TEST(LayerNorm, MatchesNaiveReferenceAndTheThreads) {
  std::mt19937 rng(61);
  const std::vector<TensorShape> shapes = {{7}, {3, 5}, {2, 3, 9}, {0, 4}, {2600, 33}};
  for (DataType dtype : {DT_FLOAT, DT_DOUBLE}) {
    for (const TensorShape& shape : shapes) {
      SCOPED_TRACE(std::string(DataTypeName(dtype)) + " " + shape.ToString());
      const Tensor x = RandomTensor(dtype, shape, rng, -3, 5);
      const Tensor dy = RandomTensor(dtype, shape, rng, -2, 2);
      Scope root = Scope::NewRootScope();
      Output in = ops::Const(root, x);
      Output y = ops::LayerNorm(root, in, 1e-3f);
      Output dx = ops::LayerNormGrad(root, ops::Const(root, dy), in, 1e-3f);
      ASSERT_TRUE(root.ok()) << root.status();
      const int64_t n = shape.dim(shape.rank() - 1);
      const std::vector<double> xs = ToDoubles(x), dys = ToDoubles(dy);
      std::vector<double> want_y(xs.size()), want_dx(xs.size());
      for (size_t r = 0; n > 0 && r < xs.size() / n; ++r) {
        double mean = 0, variance = 0, dy_mean = 0, dyy_mean = 0;
        for (int64_t j = 0; j < n; ++j) mean += xs[r * n + j] / n;
        for (int64_t j = 0; j < n; ++j) variance += std::pow(xs[r * n + j] - mean, 2) / n;
        const double inv_std = 1 / std::sqrt(variance + double{1e-3f});
        for (int64_t j = 0; j < n; ++j) {
          want_y[r * n + j] = (xs[r * n + j] - mean) * inv_std;
          dy_mean += dys[r * n + j] / n;
          dyy_mean += dys[r * n + j] * want_y[r * n + j] / n;
        }
        for (int64_t j = 0; j < n; ++j) {
          want_dx[r * n + j] = inv_std * (dys[r * n + j] - dy_mean - want_y[r * n + j] * dyy_mean);
        }
      }
      const std::vector<Tensor> one = RunWithThreads(root.graph(), {y, dx}, 1);
      ASSERT_EQ(one.size(), 2u);
      const double tol = dtype == DT_FLOAT ? 2e-5 : 1e-12;
      ExpectNear(one[0], shape, want_y, tol, tol, "LayerNorm");
      ExpectNear(one[1], shape, want_dx, tol, tol, "LayerNormGrad");
      for (int threads : {2, 4}) {
        const std::vector<Tensor> many = RunWithThreads(root.graph(), {y, dx}, threads);
        ASSERT_EQ(many.size(), 2u);
        testing::ExpectIdentical(many[0], one[0], "y, " + std::to_string(threads) + " threads");
        testing::ExpectIdentical(many[1], one[1], "dx, " + std::to_string(threads) + " threads");
      }
    }
  }
}

TEST(LayerNorm, BadInputIsInvalidArgumentNamingIt) {
  Scope root = Scope::NewRootScope();
  ops::LayerNorm(root.WithOpName("ints"), ops::Const<int32_t>(root, {1, 2}), 1e-3f);
  EXPECT_THAT(root.status(), testing::StatusIs(StatusCode::kInvalidArgument, "ints"));
  Scope scalar = Scope::NewRootScope();
  ops::LayerNorm(scalar.WithOpName("scalar"), ops::Const<float>(scalar, 1.0f), 1e-3f);
  EXPECT_THAT(scalar.status(), testing::StatusIs(StatusCode::kInvalidArgument, "scalar"));
  Scope eps = Scope::NewRootScope();
  ops::LayerNorm(eps.WithOpName("eps"), ops::Const<float>(eps, {1, 2}), -1.0f);
  EXPECT_THAT(eps.status(), testing::StatusIs(StatusCode::kInvalidArgument, "epsilon"));
  Scope grad = Scope::NewRootScope();
  ops::LayerNormGrad(grad.WithOpName("grad"), ops::Const<float>(grad, {1, 2, 3}),
                     ops::Const<float>(grad, {1, 2}), 1e-3f);
  EXPECT_THAT(grad.status(), testing::StatusIs(StatusCode::kInvalidArgument, "y_backprop"));
}

TEST(AssignMovingAverage, SubtractsTheDecayedDifferenceAsKerasDoes) {
  Scope root = Scope::NewRootScope();
  auto moving = Variable::Create(root, "moving_variance", ops::Const<float>(root, {1, 2, 3}));
  Output batch = ops::Placeholder(root, DT_FLOAT, {.shape = {3}});
  Output update = ops::AssignMovingAverage(root, *moving, batch, 0.99);
  ASSERT_TRUE(root.ok()) << root.status();
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto session, Session::Create(root.graph()));
  CKFLOW_ASSERT_OK(session->Run({}, {}, {moving->initializer()}).status());
  std::vector<float> want = {1, 2, 3};
  const std::vector<float> stats[] = {{0.5f, 4, 3}, {2, -1, 0.25f}};
  for (const std::vector<float>& stat : stats) {
    CKFLOW_ASSERT_OK(session->Run({{batch, Tensor::FromVector(stat)}}, {}, {update}).status());
    // Keras: moving -= (moving - stat) * float(1 - 0.99), in float.
    const float decay = static_cast<float>(1.0 - 0.99);
    for (size_t i = 0; i < want.size(); ++i) want[i] -= (want[i] - stat[i]) * decay;
    CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> got, session->Run({}, {moving->value()}));
    EXPECT_EQ(ToDoubles(got[0]), ToDoubles(Tensor::FromVector(want)));
  }
}

TEST(AssignMovingAverage, FusedAveragingMatchesTheAssignSubRule) {
  // tf-keras in TensorFlow 2 lets the op average (exponential_avg_factor
  // = 1 - momentum) and assigns its outputs; in a TF1 graph it runs the op
  // with factor 1 and assign_subs. Both give the same statistics.
  std::mt19937 rng(56);
  Tensor x = RandomTensor(DT_DOUBLE, {4, 3, 3, 2}, rng, 1, 3);
  Tensor moving_mean = Tensor::FromVector<double>({0.5, -0.5});
  Tensor moving_variance = Tensor::FromVector<double>({1, 2});
  Scope root = Scope::NewRootScope();
  Tensor ones = Tensor::FromVector<double>({1, 1});
  Tensor zeros = Tensor::FromVector<double>({0, 0});
  auto fused = ops::FusedBatchNorm(root, x, ones, zeros, moving_mean, moving_variance,
                                   {.exponential_avg_factor = 0.01f});
  auto plain = ops::FusedBatchNorm(root, x, ones, zeros, moving_mean, moving_variance);
  ASSERT_TRUE(root.ok()) << root.status();
  testing::Evaluator eval(root.graph());
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> got,
                              eval.Run({}, {fused.batch_mean, fused.batch_variance,
                                            plain.batch_mean, plain.batch_variance}));
  const double factor = static_cast<double>(0.01f);
  for (int c = 0; c < 2; ++c) {
    const double mean = moving_mean.flat<double>()[c];
    const double variance = moving_variance.flat<double>()[c];
    EXPECT_NEAR(got[0].flat<double>()[c], mean - (mean - got[2].flat<double>()[c]) * factor, 1e-12);
    EXPECT_NEAR(got[1].flat<double>()[c], variance - (variance - got[3].flat<double>()[c]) * factor,
                1e-12);
  }
}

}  // namespace
}  // namespace ckflow
