// GatherV2, UnsortedSegmentSum, ResourceGather and the scatters against
// naive references; bad indices named, the same on every thread count, and
// leaving variables untouched; sparse gradients (IndexedSlices) that stay
// sparse through sums and reach the optimizer as rows, so a training step
// updates only the rows it looked up. (Dense gradients are checked against
// finite differences in gradients_test.cc; TensorFlow judges the ops in
// interop/test_sequence_ops.py.)
#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "ops/array_ops.h"
#include "ops/gradients.h"
#include "ops/math_ops.h"
#include "ops/optimizers.h"
#include "ops/variable_ops.h"
#include "ops/variables.h"
#include "runtime/session.h"
#include "tests/ops/op_test_util.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

using testing::Count;
using testing::Evaluate;
using testing::ExpectNear;
using testing::Flatten;
using testing::RandomTensor;
using testing::ToDoubles;
using testing::Unflatten;

using Dims = std::vector<int64_t>;

std::unique_ptr<Session> NewSession(const Scope& root, int threads = 0) {
  StatusOr<std::unique_ptr<Session>> session = Session::Create(
      root.graph(),
      {.inter_op_parallelism_threads = threads, .intra_op_parallelism_threads = threads});
  EXPECT_TRUE(session.ok()) << session.status();
  return session.ok() ? *std::move(session) : nullptr;
}

TEST(Gather, MatchesNaiveReferenceAlongEveryAxis) {
  struct Case {
    Dims params;
    Dims indices_shape;
    int64_t axis;
  };
  const Case cases[] = {
      {{5}, {3}, 0},       {{5, 3}, {4}, 0},      {{5, 3}, {2, 2}, 0},
      {{5, 3}, {}, 0},     {{4, 5, 3}, {6}, 1},   {{4, 5, 3}, {2, 3}, -1},
      {{4, 5, 3}, {0}, 0}, {{200, 64}, {500}, 0}, {{3, 300, 8}, {7, 40}, 1},
  };
  std::mt19937 rng(81);
  for (DataType dtype : {DT_FLOAT, DT_DOUBLE, DT_INT32, DT_BOOL}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(TensorShape(c.params).ToString() + " axis " + std::to_string(c.axis) + " " +
                   std::string(DataTypeName(dtype)));
      const int rank = static_cast<int>(c.params.size());
      const int axis = static_cast<int>(c.axis < 0 ? c.axis + rank : c.axis);
      Tensor params = RandomTensor(dtype, TensorShape(c.params), rng, -50, 50);
      std::vector<double> idx(Count(c.indices_shape));
      for (double& i : idx) i = std::uniform_int_distribution<int64_t>(0, c.params[axis] - 1)(rng);
      Tensor indices = testing::MakeTensor(DT_INT64, TensorShape(c.indices_shape), idx);
      int64_t outer = 1, inner = 1;
      for (int d = 0; d < axis; ++d) outer *= c.params[d];
      for (int d = axis + 1; d < rank; ++d) inner *= c.params[d];
      std::vector<double> p = ToDoubles(params), want;
      for (int64_t o = 0; o < outer; ++o) {
        for (double i : idx) {
          for (int64_t j = 0; j < inner; ++j) {
            want.push_back(p[(o * c.params[axis] + static_cast<int64_t>(i)) * inner + j]);
          }
        }
      }
      Dims out(c.params.begin(), c.params.begin() + axis);
      out.insert(out.end(), c.indices_shape.begin(), c.indices_shape.end());
      out.insert(out.end(), c.params.begin() + axis + 1, c.params.end());
      Scope root = Scope::NewRootScope();
      Output y = ops::Gather(root, ops::Const(root, params), ops::Const(root, indices), c.axis);
      ASSERT_TRUE(root.ok()) << root.status();
      EXPECT_EQ(y.shape(), PartialShape(out));
      CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor got, Evaluate(y));
      ExpectNear(got, TensorShape(out), want, 0, 0, "GatherV2");
    }
  }
}

TEST(Gather, AnIndexOutOfRangeIsNamedTheSameOnEveryThreadCount) {
  Scope root = Scope::NewRootScope();
  Output params = ops::Const(root, Tensor(DT_FLOAT, TensorShape({5, 1000})));
  Output indices = ops::Placeholder(root.WithOpName("ids"), DT_INT32);
  Output y = ops::Gather(root.WithOpName("g"), params, indices);
  ASSERT_TRUE(root.ok()) << root.status();
  std::vector<double> ids(4000, 1);
  ids[2001] = 7;  // the first bad one
  ids[3000] = -1;
  const Tensor fed = testing::MakeTensor(DT_INT32, TensorShape({2, 2000}), ids);
  for (int threads : {1, 2, 4}) {
    auto session = NewSession(root, threads);
    Status s = session->Run({{indices, fed}}, {y}).status();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message(), "g (GatherV2): indices[1,1] = 7 is not in [0, 5)");
  }
}

TEST(Gather, BuildTimeErrorsNameTheNode) {
  Scope root = Scope::NewRootScope();
  Output params = ops::Placeholder(root.WithOpName("p"), DT_FLOAT, {.shape = {4, 3}});
  EXPECT_FALSE(ops::Gather(root.WithOpName("g"), params, {1, 2}, 2).valid());
  EXPECT_EQ(root.status().message(),
            "g (GatherV2): params is [4,3] (p:0): axis 2 is out of range for rank 2 (must be in "
            "[-2, 2))");
  Scope floats = Scope::NewRootScope();
  Output p = ops::Placeholder(floats.WithOpName("p"), DT_FLOAT, {.shape = {4, 3}});
  ops::Gather(floats.WithOpName("g"), p, ops::Const<float>(floats, {1}));
  EXPECT_EQ(floats.status().code(), StatusCode::kInvalidArgument);
}

TEST(UnsortedSegmentSum, MatchesNaiveReferenceAndDropsNegativeIds) {
  std::mt19937 rng(82);
  struct Case {
    Dims data, ids_shape;
    int64_t segments;
  };
  const Case cases[] = {{{6}, {6}, 4},          {{6, 3}, {6}, 4}, {{2, 3, 5}, {2, 3}, 7},
                        {{500, 32}, {500}, 40}, {{4, 2}, {4}, 6}, {{0, 3}, {0}, 3}};
  for (DataType dtype : {DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(TensorShape(c.data).ToString() + " " + std::string(DataTypeName(dtype)));
      Tensor data = RandomTensor(dtype, TensorShape(c.data), rng, -20, 20);
      std::vector<double> ids(Count(c.ids_shape));
      for (double& i : ids) i = std::uniform_int_distribution<int64_t>(-1, c.segments - 1)(rng);
      const int64_t inner = Count(Dims(c.data.begin() + c.ids_shape.size(), c.data.end()));
      std::vector<double> d = ToDoubles(data), want(c.segments * inner, 0);
      for (size_t i = 0; i < ids.size(); ++i) {
        if (ids[i] < 0) continue;
        for (int64_t j = 0; j < inner; ++j) want[ids[i] * inner + j] += d[i * inner + j];
      }
      Dims out = {c.segments};
      out.insert(out.end(), c.data.begin() + c.ids_shape.size(), c.data.end());
      Scope root = Scope::NewRootScope();
      Output y = ops::UnsortedSegmentSum(
          root, ops::Const(root, data),
          ops::Const(root, testing::MakeTensor(DT_INT32, TensorShape(c.ids_shape), ids)),
          c.segments);
      ASSERT_TRUE(root.ok()) << root.status();
      EXPECT_EQ(y.shape(), PartialShape(out));
      CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor got, Evaluate(y));
      const double tol = dtype == DT_FLOAT ? 1e-5 : 1e-12;
      ExpectNear(got, TensorShape(out), want, tol, tol, "UnsortedSegmentSum");
    }
  }
}

TEST(UnsortedSegmentSum, BitIdenticalUnderOneTwoAndFourThreads) {
  std::mt19937 rng(83);
  std::vector<double> ids(20000);
  for (double& i : ids) i = std::uniform_int_distribution<int>(0, 99)(rng);
  Scope root = Scope::NewRootScope();
  Output y = ops::UnsortedSegmentSum(
      root, ops::Const(root, RandomTensor(DT_FLOAT, TensorShape({20000, 16}), rng)),
      ops::Const(root, testing::MakeTensor(DT_INT64, TensorShape({20000}), ids)), 100);
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor one, testing::EvaluateWithThreads(y, 1));
  for (int threads : {2, 4}) {
    CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor many, testing::EvaluateWithThreads(y, threads));
    testing::ExpectIdentical(one, many, "UnsortedSegmentSum on " + std::to_string(threads));
  }
}

TEST(UnsortedSegmentSum, AnIdPastTheEndIsNamed) {
  Scope root = Scope::NewRootScope();
  Output y = ops::UnsortedSegmentSum(root.WithOpName("s"), ops::Const<float>(root, {1, 2, 3}),
                                     ops::Const<int32_t>(root, {0, 3, 1}), 3);
  ASSERT_TRUE(root.ok()) << root.status();
  Status s = Evaluate(y).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "s (UnsortedSegmentSum): segment_ids[1] = 3 is out of range [0, 3)");
}

// A session over a graph with one float32 variable "table" of `rows` x 2,
// row r holding (r, 10 r).
class EmbeddingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<float> init;
    for (int r = 0; r < kRows; ++r) init.insert(init.end(), {float(r), float(10 * r)});
    table_ = Variable::Create(root_, "table", ops::Const<float>(root_, init, {kRows, 2}));
    ASSERT_NE(table_, nullptr) << root_.status();
  }
  std::unique_ptr<Session> Start() {
    auto session = NewSession(root_);
    EXPECT_TRUE(session->Run({}, {}, {table_->initializer()}).ok());
    return session;
  }
  std::vector<double> Table(Session& session) {
    StatusOr<std::vector<Tensor>> v = session.Run({}, {table_->Read(root_)});
    EXPECT_TRUE(v.ok()) << v.status();
    return v.ok() ? ToDoubles((*v)[0]) : std::vector<double>();
  }
  static constexpr int kRows = 6;
  Scope root_ = Scope::NewRootScope();
  std::shared_ptr<Variable> table_;
};

TEST_F(EmbeddingTest, SparseReadGathersRowsAndNamesTheVariableOnABadIndex) {
  Output ids = ops::Placeholder(root_.WithOpName("ids"), DT_INT64, {.shape = {-1, 2}});
  Output rows = table_->SparseRead(root_.WithOpName("lookup"), ids);
  ASSERT_TRUE(root_.ok()) << root_.status();
  EXPECT_EQ(rows.shape().ToString(), "[?,2,2]");
  auto session = Start();
  CKFLOW_ASSERT_OK_AND_ASSIGN(
      std::vector<Tensor> got,
      session->Run({{ids, Tensor::FromVector<int64_t>({5, 0, 2, 2}, TensorShape({2, 2}))}},
                   {rows}));
  ExpectNear(got[0], TensorShape({2, 2, 2}), {5, 50, 0, 0, 2, 20, 2, 20}, 0, 0, "lookup");
  Status s = session->Run({{ids, Tensor::FromVector<int64_t>({1, 6}, TensorShape({1, 2}))}}, {rows})
                 .status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "lookup (ResourceGather): variable 'table' [6,2]: indices[0,1] = 6 is not in [0, 6)");
}

TEST_F(EmbeddingTest, ScatterAddAddsEveryRepeatAndABadIndexChangesNothing) {
  Output ids = ops::Placeholder(root_.WithOpName("ids"), DT_INT32);
  Output updates = ops::Placeholder(root_.WithOpName("updates"), DT_FLOAT);
  Output add = ops::ResourceScatterAdd(root_.WithOpName("add"), table_->handle(), ids, updates);
  Output set = ops::ResourceScatterUpdate(root_.WithOpName("set"), table_->handle(), ids, updates);
  ASSERT_TRUE(root_.ok()) << root_.status();
  auto session = Start();
  ASSERT_TRUE(
      session
          ->Run({{ids, Tensor::FromVector<int32_t>({1, 4, 1})},
                 {updates, Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, TensorShape({3, 2}))}},
                {}, {add})
          .ok());
  EXPECT_EQ(Table(*session),
            (std::vector<double>{0, 0, 1 + 1 + 5, 10 + 2 + 6, 2, 20, 3, 30, 4 + 3, 40 + 4, 5, 50}));
  ASSERT_TRUE(session
                  ->Run({{ids, Tensor::FromVector<int32_t>({0})},
                         {updates, Tensor::FromVector<float>({-1, -2}, TensorShape({1, 2}))}},
                        {}, {set})
                  .ok());
  const std::vector<double> before = Table(*session);
  EXPECT_EQ(before[0], -1);
  EXPECT_EQ(before[1], -2);
  Status s = session
                 ->Run({{ids, Tensor::FromVector<int32_t>({2, 9})},
                        {updates, Tensor::FromVector<float>({1, 1, 1, 1}, TensorShape({2, 2}))}},
                       {}, {add})
                 .status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "add (ResourceScatterAdd): variable 'table' [6,2]: indices[1] = 9 is not in [0, 6)");
  EXPECT_EQ(Table(*session), before);
  s = session
          ->Run({{ids, Tensor::FromVector<int32_t>({2})},
                 {updates, Tensor::FromVector<float>({1, 1, 1}, TensorShape({1, 3}))}},
                {}, {add})
          .status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Table(*session), before);
}

TEST_F(EmbeddingTest, ScatterSubSubtractsEveryRepeat) {
  Output sub = ops::ResourceScatterSub(root_.WithOpName("sub"), table_->handle(),
                                       ops::Const<int32_t>(root_, {3, 0, 3}),
                                       ops::Const<float>(root_, {1, 2, 3, 4, 5, 6}, {3, 2}));
  ASSERT_TRUE(root_.ok()) << root_.status();
  auto session = Start();
  ASSERT_TRUE(session->Run({}, {}, {sub}).ok());
  EXPECT_EQ(Table(*session),
            (std::vector<double>{-3, -4, 1, 10, 2, 20, 3 - 1 - 5, 30 - 2 - 6, 4, 40, 5, 50}));
}

TEST(Unique, GivesValuesInOrderOfFirstAppearanceAndEachElementsPosition) {
  Scope root = Scope::NewRootScope();
  for (DataType out_idx : {DT_INT32, DT_INT64}) {
    ops::UniqueOutput u =
        ops::Unique(root, ops::Const<int64_t>(root, {7, 2, 7, 9, 2, 2, -1}), out_idx);
    ops::UniqueOutput f = ops::Unique(root, ops::Const<float>(root, {0.5f, 0.5f, -3.0f}), out_idx);
    ops::UniqueOutput empty = ops::Unique(root, ops::Const<int32_t>(root, {}, {0}), out_idx);
    ASSERT_TRUE(root.ok()) << root.status();
    EXPECT_EQ(u.idx.dtype(), out_idx);
    EXPECT_EQ(u.y.shape().ToString(), "[?]");
    EXPECT_EQ(u.idx.shape().ToString(), "[7]");
    CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor y, Evaluate(u.y));
    CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor idx, Evaluate(u.idx));
    EXPECT_EQ(ToDoubles(y), (std::vector<double>{7, 2, 9, -1}));
    EXPECT_EQ(ToDoubles(idx), (std::vector<double>{0, 1, 0, 2, 1, 1, 3}));
    CKFLOW_ASSERT_OK_AND_ASSIGN(y, Evaluate(f.y));
    CKFLOW_ASSERT_OK_AND_ASSIGN(idx, Evaluate(f.idx));
    EXPECT_EQ(ToDoubles(y), (std::vector<double>{0.5, -3}));
    EXPECT_EQ(ToDoubles(idx), (std::vector<double>{0, 0, 1}));
    CKFLOW_ASSERT_OK_AND_ASSIGN(y, Evaluate(empty.y));
    EXPECT_EQ(y.shape(), TensorShape({0}));
  }
  ops::Unique(root.WithOpName("u"), ops::Const<int32_t>(root, {1, 2, 3, 4}, {2, 2}));
  EXPECT_EQ(root.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(root.status().message().find("u (Unique): x is [2,2]"), std::string::npos)
      << root.status();
}

TEST(DynamicPartition, DealsRowsInOrderAndStitchPutsThemBack) {
  std::mt19937 rng(5);
  for (int threads : {1, 2, 4}) {
    Scope root = Scope::NewRootScope();
    // 3000 rows of [2, 3] in 5 partitions (partition 3 left empty), and
    // partitions of rank 2 over data [2, 3, 4].
    std::vector<int32_t> which(3000);
    for (int32_t& w : which) w = static_cast<int32_t>(rng() % 4 == 3 ? 4 : rng() % 3);
    Tensor data = RandomTensor(DT_FLOAT, {3000, 2, 3}, rng);
    Output x = ops::Const(root, data);
    std::vector<Output> parts =
        ops::DynamicPartition(root, x, ops::Const<int32_t>(root, which, {3000}), 5);
    ASSERT_TRUE(root.ok()) << root.status();
    ASSERT_EQ(parts.size(), 5u);
    EXPECT_EQ(parts[0].shape().ToString(), "[?,2,3]");
    // Stitching each partition's positions puts every row back in place.
    std::vector<int32_t> positions(3000);
    for (int i = 0; i < 3000; ++i) positions[i] = i;
    std::vector<Output> where =
        ops::DynamicPartition(root, ops::Const<int32_t>(root, positions, {3000}),
                              ops::Const<int32_t>(root, which, {3000}), 5);
    Output back = ops::DynamicStitch(root, where, parts);
    ASSERT_TRUE(root.ok()) << root.status();
    EXPECT_EQ(back.shape().ToString(), "[?,2,3]");
    auto session = NewSession(root, threads);
    std::vector<Output> fetch = parts;
    fetch.push_back(back);
    CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, session->Run({}, fetch));
    const std::vector<double> in = ToDoubles(data);
    for (int p = 0; p < 5; ++p) {
      std::vector<double> expected;
      for (int i = 0; i < 3000; ++i) {
        if (which[i] == p)
          expected.insert(expected.end(), in.begin() + 6 * i, in.begin() + 6 * i + 6);
      }
      EXPECT_EQ(out[p].shape(), TensorShape({static_cast<int64_t>(expected.size() / 6), 2, 3}));
      EXPECT_EQ(ToDoubles(out[p]), expected) << "partition " << p;
    }
    EXPECT_EQ(ToDoubles(out[5]), in);
  }
  Scope root = Scope::NewRootScope();
  std::vector<Output> p =
      ops::DynamicPartition(root, ops::Const<int64_t>(root, {1, 2, 3, 4, 5, 6}, {2, 3}),
                            ops::Const<int32_t>(root, {1, 0, 1, 1, 0, 0}, {2, 3}), 2);
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor zero, Evaluate(p[0]));
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor one, Evaluate(p[1]));
  EXPECT_EQ(ToDoubles(zero), (std::vector<double>{2, 5, 6}));
  EXPECT_EQ(ToDoubles(one), (std::vector<double>{1, 3, 4}));
}

TEST(DynamicPartition, BadPartitionsAreNamed) {
  Scope root = Scope::NewRootScope();
  std::vector<Output> p = ops::DynamicPartition(root, ops::Const<float>(root, {1, 2, 3}),
                                                ops::Const<int32_t>(root, {0, 3, 1}), 3);
  Status status = Evaluate(p[0]).status();
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("partitions[1] = 3 is not in [0, 3)"), std::string::npos)
      << status;
  ops::DynamicPartition(root.WithOpName("dp"), ops::Const<float>(root, {1, 2, 3}),
                        ops::Const<int32_t>(root, {0, 1}), 2);
  EXPECT_EQ(root.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(root.status().message().find("dp (DynamicPartition): partitions is [2]"),
            std::string::npos)
      << root.status();
  Scope other = Scope::NewRootScope();
  ops::DynamicPartition(other, ops::Const<float>(other, {1}), ops::Const<int64_t>(other, {0}), 1);
  EXPECT_EQ(other.status().code(), StatusCode::kInvalidArgument) << other.status();
}

TEST(DynamicStitch, TheLastWriterWinsAndUnnamedRowsAreZero) {
  Scope root = Scope::NewRootScope();
  Output merged = ops::DynamicStitch(
      root, {ops::Const<int32_t>(root, {5, 1}), ops::Const<int32_t>(root, {1, 0}, {2, 1})},
      {ops::Const<double>(root, {10, 11, 20, 21}, {2, 2}),
       ops::Const<double>(root, {30, 31, 40, 41}, {2, 1, 2})});
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(merged.shape().ToString(), "[?,2]");
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor out, Evaluate(merged));
  EXPECT_EQ(out.shape(), TensorShape({6, 2}));
  EXPECT_EQ(ToDoubles(out), (std::vector<double>{40, 41, 30, 31, 0, 0, 0, 0, 0, 0, 10, 11}));

  Output negative = ops::DynamicStitch(root, {ops::Const<int32_t>(root, {0, -2})},
                                       {ops::Const<float>(root, {1, 2})});
  Status status = Evaluate(negative).status();
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("indices[0][1] = -2 is negative"), std::string::npos) << status;
  ops::DynamicStitch(
      root.WithOpName("st"), {ops::Const<int32_t>(root, {0, 1}), ops::Const<int32_t>(root, {2})},
      {ops::Const<float>(root, {1, 2, 3, 4}, {2, 2}), ops::Const<float>(root, {1, 2, 3}, {1, 3})});
  EXPECT_EQ(root.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(root.status().message().find("st (DynamicStitch): data is [1,3]"), std::string::npos)
      << root.status();
  Scope other = Scope::NewRootScope();
  ops::DynamicStitch(other, {ops::Const<int32_t>(other, {0})}, {});
  EXPECT_EQ(other.status().code(), StatusCode::kInvalidArgument) << other.status();
}

TEST(Range, CountsLikeTensorFlowAndRefusesAnEndlessRange) {
  Scope root = Scope::NewRootScope();
  Output a = ops::Range(root, ops::Const<int32_t>(root, 0), ops::Const<int32_t>(root, 5),
                        ops::Const<int32_t>(root, 2));
  Output b = ops::Range(root, ops::Const<int64_t>(root, 5), ops::Const<int64_t>(root, -2),
                        ops::Const<int64_t>(root, -3));
  Output c = ops::Range(root, ops::Const<double>(root, 0.5), ops::Const<double>(root, 1.0),
                        ops::Const<double>(root, 0.1));
  Output d = ops::Range(root, ops::Const<float>(root, 1), ops::Const<float>(root, 1),
                        ops::Const<float>(root, 1));
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(a.shape().ToString(), "[3]");
  EXPECT_EQ(c.shape().ToString(), "[5]");
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor ta, Evaluate(a));
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor tb, Evaluate(b));
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor tc, Evaluate(c));
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor td, Evaluate(d));
  EXPECT_EQ(ToDoubles(ta), (std::vector<double>{0, 2, 4}));
  EXPECT_EQ(ToDoubles(tb), (std::vector<double>{5, 2, -1}));
  ExpectNear(tc, TensorShape({5}), {0.5, 0.6, 0.7, 0.8, 0.9}, 1e-12, 0, "float range");
  EXPECT_EQ(td.shape(), TensorShape({0}));

  Output limit = ops::Placeholder(root, DT_INT32);
  Output endless =
      ops::Range(root, ops::Const<int32_t>(root, 0), limit, ops::Const<int32_t>(root, 0));
  Output backwards =
      ops::Range(root, ops::Const<int32_t>(root, 0), limit, ops::Const<int32_t>(root, 1));
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(endless.shape().ToString(), "[?]");
  auto session = NewSession(root);
  Status status = session->Run({{limit, Tensor::FromVector<int32_t>({3}, {})}}, {endless}).status();
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("delta is 0"), std::string::npos) << status;
  status = session->Run({{limit, Tensor::FromVector<int32_t>({-3}, {})}}, {backwards}).status();
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("wrong way round"), std::string::npos) << status;
  ops::Range(root.WithOpName("r"), ops::Const<int32_t>(root, 0), ops::Const<int64_t>(root, 3),
             ops::Const<int32_t>(root, 1));
  EXPECT_EQ(root.status().code(), StatusCode::kInvalidArgument) << root.status();
}

// Every node the targets need, by walking inputs and control inputs.
std::set<const Node*> Needed(const std::vector<Output>& targets) {
  std::set<const Node*> seen;
  std::vector<const Node*> stack;
  for (const Output& t : targets) stack.push_back(t.node());
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (!seen.insert(n).second) continue;
    for (const Output& in : n->inputs()) stack.push_back(in.node());
    for (const Node* c : n->control_inputs()) stack.push_back(c);
  }
  return seen;
}

TEST_F(EmbeddingTest, GatherGradientsAreSparseAndStaySparseWhenSummed) {
  Output ids = ops::Const<int32_t>(root_, {3, 1, 3});
  Output a = table_->SparseRead(root_, ids);
  Output b = ops::Gather(root_, table_->value(), ops::Const<int64_t>(root_, {0, 3}));
  Output loss = ops::Add(root_, ops::Sum(root_, ops::Square(root_, a)), ops::Sum(root_, b));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Output> grads,
                              AddGradients(root_, {loss}, {table_->handle()}));
  std::optional<IndexedSlices> slices = AsIndexedSlices(grads[0]);
  ASSERT_TRUE(slices.has_value());
  EXPECT_EQ(slices->indices.dtype(), DT_INT64);  // int32 and int64 indices joined
  EXPECT_EQ(grads[0].shape().ToString(), "[6,2]");
  auto session = Start();
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> got,
                              session->Run({}, {slices->values, slices->indices, grads[0]}));
  // d/d row of sum(row^2) = 2 row, per lookup; of sum(row) = 1.
  ExpectNear(got[0], TensorShape({5, 2}), {6, 60, 2, 20, 6, 60, 1, 1, 1, 1}, 0, 0, "values");
  ExpectNear(got[1], TensorShape({5}), {3, 1, 3, 0, 3}, 0, 0, "indices");
  ExpectNear(got[2], TensorShape({6, 2}), {1, 1, 2, 20, 0, 0, 13, 121, 0, 0, 0, 0}, 0, 0, "dense");
  // A dense contribution makes the sum dense.
  Output c = ops::Add(root_, loss, ops::Sum(root_, table_->value()));
  CKFLOW_ASSERT_OK_AND_ASSIGN(grads, AddGradients(root_, {c}, {table_->handle()}));
  EXPECT_FALSE(AsIndexedSlices(grads[0]).has_value());
}

TEST_F(EmbeddingTest, GradientDescentUpdatesOnlyTheRowsLookedUp) {
  Output ids = ops::Placeholder(root_.WithOpName("ids"), DT_INT32, {.shape = {-1}});
  Output loss = ops::Sum(root_, ops::Square(root_, table_->SparseRead(root_, ids)));
  Output train = GradientDescent::Make(0.25f)->Minimize(root_, loss);
  ASSERT_TRUE(root_.ok()) << root_.status();
  // The step scatters rows; it never builds the dense gradient.
  for (const Node* n : Needed({train})) {
    EXPECT_NE(n->type(), "UnsortedSegmentSum") << n->name();
    EXPECT_NE(n->type(), "ResourceApplyGradientDescent") << n->name();
  }
  auto session = Start();
  ASSERT_TRUE(session->Run({{ids, Tensor::FromVector<int32_t>({4, 1, 4})}}, {}, {train}).ok());
  // Row r -= 0.25 * 2 r per lookup: row 1 halves, row 4 is looked up twice
  // and both updates land (4 - 2 - 2 = 0).
  EXPECT_EQ(Table(*session), (std::vector<double>{0, 0, 0.5, 5, 2, 20, 3, 30, 0, 0, 5, 50}));
}

TEST(EagerEmbedding, AStepUpdatesOnlyTheRowsLookedUp) {
  Scope scope = Scope::NewEagerScope();
  auto table =
      Variable::Create(scope, "table", ops::Const<float>(scope, {1, 2, 3, 4, 5, 6}, {3, 2}));
  ASSERT_NE(table, nullptr) << scope.status();
  auto optimizer = GradientDescent::Make(0.25f);
  optimizer->Minimize(scope, [&] {
    return ops::Sum(scope, ops::Square(scope, table->SparseRead(scope, {2, 2})));
  });
  ASSERT_TRUE(scope.ok()) << scope.status();
  // Row 2 (5, 6) looked up twice: each lookup's update is -0.25 * 2 * row.
  ExpectNear(table->value().value(), TensorShape({3, 2}), {1, 2, 3, 4, 0, 0}, 0, 0, "table");
}

}  // namespace
}  // namespace ckflow
