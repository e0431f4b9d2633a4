// Intra-op parallelism on the one oneTBB scheduler the session also uses.
//
// Kernels split big loops with ParallelFor; small loops run inline, so tiny
// ops pay nothing. There is no second thread pool anywhere in ckflow: the
// session's task groups and these loops share oneTBB's workers, so a kernel
// running inside a parallel graph step does not oversubscribe the cores.
//
// Thread safety: callable from any thread, including from inside a kernel.

#ifndef CKFLOW_BASE_PARALLEL_H_
#define CKFLOW_BASE_PARALLEL_H_

#include <cstdint>
#include <functional>

namespace ckflow {

// Calls fn(begin, end) over disjoint ranges covering [0, n). `cost_per_unit`
// is a rough count of cycles per element; the work is split only when
// n * cost_per_unit is large enough to pay for the scheduling.
void ParallelFor(int64_t n, int64_t cost_per_unit, const std::function<void(int64_t, int64_t)>& fn);

// Runs a() and b(), on two threads when one is free, and returns when both
// are done. For two independent pieces of substantial work (each worth at
// least tens of microseconds).
void ParallelInvoke(const std::function<void()>& a, const std::function<void()>& b);

// One piece of work the caller overlaps with its own (a write-behind, say):
// Start(fn) hands fn to a free thread of the scheduler and returns; Wait()
// returns once fn has run. If no thread has taken fn by then, Wait() runs
// it on the caller's: a waiter runs its own fn and nothing else (it does
// not pick up the scheduler's other tasks), so it may wait while holding a
// lock. With one thread allowed (MaxParallelism() or the op's), fn runs in
// Wait(). Not thread-safe: one owner starts and waits.
class BackgroundCall {
 public:
  BackgroundCall();
  ~BackgroundCall();  // waits
  BackgroundCall(const BackgroundCall&) = delete;
  BackgroundCall& operator=(const BackgroundCall&) = delete;

  // Waits for the previous fn, then starts this one.
  void Start(std::function<void()> fn);
  void Wait();

  struct State;  // parallel.cc's: shared with the task that may run fn

 private:
  State* state_ = nullptr;  // a reference; null: nothing started, or waited for
};

// The number of threads oneTBB may use right now (honours
// tbb::global_control set by the caller).
int MaxParallelism();

}  // namespace ckflow

#endif  // CKFLOW_BASE_PARALLEL_H_
