// Reductions, ArgMax/ArgMin and SumToShapeOf against naive references.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

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

using ReduceBuilder = Output (*)(const Scope&, ops::Input, ops::Input, const ops::ReduceAttrs&);

enum class Kind { kSum, kMean, kMax, kMin, kProd };

// Reduces by visiting every input element and folding it into the output
// element whose index is the input's with the reduced dimensions dropped.
std::vector<double> ReduceReference(const std::vector<double>& in, const TensorShape& shape,
                                    const std::vector<bool>& reduced, Kind kind,
                                    int64_t* out_count) {
  std::vector<int64_t> kept;
  for (int d = 0; d < shape.rank(); ++d) {
    if (!reduced[d]) kept.push_back(shape.dim(d));
  }
  int64_t n_out = 1;
  for (int64_t k : kept) n_out *= k;
  *out_count = n_out;
  double init = kind == Kind::kMax    ? -INFINITY
                : kind == Kind::kMin  ? INFINITY
                : kind == Kind::kProd ? 1
                                      : 0;
  std::vector<double> out(n_out, init);
  std::vector<int64_t> count(n_out, 0);
  for (int64_t i = 0; i < shape.num_elements(); ++i) {
    int64_t rest = i, o = 0, stride = 1;
    for (int d = shape.rank() - 1; d >= 0; --d) {
      int64_t index = rest % shape.dim(d);
      rest /= shape.dim(d);
      if (!reduced[d]) {
        o += index * stride;
        stride *= shape.dim(d);
      }
    }
    double v = in[i];
    switch (kind) {
      case Kind::kSum:
      case Kind::kMean:
        out[o] += v;
        break;
      case Kind::kMax:
        out[o] = std::max(out[o], v);
        break;
      case Kind::kMin:
        out[o] = std::min(out[o], v);
        break;
      case Kind::kProd:
        out[o] *= v;
        break;
    }
    ++count[o];
  }
  if (kind == Kind::kMean) {
    for (int64_t o = 0; o < n_out; ++o) out[o] /= count[o];  // 0/0 is NaN, as expected
  }
  return out;
}

struct AxesCase {
  TensorShape shape;
  std::vector<int32_t> axes;
};

std::vector<AxesCase> AxesCases() {
  return {
      {{2, 3}, {0}},
      {{2, 3}, {1}},
      {{2, 3}, {0, 1}},
      {{2, 3}, {-1}},
      {{2, 3}, {}},
      {{2, 3}, {1, 1}},
      {{4, 3, 5}, {0, 2}},
      {{4, 3, 5}, {1}},
      {{2, 3, 4, 5}, {1, 3}},
      {{2, 3, 4, 5}, {0, 2}},
      {{2, 1, 4}, {1}},
      {{2, 1, 4}, {0, 2}},
      {{}, {}},
      {{7}, {0}},
      {{0, 3}, {0}},
      {{0, 3}, {1}},
      {{300, 200}, {0}},
      {{300, 200}, {1}},
      {{60, 50, 40}, {0, 2}},  // parallel passes
  };
}

TEST(Reductions, MatchNaiveReferenceOverAxesAndDtypes) {
  struct Op {
    const char* name;
    ReduceBuilder build;
    Kind kind;
  };
  const Op reductions[] = {{"Sum", ops::Sum, Kind::kSum},
                           {"Mean", ops::Mean, Kind::kMean},
                           {"Max", ops::Max, Kind::kMax},
                           {"Min", ops::Min, Kind::kMin},
                           {"Prod", ops::Prod, Kind::kProd}};
  std::mt19937 rng(11);
  for (const Op& op : reductions) {
    for (DataType dtype : {DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64}) {
      for (const AxesCase& c : AxesCases()) {
        for (bool keep_dims : {false, true}) {
          SCOPED_TRACE(std::string(op.name) + " " + std::string(DataTypeName(dtype)) + " " +
                       c.shape.ToString() + " axes " + std::to_string(c.axes.size()) +
                       (keep_dims ? " keep" : ""));
          bool integral = dtype == DT_INT32 || dtype == DT_INT64;
          // Products of many values overflow; keep them near 1 (floats) or
          // the reductions small (integers).
          if (op.kind == Kind::kProd && c.shape.num_elements() > 100) continue;
          if (op.kind == Kind::kMean && integral) continue;  // tested separately (truncation)
          Tensor x = op.kind != Kind::kProd ? RandomTensor(dtype, c.shape, rng, -9, 9)
                     : integral             ? RandomTensor(dtype, c.shape, rng, -2, 2)
                                            : RandomTensor(dtype, c.shape, rng, 0.5, 1.5);
          std::vector<bool> reduced(c.shape.rank(), false);
          for (int32_t a : c.axes) reduced[a < 0 ? a + c.shape.rank() : a] = true;
          int64_t n_out;
          std::vector<double> want =
              ReduceReference(ToDoubles(x), c.shape, reduced, op.kind, &n_out);
          if (integral && op.kind == Kind::kMax) {
            for (double& v : want)
              v = std::isinf(v) ? -2147483648.0 * (dtype == DT_INT64 ? 4294967296.0 : 1) : v;
          }
          if (integral && op.kind == Kind::kMin) {
            for (double& v : want) {
              if (std::isinf(v)) v = dtype == DT_INT64 ? 9223372036854775807.0 : 2147483647.0;
            }
          }
          std::vector<int64_t> dims;
          for (int d = 0; d < c.shape.rank(); ++d) {
            if (!reduced[d])
              dims.push_back(c.shape.dim(d));
            else if (keep_dims)
              dims.push_back(1);
          }
          Scope root = Scope::NewRootScope();
          Output y = op.build(root, ops::Const(root, x), Tensor::FromVector<int32_t>(c.axes),
                              {.keep_dims = keep_dims});
          ASSERT_TRUE(root.ok()) << root.status();
          EXPECT_EQ(y.shape().ToString(), TensorShape(dims).ToString());
          CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor got, Evaluate(y));
          // float sums of up to 2400 values of magnitude <= 9
          const double rtol = dtype == DT_FLOAT ? 1e-4 : 1e-10;
          const double atol = dtype == DT_FLOAT ? 5e-3 : 1e-10;
          ExpectNear(got, TensorShape(dims), want, rtol, atol, op.name);
        }
      }
    }
  }
}

TEST(Reductions, IntegerMeanTruncatesTowardZero) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Const<int32_t>(root, {1, 2, -1, -2, 7, 7}, {3, 2});
  Output m = ops::Mean(root, x, {1});
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor got, Evaluate(m));
  EXPECT_EQ(ToDoubles(got), (std::vector<double>{1, -1, 7}));  // 3/2, -3/2, 14/2
}

TEST(Reductions, ReduceAllWorksWithKnownAndUnknownRank) {
  Scope root = Scope::NewRootScope();
  Output known = ops::Const<float>(root, {1, 2, 3, 4, 5, 6}, {2, 3});
  Output unknown = ops::Placeholder(root, DT_FLOAT);
  Output a = ops::Mean(root, known);
  Output b = ops::Sum(root, unknown);
  Output c = ops::Max(root, unknown);
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(a.shape().ToString(), "[]");
  EXPECT_EQ(b.shape().ToString(), "[]");
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor av, Evaluate(a));
  EXPECT_EQ(av.scalar<float>(), 3.5f);
  Tensor fed = Tensor::FromVector<float>({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2});
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor bv, Evaluate(b, {{unknown, fed}}));
  EXPECT_EQ(bv.scalar<float>(), 36.0f);
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor cv, Evaluate(c, {{unknown, fed}}));
  EXPECT_EQ(cv.scalar<float>(), 8.0f);
}

TEST(Reductions, AxisOutOfRangeFailsAtBuildAndRunTime) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, {.shape = {2, 3}});
  Output axis = ops::Const(root.WithOpName("axis"), 2);
  ops::Sum(root.WithOpName("sum"), x, axis);
  EXPECT_EQ(root.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(root.status().message(),
            "sum (Sum): axis (axis:0) 2 is out of range for rank 2 (must be in [-2, 2))");

  Scope r2 = Scope::NewRootScope();
  Output y = ops::Placeholder(r2.WithOpName("y"), DT_FLOAT);
  Output a = ops::Placeholder(r2.WithOpName("a"), DT_INT32);
  Output s = ops::Max(r2.WithOpName("max"), y, a);
  ASSERT_TRUE(r2.ok());
  Status st =
      Evaluate(s, {{y, Tensor(DT_FLOAT, {2, 3})}, {a, Tensor::Scalar<int32_t>(-3)}}).status();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "max (Max): axis -3 is out of range for rank 2 (must be in [-2, 2))");
}

TEST(ArgMax, FindsFirstExtremeAlongAxis) {
  std::mt19937 rng(12);
  struct Case {
    TensorShape shape;
    int axis;
  };
  const Case cases[] = {{{5}, 0},     {{3, 4}, 0},    {{3, 4}, 1},
                        {{3, 4}, -1}, {{2, 3, 4}, 1}, {{1, 6}, 1}};
  for (bool max : {true, false}) {
    for (DataType dtype : {DT_FLOAT, DT_INT32, DT_INT64, DT_DOUBLE}) {
      for (DataType out_type : {DT_INT64, DT_INT32}) {
        for (const Case& c : cases) {
          Tensor x = RandomTensor(dtype, c.shape, rng, -3, 3);
          if (dtype == DT_FLOAT || dtype == DT_DOUBLE) {  // ties, to check the first wins
            std::vector<double> v = ToDoubles(x);
            for (double& e : v) e = std::round(e);
            x = testing::MakeTensor(dtype, c.shape, v);
          }
          const int axis = c.axis < 0 ? c.axis + c.shape.rank() : c.axis;
          int64_t outer = 1, r = c.shape.dim(axis), inner = 1;
          for (int d = 0; d < axis; ++d) outer *= c.shape.dim(d);
          for (int d = axis + 1; d < c.shape.rank(); ++d) inner *= c.shape.dim(d);
          std::vector<double> v = ToDoubles(x), want;
          for (int64_t o = 0; o < outer; ++o) {
            for (int64_t i = 0; i < inner; ++i) {
              int64_t best = 0;
              for (int64_t k = 1; k < r; ++k) {
                double cur = v[(o * r + k) * inner + i], b = v[(o * r + best) * inner + i];
                if (max ? cur > b : cur < b) best = k;
              }
              want.push_back(static_cast<double>(best));
            }
          }
          Scope root = Scope::NewRootScope();
          Output in = ops::Const(root, x);
          Output y = max ? ops::ArgMax(root, in, c.axis, out_type)
                         : ops::ArgMin(root, in, c.axis, out_type);
          ASSERT_TRUE(root.ok()) << root.status();
          CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor got, Evaluate(y));
          EXPECT_EQ(got.dtype(), out_type);
          EXPECT_EQ(ToDoubles(got), want) << c.shape.ToString() << " axis " << c.axis;
        }
      }
    }
  }
}

TEST(ArgMax, EmptyDimensionIsAnError) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT);
  Output y = ops::ArgMax(root.WithOpName("am"), x, 0);
  Status s = Evaluate(y, {{x, Tensor(DT_FLOAT, {0, 3})}}).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "am (ArgMax): input is [0,3]: dimension 0 is empty");
}

TEST(SumToShapeOf, SumsBroadcastDimensionsAway) {
  std::mt19937 rng(13);
  struct Case {
    TensorShape grad, like;
  };
  const Case cases[] = {{{2, 3}, {3}},    {{2, 3}, {2, 1}},    {{2, 3}, {}},  {{2, 3}, {1, 3}},
                        {{2, 3}, {2, 3}}, {{4, 2, 3}, {2, 1}}, {{0, 3}, {3}}, {{2, 3, 4}, {3, 1}}};
  for (DataType dtype : {DT_FLOAT, DT_DOUBLE, DT_INT32}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(c.grad.ToString() + " to " + c.like.ToString());
      Tensor g = RandomTensor(dtype, c.grad, rng);
      // Reference: sum over leading dims and dims where like is 1.
      std::vector<bool> reduced(c.grad.rank(), false);
      const int lead = c.grad.rank() - c.like.rank();
      for (int d = 0; d < c.grad.rank(); ++d) {
        reduced[d] = d < lead || (c.like.dim(d - lead) == 1 && c.grad.dim(d) != 1);
      }
      int64_t n;
      std::vector<double> want = ReduceReference(ToDoubles(g), c.grad, reduced, Kind::kSum, &n);
      Scope root = Scope::NewRootScope();
      Output like = ops::Placeholder(root, DT_BOOL, {.shape = c.like});
      Output y = ops::SumToShapeOf(root, ops::Const(root, g), like);
      ASSERT_TRUE(root.ok()) << root.status();
      EXPECT_EQ(y.shape().ToString(), c.like.ToString());
      CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor got, Evaluate(y, {{like, Tensor(DT_BOOL, c.like)}}));
      ExpectNear(got, c.like, want, 1e-5, 1e-5, "SumToShapeOf");
    }
  }
}

TEST(SumToShapeOf, RejectsShapesThatAreNotBroadcasts) {
  Scope root = Scope::NewRootScope();
  Output g = ops::Placeholder(root.WithOpName("g"), DT_FLOAT, {.shape = {2, 3}});
  Output like = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, {.shape = {4}});
  ops::SumToShapeOf(root.WithOpName("s"), g, like);
  EXPECT_EQ(root.status().message(),
            "s (SumToShapeOf): grad is [2,3] (g:0), which is not a broadcast of like, [4] (x:0)");

  Status st = testing::RunWithFedShapes(ops::SumToShapeOf, "s", {3}, {2, 3});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "s (SumToShapeOf): grad is [3], which is not a broadcast of like, [2,3]");
}

TEST(Reductions, ResultsDoNotDependOnThreadCount) {
  std::mt19937 rng(14);
  Scope root = Scope::NewRootScope();
  Output x = ops::Const(root, RandomTensor(DT_FLOAT, {613, 407}, rng));
  std::vector<Output> outs = {ops::Sum(root, x, {0}), ops::Sum(root, x, {1}), ops::Mean(root, x),
                              ops::Max(root, x, {0}),
                              ops::Sum(root, ops::Reshape(root, x, {613, 11, 37}), {0, 2})};
  ASSERT_TRUE(root.ok()) << root.status();
  for (const Output& out : outs) {
    CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor one, testing::EvaluateWithThreads(out, 1));
    CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor two, testing::EvaluateWithThreads(out, 2));
    testing::ExpectIdentical(one, two, out.node()->name());
  }
}

}  // namespace
}  // namespace ckflow
