// VariableResource: the session-side state of one resource variable (what a
// VarHandleOp's handle points at). Internal to ops/ and checkpoint/: the
// variable kernels read and write it, and the checkpoint layer saves from and
// restores straight into its buffer.
//
// Reads share the buffer (a ReadVariableOp output aliases the value, no copy);
// writers copy on write: an update goes in place only when no reader holds the
// buffer, otherwise the value moves to a fresh buffer first. So a tensor a
// reader got never changes under it, and a training step whose reads are done
// updates its variables without copying them.
//
// Thread safety: name, dtype and declared shape are constant after
// construction. The value and the initialized flag are guarded by mu(); the
// methods ending in "Locked" require it held (the annotations say so, and a
// clang build checks it). To hold several variables at once (an optimizer's
// apply op), use VariableLocks, which locks them in a fixed order.

#ifndef CKFLOW_OPS_VARIABLE_RESOURCE_INTERNAL_H_
#define CKFLOW_OPS_VARIABLE_RESOURCE_INTERNAL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/mutex.h"
#include "base/resource.h"
#include "base/status.h"
#include "base/tensor.h"
#include "graph/op_def.h"

namespace ckflow::internal {

class VariableResource : public ResourceBase {
 public:
  VariableResource(std::string name, DataType dtype, PartialShape shape)
      : name_(std::move(name)), dtype_(dtype), shape_(std::move(shape)) {}

  const std::string& name() const { return name_; }  // the shared name
  DataType dtype() const { return dtype_; }
  const PartialShape& shape() const { return shape_; }  // as declared
  Mutex& mu() const CKFLOW_RETURN_CAPABILITY(mu_) { return mu_; }

  // InvalidArgument naming the variable unless a value of `dtype` and
  // `shape` may be assigned to it.
  Status CheckAssignable(DataType dtype, const TensorShape& shape) const;

  bool initialized_locked() const CKFLOW_REQUIRES(mu_) { return initialized_; }
  // The value, sharing its buffer. FailedPrecondition naming the variable if
  // it was never assigned (initialized or restored).
  StatusOr<Tensor> ReadLocked() const CKFLOW_REQUIRES(mu_);
  // The value itself, valid while mu() is held: what a reader that is done
  // before it unlocks uses instead of a share (a share costs two atomic
  // operations on the buffer's count, a cache miss each when thousands of
  // small variables are read in turn). FailedPrecondition as ReadLocked.
  StatusOr<const Tensor*> PeekLocked() const CKFLOW_REQUIRES(mu_);

  // A tensor of `shape` to write the variable's next value into, installed
  // as its value: the current buffer if it has that shape and no reader
  // shares it (contents: the old value), else a fresh one (contents
  // uninitialized). The caller fills it and then calls
  // set_initialized_locked(true); a caller that fails half way should
  // set_initialized_locked(false) so nobody reads a torn value.
  // REQUIRES: CheckAssignable(dtype(), shape) is OK.
  StatusOr<Tensor*> PrepareToOverwriteLocked(const TensorShape& shape) CKFLOW_REQUIRES(mu_);
  // The value, made safe to update in place (copied to a fresh buffer first
  // if a reader shares it). FailedPrecondition if uninitialized.
  StatusOr<Tensor*> PrepareToUpdateLocked() CKFLOW_REQUIRES(mu_);
  void set_initialized_locked(bool initialized) CKFLOW_REQUIRES(mu_) { initialized_ = initialized; }

  // Assigns a copy of `value` (in place when possible). Errors as
  // CheckAssignable. Takes mu().
  Status Assign(const Tensor& value) CKFLOW_EXCLUDES(mu_);

  // "variable 'dense/kernel' is not initialized (run its initializer or
  // restore a checkpoint)".
  Status NotInitializedError() const;

  // Moves on whenever the value may have changed: every Prepare*Locked and
  // Assign, so every kernel that writes the variable (an assignment, an
  // optimizer's update, a restore). Drawn from one counter for all
  // variables, so a version is never reused, not even by a variable that
  // replaces this one under its name. An incremental save (SaveOptions::
  // incremental) skips a variable whose version equals the one it saved:
  // no hashing of unchanged bytes. Never 0.
  uint64_t version_locked() const CKFLOW_REQUIRES(mu_) { return version_; }

 private:
  const std::string name_;
  const DataType dtype_;
  const PartialShape shape_;

  mutable Mutex mu_;
  Tensor value_ CKFLOW_GUARDED_BY(mu_);
  bool initialized_ CKFLOW_GUARDED_BY(mu_) = false;
  uint64_t version_ CKFLOW_GUARDED_BY(mu_) = NextVersion();

  static uint64_t NextVersion();
};

// The variable `name` in `resources`, created uninitialized if absent (what
// a VarHandleOp declaring it does). InvalidArgument naming it if it exists
// with another dtype or an incompatible shape.
StatusOr<std::shared_ptr<VariableResource>> LookupOrCreateVariable(ResourceMgr& resources,
                                                                   const std::string& name,
                                                                   DataType dtype,
                                                                   const PartialShape& shape);

// LookupOrCreateVariable for each (names[i], dtypes[i], shapes[i]), taking
// the resources' lock once.
StatusOr<std::vector<std::shared_ptr<VariableResource>>> LookupOrCreateVariables(
    ResourceMgr& resources, const std::vector<std::string>& names,
    const std::vector<DataType>& dtypes, const std::vector<PartialShape>& shapes);

// The variable a DT_RESOURCE handle tensor points at. InvalidArgument naming
// `what` if the tensor is not a handle to a variable.
StatusOr<std::shared_ptr<VariableResource>> VariableFromHandle(const Tensor& handle,
                                                               std::string_view what);

// Holds the mutexes of several distinct variables, acquired in address order
// so two ops locking overlapping sets cannot deadlock.
class VariableLocks {
 public:
  // REQUIRES: the variables are distinct and non-null.
  explicit VariableLocks(std::vector<VariableResource*> variables);
  ~VariableLocks();
  VariableLocks(const VariableLocks&) = delete;
  VariableLocks& operator=(const VariableLocks&) = delete;

 private:
  std::vector<VariableResource*> locked_;
};

}  // namespace ckflow::internal

#endif  // CKFLOW_OPS_VARIABLE_RESOURCE_INTERNAL_H_
