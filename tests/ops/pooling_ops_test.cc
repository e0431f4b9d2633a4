// Pooling: MaxPool, AvgPool and their gradient ops against naive loops in
// double (ties in MaxPool resolved by TensorFlow's scan: the first maximum
// of the window in row-major order), table driven over windows, strides and
// paddings; bit-identical results on 1, 2 and 4 threads; gradients against
// finite differences; and the shape and attribute errors.
#include "ops/pooling_ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "ops/array_ops.h"
#include "tests/ops/gradient_check.h"
#include "tests/ops/op_test_util.h"
#include "tests/ops/window_test_util.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

using testing::At;
using testing::Evaluate;
using testing::ExpectIdentical;
using testing::ExpectNear;
using testing::ParamName;
using testing::RandomTensor;
using testing::RunWithThreads;
using testing::ToDoubles;
using testing::WindowDim;

struct PoolCase {
  std::string name;
  std::vector<int64_t> input;
  ops::PoolAttrs attrs;
};

void PrintTo(const PoolCase& c, std::ostream* os) { *os << c.name; }

struct PoolReference {
  std::vector<int64_t> out_dims;
  std::vector<double> max, avg, max_grad, avg_grad;
};

// Every output pixel's window, clipped to the input, visited in row-major
// order: max (the first largest wins), mean, and the gradients of both.
PoolReference NaivePool(const PoolCase& c, const std::vector<double>& x,
                        const std::vector<double>& dy) {
  const auto& a = c.attrs;
  const testing::NaiveDim rows = WindowDim(c.input[1], a.ksize[1], 1, a.strides[1], a.padding);
  const testing::NaiveDim cols = WindowDim(c.input[2], a.ksize[2], 1, a.strides[2], a.padding);
  PoolReference r;
  r.out_dims = {c.input[0], rows.out, cols.out, c.input[3]};
  const auto& o = r.out_dims;
  r.max.assign(o[0] * o[1] * o[2] * o[3], 0);
  r.avg = r.max;
  r.max_grad.assign(x.size(), 0);
  r.avg_grad = r.max_grad;
  for (int64_t n = 0; n < o[0]; ++n) {
    for (int64_t oh = 0; oh < o[1]; ++oh) {
      for (int64_t ow = 0; ow < o[2]; ++ow) {
        for (int64_t ch = 0; ch < o[3]; ++ch) {
          const int64_t yi = At(o, n, oh, ow, ch);
          int64_t best = -1, count = 0;
          double sum = 0;
          std::vector<int64_t> window;
          for (int64_t h = oh * a.strides[1] - rows.pad;
               h < oh * a.strides[1] - rows.pad + a.ksize[1]; ++h) {
            for (int64_t w = ow * a.strides[2] - cols.pad;
                 w < ow * a.strides[2] - cols.pad + a.ksize[2]; ++w) {
              if (h < 0 || h >= c.input[1] || w < 0 || w >= c.input[2]) continue;
              const int64_t xi = At(c.input, n, h, w, ch);
              if (best < 0 || x[xi] > x[best]) best = xi;
              sum += x[xi];
              ++count;
              window.push_back(xi);
            }
          }
          r.max[yi] = x[best];
          r.avg[yi] = sum / count;
          r.max_grad[best] += dy[yi];
          for (int64_t xi : window) r.avg_grad[xi] += dy[yi] / count;
        }
      }
    }
  }
  return r;
}

struct PoolOps {
  Output max, avg, max_grad, avg_grad;
};

PoolOps BuildPoolOps(const Scope& s, const PoolCase& c, const Tensor& x, const Tensor& dy) {
  Output xc = ops::Const(s, x), dyc = ops::Const(s, dy);
  Output max = ops::MaxPool(s, xc, c.attrs);
  return {max, ops::AvgPool(s, xc, c.attrs), ops::MaxPoolGrad(s, xc, max, dyc, c.attrs),
          ops::AvgPoolGrad(
              s, ops::Const<int32_t>(s, std::vector<int32_t>(c.input.begin(), c.input.end()), {4}),
              dyc, c.attrs)};
}

// `lo` and `hi` bound the inputs; with whole numbers from a small range
// most windows hold ties.
void ExpectMatchesNaive(const PoolCase& c, DataType dtype, double lo, double hi,
                        bool whole_numbers) {
  std::mt19937 rng(17);
  Tensor x = RandomTensor(dtype, TensorShape(c.input), rng, lo, hi);
  if (whole_numbers) {
    x = testing::MakeTensor(dtype, TensorShape(c.input), [&] {
      std::vector<double> v = ToDoubles(x);
      for (double& e : v) e = std::round(e);
      return v;
    }());
  }
  Scope root = Scope::NewRootScope();
  Output probe = ops::MaxPool(root, ops::Const(root, x), c.attrs);
  ASSERT_TRUE(root.ok()) << root.status();
  ASSERT_TRUE(probe.shape().IsFullyDefined());
  Tensor dy = RandomTensor(dtype, probe.shape().ToTensorShape(), rng, -1, 1);
  PoolReference want = NaivePool(c, ToDoubles(x), ToDoubles(dy));
  PoolOps got = BuildPoolOps(root, c, x, dy);
  ASSERT_TRUE(root.ok()) << root.status();
  const double eps = dtype == DT_FLOAT ? 1e-6 : 1e-14;
  const double terms = static_cast<double>(c.attrs.ksize[1] * c.attrs.ksize[2]);
  const std::string what = c.name + (dtype == DT_FLOAT ? " float32" : " float64");
  const TensorShape out(want.out_dims), in(c.input);
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor max, Evaluate(got.max));
  ExpectNear(max, out, want.max, 0, 0, what + " MaxPool");
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor avg, Evaluate(got.avg));
  ExpectNear(avg, out, want.avg, eps, eps * terms, what + " AvgPool");
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor max_grad, Evaluate(got.max_grad));
  ExpectNear(max_grad, in, want.max_grad, eps, eps * terms, what + " MaxPoolGrad");
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor avg_grad, Evaluate(got.avg_grad));
  ExpectNear(avg_grad, in, want.avg_grad, eps, eps * terms, what + " AvgPoolGrad");
}

ops::PoolAttrs Pool(int64_t kh, int64_t kw, int64_t sh, int64_t sw, std::string padding) {
  return {.ksize = {1, kh, kw, 1}, .strides = {1, sh, sw, 1}, .padding = std::move(padding)};
}

std::vector<PoolCase> PoolCases() {
  return {
      {"Valid2x2Stride2", {2, 6, 6, 3}, Pool(2, 2, 2, 2, "VALID")},
      {"Valid2x2Stride2OddSizes", {2, 7, 5, 3}, Pool(2, 2, 2, 2, "VALID")},
      {"Same2x2Stride2OddSizes", {2, 7, 5, 3}, Pool(2, 2, 2, 2, "SAME")},
      {"Same3x3Stride1", {2, 5, 6, 2}, Pool(3, 3, 1, 1, "SAME")},
      {"Same3x3Stride2", {1, 9, 8, 4}, Pool(3, 3, 2, 2, "SAME")},
      {"Valid3x3Stride2Overlapping", {2, 9, 7, 2}, Pool(3, 3, 2, 2, "VALID")},
      {"Uneven", {2, 8, 9, 3}, Pool(2, 4, 3, 2, "SAME")},
      {"StrideLargerThanWindow", {1, 10, 11, 2}, Pool(2, 2, 4, 3, "SAME")},
      {"OneByOne", {2, 4, 5, 3}, Pool(1, 1, 1, 1, "VALID")},
      {"WindowLargerThanSameInput", {2, 3, 3, 2}, Pool(5, 4, 1, 1, "SAME")},
      {"WholeInput", {2, 4, 5, 3}, Pool(4, 5, 1, 1, "VALID")},
      {"ManyChannels", {2, 6, 6, 150}, Pool(3, 3, 2, 2, "SAME")},
      {"ManyChannelsDisjointOddSizes", {2, 7, 6, 150}, Pool(2, 2, 2, 2, "VALID")},
      // 32 and 64 channels: whole vectors, a path of their own.
      {"ThirtyTwoChannels", {2, 7, 6, 32}, Pool(3, 3, 2, 2, "SAME")},
      {"SixtyFourChannelsDisjoint", {2, 5, 6, 64}, Pool(2, 2, 2, 2, "VALID")},
  };
}

class PoolTest : public ::testing::TestWithParam<PoolCase> {};

TEST_P(PoolTest, ForwardAndGradientsMatchNaiveLoops) {
  for (DataType dtype : {DT_FLOAT, DT_DOUBLE}) ExpectMatchesNaive(GetParam(), dtype, -1, 1, false);
}

TEST_P(PoolTest, MaxPoolGradRoutesTiesToTheFirstMaximumInRowMajorOrder) {
  for (DataType dtype : {DT_FLOAT, DT_DOUBLE}) ExpectMatchesNaive(GetParam(), dtype, 0, 2, true);
}

INSTANTIATE_TEST_SUITE_P(Cases, PoolTest, ::testing::ValuesIn(PoolCases()), ParamName<PoolCase>);

TEST(MaxPoolGrad, EqualInputsSendEachGradientToItsWindowsFirstElement) {
  Scope root = Scope::NewRootScope();
  const ops::PoolAttrs attrs = Pool(3, 3, 2, 2, "VALID");
  Output x = ops::Const(root, Tensor::FromVector(std::vector<float>(25, 1.5f), {1, 5, 5, 1}));
  Output y = ops::MaxPool(root, x, attrs);
  Output g = ops::Const(root, Tensor::FromVector<float>({1, 10, 100, 1000}, {1, 2, 2, 1}));
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor dx, Evaluate(ops::MaxPoolGrad(root, x, y, g, attrs)));
  // Windows start at rows/columns 0 and 2.
  std::vector<double> want(25, 0);
  want[0 * 5 + 0] = 1;
  want[0 * 5 + 2] = 10;
  want[2 * 5 + 0] = 100;
  want[2 * 5 + 2] = 1000;
  ExpectNear(dx, {1, 5, 5, 1}, want, 0, 0, "MaxPoolGrad of equal inputs");
}

TEST(MaxPoolGrad, NaNsAndSignedZerosFollowTheScan) {
  // TensorFlow's scan takes the first tap, then any strictly greater one: a
  // NaN first tap keeps the window, a later NaN never wins, and +0 does not
  // beat -0. A NaN gradient reaches its window's maximum and nothing else.
  // One channel, and 32 (whole vectors) with the same values in each.
  const ops::PoolAttrs attrs = Pool(2, 2, 2, 2, "VALID");
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // Four 2x2 windows of a 4x4 image, row-major taps listed per window.
  const float windows[4][4] = {{nan, 5, 7, 1}, {1, nan, 7, 3}, {-0.0f, 0.0f, -1, -2}, {2, 9, 9, 1}};
  for (int64_t depth : {1, 32}) {
    SCOPED_TRACE(std::to_string(depth) + " channels");
    Scope root = Scope::NewRootScope();
    std::vector<float> image(16 * depth), grads(4 * depth);
    for (int wi = 0; wi < 4; ++wi) {
      for (int t = 0; t < 4; ++t) {
        const int h = (wi / 2) * 2 + t / 2, w = (wi % 2) * 2 + t % 2;
        std::fill_n(image.begin() + (h * 4 + w) * depth, depth, windows[wi][t]);
      }
      std::fill_n(grads.begin() + wi * depth, depth, (std::vector<float>{1, 10, 100, nan})[wi]);
    }
    Output x = ops::Const(root, Tensor::FromVector(image, {1, 4, 4, depth}));
    Output y = ops::MaxPool(root, x, attrs);
    Output g = ops::Const(root, Tensor::FromVector(grads, {1, 2, 2, depth}));
    CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor pooled, Evaluate(y));
    CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor dx, Evaluate(ops::MaxPoolGrad(root, x, y, g, attrs)));
    const int taken[4] = {0, 2, 0, 1};  // the tap each window's maximum (and gradient) is
    for (int64_t c = 0; c < depth; ++c) {
      for (int wi = 0; wi < 4; ++wi) {
        const float max = pooled.flat<float>()[wi * depth + c];
        const float want = windows[wi][taken[wi]];
        if (std::isnan(want)) {
          EXPECT_TRUE(std::isnan(max)) << "window " << wi;
        } else {
          EXPECT_EQ(max, want) << "window " << wi;
          EXPECT_EQ(std::signbit(max), std::signbit(want)) << "window " << wi;
        }
        for (int t = 0; t < 4; ++t) {
          const int h = (wi / 2) * 2 + t / 2, w = (wi % 2) * 2 + t % 2;
          const float v = dx.flat<float>()[(h * 4 + w) * depth + c];
          SCOPED_TRACE("window " + std::to_string(wi) + " tap " + std::to_string(t));
          if (t != taken[wi]) {
            EXPECT_EQ(v, 0.0f);
            EXPECT_FALSE(std::signbit(v));
          } else if (wi == 3) {
            EXPECT_TRUE(std::isnan(v));
          } else {
            EXPECT_EQ(v, (std::vector<float>{1, 10, 100})[wi]);
          }
        }
      }
    }
  }
}

// ------------------------------------------------------------ threads

TEST(Pooling, SameBitsOnOneTwoAndFourThreads) {
  const PoolCase c = {"Big", {8, 30, 30, 96}, Pool(3, 3, 2, 2, "SAME")};
  std::mt19937 rng(9);
  Tensor x = RandomTensor(DT_FLOAT, TensorShape(c.input), rng);
  Tensor dy = RandomTensor(DT_FLOAT, {8, 15, 15, 96}, rng);
  Scope root = Scope::NewRootScope();
  PoolOps o = BuildPoolOps(root, c, x, dy);
  ASSERT_TRUE(root.ok()) << root.status();
  for (const auto& [name, out] :
       {std::pair{"MaxPool", o.max}, std::pair{"AvgPool", o.avg},
        std::pair{"MaxPoolGrad", o.max_grad}, std::pair{"AvgPoolGrad", o.avg_grad}}) {
    CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor one, RunWithThreads(out, 1));
    for (int threads : {2, 4}) {
      CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor many, RunWithThreads(out, threads));
      ExpectIdentical(one, many, std::string(name) + " on " + std::to_string(threads) + " threads");
    }
  }
}

// ------------------------------------------------------------ gradients

struct PoolGradCase {
  std::string name;
  bool max;
  std::vector<int64_t> input;
  ops::PoolAttrs attrs;
  bool known_shapes;
};

void PrintTo(const PoolGradCase& c, std::ostream* os) { *os << c.name; }

class PoolGradientTest : public ::testing::TestWithParam<PoolGradCase> {};

TEST_P(PoolGradientTest, MatchesFiniteDifferences) {
  const PoolGradCase& c = GetParam();
  Scope root = Scope::NewRootScope();
  std::mt19937 rng(21);
  Output x = ops::Placeholder(
      root.WithOpName("x"), DT_DOUBLE,
      {.shape = c.known_shapes ? PartialShape(c.input) : PartialShape({-1, -1, -1, -1})});
  Output y = c.max ? ops::MaxPool(root, x, c.attrs) : ops::AvgPool(root, x, c.attrs);
  // Distinct inputs: a step of 1e-6 never changes which element is a max.
  testing::ExpectGradientsMatchFiniteDifferences(
      root, y, {x}, {testing::RandomDoubles(c.input, -1, 1, rng)}, 1e-6, 1e-7, rng);
}

std::vector<PoolGradCase> PoolGradCases() {
  std::vector<PoolGradCase> cases;
  for (bool max : {true, false}) {
    for (bool known : {true, false}) {
      const std::string suffix = known ? "_StaticShapes" : "_UnknownDims";
      const std::string op = max ? "MaxPool" : "AvgPool";
      cases.push_back(
          {op + "Same3x3Stride2" + suffix, max, {2, 5, 6, 2}, Pool(3, 3, 2, 2, "SAME"), known});
      cases.push_back(
          {op + "Valid2x2" + suffix, max, {1, 4, 5, 3}, Pool(2, 2, 1, 1, "VALID"), known});
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Cases, PoolGradientTest, ::testing::ValuesIn(PoolGradCases()),
                         ParamName<PoolGradCase>);

// ------------------------------------------------------------ errors

struct PoolErrorCase {
  std::string name;
  std::vector<int64_t> input;
  ops::PoolAttrs attrs;
  std::string message;  // after "pool (MaxPool): "
};

void PrintTo(const PoolErrorCase& c, std::ostream* os) { *os << c.name; }

std::vector<PoolErrorCase> PoolErrorCases() {
  return {
      {"Rank",
       {5, 5, 3},
       Pool(2, 2, 2, 2, "VALID"),
       "input is [5,5,3] (x:0), but must have rank 4"},
      {"ZeroKsize",
       {1, 5, 5, 3},
       Pool(0, 2, 2, 2, "VALID"),
       "ksize is [1,0,2,1], but must be positive"},
      {"NegativeStride",
       {1, 5, 5, 3},
       Pool(2, 2, -1, 2, "VALID"),
       "strides is [1,-1,2,1], but must be positive"},
      {"DepthKsize",
       {1, 5, 5, 3},
       {.ksize = {1, 2, 2, 2}, .strides = {1, 2, 2, 1}},
       "ksize is [1,2,2,2], but pooling over the batch and depth dimensions is not supported "
       "(must be 1)"},
      {"BatchStride",
       {1, 5, 5, 3},
       {.ksize = {1, 2, 2, 1}, .strides = {2, 2, 2, 1}},
       "strides is [2,2,2,1], but strides on the batch and depth dimensions must be 1"},
      {"KsizeLength",
       {1, 5, 5, 3},
       {.ksize = {2, 2}, .strides = {1, 2, 2, 1}},
       "ksize is [2,2], but must have 4 values (NHWC)"},
      {"ExplicitPadding",
       {1, 5, 5, 3},
       Pool(2, 2, 2, 2, "EXPLICIT"),
       "padding is \"EXPLICIT\", but must be SAME or VALID"},
      {"WindowLargerThanValidInput",
       {1, 2, 5, 3},
       Pool(3, 3, 1, 1, "VALID"),
       "the window spans 3 rows, more than the input's 2 with padding VALID: input is [1,2,5,3] "
       "(x:0)"},
  };
}

class PoolErrorTest : public ::testing::TestWithParam<PoolErrorCase> {};

TEST_P(PoolErrorTest, FailsAtBuildTimeNamingTheNode) {
  const PoolErrorCase& c = GetParam();
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, {.shape = PartialShape(c.input)});
  ops::MaxPool(root.WithOpName("pool"), x, c.attrs);
  EXPECT_EQ(root.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(root.status().message(), "pool (MaxPool): " + c.message);
}

TEST_P(PoolErrorTest, FailsAtRunTimeWhenShapesAreKnownOnlyThen) {
  const PoolErrorCase& c = GetParam();
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT);
  Output y = ops::MaxPool(root.WithOpName("pool"), x, c.attrs);
  if (!root.ok()) {
    EXPECT_EQ(root.status().message(), "pool (MaxPool): " + c.message);
    return;
  }
  Status s = Evaluate(y, {{x, Tensor(DT_FLOAT, TensorShape(c.input))}}).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  std::string message = c.message;
  message.erase(message.find(" (x:0)"), 6);
  EXPECT_EQ(s.message(), "pool (MaxPool): " + message);
}

INSTANTIATE_TEST_SUITE_P(Cases, PoolErrorTest, ::testing::ValuesIn(PoolErrorCases()),
                         ParamName<PoolErrorCase>);

TEST(MaxPoolGrad, GradMustMatchThePoolingAtBuildTime) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, {.shape = {1, 6, 6, 2}});
  Output y = ops::Placeholder(root.WithOpName("y"), DT_FLOAT, {.shape = {1, 3, 3, 2}});
  Output g = ops::Placeholder(root.WithOpName("g"), DT_FLOAT, {.shape = {1, 3, 2, 2}});
  ops::MaxPoolGrad(root.WithOpName("mpg"), x, y, g);
  EXPECT_EQ(root.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(root.status().message(),
            "mpg (MaxPoolGrad): grad is [1,3,2,2] (g:0), but the pooling's output is [1,3,3,2]: "
            "orig_input is [1,6,6,2] (x:0)");
}

TEST(AvgPoolGrad, GradMustMatchThePoolingAtRunTime) {
  Scope root = Scope::NewRootScope();
  Output sizes = ops::Placeholder(root.WithOpName("sizes"), DT_INT32);
  Output g = ops::Placeholder(root.WithOpName("g"), DT_FLOAT);
  Output dx = ops::AvgPoolGrad(root.WithOpName("apg"), sizes, g);
  ASSERT_TRUE(root.ok()) << root.status();
  Status s = Evaluate(dx, {{sizes, Tensor::FromVector<int32_t>({1, 6, 6, 2})},
                           {g, Tensor(DT_FLOAT, {1, 3, 2, 2})}})
                 .status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "apg (AvgPoolGrad): grad is [1,3,2,2], but the pooling's output is [1,3,3,2]: the "
            "input is [1,6,6,2]");
}

TEST(AvgPoolGrad, OrigInputShapeMustHaveFourValues) {
  Scope root = Scope::NewRootScope();
  Output g = ops::Placeholder(root.WithOpName("g"), DT_FLOAT, {.shape = {1, 3, 3, 2}});
  ops::AvgPoolGrad(root.WithOpName("apg"),
                   ops::Const<int32_t>(root.WithOpName("sizes"), {6, 6, 2}, {3}), g);
  EXPECT_EQ(root.status().message(),
            "apg (AvgPoolGrad): orig_input_shape is [6,6,2] (sizes:0), but must describe a "
            "shape of rank 4");
}

TEST(MaxPool, HugeWindowsWithSamePaddingPoolTheWholeInput) {
  // The window is clipped to the input before it is scanned: an absurd
  // ksize costs nothing.
  Scope root = Scope::NewRootScope();
  const int64_t huge = int64_t{1} << 40;
  Tensor x = Tensor::FromVector<float>({1, 7, 3, 5}, {1, 2, 2, 1});
  Output y =
      ops::MaxPool(root, ops::Const(root, x),
                   {.ksize = {1, huge, huge, 1}, .strides = {1, 1, 1, 1}, .padding = "SAME"});
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor got, Evaluate(y));
  EXPECT_EQ(got.shape(), TensorShape({1, 2, 2, 1}));
  for (float v : got.flat<float>()) EXPECT_EQ(v, 7);
}

}  // namespace
}  // namespace ckflow
