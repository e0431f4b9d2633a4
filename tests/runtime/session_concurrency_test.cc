// The session's parallelism: independent nodes overlap, control edges order
// side effects, and Run is safe from many threads at once. Each test runs
// under several oneTBB parallelism limits; `./run.sh tsan` runs them all
// under ThreadSanitizer.
#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include <algorithm>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/parallel.h"
#include "runtime/session.h"
#include "runtime/session_internal.h"
#include "tests/runtime/fake_ops.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

using testing::FakeOps;

class SessionConcurrencyTest : public ::testing::TestWithParam<int> {
 protected:
  SessionConcurrencyTest() : limit_(tbb::global_control::max_allowed_parallelism, GetParam()) {}

  std::unique_ptr<Session> NewSession() {
    StatusOr<std::unique_ptr<Session>> s =
        Session::Create(root_.graph(), {.registry = &ops_.registry()});
    CKFLOW_CHECK(s.ok());
    return std::move(s).value();
  }

  // Runs fn(thread_index) on `n` threads at once.
  template <typename Fn>
  static void OnThreads(int n, Fn fn) {
    std::vector<std::thread> threads;
    for (int t = 0; t < n; ++t) threads.emplace_back(fn, t);
    for (std::thread& t : threads) t.join();
  }

  tbb::global_control limit_;
  FakeOps ops_;
  Scope root_ = Scope::NewRootScope();
};

INSTANTIATE_TEST_SUITE_P(Parallelism, SessionConcurrencyTest, ::testing::Values(1, 2, 4),
                         [](const ::testing::TestParamInfo<int>& param) {
                           return "limit" + std::to_string(param.param);
                         });

TEST_P(SessionConcurrencyTest, IndependentOpsRunAtTheSameTime) {
  if (MaxParallelism() < 2) GTEST_SKIP() << "one thread cannot overlap two ops";
  // Each Rendezvous kernel waits until both have started: the run finishes
  // only if the two independent nodes really ran at the same time, and fails
  // (rather than hangs) after a bounded wait if they did not.
  Output a = ops_.Rendezvous(root_.WithOpName("a"), 2);
  Output b = ops_.Rendezvous(root_.WithOpName("b"), 2);
  auto session = NewSession();
  CKFLOW_ASSERT_OK(session->Run({}, {a, b}).status());
}

TEST_P(SessionConcurrencyTest, ControlDependenciesOrderSideEffects) {
  // first -> {mid0..mid3} -> last, by control edges only.
  Output first = ops_.Log(root_, "first");
  std::vector<Output> mids;
  for (int i = 0; i < 4; ++i) {
    mids.push_back(ops_.Log(root_.WithControlDependencies({first}), "mid" + std::to_string(i)));
  }
  Output last = ops_.Log(root_.WithControlDependencies(mids), "last");
  auto session = NewSession();
  constexpr int kRuns = 50;
  for (int run = 0; run < kRuns; ++run) {
    CKFLOW_ASSERT_OK(session->Run({}, {}, {last}).status());
  }
  std::vector<std::string> log = ops_.log();
  ASSERT_EQ(log.size(), 6u * kRuns);
  for (int run = 0; run < kRuns; ++run) {
    auto step = log.begin() + 6 * run;
    EXPECT_EQ(step[0], "first") << "run " << run;
    EXPECT_EQ(step[5], "last") << "run " << run;
    std::vector<std::string> middle(step + 1, step + 5);
    std::sort(middle.begin(), middle.end());
    EXPECT_EQ(middle, (std::vector<std::string>{"mid0", "mid1", "mid2", "mid3"}));
  }
}

TEST_P(SessionConcurrencyTest, EightThreadsRunOneSession) {
  // w = (x + x + c) + (x + x + x) = 5x + c, with branches that can overlap.
  Output x = ops_.Placeholder(root_, DT_FLOAT, {2});
  Output c = ops_.Const(root_, Tensor::FromVector<float>({1000, 2000}));
  Output y = ops_.Add(root_, x, x);
  Output z1 = ops_.Add(root_, y, c);
  Output z2 = ops_.Add(root_, y, x);
  Output w = ops_.Add(root_, z1, z2);
  auto session = NewSession();
  constexpr int kThreads = 8;
  constexpr int kRuns = 100;
  std::vector<int> failures(kThreads, 0);
  OnThreads(kThreads, [&](int t) {
    for (int run = 0; run < kRuns; ++run) {
      const float v = static_cast<float>(t * kRuns + run);
      // Odd threads use a second signature, so plans are built concurrently too.
      std::vector<Output> fetches = t % 2 ? std::vector<Output>{w, z1} : std::vector<Output>{w};
      StatusOr<std::vector<Tensor>> out =
          session->Run({{x, Tensor::FromVector<float>({v, -v})}}, fetches);
      if (!out.ok() || out->at(0).flat<float>()[0] != 5 * v + 1000 ||
          out->at(0).flat<float>()[1] != -5 * v + 2000) {
        ++failures[t];
      }
    }
  });
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
  EXPECT_EQ(internal::SessionInternals::num_cached_plans(*session), 2);
  EXPECT_EQ(ops_.factory_calls("Add"), 4);
}

TEST_P(SessionConcurrencyTest, AnErrorStaysInItsOwnRun) {
  Output x = ops_.Placeholder(root_, DT_FLOAT, {1});
  Output checked = ops_.FailIfNegative(root_.WithOpName("check"), x);
  Output y = ops_.Add(root_, checked, x);
  auto session = NewSession();
  constexpr int kThreads = 8;
  std::vector<int> wrong(kThreads, 0);
  OnThreads(kThreads, [&](int t) {
    for (int run = 0; run < 50; ++run) {
      const bool fail = (t + run) % 3 == 0;
      const float v = fail ? -1.0f : static_cast<float>(run);
      StatusOr<std::vector<Tensor>> out = session->Run({{x, Tensor::FromVector<float>({v})}}, {y});
      const bool ok = out.ok() && out->at(0).flat<float>()[0] == 2 * v;
      const bool failed_right =
          !out.ok() && out.status().message().find("check (FailIfNegative)") == 0;
      if (fail ? !failed_right : !ok) ++wrong[t];
    }
  });
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(wrong[t], 0) << "thread " << t;
}

TEST_P(SessionConcurrencyTest, StressManyThreadsManyRunsWideGraph) {
  // 16 chains of 8 adds over x, reduced by a tree: out = x * (1 + 16 * 8)...
  // computed here independently as a sum of the chains' own sums.
  Output x = ops_.Placeholder(root_, DT_FLOAT, {4});
  std::vector<Output> level;
  for (int chain = 0; chain < 16; ++chain) {
    Output acc = x;
    for (int i = 0; i < 8; ++i) acc = ops_.Add(root_, acc, x);  // acc = 9x
    level.push_back(acc);
  }
  while (level.size() > 1) {
    std::vector<Output> next;
    for (size_t i = 0; i + 1 < level.size(); i += 2)
      next.push_back(ops_.Add(root_, level[i], level[i + 1]));
    level = next;
  }
  Output out = level[0];  // 16 * 9x = 144x
  auto session = NewSession();
  constexpr int kThreads = 8;
  constexpr int kRuns = 200;
  std::vector<int> wrong(kThreads, 0);
  OnThreads(kThreads, [&](int t) {
    for (int run = 0; run < kRuns; ++run) {
      const float v = static_cast<float>(t + 1);
      StatusOr<std::vector<Tensor>> r =
          session->Run({{x, Tensor::FromVector<float>({v, 2 * v, 0, -v})}}, {out});
      if (!r.ok()) {
        ++wrong[t];
        continue;
      }
      auto f = r->at(0).flat<float>();
      if (f[0] != 144 * v || f[1] != 288 * v || f[2] != 0 || f[3] != -144 * v) ++wrong[t];
    }
  });
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(wrong[t], 0) << "thread " << t;
}

TEST_P(SessionConcurrencyTest, TwoSessionsOverOneGraphAreIndependent) {
  Output count = ops_.Count(root_, "c");
  auto a = NewSession();
  auto b = NewSession();
  OnThreads(4, [&](int t) {
    Session& s = t % 2 ? *a : *b;
    for (int i = 0; i < 25; ++i) CKFLOW_EXPECT_OK(s.Run({}, {count}).status());
  });
  // 2 threads x 25 runs each; no run of one session touched the other's counter.
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> from_a, a->Run({}, {count}));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> from_b, b->Run({}, {count}));
  EXPECT_EQ(from_a[0].scalar<int64_t>(), 51);
  EXPECT_EQ(from_b[0].scalar<int64_t>(), 51);
}

}  // namespace
}  // namespace ckflow
