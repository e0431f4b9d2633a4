// How many threads a session's steps use: with oneTBB limited to one thread,
// or with SessionOptions asking for one, every kernel and every piece of a
// kernel's ParallelFor runs on the thread that called Run. Checked by thread
// id, not by timing.
#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/parallel.h"
#include "graph/graph.h"
#include "graph/op_def.h"
#include "runtime/session.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

using testing::StatusIs;

// Where the kernels of a graph ran: each "WhereRun" kernel records its own
// thread, then checks the pieces of a ParallelFor big enough to be split.
class WhereRun {
 public:
  WhereRun() {
    CKFLOW_CHECK(registry_
                     .Register({.type = "WhereRun",
                                .shape_fn = [](InferenceContext&) { return OkStatus(); },
                                .kernel_factory = StatelessKernel([this](KernelContext&) {
                                  const std::thread::id kernel = std::this_thread::get_id();
                                  Record(kernel);
                                  ParallelFor(1 << 16, 1 << 12, [&](int64_t, int64_t) {
                                    if (std::this_thread::get_id() != kernel) ++strays_;
                                  });
                                  return OkStatus();
                                })})
                     .ok());
  }

  const OpRegistry& registry() const { return registry_; }
  // `n` independent WhereRun nodes joined by one more, as targets.
  std::vector<Output> Build(const Scope& root, int n) const {
    const OpDef* def = registry_.Find("WhereRun");
    std::vector<Output> nodes;
    for (int i = 0; i < n; ++i) nodes.push_back(Output(root.AddNode(*def, {})));
    return {Output(root.WithControlDependencies(nodes).AddNode(*def, {}))};
  }
  std::set<std::thread::id> kernels() const {
    std::lock_guard<std::mutex> lock(mu_);
    return kernels_;
  }
  // Pieces of a kernel's ParallelFor that ran on another thread than it.
  int strays() const { return strays_.load(); }
  int runs() const {
    std::lock_guard<std::mutex> lock(mu_);
    return runs_;
  }

 private:
  void Record(std::thread::id kernel) {
    std::lock_guard<std::mutex> lock(mu_);
    kernels_.insert(kernel);
    ++runs_;
  }

  OpRegistry registry_;
  mutable std::mutex mu_;
  std::set<std::thread::id> kernels_;  // guarded by mu_
  int runs_ = 0;                       // guarded by mu_
  std::atomic<int> strays_{0};
};

constexpr int kWide = 16;
constexpr int kSteps = 20;

// Runs `steps` steps of a wide graph of WhereRun nodes.
void RunSteps(const WhereRun& where, const Scope& root, const std::vector<Output>& targets,
              SessionOptions options) {
  options.registry = &where.registry();
  StatusOr<std::unique_ptr<Session>> session = Session::Create(root.graph(), options);
  CKFLOW_ASSERT_OK(session.status());
  for (int step = 0; step < kSteps; ++step) {
    CKFLOW_ASSERT_OK((*session)->Run({}, {}, targets).status());
  }
}

TEST(SessionThreadsTest, GlobalControlOfOneKeepsEveryKernelOnTheCallingThread) {
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, 1);
  WhereRun where;
  Scope root = Scope::NewRootScope();
  std::vector<Output> targets = where.Build(root, kWide);
  RunSteps(where, root, targets, {});
  EXPECT_EQ(where.runs(), (kWide + 1) * kSteps);
  const std::set<std::thread::id> caller = {std::this_thread::get_id()};
  EXPECT_EQ(where.kernels(), caller);
  EXPECT_EQ(where.strays(), 0);
}

TEST(SessionThreadsTest, OneInterAndOneIntraOpThreadKeepEverythingOnTheCallingThread) {
  WhereRun where;
  Scope root = Scope::NewRootScope();
  std::vector<Output> targets = where.Build(root, kWide);
  RunSteps(where, root, targets,
           {.inter_op_parallelism_threads = 1, .intra_op_parallelism_threads = 1});
  EXPECT_EQ(where.runs(), (kWide + 1) * kSteps);
  const std::set<std::thread::id> caller = {std::this_thread::get_id()};
  EXPECT_EQ(where.kernels(), caller);
  EXPECT_EQ(where.strays(), 0);
}

TEST(SessionThreadsTest, OneInterOpThreadRunsEveryNodeOnTheCallingThread) {
  WhereRun where;
  Scope root = Scope::NewRootScope();
  std::vector<Output> targets = where.Build(root, kWide);
  RunSteps(where, root, targets, {.inter_op_parallelism_threads = 1});
  EXPECT_EQ(where.kernels(), std::set<std::thread::id>{std::this_thread::get_id()});
}

TEST(SessionThreadsTest, OneIntraOpThreadKeepsEachKernelsLoopOnItsThread) {
  WhereRun where;
  Scope root = Scope::NewRootScope();
  std::vector<Output> targets = where.Build(root, kWide);
  RunSteps(where, root, targets, {.intra_op_parallelism_threads = 1});
  EXPECT_EQ(where.runs(), (kWide + 1) * kSteps);
  EXPECT_EQ(where.strays(), 0);
}

TEST(SessionThreadsTest, ParallelismOptionsMustNotBeNegative) {
  Scope root = Scope::NewRootScope();
  EXPECT_THAT(Session::Create(root.graph(), {.inter_op_parallelism_threads = -1}).status(),
              StatusIs(StatusCode::kInvalidArgument, "inter_op_parallelism_threads is -1"));
  EXPECT_THAT(Session::Create(root.graph(), {.intra_op_parallelism_threads = -2}).status(),
              StatusIs(StatusCode::kInvalidArgument, "intra_op_parallelism_threads is -2"));
}

}  // namespace
}  // namespace ckflow
