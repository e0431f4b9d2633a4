// Array ops: Const, Placeholder, Identity, NoOp, Reshape, Cast, Fill,
// ZerosLike, OnesLike, Shape; their build-time and run-time errors.
#include "ops/array_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ops/initializers.h"
#include "ops/standard_ops.h"
#include "tests/ops/op_test_util.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

using testing::Evaluate;
using testing::ToDoubles;

TEST(Const, BuildsScalarsVectorsAndMatrices) {
  Scope root = Scope::NewRootScope();
  Output f = ops::Const(root, 1.5f);
  Output d = ops::Const(root, 2.5);
  Output i = ops::Const(root, int64_t{7});
  Output b = ops::Const(root, true);
  Output m = ops::Const<float>(root, {1, 2, 3, 4, 5, 6}, {2, 3});
  Output s = ops::Const(root, std::string("hello"));
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(f.dtype(), DT_FLOAT);
  EXPECT_EQ(d.dtype(), DT_DOUBLE);
  EXPECT_EQ(i.dtype(), DT_INT64);
  EXPECT_EQ(b.dtype(), DT_BOOL);
  EXPECT_EQ(m.shape().ToString(), "[2,3]");
  EXPECT_EQ(s.dtype(), DT_STRING);
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor mv, Evaluate(m));
  EXPECT_EQ(ToDoubles(mv), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor sv, Evaluate(s));
  EXPECT_EQ(sv.scalar<std::string>(), "hello");
}

TEST(Const, ValueCountMustFillTheShape) {
  Scope root = Scope::NewRootScope();
  Output m = ops::Const<float>(root, {1, 2, 3}, {2, 2});
  EXPECT_FALSE(m.valid());
  EXPECT_EQ(root.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(root.status().message(), "Const: 3 values do not fill shape [2,2] (4 elements)");
}

TEST(Const, NegativeDimensionIsAnErrorNotACrash) {
  Scope root = Scope::NewRootScope();
  ops::Const<int32_t>(root, {1, 2}, {-1, 2});
  EXPECT_THAT(root.status(),
              testing::StatusIs(StatusCode::kInvalidArgument, "negative dimension -1"));
}

TEST(Placeholder, UnfedFailsNamingItself) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, {.shape = {-1, 3}});
  Output y = ops::Identity(root, x);
  ASSERT_TRUE(root.ok());
  EXPECT_EQ(x.shape().ToString(), "[?,3]");
  Status s = Evaluate(y).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(
      s.message(),
      "x (Placeholder): placeholder 'x' must be fed a value of dtype float32 and shape [?,3]");
}

TEST(Placeholder, FedValueFlowsThroughIdentityWithoutACopy) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_FLOAT);
  Output y = ops::Identity(root, x);
  Output z = ops::StopGradient(root, y);
  Tensor fed = Tensor::FromVector<float>({1, 2, 3});
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor got, Evaluate(z, {{x, fed}}));
  EXPECT_TRUE(got.SharesBufferWith(fed));
}

TEST(NoOp, HasNoOutputsAndGroupsControlDependencies) {
  Scope root = Scope::NewRootScope();
  Output a = ops::Const(root, 1.0f);
  Output b = ops::Const(root, 2.0f);
  Output g = ops::Group(root.WithOpName("g"), {a, b});
  ASSERT_TRUE(root.ok());
  EXPECT_EQ(g.node()->num_outputs(), 0);
  EXPECT_EQ(g.node()->type(), "NoOp");
  EXPECT_EQ(g.node()->control_inputs().size(), 2u);
}

// ------------------------------------------------------------------ Reshape

struct ReshapeCase {
  TensorShape from;
  std::vector<int32_t> to;
  std::string want;  // the result shape, or the error message after "r (Reshape): "
};

std::vector<ReshapeCase> ReshapeCases() {
  return {
      {{2, 3}, {3, 2}, "[3,2]"},
      {{2, 3}, {-1}, "[6]"},
      {{2, 3}, {2, -1}, "[2,3]"},
      {{2, 3}, {1, -1, 1}, "[1,6,1]"},
      {{}, {1, 1}, "[1,1]"},
      {{1}, {}, "[]"},
      {{0, 3}, {0, 5}, "[0,5]"},
      {{2, 3}, {4, 2}, "cannot reshape a tensor of 6 elements ([2,3]) into shape [4,2]"},
      {{2, 3}, {4, -1}, "cannot reshape a tensor of 6 elements ([2,3]) into shape [4,-1]"},
      {{2, 3}, {-1, -1}, "shape [-1,-1] has more than one -1 (dimensions 0 and 1)"},
      {{2, 3}, {-2, -3}, "shape has negative dimension -2 at index 0"},
      {{0, 3}, {-1, 0}, "cannot infer the -1 in shape [-1,0] for an empty tensor ([0,3])"},
  };
}

TEST(Reshape, ComputesShapesOrFailsAtRunTime) {
  for (const ReshapeCase& c : ReshapeCases()) {
    SCOPED_TRACE(c.from.ToString() + " -> " + c.want);
    Scope root = Scope::NewRootScope();
    Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT);  // shape unknown until run
    Output shape = ops::Placeholder(root.WithOpName("s"), DT_INT32, {.shape = {-1}});
    Output r = ops::Reshape(root.WithOpName("r"), x, shape);
    ASSERT_TRUE(root.ok()) << root.status();
    Tensor in(DT_FLOAT, c.from);
    for (int64_t i = 0; i < in.NumElements(); ++i) in.flat<float>()[i] = static_cast<float>(i);
    Tensor dims = Tensor::FromVector<int32_t>(c.to);
    StatusOr<Tensor> out = Evaluate(r, {{x, in}, {shape, dims}});
    if (c.want[0] == '[') {
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ(out->shape().ToString(), c.want);
      EXPECT_TRUE(out->SharesBufferWith(in));
    } else {
      EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
      EXPECT_EQ(out.status().message(), "r (Reshape): " + c.want);
    }
  }
}

TEST(Reshape, ConstantShapesAreCheckedAtBuildTime) {
  for (const ReshapeCase& c : ReshapeCases()) {
    SCOPED_TRACE(c.from.ToString());
    Scope root = Scope::NewRootScope();
    Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, {.shape = c.from});
    Output r = ops::Reshape(root.WithOpName("r"), x, Tensor::FromVector<int32_t>(c.to));
    if (c.want[0] == '[') {
      ASSERT_TRUE(root.ok()) << root.status();
      EXPECT_EQ(r.shape().ToString(), c.want);
    } else {
      EXPECT_THAT(root.status(), testing::StatusIs(StatusCode::kInvalidArgument, c.want));
      EXPECT_EQ(root.status().message().rfind("r (Reshape): ", 0), 0u) << root.status();
    }
  }
}

TEST(Reshape, PartiallyKnownInputKeepsTheUnknownDimension) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_FLOAT, {.shape = {-1, 28, 28}});
  Output r = ops::Reshape(root, x, {-1, 784});
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(r.shape().ToString(), "[?,784]");
}

// A shape computed from shapes keeps what is known of them, as
// TensorFlow's inference does: Dense on [batch, time, features] reshapes
// its [batch * time, units] product back to [batch, time, units].
TEST(Reshape, ShapesBuiltFromShapesKeepTheirKnownDimensions) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_FLOAT, {.shape = {-1, 3, 4}});
  Output lead = ops::Slice(root, ops::Shape(root, x), {0}, {2});
  Output target = ops::Concat(root, {lead, ops::Const<int32_t>(root, {5, -1})}, 0);
  Output r = ops::Reshape(root, ops::Placeholder(root, DT_FLOAT), target);
  Output tail = ops::Reshape(root, ops::Placeholder(root, DT_FLOAT),
                             ops::Slice(root, ops::Shape(root, x, DT_INT64), {1}, {-1}));
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(r.shape().ToString(), "[?,3,5,?]");
  EXPECT_EQ(tail.shape().ToString(), "[3,4]");
  CKFLOW_ASSERT_OK_AND_ASSIGN(
      Tensor out,
      testing::Evaluate(r, {{x, Tensor(DT_FLOAT, TensorShape({2, 3, 4}))},
                            {r.node()->input(0), Tensor(DT_FLOAT, TensorShape({60}))}}));
  EXPECT_EQ(out.shape(), TensorShape({2, 3, 5, 2}));
}

// --------------------------------------------------------------------- Cast

TEST(Cast, RoundTripsSmallWholeNumbersBetweenEveryPairOfTypes) {
  const DataType types[] = {DT_FLOAT, DT_DOUBLE,   DT_INT32,  DT_INT64,  DT_INT8,
                            DT_INT16, DT_UINT8,    DT_UINT16, DT_UINT32, DT_UINT64,
                            DT_BOOL,  DT_BFLOAT16, DT_HALF};
  for (DataType from : types) {
    for (DataType to : types) {
      SCOPED_TRACE(std::string(DataTypeName(from)) + " -> " + std::string(DataTypeName(to)));
      // Values every type holds exactly (bool: 0 and 1).
      std::vector<double> values = {0, 1, 1, 0};
      if (from != DT_BOOL && to != DT_BOOL) values = {0, 1, 2, 7, 100};
      Scope root = Scope::NewRootScope();
      Output x = ops::Cast(root, ops::Const(root, values), from);  // via float64
      Output y = ops::Cast(root, x, to);
      ASSERT_TRUE(root.ok()) << root.status();
      EXPECT_EQ(y.dtype(), to);
      CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor got, Evaluate(y));
      EXPECT_EQ(ToDoubles(got), values);
    }
  }
}

TEST(Cast, FloatToIntegerTruncatesAndSaturates) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  struct Case {
    DataType to;
    std::vector<double> in, want;
  };
  const Case cases[] = {
      {DT_INT32, {1.9, -1.9, 3e9, -3e9, nan}, {1, -1, 2147483647, -2147483648.0, 0}},
      {DT_UINT8, {300, -5, 7.9, 255.5}, {255, 0, 7, 255}},
      {DT_INT64, {1e19, -1e19, -0.5}, {9223372036854775807.0, -9223372036854775808.0, 0}},
      {DT_BOOL, {0, -0.0, 0.1, -3, nan}, {0, 0, 1, 1, 1}},
  };
  for (const Case& c : cases) {
    Scope root = Scope::NewRootScope();
    Output y = ops::Cast(root, ops::Const(root, c.in), c.to);
    CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor got, Evaluate(y));
    EXPECT_EQ(ToDoubles(got), c.want) << DataTypeName(c.to);
  }
}

TEST(Cast, HalfAndBfloat16RoundToNearest) {
  Scope root = Scope::NewRootScope();
  // bfloat16 keeps 7 fraction bits (a step of 2^-7 near 1): 1 + 2^-9 is a
  // quarter step and rounds down to 1, 1 + 3 * 2^-9 three quarters and
  // rounds up to 1 + 2^-7. float16 keeps 10 bits and holds both exactly.
  Output x = ops::Const(root, std::vector<float>{1.0f + 0.001953125f, 1.0f + 0.005859375f, -2.5f});
  Output bf = ops::Cast(root, ops::Cast(root, x, DT_BFLOAT16), DT_FLOAT);
  Output h = ops::Cast(root, ops::Cast(root, x, DT_HALF), DT_DOUBLE);
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor b, Evaluate(bf));
  EXPECT_EQ(ToDoubles(b), (std::vector<double>{1.0, 1.0078125, -2.5}));
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor hv, Evaluate(h));
  EXPECT_EQ(ToDoubles(hv), (std::vector<double>{1.001953125, 1.005859375, -2.5}));
}

TEST(Cast, IntegerNarrowingWrapsModulo) {
  Scope root = Scope::NewRootScope();
  Output y =
      ops::Cast(root, ops::Const(root, std::vector<int64_t>{(int64_t{1} << 32) + 5, -1}), DT_INT32);
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor got, Evaluate(y));
  EXPECT_EQ(ToDoubles(got), (std::vector<double>{5, -1}));
}

TEST(Cast, RejectsUnsupportedTargetAtBuildTime) {
  Scope root = Scope::NewRootScope();
  ops::Cast(root.WithOpName("c"), 1.0f, DT_STRING);
  EXPECT_EQ(root.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(root.status().message().rfind("c (Cast): cannot cast to string", 0), 0u)
      << root.status();
}

// --------------------------------------------------------- Fill and friends

TEST(Fill, FillsEveryDtype) {
  Scope root = Scope::NewRootScope();
  Output f = ops::Fill(root, {2, 3}, 1.5f);
  Output i = ops::Fill(root, {4}, int64_t{-7});
  Output b = ops::Fill(root, {2}, true);
  Output s = ops::Fill(root, {3}, ops::Const(root, std::string("ab")));
  Output e = ops::Fill(root, {0, 5}, 1.0);
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(f.shape().ToString(), "[2,3]");
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor fv, Evaluate(f));
  EXPECT_EQ(ToDoubles(fv), std::vector<double>(6, 1.5));
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor iv, Evaluate(i));
  EXPECT_EQ(ToDoubles(iv), std::vector<double>(4, -7));
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor bv, Evaluate(b));
  EXPECT_EQ(ToDoubles(bv), std::vector<double>(2, 1));
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor sv, Evaluate(s));
  EXPECT_EQ(sv.flat<std::string>()[2], "ab");
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor ev, Evaluate(e));
  EXPECT_EQ(ev.shape().ToString(), "[0,5]");
}

// tf.zeros_initializer and tf.ones_initializer make complex variables too:
// (0, 0) and (1, 0) in every element, complex128's 16 bytes included.
TEST(Fill, ComplexConstantsFromTheInitializers) {
  Scope root = Scope::NewRootScope();
  Output zeros64 = initializers::Zeros()(root, DT_COMPLEX64, TensorShape({3}));
  Output ones128 = initializers::Ones()(root, DT_COMPLEX128, TensorShape({2, 2}));
  ASSERT_TRUE(root.ok()) << root.status();
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor z, Evaluate(zeros64));
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor o, Evaluate(ones128));
  ASSERT_EQ(z.dtype(), DT_COMPLEX64);
  ASSERT_EQ(o.dtype(), DT_COMPLEX128);
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(z.ComplexElement(i), std::pair(0.0, 0.0)) << i;
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(o.ComplexElement(i), std::pair(1.0, 0.0)) << i;
}

// tf.compat.v1.get_variable(dtype=tf.string) starts as empty strings with
// zeros_initializer; strings have no ones.
TEST(Fill, StringZerosAreEmptyStrings) {
  Scope root = Scope::NewRootScope();
  Output zeros = initializers::Zeros()(root, DT_STRING, TensorShape({2, 3}));
  ASSERT_TRUE(root.ok()) << root.status();
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor z, Evaluate(zeros));
  ASSERT_EQ(z.dtype(), DT_STRING);
  ASSERT_EQ(z.NumElements(), 6);
  for (const std::string& s : z.flat<std::string>()) EXPECT_EQ(s, "");
  initializers::Ones()(root.WithOpName("ones"), DT_STRING, TensorShape({2}));
  EXPECT_EQ(root.status().code(), StatusCode::kInvalidArgument);
}

TEST(Fill, NegativeConstantDimsFailAtBuildTime) {
  Scope root = Scope::NewRootScope();
  Output d = ops::Const(root.WithOpName("d"), std::vector<int32_t>{2, -1});
  ops::Fill(root.WithOpName("fill"), d, 1.0f);
  EXPECT_EQ(root.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(root.status().message(),
            "fill (Fill): dims (d:0) has negative dimension -1 at index 1");
}

TEST(Fill, BadFedDimsFailAtRunTimeWithoutCrashing) {
  struct Case {
    std::vector<int64_t> dims;
    StatusCode code;
    std::string message;
  };
  const Case cases[] = {
      {{2, -1}, StatusCode::kInvalidArgument, "fill (Fill): dims: negative dimension -1 in shape"},
      {{int64_t{1} << 40, int64_t{1} << 40},
       StatusCode::kInvalidArgument,
       "fill (Fill): dims: shape's element count overflows int64"},
      {{int64_t{1} << 25, int64_t{1} << 25},
       StatusCode::kResourceExhausted,
       "fill (Fill): tensor of float32[33554432,33554432] is too large to allocate"},
  };
  for (const Case& c : cases) {
    Scope root = Scope::NewRootScope();
    Output d = ops::Placeholder(root.WithOpName("d"), DT_INT64, {.shape = {-1}});
    Output f = ops::Fill(root.WithOpName("fill"), d, 0.0f);
    Status s = Evaluate(f, {{d, Tensor::FromVector<int64_t>(c.dims)}}).status();
    EXPECT_EQ(s.code(), c.code) << s;
    EXPECT_EQ(s.message(), c.message);
  }
}

TEST(ZerosAndOnesLike, TakeDtypeAndShapeOfTheirInput) {
  for (DataType dtype :
       {DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64, DT_BOOL, DT_BFLOAT16, DT_HALF, DT_UINT8}) {
    Scope root = Scope::NewRootScope();
    Output x = ops::Placeholder(root, dtype, {.shape = {2, -1}});
    Output z = ops::ZerosLike(root, x);
    Output o = ops::OnesLike(root, x);
    ASSERT_TRUE(root.ok()) << root.status();
    EXPECT_EQ(o.dtype(), dtype);
    EXPECT_EQ(o.shape().ToString(), "[2,?]");
    Tensor in(dtype, {2, 3});
    CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor zv, Evaluate(z, {{x, in}}));
    CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor ov, Evaluate(o, {{x, in}}));
    EXPECT_EQ(ToDoubles(zv), std::vector<double>(6, 0)) << DataTypeName(dtype);
    EXPECT_EQ(ToDoubles(ov), std::vector<double>(6, 1)) << DataTypeName(dtype);
  }
}

TEST(Shape, GivesDimensionsAsInt32OrInt64) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_FLOAT, {.shape = {-1, 3, 4}});
  Output s32 = ops::Shape(root, x);
  Output s64 = ops::Shape(root, x, DT_INT64);
  Output unknown = ops::Shape(root, ops::Placeholder(root, DT_FLOAT));
  ASSERT_TRUE(root.ok());
  EXPECT_EQ(s32.shape().ToString(), "[3]");
  EXPECT_EQ(s64.dtype(), DT_INT64);
  EXPECT_EQ(unknown.shape().ToString(), "[?]");
  Tensor in(DT_FLOAT, {5, 3, 4});
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor v32, Evaluate(s32, {{x, in}}));
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor v64, Evaluate(s64, {{x, in}}));
  EXPECT_EQ(ToDoubles(v32), (std::vector<double>{5, 3, 4}));
  EXPECT_EQ(ToDoubles(v64), (std::vector<double>{5, 3, 4}));
}

// ----------------------------------------------------------------- registry

TEST(StandardOps, EveryOpHasAShapeFunctionAndAKernel) {
  const OpRegistry& registry = StandardOps();
  std::vector<std::string> types = registry.ListTypes();
  EXPECT_GE(types.size(), 60u);
  for (const std::string& type : types) {
    const OpDef* def = registry.Find(type);
    ASSERT_NE(def, nullptr);
    EXPECT_TRUE(def->shape_fn) << type;
    EXPECT_TRUE(def->kernel_factory) << type;
  }
  for (const char* type : {"RandomUniform", "RandomStandardNormal", "TruncatedNormal"}) {
    EXPECT_TRUE(registry.Find(type)->stateful) << type;
  }
  EXPECT_FALSE(registry.Find("MatMul")->stateful);
}

TEST(StandardOps, RegisteringTwiceIsAlreadyExists) {
  OpRegistry registry;
  CKFLOW_ASSERT_OK(RegisterStandardOps(registry));
  Status again = RegisterArrayOps(registry);
  EXPECT_EQ(again.code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(again.message(), "op 'Const' is already registered");
}

}  // namespace
}  // namespace ckflow
