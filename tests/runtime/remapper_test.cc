// The session's remapper (runtime/remapper_internal.h): which chains become
// _FusedConv2D / _FusedMatMul, that a fused run gives the bits of the
// separate ops, and that nothing a run needs is fused away.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ops/array_ops.h"
#include "ops/conv_ops.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"
#include "ops/normalization_ops.h"
#include "ops/pooling_ops.h"
#include "ops/variable_ops.h"
#include "runtime/session.h"
#include "runtime/session_internal.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

using internal::SessionInternals;
using ::testing::HasSubstr;

// Values in [-1, 1]: a Relu after them clips about half.
Tensor Random(DataType dtype, const TensorShape& shape, uint32_t seed, double low = -1.0) {
  Tensor t(dtype, shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(low, 1.0);
  for (int64_t i = 0; i < t.NumElements(); ++i) {
    if (dtype == DT_FLOAT) {
      t.flat<float>()[i] = static_cast<float>(u(rng));
    } else {
      t.flat<double>()[i] = u(rng);
    }
  }
  return t;
}

bool SameBits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.TotalBytes()) == 0;
}

struct Ran {
  std::vector<Tensor> outputs;
  int fused = 0;
};

// Runs the graph with the remapper on or off, on `threads` threads.
Ran RunWith(const Scope& root, bool remapping, const std::vector<Feed>& feeds,
            const std::vector<Output>& fetches, const std::vector<Output>& targets = {},
            int threads = 2) {
  StatusOr<std::unique_ptr<Session>> session =
      Session::Create(root.graph(), {.inter_op_parallelism_threads = threads,
                                     .intra_op_parallelism_threads = threads,
                                     .remapping = remapping});
  CKFLOW_CHECK(session.ok());
  StatusOr<std::vector<Tensor>> out = (*session)->Run(feeds, fetches, targets);
  if (!out.ok()) ADD_FAILURE() << out.status().ToString();
  if (!out.ok()) return {};
  return {*std::move(out), SessionInternals::num_fused_ops(**session)};
}

// -------------------------------------------------------------- Conv2D

struct ConvCase {
  DataType dtype;
  std::string padding;
  int64_t stride;
  bool batch_norm;
  std::string activation;  // "", "Relu", "Relu6"
};

class ConvChainTest : public ::testing::TestWithParam<ConvCase> {};

TEST_P(ConvChainTest, FusedRunGivesTheBitsOfTheSeparateOps) {
  const ConvCase& c = GetParam();
  Scope root = Scope::NewRootScope();
  const int64_t channels = 24;  // not a multiple of a vector
  Output x = ops::Placeholder(root.WithOpName("x"), c.dtype);
  Output filter = ops::Const(root, Random(c.dtype, TensorShape({3, 3, 5, channels}), 2));
  Output bias = ops::Const(root, Random(c.dtype, TensorShape({channels}), 3));
  Output h = ops::Conv2D(root.WithOpName("conv"), x, filter,
                         {.strides = {1, c.stride, c.stride, 1}, .padding = c.padding});
  h = ops::BiasAdd(root.WithOpName("bias_add"), h, bias);
  if (c.batch_norm) {
    auto vec = [&](uint32_t seed, double low) {
      return ops::Const(root, Random(c.dtype, TensorShape({channels}), seed, low));
    };
    h = ops::FusedBatchNorm(root.WithOpName("bn"), h, vec(4, -1), vec(5, -1), vec(6, -1),
                            vec(7, 0.1), {.epsilon = 1e-3f, .is_training = false})
            .y;
  }
  if (c.activation == "Relu") h = ops::Relu(root, h);
  if (c.activation == "Relu6") {
    h = ops::Relu6(root, ops::Mul(root, h, ops::Const(root, Tensor::Scalar(8.0f))));
  }
  CKFLOW_ASSERT_OK(root.status());
  // 7 images of 13 x 11: the convolution's blocks end inside rows.
  const std::vector<Feed> feeds = {{x, Random(c.dtype, TensorShape({7, 13, 11, 5}), 1)}};

  Ran separate = RunWith(root, false, feeds, {h});
  Ran fused = RunWith(root, true, feeds, {h});
  Ran fused_one_thread = RunWith(root, true, feeds, {h}, {}, 1);
  EXPECT_EQ(separate.fused, 0);
  // Relu6's input is a Mul here, so that chain stops after the batch norm.
  EXPECT_EQ(fused.fused, 1);
  EXPECT_TRUE(SameBits(fused.outputs[0], separate.outputs[0]))
      << fused.outputs[0].DebugString() << "\nvs " << separate.outputs[0].DebugString();
  EXPECT_TRUE(SameBits(fused_one_thread.outputs[0], separate.outputs[0]));
}

INSTANTIATE_TEST_SUITE_P(Chains, ConvChainTest,
                         ::testing::Values(ConvCase{DT_FLOAT, "SAME", 1, false, ""},
                                           ConvCase{DT_FLOAT, "VALID", 2, false, "Relu"},
                                           ConvCase{DT_FLOAT, "SAME", 1, true, "Relu"},
                                           ConvCase{DT_FLOAT, "VALID", 1, true, ""},
                                           ConvCase{DT_FLOAT, "SAME", 2, true, "Relu6"},
                                           ConvCase{DT_DOUBLE, "SAME", 1, true, "Relu"},
                                           ConvCase{DT_DOUBLE, "VALID", 2, false, "Relu"}));

// ------------------------------------------------- Conv2D, then MaxPool

struct PoolCase {
  DataType dtype;
  int64_t batch, rows, cols;  // of the input
  int64_t window, stride;     // of the pooling
  std::string padding;        // of the pooling
  bool batch_norm;
};

class ConvPoolChainTest : public ::testing::TestWithParam<PoolCase> {};

TEST_P(ConvPoolChainTest, PoolingEachBlockGivesTheBitsOfTheSeparateOps) {
  const PoolCase& c = GetParam();
  Scope root = Scope::NewRootScope();
  const int64_t channels = 24;
  Output x = ops::Placeholder(root.WithOpName("x"), c.dtype);
  Output filter = ops::Const(root, Random(c.dtype, TensorShape({3, 3, 5, channels}), 2));
  Output bias = ops::Const(root, Random(c.dtype, TensorShape({channels}), 3));
  Output h = ops::BiasAdd(root, ops::Conv2D(root, x, filter), bias);
  if (c.batch_norm) {
    auto vec = [&](uint32_t seed, double low) {
      return ops::Const(root, Random(c.dtype, TensorShape({channels}), seed, low));
    };
    h = ops::FusedBatchNorm(root, h, vec(4, -1), vec(5, -1), vec(6, -1), vec(7, 0.1),
                            {.is_training = false})
            .y;
  }
  h = ops::Relu(root, h);
  Output y = ops::MaxPool(root.WithOpName("pool"), h,
                          {.ksize = {1, c.window, c.window, 1},
                           .strides = {1, c.stride, c.stride, 1},
                           .padding = c.padding});
  CKFLOW_ASSERT_OK(root.status());
  Tensor images = Random(c.dtype, TensorShape({c.batch, c.rows, c.cols, 5}), 1);
  // A NaN: the pooling keeps Eigen's max, which the fused op must too.
  if (c.dtype == DT_FLOAT) images.flat<float>()[7 * 5] = std::nanf("");
  const std::vector<Feed> feeds = {{x, images}};

  Ran separate = RunWith(root, false, feeds, {y});
  Ran fused = RunWith(root, true, feeds, {y});
  Ran fused_one_thread = RunWith(root, true, feeds, {y}, {}, 1);
  EXPECT_EQ(fused.fused, 1);
  ASSERT_EQ(fused.outputs.size(), 1u);
  EXPECT_TRUE(SameBits(fused.outputs[0], separate.outputs[0]))
      << fused.outputs[0].shape().ToString() << " vs " << separate.outputs[0].shape().ToString();
  EXPECT_TRUE(SameBits(fused_one_thread.outputs[0], separate.outputs[0]));
}

INSTANTIATE_TEST_SUITE_P(
    Chains, ConvPoolChainTest,
    ::testing::Values(
        // Small images: blocks of whole images.
        PoolCase{DT_FLOAT, 7, 13, 11, 2, 2, "VALID", true},
        PoolCase{DT_DOUBLE, 3, 12, 12, 2, 2, "SAME", false},
        // Large ones: blocks of 8 rows (of 24 channels), each pooled.
        PoolCase{DT_FLOAT, 2, 123, 100, 2, 2, "VALID", true},
        PoolCase{DT_FLOAT, 2, 123, 100, 2, 2, "SAME", false},  // last window cut short
        PoolCase{DT_FLOAT, 1, 100, 100, 1, 2, "VALID", true},  // rows between windows
        // Windows across blocks of rows (a stride of 3 against 10 rows,
        // overlapping windows): the whole output, then the pooling.
        PoolCase{DT_FLOAT, 2, 110, 90, 3, 3, "VALID", false},
        PoolCase{DT_FLOAT, 2, 101, 100, 3, 2, "SAME", true},
        // Overlapping windows in blocks of whole images: pooled per block.
        PoolCase{DT_FLOAT, 3, 9, 9, 3, 1, "VALID", false}));

// No input channels: the products are empty sums, so every pooled value is
// the bias after the Relu, and the fused op must still pool, not skip.
TEST(RemapperTest, AConvolutionOverNoChannelsStillPoolsItsEpilogue) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_FLOAT);
  Output w = ops::Const(root, Tensor(DT_FLOAT, TensorShape({3, 3, 0, 4})));
  const Tensor bias = Random(DT_FLOAT, TensorShape({4}), 3);
  Output b = ops::Const(root, bias);
  Output y = ops::MaxPool(root, ops::Relu(root, ops::BiasAdd(root, ops::Conv2D(root, x, w), b)),
                          {.ksize = {1, 2, 2, 1}, .strides = {1, 2, 2, 1}, .padding = "VALID"});
  const std::vector<Feed> feeds = {{x, Tensor(DT_FLOAT, TensorShape({2, 7, 7, 0}))}};
  Ran separate = RunWith(root, false, feeds, {y});
  Ran fused = RunWith(root, true, feeds, {y});
  EXPECT_EQ(fused.fused, 1);
  ASSERT_EQ(fused.outputs[0].shape(), TensorShape({2, 2, 2, 4}));
  EXPECT_TRUE(SameBits(fused.outputs[0], separate.outputs[0]));
  for (int64_t i = 0; i < fused.outputs[0].NumElements(); ++i) {
    EXPECT_EQ(fused.outputs[0].flat<float>()[i], std::max(bias.flat<float>()[i % 4], 0.0f)) << i;
  }
}

// The relu6 case above stops early; here it is fused whole.
TEST(RemapperTest, Relu6EndsAFusedConvChain) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_FLOAT);
  Output w = ops::Const(root, Random(DT_FLOAT, TensorShape({3, 3, 2, 8}), 2));
  Output b = ops::Const(root, Random(DT_FLOAT, TensorShape({8}), 3));
  Output y = ops::Relu6(root, ops::BiasAdd(root, ops::Conv2D(root, x, w, {.padding = "SAME"}), b));
  // Scaled up so that some values pass 6.
  const std::vector<Feed> feeds = {{x, Random(DT_FLOAT, TensorShape({3, 9, 9, 2}), 1, -8.0)}};
  Ran separate = RunWith(root, false, feeds, {y});
  Ran fused = RunWith(root, true, feeds, {y});
  EXPECT_EQ(fused.fused, 1);
  EXPECT_TRUE(SameBits(fused.outputs[0], separate.outputs[0]));
}

// -------------------------------------------------------------- MatMul

struct MatMulCase {
  int64_t m, k, n;
  bool transpose_a, transpose_b;
  std::string activation;
};

class MatMulChainTest : public ::testing::TestWithParam<MatMulCase> {};

TEST_P(MatMulChainTest, FusedRunGivesTheBitsOfTheSeparateOps) {
  const MatMulCase& c = GetParam();
  Scope root = Scope::NewRootScope();
  Output a = ops::Placeholder(root, DT_FLOAT);
  Output b = ops::Const(
      root, Random(DT_FLOAT, c.transpose_b ? TensorShape({c.n, c.k}) : TensorShape({c.k, c.n}), 2));
  Output bias = ops::Const(root, Random(DT_FLOAT, TensorShape({c.n}), 3));
  Output y = ops::BiasAdd(
      root, ops::MatMul(root, a, b, {.transpose_a = c.transpose_a, .transpose_b = c.transpose_b}),
      bias);
  if (c.activation == "Relu") y = ops::Relu(root, y);
  if (c.activation == "Relu6") y = ops::Relu6(root, y);
  const std::vector<Feed> feeds = {
      {a, Random(DT_FLOAT, c.transpose_a ? TensorShape({c.k, c.m}) : TensorShape({c.m, c.k}), 1,
                 -8.0)}};
  Ran separate = RunWith(root, false, feeds, {y});
  Ran fused = RunWith(root, true, feeds, {y});
  EXPECT_EQ(fused.fused, 1);
  EXPECT_TRUE(SameBits(fused.outputs[0], separate.outputs[0]));
}

// m >= n splits the output by rows, m < n by columns; k = 0 is all bias.
INSTANTIATE_TEST_SUITE_P(Chains, MatMulChainTest,
                         ::testing::Values(MatMulCase{600, 37, 70, false, false, "Relu"},
                                           MatMulCase{9, 40, 700, false, true, "Relu6"},
                                           MatMulCase{300, 64, 33, true, false, ""},
                                           MatMulCase{5, 0, 7, false, false, "Relu"}));

// ------------------------------------------------- what is not fused away

struct SmallConv {
  Scope root = Scope::NewRootScope();
  Output x, conv, bias_add, relu;
  std::vector<Feed> feeds;
  SmallConv() {
    x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT);
    Output w = ops::Const(root, Random(DT_FLOAT, TensorShape({3, 3, 2, 4}), 2));
    Output b = ops::Const(root, Random(DT_FLOAT, TensorShape({4}), 3));
    conv = ops::Conv2D(root.WithOpName("conv"), x, w, {.padding = "SAME"});
    bias_add = ops::BiasAdd(root.WithOpName("bias_add"), conv, b);
    relu = ops::Relu(root.WithOpName("relu"), bias_add);
    feeds = {{x, Random(DT_FLOAT, TensorShape({2, 6, 6, 2}), 1)}};
  }
};

TEST(RemapperTest, AFetchedIntermediateIsNotFusedAway) {
  SmallConv g;
  Ran separate = RunWith(g.root, false, g.feeds, {g.conv, g.relu});
  Ran fused = RunWith(g.root, true, g.feeds, {g.conv, g.relu});
  EXPECT_EQ(fused.fused, 0);  // the conv's output is needed: nothing to start from
  EXPECT_TRUE(SameBits(fused.outputs[0], separate.outputs[0]));
  EXPECT_TRUE(SameBits(fused.outputs[1], separate.outputs[1]));

  // Fetching the BiasAdd ends the chain there: Relu reads the fused op.
  Ran upto_bias = RunWith(g.root, true, g.feeds, {g.bias_add, g.relu});
  EXPECT_EQ(upto_bias.fused, 1);
  Ran upto_bias_separate = RunWith(g.root, false, g.feeds, {g.bias_add, g.relu});
  EXPECT_TRUE(SameBits(upto_bias.outputs[0], upto_bias_separate.outputs[0]));
  EXPECT_TRUE(SameBits(upto_bias.outputs[1], upto_bias_separate.outputs[1]));
}

TEST(RemapperTest, AnIntermediateWithASecondReaderEndsTheChain) {
  SmallConv g;
  Output twice = ops::Add(g.root, g.bias_add, g.relu);  // reads BiasAdd beside Relu
  Ran separate = RunWith(g.root, false, g.feeds, {twice});
  Ran fused = RunWith(g.root, true, g.feeds, {twice});
  EXPECT_EQ(fused.fused, 1);  // Conv2D + BiasAdd; Relu reads the fused op
  EXPECT_TRUE(SameBits(fused.outputs[0], separate.outputs[0]));
}

TEST(RemapperTest, AFedIntermediateCutsTheChain) {
  SmallConv g;
  const std::vector<Feed> feeds = {{g.bias_add, Random(DT_FLOAT, TensorShape({2, 6, 6, 4}), 5)}};
  Ran fused = RunWith(g.root, true, feeds, {g.relu});
  EXPECT_EQ(fused.fused, 0);  // the convolution is not even in the plan
  Ran separate = RunWith(g.root, false, feeds, {g.relu});
  EXPECT_TRUE(SameBits(fused.outputs[0], separate.outputs[0]));
}

TEST(RemapperTest, AnIntermediateOthersWaitForIsNotFusedAway) {
  SmallConv g;
  Output after = ops::NoOp(g.root.WithControlDependencies({g.conv}));
  Ran fused = RunWith(g.root, true, g.feeds, {g.relu}, {after});
  EXPECT_EQ(fused.fused, 0);
  // A target is kept as well.
  Ran target = RunWith(g.root, true, g.feeds, {g.relu}, {g.conv});
  EXPECT_EQ(target.fused, 0);
  // The chain's last op may be a target: the fused op runs in its stead.
  Ran last_target = RunWith(g.root, true, g.feeds, {g.relu}, {g.bias_add});
  EXPECT_EQ(last_target.fused, 1);
  Ran separate = RunWith(g.root, false, g.feeds, {g.relu}, {g.bias_add});
  EXPECT_TRUE(SameBits(last_target.outputs[0], separate.outputs[0]));
}

TEST(RemapperTest, TheFusedOpKeepsTheChainsControlInputs) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_FLOAT);
  // Reading a variable nobody initialized fails: the gate.
  Output handle = ops::VarHandleOp(root, DT_FLOAT, PartialShape({}), "gate");
  Output gate = ops::ReadVariableOp(root, handle, DT_FLOAT);
  Output open = ops::AssignVariableOp(root, handle, ops::Const(root, Tensor::Scalar(0.0f)));
  Output w = ops::Const(root, Random(DT_FLOAT, TensorShape({1, 1, 2, 3}), 2));
  Output b = ops::Const(root, Random(DT_FLOAT, TensorShape({3}), 3));
  Output conv = ops::Conv2D(root, x, w);
  // The BiasAdd waits for the read, so the run must fail.
  Output y = ops::BiasAdd(root.WithControlDependencies({gate}), conv, b);
  StatusOr<std::unique_ptr<Session>> session = Session::Create(root.graph());
  ASSERT_TRUE(session.ok());
  StatusOr<std::vector<Tensor>> out =
      (*session)->Run({{x, Random(DT_FLOAT, TensorShape({1, 2, 2, 2}), 1)}}, {y}, {});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(out.status().message(), HasSubstr("gate"));
  // Initialized, it lets the fused op run.
  CKFLOW_ASSERT_OK((*session)->Run({}, {}, {open}).status());
  out = (*session)->Run({{x, Random(DT_FLOAT, TensorShape({1, 2, 2, 2}), 1)}}, {y}, {});
  CKFLOW_ASSERT_OK(out.status());
  EXPECT_EQ(SessionInternals::num_fused_ops(**session), 1);
}

TEST(RemapperTest, ATrainingBatchNormStaysSeparate) {
  SmallConv g;
  Output ones = ops::Const(g.root, Tensor::FromVector<float>({1, 1, 1, 1}));
  Output zeros = ops::Const(g.root, Tensor::FromVector<float>({0, 0, 0, 0}));
  Output y = ops::Relu(
      g.root,
      ops::FusedBatchNorm(g.root, g.bias_add, ones, zeros, zeros, ones, {.is_training = true}).y);
  Ran separate = RunWith(g.root, false, g.feeds, {y});
  Ran fused = RunWith(g.root, true, g.feeds, {y});
  EXPECT_EQ(fused.fused, 1);  // Conv2D + BiasAdd only
  EXPECT_TRUE(SameBits(fused.outputs[0], separate.outputs[0]));
}

TEST(RemapperTest, AWrongBiasIsInvalidArgumentNamingTheBiasAdd) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_FLOAT);
  Output bias = ops::Placeholder(root, DT_FLOAT);  // shape known only when fed
  Output w = ops::Const(root, Random(DT_FLOAT, TensorShape({1, 1, 2, 3}), 2));
  Output y = ops::Relu(root, ops::BiasAdd(root.WithOpName("layer/bias_add"),
                                          ops::Conv2D(root.WithOpName("layer/conv"), x, w), bias));
  for (bool remapping : {false, true}) {
    StatusOr<std::unique_ptr<Session>> session =
        Session::Create(root.graph(), {.remapping = remapping});
    ASSERT_TRUE(session.ok());
    StatusOr<std::vector<Tensor>> out =
        (*session)->Run({{x, Random(DT_FLOAT, TensorShape({1, 2, 2, 2}), 1)},
                         {bias, Random(DT_FLOAT, TensorShape({4}), 3)}},
                        {y}, {});
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument) << remapping;
    EXPECT_THAT(out.status().message(), HasSubstr("layer/bias_add")) << remapping;
    EXPECT_THAT(out.status().message(), HasSubstr("[4]")) << remapping;
  }
}

TEST(RemapperTest, APoolingWhoseInputIsFetchedStaysSeparate) {
  SmallConv g;
  Output pool = ops::MaxPool(g.root, g.relu);
  Ran separate = RunWith(g.root, false, g.feeds, {g.relu, pool});
  Ran fused = RunWith(g.root, true, g.feeds, {g.relu, pool});
  EXPECT_EQ(fused.fused, 1);  // Conv2D + BiasAdd + Relu
  EXPECT_TRUE(SameBits(fused.outputs[0], separate.outputs[0]));
  EXPECT_TRUE(SameBits(fused.outputs[1], separate.outputs[1]));
  // In training, MaxPoolGrad reads the pooling's input: it stays out of the
  // convolution, and runs with its gradient as _MaxPoolWithTaps and
  // _MaxPoolGradWithTaps.
  Output grad = ops::MaxPoolGrad(g.root, g.relu, pool, ops::OnesLike(g.root, pool), {});
  Ran training = RunWith(g.root, true, g.feeds, {grad});
  Ran training_separate = RunWith(g.root, false, g.feeds, {grad});
  EXPECT_EQ(training.fused, 3);
  EXPECT_TRUE(SameBits(training.outputs[0], training_separate.outputs[0]));
}

// ------------------------------------ MaxPool with its gradient (taps)

struct TapsCase {
  DataType dtype;
  int64_t batch, rows, cols, channels;
  int64_t window, stride;
  std::string padding;
  bool relu;  // a Relu before the pooling, and its ReluGrad after MaxPoolGrad
};

class PoolTapsTest : public ::testing::TestWithParam<TapsCase> {};

// Values on a grid of quarters, so windows hold ties; a -0 beside a +0;
// NaNs, one the first tap of a window (which the scan keeps).
Tensor Gridded(DataType dtype, const TensorShape& shape, uint32_t seed) {
  Tensor t = Random(dtype, shape, seed);
  for (int64_t i = 0; i < t.NumElements(); ++i) {
    if (dtype == DT_FLOAT) {
      t.flat<float>()[i] = std::round(t.flat<float>()[i] * 4) / 4;
    } else {
      t.flat<double>()[i] = std::round(t.flat<double>()[i] * 4) / 4;
    }
  }
  const int64_t n = t.NumElements();
  if (dtype == DT_FLOAT) {
    t.flat<float>()[0] = std::nanf("");
    t.flat<float>()[n / 3] = std::nanf("");
    t.flat<float>()[n / 2] = -0.0f;
    t.flat<float>()[n / 2 + 1] = 0.0f;
  } else {
    t.flat<double>()[0] = std::nan("");
    t.flat<double>()[n / 3] = std::nan("");
    t.flat<double>()[n / 2] = -0.0;
    t.flat<double>()[n / 2 + 1] = 0.0;
  }
  return t;
}

TEST_P(PoolTapsTest, ThePoolingAndItsGradientGiveTheBitsOfTheSeparateOps) {
  const TapsCase& c = GetParam();
  Scope root = Scope::NewRootScope();
  const ops::PoolAttrs attrs = {.ksize = {1, c.window, c.window, 1},
                                .strides = {1, c.stride, c.stride, 1},
                                .padding = c.padding};
  Output x = ops::Placeholder(root.WithOpName("x"), c.dtype);
  Output dy = ops::Placeholder(root.WithOpName("dy"), c.dtype);
  Output a = c.relu ? ops::Relu(root.WithOpName("relu"), x) : x;
  Output y = ops::MaxPool(root.WithOpName("pool"), a, attrs);
  Output da = ops::MaxPoolGrad(root.WithOpName("pool_grad"), a, y, dy, attrs);
  Output dx = c.relu ? ops::ReluGrad(root.WithOpName("relu_grad"), da, a) : da;
  CKFLOW_ASSERT_OK(root.status());
  const TensorShape x_shape({c.batch, c.rows, c.cols, c.channels});
  Ran pooled = RunWith(root, false, {{x, Gridded(c.dtype, x_shape, 1)}}, {y});
  ASSERT_EQ(pooled.outputs.size(), 1u);
  const std::vector<Feed> feeds = {{x, Gridded(c.dtype, x_shape, 1)},
                                   {dy, Gridded(c.dtype, pooled.outputs[0].shape(), 2)}};

  Ran separate = RunWith(root, false, feeds, {y, dx});
  Ran fused = RunWith(root, true, feeds, {y, dx});
  Ran fused_one_thread = RunWith(root, true, feeds, {y, dx}, {}, 1);
  EXPECT_EQ(fused.fused, 2);
  ASSERT_EQ(fused.outputs.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(SameBits(fused.outputs[i], separate.outputs[i]))
        << i << ": " << fused.outputs[i].DebugString() << "\nvs "
        << separate.outputs[i].DebugString();
    EXPECT_TRUE(SameBits(fused_one_thread.outputs[i], separate.outputs[i])) << i;
  }
}

// Keras' Conv2D -> BatchNormalization -> ReLU -> MaxPooling2D, trained: the
// batch norm's gradient reads the pooling's, and with disjoint windows
// makes its rows itself (_FusedBatchNormGradFromTaps).
TEST_P(PoolTapsTest, ABatchNormGradientAfterItGivesTheBitsOfTheSeparateOps) {
  const TapsCase& c = GetParam();
  const ops::PoolAttrs attrs = {.ksize = {1, c.window, c.window, 1},
                                .strides = {1, c.stride, c.stride, 1},
                                .padding = c.padding};
  const TensorShape x_shape({c.batch, c.rows, c.cols, c.channels});
  const TensorShape vector({c.channels});
  for (bool training : {true, false}) {
    SCOPED_TRACE(training ? "training" : "inference");
    Scope root = Scope::NewRootScope();
    Output x = ops::Placeholder(root.WithOpName("x"), c.dtype);
    Output dy = ops::Placeholder(root.WithOpName("dy"), c.dtype);
    Output scale = ops::Placeholder(root.WithOpName("scale"), c.dtype);
    Output moments = ops::Placeholder(root.WithOpName("moments"), c.dtype);
    const ops::FusedBatchNormAttrs norm_attrs = {.epsilon = 1e-3f, .is_training = training};
    auto bn =
        ops::FusedBatchNorm(root.WithOpName("bn"), x, scale, moments, moments, moments, norm_attrs);
    Output a = c.relu ? ops::Relu(root.WithOpName("relu"), bn.y) : bn.y;
    Output y = ops::MaxPool(root.WithOpName("pool"), a, attrs);
    Output da = ops::MaxPoolGrad(root.WithOpName("pool_grad"), a, y, dy, attrs);
    Output dz = c.relu ? ops::ReluGrad(root.WithOpName("relu_grad"), da, a) : da;
    auto grad =
        ops::FusedBatchNormGrad(root.WithOpName("bn_grad"), dz, x, scale, bn.reserve_space_1,
                                bn.reserve_space_2, bn.reserve_space_3, norm_attrs);
    CKFLOW_ASSERT_OK(root.status());
    Ran pooled = RunWith(root, false,
                         {{x, Gridded(c.dtype, x_shape, 1)},
                          {scale, Random(c.dtype, vector, 3, 0.5)},
                          {moments, Random(c.dtype, vector, 4, 0.5)}},
                         {y});
    ASSERT_EQ(pooled.outputs.size(), 1u);
    const std::vector<Feed> feeds = {{x, Gridded(c.dtype, x_shape, 1)},
                                     {dy, Gridded(c.dtype, pooled.outputs[0].shape(), 2)},
                                     {scale, Random(c.dtype, vector, 3, 0.5)},
                                     {moments, Random(c.dtype, vector, 4, 0.5)}};
    const std::vector<Output> fetches = {y, grad.x_backprop, grad.scale_backprop,
                                         grad.offset_backprop};
    Ran separate = RunWith(root, false, feeds, fetches);
    ASSERT_EQ(separate.outputs.size(), 4u);
    for (int threads : {1, 2}) {
      StatusOr<std::unique_ptr<Session>> session = Session::Create(
          root.graph(),
          {.inter_op_parallelism_threads = threads, .intra_op_parallelism_threads = threads});
      ASSERT_TRUE(session.ok());
      StatusOr<std::vector<Tensor>> fused = (*session)->Run(feeds, fetches, {});
      CKFLOW_ASSERT_OK(fused.status());
      const bool disjoint = c.stride >= c.window;
      EXPECT_EQ(SessionInternals::fused_op_types(**session),
                (std::vector<std::string>{
                    disjoint ? "_FusedBatchNormGradFromTaps" : "_MaxPoolGradWithTaps",
                    "_MaxPoolWithTaps"}));
      for (int i = 0; i < 4; ++i) {
        EXPECT_TRUE(SameBits((*fused)[i], separate.outputs[i]))
            << threads << " threads, output " << i << ": " << (*fused)[i].DebugString() << "\nvs "
            << separate.outputs[i].DebugString();
      }
    }
    // Fetching the pooling's gradient keeps it apart from the batch norm's.
    Ran with_dz = RunWith(root, true, feeds, {grad.x_backprop, dz});
    Ran with_dz_separate = RunWith(root, false, feeds, {grad.x_backprop, dz});
    EXPECT_EQ(with_dz.fused, 2);
    for (int i = 0; i < 2; ++i) {
      EXPECT_TRUE(SameBits(with_dz.outputs[i], with_dz_separate.outputs[i])) << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Poolings, PoolTapsTest,
    ::testing::Values(
        // Keras' MaxPooling2D after a ReLU: disjoint windows, the ReluGrad folded in.
        TapsCase{DT_FLOAT, 3, 26, 26, 32, 2, 2, "VALID", true},
        // 70 channels: a block of 64 and a tail; an odd size leaves a row
        // and a column under no window.
        TapsCase{DT_FLOAT, 2, 11, 11, 70, 2, 2, "VALID", true},
        TapsCase{DT_FLOAT, 2, 11, 9, 5, 2, 2, "SAME", false},    // last windows cut short
        TapsCase{DT_FLOAT, 2, 10, 10, 3, 1, 2, "VALID", true},   // gaps between windows
        TapsCase{DT_FLOAT, 1, 3, 140, 2, 1, 2, "VALID", false},  // 70 columns under none
        TapsCase{DT_FLOAT, 2, 8, 9, 64, 2, 2, "VALID", true},    // 64 channels
        // Overlapping windows: gradients add up where windows share a maximum.
        TapsCase{DT_FLOAT, 2, 9, 10, 6, 3, 1, "VALID", true},
        TapsCase{DT_FLOAT, 2, 13, 12, 70, 3, 2, "SAME", false},
        TapsCase{DT_DOUBLE, 2, 12, 12, 7, 2, 2, "VALID", true},
        TapsCase{DT_DOUBLE, 2, 9, 9, 4, 3, 2, "SAME", true}));

TEST(RemapperTest, AMaxPoolGradOfAnotherInputStaysSeparate) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_FLOAT);
  Output other = ops::Neg(root, x);
  Output y = ops::MaxPool(root, x, {});
  Output grad = ops::MaxPoolGrad(root, other, y, ops::OnesLike(root, y), {});
  const std::vector<Feed> feeds = {{x, Random(DT_FLOAT, TensorShape({2, 6, 6, 3}), 1)}};
  Ran fused = RunWith(root, true, feeds, {grad});
  Ran separate = RunWith(root, false, feeds, {grad});
  EXPECT_EQ(fused.fused, 0);
  EXPECT_TRUE(SameBits(fused.outputs[0], separate.outputs[0]));
  // Nor does a pooling with no gradient in the run record its taps.
  EXPECT_EQ(RunWith(root, true, feeds, {y}).fused, 0);
}

// Relu -> MaxPool, and MaxPoolGrad through both.
struct ReluPool {
  Scope root = Scope::NewRootScope();
  Output x, a, y, da;
  std::vector<Feed> feeds;
  ReluPool() {
    x = ops::Placeholder(root, DT_FLOAT);
    a = ops::Relu(root, x);
    y = ops::MaxPool(root, a, {});
    da = ops::MaxPoolGrad(root, a, y, ops::OnesLike(root, y), {});
    feeds = {{x, Random(DT_FLOAT, TensorShape({2, 6, 6, 3}), 1)}};
  }
};

TEST(RemapperTest, AReluGradOfAnotherFeatureLeavesThePoolingGradientAlone) {
  ReluPool g;
  Output dx = ops::ReluGrad(g.root, g.da, g.x);  // the Relu's input, not the pooling's
  Output also = ops::ReluGrad(g.root, g.da, g.a);
  Ran fused = RunWith(g.root, true, g.feeds, {dx});
  Ran separate = RunWith(g.root, false, g.feeds, {dx});
  EXPECT_EQ(fused.fused, 2);  // the pooling and its gradient, not the ReluGrad
  EXPECT_TRUE(SameBits(fused.outputs[0], separate.outputs[0]));
  // With a second reader of MaxPoolGrad, its ReluGrad stays separate too.
  Ran two = RunWith(g.root, true, g.feeds, {dx, also});
  Ran two_separate = RunWith(g.root, false, g.feeds, {dx, also});
  EXPECT_EQ(two.fused, 2);
  EXPECT_TRUE(SameBits(two.outputs[0], two_separate.outputs[0]));
  EXPECT_TRUE(SameBits(two.outputs[1], two_separate.outputs[1]));
}

TEST(RemapperTest, AFetchedPoolingGradientIsStillFused) {
  ReluPool g;
  Output dx = ops::ReluGrad(g.root, g.da, g.a);
  // Fetching MaxPoolGrad's output keeps it apart from the ReluGrad.
  Ran fused = RunWith(g.root, true, g.feeds, {g.da, dx});
  Ran separate = RunWith(g.root, false, g.feeds, {g.da, dx});
  EXPECT_EQ(fused.fused, 2);
  EXPECT_TRUE(SameBits(fused.outputs[0], separate.outputs[0]));
  EXPECT_TRUE(SameBits(fused.outputs[1], separate.outputs[1]));
}

TEST(RemapperTest, AWindowLargerThanTheConvolutionIsInvalidArgumentNamingThePool) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_FLOAT);  // shape known only when fed
  Output w = ops::Const(root, Random(DT_FLOAT, TensorShape({3, 3, 2, 4}), 2));
  Output b = ops::Const(root, Random(DT_FLOAT, TensorShape({4}), 3));
  Output y = ops::MaxPool(root.WithOpName("net/pool"),
                          ops::Relu(root, ops::BiasAdd(root, ops::Conv2D(root, x, w), b)),
                          {.ksize = {1, 4, 4, 1}});
  for (bool remapping : {false, true}) {
    StatusOr<std::unique_ptr<Session>> session =
        Session::Create(root.graph(), {.remapping = remapping});
    ASSERT_TRUE(session.ok());
    // The convolution gives 3 x 3.
    StatusOr<std::vector<Tensor>> out =
        (*session)->Run({{x, Random(DT_FLOAT, TensorShape({1, 5, 5, 2}), 1)}}, {y}, {});
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument) << remapping;
    EXPECT_THAT(out.status().message(), HasSubstr("net/pool")) << remapping;
    EXPECT_THAT(out.status().message(), HasSubstr("[1,3,3,4]")) << out.status().message();
  }
}

}  // namespace
}  // namespace ckflow
