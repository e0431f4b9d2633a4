// MaxPooling2D, AveragePooling2D and GlobalAveragePooling2D: their outputs
// against naive pooling loops (strides defaulting to the pool size, "same"
// windows counting only the elements inside the input), shapes, no
// variables, and errors naming the layer.

#include "ops/pooling_layers.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "ops/array_ops.h"
#include "tests/ops/layer_test_util.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

using ::ckflow::testing::FilledTensor;
using ::ckflow::testing::MaxAbsDifference;
using ::ckflow::testing::RunLayer;
using ::ckflow::testing::StatusIs;

// Naive NHWC pooling of `x`: the max or the mean of each window's elements
// inside the input; "same" centres the windows as TensorFlow does.
std::vector<double> NaivePool(const Tensor& x, Size2D pool, Size2D stride, bool same, bool max) {
  const int64_t n = x.shape().dim(0), h = x.shape().dim(1), w = x.shape().dim(2),
                c = x.shape().dim(3);
  auto out_and_pad = [same](int64_t in, int64_t k, int64_t s) -> std::pair<int64_t, int64_t> {
    if (!same) return {(in - k) / s + 1, 0};
    const int64_t out = (in + s - 1) / s;
    return {out, std::max<int64_t>(0, (out - 1) * s + k - in) / 2};
  };
  auto [oh, ph] = out_and_pad(h, pool.rows, stride.rows);
  auto [ow, pw] = out_and_pad(w, pool.cols, stride.cols);
  std::vector<double> out;
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t i = 0; i < oh; ++i) {
      for (int64_t j = 0; j < ow; ++j) {
        for (int64_t ch = 0; ch < c; ++ch) {
          double best = -std::numeric_limits<double>::infinity(), sum = 0;
          int count = 0;
          for (int64_t r = i * stride.rows - ph; r < i * stride.rows - ph + pool.rows; ++r) {
            for (int64_t s = j * stride.cols - pw; s < j * stride.cols - pw + pool.cols; ++s) {
              if (r < 0 || r >= h || s < 0 || s >= w) continue;
              const double v = x.flat<float>()[((b * h + r) * w + s) * c + ch];
              best = std::max(best, v);
              sum += v;
              ++count;
            }
          }
          out.push_back(max ? best : sum / count);
        }
      }
    }
  }
  return out;
}

TEST(MaxPooling2DTest, IsTheWindowMaximumWithStridesDefaultingToThePoolSize) {
  auto pool = MaxPooling2D::Make();
  const Tensor x = FilledTensor({2, 7, 6, 3}, 21);
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto run, RunLayer(*pool, x));
  EXPECT_EQ(run.output.shape(), TensorShape({2, 3, 3, 3}));
  EXPECT_EQ(MaxAbsDifference(run.output, NaivePool(x, 2, 2, false, true)), 0.0);
  EXPECT_TRUE(pool->variables().empty());
}

TEST(MaxPooling2DTest, SamePaddingWithOtherStrides) {
  auto pool = MaxPooling2D::Make({.pool_size = {3, 2}, .strides = Size2D(2, 1), .padding = "same"});
  const Tensor x = FilledTensor({1, 7, 5, 2}, 22);
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto run, RunLayer(*pool, x));
  EXPECT_EQ(run.output.shape(), TensorShape({1, 4, 5, 2}));
  EXPECT_EQ(MaxAbsDifference(run.output, NaivePool(x, {3, 2}, {2, 1}, true, true)), 0.0);
}

TEST(AveragePooling2DTest, SameWindowsDivideByTheElementsInsideTheInput) {
  auto pool = AveragePooling2D::Make({.pool_size = 3, .strides = 2, .padding = "same"});
  const Tensor x = FilledTensor({2, 6, 5, 3}, 23);
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto run, RunLayer(*pool, x));
  EXPECT_EQ(run.output.shape(), TensorShape({2, 3, 3, 3}));
  EXPECT_LT(MaxAbsDifference(run.output, NaivePool(x, 3, 2, true, false)), 1e-6);
}

TEST(AveragePooling2DTest, ValidWindows) {
  auto pool = AveragePooling2D::Make();
  const Tensor x = FilledTensor({1, 5, 4, 2}, 24);
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto run, RunLayer(*pool, x));
  EXPECT_EQ(run.output.shape(), TensorShape({1, 2, 2, 2}));
  EXPECT_LT(MaxAbsDifference(run.output, NaivePool(x, 2, 2, false, false)), 1e-6);
}

TEST(GlobalAveragePooling2DTest, IsTheMeanOverRowsAndColumns) {
  const Tensor x = FilledTensor({2, 4, 3, 5}, 25);
  std::vector<double> want(2 * 5, 0.0);
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t p = 0; p < 12; ++p) {
      for (int64_t c = 0; c < 5; ++c)
        want[b * 5 + c] += x.flat<float>()[(b * 12 + p) * 5 + c] / 12.0;
    }
  }
  auto pool = GlobalAveragePooling2D::Make();
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto run, RunLayer(*pool, x));
  EXPECT_EQ(run.output.shape(), TensorShape({2, 5}));
  EXPECT_LT(MaxAbsDifference(run.output, want), 1e-6);

  auto kept = GlobalAveragePooling2D::Make({.keepdims = true});
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto kept_run, RunLayer(*kept, x));
  EXPECT_EQ(kept_run.output.shape(), TensorShape({2, 1, 1, 5}));
  EXPECT_LT(MaxAbsDifference(kept_run.output, want), 1e-6);
}

TEST(Pooling2DTest, NamesAreKeras) {
  EXPECT_EQ(MaxPooling2D::Make()->name(), "max_pooling2d");
  EXPECT_EQ(AveragePooling2D::Make()->name(), "average_pooling2d");
  EXPECT_EQ(GlobalAveragePooling2D::Make()->name(), "global_average_pooling2d");
  EXPECT_EQ(MaxPooling2D::Make({.name = "pool"})->name(), "pool");
}

TEST(Pooling2DTest, BadInputsAndArgumentsAreStickyErrorsNamingTheLayer) {
  struct Case {
    std::string name;
    std::shared_ptr<Layer> layer;
    PartialShape input;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"rank2", MaxPooling2D::Make(), PartialShape({-1, 10}),
       "layer 'max_pooling2d': expects an input [batch, rows, cols, channels]"},
      {"pool_size", AveragePooling2D::Make({.pool_size = {0, 2}}), PartialShape({1, 4, 4, 1}),
       "layer 'average_pooling2d': pool_size must be positive, got (0, 2)"},
      {"strides", MaxPooling2D::Make({.strides = Size2D(-1)}), PartialShape({1, 4, 4, 1}),
       "strides must be positive, got (-1, -1)"},
      {"padding", MaxPooling2D::Make({.padding = "causal"}), PartialShape({1, 4, 4, 1}),
       "padding must be \"valid\" or \"same\", got \"causal\""},
      {"window_too_large", MaxPooling2D::Make({.pool_size = 5}), PartialShape({1, 4, 4, 1}),
       "max_pooling2d"},
      {"global_rank3", GlobalAveragePooling2D::Make(), PartialShape({4, 4, 1}),
       "layer 'global_average_pooling2d': expects an input [batch, rows, cols, channels]"},
  };
  for (const Case& c : cases) {
    Scope root = Scope::NewRootScope();
    Output y = (*c.layer)(root, ops::Placeholder(root, DT_FLOAT, {.shape = c.input}));
    EXPECT_FALSE(y.valid()) << c.name;
    EXPECT_THAT(root.status(), StatusIs(StatusCode::kInvalidArgument, c.message)) << c.name;
  }
}

}  // namespace
}  // namespace ckflow
