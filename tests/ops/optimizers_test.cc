// Optimizers: updates against hand-written references of TensorFlow 1's
// formulas (plain double loops), slot and non-slot variable creation and
// lookup, the hooks checkpoints rely on, and the errors of ApplyGradients.
#include "ops/optimizers.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "ops/training_ops.h"
#include "ops/variables.h"
#include "runtime/session.h"
#include "tests/ops/training_test_util.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

using ::ckflow::testing::RecordingRestore;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// ------------------------------------------------------------ references

// The state of one variable and its optimizer, in double.
struct Reference {
  std::vector<double> w;
  std::map<std::string, std::vector<double>> slots;
  float beta1_power = 0, beta2_power = 0;  // float32 variables in TensorFlow 1
};
using ReferenceStep = std::function<void(Reference&, const std::vector<double>& g)>;

struct OptimizerCase {
  std::string name;
  std::function<std::shared_ptr<Optimizer>()> make;
  std::map<std::string, double> initial_slots;  // slot name -> fill value
  ReferenceStep step;
};

double F(float x) { return static_cast<double>(x); }  // hyperparameters are float

std::vector<OptimizerCase> Cases() {
  std::vector<OptimizerCase> cases;
  cases.push_back({"GradientDescent",
                   [] { return GradientDescent::Make(0.1f); },
                   {},
                   [](Reference& r, const std::vector<double>& g) {
                     for (size_t i = 0; i < g.size(); ++i) r.w[i] -= F(0.1f) * g[i];
                   }});
  for (bool nesterov : {false, true}) {
    cases.push_back({nesterov ? "MomentumNesterov" : "Momentum",
                     [nesterov] {
                       return Momentum::Make(
                           {.learning_rate = 0.1f, .momentum = 0.9f, .use_nesterov = nesterov});
                     },
                     {{"momentum", 0.0}},
                     [nesterov](Reference& r, const std::vector<double>& g) {
                       const double lr = F(0.1f), mu = F(0.9f);
                       std::vector<double>& accum = r.slots["momentum"];
                       for (size_t i = 0; i < g.size(); ++i) {
                         accum[i] = accum[i] * mu + g[i];
                         r.w[i] -= nesterov ? g[i] * lr + accum[i] * mu * lr : accum[i] * lr;
                       }
                     }});
  }
  for (bool nesterov : {false, true}) {
    cases.push_back(
        {nesterov ? "AdamNesterov" : "Adam",
         [nesterov] { return Adam::Make({.learning_rate = 0.1f, .use_nesterov = nesterov}); },
         {{"m", 0.0}, {"v", 0.0}},
         [nesterov](Reference& r, const std::vector<double>& g) {
           const double lr = F(0.1f), b1 = F(0.9f), b2 = F(0.999f), eps = F(1e-8f);
           const double lr_t = lr * std::sqrt(1 - F(r.beta2_power)) / (1 - F(r.beta1_power));
           std::vector<double>& m = r.slots["m"];
           std::vector<double>& v = r.slots["v"];
           for (size_t i = 0; i < g.size(); ++i) {
             m[i] = m[i] + (g[i] - m[i]) * (1 - b1);
             v[i] = v[i] + (g[i] * g[i] - v[i]) * (1 - b2);
             double direction = nesterov ? b1 * m[i] + (1 - b1) * g[i] : m[i];
             r.w[i] -= lr_t * direction / (std::sqrt(v[i]) + eps);
           }
           r.beta1_power *= 0.9f;
           r.beta2_power *= 0.999f;
         }});
  }
  cases.push_back(
      {"RMSProp",
       [] { return RMSProp::Make({.learning_rate = 0.01f, .decay = 0.9f, .momentum = 0.5f}); },
       {{"rms", 1.0}, {"momentum", 0.0}},
       [](Reference& r, const std::vector<double>& g) {
         const double lr = F(0.01f), rho = F(0.9f), mu = F(0.5f), eps = F(1e-10f);
         std::vector<double>& ms = r.slots["rms"];
         std::vector<double>& mom = r.slots["momentum"];
         for (size_t i = 0; i < g.size(); ++i) {
           ms[i] = ms[i] + (g[i] * g[i] - ms[i]) * (1 - rho);
           mom[i] = mom[i] * mu + lr * g[i] / std::sqrt(ms[i] + eps);
           r.w[i] -= mom[i];
         }
       }});
  cases.push_back({"Adagrad",
                   [] { return Adagrad::Make({.learning_rate = 0.1f}); },
                   {{"accumulator", 0.1}},
                   [](Reference& r, const std::vector<double>& g) {
                     std::vector<double>& accum = r.slots["accumulator"];
                     for (size_t i = 0; i < g.size(); ++i) {
                       accum[i] += g[i] * g[i];
                       r.w[i] -= F(0.1f) * g[i] / std::sqrt(accum[i]);
                     }
                   }});
  // The square-root learning rate and another power (std::pow in the
  // kernel); l1 large enough to zero some weights.
  for (float power : {-0.5f, -0.25f}) {
    cases.push_back(
        {power == -0.5f ? "Ftrl" : "FtrlPower",
         [power] {
           return Ftrl::Make(
               {.learning_rate = 0.5f, .learning_rate_power = power, .l1 = 0.2f, .l2 = 0.1f});
         },
         {{"accum", 0.1}, {"linear", 0.0}},
         [power](Reference& r, const std::vector<double>& g) {
           const double lr = F(0.5f), l1 = F(0.2f), l2 = F(0.1f), p = -F(power);
           std::vector<double>& accum = r.slots["accum"];
           std::vector<double>& linear = r.slots["linear"];
           for (size_t i = 0; i < g.size(); ++i) {
             const double next = accum[i] + g[i] * g[i];
             linear[i] += g[i] - (std::pow(next, p) - std::pow(accum[i], p)) / lr * r.w[i];
             const double quadratic = std::pow(next, p) / lr + 2 * l2;
             r.w[i] = std::abs(linear[i]) > l1
                          ? (std::copysign(l1, linear[i]) - linear[i]) / quadratic
                          : 0.0;
             accum[i] = next;
           }
         }});
  }
  return cases;
}

const std::vector<double> kInitial = {1.0, -2.0, 0.5, 3.0};
const std::vector<std::vector<double>> kGradients = {
    {0.5, -1.0, 0.25, 2.0}, {-0.3, 0.7, 0.0, 1.5}, {1.2, -0.1, -2.0, 0.05}};

// `values` repeated to `size` elements, each repetition scaled a little
// differently so that a misplaced element would show.
std::vector<double> Tiled(const std::vector<double>& values, size_t size) {
  std::vector<double> out(size);
  for (size_t i = 0; i < size; ++i) {
    out[i] = values[i % values.size()] * (1.0 + static_cast<double>(i / values.size()) / 1024);
  }
  return out;
}

template <typename T>
std::vector<double> AsDoubles(const Tensor& t) {
  std::vector<double> out;
  for (T x : t.flat<T>()) out.push_back(static_cast<double>(x));
  return out;
}

template <typename T>
Tensor TensorOf(const std::vector<double>& values) {
  std::vector<T> v(values.begin(), values.end());
  return Tensor::FromVector<T>(v);
}

// Runs three steps of `c` on a variable of T with `size` elements and
// checks the variable, its slots and the beta powers against the reference
// after each step.
template <typename T>
void CheckAgainstReference(const OptimizerCase& c, double tolerance, size_t size) {
  SCOPED_TRACE(c.name + " " + std::string(DataTypeName(DataTypeOf<T>())) + " of " +
               std::to_string(size));
  const std::vector<double> initial = Tiled(kInitial, size);
  Scope root = Scope::NewRootScope();
  auto w = Variable::Create(root, "w", ops::Const(root, TensorOf<T>(initial)));
  Output grad = ops::Placeholder(root, DataTypeOf<T>(), {.shape = {static_cast<int64_t>(size)}});
  std::shared_ptr<Optimizer> optimizer = c.make();
  Output train = optimizer->ApplyGradients(root, {{grad, w}});
  Output init = GlobalVariablesInitializer(root);
  ASSERT_TRUE(root.ok()) << root.status();
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto session, Session::Create(root.graph()));
  CKFLOW_ASSERT_OK(session->Run({}, {}, {init}).status());

  Reference ref{.w = initial, .beta1_power = 0.9f, .beta2_power = 0.999f};
  for (const auto& [slot, fill] : c.initial_slots) {
    ref.slots[slot] = std::vector<double>(size, fill);
  }
  for (size_t step = 0; step < kGradients.size(); ++step) {
    SCOPED_TRACE("step " + std::to_string(step + 1));
    const std::vector<double> g = Tiled(kGradients[step], size);
    CKFLOW_ASSERT_OK(session->Run({{grad, TensorOf<T>(g)}}, {}, {train}).status());
    c.step(ref, g);

    std::vector<Output> fetches = {w->value()};
    for (const auto& [slot, values] : ref.slots) {
      auto slot_var = optimizer->GetSlotVariable(*w, slot);
      ASSERT_NE(slot_var, nullptr) << slot;
      fetches.push_back(slot_var->value());
    }
    CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> got, session->Run({}, fetches));
    std::vector<std::vector<double>> expected = {ref.w};
    for (const auto& [slot, values] : ref.slots) expected.push_back(values);
    for (size_t k = 0; k < got.size(); ++k) {
      std::vector<double> actual = AsDoubles<T>(got[k]);
      ASSERT_EQ(actual.size(), size);
      for (size_t i = 0; i < actual.size(); ++i) {
        ASSERT_NEAR(actual[i], expected[k][i], tolerance * (1 + std::abs(expected[k][i])))
            << fetches[k].name() << "[" << i << "]";
      }
    }
    if (auto b1 = optimizer->GetNonSlotVariable("beta1_power")) {
      auto b2 = optimizer->GetNonSlotVariable("beta2_power");
      CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> powers,
                                  session->Run({}, {b1->value(), b2->value()}));
      EXPECT_EQ(powers[0].scalar<float>(), ref.beta1_power);
      EXPECT_EQ(powers[1].scalar<float>(), ref.beta2_power);
    }
  }
}

TEST(OptimizerUpdates, MatchTheReferenceForThreeStepsInFloat32) {
  for (const OptimizerCase& c : Cases()) CheckAgainstReference<float>(c, 2e-6, kInitial.size());
}

TEST(OptimizerUpdates, MatchTheReferenceForThreeStepsInFloat64) {
  for (const OptimizerCase& c : Cases()) CheckAgainstReference<double>(c, 1e-12, kInitial.size());
}

// The kernels update big variables in pieces sized to stay in L1 (and split
// them over threads): 10,007 elements make several pieces for every
// optimizer and dtype, the last one ragged.
TEST(OptimizerUpdates, MatchTheReferenceOverManyPiecesWithARaggedEnd) {
  for (const OptimizerCase& c : Cases()) {
    CheckAgainstReference<float>(c, 2e-6, 10007);
    CheckAgainstReference<double>(c, 1e-12, 10007);
  }
}

// ------------------------------------------------------ sparse gradients

// An optimizer's update from the gradient of a gather: TensorFlow 1 sums a
// row's repeated gradients, then GradientDescent and Adam update as their
// dense form does with that sum (Adam decays every row's m and v), the
// others (and LazyAdam, with Adam's formula) touch only the rows looked up.
struct SparseCase {
  OptimizerCase optimizer;
  bool rows_only;
  std::string op;  // an op type the sparse update must use
};

std::vector<SparseCase> SparseCases() {
  std::vector<SparseCase> out;
  for (const OptimizerCase& c : Cases()) {
    const bool dense_form = c.name == "GradientDescent" || c.name.rfind("Adam", 0) == 0;
    std::string op = c.name == "GradientDescent"        ? "ResourceScatterAdd"
                     : c.name == "Adam"                 ? "ResourceScatterAdd"
                     : c.name == "AdamNesterov"         ? "ResourceApplyAdam"
                     : c.name.rfind("Momentum", 0) == 0 ? "ResourceSparseApplyMomentum"
                     : c.name == "RMSProp"              ? "ResourceSparseApplyRMSProp"
                     : c.name == "Adagrad"              ? "ResourceSparseApplyAdagrad"
                                                        : "ResourceSparseApplyFtrl";
    out.push_back({c, !dense_form, op});
    if (c.name.rfind("Adam", 0) == 0) {
      OptimizerCase lazy = c;
      const bool nesterov = c.name == "AdamNesterov";
      lazy.name = "Lazy" + c.name;
      lazy.make = [nesterov] {
        return LazyAdam::Make({.learning_rate = 0.1f, .use_nesterov = nesterov});
      };
      out.push_back({lazy, true, "ResourceScatterSub"});
    }
  }
  return out;
}

// Rows looked up by each step (repeated, unsorted), and the gradient of
// each looked-up row (the weights of a weighted sum of the rows).
struct SparseStep {
  std::vector<int64_t> ids;
  std::vector<double> weights;  // ids.size() x width
};

std::vector<SparseStep> SparseSteps(int64_t rows, int64_t width, int64_t lookups, int steps) {
  std::vector<SparseStep> out;
  uint64_t state = 12345;
  auto next = [&state] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return state >> 33;
  };
  for (int s = 0; s < steps; ++s) {
    SparseStep step;
    for (int64_t i = 0; i < lookups; ++i) {
      // Low rows more often, so rows repeat within a step.
      step.ids.push_back(static_cast<int64_t>(next() % (next() % rows + 1)));
    }
    for (int64_t i = 0; i < lookups * width; ++i) {
      step.weights.push_back(static_cast<double>(next() % 2001) / 1000.0 - 1.0);
    }
    out.push_back(std::move(step));
  }
  return out;
}

template <typename T, typename Index>
void CheckSparseAgainstReference(const SparseCase& c, double tolerance, int64_t rows, int64_t width,
                                 int64_t lookups) {
  SCOPED_TRACE(c.optimizer.name + " " + std::string(DataTypeName(DataTypeOf<T>())) + " ids " +
               std::string(DataTypeName(DataTypeOf<Index>())) + " table [" + std::to_string(rows) +
               "," + std::to_string(width) + "]");
  const auto size = static_cast<size_t>(rows * width);
  const std::vector<double> initial = Tiled(kInitial, size);
  Scope root = Scope::NewRootScope();
  auto table =
      Variable::Create(root, "table",
                       ops::Const(root, Tensor::FromVector<T>({initial.begin(), initial.end()},
                                                              TensorShape({rows, width}))));
  Output ids = ops::Placeholder(root, DataTypeOf<Index>(), {.shape = {lookups}});
  Output weights = ops::Placeholder(root, DataTypeOf<T>(), {.shape = {lookups, width}});
  Output loss = ops::Sum(root, ops::Mul(root, table->SparseRead(root, ids), weights));
  std::shared_ptr<Optimizer> optimizer = c.optimizer.make();
  Output train = optimizer->Minimize(root, loss, {table});
  Output init = GlobalVariablesInitializer(root);
  ASSERT_TRUE(root.ok()) << root.status();
  bool has_op = false;
  for (int i = 0; i < root.graph().num_nodes(); ++i) {
    has_op = has_op || root.graph().node(i)->type() == c.op;
  }
  EXPECT_TRUE(has_op) << "no " << c.op << " in the graph";
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto session, Session::Create(root.graph()));
  CKFLOW_ASSERT_OK(session->Run({}, {}, {init}).status());

  Reference ref{.w = initial, .beta1_power = 0.9f, .beta2_power = 0.999f};
  for (const auto& [slot, fill] : c.optimizer.initial_slots) {
    ref.slots[slot] = std::vector<double>(size, fill);
  }
  int step_number = 0;
  for (const SparseStep& step : SparseSteps(rows, width, lookups, 4)) {
    SCOPED_TRACE("step " + std::to_string(++step_number));
    std::vector<Index> id(step.ids.begin(), step.ids.end());
    std::vector<T> w(step.weights.begin(), step.weights.end());
    CKFLOW_ASSERT_OK(session
                         ->Run({{ids, Tensor::FromVector<Index>(id)},
                                {weights, Tensor::FromVector<T>(w, TensorShape({lookups, width}))}},
                               {}, {train})
                         .status());
    // The reference: each row's summed gradient, applied to the whole
    // table or to the rows looked up.
    std::vector<double> g(size, 0.0);
    std::vector<int64_t> touched;
    for (int64_t i = 0; i < lookups; ++i) {
      const int64_t row = step.ids[i];
      if (std::find(touched.begin(), touched.end(), row) == touched.end()) touched.push_back(row);
      for (int64_t j = 0; j < width; ++j) g[row * width + j] += step.weights[i * width + j];
    }
    if (!c.rows_only) {
      c.optimizer.step(ref, g);
    } else {
      Reference part{.beta1_power = ref.beta1_power, .beta2_power = ref.beta2_power};
      std::vector<double> part_g;
      auto each = [&](const std::function<void(size_t from, size_t to)>& fn) {
        size_t k = 0;
        for (int64_t row : touched) {
          for (int64_t j = 0; j < width; ++j) fn(static_cast<size_t>(row * width + j), k++);
        }
      };
      part.w.resize(touched.size() * width);
      part_g.resize(part.w.size());
      for (auto& [name, values] : ref.slots) part.slots[name].resize(part.w.size());
      each([&](size_t from, size_t to) {
        part.w[to] = ref.w[from];
        part_g[to] = g[from];
        for (auto& [name, values] : ref.slots) part.slots[name][to] = values[from];
      });
      c.optimizer.step(part, part_g);
      each([&](size_t to, size_t from) {
        ref.w[to] = part.w[from];
        for (auto& [name, values] : ref.slots) values[to] = part.slots[name][from];
      });
      ref.beta1_power = part.beta1_power;
      ref.beta2_power = part.beta2_power;
    }
    std::vector<Output> fetches = {table->value()};
    std::vector<const std::vector<double>*> expected = {&ref.w};
    for (const auto& [slot, values] : ref.slots) {
      auto slot_var = optimizer->GetSlotVariable(*table, slot);
      ASSERT_NE(slot_var, nullptr) << slot;
      fetches.push_back(slot_var->value());
      expected.push_back(&values);
    }
    CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> got, session->Run({}, fetches));
    for (size_t k = 0; k < got.size(); ++k) {
      std::vector<double> actual = AsDoubles<T>(got[k]);
      ASSERT_EQ(actual.size(), size);
      for (size_t i = 0; i < size; ++i) {
        ASSERT_NEAR(actual[i], (*expected[k])[i], tolerance * (1 + std::abs((*expected[k])[i])))
            << fetches[k].name() << "[" << i / width << "," << i % width << "]";
      }
    }
  }
}

TEST(SparseOptimizerUpdates, SumRepeatedRowsAndMatchTheReference) {
  for (const SparseCase& c : SparseCases()) {
    CheckSparseAgainstReference<float, int32_t>(c, 2e-6, 7, 3, 9);
    CheckSparseAgainstReference<double, int64_t>(c, 1e-12, 7, 3, 9);
  }
}

// Enough rows that the kernels split them over workers (each row's
// mentions on one worker).
TEST(SparseOptimizerUpdates, MatchTheReferenceOnABigTable) {
  for (const SparseCase& c : SparseCases()) {
    CheckSparseAgainstReference<double, int32_t>(c, 1e-12, 1000, 40, 1500);
  }
}

// The sparse kernels themselves take rows as given: a row named twice is
// updated twice, in order (optimizers sum repeats first).
TEST(SparseApplyOps, ApplyRepeatedRowsInOrderAndCheckEveryIndexFirst) {
  Scope root = Scope::NewRootScope();
  auto var = Variable::Create(
      root, "var", ops::Const(root, Tensor::FromVector<float>({1, 2, 3, 4}, TensorShape({2, 2}))));
  auto accum = Variable::Create(root, "accum", ops::Fill(root, {2, 2}, 0.1f));
  Output ids = ops::Placeholder(root, DT_INT64);
  Output grad = ops::Placeholder(root, DT_FLOAT);
  Output apply = ops::ResourceSparseApplyAdagrad(
      root.WithOpName("apply"), var->handle(), accum->handle(), ops::Const(root, 0.5f), grad, ids);
  Output init = GlobalVariablesInitializer(root);
  ASSERT_TRUE(root.ok()) << root.status();
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto session, Session::Create(root.graph()));
  CKFLOW_ASSERT_OK(session->Run({}, {}, {init}).status());

  CKFLOW_ASSERT_OK(
      session
          ->Run({{ids, Tensor::FromVector<int64_t>({1, 1})},
                 {grad, Tensor::FromVector<float>({1.0f, -2.0f, 3.0f, 0.5f}, TensorShape({2, 2}))}},
                {}, {apply})
          .status());
  std::vector<double> a = {0.1f, 0.1f}, w = {3.0, 4.0};
  for (const auto& g : {std::vector<double>{1.0, -2.0}, std::vector<double>{3.0, 0.5}}) {
    for (int j = 0; j < 2; ++j) {
      a[j] += g[j] * g[j];
      w[j] -= 0.5 * g[j] / std::sqrt(a[j]);
    }
  }
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> got,
                              session->Run({}, std::vector<Output>{var->value(), accum->value()}));
  EXPECT_THAT(AsDoubles<float>(got[0]), ElementsAre(1.0, 2.0, ::testing::DoubleNear(w[0], 1e-6),
                                                    ::testing::DoubleNear(w[1], 1e-6)));
  EXPECT_THAT(AsDoubles<float>(got[1]),
              ElementsAre(::testing::DoubleEq(0.1f), ::testing::DoubleEq(0.1f),
                          ::testing::DoubleNear(a[0], 1e-6), ::testing::DoubleNear(a[1], 1e-6)));

  // A bad index anywhere fails the op before any row changes.
  StatusOr<std::vector<Tensor>> bad =
      session->Run({{ids, Tensor::FromVector<int64_t>({0, 2})},
                    {grad, Tensor::FromVector<float>({1, 1, 1, 1}, TensorShape({2, 2}))}},
                   {}, {apply});
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("apply"));
  EXPECT_THAT(bad.status().message(), HasSubstr("indices[1] = 2 is not in [0, 2)"));
  EXPECT_THAT(bad.status().message(), HasSubstr("'var'"));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> after,
                              session->Run({}, std::vector<Output>{var->value()}));
  EXPECT_EQ(AsDoubles<float>(after[0]), AsDoubles<float>(got[0]));

  // Rows of the wrong width, and a gradient row count that is not the
  // index count.
  bad = session->Run({{ids, Tensor::FromVector<int64_t>({0})},
                      {grad, Tensor::FromVector<float>({1, 1, 1}, TensorShape({1, 3}))}},
                     {}, {apply});
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("rows must be the variable's rows"));
  bad = session->Run({{ids, Tensor::FromVector<int64_t>({0, 1})},
                      {grad, Tensor::FromVector<float>({1, 1}, TensorShape({1, 2}))}},
                     {}, {apply});
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("must have 2 rows, one per index"));
}

TEST(SparseApplyOps, RejectIndicesThatAreNotAVectorWhenBuilt) {
  Scope root = Scope::NewRootScope();
  auto var = Variable::Create(root, "var", ops::Fill(root, {4, 2}, 1.0));
  auto accum = Variable::Create(root, "accum", ops::Fill(root, {4, 2}, 0.0));
  ops::ResourceSparseApplyMomentum(
      root.WithOpName("apply"), var->handle(), accum->handle(), ops::Const(root, 0.1),
      ops::Fill(root, {2, 2}, 1.0),
      ops::Const(root, Tensor::FromVector<int32_t>({0, 1}, TensorShape({1, 2}))),
      ops::Const(root, 0.9));
  EXPECT_EQ(root.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(root.status().message(), HasSubstr("indices"));
  EXPECT_THAT(root.status().message(), HasSubstr("rank 1"));
}

TEST(OptimizerErrors, FtrlAndAdagradRejectBadOptions) {
  for (const auto& make : std::vector<std::function<std::shared_ptr<Optimizer>()>>{
           [] { return Ftrl::Make({.learning_rate_power = 0.5f}); },
           [] { return Ftrl::Make({.l1 = -1.0f}); },
           [] { return Ftrl::Make({.initial_accumulator_value = -0.1}); },
           [] { return Adagrad::Make({.initial_accumulator_value = 0.0}); }}) {
    Scope root = Scope::NewRootScope();
    auto w = Variable::Create(root, "w", ops::Fill(root, {2}, 1.0f));
    std::shared_ptr<Optimizer> optimizer = make();
    optimizer->ApplyGradients(root, {{ops::Fill(root, {2}, 1.0f), w}});
    EXPECT_EQ(root.status().code(), StatusCode::kInvalidArgument) << optimizer->name();
    EXPECT_THAT(root.status().message(), HasSubstr(optimizer->name() + ":"));
  }
}

// -------------------------------------------------------------- slots

class OptimizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Scope dense = root_.NewSubScope("dense");
    kernel_ = Variable::Create(dense, "kernel", ops::Fill(root_, {3, 2}, 1.0f));
    bias_ = Variable::Create(dense, "bias", ops::Fill(root_, {2}, 0.0f));
    kernel_grad_ = ops::Fill(root_, {3, 2}, 0.5f);
    bias_grad_ = ops::Fill(root_, {2}, 0.25f);
  }
  std::vector<GradAndVar> Grads() const { return {{kernel_grad_, kernel_}, {bias_grad_, bias_}}; }
  std::unique_ptr<Session> InitializedSession() {
    Output init = GlobalVariablesInitializer(root_);
    StatusOr<std::unique_ptr<Session>> s = Session::Create(root_.graph());
    EXPECT_TRUE(s.ok()) << s.status();
    if (!s.ok()) return nullptr;
    EXPECT_TRUE((*s)->Run({}, {}, {init}).ok());
    return std::move(s).value();
  }

  Scope root_ = Scope::NewRootScope();
  std::shared_ptr<Variable> kernel_, bias_;
  Output kernel_grad_, bias_grad_;
};

TEST_F(OptimizerTest, SlotsHaveTheVariablesShapeAndDtypeAndTensorFlowNames) {
  auto adam = Adam::Make();
  adam->ApplyGradients(root_, Grads());
  ASSERT_TRUE(root_.ok()) << root_.status();
  EXPECT_THAT(adam->SlotNames(), ElementsAre("m", "v"));
  auto m = adam->GetSlotVariable(*kernel_, "m");
  auto v = adam->GetSlotVariable(*kernel_, "v");
  ASSERT_NE(m, nullptr);
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(m->name(), "dense/kernel/Adam");
  EXPECT_EQ(v->name(), "dense/kernel/Adam_1");
  EXPECT_EQ(adam->GetSlotVariable(*bias_, "m")->name(), "dense/bias/Adam");
  for (const auto& slot : {m, v}) {
    EXPECT_EQ(slot->dtype(), DT_FLOAT);
    EXPECT_EQ(slot->shape(), PartialShape({3, 2}));
    EXPECT_FALSE(slot->trainable());
  }
  EXPECT_EQ(adam->GetSlot(*kernel_, "m"), m);
  EXPECT_EQ(adam->GetSlot(*kernel_, "nope"), nullptr);
  EXPECT_EQ(adam->GetSlot(*m, "m"), nullptr);  // slots have no slots

  EXPECT_THAT(Momentum::Make({})->SlotNames(), ElementsAre("momentum"));
  EXPECT_THAT(RMSProp::Make()->SlotNames(), ElementsAre("momentum", "rms"));
  EXPECT_TRUE(GradientDescent::Make(0.1f)->SlotNames().empty());
}

TEST_F(OptimizerTest, SlotsStartAtZeroAndAreCreatedOnce) {
  auto adam = Adam::Make();
  adam->ApplyGradients(root_, Grads());
  auto m = adam->GetSlotVariable(*kernel_, "m");
  size_t variables = GlobalVariables(root_.graph()).size();
  EXPECT_EQ(variables, 2u + 4u + 2u);  // weights, slots, beta powers
  adam->ApplyGradients(root_, Grads());
  adam->ApplyGradients(root_, {{kernel_grad_, kernel_}});
  ASSERT_TRUE(root_.ok()) << root_.status();
  EXPECT_EQ(GlobalVariables(root_.graph()).size(), variables);
  EXPECT_EQ(adam->GetSlotVariable(*kernel_, "m"), m);

  auto session = InitializedSession();
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, session->Run({}, {m->value()}));
  for (float x : out[0].flat<float>()) EXPECT_EQ(x, 0.0f);
}

TEST_F(OptimizerTest, AdamTracksBetaPowersAsItsFirstChildren) {
  auto adam = Adam::Make();
  auto extra = adam->Track("zzz_extra", Variable::Create(root_, "x", ops::Const(root_, 1.0f)));
  auto first = adam->Track("aaa_first", Variable::Create(root_, "y", ops::Const(root_, 1.0f)));
  EXPECT_EQ(adam->GetNonSlotVariable("beta1_power"), nullptr);  // lazily
  adam->ApplyGradients(root_, Grads());
  ASSERT_TRUE(root_.ok()) << root_.status();
  std::vector<std::string> names;
  for (const auto& [name, child] : adam->Children()) names.push_back(name);
  EXPECT_THAT(names, ElementsAre("beta1_power", "beta2_power", "zzz_extra", "aaa_first"));
  auto beta1 = adam->GetNonSlotVariable("beta1_power");
  ASSERT_NE(beta1, nullptr);
  EXPECT_EQ(adam->LookupChild("beta1_power"), beta1);
  EXPECT_EQ(beta1->name(), "beta1_power");
  EXPECT_EQ(beta1->dtype(), DT_FLOAT);
  EXPECT_FALSE(beta1->trainable());
}

TEST_F(OptimizerTest, AdamBetaPowersAdvanceOncePerStep) {
  auto adam = Adam::Make({.beta1 = 0.5f, .beta2 = 0.25f});
  Output train = adam->ApplyGradients(root_, Grads());
  auto session = InitializedSession();
  for (int i = 0; i < 3; ++i) CKFLOW_ASSERT_OK(session->Run({}, {}, {train}).status());
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out,
                              session->Run({}, {adam->GetNonSlotVariable("beta1_power")->value(),
                                                adam->GetNonSlotVariable("beta2_power")->value()}));
  EXPECT_EQ(out[0].scalar<float>(), 0.0625f);  // 0.5^4: beta1, then 3 steps
  EXPECT_EQ(out[1].scalar<float>(), 0.25f * 0.25f * 0.25f * 0.25f);
}

TEST_F(OptimizerTest, CreatorHooksSeeSlotsAndNonSlotVariables) {
  std::vector<std::string> created;
  AddVariableCreatorHook(root_.graph(),
                         [&](const std::shared_ptr<Variable>& v) { created.push_back(v->name()); });
  Adam::Make()->ApplyGradients(root_, Grads());
  EXPECT_THAT(created, ElementsAre("beta1_power", "beta2_power", "dense/kernel/Adam",
                                   "dense/kernel/Adam_1", "dense/bias/Adam", "dense/bias/Adam_1"));
}

TEST_F(OptimizerTest, DeferredSlotRestoresRunWhenTheSlotIsCreated) {
  auto adam = Adam::Make();
  std::vector<std::shared_ptr<Trackable>> restored;
  adam->CreateOrRestoreSlot(bias_, "v", std::make_shared<RecordingRestore>(&restored));
  adam->AddDeferredRestore("beta2_power", std::make_shared<RecordingRestore>(&restored));
  EXPECT_TRUE(restored.empty());
  adam->ApplyGradients(root_, Grads());
  ASSERT_EQ(restored.size(), 2u);
  EXPECT_EQ(restored[0], adam->GetNonSlotVariable("beta2_power"));
  EXPECT_EQ(restored[1], adam->GetSlotVariable(*bias_, "v"));
}

TEST_F(OptimizerTest, GlobalStepCountsTrainSteps) {
  auto step =
      Variable::Create(root_, "global_step", ops::Const<int64_t>(root_, 0), {.trainable = false});
  Output train = GradientDescent::Make(0.1f)->ApplyGradients(root_, Grads(), step);
  ASSERT_TRUE(root_.ok()) << root_.status();
  EXPECT_EQ(train.node()->name(), "GradientDescent");
  auto session = InitializedSession();
  for (int i = 0; i < 3; ++i) CKFLOW_ASSERT_OK(session->Run({}, {}, {train}).status());
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out,
                              session->Run({}, {step->value(), kernel_->value()}));
  EXPECT_EQ(out[0].scalar<int64_t>(), 3);
  EXPECT_FLOAT_EQ(out[1].flat<float>()[0], 1.0f - 3 * 0.1f * 0.5f);
}

TEST_F(OptimizerTest, PairsWithoutGradientAreSkipped) {
  auto gd = GradientDescent::Make(1.0f);
  Output train = gd->ApplyGradients(root_, {{kernel_grad_, kernel_}, {Output(), bias_}});
  auto session = InitializedSession();
  CKFLOW_ASSERT_OK(session->Run({}, {}, {train}).status());
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, session->Run({}, {bias_->value()}));
  EXPECT_THAT(AsDoubles<float>(out[0]), ElementsAre(0.0, 0.0));
}

TEST_F(OptimizerTest, TrainingBeforeInitializationNamesTheSlot) {
  Output train = Momentum::Make({})->ApplyGradients(root_, Grads());
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto session, Session::Create(root_.graph()));
  // Initialize the weights only, not the slots.
  CKFLOW_ASSERT_OK(session->Run({}, {}, {kernel_->initializer(), bias_->initializer()}).status());
  Status s = session->Run({}, {}, {train}).status();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("/Momentum' is not initialized"));
}

TEST_F(OptimizerTest, MinimizeFollowsTheLossGradient) {
  // loss = sum((kernel - 3)^2): d loss / d kernel = 2 (kernel - 3) = -4.
  Output loss = ops::Sum(root_, ops::Square(root_, ops::Sub(root_, kernel_->value(), 3.0f)));
  Output train = GradientDescent::Make(0.125f)->Minimize(root_, loss, {kernel_});
  ASSERT_TRUE(root_.ok()) << root_.status();
  auto session = InitializedSession();
  CKFLOW_ASSERT_OK(session->Run({}, {}, {train}).status());
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, session->Run({}, {kernel_->value()}));
  for (float x : out[0].flat<float>()) EXPECT_EQ(x, 1.0f + 0.125f * 4);
}

TEST_F(OptimizerTest, MinimizeDefaultsToTrainableVariables) {
  auto frozen = Variable::Create(root_, "frozen", ops::Const(root_, 1.0f), {.trainable = false});
  Output loss = ops::Add(root_, ops::Sum(root_, kernel_->value()), frozen->value());
  std::vector<GradAndVar> grads = Adam::Make()->ComputeGradients(root_, loss);
  ASSERT_TRUE(root_.ok()) << root_.status();
  ASSERT_EQ(grads.size(), 2u);  // kernel and bias, not frozen
  EXPECT_EQ(grads[0].variable, kernel_);
  EXPECT_TRUE(grads[0].grad.valid());
  EXPECT_EQ(grads[1].variable, bias_);
  EXPECT_FALSE(grads[1].grad.valid());  // the loss does not depend on bias
}

// ------------------------------------------------------------- errors

TEST(OptimizerErrors, ApplyGradientsRejectsBadInput) {
  using Pairs = std::vector<GradAndVar>;
  struct Case {
    std::string name;
    std::function<Pairs(std::shared_ptr<Variable> w, Output w_grad, Output small_grad)> grads;
    std::string message;
  };
  std::vector<Case> cases = {
      {"Empty", [](auto, auto, auto) { return Pairs{}; }, "no variables to update"},
      {"NoGradient",
       [](auto w, auto, auto) {
         return Pairs{{Output(), w}};
       },
       "no gradients provided for any variable of ['dense/kernel']"},
      {"NullVariable",
       [](auto, auto g, auto) {
         return Pairs{{g, nullptr}};
       },
       "a variable is null"},
      {"Twice",
       [](auto w, auto g, auto) {
         return Pairs{{g, w}, {g, w}};
       },
       "variable 'dense/kernel' is listed twice"},
      {"Shape",
       [](auto w, auto, auto small) {
         return Pairs{{small, w}};
       },
       "variable 'dense/kernel' is float32[3,2] but its gradient small_grad:0 is float32[2]"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Scope root = Scope::NewRootScope();
    auto w = Variable::Create(root.NewSubScope("dense"), "kernel", ops::Fill(root, {3, 2}, 1.0f));
    Output w_grad = ops::Fill(root.WithOpName("w_grad"), {3, 2}, 0.5f);
    Output small_grad = ops::Fill(root.WithOpName("small_grad"), {2}, 0.5f);
    ASSERT_TRUE(root.ok()) << root.status();
    EXPECT_FALSE(
        GradientDescent::Make(0.1f)->ApplyGradients(root, c.grads(w, w_grad, small_grad)).valid());
    EXPECT_EQ(root.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(root.status().message()), HasSubstr(c.message));
  }
}

TEST_F(OptimizerTest, AnOptimizerStaysWithOneGraph) {
  auto opt = GradientDescent::Make(0.1f);
  opt->ApplyGradients(root_, Grads());
  Scope other = Scope::NewRootScope();
  auto w = Variable::Create(other, "w", ops::Const(other, 1.0f));
  EXPECT_FALSE(opt->ApplyGradients(other, {{ops::Const(other, 1.0f), w}}).valid());
  EXPECT_EQ(other.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(other.status().message()), HasSubstr("one optimizer per graph"));
}

TEST_F(OptimizerTest, GlobalStepMustBeAnIntegerScalar) {
  auto step = Variable::Create(root_, "step", ops::Const(root_, 0.0f));
  EXPECT_FALSE(GradientDescent::Make(0.1f)->ApplyGradients(root_, Grads(), step).valid());
  EXPECT_THAT(std::string(root_.status().message()),
              HasSubstr("global_step 'step' must be an int32 or int64 scalar, not float32[]"));
}

TEST_F(OptimizerTest, MinimizeWithoutAnyGradientNamesTheVariables) {
  Output loss = ops::Const(root_.WithOpName("constant_loss"), 1.0f);
  EXPECT_FALSE(Adam::Make()->Minimize(root_, loss).valid());
  EXPECT_EQ(root_.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(
      std::string(root_.status().message()),
      HasSubstr("no gradients for any variable: the loss constant_loss:0 depends on none of "
                "['dense/kernel', 'dense/bias']"));
}

}  // namespace
}  // namespace ckflow
