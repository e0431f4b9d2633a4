// ShuffledIndices: a permutation, reproducible from (seed, epoch) alone,
// different for another epoch or seed, and the algorithm its header states
// (restated here step by step).

#include "data/shuffle.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

namespace ckflow {
namespace {

TEST(ShuffledIndices, IsAPermutation) {
  for (int64_t n : {1, 2, 7, 1000}) {
    std::vector<int64_t> order = ShuffledIndices(n, 3, 0);
    std::sort(order.begin(), order.end());
    std::vector<int64_t> identity(n);
    std::iota(identity.begin(), identity.end(), 0);
    EXPECT_EQ(order, identity) << n;
  }
  EXPECT_TRUE(ShuffledIndices(0, 3, 0).empty());
  EXPECT_TRUE(ShuffledIndices(-5, 3, 0).empty());
}

TEST(ShuffledIndices, DependsOnSeedAndEpochOnly) {
  EXPECT_EQ(ShuffledIndices(500, 7, 2), ShuffledIndices(500, 7, 2));
  EXPECT_NE(ShuffledIndices(500, 7, 2), ShuffledIndices(500, 7, 3));
  EXPECT_NE(ShuffledIndices(500, 7, 2), ShuffledIndices(500, 8, 2));
}

TEST(ShuffledIndices, FollowsTheStatedAlgorithm) {
  auto mix = [](uint64_t z) {
    z ^= z >> 30;
    z *= 0xbf58476d1ce4e5b9ULL;
    z ^= z >> 27;
    z *= 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  };
  const uint64_t seed = 12345;
  const int64_t epoch = 4;
  std::vector<int64_t> want = {0, 1, 2, 3, 4, 5};
  uint64_t state = seed ^ mix(epoch);
  for (int64_t i = 5; i > 0; --i) {
    state += 0x9e3779b97f4a7c15ULL;
    std::swap(want[i], want[mix(state) % (i + 1)]);
  }
  EXPECT_EQ(ShuffledIndices(6, seed, epoch), want);
}

}  // namespace
}  // namespace ckflow
