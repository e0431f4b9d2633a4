// Session semantics with fake ops: pruning, feeds, fetches, errors, the plan
// and kernel caches, resources, a graph that grows. Concurrency is in
// session_concurrency_test.cc.
#include "runtime/session.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"
#include "ops/variable_ops.h"
#include "runtime/session_internal.h"
#include "tests/runtime/fake_ops.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

using internal::SessionInternals;
using testing::CounterResource;
using testing::FakeOps;
using ::testing::HasSubstr;

std::vector<float> Values(const Tensor& t) {
  auto f = t.flat<float>();
  return {f.begin(), f.end()};
}

class SessionTest : public ::testing::Test {
 protected:
  std::unique_ptr<Session> NewSession(const Graph& graph) {
    StatusOr<std::unique_ptr<Session>> s = Session::Create(graph, {.registry = &ops_.registry()});
    CKFLOW_CHECK(s.ok());
    return std::move(s).value();
  }
  Output Vec(const Scope& s, std::vector<float> v) { return ops_.Const(s, Tensor::FromVector(v)); }

  FakeOps ops_;
  Scope root_ = Scope::NewRootScope();
};

TEST_F(SessionTest, CreateFailsWithTheGraphsBuildError) {
  Output f = Vec(root_, {1, 2});
  Output i = ops_.Const(root_, Tensor::FromVector<int32_t>({1, 2}));
  ops_.Add(root_.WithOpName("bad"), f, i);
  ASSERT_FALSE(root_.ok());
  StatusOr<std::unique_ptr<Session>> s =
      Session::Create(root_.graph(), {.registry = &ops_.registry()});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status(), root_.status());
  EXPECT_THAT(s.status().message(), HasSubstr("bad"));
}

TEST_F(SessionTest, DefaultRegistryIsTheStandardOps) {
  Output a = ops::Const(root_, Tensor::FromVector<float>({1, 2}));
  Output b = ops::Add(root_, a, a);
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Session> session, Session::Create(root_.graph()));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, session->Run({}, {b}));
  EXPECT_EQ(Values(out[0]), (std::vector<float>{2, 4}));
}

TEST_F(SessionTest, FetchesComputedValuesInOrder) {
  Output a = Vec(root_, {1, 2});
  Output b = Vec(root_, {10, 20});
  Output c = ops_.Add(root_, a, b);
  auto session = NewSession(root_.graph());
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, session->Run({}, {c, a, c}));
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(Values(out[0]), (std::vector<float>{11, 22}));
  EXPECT_EQ(Values(out[1]), (std::vector<float>{1, 2}));
  EXPECT_EQ(Values(out[2]), (std::vector<float>{11, 22}));
}

TEST_F(SessionTest, PrunesToWhatFetchesNeed) {
  Output unfed = ops_.Placeholder(root_, DT_FLOAT, {2});
  Output a = Vec(root_, {1, 2});
  Output needed = ops_.Add(root_, a, a);
  ops_.Add(root_, unfed, a);
  ops_.Log(root_, "pruned");
  ops_.Fail(root_, StatusCode::kInternal, "pruned");
  auto session = NewSession(root_.graph());
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, session->Run({}, {needed}));
  EXPECT_EQ(Values(out[0]), (std::vector<float>{2, 4}));
  EXPECT_TRUE(ops_.log().empty());
  // Kernels are made only for the nodes the plan runs.
  EXPECT_EQ(ops_.factory_calls("Placeholder"), 0);
  EXPECT_EQ(ops_.factory_calls("Fail"), 0);
}

TEST_F(SessionTest, PruningFollowsControlInputs) {
  Output a = Vec(root_, {1, 2});
  Output logged = ops_.Log(root_, "dependency");
  Output b = ops_.Add(root_.WithControlDependencies({logged}), a, a);
  auto session = NewSession(root_.graph());
  CKFLOW_ASSERT_OK(session->Run({}, {b}).status());
  EXPECT_EQ(ops_.log(), std::vector<std::string>{"dependency"});
}

TEST_F(SessionTest, UnfedPlaceholderInsideTheSubgraphFailsNamingIt) {
  Output x = ops_.Placeholder(root_.WithOpName("x"), DT_FLOAT, {2});
  Output y = ops_.Add(root_, x, x);
  auto session = NewSession(root_.graph());
  Status s = session->Run({}, {y}).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("x (Placeholder): a Placeholder must be fed"));
}

TEST_F(SessionTest, FeedReplacesAnyNodesOutput) {
  // The failing node is fed, so it never runs.
  Output broken = ops_.Fail(root_.WithOpName("broken"), StatusCode::kInternal, "ran");
  Output y = ops_.Add(root_, broken, broken);
  auto session = NewSession(root_.graph());
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out,
                              session->Run({{broken, Tensor::Scalar(3.0f)}}, {y}));
  EXPECT_EQ(out[0].scalar<float>(), 6.0f);
  EXPECT_EQ(ops_.factory_calls("Fail"), 0);
}

TEST_F(SessionTest, FetchingAFedOutputReturnsTheFedTensor) {
  Output x = ops_.Placeholder(root_, DT_FLOAT, {2});
  auto session = NewSession(root_.graph());
  Tensor fed = Tensor::FromVector<float>({5, 6});
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, session->Run({{x, fed}}, {x}));
  EXPECT_TRUE(out[0].SharesBufferWith(fed));
}

// Forwarding (KernelContext::ForwardInputOrAllocateOutput): a kernel may
// write into an input's buffer only when nothing else can see it.
TEST_F(SessionTest, TheLastReaderOfAnIntermediateWritesInItsBuffer) {
  Output x = ops_.Placeholder(root_, DT_FLOAT, {3});
  Output a = ops_.Negate(root_, x);
  Output b = ops_.Negate(root_, a);
  auto session = NewSession(root_.graph());
  Tensor fed = Tensor::FromVector<float>({1, -2, 3});
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, session->Run({{x, fed}}, {b}));
  EXPECT_THAT(Values(out[0]), ::testing::ElementsAre(1, -2, 3));
  // The caller keeps the fed tensor, so the first Negate may not touch it.
  EXPECT_THAT(Values(fed), ::testing::ElementsAre(1, -2, 3));
  EXPECT_THAT(ops_.log(), ::testing::ElementsAre("new buffer", "in place"));
}

TEST_F(SessionTest, AFetchedOrConstantValueIsNeverWrittenInPlace) {
  Output c = Vec(root_, {4, 5});
  Output a = ops_.Negate(root_, c);
  Output b = ops_.Negate(root_, a);
  auto session = NewSession(root_.graph());
  for (int run = 0; run < 2; ++run) {
    CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, session->Run({}, {a, b}));
    EXPECT_THAT(Values(out[0]), ::testing::ElementsAre(-4, -5));
    EXPECT_THAT(Values(out[1]), ::testing::ElementsAre(4, 5));
  }
  EXPECT_THAT(ops_.log(), ::testing::Each("new buffer"));
}

TEST_F(SessionTest, AValueOtherNodesStillReadIsNotWrittenInPlace) {
  Output x = ops_.Placeholder(root_, DT_FLOAT, {2});
  Output a = ops_.Negate(root_, x);
  Output b = ops_.Negate(root_, a);
  Output c = ops_.Add(root_, a, Vec(root_, {10, 10}));
  Output d = ops_.Add(root_, a, a);  // one node reading a twice
  auto session = NewSession(root_.graph());
  for (int run = 0; run < 20; ++run) {
    CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out,
                                session->Run({{x, Tensor::FromVector<float>({1, 2})}}, {b, c, d}));
    EXPECT_THAT(Values(out[0]), ::testing::ElementsAre(1, 2));
    EXPECT_THAT(Values(out[1]), ::testing::ElementsAre(9, 8));
    EXPECT_THAT(Values(out[2]), ::testing::ElementsAre(-2, -4));
  }
}

TEST_F(SessionTest, FeedsAndVariablesKeepTheirValuesUnderElementwiseOps) {
  // The standard kernels: Relu forwards where it may; a fed tensor and a
  // variable's value are not its to overwrite.
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_FLOAT, {.shape = PartialShape({3})});
  Output v = ops::VarHandleOp(root, DT_FLOAT, PartialShape({3}), "v");
  Output init =
      ops::AssignVariableOp(root, v, ops::Const(root, Tensor::FromVector<float>({-1, 2, -3})));
  Output read = ops::ReadVariableOp(root, v, DT_FLOAT);
  Output relu_fed = ops::Relu(root, x);
  Output relu_read = ops::Relu(root, read);
  Output relu_chain = ops::Relu(root, ops::Neg(root, read));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Session> session, Session::Create(root.graph()));
  CKFLOW_ASSERT_OK(session->Run({}, {}, {init.node()}).status());
  Tensor fed = Tensor::FromVector<float>({-4, 5, -6});
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out,
                              session->Run({{x, fed}}, {relu_fed, relu_read, relu_chain}));
  EXPECT_THAT(Values(out[0]), ::testing::ElementsAre(0, 5, 0));
  EXPECT_THAT(Values(out[1]), ::testing::ElementsAre(0, 2, 0));
  EXPECT_THAT(Values(out[2]), ::testing::ElementsAre(1, 0, 3));
  EXPECT_THAT(Values(fed), ::testing::ElementsAre(-4, 5, -6));
  CKFLOW_ASSERT_OK_AND_ASSIGN(out, session->Run({}, {read}));
  EXPECT_THAT(Values(out[0]), ::testing::ElementsAre(-1, 2, -3));
}

TEST_F(SessionTest, FeedsByNodeNameAndOutputName) {
  Output x = ops_.Placeholder(root_.WithOpName("x"), DT_FLOAT, {2});
  Node* split = ops_.Split2(root_.WithOpName("split"), x);
  Output sum = ops_.Add(root_, Output(split, 0), Output(split, 1));
  auto session = NewSession(root_.graph());
  // "x" is output 0 of x; "split:1" replaces only the second output.
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out,
                              session->Run({{"x", Tensor::FromVector<float>({1, 2})},
                                            {"split:1", Tensor::FromVector<float>({100, 200})}},
                                           {sum, Output(split, 1)}));
  EXPECT_EQ(Values(out[0]), (std::vector<float>{101, 202}));
  EXPECT_EQ(Values(out[1]), (std::vector<float>{100, 200}));
}

TEST_F(SessionTest, BadFeedsAreInvalidArgumentNamingTheFeed) {
  Output x = ops_.Placeholder(root_.WithOpName("x"), DT_FLOAT, {2, -1});
  Output y = ops_.Add(root_.WithOpName("y"), x, x);
  Scope other = Scope::NewRootScope();
  Output foreign = ops_.Placeholder(other.WithOpName("foreign"), DT_FLOAT, {2});
  const Tensor good = Tensor(DT_FLOAT, TensorShape({2, 3}));
  struct Case {
    std::string label;
    std::vector<Feed> feeds;
    std::string expected;  // in the message
  };
  const std::vector<Case> cases = {
      {"wrong dtype", {{x, Tensor(DT_INT32, TensorShape({2, 3}))}}, "feed 'x:0': a int32"},
      {"wrong rank", {{x, Tensor(DT_FLOAT, TensorShape({2}))}}, "feed 'x:0': shape [2]"},
      {"wrong dim", {{"x", Tensor(DT_FLOAT, TensorShape({3, 3}))}}, "feed 'x': shape [3,3]"},
      {"no buffer", {{x, Tensor()}}, "feed 'x:0': a invalid"},
      {"unknown name", {{"nope", good}}, "feed 'nope': no such node"},
      {"unknown name:index", {{"nope:1", good}}, "feed 'nope:1': no such node"},
      {"index out of range", {{"x:1", good}}, "feed 'x:1': node 'x' has 1 output(s)"},
      {"other graph", {{foreign, good}}, "feed 'foreign:0' is from another graph"},
      {"invalid output", {{Output(), good}}, "feed 0 is an invalid Output"},
      {"fed twice", {{x, good}, {"x:0", good}}, "feed 'x:0': x:0 is already fed by feed 'x:0'"},
  };
  auto session = NewSession(root_.graph());
  for (const Case& c : cases) {
    Status s = session->Run(c.feeds, {y}).status();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.label << ": " << s;
    EXPECT_THAT(s.message(), HasSubstr(c.expected)) << c.label;
  }
  // None of them left a plan or a half-run step behind: a good feed works.
  CKFLOW_EXPECT_OK(session->Run({{x, good}}, {y}).status());
}

TEST_F(SessionTest, BadFetchesAndTargetsAreInvalidArgument) {
  Output x = Vec(root_.WithOpName("x"), {1});
  Scope other = Scope::NewRootScope();
  Output foreign = Vec(other.WithOpName("foreign"), {1});
  auto session = NewSession(root_.graph());
  struct Case {
    std::vector<Output> fetches, targets;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {{foreign}, {}, "fetch 'foreign:0' is from another graph"},
      {{Output(x.node(), 1)}, {}, "fetch 'x:1': node 'x' has 1 output(s)"},
      {{x, Output()}, {}, "fetch 1 is an invalid Output"},
      {{}, {foreign}, "target 'foreign:0' is from another graph"},
  };
  for (const Case& c : cases) {
    Status s = session->Run({}, c.fetches, c.targets).status();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), HasSubstr(c.expected));
  }
}

TEST_F(SessionTest, FetchBuiltAfterAFailedStepReportsTheBuildError) {
  Output a = Vec(root_, {1, 2});
  auto session = NewSession(root_.graph());
  Output bad = ops_.Add(root_.WithOpName("late"), a, ops_.Const(root_, Tensor::Scalar(1)));
  ASSERT_FALSE(bad.valid());
  Status s = session->Run({}, {bad}).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("fetch 0 is an invalid Output"));
  EXPECT_THAT(s.message(), HasSubstr("late (Add)"));
}

TEST_F(SessionTest, OpErrorNamesNodeAndTypeKeepsCodeAndSkipsTheRest) {
  Output bad = ops_.Fail(root_.NewSubScope("layer").WithOpName("bad"), StatusCode::kOutOfRange,
                         "index 7 is past the end");
  Output after = ops_.Log(root_.WithControlDependencies({bad}), "after");
  auto session = NewSession(root_.graph());
  Status s = session->Run({}, {}, {after}).status();
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_EQ(s.message(), "layer/bad (Fail): index 7 is past the end");
  EXPECT_TRUE(ops_.log().empty());
}

TEST_F(SessionTest, ExceptionsInKernelsBecomeStatuses) {
  Output runtime_error = ops_.Throw(root_.WithOpName("thrower"), false);
  Output bad_alloc = ops_.Throw(root_.WithOpName("hog"), true);
  auto session = NewSession(root_.graph());
  Status s = session->Run({}, {runtime_error}).status();
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_THAT(s.message(), HasSubstr("thrower (Throw): kernel threw: kernel exploded"));
  s = session->Run({}, {bad_alloc}).status();
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("hog (Throw)"));
}

TEST_F(SessionTest, KernelBreakingItsContractIsInternalError) {
  struct Case {
    std::string mode, expected;
  };
  const std::vector<Case> cases = {
      {"unset", "kernel did not set output 0"},
      {"dtype", "kernel produced int32 for output 0, declared float32"},
      {"shape", "kernel produced shape [3] for output 0, inferred [2]"},
  };
  for (const Case& c : cases) {
    Output out = ops_.BadOutput(root_.WithOpName(c.mode), c.mode);
    auto session = NewSession(root_.graph());
    Status s = session->Run({}, {out}).status();
    EXPECT_EQ(s.code(), StatusCode::kInternal) << c.mode;
    EXPECT_THAT(s.message(), HasSubstr(c.mode + " (BadOutput): " + c.expected));
  }
}

TEST_F(SessionTest, OpMissingFromTheRegistryIsNotFound) {
  Output a = Vec(root_, {1});
  ops_.Add(root_.WithOpName("sum"), a, a);
  OpRegistry only_const;
  OpDef def = ops_.op("Const");
  CKFLOW_ASSERT_OK(only_const.Register(std::move(def)));
  StatusOr<std::unique_ptr<Session>> session =
      Session::Create(root_.graph(), {.registry = &only_const});
  ASSERT_TRUE(session.ok());
  Status s = (*session)->Run({}, {Output(root_.graph().FindNode("sum"))}).status();
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("sum (Add): op type 'Add' is not in"));
}

TEST_F(SessionTest, KernelFactoryErrorNamesTheNode) {
  // A Const without its "value" attribute: built through a registry whose
  // Const has a lenient shape function, run with the strict factory.
  OpRegistry lenient;
  CKFLOW_ASSERT_OK(lenient.Register({.type = "Const", .shape_fn = [](InferenceContext& c) {
                                       c.AddOutput(DT_FLOAT, PartialShape::Scalar());
                                       return OkStatus();
                                     }}));
  root_.AddNode(*lenient.Find("Const"), {});
  Output c(root_.graph().FindNode("Const"));
  auto session = NewSession(root_.graph());
  Status s = session->Run({}, {c}).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("Const (Const): missing attribute 'value'"));

  // An op without a kernel factory is Unimplemented.
  auto no_kernel = Session::Create(root_.graph(), {.registry = &lenient});
  ASSERT_TRUE(no_kernel.ok());
  s = (*no_kernel)->Run({}, {c}).status();
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_THAT(s.message(), HasSubstr("Const (Const): op has no kernel"));
}

TEST_F(SessionTest, RepeatedRunsUseTheCachedPlanAndKernels) {
  Output x = ops_.Placeholder(root_, DT_FLOAT, {1});
  Output a = Vec(root_, {1});
  Output y = ops_.Add(root_, x, a);
  Output z = ops_.Add(root_, y, a);
  auto session = NewSession(root_.graph());
  for (int i = 0; i < 5; ++i) {
    CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out,
                                session->Run({{x, Tensor::FromVector<float>({float(i)})}}, {z}));
    EXPECT_EQ(Values(out[0]), std::vector<float>{i + 2.0f});
  }
  EXPECT_EQ(SessionInternals::num_cached_plans(*session), 1);
  EXPECT_EQ(ops_.factory_calls("Add"), 2);
  EXPECT_EQ(ops_.factory_calls("Const"), 1);

  // A new signature is a new plan over the same kernels.
  CKFLOW_ASSERT_OK(session->Run({{x, Tensor::FromVector<float>({0})}}, {y}).status());
  EXPECT_EQ(SessionInternals::num_cached_plans(*session), 2);
  EXPECT_EQ(SessionInternals::num_kernels(*session), 3);
  EXPECT_EQ(ops_.factory_calls("Add"), 2);
}

TEST_F(SessionTest, FailedPlanningIsNotCached) {
  Output x = ops_.Placeholder(root_, DT_FLOAT, {1});
  auto session = NewSession(root_.graph());
  EXPECT_FALSE(session->Run({{"missing", Tensor::Scalar(1.0f)}}, {x}).ok());
  EXPECT_EQ(SessionInternals::num_cached_plans(*session), 0);
}

TEST_F(SessionTest, GraphExtendedAfterCreateIsPickedUp) {
  Output a = Vec(root_, {1, 2});
  auto session = NewSession(root_.graph());
  CKFLOW_ASSERT_OK(session->Run({}, {a}).status());
  Output b = ops_.Add(root_, a, a);
  Output c = ops_.Add(root_, b, a);
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, session->Run({}, {c}));
  EXPECT_EQ(Values(out[0]), (std::vector<float>{3, 6}));
  EXPECT_EQ(ops_.factory_calls("Const"), 1);
}

TEST_F(SessionTest, ResourcesLiveInTheSessionNotTheGraph) {
  Output count = ops_.Count(root_, "steps");
  auto first = NewSession(root_.graph());
  auto second = NewSession(root_.graph());
  for (int64_t i = 1; i <= 3; ++i) {
    CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, first->Run({}, {count}));
    EXPECT_EQ(out[0].scalar<int64_t>(), i);
  }
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, second->Run({}, {count}));
  EXPECT_EQ(out[0].scalar<int64_t>(), 1);
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto counter, first->resources().Lookup<CounterResource>("steps"));
  EXPECT_EQ(counter->value.load(), 3);
}

TEST_F(SessionTest, TargetsRunWithoutFetches) {
  Output a = ops_.Log(root_, "a");
  Output b = ops_.Log(root_, "b");
  auto session = NewSession(root_.graph());
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, session->Run({}, {}, {a, b, a}));
  EXPECT_TRUE(out.empty());
  std::vector<std::string> log = ops_.log();
  std::sort(log.begin(), log.end());
  EXPECT_EQ(log, (std::vector<std::string>{"a", "b"}));
}

TEST_F(SessionTest, AnOutputNothingReadsIsDroppedOnceItsNodeHasRun) {
  Output held = ops_.Hold(root_);
  Output check = ops_.LogHeld(root_.WithControlDependencies({held}));
  auto session = NewSession(root_.graph());
  CKFLOW_ASSERT_OK(session->Run({}, {}, {check}).status());
  // Fetched, it stays until the run hands it over.
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, session->Run({}, {held}, {check}));
  EXPECT_EQ(Values(out[0]), (std::vector<float>{1, 2}));
  EXPECT_EQ(ops_.log(), (std::vector<std::string>{"dropped", "kept"}));
}

TEST_F(SessionTest, SharedInputsSurviveUntilTheirLastConsumer) {
  // x has five consumers at different depths; each must read it intact even
  // though the executor drops tensors after their last use.
  Output x = ops_.Placeholder(root_, DT_FLOAT, {3});
  Output acc = x;
  for (int i = 0; i < 5; ++i) acc = ops_.Add(root_, acc, x);
  auto session = NewSession(root_.graph());
  for (int step = 0; step < 3; ++step) {
    CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out,
                                session->Run({{x, Tensor::FromVector<float>({1, 2, 3})}}, {acc}));
    EXPECT_EQ(Values(out[0]), (std::vector<float>{6, 12, 18}));
  }
}

}  // namespace
}  // namespace ckflow
