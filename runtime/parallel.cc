#include "runtime/parallel.h"

#include <tbb/blocked_range.h>
#include <tbb/global_control.h>
#include <tbb/parallel_for.h>

namespace ckflow {
namespace {
// Below this many cycles a task switch costs more than it saves.
constexpr int64_t kMinCyclesPerTask = 20000;
}  // namespace

void ParallelFor(int64_t n, int64_t cost_per_unit,
                 const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  int64_t cost = cost_per_unit < 1 ? 1 : cost_per_unit;
  if (n * cost < 2 * kMinCyclesPerTask || MaxParallelism() <= 1) {
    fn(0, n);
    return;
  }
  int64_t grain = kMinCyclesPerTask / cost;
  if (grain < 1) grain = 1;
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, grain),
                    [&fn](const tbb::blocked_range<int64_t>& r) { fn(r.begin(), r.end()); });
}

int MaxParallelism() {
  return static_cast<int>(
      tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism));
}

}  // namespace ckflow
