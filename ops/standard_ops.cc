#include "ops/standard_ops.h"

#include <string>

#include "ops/checkpoint_ops.h"
#include "ops/gradients.h"
#include "ops/training_ops.h"
#include "ops/variable_ops.h"

namespace ckflow {

Status RegisterStandardOps(OpRegistry& registry) {
  // The one list of op groups. A new group is one more line here.
  using RegisterFn = Status (*)(OpRegistry&);
  for (RegisterFn register_group : {
           RegisterArrayOps,
           RegisterArraySlicingOps,
           RegisterStridedSliceOps,
           RegisterDimensionOps,
           RegisterGatherOps,
           RegisterMathOps,
           RegisterComparisonOps,
           RegisterReductionOps,
           RegisterMatMulOps,
           RegisterNnOps,
           RegisterConvOps,
           RegisterPoolingOps,
           RegisterNormalizationOps,
           RegisterRandomOps,
           RegisterVariableOps,
           RegisterTrainingOps,
           RegisterGradientOps,
           RegisterCheckpointOps,
       }) {
    CKFLOW_RETURN_IF_ERROR(register_group(registry));
  }
  return OkStatus();
}

const OpRegistry& StandardOps() {
  // Filled on first use (thread-safe static initialization), never before
  // main; never destroyed, so kernels still running at exit stay valid.
  static const OpRegistry* const registry = [] {
    auto* r = new OpRegistry();
    Status s = RegisterStandardOps(*r);
    if (!s.ok()) internal::CheckFailed(__FILE__, __LINE__, s.ToString().c_str());
    return r;
  }();
  return *registry;
}

const OpDef& StandardOp(std::string_view type) {
  const OpDef* def = StandardOps().Find(type);
  if (def == nullptr) {
    std::string what = "no standard op '" + std::string(type) + "'";
    internal::CheckFailed(__FILE__, __LINE__, what.c_str());
  }
  return *def;
}

}  // namespace ckflow
