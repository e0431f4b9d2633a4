// The per-thread limit a session puts on kernels' ParallelFor
// (SessionOptions::intra_op_parallelism_threads). Internal to ckflow.
//
// Thread safety: the limit is per thread; set it on the thread that runs the
// kernel.

#ifndef CKFLOW_BASE_PARALLEL_INTERNAL_H_
#define CKFLOW_BASE_PARALLEL_INTERNAL_H_

#include <cstdint>

namespace ckflow::internal {

// The most threads one ParallelFor on this thread may use from now on (0: no
// limit beyond MaxParallelism; 1: loops run inline). Returns the previous
// value, for the caller to restore.
int SetIntraOpThreads(int threads);

// How many BackgroundCalls' tasks are queued or running (their state kept
// until the task has run, even when the waiter ran fn itself). For tests.
int64_t PendingBackgroundCalls();

}  // namespace ckflow::internal

#endif  // CKFLOW_BASE_PARALLEL_INTERNAL_H_
