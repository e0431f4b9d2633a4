// Eager execution (graph/eager.h): the standard ops run when called, with
// graph mode's checks and messages; variables, layers, GradientTape and the
// optimizers eagerly; and eager training giving graph mode's numbers.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "base/tsan_internal.h"
#include "ops/array_ops.h"
#include "ops/gradient_tape.h"
#include "ops/gradients.h"
#include "ops/layers.h"
#include "ops/losses.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"
#include "ops/optimizers.h"
#include "ops/variables.h"
#include "runtime/session.h"
#include "tests/ops/op_test_util.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

using ::testing::ElementsAre;
using testing::SameTensor;
using testing::StatusIs;

std::vector<float> Floats(const Tensor& t) {
  std::vector<float> out(t.flat<float>().begin(), t.flat<float>().end());
  return out;
}

TEST(EagerScopeTest, OpsRunWhenCalled) {
  Scope scope = Scope::NewEagerScope();
  Output a = ops::Const<float>(scope, {1, 2, 3, 4}, {2, 2});
  Output b = ops::MatMul(scope, a, a);
  Output c = ops::Add(scope, b, 1.0f);
  ASSERT_TRUE(scope.ok()) << scope.status();
  EXPECT_THAT(Floats(c.value()), ElementsAre(8, 11, 16, 23));
  // Static shapes are the values' shapes.
  EXPECT_EQ(c.shape(), PartialShape({2, 2}));
}

// Kernels run with subnormals flushed to zero, as TensorFlow's do, in a
// session and eagerly alike: a product under the smallest normal is 0, and
// a logit 1e9 under its row's maximum gets a probability of exactly 0
// (Eigen's exp alone returns a subnormal there), also in rows that a
// ParallelFor hands to other threads.
TEST(EagerScopeTest, SubnormalsFlushToZeroInSessionsAndEagerly) {
  constexpr int64_t kRows = 64, kCols = 256;
  std::vector<float> logits(kRows * kCols);
  for (int64_t i = 0; i < kRows; ++i) {
    for (int64_t j = 0; j < kCols; ++j) {
      logits[i * kCols + j] = j > 4 * i ? -1e9f : 0.01f * static_cast<float>(j % 7);
    }
  }
  auto build = [&](const Scope& s) {
    return std::vector<Output>{ops::Mul(s, ops::Const<float>(s, {1e-20f, 2e-18f}), 1e-20f),
                               ops::Mul(s, ops::Const<double>(s, {1e-160, 1e-140}), 1e-160),
                               ops::Softmax(s, ops::Const<float>(s, logits, {kRows, kCols}))};
  };
  Scope graph = Scope::NewRootScope();
  const std::vector<Output> fetches = build(graph);
  ASSERT_TRUE(graph.ok()) << graph.status();
  auto session = *Session::Create(graph.graph());
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> ran, session->Run({}, fetches, {}));
  Scope eager = Scope::NewEagerScope();
  const std::vector<Output> eagerly = build(eager);
  ASSERT_TRUE(eager.ok()) << eager.status();
  for (const Tensor& t : {ran[0], eagerly[0].value()}) {
    EXPECT_EQ(t.flat<float>()[0], 0.0f);
    EXPECT_EQ(t.flat<float>()[1], 2e-18f * 1e-20f);  // 2e-38, normal
  }
  for (const Tensor& t : {ran[1], eagerly[1].value()}) {
    EXPECT_EQ(t.flat<double>()[0], 0.0);
    EXPECT_EQ(t.flat<double>()[1], 1e-140 * 1e-160);
  }
  EXPECT_TRUE(SameTensor(eagerly[2].value(), ran[2]));
  int64_t wrong = 0;
  for (int64_t k = 0; k < kRows * kCols; ++k) {
    const float p = ran[2].flat<float>()[k];
    wrong += logits[k] < -1 ? p != 0.0f : !(p > 0.0f);
  }
  EXPECT_EQ(wrong, 0) << "probabilities of masked logits not exactly 0, or of kept ones not > 0";
}

TEST(EagerScopeTest, BuildErrorsAreTheGraphModeStatus) {
  Scope graph = Scope::NewRootScope();
  ops::MatMul(graph, ops::Const<float>(graph, {1, 2, 3, 4, 5, 6}, {2, 3}),
              ops::Const<float>(graph, {1, 2, 3, 4}, {2, 2}));
  Scope eager = Scope::NewEagerScope();
  Output out = ops::MatMul(eager, ops::Const<float>(eager, {1, 2, 3, 4, 5, 6}, {2, 3}),
                           ops::Const<float>(eager, {1, 2, 3, 4}, {2, 2}));
  EXPECT_FALSE(out.valid());
  ASSERT_FALSE(graph.ok());
  EXPECT_EQ(eager.status().code(), graph.status().code());
  EXPECT_THAT(eager.status(), StatusIs(StatusCode::kInvalidArgument, "MatMul (MatMul)"));
  // Sticky, as in graph mode.
  EXPECT_FALSE(ops::Add(eager, 1.0f, 2.0f).valid());
}

TEST(EagerScopeTest, KernelErrorsNameTheOp) {
  Scope scope = Scope::NewEagerScope();
  auto v = Variable::Create(scope, "v", ops::Const<float>(scope, {1, 2}));
  ASSERT_NE(v, nullptr);
  // A graph-mode op has no value for an eager op to take.
  Output p = ops::Placeholder(scope.WithoutExecution(), DT_FLOAT, {.shape = {2}});
  EXPECT_FALSE(ops::Add(scope, v->value(), p).valid());
  EXPECT_THAT(scope.status(), StatusIs(StatusCode::kFailedPrecondition, "has no value"));
}

TEST(EagerScopeTest, VariablesCreateReadAssign) {
  Scope scope = Scope::NewEagerScope();
  auto w = Variable::Create(scope, "w", ops::Const<float>(scope, {1, 2}));
  ASSERT_NE(w, nullptr) << scope.status();
  EXPECT_EQ(w->name(), "w");
  EXPECT_THAT(Floats(w->value().value()), ElementsAre(1, 2));
  Output before = w->value();
  w->AssignAdd(scope, ops::Const<float>(scope, {10, 20}));
  EXPECT_THAT(Floats(w->value().value()), ElementsAre(11, 22));
  // A value read earlier is a snapshot.
  EXPECT_THAT(Floats(before.value()), ElementsAre(1, 2));
  w->Assign(scope, ops::Const<float>(scope, {5, 6}));
  EXPECT_THAT(Floats(w->value().value()), ElementsAre(5, 6));
  // Names are unique as in graph mode.
  auto w1 = Variable::Create(scope, "w", ops::Const<float>(scope, {0, 0}));
  ASSERT_NE(w1, nullptr);
  EXPECT_EQ(w1->name(), "w_1");
  w->Assign(scope, ops::Const<float>(scope, {1, 2, 3}));
  EXPECT_THAT(scope.status(), StatusIs(StatusCode::kInvalidArgument, "variable 'w'"));
}

TEST(EagerScopeTest, AStepLoopDoesNotGrowTheGraph) {
  Scope scope = Scope::NewEagerScope();
  auto layer = Dense::Make(3, {.activation = ops::Relu});
  auto optimizer = GradientDescent::Make(0.1f);
  Output x = ops::Const<float>(scope, {1, 2, 3, 4}, {2, 2});
  auto step = [&] {
    return optimizer->Minimize(scope, [&] { return ops::Sum(scope, (*layer)(scope, x), {0, 1}); });
  };
  step();
  ASSERT_TRUE(scope.ok()) << scope.status();
  const int nodes = scope.graph().num_nodes();
  std::weak_ptr<Node> first_step_node;
  {
    Output op = step();
    first_step_node = op.node()->shared_from_this();
  }
  for (int i = 0; i < 20; ++i) step();
  ASSERT_TRUE(scope.ok()) << scope.status();
  EXPECT_EQ(scope.graph().num_nodes(), nodes);
  EXPECT_TRUE(first_step_node.expired());
}

TEST(EagerScopeTest, LayersBuildOnFirstCall) {
  Scope scope = Scope::NewEagerScope();
  auto model = Sequential::Make({Dense::Make(4, {.activation = ops::Relu}), Dense::Make(1)});
  Output y = (*model)(scope, ops::Const<float>(scope, {1, 2, 3}, {1, 3}));
  ASSERT_TRUE(scope.ok()) << scope.status();
  EXPECT_EQ(y.value().shape(), TensorShape({1, 1}));
  std::vector<std::string> names;
  for (const auto& v : GlobalVariables(scope.graph())) names.push_back(v->name());
  // A second layer's scope is made unique, as in graph mode.
  EXPECT_THAT(names, ElementsAre("sequential/dense/kernel", "sequential/dense/bias",
                                 "sequential/dense_1/kernel", "sequential/dense_1/bias"));
  (*model)(scope, ops::Const<float>(scope, {1, 2, 3}, {1, 3}));
  EXPECT_EQ(GlobalVariables(scope.graph()).size(), 4u);
}

// f(x, w) = sum(relu(x · w) * x · w), differentiated both ways.
std::vector<Output> BuildAndDifferentiate(const Scope& scope, std::vector<Output>* values) {
  auto w = Variable::Create(scope, "w", ops::Const<float>(scope, {0.5f, -1, 2, 0.25f}, {2, 2}));
  Output x = ops::Const<float>(scope, {1, -2, 3, 4}, {2, 2});
  auto f = [&] {
    Output xw = ops::MatMul(scope, x, w->value());
    return ops::Sum(scope, ops::Mul(scope, ops::Relu(scope, xw), xw), {0, 1});
  };
  if (!scope.eager()) {
    Output y = f();
    values->push_back(y);
    return *AddGradients(scope, {y}, {w->handle(), x});
  }
  GradientTape tape(scope);
  Output y = f();
  values->push_back(y);
  return *tape.Gradient(y, {w->handle(), x});
}

TEST(GradientTapeTest, MatchesAddGradients) {
  Scope graph = Scope::NewRootScope();
  std::vector<Output> graph_y;
  std::vector<Output> graph_grads = BuildAndDifferentiate(graph, &graph_y);
  ASSERT_TRUE(graph.ok()) << graph.status();
  auto session = *Session::Create(graph.graph());
  ASSERT_TRUE(session->Run({}, {}, {GlobalVariablesInitializer(graph)}).ok());
  std::vector<Tensor> expected =
      *session->Run({}, {graph_y[0], graph_grads[0], graph_grads[1]}, {});

  Scope eager = Scope::NewEagerScope();
  std::vector<Output> eager_y;
  std::vector<Output> eager_grads = BuildAndDifferentiate(eager, &eager_y);
  ASSERT_TRUE(eager.ok()) << eager.status();
  EXPECT_TRUE(SameTensor(eager_y[0].value(), expected[0]));
  EXPECT_TRUE(SameTensor(eager_grads[0].value(), expected[1]));
  EXPECT_TRUE(SameTensor(eager_grads[1].value(), expected[2]));
}

TEST(GradientTapeTest, OnlyRecordsWhileActiveAndNeedsAnEagerScope) {
  Scope scope = Scope::NewEagerScope();
  Output x = ops::Const<float>(scope, {3});
  Output before = ops::Square(scope, x);
  GradientTape tape(scope);
  Output y = ops::Mul(scope, before, 2.0f);
  std::vector<Output> grads = *tape.Gradient(y, {x, before});
  EXPECT_FALSE(grads[0].valid());  // Square ran before the tape
  EXPECT_THAT(Floats(grads[1].value()), ElementsAre(2));

  Scope graph = Scope::NewRootScope();
  GradientTape graph_tape(graph);
  EXPECT_THAT(graph_tape.Gradient(ops::Const<float>(graph, {1}), std::vector<Output>{}),
              StatusIs(StatusCode::kFailedPrecondition, "AddGradients"));
  EXPECT_THAT(AddGradients(scope, {y}, {x}),
              StatusIs(StatusCode::kFailedPrecondition, "GradientTape"));
}

TEST(EagerOptimizerTest, SlotsAppearOnTheFirstUpdate) {
  Scope scope = Scope::NewEagerScope();
  auto layer = Dense::Make(2);
  auto optimizer = Adam::Make({.learning_rate = 0.1f});
  Output x = ops::Const<float>(scope, {1, 2}, {1, 2});
  Output y = (*layer)(scope, x);
  ASSERT_TRUE(scope.ok()) << scope.status();
  EXPECT_EQ(optimizer->GetSlotVariable(*layer->kernel(), "m"), nullptr);
  EXPECT_EQ(optimizer->GetNonSlotVariable("beta1_power"), nullptr);
  Output kernel_before = layer->kernel()->value();
  optimizer->Minimize(scope, [&] { return ops::Sum(scope, (*layer)(scope, x), {0, 1}); });
  ASSERT_TRUE(scope.ok()) << scope.status();
  auto m = optimizer->GetSlotVariable(*layer->kernel(), "m");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->name(), "dense/kernel/Adam");
  EXPECT_THAT(Floats(optimizer->GetNonSlotVariable("beta1_power")->value().value()),
              ElementsAre(0.9f * 0.9f));
  EXPECT_FALSE(SameTensor(kernel_before.value(), layer->kernel()->value().value()));
}

// As a TensorFlow eager tensor, a result does not keep the ops it came
// from once no tape needs them: a step's loss kept by the caller keeps
// neither the activations nor the reads of the variables, so the optimizer
// updates the variables in place, step after step, instead of copying them.
TEST(EagerOptimizerTest, AKeptLossKeepsNoValueItCameFrom) {
  Scope scope = Scope::NewEagerScope();
  auto layer = Dense::Make(64, {.activation = ops::Relu});
  auto optimizer = Adam::Make({.learning_rate = 0.01f});
  Output x = ops::Const(scope, Tensor::FromVector(std::vector<float>(8 * 32, 0.5f), {8, 32}));
  std::vector<Output> losses;  // every step's loss, kept
  auto step = [&] {
    optimizer->Minimize(scope, [&] {
      losses.push_back(ops::Sum(scope, ops::Square(scope, (*layer)(scope, x)), {0, 1}));
      return losses.back();
    });
    ASSERT_TRUE(scope.ok()) << scope.status();
  };
  // The buffer the variable holds now; the read that shows it is dropped.
  auto kernel_buffer = [&] {
    return reinterpret_cast<uintptr_t>(layer->kernel()->value().value().raw_data());
  };
  // Under ThreadSanitizer every update copies (see IsExclusive in
  // ops/variable_ops.cc), so only the dropped inputs can be checked there.
#ifdef CKFLOW_TSAN
  constexpr bool kInPlace = false;
#else
  constexpr bool kInPlace = true;
#endif
  step();  // builds the layer and the slots
  const uintptr_t buffer = kernel_buffer();
  for (int i = 0; i < 3; ++i) {
    step();
    if (kInPlace) {
      EXPECT_EQ(kernel_buffer(), buffer) << "step " << i << " copied the variable";
    }
  }
  for (const Output& loss : losses) {
    EXPECT_TRUE(loss.node()->has_values());  // its own value stays
    EXPECT_EQ(loss.node()->num_inputs(), 0);
  }

  // A tape keeps what it recorded, inputs included, until it is destroyed.
  Output y;
  {
    GradientTape tape(scope);
    y = ops::Square(scope, layer->kernel()->value());
    EXPECT_EQ(y.node()->num_inputs(), 1);
    CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Output> grads, tape.Gradient(y, {layer->kernel()}));
    EXPECT_EQ(y.node()->num_inputs(), 1);
    ASSERT_TRUE(grads[0].valid());
    EXPECT_EQ(grads[0].node()->num_inputs(), 0);  // computed after recording stopped
  }
  EXPECT_EQ(y.node()->num_inputs(), 0);
  EXPECT_EQ(y.value().shape(), TensorShape({32, 64}));
}

// The Regress model of examples/regress.cc, with a deterministic start.

std::shared_ptr<Sequential> RegressModel() {
  return Sequential::Make(
      {Dense::Make(10,
                   {.kernel_initializer = testing::WavyInitializer(0), .name = "input_transform"}),
       Dense::Make(10, {.activation = ops::Relu,
                        .kernel_initializer = testing::WavyInitializer(1),
                        .name = "hidden"}),
       Dense::Make(1, {.kernel_initializer = testing::WavyInitializer(2), .name = "output"})});
}

std::vector<std::pair<Tensor, Tensor>> Batches(int n) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<std::pair<Tensor, Tensor>> out;
  for (int b = 0; b < n; ++b) {
    Tensor x(DT_FLOAT, TensorShape({16, 4}));
    Tensor y(DT_FLOAT, TensorShape({16, 1}));
    for (int i = 0; i < 16; ++i) {
      float* v = &x.flat<float>()[4 * i];
      for (int j = 0; j < 4; ++j) v[j] = u(rng);
      y.flat<float>()[i] = 2 * v[0] - v[1] + 0.5f * v[2] * v[3];
    }
    out.emplace_back(x, y);
  }
  return out;
}

TEST(EagerOptimizerTest, HundredAdamStepsMatchGraphMode) {
  const auto batches = Batches(100);

  Scope graph = Scope::NewRootScope();
  auto graph_model = RegressModel();
  auto graph_adam = Adam::Make({.learning_rate = 0.01f});
  Output x = ops::Placeholder(graph, DT_FLOAT, {.shape = {-1, 4}});
  Output y = ops::Placeholder(graph, DT_FLOAT, {.shape = {-1, 1}});
  Output loss = losses::MeanSquaredError(graph, y, (*graph_model)(graph, x));
  Output train = graph_adam->Minimize(graph, loss);
  ASSERT_TRUE(graph.ok()) << graph.status();
  auto session = *Session::Create(graph.graph());
  ASSERT_TRUE(session->Run({}, {}, {GlobalVariablesInitializer(graph)}).ok());
  for (const auto& [bx, by] : batches) {
    ASSERT_TRUE(session->Run({{x, bx}, {y, by}}, {}, {train}).ok());
  }

  Scope eager = Scope::NewEagerScope();
  auto eager_model = RegressModel();
  auto eager_adam = Adam::Make({.learning_rate = 0.01f});
  for (const auto& [bx, by] : batches) {
    eager_adam->Minimize(eager, [&] {
      return losses::MeanSquaredError(eager, ops::Const(eager, by),
                                      (*eager_model)(eager, ops::Const(eager, bx)));
    });
  }
  ASSERT_TRUE(eager.ok()) << eager.status();

  const auto graph_vars = GlobalVariables(graph.graph());
  const auto eager_vars = GlobalVariables(eager.graph());
  ASSERT_EQ(graph_vars.size(), 20u);  // 6 weights, 12 slots, 2 beta powers
  testing::ExpectSameVariables(
      graph_vars, [&](const Variable& v) { return (*session->Run({}, {v.value()}))[0]; },
      eager_vars, 1e-6f, 1e-3f);
}

}  // namespace
}  // namespace ckflow
