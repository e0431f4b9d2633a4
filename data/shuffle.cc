#include "data/shuffle.h"

#include <cstddef>
#include <numeric>
#include <utility>

namespace ckflow {
namespace {

constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ULL;

uint64_t Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

std::vector<int64_t> ShuffledIndices(int64_t n, uint64_t seed, int64_t epoch) {
  if (n <= 0) return {};
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  uint64_t state = seed ^ Mix(static_cast<uint64_t>(epoch));
  for (int64_t i = n - 1; i > 0; --i) {
    state += kGolden;
    const uint64_t j = Mix(state) % static_cast<uint64_t>(i + 1);
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
  return order;
}

}  // namespace ckflow
