// MatMul against a naive triple loop, its shape checks, and its parallel
// split (results identical for any thread count).
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace ckflow
