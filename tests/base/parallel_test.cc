// ParallelFor: every index is visited once, the caller's writes are seen by
// every chunk and the chunks' writes by the caller (which `./run.sh tsan`
// checks), under several oneTBB parallelism limits; every chunk runs in the
// caller's denormal mode. BackgroundCall: each function runs once, on
// another thread when one is free and in Wait() when none is.
#include "base/parallel.h"

#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "base/denormal_internal.h"
#include "base/parallel_internal.h"

namespace ckflow {
namespace {

class ParallelForTest : public ::testing::TestWithParam<int> {
 protected:
  ParallelForTest() : limit_(tbb::global_control::max_allowed_parallelism, GetParam()) {}
  tbb::global_control limit_;
};

INSTANTIATE_TEST_SUITE_P(Parallelism, ParallelForTest, ::testing::Values(1, 2, 4),
                         [](const ::testing::TestParamInfo<int>& param) {
                           return "limit" + std::to_string(param.param);
                         });

TEST_P(ParallelForTest, VisitsEveryIndexOnceAndPublishesWrites) {
  constexpr int64_t kN = 1 << 16;
  std::vector<int64_t> in(kN);
  for (int64_t i = 0; i < kN; ++i) in[i] = 3 * i;  // the caller's writes
  std::vector<int64_t> out(kN, -1);
  std::atomic<int64_t> chunks{0};
  for (int round = 0; round < 20; ++round) {
    ParallelFor(kN, /*cost_per_unit=*/100, [&](int64_t begin, int64_t end) {
      chunks.fetch_add(1, std::memory_order_relaxed);
      for (int64_t i = begin; i < end; ++i) out[i] = in[i] + round;
    });
    int64_t wrong = 0;
    for (int64_t i = 0; i < kN; ++i) wrong += out[i] != 3 * i + round;
    ASSERT_EQ(wrong, 0) << "round " << round;
  }
  if (MaxParallelism() > 1) {
    EXPECT_GT(chunks.load(), 20);  // really split
  }
}

TEST_P(ParallelForTest, ParallelInvokeRunsBothAndPublishesTheirWrites) {
  for (int round = 0; round < 50; ++round) {
    std::vector<int> a(1000, -1), b(1000, -1);
    ParallelInvoke([&] { std::fill(a.begin(), a.end(), round); },
                   [&] {
                     // Nested parallelism inside one side, as a restore's
                     // index parse may do.
                     ParallelFor(1000, 100000, [&](int64_t begin, int64_t end) {
                       for (int64_t i = begin; i < end; ++i) b[i] = round + 1;
                     });
                   });
    ASSERT_EQ(std::count(a.begin(), a.end(), round), 1000) << "round " << round;
    ASSERT_EQ(std::count(b.begin(), b.end(), round + 1), 1000) << "round " << round;
  }
}

// A chunk computes a subnormal product: 0 when the caller flushes
// subnormals, the IEEE value when it keeps them, whichever thread runs it.
TEST_P(ParallelForTest, ChunksRunInTheCallersDenormalMode) {
  if (internal::kFlushDenormalBits == 0) GTEST_SKIP() << "no denormal mode on this CPU";
  constexpr int64_t kN = 1 << 14;
  volatile float tiny = 1e-20f;  // not folded at compile time
  std::vector<float> out(kN);
  for (bool flush : {true, false, true}) {
    const internal::ScopedDenormals mode(flush);
    ASSERT_EQ(internal::FlushesDenormals(), flush);
    std::atomic<int64_t> wrong_mode{0};
    ParallelFor(kN, 1000, [&](int64_t begin, int64_t end) {
      if (internal::FlushesDenormals() != flush) wrong_mode.fetch_add(1);
      for (int64_t i = begin; i < end; ++i) out[i] = tiny * tiny;
    });
    EXPECT_EQ(wrong_mode.load(), 0) << "flush " << flush;
    const float want = flush ? 0.0f : 1e-20f * 1e-20f;
    EXPECT_EQ(std::count(out.begin(), out.end(), want), kN) << "flush " << flush;
  }
}

TEST_P(ParallelForTest, BackgroundCallRunsEachFunctionOnceAndPublishesItsWrites) {
  constexpr int kCalls = 200;
  std::vector<int> in(kCalls);
  std::vector<int> out(kCalls, -1);
  std::vector<std::atomic<int>> runs(kCalls);
  {
    BackgroundCall call;
    for (int i = 0; i < kCalls; ++i) {
      in[i] = 7 * i;  // written before Start, read by fn
      call.Start([&, i] {
        runs[i].fetch_add(1, std::memory_order_relaxed);
        out[i] = in[i] + 1;
      });
      // Start waits for the previous call; every third one is waited for
      // here, and the last by the destructor.
      if (i % 3 == 0) {
        call.Wait();
        EXPECT_EQ(out[i], 7 * i + 1);
      }
    }
  }
  for (int i = 0; i < kCalls; ++i) {
    EXPECT_EQ(runs[i].load(), 1) << i;
    EXPECT_EQ(out[i], 7 * i + 1) << i;
  }
}

// Returns once `condition()` holds or a minute has passed: a liveness
// bound for a call no one waits for, not a timing.
bool Eventually(const std::function<bool()>& condition) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!condition() && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
  return condition();
}

bool AwaitFlag(const std::atomic<bool>& flag) {
  return Eventually([&] { return flag.load(std::memory_order_acquire); });
}

// Overlap is the point: with a second thread allowed, fn runs while the
// caller goes on and never waits for it, in the caller's denormal mode.
TEST(BackgroundCallTest, RunsOnAnotherThreadWhileTheCallerGoesOn) {
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, 2);
  if (MaxParallelism() < 2) GTEST_SKIP() << "one thread only";
  for (bool flush : {true, false}) {
    internal::ScopedDenormals mode(flush);
    std::atomic<bool> ran{false};
    std::thread::id ran_on;
    bool flushed = !flush;
    BackgroundCall call;
    call.Start([&] {
      ran_on = std::this_thread::get_id();
      flushed = internal::FlushesDenormals();
      ran.store(true, std::memory_order_release);
    });
    ASSERT_TRUE(AwaitFlag(ran));
    EXPECT_NE(ran_on, std::this_thread::get_id());
    EXPECT_EQ(flushed, flush);
    call.Wait();
  }
}

// A waiter that finds no thread free runs fn itself and leaves its task
// queued, holding the call's state until a thread takes it. The state is
// kept meanwhile (listed, so a task libtbb drops unrun at exit is no leak)
// and freed once that task has run.
TEST(BackgroundCallTest, ATaskItsWaiterOvertookIsFreedWhenItRuns) {
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, 2);
  if (MaxParallelism() < 2) GTEST_SKIP() << "one thread only";
  // The one worker is held by a call until the test lets it go.
  std::atomic<bool> started{false};
  std::atomic<bool> release{false};
  BackgroundCall busy;
  busy.Start([&] {
    started.store(true, std::memory_order_release);
    while (!release.load(std::memory_order_acquire)) std::this_thread::yield();
  });
  ASSERT_TRUE(AwaitFlag(started));
  const int64_t before = internal::PendingBackgroundCalls();
  std::thread::id ran_on;
  {
    BackgroundCall call;
    call.Start([&] { ran_on = std::this_thread::get_id(); });
    call.Wait();
  }
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  EXPECT_EQ(internal::PendingBackgroundCalls(), before + 1);  // its task, still queued
  release.store(true, std::memory_order_release);
  busy.Wait();
  EXPECT_TRUE(Eventually([] { return internal::PendingBackgroundCalls() == 0; }));
}

TEST(BackgroundCallTest, WaitRunsTheFunctionWhenNoOtherThreadMay) {
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, 1);
  std::thread::id ran_on;
  BackgroundCall call;
  call.Start([&] { ran_on = std::this_thread::get_id(); });
  call.Wait();
  EXPECT_EQ(ran_on, std::this_thread::get_id());
}

TEST(ScopedDenormalsTest, NestedScopesRestoreTheModeTheyFound) {
  if (internal::kFlushDenormalBits == 0) GTEST_SKIP() << "no denormal mode on this CPU";
  const bool before = internal::FlushesDenormals();
  {
    const internal::ScopedDenormals outer(!before);
    EXPECT_EQ(internal::FlushesDenormals(), !before);
    {
      const internal::ScopedDenormals inner(before);
      EXPECT_EQ(internal::FlushesDenormals(), before);
    }
    EXPECT_EQ(internal::FlushesDenormals(), !before);
  }
  EXPECT_EQ(internal::FlushesDenormals(), before);
}

}  // namespace
}  // namespace ckflow
