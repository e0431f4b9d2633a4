// Dropout (tf.nn.dropout's composite) through the Session: the mask's
// statistics and the scaling, seeds (the same masks in two sessions, a new
// mask each run, reproducible from the graph seed), noise_shape, the
// gradient (zero where dropped), thread counts and errors.
#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "ops/array_ops.h"
#include "ops/gradients.h"
#include "ops/nn_ops.h"
#include "runtime/session.h"
#include "tests/ops/op_test_util.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

using testing::ToDoubles;

std::unique_ptr<Session> NewSession(const Scope& root) {
  StatusOr<std::unique_ptr<Session>> s = Session::Create(root.graph());
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(s).value() : nullptr;
}

std::vector<double> RunOnce(Session& session, const Output& y) {
  StatusOr<std::vector<Tensor>> out = session.Run({}, {y});
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? ToDoubles((*out)[0]) : std::vector<double>();
}

// Dropout of ones [n] in a graph seeded `graph_seed`.
struct DropoutGraph {
  Scope root = Scope::NewRootScope();
  Output y;
  DropoutGraph(int64_t graph_seed, double rate, int64_t n, ops::DropoutAttrs attrs = {}) {
    root.graph().set_seed(graph_seed);
    y = ops::Dropout(
        root, ops::Const(root, testing::MakeTensor(DT_FLOAT, {n}, std::vector<double>(n, 1.0))),
        rate, attrs);
  }
};

TEST(Dropout, KeepsAboutOneMinusRateAndScalesWhatItKeeps) {
  for (double rate : {0.1, 0.5, 0.8}) {
    SCOPED_TRACE(rate);
    const int64_t n = 100000;
    DropoutGraph g(7, rate, n);
    ASSERT_TRUE(g.root.ok()) << g.root.status();
    auto session = NewSession(g.root);
    const double scale = static_cast<float>(1.0 / (1.0 - rate));
    int64_t kept = 0;
    for (double v : RunOnce(*session, g.y)) {
      ASSERT_TRUE(v == 0 || v == scale) << v;
      kept += v != 0;
    }
    // Five standard deviations of a binomial fraction.
    const double sigma = std::sqrt(rate * (1 - rate) / n);
    EXPECT_NEAR(static_cast<double>(kept) / n, 1 - rate, 5 * sigma);
  }
}

TEST(Dropout, SameSeedsGiveSameMasksInTwoSessions) {
  DropoutGraph g(11, 0.5, 1000, {.seed = 3});
  auto first = NewSession(g.root);
  auto second = NewSession(g.root);
  const std::vector<double> a = RunOnce(*first, g.y);
  EXPECT_EQ(RunOnce(*second, g.y), a);
  // And in another graph built the same way.
  DropoutGraph again(11, 0.5, 1000, {.seed = 3});
  EXPECT_EQ(RunOnce(*NewSession(again.root), again.y), a);
}

TEST(Dropout, EachRunDrawsANewMask) {
  DropoutGraph g(11, 0.5, 1000);
  auto session = NewSession(g.root);
  const std::vector<double> a = RunOnce(*session, g.y);
  const std::vector<double> b = RunOnce(*session, g.y);
  EXPECT_NE(a, b);
}

TEST(Dropout, MasksFollowTheGraphSeed) {
  // No op seed: the default op seed (the node's id) is the same in graphs
  // built alike.
  DropoutGraph same(1, 0.5, 1000), again(1, 0.5, 1000), other(2, 0.5, 1000);
  const std::vector<double> a = RunOnce(*NewSession(same.root), same.y);
  EXPECT_EQ(RunOnce(*NewSession(again.root), again.y), a);
  EXPECT_NE(RunOnce(*NewSession(other.root), other.y), a);
}

TEST(Dropout, GradientIsZeroWhereDroppedAndScaledWhereKept) {
  Scope root = Scope::NewRootScope();
  root.graph().set_seed(5);
  std::mt19937 rng(71);
  Output x = ops::Placeholder(root.WithOpName("x"), DT_DOUBLE, {.shape = {2000}});
  Output y = ops::Dropout(root, x, 0.4);
  const Tensor weights = testing::RandomTensor(DT_DOUBLE, {2000}, rng, 1, 2);
  Output w = ops::Const(root, weights);
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Output> grads, AddGradients(root, {y}, {x}, {w}));
  auto session = NewSession(root);
  Tensor xv = testing::RandomTensor(DT_DOUBLE, {2000}, rng, 1, 3);  // never 0
  // One run: the output and the gradient see the same mask.
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, session->Run({{x, xv}}, {y, grads[0]}));
  const std::vector<double> yv = ToDoubles(out[0]), gv = ToDoubles(out[1]);
  const std::vector<double> wv = ToDoubles(weights);
  const double scale = 1.0 / 0.6;
  int dropped = 0;
  for (size_t i = 0; i < yv.size(); ++i) {
    if (yv[i] == 0) {
      ++dropped;
      EXPECT_EQ(gv[i], 0) << i;
    } else {
      EXPECT_DOUBLE_EQ(gv[i], wv[i] * scale) << i;
    }
  }
  EXPECT_GT(dropped, 0);
  EXPECT_LT(dropped, 2000);
}

TEST(Dropout, RateZeroReturnsX) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_FLOAT);
  EXPECT_EQ(ops::Dropout(root, x, 0.0), x);
  ASSERT_TRUE(root.ok()) << root.status();
}

TEST(Dropout, BuildsTensorFlowsComposite) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, {.shape = {2, 3}});
  Output y = ops::Dropout(root, x, 0.5);
  ASSERT_TRUE(root.ok()) << root.status();
  std::string nodes;
  for (int id = 0; id < root.graph().num_nodes(); ++id) {
    const Node* n = root.graph().node(id);
    nodes += n->name() + " (" + n->type() + ")\n";
  }
  EXPECT_EQ(nodes,
            "x (Placeholder)\n"
            "dropout/Const (Const)\n"
            "dropout/Mul (Mul)\n"
            "dropout/Const_1 (Const)\n"
            "dropout/random_uniform/RandomUniform (RandomUniform)\n"
            "dropout/Const_2 (Const)\n"
            "dropout/GreaterEqual (GreaterEqual)\n"
            "dropout/Const_3 (Const)\n"
            "dropout/SelectV2 (SelectV2)\n");
  EXPECT_EQ(y.shape().ToString(), "[2,3]");
}

TEST(Dropout, NoiseShapeSharesOneDrawAlongItsSizeOneDimensions) {
  for (bool known_rows : {true, false}) {
    Scope root = Scope::NewRootScope();
    root.graph().set_seed(9);
    Output x = ops::Placeholder(root, DT_FLOAT, {.shape = {known_rows ? 50 : -1, 40}});
    Output y = ops::Dropout(root, x, 0.5, {.noise_shape = std::vector<int64_t>{-1, 1}});
    ASSERT_TRUE(root.ok()) << root.status();
    auto session = NewSession(root);
    Tensor ones = testing::MakeTensor(DT_FLOAT, {50, 40}, std::vector<double>(2000, 1.0));
    CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, session->Run({{x, ones}}, {y}));
    const std::vector<double> v = ToDoubles(out[0]);
    int kept_rows = 0;
    for (int r = 0; r < 50; ++r) {
      for (int c = 1; c < 40; ++c) ASSERT_EQ(v[r * 40 + c], v[r * 40]) << r;
      kept_rows += v[r * 40] != 0;
    }
    EXPECT_GT(kept_rows, 0);
    EXPECT_LT(kept_rows, 50);
  }
}

TEST(Dropout, MaskDoesNotDependOnThreadCount) {
  DropoutGraph g(13, 0.3, 200000);
  std::vector<double> one;
  {
    tbb::global_control limit(tbb::global_control::max_allowed_parallelism, 1);
    one = RunOnce(*NewSession(g.root), g.y);
  }
  for (int threads : {2, 4}) {
    tbb::global_control limit(tbb::global_control::max_allowed_parallelism, threads);
    EXPECT_EQ(RunOnce(*NewSession(g.root), g.y), one) << threads << " threads";
  }
}

TEST(Dropout, BadArgumentsAreInvalidArguments) {
  struct Case {
    double rate;
    DataType dtype;
    std::optional<std::vector<int64_t>> noise_shape;
    std::string message;
  };
  const Case cases[] = {
      {1.0, DT_FLOAT, std::nullopt, "Dropout: rate is 1, but must be in [0, 1)"},
      {-0.1, DT_FLOAT, std::nullopt, "Dropout: rate is -0.1, but must be in [0, 1)"},
      {std::numeric_limits<double>::quiet_NaN(), DT_FLOAT, std::nullopt,
       "Dropout: rate is nan, but must be in [0, 1)"},
      {0.5, DT_INT32, std::nullopt, "Dropout: x is int32 (x:0), but must be float32 or float64"},
      {0.5, DT_FLOAT, std::vector<int64_t>{4},
       "Dropout: noise_shape has 1 dimensions, but x is [4,5] (x:0)"},
      {0.5, DT_FLOAT, std::vector<int64_t>{4, -2},
       "Dropout: noise_shape[1] is -2, but must be >= 0 or -1 (x's dimension)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.message);
    Scope root = Scope::NewRootScope();
    Output x = ops::Placeholder(root.WithOpName("x"), c.dtype, {.shape = {4, 5}});
    Output y = ops::Dropout(root, x, c.rate, {.noise_shape = c.noise_shape});
    EXPECT_FALSE(y.valid());
    EXPECT_EQ(root.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(root.status().message(), c.message);
  }
}

}  // namespace
}  // namespace ckflow
