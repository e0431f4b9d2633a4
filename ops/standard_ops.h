// The standard op registry: every op ckflow ships, registered from one
// visible list of plain functions (RegisterArrayOps, RegisterMathOps, ...)
// the first time it is asked for. Sessions use it unless given another.
//
// Thread safety: StandardOps() may be called from any thread; the registry
// it returns is immutable.

#ifndef CKFLOW_OPS_STANDARD_OPS_H_
#define CKFLOW_OPS_STANDARD_OPS_H_

#include "graph/op_def.h"

namespace ckflow {

const OpRegistry& StandardOps();

// The OpDef of a standard op; aborts if `type` is not one (a programming
// error in ckflow's own builders, never user input).
const OpDef& StandardOp(std::string_view type);

}  // namespace ckflow

#endif  // CKFLOW_OPS_STANDARD_OPS_H_
