// RowBlockSnapshot, and the parts of VariableResource that keep one.

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>

#include "base/mutex.h"
#include "base/status.h"
#include "base/tensor_source_internal.h"
#include "ops/variable_resource_internal.h"

namespace ckflow::internal {

RowBlockSnapshot::RowBlockSnapshot(const char* data, uint64_t size)
    : data_(data),
      size_(size),
      num_blocks_((size + kBlockBytes - 1) / kBlockBytes),
      state_(std::make_unique<std::atomic<uint8_t>[]>(num_blocks_)),
      aside_(std::make_unique<std::unique_ptr<char[]>[]>(num_blocks_)) {
  for (uint64_t b = 0; b < num_blocks_; ++b) state_[b].store(kPending, std::memory_order_relaxed);
}

RowBlockSnapshot::~RowBlockSnapshot() = default;

Status RowBlockSnapshot::Read(uint64_t offset, uint64_t length,
                              const std::function<Status(std::string_view)>& consume) const {
  if (offset % kBlockBytes != 0 || offset + length > size_ ||
      (length % kBlockBytes != 0 && offset + length != size_)) {
    return InternalError("a read of bytes [", offset, ", ", offset + length, ") of a ", size_,
                         "-byte snapshot is not in whole blocks of ", kBlockBytes);
  }
  // Each block is copied out under its stripe's lock and handed on after,
  // a staging buffer at a time: a row update waiting for a block then waits
  // for a memcpy, never for the file system.
  thread_local std::unique_ptr<char[]> staging;
  if (staging == nullptr) staging = std::make_unique_for_overwrite<char[]>(kStagingBytes);
  const uint64_t end = offset + length;
  for (uint64_t at = offset; at < end;) {
    const uint64_t piece_end = std::min(end, at + kStagingBytes);
    char* to = staging.get();
    for (; at < piece_end; at += kBlockBytes) {
      const uint64_t b = at / kBlockBytes;
      const uint64_t n = std::min(kBlockBytes, size_ - at);
      MutexLock lock(&StripeOf(b));
      switch (state_[b].load(std::memory_order_relaxed)) {
        case kPending:
          std::memcpy(to, data_ + at, n);
          break;
        case kAside:
          std::memcpy(to, aside_[b].get(), n);
          aside_[b].reset();
          break;
        default:
          return InternalError("block ", b, " of a snapshot read twice");
      }
      // Release: the row updates that see it write the block without the lock.
      state_[b].store(kRead, std::memory_order_release);
      to += n;
    }
    CKFLOW_RETURN_IF_ERROR(consume(std::string_view(staging.get(), to - staging.get())));
  }
  return OkStatus();
}

void RowBlockSnapshot::CopyAside(uint64_t begin, uint64_t end) {
  if (begin >= end || begin >= size_) return;
  end = std::min(end, size_);
  for (uint64_t b = begin / kBlockBytes; b <= (end - 1) / kBlockBytes; ++b) {
    // Acquire: a block already read was read before we write it.
    if (state_[b].load(std::memory_order_acquire) != kPending) continue;
    MutexLock lock(&StripeOf(b));
    if (state_[b].load(std::memory_order_relaxed) != kPending) continue;
    const uint64_t at = b * kBlockBytes;
    const uint64_t n = std::min(kBlockBytes, size_ - at);
    aside_[b] = std::make_unique_for_overwrite<char[]>(n);
    std::memcpy(aside_[b].get(), data_ + at, n);
    state_[b].store(kAside, std::memory_order_relaxed);
    set_aside_.fetch_add(n, std::memory_order_relaxed);
  }
}

void RowBlockSnapshot::Freeze(Tensor owner) { owner_ = std::move(owner); }

VariableResource::~VariableResource() {
  if (std::shared_ptr<RowBlockSnapshot> snapshot = snapshot_.lock()) {
    snapshot->Freeze(std::move(value_));
  }
}

void VariableResource::FreezeSnapshotLocked() {
  if (std::shared_ptr<RowBlockSnapshot> snapshot = snapshot_.lock()) snapshot->Freeze(value_);
  snapshot_.reset();
}

StatusOr<Tensor> VariableResource::SnapshotByBlocksLocked() {
  if (!initialized_) return NotInitializedError();
  if (dtype_ == DT_STRING || dtype_ == DT_RESOURCE) {
    return UnimplementedError("variable '", name_, "' of ", DataTypeName(dtype_),
                              " cannot be snapshotted by blocks");
  }
  FreezeSnapshotLocked();
  auto snapshot = std::make_shared<RowBlockSnapshot>(static_cast<const char*>(value_.raw_data()),
                                                     value_.TotalBytes());
  snapshot_ = snapshot;
  return TensorOverSource(dtype_, value_.shape(), std::move(snapshot));
}

StatusOr<Tensor*> VariableResource::PrepareToUpdateRowsLocked(std::span<const int64_t> rows) {
  if (!initialized_) return NotInitializedError();
  std::shared_ptr<RowBlockSnapshot> snapshot = snapshot_.lock();
  // In place while nobody else holds the buffer (as PrepareToUpdateLocked),
  // the snapshot apart: it holds no share, and gets the blocks set aside.
  // ThreadSanitizer cannot see the fence IsExclusive pairs with, but the
  // snapshot's tests never share the value, so this path keeps its check.
  if (snapshot != nullptr && value_.RefCountIsOne()) {
    std::atomic_thread_fence(std::memory_order_acquire);
    version_ = NextVersion();
    updated_by_rows_ = true;
    const int64_t dim0 = value_.shape().rank() == 0 ? 1 : value_.shape().dim(0);
    const uint64_t row_bytes = dim0 == 0 ? 0 : value_.TotalBytes() / static_cast<uint64_t>(dim0);
    for (int64_t row : rows) {
      const auto at = static_cast<uint64_t>(row) * row_bytes;
      snapshot->CopyAside(at, at + row_bytes);
    }
    return &value_;
  }
  CKFLOW_ASSIGN_OR_RETURN(Tensor * value, PrepareToUpdateLocked());
  updated_by_rows_ = true;
  return value;
}

}  // namespace ckflow::internal
