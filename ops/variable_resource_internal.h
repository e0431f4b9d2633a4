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

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/mutex.h"
#include "base/resource.h"
#include "base/status.h"
#include "base/tensor.h"
#include "base/tensor_source_internal.h"
#include "graph/op_def.h"

namespace ckflow::internal {

// What an asynchronous save reads of a large variable the loop updates by
// rows, instead of a copy of it: the variable's own buffer, in blocks. Until
// the save has read a block, the variable's row updates copy the block aside
// before changing it (PrepareToUpdateRowsLocked), and the save reads the
// copy; any other write to the variable, or its end, hands the whole buffer
// to the snapshot first (Freeze) and writes a new one. So the save sees the
// value as it was when the snapshot was taken, while the loop pays a block
// copy only for the blocks it touches before the save reads them, and the
// memory is the variable's plus those blocks.
//
// Thread safety: Read runs on the saving threads; CopyAside and Freeze on
// a thread holding the variable's mutex. Each block's hand-over is guarded
// by one of a few stripe mutexes; its state is also published atomically,
// so a write to a block already read or set aside takes no lock.
class RowBlockSnapshot final : public TensorSource {
 public:
  // Blocks of this many bytes (the last one shorter): a page. While the
  // save writes, the loop sets aside every block it touches first, and an
  // embedding's ids touch rows all over the table, so the block is what
  // a touched row costs in memory and in copying.
  static constexpr uint64_t kBlockBytes = 4096;
  // Read hands on this many bytes at a time.
  static constexpr uint64_t kStagingBytes = uint64_t{1} << 20;

  // Over `size` bytes at `data`, which the variable keeps alive until Freeze.
  RowBlockSnapshot(const char* data, uint64_t size);
  ~RowBlockSnapshot() override;

  Status Read(uint64_t offset, uint64_t length,
              const std::function<Status(std::string_view)>& consume) const override;

  // Sets aside each block of [begin, end) (bytes) the save has not read.
  void CopyAside(uint64_t begin, uint64_t end);
  // The buffer is no longer the variable's to write: `owner` (sharing it)
  // keeps it as it is for the reads still to come.
  void Freeze(Tensor owner);

  // Bytes of the blocks set aside so far (tests and benchmarks).
  uint64_t bytes_set_aside() const { return set_aside_.load(std::memory_order_relaxed); }

 private:
  enum State : uint8_t { kPending, kAside, kRead };
  Mutex& StripeOf(uint64_t block) const { return stripes_[block % kStripes]; }

  static constexpr uint64_t kStripes = 64;
  const char* const data_;
  const uint64_t size_;
  const uint64_t num_blocks_;
  std::unique_ptr<std::atomic<uint8_t>[]> state_;
  // A block's copy while its state is kAside; freed once read.
  std::unique_ptr<std::unique_ptr<char[]>[]> aside_;
  mutable Mutex stripes_[kStripes];
  std::atomic<uint64_t> set_aside_{0};
  Tensor owner_;  // set by Freeze under the variable's mutex; read by no one
};

class VariableResource : public ResourceBase {
 public:
  VariableResource(std::string name, DataType dtype, PartialShape shape)
      : name_(std::move(name)), dtype_(dtype), shape_(std::move(shape)) {}
  // Hands the buffer to a snapshot still reading it.
  ~VariableResource() override;

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
  // PrepareToUpdateLocked for a write of only the given rows (indices into
  // dimension 0, each checked to be in range): while a snapshot of the
  // variable is read, only the blocks holding those rows are copied, aside,
  // and the value stays where it is.
  StatusOr<Tensor*> PrepareToUpdateRowsLocked(std::span<const int64_t> rows) CKFLOW_REQUIRES(mu_);
  // Whether the last write was PrepareToUpdateRowsLocked's: a variable the
  // loop updates by rows (an embedding table, its optimizer's slots).
  bool updated_by_rows_locked() const CKFLOW_REQUIRES(mu_) { return updated_by_rows_; }
  // A tensor over the value as it is now that stays so while the variable
  // is written (see RowBlockSnapshot), for a save to read once. Neither a
  // copy nor a share of the buffer. FailedPrecondition if uninitialized;
  // Unimplemented for a dtype that is not fixed-size. Replaces a snapshot
  // still being read, which keeps its blocks.
  StatusOr<Tensor> SnapshotByBlocksLocked() CKFLOW_REQUIRES(mu_);
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
  // variables (in blocks per thread), so a version is never reused, not
  // even by a variable that replaces this one under its name; versions are
  // unique, not ordered. An incremental save (SaveOptions::
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
  bool updated_by_rows_ CKFLOW_GUARDED_BY(mu_) = false;
  // The snapshot over value_'s buffer while a save may read it (reset
  // whenever value_ is replaced: FreezeSnapshotLocked).
  std::weak_ptr<RowBlockSnapshot> snapshot_ CKFLOW_GUARDED_BY(mu_);

  static uint64_t NextVersion();
  // Before value_'s buffer is written by anything but row updates, or let
  // go: a snapshot still reading it keeps it (and the write then takes a
  // new buffer, as for any other holder).
  void FreezeSnapshotLocked() CKFLOW_REQUIRES(mu_);
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
