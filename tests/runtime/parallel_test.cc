// ParallelFor: every index is visited once, the caller's writes are seen by
// every chunk and the chunks' writes by the caller (which `./run.sh tsan`
// checks), under several oneTBB parallelism limits.
#include "runtime/parallel.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include <tbb/global_control.h>

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

}  // namespace
}  // namespace ckflow
