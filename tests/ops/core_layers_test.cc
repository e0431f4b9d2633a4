// ReLU, Flatten and Dropout: outputs, shapes, Keras' names, the training
// flag's effect on Dropout, and errors naming the layer.

#include "ops/core_layers.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "ops/array_ops.h"
#include "runtime/session.h"
#include "tests/ops/layer_test_util.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

using ::ckflow::testing::FilledTensor;
using ::ckflow::testing::MaxAbsDifference;
using ::ckflow::testing::RunLayer;
using ::ckflow::testing::StatusIs;

TEST(ReLUTest, IsMaxOfInputAndZero) {
  const Tensor x = FilledTensor({3, 4}, 31);
  std::vector<double> want;
  for (float v : x.flat<float>()) want.push_back(std::max(double{v}, 0.0));
  auto relu = ReLU::Make();
  EXPECT_EQ(relu->name(), "re_lu");
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto run, RunLayer(*relu, x));
  EXPECT_EQ(MaxAbsDifference(run.output, want), 0.0);
}

TEST(FlattenTest, KeepsTheBatchAndJoinsTheRestInRowMajorOrder) {
  const Tensor x = FilledTensor({2, 3, 4, 5}, 32);
  auto flatten = Flatten::Make();
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto run, RunLayer(*flatten, x));
  EXPECT_EQ(run.output.shape(), TensorShape({2, 60}));
  EXPECT_TRUE(
      std::equal(x.flat<float>().begin(), x.flat<float>().end(), run.output.flat<float>().begin()));
}

TEST(FlattenTest, ShapesForKnownAndUnknownDimensions) {
  const struct {
    PartialShape in, out;
  } cases[] = {
      {PartialShape({-1, 5, 5, 64}), PartialShape({-1, 1600})},
      {PartialShape({8, -1, 3}), PartialShape({8, -1})},
      {PartialShape({-1}), PartialShape({-1, 1})},
  };
  for (const auto& c : cases) {
    Scope root = Scope::NewRootScope();
    Output y = (*Flatten::Make())(root, ops::Placeholder(root, DT_FLOAT, {.shape = c.in}));
    ASSERT_TRUE(root.ok()) << root.status();
    EXPECT_EQ(y.shape(), c.out) << c.in.ToString();
  }
}

TEST(FlattenTest, NeedsTheBatchOrTheRestKnown) {
  for (const PartialShape& in : {PartialShape({-1, 5, -1}), PartialShape({}), PartialShape()}) {
    Scope root = Scope::NewRootScope();
    Output y = (*Flatten::Make())(root, ops::Placeholder(root, DT_FLOAT, {.shape = in}));
    EXPECT_FALSE(y.valid());
    EXPECT_THAT(root.status(), StatusIs(StatusCode::kInvalidArgument, "layer 'flatten': "))
        << in.ToString();
  }
}

TEST(DropoutTest, AnInferenceCallReturnsItsInput) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_FLOAT, {.shape = {-1, 8}});
  auto dropout = Dropout::Make(0.5);
  EXPECT_EQ((*dropout)(root, x), x);
  EXPECT_EQ((*dropout)(root, x, false), x);
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(dropout->name(), "dropout");
}

// The fraction of zeros, and whether every other element is 1 / (1 - rate),
// of a training call on ones made inside a Sequential called with
// training=true (so the flag is inherited).
TEST(DropoutTest, ATrainingCallDropsAtTheRateAndScalesTheRest) {
  const double rate = 0.25;
  auto model = Sequential::Make({Dropout::Make(rate, {.seed = 3})});
  Scope root = Scope::NewRootScope();
  root.graph().set_seed(1);
  Output x = ops::Placeholder(root, DT_FLOAT, {.shape = {-1}});
  Output y = (*model)(root, x, true);
  ASSERT_TRUE(root.ok()) << root.status();
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto session, Session::Create(root.graph()));
  Tensor ones(DT_FLOAT, TensorShape({20000}));
  for (float& v : ones.flat<float>()) v = 1;
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> a, session->Run({{x, ones}}, {y}));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> b, session->Run({{x, ones}}, {y}));
  int64_t zeros = 0;
  for (float v : a[0].flat<float>()) {
    if (v == 0) {
      ++zeros;
    } else {
      EXPECT_FLOAT_EQ(v, 1 / (1 - rate));
    }
  }
  EXPECT_NEAR(static_cast<double>(zeros) / 20000, rate, 0.02);
  EXPECT_FALSE(testing::SameTensor(a[0], b[0]));  // a new mask every run
}

TEST(DropoutTest, ARateOutsideZeroToOneIsAnErrorNamingTheLayer) {
  for (double rate : {-0.1, 1.0, 2.0}) {
    Scope root = Scope::NewRootScope();
    Output y = (*Dropout::Make(rate))(root, ops::Placeholder(root, DT_FLOAT, {.shape = {4}}), true);
    EXPECT_FALSE(y.valid());
    EXPECT_THAT(root.status(),
                StatusIs(StatusCode::kInvalidArgument, "layer 'dropout': rate must be in [0, 1)"))
        << rate;
  }
}

}  // namespace
}  // namespace ckflow
