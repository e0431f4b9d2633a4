// AsyncWriter: how a Saver's asynchronous saves (SaveOptions::async) leave
// the training loop. The save copies the values into snapshot buffers kept
// from save to save (so no first-touch page faults after the first) and
// hands the rest of the write to a thread of its own, kept for the next
// save too (starting a thread inside every Save was part of the loop's
// stall); the write's status waits for Wait.
//
// Thread safety: Snapshot, Start and Wait are called by the owner's thread,
// one at a time; each write runs on the writer's thread, one at a time.
// Snapshot must not be called while a write runs (the write reads the
// buffers).

#ifndef CKFLOW_CHECKPOINT_ASYNC_WRITER_INTERNAL_H_
#define CKFLOW_CHECKPOINT_ASYNC_WRITER_INTERNAL_H_

#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "base/tensor.h"
#include "graph/graph.h"
#include "runtime/session.h"

namespace ckflow::internal {

// For tests: how many snapshot buffers asynchronous saves have allocated in
// this process (a loop of async saves of one model allocates them once).
int64_t NumSnapshotAllocations();

// The thread a writer's writes run on, one write at a time: started by the
// first and kept for the next.
class WriterThread {
 public:
  WriterThread() = default;
  // Lets a started write finish, then stops the thread.
  ~WriterThread();
  WriterThread(const WriterThread&) = delete;
  WriterThread& operator=(const WriterThread&) = delete;

  // Runs `write` on the thread. REQUIRES: the previous write finished (Wait).
  void Start(std::function<void()> write) CKFLOW_EXCLUDES(mu_);
  // Returns once the write Start gave has finished; at once if none did.
  void Wait() CKFLOW_EXCLUDES(mu_);

 private:
  void Loop() CKFLOW_EXCLUDES(mu_);

  Mutex mu_;
  CondVar changed_;
  // The write not yet taken.
  std::function<void()> write_ CKFLOW_GUARDED_BY(mu_);
  // A write is queued or running.
  bool busy_ CKFLOW_GUARDED_BY(mu_) = false;
  bool stop_ CKFLOW_GUARDED_BY(mu_) = false;
  // Started under mu_ by the first Start; joined by the destructor, when
  // no Start can race it.
  std::thread thread_;
};

class AsyncWriter {
 public:
  AsyncWriter() = default;
  AsyncWriter(const AsyncWriter&) = delete;
  AsyncWriter& operator=(const AsyncWriter&) = delete;

  // Copies `values` (which may share the variables' buffers) into the
  // snapshot buffers, reusing those of the last save where dtype and shape
  // agree, and appends to *feeds one feed per value: `reads[i]` fed its
  // copy. A tensor over a source (a snapshot by blocks) is fed itself.
  // REQUIRES: no write running (Wait), reads.size() == values.size().
  Status Snapshot(const std::vector<Tensor>& values, const std::vector<Output>& reads,
                  std::vector<Feed>* feeds);
  // Runs `write` on the writer's thread; its status is what Wait returns.
  // REQUIRES: no write pending (Wait).
  void Start(std::function<Status()> write);
  // Waits for the write Start gave, if any, and returns its status (once:
  // OK afterwards, and when nothing was written).
  Status Wait();

 private:
  // Set by the write before it ends, read only after thread_.Wait().
  Status status_;
  std::vector<Tensor> snapshot_;  // not touched while a write runs
  WriterThread thread_;           // last: stopped before what writes use
};

}  // namespace ckflow::internal

#endif  // CKFLOW_CHECKPOINT_ASYNC_WRITER_INTERNAL_H_
