// The standard ops through the real Session: the same values as the
// reference evaluator, errors that name the node, feeds checked against a
// Placeholder, and stateful random ops across runs, sessions and threads.
#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include <algorithm>
#include <thread>

#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"
#include "ops/random_ops.h"
#include "runtime/session.h"
#include "tests/ops/op_test_util.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

using testing::ToDoubles;

// A small network: softmax(relu(x w + b)), with its loss against labels.
struct Network {
  Scope root = Scope::NewRootScope();
  Output x, labels, probabilities, loss;

  Network() {
    std::mt19937 rng(41);
    x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, {.shape = {-1, 5}});
    labels = ops::Placeholder(root.WithOpName("labels"), DT_INT32, {.shape = {-1}});
    Scope dense = root.NewSubScope("dense");
    Output w = ops::Const(dense.WithOpName("w"), testing::RandomTensor(DT_FLOAT, {5, 4}, rng));
    Output b = ops::Const(dense.WithOpName("b"), testing::RandomTensor(DT_FLOAT, {4}, rng));
    Output logits = ops::Relu(dense, ops::BiasAdd(dense, ops::MatMul(dense, x, w), b));
    probabilities = ops::Softmax(root, logits);
    loss = ops::Mean(root, ops::SparseSoftmaxCrossEntropyWithLogits(root, logits, labels).loss);
  }
};

TEST(SessionOps, RunsAsTheReferenceEvaluatorDoes) {
  Network net;
  ASSERT_TRUE(net.root.ok()) << net.root.status();
  std::mt19937 rng(42);
  Tensor batch = testing::RandomTensor(DT_FLOAT, {8, 5}, rng);
  Tensor labels = Tensor::FromVector<int32_t>({0, 1, 2, 3, 0, 1, 2, 3});
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto session, Session::Create(net.root.graph()));
  CKFLOW_ASSERT_OK_AND_ASSIGN(
      std::vector<Tensor> got,
      session->Run({{net.x, batch}, {net.labels, labels}}, {net.probabilities, net.loss}));
  testing::Evaluator reference(net.root.graph());
  CKFLOW_ASSERT_OK_AND_ASSIGN(
      std::vector<Tensor> want,
      reference.Run({{net.x, batch}, {net.labels, labels}}, {net.probabilities, net.loss}));
  testing::ExpectIdentical(got[0], want[0], "probabilities");
  testing::ExpectIdentical(got[1], want[1], "loss");
  EXPECT_EQ(got[0].shape().ToString(), "[8,4]");
}

TEST(SessionOps, KernelErrorsNameTheNode) {
  Network net;
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto session, Session::Create(net.root.graph()));
  std::mt19937 rng(43);
  // A label out of range surfaces from deep inside the graph.
  StatusOr<std::vector<Tensor>> out =
      session->Run({{net.x, testing::RandomTensor(DT_FLOAT, {2, 5}, rng)},
                    {net.labels, Tensor::FromVector<int32_t>({0, 4})}},
                   {net.loss});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status(),
              testing::StatusIs(
                  StatusCode::kInvalidArgument,
                  "SparseSoftmaxCrossEntropyWithLogits (SparseSoftmaxCrossEntropyWithLogits): "
                  "labels[1] = 4 is outside the valid range [0, 4)"));
  // An unfed placeholder names itself.
  out = session->Run({}, {net.probabilities});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status(),
              testing::StatusIs(StatusCode::kInvalidArgument, "placeholder 'x' must be fed"));
}

TEST(SessionOps, FeedsAreCheckedAgainstThePlaceholder) {
  Network net;
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto session, Session::Create(net.root.graph()));
  const Tensor wrong_shape(DT_FLOAT, {2, 6});
  const Tensor wrong_dtype(DT_DOUBLE, {2, 5});
  for (const Tensor& bad : {wrong_shape, wrong_dtype}) {
    StatusOr<std::vector<Tensor>> out = session->Run({{net.x, bad}}, {net.probabilities});
    EXPECT_THAT(out.status(), testing::StatusIs(StatusCode::kInvalidArgument, "x"));
  }
}

TEST(SessionOps, RandomOpsAdvancePerRunAndRepeatPerSession) {
  Scope root = Scope::NewRootScope();
  root.graph().set_seed(7);
  Output r = ops::RandomNormal(root, {64});
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto first, Session::Create(root.graph()));
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto second, Session::Create(root.graph()));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> a0, first->Run({}, {r}));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> a1, first->Run({}, {r}));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> b0, second->Run({}, {r}));
  EXPECT_NE(ToDoubles(a0[0]), ToDoubles(a1[0]));
  EXPECT_EQ(ToDoubles(a0[0]), ToDoubles(b0[0]));
}

TEST(SessionOps, ConcurrentRunsOfARandomOpDrawDistinctRunsOfOneSequence) {
  // Eight threads run the op at once; each run takes the next run number,
  // so together they draw exactly runs 0..7 of the sequence a fresh session
  // draws one after another.
  Scope root = Scope::NewRootScope();
  Output r = ops::RandomUniform(root, {1000}, DT_FLOAT, {.seed = 3});
  constexpr int kThreads = 8;
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto sequential, Session::Create(root.graph()));
  std::vector<std::vector<double>> want;
  for (int i = 0; i < kThreads; ++i) {
    CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> t, sequential->Run({}, {r}));
    want.push_back(ToDoubles(t[0]));
  }
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto concurrent, Session::Create(root.graph()));
  std::vector<std::vector<double>> got(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      StatusOr<std::vector<Tensor>> t = concurrent->Run({}, {r});
      if (t.ok()) got[i] = ToDoubles((*t)[0]);
    });
  }
  for (std::thread& t : threads) t.join();
  std::sort(want.begin(), want.end());
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, want);
}

TEST(SessionOps, LargeKernelsGiveTheSameBitsUnderAnyParallelism) {
  std::mt19937 rng(44);
  Scope root = Scope::NewRootScope();
  Output a = ops::Const(root, testing::RandomTensor(DT_FLOAT, {300, 200}, rng));
  Output b = ops::Const(root, testing::RandomTensor(DT_FLOAT, {200, 250}, rng));
  Output y = ops::Softmax(root, ops::Tanh(root, ops::MatMul(root, a, b)));
  Output s = ops::Sum(root, y, {0});
  std::vector<std::vector<Tensor>> results;
  for (int threads : {1, 2, 4}) {
    tbb::global_control limit(tbb::global_control::max_allowed_parallelism, threads);
    CKFLOW_ASSERT_OK_AND_ASSIGN(auto session, Session::Create(root.graph()));
    CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, session->Run({}, {y, s}));
    results.push_back(out);
  }
  for (size_t i = 1; i < results.size(); ++i) {
    testing::ExpectIdentical(results[0][0], results[i][0], "softmax");
    testing::ExpectIdentical(results[0][1], results[i][1], "sum");
  }
}

}  // namespace
}  // namespace ckflow
