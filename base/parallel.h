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

// The number of threads oneTBB may use right now (honours
// tbb::global_control set by the caller).
int MaxParallelism();

}  // namespace ckflow

#endif  // CKFLOW_BASE_PARALLEL_H_
