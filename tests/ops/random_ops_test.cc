// Random ops: Philox known answers, TensorFlow's seeding rule,
// reproducibility across runs, sessions and thread counts, and the
// distributions' moments.
#include "ops/random_ops.h"

#include <gtest/gtest.h>

#include <cmath>

#include "ops/array_ops.h"
#include "ops/philox_internal.h"
#include "tests/ops/op_test_util.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

using testing::Evaluate;
using testing::ToDoubles;

TEST(Philox, MatchesRandom123KnownAnswers) {
  // Random123's kat_vectors for philox4x32-10.
  using internal::Philox4x32;
  EXPECT_EQ(Philox4x32({0, 0, 0, 0}, {0, 0}),
            (internal::PhiloxBlock{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(Philox4x32({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
            (internal::PhiloxBlock{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(Philox4x32({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (internal::PhiloxBlock{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

// The random ops draw 16 blocks at a time: each lane must be the block
// Block gives, across the 32-bit carry of the counter too.
TEST(Philox, BlocksAtOnceAreTheBlocksOneByOne) {
  const internal::PhiloxStream stream(7, 11, 3);
  constexpr int kLanes = internal::PhiloxStream::kLanes;
  for (uint64_t first : {uint64_t{0}, uint64_t{5}, uint64_t{0xfffffff8}, uint64_t{1} << 40}) {
    uint32_t words[4][kLanes];
    stream.Blocks(first, words);
    for (int i = 0; i < kLanes; ++i) {
      EXPECT_EQ(stream.Block(first + i),
                (internal::PhiloxBlock{words[0][i], words[1][i], words[2][i], words[3][i]}))
          << first << " + " << i;
    }
  }
}

using RandomBuilder = Output (*)(const Scope&, ops::Input, DataType, const ops::RandomAttrs&);

struct Distribution {
  const char* name;
  RandomBuilder build;
};
const Distribution kDistributions[] = {{"RandomUniform", ops::RandomUniform},
                                       {"RandomNormal", ops::RandomNormal},
                                       {"TruncatedNormal", ops::TruncatedNormal}};

// Builds one random op in a fresh graph and evaluates it `runs` times in
// one Evaluator (one "session").
std::vector<Tensor> Draw(const Distribution& d, std::optional<int64_t> graph_seed,
                         std::optional<int64_t> op_seed, int runs = 1, TensorShape shape = {1000},
                         DataType dtype = DT_FLOAT) {
  Scope root = Scope::NewRootScope();
  if (graph_seed) root.graph().set_seed(*graph_seed);
  ops::Const(root, 0);  // shift node ids a little, as real graphs do
  Output r = d.build(root, Tensor::FromVector(shape.dim_sizes()), dtype, {.seed = op_seed});
  EXPECT_TRUE(root.ok()) << root.status();
  testing::Evaluator eval(root.graph());
  std::vector<Tensor> out;
  for (int i = 0; i < runs; ++i) {
    StatusOr<Tensor> t = eval.Run(r);
    EXPECT_TRUE(t.ok()) << t.status();
    if (t.ok()) out.push_back(*t);
  }
  return out;
}

bool Same(const Tensor& a, const Tensor& b) { return ToDoubles(a) == ToDoubles(b); }

TEST(RandomOps, SameSeedsGiveSameNumbersInEverySession) {
  for (const Distribution& d : kDistributions) {
    for (DataType dtype : {DT_FLOAT, DT_DOUBLE}) {
      SCOPED_TRACE(std::string(d.name) + " " + std::string(DataTypeName(dtype)));
      std::vector<Tensor> a = Draw(d, 42, 7, 2, {100}, dtype);
      std::vector<Tensor> b = Draw(d, 42, 7, 2, {100}, dtype);
      EXPECT_TRUE(Same(a[0], b[0]));
      EXPECT_TRUE(Same(a[1], b[1]));
      EXPECT_FALSE(Same(a[0], a[1])) << "successive runs must give new numbers";
    }
  }
}

TEST(RandomOps, SeedsFollowTensorFlowsRule) {
  const Distribution& d = kDistributions[0];
  // Graph seed only: reproducible (the op seed comes from the node id).
  EXPECT_TRUE(Same(Draw(d, 1, std::nullopt)[0], Draw(d, 1, std::nullopt)[0]));
  EXPECT_FALSE(Same(Draw(d, 1, std::nullopt)[0], Draw(d, 2, std::nullopt)[0]));
  // Op seed only: reproducible, and independent of the graph seed's absence.
  EXPECT_TRUE(Same(Draw(d, std::nullopt, 5)[0], Draw(d, std::nullopt, 5)[0]));
  EXPECT_FALSE(Same(Draw(d, std::nullopt, 5)[0], Draw(d, std::nullopt, 6)[0]));
  // Neither: a fresh seed per kernel.
  EXPECT_FALSE(
      Same(Draw(d, std::nullopt, std::nullopt)[0], Draw(d, std::nullopt, std::nullopt)[0]));

  Scope root = Scope::NewRootScope();
  root.graph().set_seed(42);
  Output r = ops::RandomUniform(root, {3});
  ASSERT_TRUE(root.ok());
  EXPECT_EQ(r.node()->attrs().GetOr<int64_t>("seed", -1), 42);
  EXPECT_EQ(r.node()->attrs().GetOr<int64_t>("seed2", -1), r.node()->id());
  Scope other = Scope::NewRootScope();
  Output o = ops::RandomUniform(other, {3}, DT_FLOAT, {.seed = 9});
  EXPECT_EQ(o.node()->attrs().GetOr<int64_t>("seed", -1), 87654321);
  EXPECT_EQ(o.node()->attrs().GetOr<int64_t>("seed2", -1), 9);
}

TEST(RandomOps, ElementsDependOnlyOnSeedsRunAndIndex) {
  // The first elements of a larger draw are the smaller draw: nothing
  // depends on the size, hence nothing on how the work is split.
  for (const Distribution& d : kDistributions) {
    Tensor small = Draw(d, 3, 4, 1, {10})[0];
    Tensor large = Draw(d, 3, 4, 1, {5000})[0];
    std::vector<double> s = ToDoubles(small), l = ToDoubles(large);
    EXPECT_EQ(s, std::vector<double>(l.begin(), l.begin() + 10)) << d.name;
  }
}

TEST(RandomOps, ResultsDoNotDependOnThreadCount) {
  for (const Distribution& d : kDistributions) {
    Scope root = Scope::NewRootScope();
    Output r = d.build(root, {300, 300}, DT_FLOAT, {.seed = 9});
    CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor one, testing::EvaluateWithThreads(r, 1));
    CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor two, testing::EvaluateWithThreads(r, 2));
    testing::ExpectIdentical(one, two, d.name);
  }
}

TEST(RandomOps, DistributionsHaveTheRightMoments) {
  // Deterministic seeds: these bounds are many standard errors wide and
  // checked once, never flaky.
  struct Case {
    const Distribution& d;
    double mean, variance, lo, hi;
  };
  // Truncated at 2 sigma: variance 1 - 4 phi(2) / (2 Phi(2) - 1) = 0.7737.
  const Case cases[] = {{kDistributions[0], 0.5, 1.0 / 12, 0, 1},
                        {kDistributions[1], 0, 1, -10, 10},
                        {kDistributions[2], 0, 0.7737, -2, 2}};
  for (const Case& c : cases) {
    for (DataType dtype : {DT_FLOAT, DT_DOUBLE}) {
      std::vector<double> v = ToDoubles(Draw(c.d, 11, 12, 1, {200000}, dtype)[0]);
      double sum = 0, sq = 0;
      for (double x : v) {
        sum += x;
        sq += x * x;
        ASSERT_GE(x, c.lo);
        ASSERT_LT(x, c.hi);
      }
      const double mean = sum / v.size();
      const double var = sq / v.size() - mean * mean;
      EXPECT_NEAR(mean, c.mean, 0.01) << c.d.name;
      EXPECT_NEAR(var, c.variance, 0.01) << c.d.name;
    }
  }
}

TEST(RandomOps, BadShapesFailWithoutCrashing) {
  Scope root = Scope::NewRootScope();
  Output shape = ops::Placeholder(root.WithOpName("shape"), DT_INT32, {.shape = {-1}});
  Output r = ops::RandomNormal(root.WithOpName("r"), shape);
  Status s = Evaluate(r, {{shape, Tensor::FromVector<int32_t>({3, -2})}}).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "r (RandomStandardNormal): shape: negative dimension -2 in shape");

  ops::RandomUniform(root.WithOpName("bad"), {2}, DT_INT32);
  EXPECT_EQ(root.status().message(),
            "bad (RandomUniform): dtype must be float32 or float64, got int32");
}

}  // namespace
}  // namespace ckflow
