// Symbolic gradients checked against central finite differences in double
// precision, table-driven over ops x shapes (broadcasting included) and over
// how much of the shapes is known when the graph is built; plus the rules of
// AddGradients itself: no path, blocked paths, missing gradients, summed
// consumers, names, variables, a two-layer MLP.
#include "ops/gradients.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"
#include "ops/normalization_ops.h"
#include "ops/variable_ops.h"
#include "ops/variables.h"
#include "runtime/session.h"
#include "tests/ops/gradient_check.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

using testing::ExpectGradientsMatchFiniteDifferences;
using testing::FeedsOf;
using ::testing::HasSubstr;
using testing::NewSession;
using testing::RandomDoubles;

// ------------------------------------------------------------ the harness

// How the input placeholders declare their shapes: the gradient functions
// take constant shortcuts for static shapes and runtime ops otherwise.
enum class Known { kShapes, kRanks, kNothing };

std::string KnownName(Known k) {
  switch (k) {
    case Known::kShapes:
      return "StaticShapes";
    case Known::kRanks:
      return "UnknownDims";
    case Known::kNothing:
      return "UnknownRanks";
  }
  return "?";
}

PartialShape Declared(const std::vector<int64_t>& dims, Known known) {
  switch (known) {
    case Known::kShapes:
      return PartialShape(dims);
    case Known::kRanks:
      return PartialShape(std::vector<int64_t>(dims.size(), -1));
    case Known::kNothing:
      return PartialShape::Unknown();
  }
  return PartialShape::Unknown();
}

using Inputs = std::vector<Output>;
using BuildFn = std::function<Output(const Scope&, const Inputs&)>;

struct GradCase {
  std::string name;
  std::vector<std::vector<int64_t>> shapes;  // one per input
  BuildFn f;
  double lo = -2;  // inputs are drawn uniformly from [lo, hi]
  double hi = 2;
  double step = 1e-6;
  double tolerance = 1e-6;  // relative to max(1, |numeric|)
};

// gtest prints parameters in failure messages; a case is its name.
void PrintTo(const GradCase& c, std::ostream* os) { *os << c.name; }

class FiniteDifferenceTest : public ::testing::TestWithParam<std::tuple<GradCase, Known>> {};

TEST_P(FiniteDifferenceTest, GradientMatchesCentralDifferences) {
  const auto& [c, known] = GetParam();
  Scope root = Scope::NewRootScope();
  std::mt19937 rng(1234);
  Inputs xs;
  std::vector<Tensor> values;
  for (size_t i = 0; i < c.shapes.size(); ++i) {
    xs.push_back(ops::Placeholder(root.WithOpName("x" + std::to_string(i)), DT_DOUBLE,
                                  {.shape = Declared(c.shapes[i], known)}));
    values.push_back(RandomDoubles(c.shapes[i], c.lo, c.hi, rng));
  }
  Output y = c.f(root, xs);
  ExpectGradientsMatchFiniteDifferences(root, y, xs, values, c.step, c.tolerance, rng);
}

// ------------------------------------------------------------ the table

using Dims = std::vector<int64_t>;

// Shape pairs for binary broadcasting ops.
const std::vector<std::pair<std::string, std::vector<Dims>>> kBroadcastShapes = {
    {"Same", {{2, 3}, {2, 3}}},     {"Row", {{2, 3}, {3}}},        {"RowFirst", {{3}, {2, 3}}},
    {"Outer", {{2, 1}, {1, 3}}},    {"ScalarFirst", {{}, {2, 3}}}, {"ScalarSecond", {{2, 3}, {}}},
    {"Rank3", {{2, 3, 4}, {3, 1}}}, {"Scalars", {{}, {}}},
};

std::vector<GradCase> BinaryCases() {
  struct Binary {
    std::string name;
    Output (*fn)(const Scope&, ops::Input, ops::Input);
    double lo, hi;
  };
  const Binary binaries[] = {
      {"Add", ops::Add, -2, 2},         {"Sub", ops::Sub, -2, 2},
      {"Mul", ops::Mul, -2, 2},         {"Div", ops::Div, 0.5, 2},  // away from division by 0
      {"Maximum", ops::Maximum, -2, 2}, {"Minimum", ops::Minimum, -2, 2},
      {"Pow", ops::Pow, 0.5, 2},        {"SquaredDifference", ops::SquaredDifference, -2, 2},
  };
  std::vector<GradCase> cases;
  for (const Binary& b : binaries) {
    for (const auto& [shape_name, shapes] : kBroadcastShapes) {
      auto fn = b.fn;
      cases.push_back({.name = b.name + shape_name,
                       .shapes = shapes,
                       .f = [fn](const Scope& s, const Inputs& x) { return fn(s, x[0], x[1]); },
                       .lo = b.lo,
                       .hi = b.hi});
    }
  }
  return cases;
}

std::vector<GradCase> UnaryCases() {
  struct Unary {
    std::string name;
    Output (*fn)(const Scope&, ops::Input);
    double lo, hi;
  };
  const Unary unaries[] = {
      {"Neg", ops::Neg, -2, 2},           {"Square", ops::Square, -2, 2},
      {"Sqrt", ops::Sqrt, 0.5, 2},        {"Rsqrt", ops::Rsqrt, 0.5, 2},
      {"Exp", ops::Exp, -2, 2},           {"Log", ops::Log, 0.5, 2},
      {"Log1p", ops::Log1p, -0.5, 2},     {"Reciprocal", ops::Reciprocal, 0.5, 2},
      {"Abs", ops::Abs, -2, 2},           {"Sign", ops::Sign, -2, 2},
      {"Identity", ops::Identity, -2, 2},
  };
  std::vector<GradCase> cases;
  for (const Unary& u : unaries) {
    auto fn = u.fn;
    cases.push_back({.name = u.name,
                     .shapes = {{2, 3}},
                     .f = [fn](const Scope& s, const Inputs& x) { return fn(s, x[0]); },
                     .lo = u.lo,
                     .hi = u.hi});
  }
  return cases;
}

std::vector<GradCase> ReductionCases() {
  struct Reduction {
    std::string name;
    Output (*fn)(const Scope&, ops::Input, ops::Input, const ops::ReduceAttrs&);
    Output (*all)(const Scope&, ops::Input);
  };
  const Reduction reductions[] = {
      {"Sum", ops::Sum, ops::Sum},
      {"Mean", ops::Mean, ops::Mean},
      {"Max", ops::Max, ops::Max},
      {"Min", ops::Min, ops::Min},
  };
  const std::pair<std::string, std::vector<int32_t>> axes_cases[] = {
      {"Axis0", {0}},
      {"Axis1", {1}},
      {"AxisMinus1", {-1}},
      {"Axes0And2", {0, 2}},
      {"AxesMinus3AndMinus2", {-3, -2}},
      {"NoAxes", {}},
      {"AllAxes", {0, 1, 2}},
  };
  std::vector<GradCase> cases;
  for (const Reduction& r : reductions) {
    for (const auto& [axes_name, axes] : axes_cases) {
      for (bool keep_dims : {false, true}) {
        auto fn = r.fn;
        std::vector<int32_t> a = axes;
        cases.push_back({.name = r.name + axes_name + (keep_dims ? "KeepDims" : ""),
                         .shapes = {{2, 3, 4}},
                         .f = [fn, a, keep_dims](const Scope& s, const Inputs& x) {
                           return fn(s, x[0], Tensor::FromVector(a), {.keep_dims = keep_dims});
                         }});
      }
    }
    auto all = r.all;
    cases.push_back({.name = r.name + "Everything",
                     .shapes = {{2, 3}},
                     .f = [all](const Scope& s, const Inputs& x) { return all(s, x[0]); }});
    // A scalar axis, and a reduction of a vector to a scalar.
    auto fn = r.fn;
    cases.push_back({.name = r.name + "ScalarAxis",
                     .shapes = {{2, 3}},
                     .f = [fn](const Scope& s, const Inputs& x) { return fn(s, x[0], 1, {}); }});
    cases.push_back({.name = r.name + "Vector",
                     .shapes = {{5}},
                     .f = [fn](const Scope& s, const Inputs& x) { return fn(s, x[0], 0, {}); }});
  }
  return cases;
}

// The sequence-model ops: dimension shuffles, batched products, GELU.
std::vector<GradCase> SequenceCases() {
  std::vector<GradCase> cases;
  const std::pair<std::string, std::vector<int64_t>> perms[] = {
      {"Swap", {1, 0, 2}}, {"Rotate", {2, 0, 1}}, {"Reverse", {2, 1, 0}}, {"Same", {0, 1, 2}}};
  for (const auto& [name, perm] : perms) {
    cases.push_back({.name = "Transpose" + name,
                     .shapes = {{2, 3, 4}},
                     .f = [perm](const Scope& s, const Inputs& x) {
                       return ops::Transpose(s, x[0], ops::Const<int64_t>(s, perm));
                     }});
  }
  // perm computed at run time: the gradient inverts it with InvertPermutation.
  cases.push_back({.name = "TransposeRuntimePerm",
                   .shapes = {{2, 3, 4}},
                   .f = [](const Scope& s, const Inputs& x) {
                     Output perm = ops::Reshape(s, ops::Const<int32_t>(s, {1, 2, 0}, {3, 1}), {-1});
                     return ops::Transpose(s, x[0], perm);
                   }});
  struct Product {
    std::string name;
    std::vector<int64_t> x, y;
    bool ax, ay;
  };
  const Product products[] = {
      {"Plain", {2, 3, 4}, {2, 4, 5}, false, false},
      {"AdjX", {2, 4, 3}, {2, 4, 5}, true, false},
      {"AdjY", {2, 3, 4}, {2, 5, 4}, false, true},
      {"AdjBoth", {2, 4, 3}, {2, 5, 4}, true, true},
      {"BroadcastY", {2, 2, 3, 4}, {4, 5}, false, false},
      {"BroadcastBoth", {2, 1, 3, 4}, {1, 3, 5, 4}, false, true},
  };
  for (const Product& p : products) {
    const bool ax = p.ax, ay = p.ay;
    cases.push_back({.name = "BatchMatMul" + p.name,
                     .shapes = {p.x, p.y},
                     .f = [ax, ay](const Scope& s, const Inputs& x) {
                       return ops::BatchMatMul(s, x[0], x[1], {.adj_x = ax, .adj_y = ay});
                     }});
  }
  cases.push_back(
      {.name = "ExpandDims", .shapes = {{2, 3}}, .f = [](const Scope& s, const Inputs& x) {
         return ops::ExpandDims(s, x[0], 1);
       }});
  cases.push_back(
      {.name = "Squeeze", .shapes = {{2, 1, 3, 1}}, .f = [](const Scope& s, const Inputs& x) {
         return ops::Squeeze(s, x[0], {1});
       }});
  cases.push_back({.name = "SqueezeAll",
                   .shapes = {{2, 1, 3, 1}},
                   .f = [](const Scope& s, const Inputs& x) { return ops::Squeeze(s, x[0]); }});
  cases.push_back(
      {.name = "GatherAxis0", .shapes = {{5, 3}}, .f = [](const Scope& s, const Inputs& x) {
         return ops::Gather(s, x[0], ops::Const<int32_t>(s, {4, 0, 4, 2}, {2, 2}));
       }});
  cases.push_back(
      {.name = "GatherAxis1", .shapes = {{2, 5, 3}}, .f = [](const Scope& s, const Inputs& x) {
         // Along another axis the gradient needs params' rank (a Reshape
         // gives it when the placeholder does not).
         return ops::Gather(s, ops::Reshape(s, x[0], {2, 5, 3}), ops::Const<int64_t>(s, {4, 0, 4}),
                            1);
       }});
  cases.push_back(
      {.name = "UnsortedSegmentSum", .shapes = {{4, 3}}, .f = [](const Scope& s, const Inputs& x) {
         return ops::UnsortedSegmentSum(s, x[0], ops::Const<int32_t>(s, {2, -1, 0, 2}), 3);
       }});
  cases.push_back({.name = "Erf", .shapes = {{3, 4}}, .f = [](const Scope& s, const Inputs& x) {
                     return ops::Erf(s, x[0]);
                   }});
  cases.push_back({.name = "Erfc", .shapes = {{3, 4}}, .f = [](const Scope& s, const Inputs& x) {
                     return ops::Erfc(s, x[0]);
                   }});
  cases.push_back({.name = "Gelu", .shapes = {{3, 4}}, .f = [](const Scope& s, const Inputs& x) {
                     return ops::Gelu(s, x[0]);
                   }});
  // The row's statistics move with every x: the gradient couples the row.
  cases.push_back(
      {.name = "LayerNorm", .shapes = {{3, 5}}, .f = [](const Scope& s, const Inputs& x) {
         return ops::Mul(s, ops::LayerNorm(s, x[0], 1e-3f),
                         ops::Const<double>(s, {1, -2, 3, 0.5, 2}));
       }});
  cases.push_back({.name = "GeluApproximate",
                   .shapes = {{3, 4}},
                   .f = [](const Scope& s, const Inputs& x) { return ops::Gelu(s, x[0], true); }});
  cases.push_back(
      {.name = "MatrixBandPart", .shapes = {{2, 4, 5}}, .f = [](const Scope& s, const Inputs& x) {
         return ops::MatrixBandPart(s, x[0], ops::Const<int64_t>(s, 1), ops::Const<int64_t>(s, 2));
       }});
  cases.push_back(
      {.name = "SplitSecondPiece", .shapes = {{2, 6}}, .f = [](const Scope& s, const Inputs& x) {
         return ops::Split(s, 1, x[0], 3)[1];
       }});
  cases.push_back(
      {.name = "SplitVSumOfPieces", .shapes = {{5, 2}}, .f = [](const Scope& s, const Inputs& x) {
         std::vector<Output> p = ops::SplitV(s, x[0], ops::Const<int32_t>(s, {2, -1}), 0, 2);
         return ops::Add(s, ops::Sum(s, p[0]), ops::Sum(s, ops::Square(s, p[1])));
       }});
  cases.push_back({.name = "Tile", .shapes = {{2, 1, 3}}, .f = [](const Scope& s, const Inputs& x) {
                     return ops::Tile(s, x[0], ops::Const<int32_t>(s, {2, 3, 1}));
                   }});
  cases.push_back(
      {.name = "CausalBand", .shapes = {{4, 4}}, .f = [](const Scope& s, const Inputs& x) {
         return ops::MatrixBandPart(s, x[0], ops::Const<int64_t>(s, -1), ops::Const<int64_t>(s, 0));
       }});
  cases.push_back(
      {.name = "StridedSlice", .shapes = {{4, 5, 3}}, .f = [](const Scope& s, const Inputs& x) {
         // x[::-2, 1:, newaxis, 2]
         return ops::StridedSlice(
             s, x[0], ops::Const<int32_t>(s, {0, 1, 0, 2}), ops::Const<int32_t>(s, {0, 0, 0, 3}),
             ops::Const<int32_t>(s, {-2, 1, 1, 1}),
             {.begin_mask = 1, .end_mask = 3, .new_axis_mask = 4, .shrink_axis_mask = 8});
       }});
  // Rows dealt to three partitions (one left empty), each weighted
  // differently, and stitched back in another order.
  cases.push_back(
      {.name = "DynamicPartition", .shapes = {{5, 2}}, .f = [](const Scope& s, const Inputs& x) {
         std::vector<Output> p =
             ops::DynamicPartition(s, x[0], ops::Const<int32_t>(s, {2, 0, 2, 0, 2}), 4);
         return ops::AddN(s, {ops::Sum(s, ops::Square(s, p[0])), ops::Sum(s, p[2]),
                              ops::Sum(s, ops::Mul(s, p[2], p[2]))});
       }});
  cases.push_back({.name = "DynamicStitch",
                   .shapes = {{2, 3}, {3, 3}},
                   .f = [](const Scope& s, const Inputs& x) {
                     // Position 3 is nobody's: its gradient goes nowhere.
                     return ops::DynamicStitch(
                         s, {ops::Const<int32_t>(s, {4, 1}), ops::Const<int32_t>(s, {0, 5, 2})},
                         {x[0], x[1]});
                   }});
  return cases;
}

std::vector<GradCase> OtherCases() {
  std::vector<GradCase> cases;
  cases.push_back({.name = "AddN",
                   .shapes = {{2, 3}, {2, 3}, {2, 3}},
                   .f = [](const Scope& s, const Inputs& x) { return ops::AddN(s, x); }});
  cases.push_back(
      {.name = "AddNOneInputTwice", .shapes = {{2, 3}}, .f = [](const Scope& s, const Inputs& x) {
         return ops::AddN(s, {x[0], ops::Square(s, x[0])});
       }});
  cases.push_back({.name = "Reshape", .shapes = {{2, 3}}, .f = [](const Scope& s, const Inputs& x) {
                     return ops::Square(s, ops::Reshape(s, x[0], {3, 2}));
                   }});
  cases.push_back(
      {.name = "ReshapeFlat", .shapes = {{2, 3}}, .f = [](const Scope& s, const Inputs& x) {
         return ops::Mul(s, ops::Reshape(s, x[0], {-1}), ops::Reshape(s, x[0], {-1}));
       }});
  // Through float32 and back: the float rounding limits the accuracy, so a
  // larger step (exact for this quadratic) and tolerance.
  cases.push_back({.name = "CastThroughFloat",
                   .shapes = {{2, 3}},
                   .f =
                       [](const Scope& s, const Inputs& x) {
                         Output f32 = ops::Cast(s, x[0], DT_FLOAT);
                         return ops::Mul(s, ops::Cast(s, ops::Square(s, f32), DT_DOUBLE), x[0]);
                       },
                   .step = 1e-2,
                   .tolerance = 1e-4});
  cases.push_back({.name = "Fill", .shapes = {{}}, .f = [](const Scope& s, const Inputs& x) {
                     return ops::Square(s, ops::Fill(s, {2, 3}, x[0]));
                   }});
  cases.push_back(
      {.name = "Select", .shapes = {{2, 3}, {3}}, .f = [](const Scope& s, const Inputs& x) {
         Output condition = ops::Const<bool>(s, {true, false, true, false, false, true}, {2, 3});
         return ops::Select(s, condition, ops::Square(s, x[0]), x[1]);
       }});
  cases.push_back(
      {.name = "BroadcastTo", .shapes = {{3, 1}}, .f = [](const Scope& s, const Inputs& x) {
         return ops::Square(s, ops::BroadcastTo(s, x[0], {2, 3, 4}));
       }});
  cases.push_back({.name = "SumToShapeOf",
                   .shapes = {{2, 3, 4}, {3, 1}},
                   .f = [](const Scope& s, const Inputs& x) {
                     return ops::Mul(s, ops::SumToShapeOf(s, ops::Square(s, x[0]), x[1]), x[1]);
                   }});
  cases.push_back(
      {.name = "Composite", .shapes = {{2, 3}, {3}}, .f = [](const Scope& s, const Inputs& x) {
         Output h = ops::Exp(s, ops::Mul(s, ops::Sub(s, x[0], x[1]), 0.5));
         return ops::Mean(s, ops::Div(s, h, ops::Add(s, ops::Square(s, x[1]), 1.0)), {0});
       }});
  return cases;
}

// The loss's gradient with respect to logits, softmax - labels, holds for
// labels whose rows sum to 1 (as in TensorFlow), so the cases make them so.
Output ProbabilityRows(const Scope& s, Output x) { return ops::Softmax(s, x); }

std::vector<GradCase> NnCases() {
  std::vector<GradCase> cases;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      cases.push_back(
          {.name = std::string("MatMul") + (ta ? "TransposeA" : "") + (tb ? "TransposeB" : ""),
           .shapes = {ta ? Dims{3, 2} : Dims{2, 3}, tb ? Dims{4, 3} : Dims{3, 4}},
           .f = [ta, tb](const Scope& s, const Inputs& x) {
             return ops::MatMul(s, x[0], x[1], {.transpose_a = ta, .transpose_b = tb});
           }});
    }
  }
  struct Unary {
    std::string name;
    Output (*fn)(const Scope&, ops::Input);
    Dims shape;
  };
  const Unary unaries[] = {
      {"Relu", ops::Relu, {2, 3}},
      {"Sigmoid", ops::Sigmoid, {2, 3}},
      {"Tanh", ops::Tanh, {2, 3}},
      {"Softmax", ops::Softmax, {2, 3}},
      {"SoftmaxRank1", ops::Softmax, {4}},
      {"SoftmaxRank3", ops::Softmax, {2, 1, 3}},
      {"LogSoftmax", ops::LogSoftmax, {2, 3}},
  };
  for (const Unary& u : unaries) {
    auto fn = u.fn;
    cases.push_back({.name = u.name,
                     .shapes = {u.shape},
                     .f = [fn](const Scope& s, const Inputs& x) { return fn(s, x[0]); }});
  }
  cases.push_back(
      {.name = "BiasAdd", .shapes = {{2, 3}, {3}}, .f = [](const Scope& s, const Inputs& x) {
         return ops::BiasAdd(s, x[0], x[1]);
       }});
  cases.push_back(
      {.name = "BiasAddRank3",
       .shapes = {{2, 2, 3}, {3}},
       .f = [](const Scope& s, const Inputs& x) { return ops::BiasAdd(s, x[0], x[1]); }});
  // The activation gradients are differentiable too (second order).
  cases.push_back(
      {.name = "ReluGrad", .shapes = {{2, 3}, {2, 3}}, .f = [](const Scope& s, const Inputs& x) {
         return ops::ReluGrad(s, x[0], x[1]);
       }});
  cases.push_back(
      {.name = "SigmoidGrad", .shapes = {{2, 3}, {2, 3}}, .f = [](const Scope& s, const Inputs& x) {
         return ops::SigmoidGrad(s, x[0], x[1]);
       }});
  cases.push_back(
      {.name = "TanhGrad", .shapes = {{2, 3}, {2, 3}}, .f = [](const Scope& s, const Inputs& x) {
         return ops::TanhGrad(s, x[0], x[1]);
       }});
  cases.push_back({.name = "BiasAddGrad",
                   .shapes = {{2, 3}},
                   .f = [](const Scope& s, const Inputs& x) { return ops::BiasAddGrad(s, x[0]); }});
  // Cross entropies: through the loss, through the backprop output, both.
  cases.push_back(
      {.name = "SoftmaxCrossEntropyLoss",
       .shapes = {{3, 4}, {3, 4}},
       .f = [](const Scope& s, const Inputs& x) {
         return ops::SoftmaxCrossEntropyWithLogits(s, x[0], ProbabilityRows(s, x[1])).loss;
       }});
  cases.push_back({.name = "SoftmaxCrossEntropyBackprop",
                   .shapes = {{3, 4}, {3, 4}},
                   .f = [](const Scope& s, const Inputs& x) {
                     return ops::SoftmaxCrossEntropyWithLogits(s, x[0], x[1]).backprop;
                   }});
  cases.push_back({.name = "SoftmaxCrossEntropyBoth",
                   .shapes = {{3, 4}, {3, 4}},
                   .f = [](const Scope& s, const Inputs& x) {
                     ops::CrossEntropy xent =
                         ops::SoftmaxCrossEntropyWithLogits(s, x[0], ProbabilityRows(s, x[1]));
                     return ops::Add(s, ops::Sum(s, xent.backprop, 1), xent.loss);
                   }});
  cases.push_back({.name = "SparseSoftmaxCrossEntropy",
                   .shapes = {{3, 4}},
                   .f = [](const Scope& s, const Inputs& x) {
                     ops::CrossEntropy xent = ops::SparseSoftmaxCrossEntropyWithLogits(
                         s, x[0], ops::Const<int32_t>(s, {2, 0, 3}, {3}));
                     return ops::Add(s, ops::Sum(s, ops::Square(s, xent.backprop), 1), xent.loss);
                   }});
  cases.push_back({.name = "SigmoidCrossEntropy",
                   .shapes = {{2, 3}, {2, 3}},
                   .f = [](const Scope& s, const Inputs& x) {
                     return ops::SigmoidCrossEntropyWithLogits(s, x[0], x[1]);
                   }});
  return cases;
}

// An empty float64 vector: the mean and variance training ignores.
Output Empty(const Scope& s) { return ops::Const(s, Tensor(DT_DOUBLE, TensorShape({0}))); }

// The ops vision models add: activations (inputs kept off their kinks
// with probability 1), their gradient ops, slicing and joining, global
// average pooling, batch normalization and dropout with a fixed draw.
std::vector<GradCase> VisionCases() {
  std::vector<GradCase> cases;
  struct Activation {
    std::string name;
    std::function<Output(const Scope&, Output)> fn;
    double lo, hi;
  };
  const Activation activations[] = {
      {"Relu6", [](const Scope& s, Output x) { return ops::Relu6(s, x); }, -1, 7},
      {"LeakyRelu", [](const Scope& s, Output x) { return ops::LeakyRelu(s, x); }, -2, 2},
      {"LeakyReluAlpha", [](const Scope& s, Output x) { return ops::LeakyRelu(s, x, 0.7f); }, -2,
       2},
      {"Elu", [](const Scope& s, Output x) { return ops::Elu(s, x); }, -2, 2},
      {"Selu", [](const Scope& s, Output x) { return ops::Selu(s, x); }, -2, 2},
      {"Softplus", [](const Scope& s, Output x) { return ops::Softplus(s, x); }, -3, 3},
      {"SoftplusFarOut", [](const Scope& s, Output x) { return ops::Softplus(s, x); }, -40, 40},
  };
  for (const Activation& a : activations) {
    auto fn = a.fn;
    cases.push_back({.name = a.name,
                     .shapes = {{2, 3}},
                     .f = [fn](const Scope& s, const Inputs& x) { return fn(s, x[0]); },
                     .lo = a.lo,
                     .hi = a.hi});
  }
  // Second order: the gradient ops, on the activation's input or output.
  const std::pair<std::string, std::function<Output(const Scope&, const Inputs&)>> grads[] = {
      {"Relu6Grad", [](const Scope& s, const Inputs& x) { return ops::Relu6Grad(s, x[0], x[1]); }},
      {"LeakyReluGrad",
       [](const Scope& s, const Inputs& x) { return ops::LeakyReluGrad(s, x[0], x[1], 0.3f); }},
      {"EluGrad",
       [](const Scope& s, const Inputs& x) { return ops::EluGrad(s, x[0], ops::Elu(s, x[1])); }},
      {"SeluGrad",
       [](const Scope& s, const Inputs& x) { return ops::SeluGrad(s, x[0], ops::Selu(s, x[1])); }},
      {"SoftplusGrad",
       [](const Scope& s, const Inputs& x) { return ops::SoftplusGrad(s, x[0], x[1]); }},
      {"GeluGrad", [](const Scope& s, const Inputs& x) { return ops::GeluGrad(s, x[0], x[1]); }},
  };
  for (const auto& [name, fn] : grads) {
    cases.push_back({.name = name, .shapes = {{2, 3}, {2, 3}}, .f = fn});
  }
  cases.push_back(
      {.name = "Slice", .shapes = {{3, 4, 2}}, .f = [](const Scope& s, const Inputs& x) {
         return ops::Square(s, ops::Slice(s, x[0], {1, 0, 1}, {2, -1, 1}));
       }});
  cases.push_back(
      {.name = "SliceInt64", .shapes = {{4, 3}}, .f = [](const Scope& s, const Inputs& x) {
         return ops::Square(s, ops::Slice(s, x[0], ops::Const<int64_t>(s, {1, 1}),
                                          ops::Const<int64_t>(s, {2, 2})));
       }});
  cases.push_back(
      {.name = "Pad", .shapes = {{2, 3, 3, 2}}, .f = [](const Scope& s, const Inputs& x) {
         Output paddings = ops::Const<int32_t>(s, {0, 0, 1, 2, 2, 1, 0, 0}, {4, 2});
         return ops::Square(s, ops::Pad(s, x[0], paddings));
       }});
  cases.push_back({.name = "PadV2", .shapes = {{3, 2}}, .f = [](const Scope& s, const Inputs& x) {
                     Output paddings = ops::Const<int64_t>(s, {1, 0, 0, 2}, {2, 2});
                     return ops::Mul(s, ops::PadV2(s, x[0], paddings, 1.5),
                                     ops::PadV2(s, x[0], paddings, 1.5));
                   }});
  cases.push_back({.name = "Concat",
                   .shapes = {{2, 3}, {2, 1}, {2, 2}},
                   .f = [](const Scope& s, const Inputs& x) {
                     return ops::Square(s, ops::Concat(s, {x[0], x[1], x[2]}, 1));
                   }});
  cases.push_back(
      {.name = "ConcatNegativeAxis",
       .shapes = {{1, 2, 3}, {2, 2, 3}},
       .f = [](const Scope& s, const Inputs& x) {
         return ops::Square(s, ops::Concat(s, {x[0], x[1]}, ops::Const<int64_t>(s, -3)));
       }});
  cases.push_back(
      {.name = "ConcatOneValueTwice", .shapes = {{2, 2}}, .f = [](const Scope& s, const Inputs& x) {
         return ops::Concat(s, {x[0], ops::Square(s, x[0])}, 0);
       }});
  cases.push_back({.name = "GlobalAveragePool",
                   .shapes = {{2, 3, 3, 4}},
                   .f = [](const Scope& s, const Inputs& x) {
                     return ops::Mean(s, ops::Square(s, x[0]), {1, 2});
                   }});
  cases.push_back({.name = "GlobalAveragePoolKeepDims",
                   .shapes = {{2, 3, 3, 4}},
                   .f = [](const Scope& s, const Inputs& x) {
                     return ops::Mean(s, ops::Square(s, x[0]), {1, 2}, {.keep_dims = true});
                   }});
  // Batch normalization with respect to x, scale and offset. Training
  // normalizes with the batch's statistics (which depend on x); inference
  // with given ones.
  auto constant = [](const Scope& s, std::vector<double> v) { return ops::Const<double>(s, v); };
  cases.push_back(
      {.name = "FusedBatchNormTraining",
       .shapes = {{2, 3, 3, 4}, {4}, {4}},
       .f = [](const Scope& s, const Inputs& x) {
         return ops::FusedBatchNorm(s, x[0], x[1], x[2], Empty(s), Empty(s), {.epsilon = 1e-3f}).y;
       }});
  cases.push_back({.name = "FusedBatchNormTrainingAveraged",
                   .shapes = {{2, 2, 3, 3}, {3}, {3}},
                   .f = [constant](const Scope& s, const Inputs& x) {
                     return ops::FusedBatchNorm(s, x[0], x[1], x[2], constant(s, {0.5, 1, 2}),
                                                constant(s, {1, 2, 3}),
                                                {.exponential_avg_factor = 0.01f})
                         .y;
                   }});
  cases.push_back({.name = "FusedBatchNormInference",
                   .shapes = {{2, 2, 3, 3}, {3}, {3}},
                   .f = [constant](const Scope& s, const Inputs& x) {
                     return ops::FusedBatchNorm(s, x[0], x[1], x[2], constant(s, {0.5, -1, 0}),
                                                constant(s, {0.5, 2, 3}), {.is_training = false})
                         .y;
                   }});
  cases.push_back({.name = "DropoutWithFixedDraw",
                   .shapes = {{2, 3}},
                   .f = [](const Scope& s, const Inputs& x) {
                     Output uniform = ops::Const<double>(s, {0.1, 0.7, 0.4, 0.2, 0.9, 0.5}, {2, 3});
                     return ops::Square(s, ops::DropoutWithUniform(s, x[0], 0.45, uniform));
                   }});
  return cases;
}

std::string CaseName(const ::testing::TestParamInfo<std::tuple<GradCase, Known>>& info) {
  return std::get<0>(info.param).name + "_" + KnownName(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Binary, FiniteDifferenceTest,
                         ::testing::Combine(::testing::ValuesIn(BinaryCases()),
                                            ::testing::Values(Known::kShapes, Known::kRanks,
                                                              Known::kNothing)),
                         CaseName);
INSTANTIATE_TEST_SUITE_P(Unary, FiniteDifferenceTest,
                         ::testing::Combine(::testing::ValuesIn(UnaryCases()),
                                            ::testing::Values(Known::kShapes, Known::kNothing)),
                         CaseName);
INSTANTIATE_TEST_SUITE_P(Reduction, FiniteDifferenceTest,
                         ::testing::Combine(::testing::ValuesIn(ReductionCases()),
                                            ::testing::Values(Known::kShapes, Known::kRanks,
                                                              Known::kNothing)),
                         CaseName);
INSTANTIATE_TEST_SUITE_P(Nn, FiniteDifferenceTest,
                         ::testing::Combine(::testing::ValuesIn(NnCases()),
                                            ::testing::Values(Known::kShapes, Known::kRanks,
                                                              Known::kNothing)),
                         CaseName);
INSTANTIATE_TEST_SUITE_P(Vision, FiniteDifferenceTest,
                         ::testing::Combine(::testing::ValuesIn(VisionCases()),
                                            ::testing::Values(Known::kShapes, Known::kRanks,
                                                              Known::kNothing)),
                         CaseName);
INSTANTIATE_TEST_SUITE_P(Sequence, FiniteDifferenceTest,
                         ::testing::Combine(::testing::ValuesIn(SequenceCases()),
                                            ::testing::Values(Known::kShapes, Known::kRanks,
                                                              Known::kNothing)),
                         CaseName);
INSTANTIATE_TEST_SUITE_P(Other, FiniteDifferenceTest,
                         ::testing::Combine(::testing::ValuesIn(OtherCases()),
                                            ::testing::Values(Known::kShapes, Known::kRanks,
                                                              Known::kNothing)),
                         CaseName);

// ------------------------------------------------------------ the rules

std::vector<double> Values(const Tensor& t) {
  std::vector<double> out;
  for (int64_t i = 0; i < t.NumElements(); ++i) out.push_back(t.ElementAsDouble(i));
  return out;
}

class AddGradientsTest : public ::testing::Test {
 protected:
  Output Vector(const std::string& name, int64_t n) {
    return ops::Placeholder(root_.WithOpName(name), DT_DOUBLE, {.shape = {n}});
  }
  // Runs `fetches` with a = a_value and returns their values.
  std::vector<std::vector<double>> Run(const std::vector<Output>& fetches,
                                       const std::vector<Feed>& feeds) {
    EXPECT_TRUE(root_.ok()) << root_.status();
    auto session = NewSession(root_);
    StatusOr<std::vector<Tensor>> out = session->Run(feeds, fetches);
    EXPECT_TRUE(out.ok()) << out.status();
    std::vector<std::vector<double>> values;
    if (out.ok()) {
      for (const Tensor& t : *out) values.push_back(Values(t));
    }
    return values;
  }
  // An op without a gradient: an identity no registry knows.
  Output Opaque(const Scope& scope, Output x) { return Output(scope.AddNode(opaque_, {x})); }

  Scope root_ = Scope::NewRootScope();
  OpDef opaque_{.type = "Opaque", .shape_fn = [](InferenceContext& c) {
                  c.AddOutput(c.input_types[0], c.input_shapes[0]);
                  return OkStatus();
                }};
};

TEST_F(AddGradientsTest, UnconnectedXHasNoGradient) {
  Output a = Vector("a", 2);
  Output b = Vector("b", 2);
  Output y = ops::Square(root_, a);
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Output> grads, AddGradients(root_, {y}, {a, b}));
  ASSERT_EQ(grads.size(), 2u);
  EXPECT_TRUE(grads[0].valid());
  EXPECT_FALSE(grads[1].valid());
}

TEST_F(AddGradientsTest, XComputedFromYHasNoGradient) {
  Output a = Vector("a", 2);
  Output y = ops::Square(root_, a);
  Output x = ops::Exp(root_, y);
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Output> grads, AddGradients(root_, {y}, {x}));
  EXPECT_FALSE(grads[0].valid());
}

TEST_F(AddGradientsTest, StopGradientBlocksItsPath) {
  Output a = Vector("a", 2);
  Output y =
      ops::Add(root_, ops::Square(root_, a), ops::StopGradient(root_, ops::Mul(root_, a, 3.0)));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Output> grads, AddGradients(root_, {y}, {a}));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Output> blocked,
                              AddGradients(root_, {ops::StopGradient(root_, a)}, {a}));
  EXPECT_FALSE(blocked[0].valid());
  auto out = Run({grads[0]}, {{a, Tensor::FromVector<double>({1, 2})}});
  EXPECT_EQ(out[0], (std::vector<double>{2, 4}));  // d a^2 / da only
}

TEST_F(AddGradientsTest, IntegerPathsBlock) {
  Output a = Vector("a", 2);
  Output floored = ops::Cast(root_, ops::Cast(root_, a, DT_INT32), DT_DOUBLE);
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Output> none, AddGradients(root_, {floored}, {a}));
  EXPECT_FALSE(none[0].valid());
  // Through the float factor only: d (a * int(a)) / da = int(a).
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Output> grads,
                              AddGradients(root_, {ops::Mul(root_, a, floored)}, {a}));
  auto out = Run({grads[0]}, {{a, Tensor::FromVector<double>({1.5, 2.5})}});
  EXPECT_EQ(out[0], (std::vector<double>{1, 2}));
  // An integer x has no gradient even where it feeds y.
  Output i = ops::Placeholder(root_.WithOpName("i"), DT_INT32, {.shape = {2}});
  CKFLOW_ASSERT_OK_AND_ASSIGN(
      std::vector<Output> from_int,
      AddGradients(root_, {ops::Mul(root_, a, ops::Cast(root_, i, DT_DOUBLE))}, {i}));
  EXPECT_FALSE(from_int[0].valid());
}

TEST_F(AddGradientsTest, OpWithoutGradientOnThePathFailsNamingIt) {
  Output a = Vector("a", 2);
  Output y = ops::Square(root_, Opaque(root_.WithOpName("mystery"), ops::Exp(root_, a)));
  StatusOr<std::vector<Output>> grads = AddGradients(root_, {y}, {a});
  ASSERT_FALSE(grads.ok());
  EXPECT_TRUE(IsInvalidArgument(grads.status())) << grads.status();
  EXPECT_THAT(grads.status().message(), HasSubstr("mystery (Opaque)"));
  EXPECT_THAT(grads.status().message(), HasSubstr("no gradient"));
}

TEST_F(AddGradientsTest, OpWithoutGradientOffThePathIsNoError) {
  Output a = Vector("a", 2);
  Output b = Vector("b", 2);
  Opaque(root_, a);  // consumes a, but y does not depend on it
  Output y = ops::Mul(root_, ops::Square(root_, a), Opaque(root_, b));  // b is no x
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Output> grads, AddGradients(root_, {y}, {a}));
  EXPECT_TRUE(grads[0].valid());
}

TEST_F(AddGradientsTest, GradientsOfSeveralConsumersAreSummed) {
  Output a = Vector("a", 2);
  Output y = ops::Add(root_, ops::Mul(root_, a, 3.0), ops::Exp(root_, a));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Output> grads, AddGradients(root_, {y}, {a}));
  EXPECT_EQ(grads[0].node()->type(), "AddN");
  EXPECT_EQ(grads[0].node()->name(), "gradients/a_grad/AddN");  // TensorFlow's name
  auto out = Run({grads[0]}, {{a, Tensor::FromVector<double>({0, 1})}});
  EXPECT_DOUBLE_EQ(out[0][0], 3 + 1);
  EXPECT_DOUBLE_EQ(out[0][1], 3 + std::exp(1.0));
}

TEST_F(AddGradientsTest, GradientIsOfTheSumOfYs) {
  Output a = Vector("a", 2);
  Output y1 = ops::Square(root_, a);
  Output y2 = ops::Mul(root_, a, 5.0);
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Output> grads, AddGradients(root_, {y1, y2}, {a}));
  auto out = Run({grads[0]}, {{a, Tensor::FromVector<double>({1, 2})}});
  EXPECT_EQ(out[0], (std::vector<double>{2 + 5, 4 + 5}));
}

TEST_F(AddGradientsTest, GradYsWeightEachY) {
  Output a = Vector("a", 2);
  Output y = ops::Square(root_, a);
  Output weights = ops::Const<double>(root_, {10, 100}, {2});
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Output> grads, AddGradients(root_, {y}, {a}, {weights}));
  auto out = Run({grads[0]}, {{a, Tensor::FromVector<double>({1, 2})}});
  EXPECT_EQ(out[0], (std::vector<double>{20, 400}));
}

TEST_F(AddGradientsTest, GradientOfAnXWithRespectToItselfIsOnes) {
  Output a = Vector("a", 3);
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Output> grads, AddGradients(root_, {a}, {a}));
  auto out = Run({grads[0]}, {{a, Tensor::FromVector<double>({4, 5, 6})}});
  EXPECT_EQ(out[0], (std::vector<double>{1, 1, 1}));
}

TEST_F(AddGradientsTest, XsOnOnePathBothGetTheirGradients) {
  // b = a^2, y = 3b: dy/db = 3 and dy/da = 6a (through b), as tf.gradients.
  Output a = Vector("a", 2);
  Output b = ops::Square(root_, a);
  Output y = ops::Mul(root_, b, 3.0);
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Output> grads, AddGradients(root_, {y}, {b, a}));
  auto out = Run(grads, {{a, Tensor::FromVector<double>({1, 2})}});
  EXPECT_EQ(out[0], (std::vector<double>{3, 3}));
  EXPECT_EQ(out[1], (std::vector<double>{6, 12}));
}

TEST_F(AddGradientsTest, SecondOrderGradients) {
  Output a = Vector("a", 2);
  Output y = ops::Mul(root_, ops::Square(root_, a), a);  // a^3
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Output> first, AddGradients(root_, {y}, {a}));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Output> second, AddGradients(root_, first, {a}));
  auto out = Run({first[0], second[0]}, {{a, Tensor::FromVector<double>({1, 2})}});
  EXPECT_EQ(out[0], (std::vector<double>{3, 12}));  // 3a^2
  EXPECT_EQ(out[1], (std::vector<double>{6, 12}));  // 6a
}

TEST_F(AddGradientsTest, MaxSplitsTiesEqually) {
  Output x = ops::Placeholder(root_.WithOpName("x"), DT_DOUBLE, {.shape = {2, 3}});
  Output y = ops::Max(root_, x, 1);
  Output weights = ops::Const<double>(root_, {10, 100}, {2});
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Output> grads, AddGradients(root_, {y}, {x}, {weights}));
  auto out = Run({grads[0]}, {{x, Tensor::FromVector<double>({1, 3, 3, 0, 2, -1}, {2, 3})}});
  EXPECT_EQ(out[0], (std::vector<double>{0, 5, 5, 0, 100, 0}));
}

TEST_F(AddGradientsTest, MaximumGivesATieToTheFirstInput) {
  Output a = Vector("a", 2);
  Output b = Vector("b", 2);
  Output y = ops::Maximum(root_, a, b);
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Output> grads, AddGradients(root_, {y}, {a, b}));
  auto out = Run(
      grads, {{a, Tensor::FromVector<double>({1, 1})}, {b, Tensor::FromVector<double>({1, 2})}});
  EXPECT_EQ(out[0], (std::vector<double>{1, 0}));
  EXPECT_EQ(out[1], (std::vector<double>{0, 1}));
}

TEST_F(AddGradientsTest, NamesFollowTensorFlow) {
  Output x = ops::Placeholder(root_.WithOpName("x"), DT_DOUBLE, {.shape = {2, 3}});
  Output w = ops::Placeholder(root_.WithOpName("w"), DT_DOUBLE, {.shape = {3, 4}});
  Scope dense = root_.NewSubScope("dense");
  Output y = ops::Sum(root_, ops::MatMul(dense, x, w));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Output> grads, AddGradients(root_, {y}, {w}));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Output> again, AddGradients(root_, {y}, {w}));
  EXPECT_EQ(grads[0].node()->name(), "gradients/dense/MatMul_grad/MatMul_1");
  EXPECT_EQ(again[0].node()->name(), "gradients_1/dense/MatMul_grad/MatMul_1");
  EXPECT_NE(root_.graph().FindNode("gradients/grad_ys_0"), nullptr);
  EXPECT_NE(root_.graph().FindNode("gradients/Sum_grad/BroadcastTo"), nullptr);
}

TEST_F(AddGradientsTest, ScopesStickyErrorIsReturned) {
  Output a = Vector("a", 2);
  ops::Add(root_.WithOpName("bad"), a, ops::Const<int32_t>(root_, {1, 2}, {2}));
  StatusOr<std::vector<Output>> grads = AddGradients(root_, {ops::Square(root_, a)}, {a});
  ASSERT_FALSE(grads.ok());
  EXPECT_EQ(grads.status(), root_.status());
}

TEST_F(AddGradientsTest, BadArgumentsAreInvalidArgumentsNamingThem) {
  Output a = Vector("a", 2);
  Output y = ops::Square(root_, a);
  Scope other = Scope::NewRootScope();
  Output foreign = ops::Placeholder(other.WithOpName("foreign"), DT_DOUBLE);
  Output f32 = ops::Const<float>(root_, {1, 1}, {2});
  Output wrong_shape = ops::Const<double>(root_, {1, 1, 1}, {3});
  struct Bad {
    std::string name;
    std::vector<Output> ys, xs, grad_ys;
    std::string message;
  };
  const Bad cases[] = {
      {"invalid y", {Output()}, {a}, {}, "ys[0] is invalid"},
      {"invalid x", {y}, {a, Output()}, {}, "xs[1] is invalid"},
      {"foreign x", {y}, {foreign}, {}, "xs[0] (foreign:0) is from another graph"},
      {"grad_ys count", {y}, {a}, {f32, f32}, "2 grad_ys for 1 ys"},
      {"grad_ys dtype", {y}, {a}, {f32}, "grad_ys[0]"},
      {"grad_ys shape", {y}, {a}, {wrong_shape}, "[3]"},
  };
  for (const Bad& c : cases) {
    StatusOr<std::vector<Output>> grads = AddGradients(root_, c.ys, c.xs, c.grad_ys);
    ASSERT_FALSE(grads.ok()) << c.name;
    EXPECT_TRUE(IsInvalidArgument(grads.status())) << c.name << ": " << grads.status();
    EXPECT_THAT(grads.status().message(), HasSubstr(c.message)) << c.name;
  }
}

TEST_F(AddGradientsTest, CustomRegistryIsUsed) {
  GradientRegistry registry;
  CKFLOW_ASSERT_OK(registry.Register("Opaque", StandardGradients().Find("Identity")));
  Output a = Vector("a", 2);
  Output y = Opaque(root_, a);
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Output> grads,
                              AddGradients(root_, {y}, {a}, {}, &registry));
  EXPECT_TRUE(grads[0].valid());
  StatusOr<std::vector<Output>> unknown =
      AddGradients(root_, {ops::Exp(root_, a)}, {a}, {}, &registry);
  EXPECT_TRUE(IsInvalidArgument(unknown.status())) << unknown.status();
}

TEST(GradientRegistryTest, RegisteringATypeTwiceIsAlreadyExists) {
  GradientRegistry registry;
  CKFLOW_ASSERT_OK(registry.RegisterNoGradient("Foo"));
  Status again = registry.Register("Foo", StandardGradients().Find("Identity"));
  EXPECT_TRUE(IsAlreadyExists(again)) << again;
  EXPECT_THAT(again.message(), HasSubstr("'Foo'"));
  EXPECT_TRUE(registry.Contains("Foo"));
  EXPECT_EQ(registry.Find("Foo"), nullptr);
}

TEST(GradientRegistryTest, EveryDifferentiableFoundationOpHasAGradient) {
  for (const char* type : {"Identity",
                           "Add",
                           "Sub",
                           "Mul",
                           "Div",
                           "Neg",
                           "Square",
                           "Sqrt",
                           "Exp",
                           "Log",
                           "Maximum",
                           "Minimum",
                           "MatMul",
                           "BiasAdd",
                           "Relu",
                           "Sigmoid",
                           "Tanh",
                           "Softmax",
                           "Sum",
                           "Mean",
                           "Max",
                           "Reshape",
                           "Cast",
                           "AddN",
                           "SoftmaxCrossEntropyWithLogits",
                           "SigmoidCrossEntropyWithLogits",
                           "Relu6",
                           "LeakyRelu",
                           "Elu",
                           "Selu",
                           "Softplus",
                           "Slice",
                           "Pad",
                           "PadV2",
                           "ConcatV2",
                           "FusedBatchNormV3",
                           "SelectV2",
                           "Transpose",
                           "ExpandDims",
                           "Squeeze",
                           "BatchMatMulV2",
                           "Erf",
                           "GatherV2",
                           "ResourceGather",
                           "UnsortedSegmentSum",
                           "Erfc",
                           "MatrixBandPart",
                           "Split",
                           "SplitV",
                           "Tile",
                           "DynamicPartition",
                           "DynamicStitch",
                           "StridedSlice",
                           "ReadVariableOp"}) {
    EXPECT_NE(StandardGradients().Find(type), nullptr) << type;
  }
  for (const char* type : {"StopGradient", "ZerosLike", "OnesLike", "Shape", "ConcatOffset",
                           "InvertPermutation", "Unique", "OneHot", "Range"}) {
    EXPECT_TRUE(StandardGradients().Contains(type)) << type;
    EXPECT_EQ(StandardGradients().Find(type), nullptr) << type;
  }
}

// ------------------------------------------------- the ops gradients add

TEST(GradientOpsTest, BroadcastToRepeatsAlongBroadcastDimensions) {
  Scope root = Scope::NewRootScope();
  Output b = ops::BroadcastTo(root, ops::Const<double>(root, {1, 2, 3}, {3, 1}), {2, 3, 2});
  EXPECT_EQ(b.shape(), PartialShape({2, 3, 2}));
  auto session = NewSession(root);
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, session->Run({}, {b}));
  EXPECT_EQ(out[0].shape(), TensorShape({2, 3, 2}));
  EXPECT_EQ(Values(out[0]), (std::vector<double>{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}));
}

TEST(GradientOpsTest, BroadcastToRejectsAShapeItCannotReachAtBuildTime) {
  Scope root = Scope::NewRootScope();
  ops::BroadcastTo(root.WithOpName("spread"), ops::Const<double>(root, {1, 2, 3, 4, 5, 6}, {2, 3}),
                   {3, 3});
  ASSERT_FALSE(root.ok());
  EXPECT_TRUE(IsInvalidArgument(root.status())) << root.status();
  EXPECT_THAT(root.status().message(), HasSubstr("spread (BroadcastTo)"));
  EXPECT_THAT(root.status().message(), HasSubstr("[2,3]"));
  EXPECT_THAT(root.status().message(), HasSubstr("does not broadcast to shape [3,3]"));
}

TEST(GradientOpsTest, BroadcastToRejectsAShapeItCannotReachAtRunTime) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_DOUBLE);
  Output b = ops::BroadcastTo(root.WithOpName("spread"), x, {4, 3});
  auto session = NewSession(root);
  StatusOr<std::vector<Tensor>> out =
      session->Run({{x, Tensor::FromVector<double>({1, 2, 3, 4, 5, 6}, {2, 3})}}, {b});
  ASSERT_FALSE(out.ok());
  EXPECT_TRUE(IsInvalidArgument(out.status())) << out.status();
  EXPECT_THAT(out.status().message(), HasSubstr("spread"));
  EXPECT_THAT(out.status().message(), HasSubstr("[2,3] does not broadcast to shape [4,3]"));
}

TEST(GradientOpsTest, ReducedShapeSetsTheReducedDimensionsToOne) {
  Scope root = Scope::NewRootScope();
  Output s = ops::ReducedShape(root, ops::Const<int64_t>(root, {2, 3, 4}, {3}), {0, -1});
  auto session = NewSession(root);
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, session->Run({}, {s}));
  EXPECT_EQ(Values(out[0]), (std::vector<double>{1, 3, 1}));
}

TEST(GradientOpsTest, ReducedShapeRejectsAnAxisOutOfRange) {
  Scope root = Scope::NewRootScope();
  Output s = ops::ReducedShape(root.WithOpName("kept"), ops::Const<int32_t>(root, {2, 3}, {2}), 2);
  auto session = NewSession(root);
  StatusOr<std::vector<Tensor>> out = session->Run({}, {s});
  ASSERT_FALSE(out.ok());
  EXPECT_TRUE(IsInvalidArgument(out.status())) << out.status();
  EXPECT_THAT(out.status().message(), HasSubstr("kept"));
  EXPECT_THAT(out.status().message(), HasSubstr("axis 2 is out of range for rank 2"));
}

// ------------------------------------------------------------ variables

TEST_F(AddGradientsTest, VariableGradientIsSummedOverItsReads) {
  auto v = Variable::Create(root_, "v", ops::Const<double>(root_, {1, 2}, {2}));
  auto unused = Variable::Create(root_, "unused", ops::Const<double>(root_, {1, 2}, {2}));
  ASSERT_TRUE(root_.ok()) << root_.status();
  // y = v^2 * v, through two different reads.
  Output y = ops::Mul(root_, ops::Square(root_, v->value()), v->Read(root_));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Output> grads,
                              AddGradients(root_, {y}, {v->handle(), unused->handle()}));
  ASSERT_TRUE(grads[0].valid());
  EXPECT_FALSE(grads[1].valid());
  EXPECT_EQ(grads[0].dtype(), DT_DOUBLE);
  auto session = NewSession(root_);
  CKFLOW_ASSERT_OK(session->Run({}, {}, {GlobalVariablesInitializer(root_)}).status());
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, session->Run({}, {grads[0]}));
  EXPECT_EQ(Values(out[0]), (std::vector<double>{3, 12}));  // 3 v^2
}

TEST(GradientsMlpTest, TwoLayerMlpMatchesFiniteDifferences) {
  Scope root = Scope::NewRootScope();
  std::mt19937 rng(7);
  const Dims shapes[] = {{3, 5}, {5}, {5, 2}, {2}};
  const char* names[] = {"w1", "b1", "w2", "b2"};
  Inputs params;
  std::vector<Tensor> values;
  for (int i = 0; i < 4; ++i) {
    params.push_back(
        ops::Placeholder(root.WithOpName(names[i]), DT_DOUBLE, {.shape = PartialShape(shapes[i])}));
    values.push_back(RandomDoubles(shapes[i], -1, 1, rng));
  }
  Output x = ops::Const(root, RandomDoubles({4, 3}, -1, 1, rng));
  Output labels = ops::Const<double>(root, {1, 0, 0, 1, 0, 1, 1, 0}, {4, 2});
  Scope layer1 = root.NewSubScope("dense");
  Output h = ops::Relu(layer1, ops::BiasAdd(layer1, ops::MatMul(layer1, x, params[0]), params[1]));
  Scope layer2 = root.NewSubScope("dense_1");
  Output logits = ops::Add(layer2, ops::MatMul(layer2, h, params[2]), params[3]);
  Output loss = ops::Mean(root, ops::SoftmaxCrossEntropyWithLogits(root, logits, labels).loss);
  ExpectGradientsMatchFiniteDifferences(root, loss, params, values, 1e-6, 1e-6, rng);
}

}  // namespace
}  // namespace ckflow
