// Convolutions: Conv2D, DepthwiseConv2dNative and their backprop ops against
// one naive loop over every (output pixel, tap, channel) in double, table
// driven over strides, paddings, dilations and sizes; bit-identical results
// on 1, 2 and 4 threads; gradients against finite differences; and every
// shape and attribute error at build and run time.
#include "ops/conv_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "ops/array_ops.h"
#include "ops/math_ops.h"
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

struct ConvCase {
  std::string name;
  std::vector<int64_t> input;   // [batch, rows, cols, depth]
  std::vector<int64_t> filter;  // [rows, cols, depth, out_depth or multiplier]
  ops::Conv2DAttrs attrs;
};

void PrintTo(const ConvCase& c, std::ostream* os) { *os << c.name; }

// Forward output and both gradients of one convolution, by the definition.
struct ConvReference {
  std::vector<int64_t> out_dims;
  std::vector<double> y, dx, dfilter;
  int64_t terms = 0;  // the most products one sum adds
};

std::vector<int64_t> OutDims(const ConvCase& c, bool depthwise) {
  const auto& p = c.attrs.explicit_paddings;
  auto dim = [&](int i) {
    return WindowDim(c.input[i], c.filter[i - 1], c.attrs.dilations[i], c.attrs.strides[i],
                     c.attrs.padding, p.empty() ? 0 : p[2 * i], p.empty() ? 0 : p[2 * i + 1]);
  };
  return {c.input[0], dim(1).out, dim(2).out, depthwise ? c.input[3] * c.filter[3] : c.filter[3]};
}

ConvReference NaiveConv(const ConvCase& c, bool depthwise, const std::vector<double>& x,
                        const std::vector<double>& f, const std::vector<double>& dy) {
  ConvReference r;
  r.out_dims = OutDims(c, depthwise);
  const auto& p = c.attrs.explicit_paddings;
  const int64_t pad_h = WindowDim(c.input[1], c.filter[0], c.attrs.dilations[1], c.attrs.strides[1],
                                  c.attrs.padding, p.empty() ? 0 : p[2])
                            .pad;
  const int64_t pad_w = WindowDim(c.input[2], c.filter[1], c.attrs.dilations[2], c.attrs.strides[2],
                                  c.attrs.padding, p.empty() ? 0 : p[4])
                            .pad;
  const std::vector<int64_t>& o = r.out_dims;
  r.y.assign(o[0] * o[1] * o[2] * o[3], 0);
  r.dx.assign(x.size(), 0);
  r.dfilter.assign(f.size(), 0);
  const int64_t depth = c.input[3];
  r.terms = c.filter[0] * c.filter[1] * (depthwise ? 1 : depth);
  for (int64_t n = 0; n < o[0]; ++n) {
    for (int64_t oh = 0; oh < o[1]; ++oh) {
      for (int64_t ow = 0; ow < o[2]; ++ow) {
        for (int64_t kh = 0; kh < c.filter[0]; ++kh) {
          for (int64_t kw = 0; kw < c.filter[1]; ++kw) {
            const int64_t ih = oh * c.attrs.strides[1] - pad_h + kh * c.attrs.dilations[1];
            const int64_t iw = ow * c.attrs.strides[2] - pad_w + kw * c.attrs.dilations[2];
            if (ih < 0 || ih >= c.input[1] || iw < 0 || iw >= c.input[2]) continue;
            for (int64_t ci = 0; ci < depth; ++ci) {
              for (int64_t j = 0; j < c.filter[3]; ++j) {
                const int64_t co = depthwise ? ci * c.filter[3] + j : j;
                const int64_t xi = At(c.input, n, ih, iw, ci);
                const int64_t fi = At(c.filter, kh, kw, ci, j);
                const int64_t yi = At(o, n, oh, ow, co);
                r.y[yi] += x[xi] * f[fi];
                r.dx[xi] += dy[yi] * f[fi];
                r.dfilter[fi] += x[xi] * dy[yi];
              }
            }
          }
        }
      }
    }
  }
  return r;
}

Output Int64s(const Scope& s, const std::vector<int64_t>& v) {
  return ops::Const<int64_t>(s, v, {static_cast<int64_t>(v.size())});
}

// The three ops of one kind on constants.
struct ConvOps {
  Output y, dx, dfilter;
};

ConvOps BuildConvOps(const Scope& s, bool depthwise, const ConvCase& c, const Tensor& x,
                     const Tensor& f, const Tensor& dy) {
  Output xc = ops::Const(s, x), fc = ops::Const(s, f), dyc = ops::Const(s, dy);
  if (depthwise) {
    return {ops::DepthwiseConv2dNative(s, xc, fc, c.attrs),
            ops::DepthwiseConv2dNativeBackpropInput(s, Int64s(s, c.input), fc, dyc, c.attrs),
            ops::DepthwiseConv2dNativeBackpropFilter(s, xc, Int64s(s, c.filter), dyc, c.attrs)};
  }
  return {ops::Conv2D(s, xc, fc, c.attrs),
          ops::Conv2DBackpropInput(s, Int64s(s, c.input), fc, dyc, c.attrs),
          ops::Conv2DBackpropFilter(s, xc, Int64s(s, c.filter), dyc, c.attrs)};
}

void ExpectMatchesNaive(const ConvCase& c, bool depthwise, DataType dtype) {
  std::mt19937 rng(7);
  Tensor x = RandomTensor(dtype, TensorShape(c.input), rng, -1, 1);
  Tensor f = RandomTensor(dtype, TensorShape(c.filter), rng, -1, 1);
  const std::vector<int64_t> out = OutDims(c, depthwise);
  Tensor dy = RandomTensor(dtype, TensorShape(out), rng, -1, 1);
  ConvReference want = NaiveConv(c, depthwise, ToDoubles(x), ToDoubles(f), ToDoubles(dy));
  Scope root = Scope::NewRootScope();
  ConvOps got = BuildConvOps(root, depthwise, c, x, f, dy);
  ASSERT_TRUE(root.ok()) << root.status();
  // Each sum adds `terms` products of numbers in [-1, 1]; the filter
  // gradient sums over batch and output pixels.
  const double eps = dtype == DT_FLOAT ? 2e-6 : 1e-14;
  const double filter_terms = static_cast<double>(out[0] * out[1] * out[2]);
  const std::string what = c.name + (dtype == DT_FLOAT ? " float32" : " float64");
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor y, Evaluate(got.y));
  ExpectNear(y, TensorShape(out), want.y, eps, eps * want.terms, what + " forward");
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor dx, Evaluate(got.dx));
  ExpectNear(dx, TensorShape(c.input), want.dx, eps, eps * want.terms * out[3],
             what + " BackpropInput");
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor df, Evaluate(got.dfilter));
  ExpectNear(df, TensorShape(c.filter), want.dfilter, eps, eps * filter_terms,
             what + " BackpropFilter");
}

ops::Conv2DAttrs Attrs(std::vector<int64_t> strides, std::string padding,
                       std::vector<int64_t> dilations = {1, 1, 1, 1},
                       std::vector<int64_t> explicit_paddings = {}) {
  return {.strides = std::move(strides),
          .padding = std::move(padding),
          .explicit_paddings = std::move(explicit_paddings),
          .dilations = std::move(dilations)};
}

std::vector<ConvCase> Conv2DCases() {
  return {
      {"Pointwise", {2, 5, 7, 3}, {1, 1, 3, 4}, Attrs({1, 1, 1, 1}, "VALID")},
      {"PointwiseSame", {2, 5, 7, 3}, {1, 1, 3, 4}, Attrs({1, 1, 1, 1}, "SAME")},
      {"PointwiseStride2", {2, 5, 7, 3}, {1, 1, 3, 4}, Attrs({1, 2, 2, 1}, "SAME")},
      {"Same3x3", {2, 6, 6, 3}, {3, 3, 3, 5}, Attrs({1, 1, 1, 1}, "SAME")},
      {"Valid3x3Stride2OddSizes", {3, 7, 9, 2}, {3, 3, 2, 4}, Attrs({1, 2, 2, 1}, "VALID")},
      {"Same7x7Stride2", {1, 11, 13, 3}, {7, 7, 3, 4}, Attrs({1, 2, 2, 1}, "SAME")},
      {"Valid7x7", {2, 9, 7, 2}, {7, 7, 2, 3}, Attrs({1, 1, 1, 1}, "VALID")},
      {"SameEvenWindow", {2, 6, 5, 2}, {2, 4, 2, 3}, Attrs({1, 1, 1, 1}, "SAME")},
      {"SameUnevenStrides", {2, 8, 9, 4}, {2, 3, 4, 3}, Attrs({1, 3, 2, 1}, "SAME")},
      {"SameStrideLargerThanWindow", {1, 10, 11, 2}, {2, 2, 2, 3}, Attrs({1, 4, 3, 1}, "SAME")},
      {"SameDilated", {2, 9, 8, 3}, {3, 3, 3, 2}, Attrs({1, 1, 1, 1}, "SAME", {1, 2, 2, 1})},
      {"OneChannel", {2, 8, 7, 1}, {3, 3, 1, 4}, Attrs({1, 1, 1, 1}, "VALID")},
      {"OneChannelSame5x5", {2, 6, 7, 1}, {5, 5, 1, 3}, Attrs({1, 1, 1, 1}, "SAME")},
      {"ValidDilatedUnevenly",
       {1, 10, 11, 2},
       {2, 3, 2, 3},
       Attrs({1, 1, 1, 1}, "VALID", {1, 2, 3, 1})},
      {"SameDilatedStride2",
       {2, 9, 10, 2},
       {3, 2, 2, 2},
       Attrs({1, 2, 2, 1}, "SAME", {1, 2, 2, 1})},
      {"Explicit",
       {2, 5, 6, 3},
       {3, 2, 3, 4},
       Attrs({1, 2, 1, 1}, "EXPLICIT", {1, 1, 1, 1}, {0, 0, 1, 2, 0, 3, 0, 0})},
      {"ExplicitDilated",
       {1, 6, 6, 2},
       {3, 3, 2, 2},
       Attrs({1, 1, 2, 1}, "EXPLICIT", {1, 2, 1, 1}, {0, 0, 2, 2, 1, 0, 0, 0})},
      // A 3x3 window over 1 or 3 channels runs direct kernels: runs of 32
      // output channels (16 in float64) held in registers, then the rest;
      // windows inside the image and over its edge.
      {"FirstLayerOneChannel", {3, 13, 11, 1}, {3, 3, 1, 37}, Attrs({1, 1, 1, 1}, "SAME")},
      {"FirstLayerOneChannelValid", {4, 28, 28, 1}, {3, 3, 1, 32}, Attrs({1, 1, 1, 1}, "VALID")},
      {"FirstLayerRgbStride2", {2, 15, 14, 3}, {3, 3, 3, 40}, Attrs({1, 2, 2, 1}, "SAME")},
      {"FirstLayerRgbDilatedExplicit",
       {2, 12, 12, 3},
       {3, 3, 3, 33},
       Attrs({1, 1, 2, 1}, "EXPLICIT", {1, 2, 2, 1}, {0, 0, 1, 2, 2, 0, 0, 0})},
      // Float output channels in multiples of 32: the forward pass and the
      // filter gradient in register tiles (of rows, of 12 or 6 taps), 64
      // channels at a time and then 32, and the rows and taps left over;
      // the input gradient too where kh * kw * in is a multiple of 32.
      {"FilterTiles32", {2, 9, 9, 5}, {3, 3, 5, 32}, Attrs({1, 1, 1, 1}, "SAME")},
      {"FilterTiles64", {3, 13, 13, 32}, {3, 3, 32, 64}, Attrs({1, 1, 1, 1}, "VALID")},
      {"FilterTiles64PartsOfImages", {1, 64, 40, 8}, {3, 3, 8, 64}, Attrs({1, 2, 1, 1}, "SAME")},
      {"Tiles96Channels", {2, 7, 6, 32}, {3, 3, 32, 96}, Attrs({1, 1, 1, 1}, "SAME")},
      {"Tiles160ChannelsPointwise", {2, 5, 5, 64}, {1, 1, 64, 160}, Attrs({1, 1, 1, 1}, "VALID")},
      // Large enough for blocks that are parts of images (the two phases of
      // BackpropInput) and for several partial filter gradients.
      {"PartsOfImages", {2, 40, 40, 16}, {3, 3, 16, 8}, Attrs({1, 1, 1, 1}, "SAME")},
      {"PartsOfImagesStride2", {1, 64, 30, 24}, {5, 5, 24, 6}, Attrs({1, 2, 1, 1}, "SAME")},
      {"PartsOfImagesDilated",
       {1, 48, 20, 32},
       {3, 3, 32, 4},
       Attrs({1, 1, 1, 1}, "SAME", {1, 3, 1, 1})},
  };
}

std::vector<ConvCase> DepthwiseCases() {
  return {
      {"Multiplier1", {2, 6, 7, 3}, {3, 3, 3, 1}, Attrs({1, 1, 1, 1}, "SAME")},
      {"Multiplier2Stride2", {2, 7, 7, 3}, {3, 3, 3, 2}, Attrs({1, 2, 2, 1}, "VALID")},
      {"Multiplier3Uneven", {1, 9, 8, 2}, {2, 3, 2, 3}, Attrs({1, 2, 3, 1}, "SAME")},
      {"Pointwise", {2, 4, 5, 4}, {1, 1, 4, 2}, Attrs({1, 1, 1, 1}, "VALID")},
      {"Dilated", {2, 9, 9, 3}, {3, 3, 3, 2}, Attrs({1, 1, 1, 1}, "SAME", {1, 2, 2, 1})},
      {"Explicit",
       {1, 5, 6, 2},
       {3, 3, 2, 2},
       Attrs({1, 1, 2, 1}, "EXPLICIT", {1, 1, 1, 1}, {0, 0, 2, 1, 1, 1, 0, 0})},
      {"Large7x7", {2, 20, 20, 16}, {7, 7, 16, 1}, Attrs({1, 1, 1, 1}, "SAME")},
  };
}

class Conv2DTest : public ::testing::TestWithParam<ConvCase> {};
class DepthwiseTest : public ::testing::TestWithParam<ConvCase> {};

TEST_P(Conv2DTest, ForwardAndBackpropsMatchNaiveLoops) {
  for (DataType dtype : {DT_FLOAT, DT_DOUBLE}) ExpectMatchesNaive(GetParam(), false, dtype);
}

TEST_P(DepthwiseTest, ForwardAndBackpropsMatchNaiveLoops) {
  for (DataType dtype : {DT_FLOAT, DT_DOUBLE}) ExpectMatchesNaive(GetParam(), true, dtype);
}

INSTANTIATE_TEST_SUITE_P(Cases, Conv2DTest, ::testing::ValuesIn(Conv2DCases()),
                         ParamName<ConvCase>);
INSTANTIATE_TEST_SUITE_P(Cases, DepthwiseTest, ::testing::ValuesIn(DepthwiseCases()),
                         ParamName<ConvCase>);

// ------------------------------------------------------------ threads

TEST(Conv2D, SameBitsOnOneTwoAndFourThreads) {
  // Whole images per block, parts of images, and the pointwise GEMM; the
  // backprops with their phases and partial filter gradients.
  const std::vector<ConvCase> cases = {
      {"WholeImages", {16, 12, 12, 8}, {3, 3, 8, 16}, Attrs({1, 1, 1, 1}, "SAME")},
      {"PartsOfImages", {3, 48, 40, 16}, {3, 3, 16, 8}, Attrs({1, 1, 1, 1}, "SAME")},
      {"Pointwise", {4, 20, 20, 32}, {1, 1, 32, 16}, Attrs({1, 1, 1, 1}, "VALID")},
      {"FirstLayer", {16, 28, 28, 1}, {3, 3, 1, 40}, Attrs({1, 1, 1, 1}, "VALID")},
      {"FilterTiles", {4, 30, 30, 16}, {3, 3, 16, 64}, Attrs({1, 1, 1, 1}, "SAME")},
      {"FirstLayerRgb", {2, 60, 50, 3}, {3, 3, 3, 32}, Attrs({1, 1, 1, 1}, "SAME")},
  };
  for (const ConvCase& c : cases) {
    for (bool depthwise : {false, true}) {
      ConvCase d = c;
      if (depthwise) d.filter[3] = 2;
      std::mt19937 rng(3);
      Tensor x = RandomTensor(DT_FLOAT, TensorShape(d.input), rng);
      Tensor f = RandomTensor(DT_FLOAT, TensorShape(d.filter), rng);
      Tensor dy = RandomTensor(DT_FLOAT, TensorShape(OutDims(d, depthwise)), rng);
      Scope root = Scope::NewRootScope();
      ConvOps o = BuildConvOps(root, depthwise, d, x, f, dy);
      ASSERT_TRUE(root.ok()) << root.status();
      for (const auto& [name, out] :
           {std::pair{"forward", o.y}, std::pair{"input", o.dx}, std::pair{"filter", o.dfilter}}) {
        const std::string what = c.name + (depthwise ? " depthwise " : " ") + name;
        CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor one, RunWithThreads(out, 1));
        for (int threads : {2, 4}) {
          CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor many, RunWithThreads(out, threads));
          ExpectIdentical(one, many, what + " on " + std::to_string(threads) + " threads");
        }
      }
    }
  }
}

// ------------------------------------------------------------ gradients

struct GradCase {
  std::string name;
  ConvCase conv;
  bool depthwise;
  bool known_shapes;
};

void PrintTo(const GradCase& c, std::ostream* os) { *os << c.name; }

class ConvGradientTest : public ::testing::TestWithParam<GradCase> {};

TEST_P(ConvGradientTest, MatchesFiniteDifferences) {
  const GradCase& c = GetParam();
  Scope root = Scope::NewRootScope();
  std::mt19937 rng(11);
  auto declared = [&](const std::vector<int64_t>& dims) {
    return c.known_shapes ? PartialShape(dims) : PartialShape({-1, -1, -1, -1});
  };
  Output x = ops::Placeholder(root.WithOpName("x"), DT_DOUBLE, {.shape = declared(c.conv.input)});
  Output f = ops::Placeholder(root.WithOpName("f"), DT_DOUBLE, {.shape = declared(c.conv.filter)});
  Output y = c.depthwise ? ops::DepthwiseConv2dNative(root, x, f, c.conv.attrs)
                         : ops::Conv2D(root, x, f, c.conv.attrs);
  testing::ExpectGradientsMatchFiniteDifferences(
      root, y, {x, f},
      {testing::RandomDoubles(c.conv.input, -1, 1, rng),
       testing::RandomDoubles(c.conv.filter, -1, 1, rng)},
      1e-6, 1e-7, rng);
}

std::vector<GradCase> GradCases() {
  std::vector<GradCase> cases;
  const std::vector<ConvCase> convs = {
      {"Same3x3Stride2", {2, 5, 6, 3}, {3, 3, 3, 2}, Attrs({1, 2, 2, 1}, "SAME")},
      {"ValidDilated", {1, 7, 6, 2}, {2, 2, 2, 3}, Attrs({1, 1, 1, 1}, "VALID", {1, 2, 3, 1})},
      {"Explicit",
       {1, 4, 5, 2},
       {3, 2, 2, 2},
       Attrs({1, 1, 2, 1}, "EXPLICIT", {1, 1, 1, 1}, {0, 0, 1, 0, 2, 1, 0, 0})},
      {"Pointwise", {2, 3, 4, 3}, {1, 1, 3, 2}, Attrs({1, 1, 1, 1}, "VALID")},
  };
  for (bool depthwise : {false, true}) {
    for (const ConvCase& conv : convs) {
      for (bool known : {true, false}) {
        cases.push_back({std::string(depthwise ? "Depthwise" : "Conv2D") + conv.name +
                             (known ? "_StaticShapes" : "_UnknownDims"),
                         conv, depthwise, known});
      }
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Cases, ConvGradientTest, ::testing::ValuesIn(GradCases()),
                         ParamName<GradCase>);

// ------------------------------------------------------------ errors

struct ErrorCase {
  std::string name;
  std::vector<int64_t> input, filter;
  ops::Conv2DAttrs attrs;
  std::string message;  // after "conv (Conv2D): "
};

void PrintTo(const ErrorCase& c, std::ostream* os) { *os << c.name; }

std::vector<ErrorCase> ErrorCases() {
  const int64_t huge = int64_t{1} << 62;
  return {
      {"InputRank",
       {5, 5, 3},
       {3, 3, 3, 8},
       Attrs({1, 1, 1, 1}, "SAME"),
       "input is [5,5,3] (x:0), but must have rank 4"},
      {"FilterRank",
       {1, 5, 5, 3},
       {3, 3, 3},
       Attrs({1, 1, 1, 1}, "SAME"),
       "filter is [3,3,3] (w:0), but must have rank 4"},
      {"Channels",
       {1, 5, 5, 3},
       {3, 3, 4, 8},
       Attrs({1, 1, 1, 1}, "SAME"),
       "filter's in_channels must equal input's depth: input is [1,5,5,3] (x:0), filter is "
       "[3,3,4,8] (w:0)"},
      {"ZeroStride",
       {1, 5, 5, 3},
       {3, 3, 3, 8},
       Attrs({1, 0, 1, 1}, "SAME"),
       "strides is [1,0,1,1], but must be positive"},
      {"NegativeStride",
       {1, 5, 5, 3},
       {3, 3, 3, 8},
       Attrs({1, 1, -2, 1}, "SAME"),
       "strides is [1,1,-2,1], but must be positive"},
      {"BatchStride",
       {1, 5, 5, 3},
       {3, 3, 3, 8},
       Attrs({2, 1, 1, 1}, "SAME"),
       "strides is [2,1,1,1], but strides on the batch and depth dimensions must be 1"},
      {"DepthStride",
       {1, 5, 5, 3},
       {3, 3, 3, 8},
       Attrs({1, 1, 1, 3}, "SAME"),
       "strides is [1,1,1,3], but strides on the batch and depth dimensions must be 1"},
      {"StridesLength",
       {1, 5, 5, 3},
       {3, 3, 3, 8},
       Attrs({1, 1}, "SAME"),
       "strides is [1,1], but must have 4 values (NHWC)"},
      {"ZeroDilation",
       {1, 5, 5, 3},
       {3, 3, 3, 8},
       Attrs({1, 1, 1, 1}, "SAME", {1, 0, 1, 1}),
       "dilations is [1,0,1,1], but must be positive"},
      {"DepthDilation",
       {1, 5, 5, 3},
       {3, 3, 3, 8},
       Attrs({1, 1, 1, 1}, "SAME", {1, 1, 1, 2}),
       "dilations is [1,1,1,2], but dilations on the batch and depth dimensions must be 1"},
      {"UnknownPadding",
       {1, 5, 5, 3},
       {3, 3, 3, 8},
       Attrs({1, 1, 1, 1}, "FOO"),
       "padding is \"FOO\", but must be SAME, VALID or EXPLICIT"},
      {"WindowLargerThanValidInput",
       {1, 4, 6, 3},
       {5, 5, 3, 8},
       Attrs({1, 1, 1, 1}, "VALID"),
       "the window spans 5 rows, more than the input's 4 with padding VALID: input is [1,4,6,3] "
       "(x:0), filter is [5,5,3,8] (w:0)"},
      {"DilatedWindowLargerThanValidInput",
       {1, 8, 6, 3},
       {3, 3, 3, 8},
       Attrs({1, 1, 1, 1}, "VALID", {1, 1, 3, 1}),
       "the window spans 7 columns (3 taps dilated by 3), more than the input's 6 with padding "
       "VALID: input is [1,8,6,3] (x:0), filter is [3,3,3,8] (w:0)"},
      {"WindowLargerThanExplicitlyPaddedInput",
       {1, 3, 6, 3},
       {5, 3, 3, 8},
       Attrs({1, 1, 1, 1}, "EXPLICIT", {1, 1, 1, 1}, {0, 0, 1, 0, 0, 0, 0, 0}),
       "the window spans 5 rows, more than the input's 4 with explicit padding: input is "
       "[1,3,6,3] (x:0), filter is [5,3,3,8] (w:0)"},
      {"ExplicitPaddingsLength",
       {1, 5, 5, 3},
       {3, 3, 3, 8},
       Attrs({1, 1, 1, 1}, "EXPLICIT", {1, 1, 1, 1}, {1, 1}),
       "explicit_paddings is [1,1] (2 values), but must have 8 (before and after each NHWC "
       "dimension) with padding EXPLICIT"},
      {"NegativeExplicitPadding",
       {1, 5, 5, 3},
       {3, 3, 3, 8},
       Attrs({1, 1, 1, 1}, "EXPLICIT", {1, 1, 1, 1}, {0, 0, 1, -1, 0, 0, 0, 0}),
       "explicit_paddings is [0,0,1,-1,0,0,0,0], but must not be negative"},
      {"ExplicitPaddingOnBatch",
       {1, 5, 5, 3},
       {3, 3, 3, 8},
       Attrs({1, 1, 1, 1}, "EXPLICIT", {1, 1, 1, 1}, {1, 0, 0, 0, 0, 0, 0, 0}),
       "explicit_paddings is [1,0,0,0,0,0,0,0], but padding the batch and depth dimensions is "
       "not supported"},
      {"ExplicitPaddingsWithoutExplicit",
       {1, 5, 5, 3},
       {3, 3, 3, 8},
       Attrs({1, 1, 1, 1}, "SAME", {1, 1, 1, 1}, {0, 0, 1, 1, 1, 1, 0, 0}),
       "explicit_paddings is [0,0,1,1,1,1,0,0], but must be empty unless padding is EXPLICIT"},
      {"OverflowingDilation",
       {1, 5, 5, 3},
       {3, 3, 3, 8},
       Attrs({1, 1, 1, 1}, "SAME", {1, huge, 1, 1}),
       "the window's 3 rows with dilation 4611686018427387904 span more elements than an int64 "
       "counts: input is [1,5,5,3] (x:0), filter is [3,3,3,8] (w:0)"},
      {"OverflowingPadding",
       {1, 5, 5, 3},
       {3, 3, 3, 8},
       Attrs({1, 1, 1, 1}, "EXPLICIT", {1, 1, 1, 1},
             {0, 0, 0, 0, std::numeric_limits<int64_t>::max(), 1, 0, 0}),
       "the padded input's columns overflow an int64: 5 + 9223372036854775807 + 1: input is "
       "[1,5,5,3] (x:0), filter is [3,3,3,8] (w:0)"},
  };
}

class ConvErrorTest : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(ConvErrorTest, FailsAtBuildTimeNamingTheNode) {
  const ErrorCase& c = GetParam();
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, {.shape = PartialShape(c.input)});
  Output w = ops::Placeholder(root.WithOpName("w"), DT_FLOAT, {.shape = PartialShape(c.filter)});
  ops::Conv2D(root.WithOpName("conv"), x, w, c.attrs);
  EXPECT_EQ(root.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(root.status().message(), "conv (Conv2D): " + c.message);
}

TEST_P(ConvErrorTest, FailsAtRunTimeWhenShapesAreKnownOnlyThen) {
  const ErrorCase& c = GetParam();
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT);
  Output w = ops::Placeholder(root.WithOpName("w"), DT_FLOAT);
  Output y = ops::Conv2D(root.WithOpName("conv"), x, w, c.attrs);
  const bool attr_error = !root.ok();
  if (attr_error) {
    // Attributes are checked when the node is built, whatever the shapes.
    EXPECT_EQ(root.status().message(), "conv (Conv2D): " + c.message);
    return;
  }
  Status s = Evaluate(y, {{x, Tensor(DT_FLOAT, TensorShape(c.input))},
                          {w, Tensor(DT_FLOAT, TensorShape(c.filter))}})
                 .status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  // At run time the session names the node, and shapes have no tensor names.
  std::string message = c.message;
  for (const char* name : {" (x:0)", " (w:0)"}) {
    for (size_t at; (at = message.find(name)) != std::string::npos;) {
      message.erase(at, std::string(name).size());
    }
  }
  EXPECT_EQ(s.message(), "conv (Conv2D): " + message);
}

INSTANTIATE_TEST_SUITE_P(Cases, ConvErrorTest, ::testing::ValuesIn(ErrorCases()),
                         ParamName<ErrorCase>);

TEST(Conv2D, InputAndFilterMustShareADtype) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, {.shape = {1, 5, 5, 3}});
  Output w = ops::Placeholder(root.WithOpName("w"), DT_DOUBLE, {.shape = {3, 3, 3, 8}});
  ops::Conv2D(root.WithOpName("conv"), x, w, {.padding = "SAME"});
  EXPECT_EQ(root.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(root.status().message(),
            "conv (Conv2D): dtype mismatch: input is float32 (x:0), filter is float64 (w:0)");
}

TEST(Conv2D, RejectsDataFormatsOtherThanNhwc) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, {.shape = {1, 3, 5, 5}});
  Output w = ops::Placeholder(root.WithOpName("w"), DT_FLOAT, {.shape = {3, 3, 3, 8}});
  ops::Conv2D(root.WithOpName("conv"), x, w,
              {.strides = {1, 1, 1, 1}, .padding = "SAME", .data_format = "NCHW"});
  EXPECT_EQ(root.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(root.status().message(),
            "conv (Conv2D): data_format is \"NCHW\", but only NHWC is supported");
}

TEST(DepthwiseConv2dNative, ChannelsMustMatchTheFilters) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, {.shape = {1, 5, 5, 3}});
  Output w = ops::Placeholder(root.WithOpName("w"), DT_FLOAT, {.shape = {3, 3, 2, 2}});
  ops::DepthwiseConv2dNative(root.WithOpName("dw"), x, w, {.padding = "SAME"});
  EXPECT_EQ(root.status().message(),
            "dw (DepthwiseConv2dNative): filter's in_channels must equal input's depth: input is "
            "[1,5,5,3] (x:0), filter is [3,3,2,2] (w:0)");
}

TEST(Conv2DBackpropInput, OutBackpropMustMatchTheConvolutionAtBuildTime) {
  Scope root = Scope::NewRootScope();
  Output w = ops::Placeholder(root.WithOpName("w"), DT_FLOAT, {.shape = {3, 3, 3, 8}});
  Output g = ops::Placeholder(root.WithOpName("g"), DT_FLOAT, {.shape = {1, 4, 5, 8}});
  ops::Conv2DBackpropInput(root.WithOpName("bp"), Int64s(root.WithOpName("sizes"), {1, 5, 5, 3}), w,
                           g, {.padding = "SAME"});
  EXPECT_EQ(root.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(root.status().message(),
            "bp (Conv2DBackpropInput): out_backprop is [1,4,5,8] (g:0), but the convolution's "
            "output is [1,5,5,8]: input_sizes is [1,5,5,3] (sizes:0), filter is [3,3,3,8] (w:0)");
}

TEST(Conv2DBackpropInput, OutBackpropMustMatchTheConvolutionAtRunTime) {
  Scope root = Scope::NewRootScope();
  Output sizes = ops::Placeholder(root.WithOpName("sizes"), DT_INT32);
  Output w = ops::Placeholder(root.WithOpName("w"), DT_FLOAT);
  Output g = ops::Placeholder(root.WithOpName("g"), DT_FLOAT);
  Output bp = ops::Conv2DBackpropInput(root.WithOpName("bp"), sizes, w, g,
                                       {.strides = {1, 2, 2, 1}, .padding = "VALID"});
  ASSERT_TRUE(root.ok()) << root.status();
  Status s = Evaluate(bp, {{sizes, Tensor::FromVector<int32_t>({1, 7, 7, 3})},
                           {w, Tensor(DT_FLOAT, {3, 3, 3, 8})},
                           {g, Tensor(DT_FLOAT, {1, 4, 4, 8})}})
                 .status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "bp (Conv2DBackpropInput): out_backprop is [1,4,4,8], but the convolution's output "
            "is [1,3,3,8]: input is [1,7,7,3], filter is [3,3,3,8]");
}

TEST(Conv2DBackpropFilter, FilterSizesMustDescribeRankFour) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, {.shape = {1, 5, 5, 3}});
  Output g = ops::Placeholder(root.WithOpName("g"), DT_FLOAT, {.shape = {1, 5, 5, 8}});
  ops::Conv2DBackpropFilter(root.WithOpName("bp"), x, Int64s(root.WithOpName("sizes"), {3, 3, 3}),
                            g, {.padding = "SAME"});
  EXPECT_EQ(root.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(root.status().message(),
            "bp (Conv2DBackpropFilter): filter_sizes is [3,3,3] (sizes:0), but must describe a "
            "shape of rank 4");
}

TEST(Conv2DBackpropFilter, NegativeFilterSizesFailAtRunTime) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT);
  Output sizes = ops::Placeholder(root.WithOpName("sizes"), DT_INT32);
  Output g = ops::Placeholder(root.WithOpName("g"), DT_FLOAT);
  Output bp = ops::Conv2DBackpropFilter(root.WithOpName("bp"), x, sizes, g, {.padding = "SAME"});
  ASSERT_TRUE(root.ok()) << root.status();
  Status s = Evaluate(bp, {{x, Tensor(DT_FLOAT, {1, 5, 5, 3})},
                           {sizes, Tensor::FromVector<int32_t>({3, -3, 3, 8})},
                           {g, Tensor(DT_FLOAT, {1, 5, 5, 8})}})
                 .status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("bp (Conv2DBackpropFilter): filter_sizes"), std::string::npos)
      << s.message();
}

TEST(Conv2D, HugeStridesGiveOnePixel) {
  // Absurd but valid attributes neither crash nor allocate beyond the
  // output they describe.
  Scope root = Scope::NewRootScope();
  std::mt19937 rng(5);
  Tensor x = RandomTensor(DT_FLOAT, {1, 5, 5, 2}, rng);
  Tensor f = RandomTensor(DT_FLOAT, {3, 3, 2, 1}, rng);
  const int64_t huge = int64_t{1} << 62;
  Output y = ops::Conv2D(root, ops::Const(root, x), ops::Const(root, f),
                         {.strides = {1, huge, huge, 1}, .padding = "SAME"});
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor got, Evaluate(y));
  EXPECT_EQ(got.shape(), TensorShape({1, 1, 1, 1}));
}

}  // namespace
}  // namespace ckflow
