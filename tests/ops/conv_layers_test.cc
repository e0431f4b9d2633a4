// Conv2D and DepthwiseConv2D: their output against a naive convolution of
// the layer's own kernel and bias (so the kernel's layout, the strides',
// dilations' and padding's order are Keras'), their shapes, variables,
// names and errors.

#include "ops/conv_layers.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ops/array_ops.h"
#include "ops/initializers.h"
#include "ops/nn_ops.h"
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
using ::testing::HasSubstr;

struct Window {
  int64_t rows, cols, stride_rows, stride_cols, dilation_rows, dilation_cols;
  bool same;
};

// Output size and padding before along one dimension, as TensorFlow's.
std::pair<int64_t, int64_t> OutAndPad(int64_t in, int64_t k, int64_t stride, int64_t dilation,
                                      bool same) {
  const int64_t span = (k - 1) * dilation + 1;
  if (!same) return {(in - span) / stride + 1, 0};
  const int64_t out = (in + stride - 1) / stride;
  return {out, std::max<int64_t>(0, (out - 1) * stride + span - in) / 2};
}

// A naive NHWC convolution in double: `groups` input channels each with
// `per_group` filters (Conv2D: one group of all channels; depthwise: one
// group per channel), then + bias and ReLU if asked.
std::vector<double> NaiveConv(const Tensor& x, const Tensor& kernel, const Tensor& bias,
                              const Window& w, bool depthwise, bool relu) {
  const int64_t n = x.shape().dim(0), h = x.shape().dim(1), wd = x.shape().dim(2),
                c = x.shape().dim(3);
  const int64_t last = kernel.shape().dim(3);
  const int64_t out_c = depthwise ? c * last : last;
  auto [oh, ph] = OutAndPad(h, w.rows, w.stride_rows, w.dilation_rows, w.same);
  auto [ow, pw] = OutAndPad(wd, w.cols, w.stride_cols, w.dilation_cols, w.same);
  auto xv = x.flat<float>();
  auto kv = kernel.flat<float>();
  std::vector<double> out;
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t i = 0; i < oh; ++i) {
      for (int64_t j = 0; j < ow; ++j) {
        for (int64_t o = 0; o < out_c; ++o) {
          double sum = bias.IsValid() ? bias.flat<float>()[o] : 0.0;
          for (int64_t di = 0; di < w.rows; ++di) {
            for (int64_t dj = 0; dj < w.cols; ++dj) {
              const int64_t r = i * w.stride_rows + di * w.dilation_rows - ph;
              const int64_t s = j * w.stride_cols + dj * w.dilation_cols - pw;
              if (r < 0 || r >= h || s < 0 || s >= wd) continue;
              if (depthwise) {
                const int64_t ch = o / last, m = o % last;
                sum += double{xv[((b * h + r) * wd + s) * c + ch]} *
                       kv[((di * w.cols + dj) * c + ch) * last + m];
              } else {
                for (int64_t ch = 0; ch < c; ++ch) {
                  sum += double{xv[((b * h + r) * wd + s) * c + ch]} *
                         kv[((di * w.cols + dj) * c + ch) * last + o];
                }
              }
            }
          }
          out.push_back(relu ? std::max(sum, 0.0) : sum);
        }
      }
    }
  }
  return out;
}

struct ConvCase {
  std::string name;
  Window window;
  bool relu;
  bool use_bias;
};

class Conv2DOutputTest : public ::testing::TestWithParam<ConvCase> {};

TEST_P(Conv2DOutputTest, IsTheNaiveConvolutionOfItsKernelPlusBias) {
  const ConvCase& c = GetParam();
  const Window& w = c.window;
  auto conv = Conv2D::Make(3, {w.rows, w.cols},
                           {.strides = {w.stride_rows, w.stride_cols},
                            .padding = w.same ? "same" : "valid",
                            .dilation_rate = {w.dilation_rows, w.dilation_cols},
                            .activation = c.relu ? Activation(ops::Relu) : Activation(),
                            .use_bias = c.use_bias,
                            .bias_initializer = initializers::RandomUniform(-1, 1, 3)});
  const Tensor x = FilledTensor({2, 7, 6, 2}, 11);
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto run, RunLayer(*conv, x));
  const Tensor bias = c.use_bias ? run.Value(conv->bias()) : Tensor();
  const std::vector<double> want =
      NaiveConv(x, run.Value(conv->kernel()), bias, w, /*depthwise=*/false, c.relu);
  ASSERT_EQ(run.output.NumElements(), static_cast<int64_t>(want.size()));
  EXPECT_LT(MaxAbsDifference(run.output, want), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(
    Windows, Conv2DOutputTest,
    ::testing::Values(ConvCase{"valid3x3", {3, 3, 1, 1, 1, 1, false}, false, true},
                      ConvCase{"same2x3Stride2x1Relu", {2, 3, 2, 1, 1, 1, true}, true, true},
                      ConvCase{"validDilated2x1", {3, 2, 1, 1, 2, 1, false}, false, true},
                      ConvCase{"sameNoBias", {3, 3, 1, 1, 1, 1, true}, false, false},
                      ConvCase{"oneByOne", {1, 1, 1, 1, 1, 1, false}, true, true}),
    [](const ::testing::TestParamInfo<ConvCase>& param_info) { return param_info.param.name; });

TEST(Conv2DTest, CreatesKerasVariablesOnItsFirstCall) {
  Scope root = Scope::NewRootScope();
  auto conv = Conv2D::Make(4, 3);
  auto conv2 = Conv2D::Make(8, {1, 2}, {.use_bias = false});
  Output x = ops::Placeholder(root, DT_FLOAT, {.shape = {-1, 28, 28, 1}});
  Output y = (*conv2)(root, (*conv)(root, x));
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(y.shape(), PartialShape({-1, 26, 25, 8}));
  EXPECT_THAT(VariableNames(conv->variables()), ElementsAre("conv2d/kernel", "conv2d/bias"));
  EXPECT_THAT(VariableNames(conv2->variables()), ElementsAre("conv2d_1/kernel"));
  EXPECT_EQ(conv->kernel()->shape(), PartialShape({3, 3, 1, 4}));
  EXPECT_EQ(conv->bias()->shape(), PartialShape({4}));
  EXPECT_EQ(conv2->kernel()->shape(), PartialShape({1, 2, 4, 8}));
  EXPECT_EQ(conv2->trainable_variables().size(), 1u);
}

TEST(Conv2DTest, SamePaddingKeepsTheSizeDividedByTheStride) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_DOUBLE, {.shape = {2, 9, 8, 3}});
  Output y = (*Conv2D::Make(5, 3, {.strides = 2, .padding = "SAME"}))(root, x);
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(y.shape(), PartialShape({2, 5, 4, 5}));
  EXPECT_EQ(y.dtype(), DT_DOUBLE);
}

TEST(Conv2DTest, GlorotUniformFansCountTheReceptiveField) {
  auto conv = Conv2D::Make(64, 3);
  const Tensor x = FilledTensor({1, 5, 5, 32}, 1);
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto run, RunLayer(*conv, x));
  // Keras: fan_in = 3 * 3 * 32, fan_out = 3 * 3 * 64. The limit is 1/12,
  // which float32 rounds up: a draw at the edge may equal float(1/12).
  const double limit = static_cast<float>(std::sqrt(6.0 / (9 * 32 + 9 * 64)));
  double largest = 0;
  for (float v : run.Value(conv->kernel()).flat<float>()) {
    largest = std::max(largest, double{std::abs(v)});
  }
  EXPECT_LE(largest, limit);
  EXPECT_GT(largest, 0.95 * limit);  // 18,432 draws reach the edge
}

TEST(Conv2DTest, BadInputsAndArgumentsAreStickyErrorsNamingTheLayer) {
  struct Case {
    std::string name;
    std::shared_ptr<Layer> layer;
    PartialShape input;
    DataType dtype;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"rank2", Conv2D::Make(4, 3), PartialShape({-1, 784}), DT_FLOAT,
       "layer 'conv2d': expects an input [batch, rows, cols, channels] with known channels, got "},
      {"unknown_channels", Conv2D::Make(4, 3), PartialShape({-1, 5, 5, -1}), DT_FLOAT,
       "with known channels"},
      {"int", Conv2D::Make(4, 3), PartialShape({1, 5, 5, 1}), DT_INT32,
       "expects a float32 or float64 input"},
      {"filters", Conv2D::Make(0, 3), PartialShape({1, 5, 5, 1}), DT_FLOAT,
       "layer 'conv2d': filters must be positive, got 0"},
      {"kernel", Conv2D::Make(2, {3, 0}), PartialShape({1, 5, 5, 1}), DT_FLOAT,
       "kernel_size must be positive, got (3, 0)"},
      {"padding", Conv2D::Make(2, 3, {.padding = "full"}), PartialShape({1, 5, 5, 1}), DT_FLOAT,
       "padding must be \"valid\" or \"same\", got \"full\""},
      {"strided_dilation", Conv2D::Make(2, 3, {.strides = 2, .dilation_rate = {1, 2}}),
       PartialShape({1, 9, 9, 1}), DT_FLOAT,
       "strides > 1 are not supported together with dilation_rate > 1"},
      {"window_too_large", Conv2D::Make(2, 7), PartialShape({1, 5, 5, 1}), DT_FLOAT, "conv2d"},
      {"depthwise_rank3", DepthwiseConv2D::Make(3), PartialShape({5, 5, 1}), DT_FLOAT,
       "layer 'depthwise_conv2d': expects an input [batch, rows, cols, channels]"},
      {"depth_multiplier", DepthwiseConv2D::Make(3, {.depth_multiplier = -1}),
       PartialShape({1, 5, 5, 1}), DT_FLOAT, "depth_multiplier must be positive, got -1"},
  };
  for (const Case& c : cases) {
    Scope root = Scope::NewRootScope();
    Output x = ops::Placeholder(root, c.dtype, {.shape = c.input});
    Output y = (*c.layer)(root, x);
    EXPECT_FALSE(y.valid()) << c.name;
    EXPECT_THAT(root.status(), StatusIs(StatusCode::kInvalidArgument, c.message)) << c.name;
    // A bad argument fails the build; a window larger than the input fails
    // the op after the build made the variables (built, as in Keras).
    EXPECT_EQ(c.layer->built(), c.name == "window_too_large") << c.name;
  }
}

TEST(DepthwiseConv2DTest, IsTheNaiveConvolutionPerChannel) {
  const Window w{3, 2, 1, 2, 1, 1, true};
  auto conv = DepthwiseConv2D::Make({w.rows, w.cols},
                                    {.strides = {w.stride_rows, w.stride_cols},
                                     .padding = "same",
                                     .depth_multiplier = 2,
                                     .bias_initializer = initializers::RandomUniform(-1, 1, 4)});
  const Tensor x = FilledTensor({2, 5, 6, 3}, 12);
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto run, RunLayer(*conv, x));
  const std::vector<double> want = NaiveConv(x, run.Value(conv->depthwise_kernel()),
                                             run.Value(conv->bias()), w, /*depthwise=*/true, false);
  ASSERT_EQ(run.output.NumElements(), static_cast<int64_t>(want.size()));
  EXPECT_LT(MaxAbsDifference(run.output, want), 1e-5);
}

TEST(DepthwiseConv2DTest, CreatesKerasVariables) {
  Scope root = Scope::NewRootScope();
  auto conv = DepthwiseConv2D::Make(3, {.depth_multiplier = 4});
  Output y = (*conv)(root, ops::Placeholder(root, DT_FLOAT, {.shape = {-1, 8, 8, 3}}));
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(y.shape(), PartialShape({-1, 6, 6, 12}));
  EXPECT_THAT(VariableNames(conv->variables()),
              ElementsAre("depthwise_conv2d/depthwise_kernel", "depthwise_conv2d/bias"));
  EXPECT_EQ(conv->depthwise_kernel()->shape(), PartialShape({3, 3, 3, 4}));
  EXPECT_EQ(conv->bias()->shape(), PartialShape({12}));
}

}  // namespace
}  // namespace ckflow
