// Resource variables: the Variable object (names, hooks, lists,
// initializers) and the variable ops' run-time behaviour in sessions
// (uninitialized reads, dtype/shape checks, copy-on-write, independence of
// sessions, concurrent updates).
#include "ops/variables.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ops/array_ops.h"
#include "ops/initializers.h"
#include "ops/variable_ops.h"
#include "runtime/session.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<float> Floats(const Tensor& t) {
  auto f = t.flat<float>();
  return {f.begin(), f.end()};
}

class VariablesTest : public ::testing::Test {
 protected:
  std::unique_ptr<Session> NewSession() {
    StatusOr<std::unique_ptr<Session>> s = Session::Create(root_.graph());
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(s).value() : nullptr;
  }
  // Runs `targets`, then fetches `fetch`.
  StatusOr<Tensor> RunAndFetch(Session& session, Output fetch,
                               const std::vector<Output>& targets = {},
                               const std::vector<Feed>& feeds = {}) {
    if (!targets.empty()) CKFLOW_RETURN_IF_ERROR(session.Run(feeds, {}, targets).status());
    CKFLOW_ASSIGN_OR_RETURN(std::vector<Tensor> out, session.Run(feeds, {fetch}));
    return out[0];
  }

  Scope root_ = Scope::NewRootScope();
};

TEST_F(VariablesTest, ReadBeforeInitializationFailsNamingTheVariable) {
  auto w =
      Variable::Create(root_.NewSubScope("dense"), "kernel", ops::Const<float>(root_, {1, 2}, {2}));
  ASSERT_NE(w, nullptr);
  auto session = NewSession();
  StatusOr<std::vector<Tensor>> out = session->Run({}, {w->value()});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(out.status().message()),
              HasSubstr("variable 'dense/kernel' is not initialized"));
}

TEST_F(VariablesTest, InitializerAssignsTheInitialValue) {
  auto w = Variable::Create(root_, "w", ops::Const<float>(root_, {1, 2, 3}, {3}));
  auto session = NewSession();
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor value, RunAndFetch(*session, w->value(), {w->initializer()}));
  EXPECT_THAT(Floats(value), ElementsAre(1, 2, 3));
  EXPECT_EQ(w->dtype(), DT_FLOAT);
  EXPECT_EQ(w->shape(), PartialShape({3}));
}

TEST_F(VariablesTest, NamesFollowTensorFlow) {
  Scope dense = root_.NewSubScope("dense");
  auto a = Variable::Create(dense, "kernel", ops::Const(root_, 1.0f));
  auto b = Variable::Create(dense, "kernel", ops::Const(root_, 1.0f));
  auto c = Variable::Create(dense, "bias", DT_FLOAT, TensorShape({2}), initializers::Zeros());
  ASSERT_TRUE(root_.ok()) << root_.status();
  EXPECT_EQ(a->name(), "dense/kernel");
  EXPECT_EQ(b->name(), "dense/kernel_1");
  EXPECT_EQ(a->handle().node()->name(), "dense/kernel");
  EXPECT_EQ(a->handle().node()->type(), "VarHandleOp");
  EXPECT_EQ(a->initializer().node()->name(), "dense/kernel/Assign");
  EXPECT_EQ(a->value().node()->name(), "dense/kernel/Read/ReadVariableOp");
  EXPECT_EQ(c->initial_value().node()->name().rfind("dense/bias/Initializer/", 0), 0u)
      << c->initial_value().node()->name();
  EXPECT_EQ(a->TypeName(), "Variable float32[]");
  std::vector<SaveableAttribute> attrs = a->Attributes();
  ASSERT_EQ(attrs.size(), 1u);
  EXPECT_EQ(attrs[0].name, "VARIABLE_VALUE");
  EXPECT_EQ(attrs[0].full_name, "dense/kernel");
  EXPECT_EQ(attrs[0].handle, a->handle());
}

TEST_F(VariablesTest, CreationIgnoresTheScopesControlDependencies) {
  Output other = ops::NoOp(root_);
  auto w = Variable::Create(root_.WithControlDependencies({other}), "w", ops::Const(root_, 1.0f));
  ASSERT_NE(w, nullptr);
  EXPECT_TRUE(w->handle().node()->control_inputs().empty());
  EXPECT_TRUE(w->initializer().node()->control_inputs().empty());
}

TEST_F(VariablesTest, BadCreationIsAStickyError) {
  EXPECT_EQ(Variable::Create(root_, "w", Output()), nullptr);
  EXPECT_EQ(root_.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(root_.status().message()), HasSubstr("'w'"));

  Scope other = Scope::NewRootScope();
  EXPECT_EQ(Variable::Create(other, "", ops::Const(other, 1.0f)), nullptr);
  EXPECT_THAT(std::string(other.status().message()), HasSubstr("name"));

  Scope third = Scope::NewRootScope();
  Initializer wrong = [](const Scope& s, DataType, const TensorShape&) {
    return ops::Const(s, 1);  // int32 scalar for a float [2] variable
  };
  EXPECT_EQ(Variable::Create(third, "v", DT_FLOAT, TensorShape({2}), wrong), nullptr);
  EXPECT_EQ(third.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(third.status().message()),
              HasSubstr("variable 'v' is float32[2] but its initializer built int32[]"));
}

TEST_F(VariablesTest, AssignOfAnotherDtypeOrShapeFailsAtBuildTime) {
  auto w = Variable::Create(root_, "w", ops::Const<float>(root_, {1, 2}, {2}));
  EXPECT_FALSE(w->Assign(root_, ops::Const<int32_t>(root_, {1, 2}, {2})).valid());
  EXPECT_EQ(root_.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(root_.status().message()),
              HasSubstr("variable 'w' is float32[2]; cannot assign int32[2]"));

  Scope other = Scope::NewRootScope();
  auto v = Variable::Create(other, "v", ops::Const<float>(other, {1, 2}, {2}));
  EXPECT_FALSE(v->AssignAdd(other, ops::Const<float>(other, {1, 2, 3}, {3})).valid());
  EXPECT_THAT(std::string(other.status().message()),
              HasSubstr("variable 'v' is float32[2]; cannot add float32[3]"));
}

TEST_F(VariablesTest, AssignOfAnotherShapeFailsAtRunTimeNamingTheVariable) {
  auto w = Variable::Create(root_, "w", ops::Const<float>(root_, {1, 2}, {2}));
  Output x = ops::Placeholder(root_, DT_FLOAT);  // unknown shape: checked at run time
  Output assign = w->Assign(root_, x);
  auto session = NewSession();
  Status s = session->Run({{x, Tensor::FromVector<float>({1, 2, 3})}}, {}, {assign}).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("variable 'w' has shape [2]; cannot assign a value of shape [3]"));
}

TEST_F(VariablesTest, RawAssignOfAnotherDtypeFailsAtRunTime) {
  auto w = Variable::Create(root_, "w", ops::Const<float>(root_, {1, 2}, {2}));
  Output assign = ops::AssignVariableOp(root_, w->handle(), ops::Const<double>(root_, {1, 2}, {2}));
  auto session = NewSession();
  Status s = session->Run({}, {}, {assign}).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("variable 'w' is float32; cannot assign a float64"));
}

TEST_F(VariablesTest, AssignAddAndSubUpdateTheValue) {
  auto w = Variable::Create(root_, "w", ops::Const<float>(root_, {1, 2}, {2}));
  Output add = w->AssignAdd(root_, ops::Const<float>(root_, {10, 20}, {2}));
  Output sub = w->AssignSub(root_, ops::Const<float>(root_, {1, 1}, {2}));
  auto session = NewSession();
  CKFLOW_ASSERT_OK(session->Run({}, {}, {w->initializer()}).status());
  CKFLOW_ASSERT_OK(session->Run({}, {}, {add}).status());
  CKFLOW_ASSERT_OK(session->Run({}, {}, {add}).status());
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor value, RunAndFetch(*session, w->value(), {sub}));
  EXPECT_THAT(Floats(value), ElementsAre(20, 41));
}

TEST_F(VariablesTest, AssignAddOnUninitializedVariableFails) {
  auto w = Variable::Create(root_, "w", ops::Const(root_, 1.0f));
  Output add = w->AssignAdd(root_, ops::Const(root_, 1.0f));
  auto session = NewSession();
  Status s = session->Run({}, {}, {add}).status();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("variable 'w' is not initialized"));
}

TEST_F(VariablesTest, IsInitializedTurnsTrueAfterTheInitializer) {
  auto w = Variable::Create(root_, "w", ops::Const(root_, 1.0f));
  Output is_init = w->IsInitialized(root_);
  auto session = NewSession();
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor before, RunAndFetch(*session, is_init));
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor after, RunAndFetch(*session, is_init, {w->initializer()}));
  EXPECT_FALSE(before.scalar<bool>());
  EXPECT_TRUE(after.scalar<bool>());
}

TEST_F(VariablesTest, TwoSessionsHoldIndependentValues) {
  auto w = Variable::Create(root_, "w", ops::Const(root_, 1.0f));
  Output add = w->AssignAdd(root_, ops::Const(root_, 5.0f));
  auto first = NewSession();
  auto second = NewSession();
  CKFLOW_ASSERT_OK(first->Run({}, {}, {w->initializer()}).status());
  CKFLOW_ASSERT_OK(first->Run({}, {}, {add}).status());
  CKFLOW_ASSERT_OK(second->Run({}, {}, {w->initializer()}).status());
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor a, RunAndFetch(*first, w->value()));
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor b, RunAndFetch(*second, w->value()));
  EXPECT_EQ(a.scalar<float>(), 6.0f);
  EXPECT_EQ(b.scalar<float>(), 1.0f);

  auto third = NewSession();  // never initialized
  EXPECT_EQ(third->Run({}, {w->value()}).status().code(), StatusCode::kFailedPrecondition);
}

TEST_F(VariablesTest, AFetchedValueDoesNotChangeWhenTheVariableDoes) {
  auto w = Variable::Create(root_, "w", ops::Const<float>(root_, {1, 2}, {2}));
  Output add = w->AssignAdd(root_, ops::Const<float>(root_, {1, 1}, {2}));
  auto session = NewSession();
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor before, RunAndFetch(*session, w->value(), {w->initializer()}));
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor after, RunAndFetch(*session, w->value(), {add}));
  EXPECT_THAT(Floats(before), ElementsAre(1, 2));
  EXPECT_THAT(Floats(after), ElementsAre(2, 3));
}

TEST_F(VariablesTest, AssignFromAFeedDoesNotAliasTheCallersTensor) {
  auto w = Variable::Create(root_, "w", ops::Const<float>(root_, {0, 0}, {2}));
  Output x = ops::Placeholder(root_, DT_FLOAT, {.shape = {2}});
  Output assign = w->Assign(root_, x);
  auto session = NewSession();
  Tensor fed = Tensor::FromVector<float>({1, 2});
  CKFLOW_ASSERT_OK(session->Run({{x, fed}}, {}, {assign}).status());
  fed.flat<float>()[0] = 99;  // the caller reuses its buffer
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor value, RunAndFetch(*session, w->value()));
  EXPECT_THAT(Floats(value), ElementsAre(1, 2));
}

TEST_F(VariablesTest, HandlesDeclaringOneNameDifferentlyConflict) {
  Output a = ops::VarHandleOp(root_, DT_FLOAT, PartialShape({2}), "shared");
  Output b = ops::VarHandleOp(root_, DT_INT32, PartialShape({2}), "shared");
  auto session = NewSession();
  CKFLOW_ASSERT_OK(session->Run({}, {a}).status());
  Status s = session->Run({}, {b}).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(
      std::string(s.message()),
      HasSubstr("variable 'shared' exists as float32[2]; this handle declares it int32[2]"));
}

TEST_F(VariablesTest, CreatorHooksSeeEveryVariableUntilRemoved) {
  std::vector<std::string> seen;
  int id = AddVariableCreatorHook(
      root_.graph(), [&](const std::shared_ptr<Variable>& v) { seen.push_back(v->name()); });
  Variable::Create(root_, "a", ops::Const(root_, 1.0f));
  Variable::Create(root_, "b", DT_FLOAT, TensorShape({}), initializers::Ones());
  RemoveVariableCreatorHook(root_.graph(), id);
  Variable::Create(root_, "c", ops::Const(root_, 1.0f));
  EXPECT_THAT(seen, ElementsAre("a", "b"));
}

TEST_F(VariablesTest, AHookMayCreateVariables) {
  int calls = 0;
  AddVariableCreatorHook(root_.graph(), [&](const std::shared_ptr<Variable>& v) {
    ++calls;
    if (v->name() == "a") Variable::Create(root_, "made_by_hook", ops::Const(root_, 1.0f));
  });
  Variable::Create(root_, "a", ops::Const(root_, 1.0f));
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(GlobalVariables(root_.graph()).size(), 2u);
}

TEST_F(VariablesTest, ListsAndGlobalInitializerCoverEveryVariable) {
  auto a = Variable::Create(root_, "a", ops::Const(root_, 1.0f));
  auto b = Variable::Create(root_, "b", ops::Const(root_, 2.0f), {.trainable = false});
  auto c = Variable::Create(root_, "c", ops::Const<int64_t>(root_, {3}, {1}));
  ASSERT_TRUE(root_.ok()) << root_.status();
  EXPECT_EQ(GlobalVariables(root_.graph()), (std::vector<std::shared_ptr<Variable>>{a, b, c}));
  EXPECT_EQ(TrainableVariables(root_.graph()), (std::vector<std::shared_ptr<Variable>>{a, c}));

  Output init = GlobalVariablesInitializer(root_);
  EXPECT_EQ(init.node()->name(), "init");
  EXPECT_EQ(GlobalVariablesInitializer(root_).node()->name(), "init_1");
  auto session = NewSession();
  CKFLOW_ASSERT_OK(session->Run({}, {}, {init}).status());
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out,
                              session->Run({}, {a->value(), b->value(), c->value()}));
  EXPECT_EQ(out[0].scalar<float>(), 1.0f);
  EXPECT_EQ(out[1].scalar<float>(), 2.0f);
  EXPECT_EQ(out[2].flat<int64_t>()[0], 3);
}

TEST_F(VariablesTest, VariablesInitializerCoversOnlyItsVariables) {
  auto a = Variable::Create(root_, "a", ops::Const(root_, 1.0f));
  auto b = Variable::Create(root_, "b", ops::Const(root_, 2.0f));
  Output init_a = VariablesInitializer(root_, {a});
  auto session = NewSession();
  CKFLOW_ASSERT_OK(session->Run({}, {}, {init_a}).status());
  EXPECT_TRUE(session->Run({}, {a->value()}).ok());
  EXPECT_EQ(session->Run({}, {b->value()}).status().code(), StatusCode::kFailedPrecondition);
}

TEST_F(VariablesTest, ConcurrentAssignAddsAllLand) {
  auto w = Variable::Create(root_, "w", ops::Fill(root_, {1 << 16}, 0.0f));
  Output add = w->AssignAdd(root_, ops::Fill(root_, {1 << 16}, 1.0f));
  auto session = NewSession();
  CKFLOW_ASSERT_OK(session->Run({}, {}, {w->initializer()}).status());
  constexpr int kThreads = 4, kRuns = 25;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kRuns; ++i) {
        // Reads race the updates: each sees some whole number of them.
        StatusOr<std::vector<Tensor>> out = session->Run({}, {w->value()}, {add});
        ASSERT_TRUE(out.ok()) << out.status();
        EXPECT_EQ((*out)[0].flat<float>()[0], (*out)[0].flat<float>()[(1 << 16) - 1]);
      }
    });
  }
  for (auto& t : threads) t.join();
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor value, RunAndFetch(*session, w->value()));
  for (float x : value.flat<float>()) ASSERT_EQ(x, kThreads * kRuns);
}

}  // namespace
}  // namespace ckflow
