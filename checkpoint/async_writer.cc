#include <algorithm>
#include <atomic>
#include <utility>

#include "base/copy_internal.h"
#include "base/logging.h"
#include "base/parallel.h"
#include "base/tensor_source_internal.h"
#include "checkpoint/async_writer_internal.h"

namespace ckflow::internal {
namespace {
std::atomic<int64_t> snapshot_allocations{0};
}  // namespace

int64_t NumSnapshotAllocations() { return snapshot_allocations.load(std::memory_order_relaxed); }

WriterThread::~WriterThread() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  changed_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

void WriterThread::Start(std::function<void()> write) {
  {
    MutexLock lock(&mu_);
    CKFLOW_CHECK(!busy_);
    if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
    write_ = std::move(write);
    busy_ = true;
  }
  // Unlocked: the woken writer would otherwise block on mu_ at once, and
  // the training thread pay a second wake-up to hand it over.
  changed_.SignalAll();
}

void WriterThread::Wait() {
  MutexLock lock(&mu_);
  while (busy_) changed_.Wait(&mu_);
}

void WriterThread::Loop() {
  mu_.Lock();
  for (;;) {
    while (!stop_ && write_ == nullptr) changed_.Wait(&mu_);
    if (write_ == nullptr) break;  // stopped, nothing left to write
    std::function<void()> write = std::exchange(write_, nullptr);
    mu_.Unlock();
    write();
    write = nullptr;  // what the write held goes before Wait() returns
    mu_.Lock();
    busy_ = false;
    changed_.SignalAll();
  }
  mu_.Unlock();
}

Status AsyncWriter::Snapshot(const std::vector<Tensor>& values, const std::vector<Output>& reads,
                             std::vector<Feed>* feeds) {
  // The copy goes into buffers touched by earlier saves (no page faults),
  // with streaming stores (the background writer is the next to read them).
  snapshot_.resize(values.size());
  struct Piece {
    const char* from;
    char* to;
    int64_t size;
  };
  constexpr int64_t kPieceBytes = int64_t{1} << 20;
  std::vector<Piece> pieces;
  for (size_t i = 0; i < values.size(); ++i) {
    const Tensor& value = values[i];
    Tensor& copy = snapshot_[i];
    if (SourceOf(value) != nullptr) {
      // Read by the write as it goes: nothing to copy. Not kept past the
      // write either (a snapshot alive makes its variable's buffer shared).
      copy = Tensor();
      continue;
    }
    if (!copy.IsValid() || copy.dtype() != value.dtype() || !(copy.shape() == value.shape())) {
      CKFLOW_ASSIGN_OR_RETURN(copy, Tensor::Allocate(value.dtype(), value.shape()));
      snapshot_allocations.fetch_add(1, std::memory_order_relaxed);
    }
    if (value.dtype() == DT_STRING) {
      CKFLOW_RETURN_IF_ERROR(copy.CopyFrom(value));
    } else {
      const auto* from = static_cast<const char*>(value.raw_data());
      auto* to = static_cast<char*>(copy.raw_data());
      const auto size = static_cast<int64_t>(value.TotalBytes());
      for (int64_t offset = 0; offset < size; offset += kPieceBytes) {
        pieces.push_back({from + offset, to + offset, std::min(kPieceBytes, size - offset)});
      }
    }
  }
  // Costed by the bytes there are: a model of a few small variables copies
  // them inline, without waking a worker (which took most of the stall).
  int64_t bytes = 0;
  for (const Piece& piece : pieces) bytes += piece.size;
  const auto n = static_cast<int64_t>(pieces.size());
  ParallelFor(n, n == 0 ? 1 : std::max<int64_t>(1, bytes / n / 8), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      internal::StreamingCopy(pieces[i].to, pieces[i].from, pieces[i].size);
  });
  for (size_t i = 0; i < values.size(); ++i) {
    feeds->emplace_back(reads[i], SourceOf(values[i]) != nullptr ? values[i] : snapshot_[i]);
  }
  return OkStatus();
}

void AsyncWriter::Start(std::function<Status()> write) {
  thread_.Start([this, write = std::move(write)] { status_ = write(); });
}

Status AsyncWriter::Wait() {
  thread_.Wait();
  return std::exchange(status_, OkStatus());
}

}  // namespace ckflow::internal
