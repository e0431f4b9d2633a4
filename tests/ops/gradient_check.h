// Gradients checked against central finite differences in double precision,
// through the real Session: the harness the gradient tests of every op
// family share.
//
// Thread safety: one check per thread; each builds its own session.

#ifndef CKFLOW_TESTS_OPS_GRADIENT_CHECK_H_
#define CKFLOW_TESTS_OPS_GRADIENT_CHECK_H_

#include <memory>
#include <random>
#include <vector>

#include "base/tensor.h"
#include "graph/graph.h"
#include "runtime/session.h"

namespace ckflow::testing {

// A float64 tensor of shape `dims` with elements uniform in [lo, hi].
Tensor RandomDoubles(const std::vector<int64_t>& dims, double lo, double hi, std::mt19937& rng);

// A session over the scope's graph; aborts if it cannot be made.
std::unique_ptr<Session> NewSession(const Scope& root);

// Feeds xs[i] = values[i].
std::vector<Feed> FeedsOf(const std::vector<Output>& xs, const std::vector<Tensor>& values);

// Checks the gradients AddGradients builds for xs (float64 placeholders fed
// `values`) against central differences of sum(w * y), with steps of
// `step`, for a random weight tensor w (fed as grad_ys, so that every
// element of y's gradient matters); each within `tolerance` * max(1,
// |numeric|).
void ExpectGradientsMatchFiniteDifferences(const Scope& root, Output y,
                                           const std::vector<Output>& xs,
                                           std::vector<Tensor> values, double step,
                                           double tolerance, std::mt19937& rng);

}  // namespace ckflow::testing

#endif  // CKFLOW_TESTS_OPS_GRADIENT_CHECK_H_
