// What the Keras layer tests share: deterministic inputs, a layer run
// through a Session (its output and its variables' values), and the
// comparisons of an output against a reference.

#ifndef CKFLOW_TESTS_OPS_LAYER_TEST_UTIL_H_
#define CKFLOW_TESTS_OPS_LAYER_TEST_UTIL_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/tensor.h"
#include "ops/array_ops.h"
#include "ops/layers.h"
#include "ops/variables.h"
#include "runtime/session.h"

namespace ckflow::testing {

// A float32 tensor of `dims` filled with values in [-1, 1) from `seed` (a
// fixed linear congruential sequence: the same on every machine).
inline Tensor FilledTensor(const std::vector<int64_t>& dims, uint32_t seed) {
  Tensor t(DT_FLOAT, TensorShape(dims));
  uint32_t state = seed * 2654435761u + 1;
  for (float& v : t.flat<float>()) {
    state = state * 1664525u + 1013904223u;
    v = static_cast<float>(state >> 8) / static_cast<float>(1u << 23) - 1.0f;
  }
  return t;
}

inline std::vector<std::string> VariableNames(const std::vector<std::shared_ptr<Variable>>& vars) {
  std::vector<std::string> names;
  for (const auto& v : vars) names.push_back(v->name());
  return names;
}

// One call of a layer on a placeholder fed `x`, with its variables
// initialized, run in a session that stays open for Value().
struct LayerRun {
  Scope root = Scope::NewRootScope();
  std::unique_ptr<Session> session;
  Tensor output;

  // The value of `variable` now, or an invalid tensor on error.
  Tensor Value(const std::shared_ptr<Variable>& variable) const {
    StatusOr<std::vector<Tensor>> out = session->Run({}, {variable->value()});
    return out.ok() ? (*out)[0] : Tensor();
  }
};

inline StatusOr<LayerRun> RunLayer(Layer& layer, const Tensor& x,
                                   std::optional<bool> training = std::nullopt) {
  LayerRun run;
  Output input = ops::Placeholder(run.root, x.dtype(), {.shape = PartialShape(x.shape())});
  Output y = layer(run.root, input, training);
  Output init = GlobalVariablesInitializer(run.root);
  CKFLOW_RETURN_IF_ERROR(run.root.status());
  CKFLOW_ASSIGN_OR_RETURN(run.session, Session::Create(run.root.graph()));
  CKFLOW_RETURN_IF_ERROR(run.session->Run({}, {}, {init}).status());
  CKFLOW_ASSIGN_OR_RETURN(std::vector<Tensor> out, run.session->Run({{input, x}}, {y}));
  run.output = out[0];
  return run;
}

// The largest |a[i] - b[i]| of a float32 tensor against doubles (infinity
// if the counts differ).
inline double MaxAbsDifference(const Tensor& a, const std::vector<double>& b) {
  if (a.NumElements() != static_cast<int64_t>(b.size())) return INFINITY;
  double worst = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    worst = std::max(worst, std::abs(double{a.flat<float>()[i]} - b[i]));
  }
  return worst;
}

}  // namespace ckflow::testing

#endif  // CKFLOW_TESTS_OPS_LAYER_TEST_UTIL_H_
