// Elementwise math: every kernel against a naive double-precision reference
// over a table of shapes (broadcasting, scalars, empty) and dtypes; the
// build-time checks with their exact messages; bad input at run time.
#include "ops/math_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <numbers>
#include <random>

#include "ops/array_ops.h"
#include "ops/gradients.h"
#include "ops/nn_ops.h"
#include "ops/ops_internal.h"
#include "ops/standard_ops.h"
#include "tests/ops/op_test_util.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

using testing::BroadcastReference;
using testing::Evaluate;
using testing::ExpectNear;
using testing::RandomTensor;
using testing::ToDoubles;

using testing::BinaryBuilder;
using UnaryBuilder = Output (*)(const Scope&, ops::Input);

struct BinaryCase {
  const char* name;
  BinaryBuilder build;
  std::function<double(double, double)> reference;
  std::vector<DataType> dtypes;
  double x_lo = -3, x_hi = 3, y_lo = -3, y_hi = 3;
  bool whole_numbers = false;  // so that comparisons see ties
};

double Bool(bool b) { return b ? 1 : 0; }

std::vector<BinaryCase> BinaryCases() {
  const std::vector<DataType> all = {DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64};
  const std::vector<DataType> fp = {DT_FLOAT, DT_DOUBLE};
  return {
      {"Add", ops::Add, [](double a, double b) { return a + b; }, all},
      {"Sub", ops::Sub, [](double a, double b) { return a - b; }, all},
      {"Mul", ops::Mul, [](double a, double b) { return a * b; }, all},
      {"Div", ops::Div, [](double a, double b) { return a / b; }, fp, -3, 3, 0.5, 3},
      {"Maximum", ops::Maximum, [](double a, double b) { return std::max(a, b); }, all},
      {"Minimum", ops::Minimum, [](double a, double b) { return std::min(a, b); }, all},
      {"Pow", ops::Pow, [](double a, double b) { return std::pow(a, b); }, fp, 0.2, 3, -2, 2},
      {"SquaredDifference", ops::SquaredDifference,
       [](double a, double b) { return (a - b) * (a - b); }, fp},
      {"Equal", ops::Equal, [](double a, double b) { return Bool(a == b); }, all, -2, 2, -2, 2,
       true},
      {"NotEqual", ops::NotEqual, [](double a, double b) { return Bool(a != b); }, all, -2, 2, -2,
       2, true},
      {"Less", ops::Less, [](double a, double b) { return Bool(a < b); }, all, -2, 2, -2, 2, true},
      {"LessEqual", ops::LessEqual, [](double a, double b) { return Bool(a <= b); }, all, -2, 2, -2,
       2, true},
      {"Greater", ops::Greater, [](double a, double b) { return Bool(a > b); }, all, -2, 2, -2, 2,
       true},
      {"GreaterEqual", ops::GreaterEqual, [](double a, double b) { return Bool(a >= b); }, all, -2,
       2, -2, 2, true},
      {"ReluGrad", ops::ReluGrad, [](double g, double f) { return f > 0 ? g : 0; }, fp},
      {"SigmoidGrad", ops::SigmoidGrad, [](double y, double dy) { return dy * y * (1 - y); }, fp, 0,
       1},
      {"TanhGrad", ops::TanhGrad, [](double y, double dy) { return dy * (1 - y * y); }, fp, -1, 1},
      {"SigmoidCrossEntropyWithLogits", ops::SigmoidCrossEntropyWithLogits,
       [](double x, double z) {
         return std::max(x, 0.0) - x * z + std::log1p(std::exp(-std::abs(x)));
       },
       fp, -30, 30, 0, 1},
  };
}

// Ops that require equal shapes rather than broadcasting.
bool NeedsEqualShapes(const std::string& name) {
  return name == "ReluGrad" || name == "SigmoidGrad" || name == "TanhGrad" ||
         name == "SigmoidCrossEntropyWithLogits";
}

struct ShapePair {
  TensorShape x, y;
};

std::vector<ShapePair> ShapePairs() {
  return {
      {{2, 3}, {2, 3}},
      {{2, 3}, {3}},
      {{3}, {2, 3}},
      {{2, 1}, {1, 3}},
      {{}, {2, 3}},
      {{2, 3}, {}},
      {{}, {}},
      {{0, 3}, {3}},
      {{0, 3}, {0, 3}},
      {{4, 1, 5}, {3, 1}},
      {{2, 3, 4}, {2, 1, 4}},
      {{1}, {5}},
      {{3, 1, 2, 1}, {1, 4, 1, 5}},
      {{2, 1, 3}, {2, 4, 3}},
      {{1, 1}, {1, 1, 1}},
      {{300, 200}, {300, 200}},
      {{300, 200}, {200}},
      {{300, 1}, {300, 200}},  // parallel paths
  };
}

double Tolerance(DataType dtype) { return dtype == DT_FLOAT ? 2e-5 : 1e-12; }

TEST(CwiseBinary, MatchesNaiveReferenceOverShapesAndDtypes) {
  std::mt19937 rng(1);
  for (const BinaryCase& c : BinaryCases()) {
    for (DataType dtype : c.dtypes) {
      for (const ShapePair& sp : ShapePairs()) {
        if (NeedsEqualShapes(c.name) && !(sp.x == sp.y)) continue;
        SCOPED_TRACE(std::string(c.name) + " " + std::string(DataTypeName(dtype)) + " " +
                     sp.x.ToString() + " " + sp.y.ToString());
        Tensor x = RandomTensor(dtype, sp.x, rng, c.x_lo, c.x_hi);
        Tensor y = RandomTensor(dtype, sp.y, rng, c.y_lo, c.y_hi);
        if (c.whole_numbers && dtype != DT_INT32 && dtype != DT_INT64) {
          std::vector<double> xs = ToDoubles(x), ys = ToDoubles(y);
          for (double& v : xs) v = std::round(v);
          for (double& v : ys) v = std::round(v);
          x = testing::MakeTensor(dtype, sp.x, xs);
          y = testing::MakeTensor(dtype, sp.y, ys);
        }
        Scope root = Scope::NewRootScope();
        Output z = c.build(root, ops::Const(root, x), ops::Const(root, y));
        ASSERT_TRUE(root.ok()) << root.status();
        CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor got, Evaluate(z));
        TensorShape shape;
        std::vector<double> want =
            BroadcastReference(ToDoubles(x), sp.x, ToDoubles(y), sp.y, c.reference, &shape);
        ExpectNear(got, shape, want, Tolerance(dtype), Tolerance(dtype), c.name);
      }
    }
  }
}

struct UnaryCase {
  const char* name;
  UnaryBuilder build;
  double (*reference)(double);
  bool integers;
  double lo = -3, hi = 3;
};

std::vector<UnaryCase> UnaryCases() {
  return {
      {"Neg", ops::Neg, [](double x) { return -x; }, true},
      {"Square", ops::Square, [](double x) { return x * x; }, true},
      {"Sign", ops::Sign, [](double x) { return double((x > 0) - (x < 0)); }, true},
      {"Abs", ops::Abs, [](double x) { return std::abs(x); }, false},
      {"Sqrt", ops::Sqrt, [](double x) { return std::sqrt(x); }, false, 0, 4},
      {"Rsqrt", ops::Rsqrt, [](double x) { return 1 / std::sqrt(x); }, false, 0.1, 4},
      {"Exp", ops::Exp, [](double x) { return std::exp(x); }, false, -10, 10},
      {"Log", ops::Log, [](double x) { return std::log(x); }, false, 0.01, 10},
      {"Log1p", ops::Log1p, [](double x) { return std::log1p(x); }, false, -0.5, 10},
      {"Reciprocal", ops::Reciprocal, [](double x) { return 1 / x; }, false, 0.1, 4},
      {"Relu", ops::Relu, [](double x) { return std::max(x, 0.0); }, false},
      {"Sigmoid", ops::Sigmoid, [](double x) { return 1 / (1 + std::exp(-x)); }, false, -20, 20},
      {"Tanh", ops::Tanh, [](double x) { return std::tanh(x); }, false, -5, 5},
      {"Erf", ops::Erf, [](double x) { return std::erf(x); }, false, -4, 4},
      {"Erfc", ops::Erfc, [](double x) { return std::erfc(x); }, false, -4, 4},
      {"Gelu", [](const Scope& s, ops::Input x) { return ops::Gelu(s, x); },
       [](double x) { return 0.5 * x * std::erfc(-x * double{0.7071067811865476f}); }, false, -6,
       6},
      {"GeluApproximate", [](const Scope& s, ops::Input x) { return ops::Gelu(s, x, true); },
       [](double x) {
         return 0.5 * x *
                (1 +
                 std::tanh(std::sqrt(2 / std::numbers::pi) * (x + double{0.044715f} * x * x * x)));
       },
       false, -6, 6},
  };
}

TEST(CwiseUnary, MatchesNaiveReferenceOverShapesAndDtypes) {
  std::mt19937 rng(2);
  const std::vector<TensorShape> shapes = {{}, {0}, {7}, {3, 5}, {2, 0, 3}, {300, 200}};
  for (const UnaryCase& c : UnaryCases()) {
    std::vector<DataType> dtypes = {DT_FLOAT, DT_DOUBLE};
    if (c.integers) dtypes.insert(dtypes.end(), {DT_INT32, DT_INT64});
    for (DataType dtype : dtypes) {
      for (const TensorShape& shape : shapes) {
        SCOPED_TRACE(std::string(c.name) + " " + std::string(DataTypeName(dtype)) + " " +
                     shape.ToString());
        Tensor x = RandomTensor(dtype, shape, rng, c.lo, c.hi);
        Scope root = Scope::NewRootScope();
        Output y = c.build(root, ops::Const(root, x));
        ASSERT_TRUE(root.ok()) << root.status();
        CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor got, Evaluate(y));
        std::vector<double> want = ToDoubles(x);
        for (double& v : want) v = c.reference(v);
        ExpectNear(got, shape, want, Tolerance(dtype), Tolerance(dtype), c.name);
      }
    }
  }
}

// The exact Gelu is one kernel where TensorFlow's tf.nn.gelu builds five
// ops. Built here as TensorFlow builds it, the composite gives the same
// bits forward; its gradient, through the gradients of those ops, agrees to
// a few ulp (a fused multiply-add may round the kernel's last sum once
// less). Both give the same bits on 1, 2 and 4 threads.
TEST(Gelu, OneKernelGivesTheCompositesValues) {
  std::mt19937 rng(11);
  for (DataType dtype : {DT_FLOAT, DT_DOUBLE}) {
    SCOPED_TRACE(DataTypeName(dtype));
    Tensor x = RandomTensor(dtype, {301, 257}, rng, -9, 9);
    const double specials[] = {0.0, -0.0, 30, -30, 1e-30, -1e-30, 5.5, -5.5};
    for (size_t i = 0; i < std::size(specials); ++i) {
      if (dtype == DT_FLOAT) x.flat<float>()[i] = static_cast<float>(specials[i]);
      if (dtype == DT_DOUBLE) x.flat<double>()[i] = specials[i];
    }
    const Tensor dy = RandomTensor(dtype, x.shape(), rng, -2, 2);
    Scope root = Scope::NewRootScope();
    Output in = ops::Const(root, x);
    auto scalar = [&](double v) { return ops::Const(root, *internal::ScalarOfType(dtype, v)); };
    Output composite =
        ops::Mul(root, ops::Mul(root, scalar(0.5), in),
                 ops::Erfc(root, ops::Mul(root, ops::Neg(root, in), scalar(0.7071067811865476f))));
    Output fused = ops::Gelu(root, in);
    Output seed = ops::Const(root, dy);
    CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Output> composite_grad,
                                AddGradients(root, {composite}, {in}, {seed}));
    CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Output> fused_grad,
                                AddGradients(root, {fused}, {in}, {seed}));
    ASSERT_EQ(fused_grad[0].node()->op_def().type, "GeluGrad");
    CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor want, Evaluate(composite));
    CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor want_grad, Evaluate(composite_grad[0]));
    for (int threads : {1, 2, 4}) {
      SCOPED_TRACE(threads);
      CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor got, testing::EvaluateWithThreads(fused, threads));
      EXPECT_TRUE(testing::SameTensor(got, want));
      CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor got_grad,
                                  testing::EvaluateWithThreads(fused_grad[0], threads));
      const double ulp = dtype == DT_FLOAT ? std::numeric_limits<float>::epsilon()
                                           : std::numeric_limits<double>::epsilon();
      ExpectNear(got_grad, x.shape(), ToDoubles(want_grad), 4 * ulp, 4 * ulp, "GeluGrad");
    }
  }
}

TEST(CwiseUnary, FloatOnlyOpsRejectIntegersAtBuildTime) {
  Scope root = Scope::NewRootScope();
  Output i = ops::Const(root.WithOpName("i"), 3);
  ops::Exp(root.WithOpName("exp"), i);
  EXPECT_EQ(root.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(root.status().message(),
            "exp (Exp): x is int32 (i:0), but must be one of float32, float64");
}

TEST(CwiseBinary, IntegerOverflowWrapsAround) {
  // Two's complement wrap-around, as TensorFlow on every platform; here it
  // must also be free of undefined behaviour (UBSan runs these tests).
  constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
  constexpr int32_t kMin = std::numeric_limits<int32_t>::min();
  Scope root = Scope::NewRootScope();
  Output big = ops::Const(root, Tensor::FromVector<int32_t>({kMax, kMin, 65536}));
  Output sum = ops::Add(root, big, 1);
  Output neg = ops::Neg(root, big);
  Output sq = ops::Square(root, big);
  Output total = ops::Sum(root, ops::Const(root, Tensor::FromVector<int32_t>({kMax, 1})), {0});
  ASSERT_TRUE(root.ok()) << root.status();
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor s, Evaluate(sum));
  EXPECT_EQ(ToDoubles(s), (std::vector<double>{kMin, kMin + 1.0, 65537}));
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor n, Evaluate(neg));
  EXPECT_EQ(ToDoubles(n), (std::vector<double>{kMin + 1.0, kMin, -65536}));
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor q, Evaluate(sq));
  EXPECT_EQ(ToDoubles(q), (std::vector<double>{1, 0, 0}));  // 65536^2 = 2^32 wraps to 0
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor t, Evaluate(total));
  EXPECT_EQ(t.scalar<int32_t>(), kMin);
}

TEST(CwiseBinary, LiteralInputsBecomeConstsInTheOpsScope) {
  Scope root = Scope::NewRootScope();
  Scope layer = root.NewSubScope("layer");
  Output x = ops::Const(root.WithOpName("x"), 2.0f);
  Output y = ops::Mul(layer.WithOpName("scaled"), x, 3.0f);
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(y.node()->name(), "layer/scaled");
  EXPECT_EQ(y.node()->input(1).node()->name(), "layer/Const");
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor v, Evaluate(y));
  EXPECT_EQ(v.scalar<float>(), 6.0f);
}

// ------------------------------------------------------- build-time checks

TEST(BuildTimeChecks, DtypeMismatchNamesBothInputs) {
  Scope root = Scope::NewRootScope();
  Output a = ops::Placeholder(root.WithOpName("a"), DT_FLOAT);
  Output b = ops::Placeholder(root.WithOpName("b"), DT_INT32);
  Output sum = ops::Add(root.WithOpName("add"), a, b);
  EXPECT_FALSE(sum.valid());
  EXPECT_EQ(root.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(root.status().message(),
            "add (Add): dtype mismatch: x is float32 (a:0), y is int32 (b:0)");
}

TEST(BuildTimeChecks, IncompatibleBroadcastNamesBothShapes) {
  Scope root = Scope::NewRootScope();
  Output a = ops::Placeholder(root.WithOpName("a"), DT_FLOAT, {.shape = {2, 3}});
  Output b = ops::Placeholder(root.WithOpName("b"), DT_FLOAT, {.shape = {4}});
  ops::Sub(root.WithOpName("sub"), a, b);
  EXPECT_EQ(root.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(root.status().message(),
            "sub (Sub): incompatible shapes for broadcasting: x is [2,3] (a:0), y is [4] (b:0)");
}

TEST(BuildTimeChecks, BroadcastingInfersPartialShapes) {
  struct Case {
    PartialShape x, y;
    std::string want;  // "error" if the build must fail
  };
  const Case cases[] = {
      {{-1, 3}, {4, -1}, "[4,3]"},
      {{-1, 3}, {3}, "[?,3]"},
      {{-1, 1}, {1, 5}, "[?,5]"},
      {{-1}, {-1}, "[?]"},
      {{-1}, {1}, "[?]"},
      {{2, 3}, PartialShape::Unknown(), "<unknown>"},
      {PartialShape::Scalar(), {-1, 2}, "[?,2]"},
      {{-1, 3}, {2, 4}, "error"},
      {{5, -1}, {4, 1}, "error"},
  };
  for (const Case& c : cases) {
    Scope root = Scope::NewRootScope();
    Output x = ops::Placeholder(root, DT_FLOAT, {.shape = c.x});
    Output y = ops::Placeholder(root, DT_FLOAT, {.shape = c.y});
    Output z = ops::Add(root, x, y);
    if (c.want == "error") {
      EXPECT_FALSE(root.ok()) << c.x.ToString() << " + " << c.y.ToString();
    } else {
      ASSERT_TRUE(root.ok()) << root.status();
      EXPECT_EQ(z.shape().ToString(), c.want) << c.x.ToString() << " + " << c.y.ToString();
    }
  }
}

TEST(BuildTimeChecks, WrongNumberOfInputsIsAnErrorNotACrash) {
  Scope root = Scope::NewRootScope();
  Output a = ops::Const(root.WithOpName("a"), 1.0f);
  root.WithOpName("add").AddNode(StandardOp("Add"), {a});
  EXPECT_EQ(root.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(root.status().message(), "add (Add): expects 2 inputs (x, y), got 1");
}

TEST(BuildTimeChecks, ErrorsAreStickyAndLaterBuildersReturnInvalidOutputs) {
  Scope root = Scope::NewRootScope();
  Output bad = ops::Add(root.WithOpName("bad"), 1.0f, 1);
  Output later = ops::Neg(root, 2.0f);
  EXPECT_FALSE(bad.valid());
  EXPECT_FALSE(later.valid());
  EXPECT_EQ(root.status().message(),
            "bad (Add): dtype mismatch: x is float32 (Const:0), y is int32 (Const_1:0)");
}

// ---------------------------------------------------------- run-time checks

TEST(RunTimeChecks, BadFedShapesFailNamingTheNode) {
  struct Case {
    BinaryBuilder build;
    TensorShape a, b;
    std::string message;
  };
  const Case cases[] = {
      {ops::Add,
       {2, 3},
       {4},
       "op (Add): incompatible shapes for broadcasting: x is [2,3], y is [4]"},
      {ops::Less,
       {2, 1, 3},
       {2, 2},
       "op (Less): incompatible shapes for broadcasting: x is [2,1,3], y is [2,2]"},
      {ops::SigmoidGrad,
       {2, 3},
       {3},
       "op (SigmoidGrad): shapes must be equal: y is [2,3], dy is [3]"},
      {ops::ReluGrad,
       {3},
       {},
       "op (ReluGrad): shapes must be equal: gradients is [3], features is []"},
  };
  for (const Case& c : cases) {
    Status s = testing::RunWithFedShapes(c.build, "op", c.a, c.b);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message(), c.message);
  }
}

// ------------------------------------------------------------ Select, AddN

TEST(Select, BroadcastsConditionAndBranches) {
  std::mt19937 rng(3);
  struct Case {
    TensorShape c, t, e;
  };
  // Each of condition, t and e read whole or broadcast along the rows, in
  // all eight ways, and rows long enough for vector loops (a dropout mask).
  const Case cases[] = {{{2, 3}, {2, 3}, {2, 3}},
                        {{3}, {2, 3}, {}},
                        {{2, 1}, {1, 3}, {2, 3}},
                        {{}, {4}, {4}},
                        {{0, 2}, {2}, {2}},
                        {{2, 3}, {}, {2, 3}},
                        {{2, 3}, {}, {}},
                        {{}, {4}, {}},
                        {{}, {}, {4}},
                        {{}, {}, {}},
                        {{40, 50}, {40, 50}, {}},
                        {{3, 1}, {3, 77}, {1, 77}}};
  for (DataType dtype : {DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64, DT_BOOL}) {
    for (const Case& k : cases) {
      SCOPED_TRACE(std::string(DataTypeName(dtype)) + " " + k.c.ToString() + k.t.ToString() +
                   k.e.ToString());
      Tensor c = RandomTensor(DT_BOOL, k.c, rng);
      Tensor t = RandomTensor(dtype, k.t, rng, 1, 9);
      Tensor e = RandomTensor(dtype, k.e, rng, -9, 0);
      Scope root = Scope::NewRootScope();
      Output out = ops::Select(root, ops::Const(root, c), ops::Const(root, t), ops::Const(root, e));
      ASSERT_TRUE(root.ok()) << root.status();
      CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor got, Evaluate(out));
      // Reference: broadcast (c, t) picking t or a marker, then against e.
      TensorShape ct, shape;
      std::vector<double> pick = BroadcastReference(
          ToDoubles(c), k.c, ToDoubles(t), k.t,
          [](double cond, double tv) { return cond != 0 ? tv : NAN; }, &ct);
      std::vector<double> want = BroadcastReference(
          pick, ct, ToDoubles(e), k.e, [](double p, double ev) { return std::isnan(p) ? ev : p; },
          &shape);
      ExpectNear(got, shape, want, 0, 0, "Select");
    }
  }
}

TEST(AddN, SumsInputsOfEqualShape) {
  std::mt19937 rng(4);
  for (DataType dtype : {DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64}) {
    for (int n : {1, 2, 5}) {
      Scope root = Scope::NewRootScope();
      std::vector<Output> inputs;
      std::vector<double> want(6, 0);
      for (int i = 0; i < n; ++i) {
        Tensor t = RandomTensor(dtype, {2, 3}, rng);
        std::vector<double> v = ToDoubles(t);
        for (int j = 0; j < 6; ++j) want[j] += v[j];
        inputs.push_back(ops::Const(root, t));
      }
      Output sum = ops::AddN(root, inputs);
      ASSERT_TRUE(root.ok()) << root.status();
      CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor got, Evaluate(sum));
      ExpectNear(got, {2, 3}, want, Tolerance(dtype), Tolerance(dtype), "AddN");
    }
  }
}

TEST(AddN, RejectsMixedShapesAtBuildTime) {
  Scope root = Scope::NewRootScope();
  Output a = ops::Placeholder(root.WithOpName("a"), DT_FLOAT, {.shape = {2}});
  Output b = ops::Placeholder(root.WithOpName("b"), DT_FLOAT, {.shape = {3}});
  ops::AddN(root.WithOpName("n"), {a, b});
  EXPECT_EQ(root.status().message(),
            "n (AddN): shapes must be equal: inputs[0] is [2] (a:0), inputs[1] is [3] (b:0)");
}

// -------------------------------------------------------------- parallelism

TEST(Parallelism, LargeElementwiseResultsDoNotDependOnThreadCount) {
  std::mt19937 rng(5);
  Scope root = Scope::NewRootScope();
  Output x = ops::Const(root, RandomTensor(DT_FLOAT, {517, 311}, rng));
  Output y = ops::Const(root, RandomTensor(DT_FLOAT, {311}, rng));
  Output z = ops::Tanh(root, ops::Mul(root, ops::Exp(root, x), ops::Add(root, x, y)));
  ASSERT_TRUE(root.ok());
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor one, testing::EvaluateWithThreads(z, 1));
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor two, testing::EvaluateWithThreads(z, 2));
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor four, testing::EvaluateWithThreads(z, 4));
  testing::ExpectIdentical(one, two, "1 vs 2 threads");
  testing::ExpectIdentical(one, four, "1 vs 4 threads");
}

}  // namespace
}  // namespace ckflow
