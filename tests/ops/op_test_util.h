// Test utilities for the standard ops: a reference evaluator that runs
// kernels without the Session, random inputs, and naive references.
//
// Evaluator runs the nodes a fetch needs one after another in id order
// (inputs always have smaller ids than their consumers), each through the
// kernel its OpDef makes, exactly as a Session would call it, with errors
// prefixed "node (Type): " as the Session does. It is deliberately naive:
// the ops are tested here, the executor in tests/runtime.
//
// Thread safety: one Evaluator per thread.

#ifndef CKFLOW_TESTS_OPS_OP_TEST_UTIL_H_
#define CKFLOW_TESTS_OPS_OP_TEST_UTIL_H_

#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "base/resource.h"
#include "base/status.h"
#include "base/tensor.h"
#include "graph/graph.h"
#include "ops/input.h"
#include "ops/variables.h"

namespace ckflow::testing {

class Evaluator {
 public:
  explicit Evaluator(const Graph& graph) : graph_(graph) {}

  // The values of `fetches`, with `feeds` replacing outputs. Kernels are
  // made once per node and kept, so stateful ops advance across calls.
  StatusOr<std::vector<Tensor>> Run(const std::vector<std::pair<Output, Tensor>>& feeds,
                                    const std::vector<Output>& fetches);
  StatusOr<Tensor> Run(const Output& fetch,
                       const std::vector<std::pair<Output, Tensor>>& feeds = {});

 private:
  const Graph& graph_;
  ResourceMgr resources_;
  std::map<int, Kernel> kernels_;
};

// Evaluates one output of the scope's graph with a fresh Evaluator.
StatusOr<Tensor> Evaluate(const Output& fetch,
                          const std::vector<std::pair<Output, Tensor>>& feeds = {});
// The same under a oneTBB parallelism limit of `threads`.
StatusOr<Tensor> EvaluateWithThreads(const Output& fetch, int threads);

// Builds build(root.WithOpName(name), a, b) on two `dtype` placeholders "a"
// and "b" of unknown shape, runs it fed with tensors of shapes a_shape and
// b_shape, and returns the run's status: for run-time shape checks.
using BinaryBuilder = Output (*)(const Scope&, ops::Input, ops::Input);
Status RunWithFedShapes(BinaryBuilder build, const std::string& name, const TensorShape& a_shape,
                        const TensorShape& b_shape, DataType dtype = DT_FLOAT);

// A tensor of `dtype` (float, double, int32, int64, bool) with elements
// uniform in [lo, hi] (integers: whole numbers in that range).
Tensor RandomTensor(DataType dtype, const TensorShape& shape, std::mt19937& rng, double lo = -2,
                    double hi = 2);
// Elements as doubles.
std::vector<double> ToDoubles(const Tensor& t);

// Fills a float32 variable with 0.5 sin(phase + 0.7 i): a start that graph
// and eager programs share (random initializers draw per-graph seeds).
Initializer WavyInitializer(float phase);
// A tensor of `dtype` holding `values` (converted with static_cast).
Tensor MakeTensor(DataType dtype, const TensorShape& shape, const std::vector<double>& values);

// Naive NumPy broadcasting, for references: the output shape, or an empty
// optional-like flag `ok` false if incompatible.
bool BroadcastShape(const TensorShape& a, const TensorShape& b, TensorShape* out);
// out[i] = fn(a[ia], b[ib]) over the broadcast shape, by explicit index
// arithmetic (no collapsing, no fast paths).
std::vector<double> BroadcastReference(const std::vector<double>& a, const TensorShape& as,
                                       const std::vector<double>& b, const TensorShape& bs,
                                       const std::function<double(double, double)>& fn,
                                       TensorShape* out_shape);

// Row-major multi-indices, for references: the multi-index of flat index
// i in `dims`, the flat index of `index`, and the element count of `dims`.
std::vector<int64_t> Unflatten(int64_t i, const std::vector<int64_t>& dims);
int64_t Flatten(const std::vector<int64_t>& index, const std::vector<int64_t>& dims);
int64_t Count(const std::vector<int64_t>& dims);

// Expects `actual` to have `shape` and elements within atol + rtol * |e|
// of `expected` (NaN matches NaN); reports the first few mismatches.
void ExpectNear(const Tensor& actual, const TensorShape& shape, const std::vector<double>& expected,
                double rtol, double atol, const std::string& what);
// Expects bit-identical tensors (dtype, shape, bytes).
void ExpectIdentical(const Tensor& a, const Tensor& b, const std::string& what);
// Expects a graph-mode model's float32 variables (their values read by
// `read`, e.g. from a session) and the same model's trained eagerly to pair
// up by name, in order, with elements within `rtol` * max(|graph|, floor).
void ExpectSameVariables(const std::vector<std::shared_ptr<Variable>>& graph_vars,
                         const std::function<Tensor(const Variable&)>& read,
                         const std::vector<std::shared_ptr<Variable>>& eager_vars, float rtol,
                         float floor);

}  // namespace ckflow::testing

#endif  // CKFLOW_TESTS_OPS_OP_TEST_UTIL_H_
