// What the windowed-op tests (conv_ops_test.cc, pooling_ops_test.cc) share:
// TensorFlow's output-size rule written out naively, NHWC indexing, and
// runs under a fixed number of threads.
//
// Thread safety: pure functions; RunWithThreads sets oneTBB's limits for
// the duration of the call.

#ifndef CKFLOW_TESTS_OPS_WINDOW_TEST_UTIL_H_
#define CKFLOW_TESTS_OPS_WINDOW_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <tbb/global_control.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/tensor.h"
#include "graph/graph.h"
#include "tests/ops/op_test_util.h"

namespace ckflow::testing {

// Output size and padding before, along one dimension.
struct NaiveDim {
  int64_t out;
  int64_t pad;
};

inline NaiveDim WindowDim(int64_t in, int64_t window, int64_t dilation, int64_t stride,
                          const std::string& padding, int64_t before = 0, int64_t after = 0) {
  const int64_t span = (window - 1) * dilation + 1;
  if (padding == "VALID") return {(in - span) / stride + 1, 0};
  if (padding == "EXPLICIT") return {(in + before + after - span) / stride + 1, before};
  const int64_t out = (in + stride - 1) / stride;
  return {out, std::max<int64_t>(0, (out - 1) * stride + span - in) / 2};
}

// Index of [a, b, c, d] in a row-major tensor of dims `s`.
inline int64_t At(const std::vector<int64_t>& s, int64_t a, int64_t b, int64_t c, int64_t d) {
  return ((a * s[1] + b) * s[2] + c) * s[3] + d;
}

// Evaluates `fetch` with up to `threads` oneTBB threads (more than the
// machine's cores if asked: the kernels' splits must not depend on it).
inline StatusOr<Tensor> RunWithThreads(const Output& fetch, int threads,
                                       const std::vector<std::pair<Output, Tensor>>& feeds = {}) {
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, threads);
  tbb::task_arena arena(threads);
  StatusOr<Tensor> result = InternalError("not run");
  arena.execute([&] { result = Evaluate(fetch, feeds); });
  return result;
}

// gtest's name of a parameterized case: the case's `name`.
template <typename Case>
std::string ParamName(const ::testing::TestParamInfo<Case>& info) {
  return info.param.name;
}

}  // namespace ckflow::testing

#endif  // CKFLOW_TESTS_OPS_WINDOW_TEST_UTIL_H_
