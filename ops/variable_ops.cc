#include "ops/variable_ops.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/mutex.h"
#include "base/parallel.h"
#include "base/tsan_internal.h"
#include "graph/graph.h"
#include "ops/ops_internal.h"
#include "ops/standard_ops.h"
#include "ops/variable_resource_internal.h"

namespace ckflow {
namespace internal {

Status VariableResource::NotInitializedError() const {
  return FailedPreconditionError(
      "variable '", name_, "' is not initialized (run its initializer or restore a checkpoint)");
}

Status VariableResource::CheckAssignable(DataType dtype, const TensorShape& shape) const {
  if (dtype != dtype_) {
    return InvalidArgumentError("variable '", name_, "' is ", DataTypeName(dtype_),
                                "; cannot assign a ", DataTypeName(dtype), " value");
  }
  if (!shape_.IsCompatibleWith(shape)) {
    return InvalidArgumentError("variable '", name_, "' has shape ", shape_.ToString(),
                                "; cannot assign a value of shape ", shape.ToString());
  }
  return OkStatus();
}

StatusOr<Tensor> VariableResource::ReadLocked() const {
  if (!initialized_) return NotInitializedError();
  return value_;
}

StatusOr<const Tensor*> VariableResource::PeekLocked() const {
  if (!initialized_) return NotInitializedError();
  return &value_;
}

namespace {

// True if nothing but `t` holds its buffer, so writing it in place is unseen
// by anyone else. The fence pairs with the release in the last other owner's
// reference drop, so its reads of the buffer happen before our writes.
// ThreadSanitizer does not model that fence, so under it writers always copy
// (same results, no false reports).
bool IsExclusive(const Tensor& t) {
#ifdef CKFLOW_TSAN
  (void)t;
  return false;
#else
  if (!t.RefCountIsOne()) return false;
  std::atomic_thread_fence(std::memory_order_acquire);
  return true;
#endif
}

}  // namespace

uint64_t VariableResource::NextVersion() {
  // Versions are compared for equality only, so each thread takes them a
  // block at a time: restore ops on several threads, each moving thousands
  // of versions, no longer bump one shared counter per variable.
  constexpr uint64_t kBlock = 1024;
  static std::atomic<uint64_t> next{1};
  thread_local uint64_t at = 0;
  thread_local uint64_t end = 0;
  if (at == end) {
    at = next.fetch_add(kBlock, std::memory_order_relaxed);
    end = at + kBlock;
  }
  return at++;
}

StatusOr<Tensor*> VariableResource::PrepareToOverwriteLocked(const TensorShape& shape) {
  FreezeSnapshotLocked();
  version_ = NextVersion();
  updated_by_rows_ = false;
  if (value_.IsValid() && value_.shape() == shape && IsExclusive(value_)) return &value_;
  CKFLOW_ASSIGN_OR_RETURN(value_, Tensor::Allocate(dtype_, shape));
  return &value_;
}

StatusOr<Tensor*> VariableResource::PrepareToUpdateLocked() {
  if (!initialized_) return NotInitializedError();
  FreezeSnapshotLocked();
  version_ = NextVersion();
  updated_by_rows_ = false;
  if (!IsExclusive(value_)) {
    CKFLOW_ASSIGN_OR_RETURN(Tensor copy, Tensor::Allocate(dtype_, value_.shape()));
    CKFLOW_RETURN_IF_ERROR(copy.CopyFrom(value_));
    value_ = std::move(copy);
  }
  return &value_;
}

Status VariableResource::Assign(const Tensor& value) {
  CKFLOW_RETURN_IF_ERROR(CheckAssignable(value.dtype(), value.shape()));
  MutexLock lock(&mu_);
  // A value nobody else holds (a kernel's fresh output) is adopted without
  // a copy, as TensorFlow forwards it. A shared one (a user's fed tensor, a
  // constant) is copied, so a later in-place update cannot reach its owner.
  if (IsExclusive(value)) {
    FreezeSnapshotLocked();
    value_ = value;
    version_ = NextVersion();
    updated_by_rows_ = false;
  } else {
    CKFLOW_ASSIGN_OR_RETURN(Tensor * dst, PrepareToOverwriteLocked(value.shape()));
    CKFLOW_RETURN_IF_ERROR(dst->CopyFrom(value));
  }
  initialized_ = true;
  return OkStatus();
}

namespace {

Status CheckDeclaration(const VariableResource& variable, DataType dtype,
                        const PartialShape& shape) {
  if (variable.dtype() != dtype || !variable.shape().IsCompatibleWith(shape)) {
    return InvalidArgumentError("variable '", variable.name(), "' exists as ",
                                DataTypeName(variable.dtype()), variable.shape().ToString(),
                                "; this handle declares it ", DataTypeName(dtype),
                                shape.ToString());
  }
  return OkStatus();
}

}  // namespace

StatusOr<std::shared_ptr<VariableResource>> LookupOrCreateVariable(ResourceMgr& resources,
                                                                   const std::string& name,
                                                                   DataType dtype,
                                                                   const PartialShape& shape) {
  CKFLOW_ASSIGN_OR_RETURN(std::shared_ptr<VariableResource> variable,
                          resources.LookupOrCreate<VariableResource>(name, [&] {
                            return std::make_shared<VariableResource>(name, dtype, shape);
                          }));
  CKFLOW_RETURN_IF_ERROR(CheckDeclaration(*variable, dtype, shape));
  return variable;
}

StatusOr<std::vector<std::shared_ptr<VariableResource>>> LookupOrCreateVariables(
    ResourceMgr& resources, const std::vector<std::string>& names,
    const std::vector<DataType>& dtypes, const std::vector<PartialShape>& shapes) {
  CKFLOW_ASSIGN_OR_RETURN(std::vector<std::shared_ptr<VariableResource>> variables,
                          resources.LookupOrCreateAll<VariableResource>(names, [&](size_t i) {
                            return std::make_shared<VariableResource>(names[i], dtypes[i],
                                                                      shapes[i]);
                          }));
  for (size_t i = 0; i < variables.size(); ++i) {
    CKFLOW_RETURN_IF_ERROR(CheckDeclaration(*variables[i], dtypes[i], shapes[i]));
  }
  return variables;
}

StatusOr<std::shared_ptr<VariableResource>> VariableFromHandle(const Tensor& handle,
                                                               std::string_view what) {
  if (handle.dtype() != DT_RESOURCE || handle.NumElements() != 1) {
    return InvalidArgumentError(what, " must be a resource handle scalar, got ",
                                DataTypeName(handle.dtype()), handle.shape().ToString());
  }
  const ResourceHandle& h = handle.resource_handle();
  auto variable = std::dynamic_pointer_cast<VariableResource>(h.resource);
  if (variable == nullptr) {
    return InvalidArgumentError(what, " (resource '", h.name, "') is not a variable");
  }
  return variable;
}

VariableLocks::VariableLocks(std::vector<VariableResource*> variables)
    : locked_(std::move(variables)) {
  std::sort(locked_.begin(), locked_.end());
  CKFLOW_CHECK(std::adjacent_find(locked_.begin(), locked_.end()) == locked_.end());
  for (VariableResource* v : locked_) v->mu().Lock();
}

VariableLocks::~VariableLocks() {
  for (auto it = locked_.rbegin(); it != locked_.rend(); ++it) (*it)->mu().Unlock();
}

}  // namespace internal

namespace {

using internal::CheckDtype;
using internal::InputName;
using internal::VariableFromHandle;
using internal::VariableResource;

constexpr DataType kResource[] = {DT_RESOURCE};

// ------------------------------------------------------------ VarHandleOp

Status VarHandleShape(InferenceContext& c) {
  CKFLOW_ASSIGN_OR_RETURN(DataType dtype, c.attrs->Get<DataType>("dtype"));
  CKFLOW_RETURN_IF_ERROR(c.attrs->Get<PartialShape>("shape").status());
  CKFLOW_ASSIGN_OR_RETURN(std::string name, c.attrs->Get<std::string>("shared_name"));
  if (!IsSupportedDataType(dtype) || dtype == DT_RESOURCE) {
    return InvalidArgumentError("variable '", name, "' cannot hold ", DataTypeName(dtype));
  }
  if (name.empty()) return InvalidArgumentError("shared_name must not be empty");
  c.AddOutput(DT_RESOURCE, PartialShape::Scalar());
  return OkStatus();
}

StatusOr<Kernel> VarHandleKernel(const Node& node) {
  CKFLOW_ASSIGN_OR_RETURN(std::string name, node.attrs().Get<std::string>("shared_name"));
  CKFLOW_ASSIGN_OR_RETURN(DataType dtype, node.attrs().Get<DataType>("dtype"));
  CKFLOW_ASSIGN_OR_RETURN(PartialShape shape, node.attrs().Get<PartialShape>("shape"));
  // The handle is looked up once per session (a kernel belongs to one
  // session); later runs hand out the same tensor.
  struct Cache {
    Mutex mu;
    const ResourceMgr* resources CKFLOW_GUARDED_BY(mu) = nullptr;
    Tensor handle CKFLOW_GUARDED_BY(mu);
  };
  auto cache = std::make_shared<Cache>();
  return Kernel([name, dtype, shape, cache](KernelContext& ctx) -> Status {
    MutexLock lock(&cache->mu);
    if (cache->resources != &ctx.resources()) {
      CKFLOW_ASSIGN_OR_RETURN(
          std::shared_ptr<VariableResource> variable,
          internal::LookupOrCreateVariable(ctx.resources(), name, dtype, shape));
      Tensor handle(DT_RESOURCE, TensorShape());
      handle.resource_handle() = ResourceHandle{.name = name, .resource = std::move(variable)};
      cache->handle = std::move(handle);
      cache->resources = &ctx.resources();
    }
    ctx.set_output(0, cache->handle);
    return OkStatus();
  });
}

// --------------------------------------------------------- ReadVariableOp

Status ReadVariableShape(InferenceContext& c) {
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 0, "resource", kResource));
  CKFLOW_ASSIGN_OR_RETURN(DataType dtype, c.attrs->Get<DataType>("dtype"));
  c.AddOutput(dtype, c.attrs->GetOr<PartialShape>("_shape", PartialShape::Unknown()));
  return OkStatus();
}

StatusOr<Kernel> ReadVariableKernel(const Node& node) {
  CKFLOW_ASSIGN_OR_RETURN(DataType dtype, node.attrs().Get<DataType>("dtype"));
  return Kernel([dtype](KernelContext& ctx) -> Status {
    CKFLOW_ASSIGN_OR_RETURN(auto variable, VariableFromHandle(ctx.input(0), "resource"));
    if (variable->dtype() != dtype) {
      return InvalidArgumentError("variable '", variable->name(), "' is ",
                                  DataTypeName(variable->dtype()), ", read as ",
                                  DataTypeName(dtype));
    }
    MutexLock lock(&variable->mu());
    CKFLOW_ASSIGN_OR_RETURN(Tensor value, variable->ReadLocked());
    ctx.set_output(0, std::move(value));
    return OkStatus();
  });
}

// ------------------------------------------------------- AssignVariableOp

Status AssignShape(InferenceContext& c) {
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 0, "resource", kResource));
  if (c.input_types[1] == DT_RESOURCE) {
    return InvalidArgumentError("value is a resource handle (", InputName(c, 1),
                                "), but must be a value");
  }
  return OkStatus();
}

Status AssignKernel(KernelContext& ctx) {
  CKFLOW_ASSIGN_OR_RETURN(auto variable, VariableFromHandle(ctx.input(0), "resource"));
  return variable->Assign(ctx.input(1));
}

template <typename T>
void AddInPlace(Tensor& dst, const Tensor& delta, bool subtract) {
  T* out = dst.flat<T>().data();
  const T* in = delta.flat<T>().data();
  ParallelFor(dst.NumElements(), 1, [=](int64_t begin, int64_t end) {
    if (subtract) {
      for (int64_t i = begin; i < end; ++i) out[i] -= in[i];
    } else {
      for (int64_t i = begin; i < end; ++i) out[i] += in[i];
    }
  });
}

Kernel AssignUpdateKernel(bool subtract) {
  return [subtract](KernelContext& ctx) -> Status {
    CKFLOW_ASSIGN_OR_RETURN(auto variable, VariableFromHandle(ctx.input(0), "resource"));
    const Tensor& delta = ctx.input(1);
    if (delta.dtype() != variable->dtype()) {
      return InvalidArgumentError(
          "variable '", variable->name(), "' is ", DataTypeName(variable->dtype()), "; cannot ",
          subtract ? "subtract" : "add", " a ", DataTypeName(delta.dtype()), " value");
    }
    MutexLock lock(&variable->mu());
    CKFLOW_ASSIGN_OR_RETURN(Tensor * value, variable->PrepareToUpdateLocked());
    if (!(value->shape() == delta.shape())) {
      return InvalidArgumentError(
          "variable '", variable->name(), "' has shape ", value->shape().ToString(), "; cannot ",
          subtract ? "subtract" : "add", " a value of shape ", delta.shape().ToString());
    }
    switch (delta.dtype()) {
      case DT_FLOAT:
        AddInPlace<float>(*value, delta, subtract);
        break;
      case DT_DOUBLE:
        AddInPlace<double>(*value, delta, subtract);
        break;
      case DT_INT32:
        AddInPlace<int32_t>(*value, delta, subtract);
        break;
      case DT_INT64:
        AddInPlace<int64_t>(*value, delta, subtract);
        break;
      default:
        return UnimplementedError("variable '", variable->name(),
                                  "': ", subtract ? "AssignSub" : "AssignAdd", " of ",
                                  DataTypeName(delta.dtype()), " is not supported");
    }
    return OkStatus();
  };
}

// ----------------------------------------------------- VarIsInitializedOp

Status IsInitializedShape(InferenceContext& c) {
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 0, "resource", kResource));
  c.AddOutput(DT_BOOL, PartialShape::Scalar());
  return OkStatus();
}

Status IsInitializedKernel(KernelContext& ctx) {
  CKFLOW_ASSIGN_OR_RETURN(auto variable, VariableFromHandle(ctx.input(0), "resource"));
  MutexLock lock(&variable->mu());
  ctx.set_output(0, Tensor::Scalar(variable->initialized_locked()));
  return OkStatus();
}

}  // namespace

Status RegisterVariableOps(OpRegistry& registry) {
  using internal::OpSpec;
  using internal::RegisterOp;
  CKFLOW_RETURN_IF_ERROR(RegisterOp(registry, {.type = "VarHandleOp",
                                               .stateful = true,
                                               .shape_fn = VarHandleShape,
                                               .kernel_factory = VarHandleKernel}));
  CKFLOW_RETURN_IF_ERROR(RegisterOp(registry, {.type = "ReadVariableOp",
                                               .inputs = {"resource"},
                                               .stateful = true,
                                               .shape_fn = ReadVariableShape,
                                               .kernel_factory = ReadVariableKernel}));
  CKFLOW_RETURN_IF_ERROR(RegisterOp(registry, {.type = "AssignVariableOp",
                                               .inputs = {"resource", "value"},
                                               .stateful = true,
                                               .shape_fn = AssignShape,
                                               .kernel_factory = StatelessKernel(AssignKernel)}));
  CKFLOW_RETURN_IF_ERROR(
      RegisterOp(registry, {.type = "AssignAddVariableOp",
                            .inputs = {"resource", "value"},
                            .stateful = true,
                            .shape_fn = AssignShape,
                            .kernel_factory = StatelessKernel(AssignUpdateKernel(false))}));
  CKFLOW_RETURN_IF_ERROR(
      RegisterOp(registry, {.type = "AssignSubVariableOp",
                            .inputs = {"resource", "value"},
                            .stateful = true,
                            .shape_fn = AssignShape,
                            .kernel_factory = StatelessKernel(AssignUpdateKernel(true))}));
  return RegisterOp(registry, {.type = "VarIsInitializedOp",
                               .inputs = {"resource"},
                               .stateful = true,
                               .shape_fn = IsInitializedShape,
                               .kernel_factory = StatelessKernel(IsInitializedKernel)});
}

namespace ops {

Output VarHandleOp(const Scope& scope, DataType dtype, const PartialShape& shape,
                   const std::string& shared_name) {
  AttrMap attrs;
  attrs.Set("dtype", dtype);
  attrs.Set("shape", shape);
  attrs.Set("shared_name", shared_name);
  attrs.Set("container", std::string());
  return scope.AddNode(StandardOp("VarHandleOp"), {}, std::move(attrs));
}

Output ReadVariableOp(const Scope& scope, Output handle, DataType dtype,
                      const PartialShape& shape) {
  AttrMap attrs;
  attrs.Set("dtype", dtype);
  if (shape.known_rank()) attrs.Set("_shape", shape);
  return scope.AddNode(StandardOp("ReadVariableOp"), {handle}, std::move(attrs));
}

namespace {
Output AddAssignNode(const Scope& scope, std::string_view type, Output handle, Output value) {
  AttrMap attrs;
  if (value.valid()) attrs.Set("dtype", value.dtype());
  return scope.AddNode(StandardOp(type), {handle, value}, std::move(attrs));
}
}  // namespace

Output AssignVariableOp(const Scope& scope, Output handle, Output value) {
  return AddAssignNode(scope, "AssignVariableOp", handle, value);
}
Output AssignAddVariableOp(const Scope& scope, Output handle, Output delta) {
  return AddAssignNode(scope, "AssignAddVariableOp", handle, delta);
}
Output AssignSubVariableOp(const Scope& scope, Output handle, Output delta) {
  return AddAssignNode(scope, "AssignSubVariableOp", handle, delta);
}

Output VarIsInitializedOp(const Scope& scope, Output handle) {
  return scope.AddNode(StandardOp("VarIsInitializedOp"), {handle});
}

}  // namespace ops
}  // namespace ckflow
