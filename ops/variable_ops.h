// The resource-variable ops, as TensorFlow has them: VarHandleOp,
// ReadVariableOp, AssignVariableOp, AssignAddVariableOp,
// AssignSubVariableOp, VarIsInitializedOp. Most code uses the Variable class
// (ops/variables.h), which builds these; the builders are here for code that
// works on raw handles (checkpoint restore ops, gradients).
//
// A VarHandleOp outputs a DT_RESOURCE scalar pointing at the variable named
// by its shared_name in the running session's ResourceMgr (created on first
// use), so two sessions over one graph hold independent values. The kernels
// check the variable's dtype and declared shape on every write and fail with
// FailedPrecondition naming the variable when it is read before being
// assigned.
//
// Thread safety: graph building is single-threaded. The kernels lock the
// variable they touch, so they may run concurrently.

#ifndef CKFLOW_OPS_VARIABLE_OPS_H_
#define CKFLOW_OPS_VARIABLE_OPS_H_

#include <string>

#include "graph/graph.h"
#include "graph/op_def.h"
#include "ops/input.h"

namespace ckflow {

// Registers the ops above in `registry`.
Status RegisterVariableOps(OpRegistry& registry);

namespace ops {

// A handle to the variable `shared_name` of `dtype` and declared `shape`.
Output VarHandleOp(const Scope& scope, DataType dtype, const PartialShape& shape,
                   const std::string& shared_name);
// The variable's value. `shape` (optional) is its declared shape, used only
// for build-time shape inference of what consumes the read.
Output ReadVariableOp(const Scope& scope, Output handle, DataType dtype,
                      const PartialShape& shape = PartialShape::Unknown());
// Ops without outputs return Output(node): usable as a target or a control
// dependency, not as data.
//
// value -> variable. Fails at run time if value's dtype or shape does not
// fit the variable's declaration.
Output AssignVariableOp(const Scope& scope, Output handle, Output value);
// variable += delta, variable -= delta (same shape).
Output AssignAddVariableOp(const Scope& scope, Output handle, Output delta);
Output AssignSubVariableOp(const Scope& scope, Output handle, Output delta);
// The rows of the variable at `indices` (int32/int64, any shape), without
// reading the whole value out: TensorFlow's ResourceGather (what
// ResourceVariable.sparse_read and an embedding lookup run). `shape`
// (optional) is the variable's declared shape, for build-time inference.
// An index outside [0, rows) fails with InvalidArgument naming it and the
// variable. Its gradient is sparse (AsIndexedSlices, ops/gradients.h).
Output ResourceGather(const Scope& scope, Output resource, Input indices, DataType dtype,
                      const PartialShape& shape = PartialShape::Unknown());
// variable[indices[i], ...] += updates[i, ...] (ResourceScatterAdd), -=
// (ResourceScatterSub) or = (ResourceScatterUpdate), in index order, so a repeated index gets every
// update; updates is indices.shape + the variable's row shape, or a scalar
// for every row. Every index is checked before the variable is touched.
Output ResourceScatterAdd(const Scope& scope, Output resource, Input indices, Input updates);
Output ResourceScatterSub(const Scope& scope, Output resource, Input indices, Input updates);
Output ResourceScatterUpdate(const Scope& scope, Output resource, Input indices, Input updates);
// A bool scalar: has the variable been assigned in this session?
Output VarIsInitializedOp(const Scope& scope, Output handle);

}  // namespace ops
}  // namespace ckflow

#endif  // CKFLOW_OPS_VARIABLE_OPS_H_
