// Symbolic gradients: AddGradients (TensorFlow's tf.gradients) and the
// registry of per-op gradient functions it draws on.
//
//   Output loss = ...;
//   CKFLOW_ASSIGN_OR_RETURN(std::vector<Output> grads,
//                           AddGradients(scope, {loss}, {w->handle(), b}));
//   // grads[0] is d loss / d w (float, the variable's shape); grads[i] is
//   // invalid if loss does not depend on xs[i].
//
// AddGradients adds nodes to the graph that compute the gradient of the sum
// of `ys` with respect to each of `xs`, by reverse accumulation through the
// nodes that lie on a path from some x to some y. Paths run through floating
// point tensors and resource handles only: an integer or bool tensor, a
// StopGradient or any op registered as non-differentiable blocks a path, as
// in TensorFlow. Gradient nodes are named under a "gradients" name scope,
// each op's under "<op name>_grad", e.g. "gradients/dense/MatMul_grad/MatMul".
//
// Variables: the gradient with respect to a variable's handle (a DT_RESOURCE
// output) is the gradient with respect to its value, summed over all of its
// ReadVariableOps on a path to ys.
//
// Where a derivative is not unique, the choices are TensorFlow's: Max and
// Min reductions split the gradient equally among tied elements; Maximum
// and Minimum give a tie to x; Relu's derivative at 0 is 0; the softmax
// cross-entropy gradient assumes label rows that sum to 1. Broadcasting ops
// sum the gradient back to each input's shape, with a runtime op
// (SumToShapeOf) where the shapes are not known when the graph is built.
//
// Thread safety: graph building is single-threaded; AddGradients mutates the
// scope's graph. The standard gradient registry is filled once on first use
// and is read-only afterwards, so StandardGradients() may be used from any
// thread.

#ifndef CKFLOW_OPS_GRADIENTS_H_
#define CKFLOW_OPS_GRADIENTS_H_

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "graph/graph.h"
#include "graph/op_def.h"
#include "ops/input.h"

namespace ckflow {

// Computes the gradients of `op`'s inputs from the gradients of its outputs.
// grad_outputs[i] is the gradient flowing into output i; it is invalid when
// no gradient reaches that output (only ever for ops with several outputs).
// The function fills grad_inputs (already sized to op.num_inputs(), all
// invalid) and leaves invalid the inputs that get no gradient. It builds
// nodes through `scope`, whose name scope is "gradients/<op name>_grad".
// Returns an error naming `op` if it cannot build the gradient; a build error
// left sticky in the scope is reported by AddGradients.
using GradientFunction = Status (*)(const Scope& scope, const Node& op,
                                    const std::vector<Output>& grad_outputs,
                                    std::vector<Output>* grad_inputs);

// Op type -> gradient function. A type registered with a null function is
// known to have no gradient (StopGradient, Shape, random ops): gradients do
// not flow through it, and reaching it is no error.
class GradientRegistry {
 public:
  GradientRegistry() = default;
  GradientRegistry(const GradientRegistry&) = delete;
  GradientRegistry& operator=(const GradientRegistry&) = delete;

  // AlreadyExists if `type` is registered already.
  Status Register(std::string type, GradientFunction fn);
  Status RegisterNoGradient(std::string type) { return Register(std::move(type), nullptr); }

  // True if `type` is registered (with a function or as non-differentiable).
  bool Contains(std::string_view type) const;
  // The function for `type`: nullptr if the type is unknown or registered as
  // non-differentiable (tell the two apart with Contains).
  GradientFunction Find(std::string_view type) const;
  std::vector<std::string> ListTypes() const;

 private:
  std::map<std::string, GradientFunction, std::less<>> fns_;
};

// The gradients of every standard op that has one, filled from one visible
// list of plain functions (RegisterMathGradients, ...) on first use.
const GradientRegistry& StandardGradients();

// Adds the gradient of sum(ys) with respect to each x to the scope's graph
// and returns one Output per x, in order: the gradient, with x's dtype and
// shape (a variable's value dtype and shape for a resource handle), or an
// invalid Output if no differentiable path leads from x to any y.
//
// grad_ys, if given, has one entry per y: the gradient flowing into that y
// (same dtype, compatible shape); by default each y gets ones of its own
// shape. A y that is not floating point contributes nothing, and the
// gradient with respect to an x that is not floating point (or a resource
// handle) is always invalid.
//
// Errors (InvalidArgument unless noted): an invalid or foreign Output among
// ys, xs or grad_ys; grad_ys of another length, dtype or shape than ys; a
// node on a path from xs to ys whose op type has no gradient (the message
// names the node and its op type); the scope's sticky build error, or one
// raised while building gradient nodes (prefixed with the node whose
// gradient was being built).
// `registry` defaults to StandardGradients().
StatusOr<std::vector<Output>> AddGradients(const Scope& scope, const std::vector<Output>& ys,
                                           const std::vector<Output>& xs,
                                           const std::vector<Output>& grad_ys = {},
                                           const GradientRegistry* registry = nullptr);

// A gradient that is zero but in some rows: TensorFlow's IndexedSlices, what
// the gradient of a gather (ops::Gather along axis 0, ops::ResourceGather,
// an embedding lookup) with respect to its params is. Row values[i] belongs
// to row indices[i] of the dense gradient; a row named twice adds.
//
// AddGradients returns every gradient as an Output, the dense one; for a
// sparse gradient that Output is computed by an UnsortedSegmentSum of
// values at indices, which runs only if something consumes it (a fetch, a
// dense op). AsIndexedSlices recovers the rows, which is how the optimizers
// update only the rows a step looked up (ResourceScatterAdd and the sparse
// apply ops) instead of the whole variable. Gradients reaching one tensor
// from several gathers stay sparse (their rows concatenated); a dense one
// among them makes the sum dense, as in TensorFlow.
struct IndexedSlices {
  Output values;   // [n] + the shape of a row
  Output indices;  // [n], int32 or int64
  Output dense;    // the same gradient as a dense tensor (the Output given)
};
// The rows of `gradient` if it is sparse (made by a gather's gradient, or a
// sum of such), else nullopt.
std::optional<IndexedSlices> AsIndexedSlices(const Output& gradient);

// Registers the ops that only gradient functions build (below); one group
// of the standard ops.
Status RegisterGradientOps(OpRegistry& registry);

namespace ops {

// `input` broadcast (NumPy rules) to `shape`, an int32/int64 vector
// (TensorFlow's BroadcastTo). float, double, int32, int64, bool.
Output BroadcastTo(const Scope& scope, Input input, Input shape);
// `input_shape` (an int32/int64 vector) with the dimensions `axes` (scalar
// or vector, negative counting from the end) set to 1: the shape of a
// reduction over `axes` with keep_dims.
Output ReducedShape(const Scope& scope, Input input_shape, Input axes);

}  // namespace ops
}  // namespace ckflow

#endif  // CKFLOW_OPS_GRADIENTS_H_
