// MatMul against a naive triple loop, its shape checks, and its parallel
// split (results identical for any thread count).
#include <gtest/gtest.h>

#include <algorithm>

#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "tests/ops/op_test_util.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

using testing::Evaluate;
using testing::ExpectNear;
using testing::RandomTensor;
using testing::ToDoubles;

// C = op(A) op(B) by the definition, in double.
std::vector<double> NaiveMatMul(const Tensor& a, const Tensor& b, bool ta, bool tb, int64_t* m,
                                int64_t* n) {
  std::vector<double> av = ToDoubles(a), bv = ToDoubles(b);
  const int64_t a0 = a.shape().dim(0), a1 = a.shape().dim(1);
  const int64_t b0 = b.shape().dim(0), b1 = b.shape().dim(1);
  *m = ta ? a1 : a0;
  *n = tb ? b0 : b1;
  const int64_t k = ta ? a0 : a1;
  std::vector<double> c(*m * *n, 0);
  for (int64_t i = 0; i < *m; ++i) {
    for (int64_t j = 0; j < *n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p) {
        double x = ta ? av[p * a1 + i] : av[i * a1 + p];
        double y = tb ? bv[j * b1 + p] : bv[p * b1 + j];
        sum += x * y;
      }
      c[i * *n + j] = sum;
    }
  }
  return c;
}

TEST(MatMul, MatchesNaiveProductForAllTransposes) {
  struct Case {
    int64_t m, k, n;
  };
  const Case cases[] = {{1, 1, 1}, {2, 3, 4},   {5, 1, 7},     {3, 0, 2},     {0, 3, 2},
                        {4, 3, 0}, {17, 33, 9}, {130, 70, 90}, {600, 20, 30}, {40, 50, 700}};
  std::mt19937 rng(21);
  for (DataType dtype : {DT_FLOAT, DT_DOUBLE}) {
    for (const Case& c : cases) {
      for (bool ta : {false, true}) {
        for (bool tb : {false, true}) {
          SCOPED_TRACE(std::to_string(c.m) + "x" + std::to_string(c.k) + "x" + std::to_string(c.n) +
                       (ta ? " ta" : "") + (tb ? " tb" : "") + " " +
                       std::string(DataTypeName(dtype)));
          Tensor a =
              RandomTensor(dtype, ta ? TensorShape({c.k, c.m}) : TensorShape({c.m, c.k}), rng);
          Tensor b =
              RandomTensor(dtype, tb ? TensorShape({c.n, c.k}) : TensorShape({c.k, c.n}), rng);
          Scope root = Scope::NewRootScope();
          Output y = ops::MatMul(root, ops::Const(root, a), ops::Const(root, b),
                                 {.transpose_a = ta, .transpose_b = tb});
          ASSERT_TRUE(root.ok()) << root.status();
          CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor got, Evaluate(y));
          int64_t m, n;
          std::vector<double> want = NaiveMatMul(a, b, ta, tb, &m, &n);
          const double tol = dtype == DT_FLOAT ? 1e-4 : 1e-11;
          ExpectNear(got, {m, n}, want, tol, tol, "MatMul");
        }
      }
    }
  }
}

TEST(MatMul, InnerDimensionMismatchFailsAtBuildTimeNamingBothInputs) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, {.shape = {2, 3}});
  Output w = ops::Placeholder(root.WithOpName("w"), DT_FLOAT, {.shape = {4, 5}});
  Output y = ops::MatMul(root.WithOpName("mm"), x, w);
  EXPECT_FALSE(y.valid());
  EXPECT_EQ(root.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(root.status().message(),
            "mm (MatMul): inner dimensions differ: a is [2,3] (x:0), b is [4,5] (w:0)");
}

TEST(MatMul, TransposeIsNamedInTheMessage) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, {.shape = {2, 3}});
  Output w = ops::Placeholder(root.WithOpName("w"), DT_FLOAT, {.shape = {2, 5}});
  ops::MatMul(root.WithOpName("mm"), x, w, {.transpose_b = true});
  EXPECT_EQ(root.status().message(),
            "mm (MatMul): inner dimensions differ: a is [2,3] (x:0), b is [2,5] (w:0, transposed)");
}

TEST(MatMul, InfersUnknownDimensionsAndChecksRank) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_FLOAT, {.shape = {-1, 784}});
  Output w = ops::Placeholder(root, DT_FLOAT, {.shape = {784, 10}});
  EXPECT_EQ(ops::MatMul(root, x, w).shape().ToString(), "[?,10]");
  EXPECT_EQ(ops::MatMul(root, ops::Placeholder(root, DT_FLOAT), w).shape().ToString(), "[?,10]");
  ASSERT_TRUE(root.ok());
  Output v = ops::Placeholder(root.WithOpName("v"), DT_FLOAT, {.shape = {2, 3, 4}});
  ops::MatMul(root.WithOpName("mm"), v, w);
  EXPECT_EQ(root.status().message(), "mm (MatMul): a is [2,3,4] (v:0), but must have rank 2");
}

TEST(MatMul, BadFedShapesFailAtRunTimeWithoutCrashing) {
  struct Case {
    TensorShape a, b;
    std::string message;
  };
  const Case cases[] = {
      {{2, 3}, {4, 5}, "mm (MatMul): inner dimensions differ: a is [2,3], b is [4,5]"},
      {{2, 3, 1}, {3, 5}, "mm (MatMul): a and b must have rank 2: a is [2,3,1], b is [3,5]"},
      {{3}, {3, 5}, "mm (MatMul): a and b must have rank 2: a is [3], b is [3,5]"},
  };
  auto matmul = [](const Scope& s, ops::Input a, ops::Input b) { return ops::MatMul(s, a, b); };
  for (const Case& c : cases) {
    Status s = testing::RunWithFedShapes(matmul, "mm", c.a, c.b);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message(), c.message);
  }
}

TEST(MatMul, ParallelResultsEqualSequentialResults) {
  std::mt19937 rng(22);
  struct Case {
    int64_t m, k, n;
  };
  // Split by rows, and by columns (wider than tall).
  for (const Case& c : {Case{600, 300, 280}, Case{40, 64, 3000}}) {
    Scope root = Scope::NewRootScope();
    Output y = ops::MatMul(root, ops::Const(root, RandomTensor(DT_FLOAT, {c.m, c.k}, rng)),
                           ops::Const(root, RandomTensor(DT_FLOAT, {c.k, c.n}, rng)));
    CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor one, testing::EvaluateWithThreads(y, 1));
    CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor two, testing::EvaluateWithThreads(y, 2));
    testing::ExpectIdentical(one, two, "MatMul 1 vs 2 threads");
  }
}

// BatchMatMulV2 by the definition: each output matrix from the x and y
// matrices its batch index broadcasts to, in double.
std::vector<double> NaiveBatchMatMul(const Tensor& x, const Tensor& y, bool ax, bool ay,
                                     std::vector<int64_t>* out) {
  const std::vector<int64_t> xs(x.shape().dims().begin(), x.shape().dims().end());
  const std::vector<int64_t> ys(y.shape().dims().begin(), y.shape().dims().end());
  const int rx = static_cast<int>(xs.size()), ry = static_cast<int>(ys.size());
  const int64_t m = ax ? xs[rx - 1] : xs[rx - 2], k = ax ? xs[rx - 2] : xs[rx - 1];
  const int64_t n = ay ? ys[ry - 2] : ys[ry - 1];
  const int rb = std::max(rx, ry) - 2;
  std::vector<int64_t> batch(rb);
  auto dim = [&](const std::vector<int64_t>& s, int d) {  // batch dim d, right-aligned
    const int i = d - (rb - (static_cast<int>(s.size()) - 2));
    return i >= 0 ? s[i] : int64_t{1};
  };
  for (int d = 0; d < rb; ++d) batch[d] = std::max(dim(xs, d), dim(ys, d));
  *out = batch;
  out->push_back(m);
  out->push_back(n);
  int64_t count = 1;
  for (int64_t b : batch) count *= b;
  std::vector<double> xv = ToDoubles(x), yv = ToDoubles(y), want(count * m * n);
  for (int64_t b = 0; b < count; ++b) {
    // The batch multi-index, then each operand's flat matrix index.
    std::vector<int64_t> index(rb);
    for (int64_t r = b, d = rb - 1; d >= 0; --d) {
      index[d] = r % batch[d];
      r /= batch[d];
    }
    int64_t xi = 0, yi = 0;
    for (int d = 0; d < rb; ++d) {
      xi = xi * dim(xs, d) + (dim(xs, d) == 1 ? 0 : index[d]);
      yi = yi * dim(ys, d) + (dim(ys, d) == 1 ? 0 : index[d]);
    }
    const double* xm = xv.data() + xi * m * k;
    const double* ym = yv.data() + yi * k * n;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < k; ++p) {
          sum += (ax ? xm[p * m + i] : xm[i * k + p]) * (ay ? ym[j * k + p] : ym[p * n + j]);
        }
        want[(b * m + i) * n + j] = sum;
      }
    }
  }
  return want;
}

TEST(BatchMatMul, MatchesNaiveProductWithBroadcastingAndAdjoints) {
  struct Case {
    std::vector<int64_t> x, y;  // without the adjoints
  };
  const Case cases[] = {
      {{3, 4}, {4, 5}},                  // plain matrices
      {{2, 3, 4}, {2, 4, 5}},            // one batch dimension
      {{2, 3, 4}, {4, 5}},               // y broadcast along the batch
      {{4, 3, 4}, {1, 4, 5}},            // y's batch of 1 repeats
      {{2, 1, 3, 4}, {5, 4, 6}},         // both broadcast: batch [2, 5]
      {{2, 4, 16, 32}, {2, 4, 32, 16}},  // attention scores
      {{3, 200, 70}, {3, 70, 150}},      // several blocks per matrix
      {{2, 0, 4}, {2, 4, 5}},            // empty
      {{2, 3, 0}, {2, 0, 5}},            // k = 0: zeros
  };
  std::mt19937 rng(23);
  for (DataType dtype : {DT_FLOAT, DT_DOUBLE}) {
    for (const Case& c : cases) {
      for (bool ax : {false, true}) {
        for (bool ay : {false, true}) {
          std::vector<int64_t> xs = c.x, ys = c.y;
          if (ax) std::swap(xs[xs.size() - 1], xs[xs.size() - 2]);
          if (ay) std::swap(ys[ys.size() - 1], ys[ys.size() - 2]);
          SCOPED_TRACE(TensorShape(xs).ToString() + " x " + TensorShape(ys).ToString() +
                       (ax ? " adj_x" : "") + (ay ? " adj_y" : "") + " " +
                       std::string(DataTypeName(dtype)));
          Tensor x = RandomTensor(dtype, TensorShape(xs), rng);
          Tensor y = RandomTensor(dtype, TensorShape(ys), rng);
          std::vector<int64_t> out;
          std::vector<double> want = NaiveBatchMatMul(x, y, ax, ay, &out);
          Scope root = Scope::NewRootScope();
          Output z = ops::BatchMatMul(root, ops::Const(root, x), ops::Const(root, y),
                                      {.adj_x = ax, .adj_y = ay});
          ASSERT_TRUE(root.ok()) << root.status();
          EXPECT_EQ(z.shape(), PartialShape(out));
          CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor got, Evaluate(z));
          const double tol = dtype == DT_FLOAT ? 1e-4 : 1e-11;
          ExpectNear(got, TensorShape(out), want, tol, tol, "BatchMatMulV2");
        }
      }
    }
  }
}

TEST(BatchMatMul, BitIdenticalUnderOneTwoAndFourThreads) {
  std::mt19937 rng(24);
  // Many small products, and a few big ones split into blocks.
  const std::pair<std::vector<int64_t>, std::vector<int64_t>> cases[] = {
      {{8, 4, 64, 32}, {8, 4, 32, 64}}, {{2, 600, 300}, {300, 280}}};
  for (const auto& [xs, ys] : cases) {
    Scope root = Scope::NewRootScope();
    Output z =
        ops::BatchMatMul(root, ops::Const(root, RandomTensor(DT_FLOAT, TensorShape(xs), rng)),
                         ops::Const(root, RandomTensor(DT_FLOAT, TensorShape(ys), rng)));
    CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor one, testing::EvaluateWithThreads(z, 1));
    for (int threads : {2, 4}) {
      CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor many, testing::EvaluateWithThreads(z, threads));
      testing::ExpectIdentical(one, many, "BatchMatMulV2 on " + std::to_string(threads));
    }
  }
}

TEST(BatchMatMul, InfersShapesAndNamesBothInputsInErrors) {
  Scope root = Scope::NewRootScope();
  Output q = ops::Placeholder(root.WithOpName("q"), DT_FLOAT, {.shape = {-1, 4, 16, 32}});
  Output k = ops::Placeholder(root.WithOpName("k"), DT_FLOAT, {.shape = {-1, 4, 16, 32}});
  EXPECT_EQ(ops::BatchMatMul(root, q, k, {.adj_y = true}).shape().ToString(), "[?,4,16,16]");
  Output w = ops::Placeholder(root.WithOpName("w"), DT_FLOAT, {.shape = {32, 8}});
  EXPECT_EQ(ops::BatchMatMul(root, q, w).shape().ToString(), "[?,4,16,8]");
  ASSERT_TRUE(root.ok()) << root.status();

  ops::BatchMatMul(root.WithOpName("bmm"), q, k);
  EXPECT_EQ(root.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(root.status().message(),
            "bmm (BatchMatMulV2): inner dimensions differ: x is [?,4,16,32] (q:0), y is "
            "[?,4,16,32] (k:0)");

  Scope other = Scope::NewRootScope();
  Output a = ops::Placeholder(other.WithOpName("a"), DT_FLOAT, {.shape = {3, 2, 4}});
  Output b = ops::Placeholder(other.WithOpName("b"), DT_FLOAT, {.shape = {5, 4, 2}});
  ops::BatchMatMul(other.WithOpName("bmm"), a, b);
  EXPECT_EQ(other.status().message(),
            "bmm (BatchMatMulV2): batch dimensions do not broadcast: x is [3,2,4] (a:0), y is "
            "[5,4,2] (b:0)");

  Scope vector = Scope::NewRootScope();
  ops::BatchMatMul(vector.WithOpName("bmm"),
                   ops::Placeholder(vector.WithOpName("v"), DT_FLOAT, {.shape = {4}}), w);
  EXPECT_EQ(vector.status().code(), StatusCode::kInvalidArgument);
}

TEST(BatchMatMul, RunTimeShapeErrorsAreInvalidArgument) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT);
  Output y = ops::Placeholder(root.WithOpName("y"), DT_FLOAT);
  Output z = ops::BatchMatMul(root.WithOpName("bmm"), x, y);
  ASSERT_TRUE(root.ok()) << root.status();
  Status s = Evaluate(z, {{x, Tensor(DT_FLOAT, TensorShape({3, 2, 4}))},
                          {y, Tensor(DT_FLOAT, TensorShape({2, 4, 2}))}})
                 .status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "bmm (BatchMatMulV2): batch dimensions do not broadcast: x is [3,2,4], y is [2,4,2]");
  s = Evaluate(z, {{x, Tensor(DT_FLOAT, TensorShape({2, 4}))},
                   {y, Tensor(DT_FLOAT, TensorShape({2, 5, 4}))}})
          .status();
  EXPECT_EQ(s.message(), "bmm (BatchMatMulV2): inner dimensions differ: x is [2,4], y is [2,5,4]");
}

}  // namespace
}  // namespace ckflow
