#include "base/parallel.h"

#include <tbb/blocked_range.h>
#include <tbb/global_control.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <atomic>
#include <utility>

#include "base/denormal_internal.h"
#include "base/mutex.h"
#include "base/parallel_internal.h"
#include "base/tsan_internal.h"

namespace ckflow {
namespace {
// Below this many cycles a task switch costs more than it saves.
constexpr int64_t kMinCyclesPerTask = 20000;

thread_local int intra_op_threads = 0;

// tbb::parallel_for's body. For ThreadSanitizer (see tsan_internal.h) it
// states the edges libtbb makes out of TSan's sight: each copy is published
// by its maker, so the caller's writes happen before every chunk, and every
// chunk happens before ParallelFor returns. Chunks stay unordered among
// themselves. Every chunk runs in the caller's denormal mode, whichever
// thread takes it, so a loop's bits do not depend on the threads.
class ParallelForBody {
 public:
  using Fn = std::function<void(int64_t, int64_t)>;

  explicit ParallelForBody(const Fn& fn) : fn_(&fn), flush_(internal::FlushesDenormals()) {
    internal::TsanRelease(this);
  }
  ParallelForBody(const ParallelForBody& other)
      : fn_((internal::TsanAcquire(&other), other.fn_)), flush_(other.flush_) {
    internal::TsanRelease(this);
  }
  ParallelForBody& operator=(const ParallelForBody&) = delete;

  void operator()(const tbb::blocked_range<int64_t>& r) const {
    internal::TsanAcquire(this);
    const internal::ScopedDenormals denormals(flush_);
    (*fn_)(r.begin(), r.end());
    internal::TsanRelease(Done(fn_));
  }
  // Where chunks state their end for the caller.
  static const void* Done(const Fn* fn) { return reinterpret_cast<const char*>(fn) + 1; }

 private:
  const Fn* fn_;
  const bool flush_;
};

}  // namespace

void ParallelFor(int64_t n, int64_t cost_per_unit,
                 const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  int64_t cost = cost_per_unit < 1 ? 1 : cost_per_unit;
  if (n * cost < 2 * kMinCyclesPerTask || intra_op_threads == 1 || MaxParallelism() <= 1) {
    fn(0, n);
    return;
  }
  const int limit = intra_op_threads;
  if (limit > 1 && limit < MaxParallelism()) {
    // At most `limit` pieces, so at most `limit` threads run them.
    const int64_t parts = std::min<int64_t>(limit, n * cost / kMinCyclesPerTask);
    const std::function<void(int64_t, int64_t)> by_part = [&](int64_t b, int64_t e) {
      fn(b * n / parts, e * n / parts);
    };
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, parts, 1), ParallelForBody(by_part),
                      tbb::simple_partitioner());
    internal::TsanAcquire(ParallelForBody::Done(&by_part));
    return;
  }
  int64_t grain = kMinCyclesPerTask / cost;
  if (grain < 1) grain = 1;
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, grain), ParallelForBody(fn));
  internal::TsanAcquire(ParallelForBody::Done(&fn));
}

void ParallelInvoke(const std::function<void()>& a, const std::function<void()>& b) {
  // Two units costly enough that ParallelFor makes each its own task.
  ParallelFor(2, kMinCyclesPerTask, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) (i == 0 ? a : b)();
  });
}

// Whoever moves `stage` off kPending runs fn: a thread of the scheduler
// that takes the task, or the waiter that gets there first. The call and
// its task (if any) each hold a reference, so a task that runs after its
// waiter (and finds fn taken) touches nothing else. The count is the
// state's own, not a shared_ptr's: a task's memory then holds one plain
// pointer, which the suppressions below cover when libtbb recycles it.
// A state with a task stays on a list (ListPending) until its last
// reference goes.
struct BackgroundCall::State {
  enum Stage { kPending, kRunning, kDone };
  State(std::function<void()> f, bool flush, int references)
      : fn(std::move(f)), flush_denormals(flush), refs(references) {}
  bool Claim() {
    int expected = kPending;
    return stage.compare_exchange_strong(expected, kRunning, std::memory_order_acq_rel);
  }
  void Run() {
    const internal::ScopedDenormals denormals(flush_denormals);
    fn();
    fn = nullptr;  // what it holds goes now, not when a late task comes by
    stage.store(kDone, std::memory_order_release);
    stage.notify_all();
  }
  void Unref();

  std::function<void()> fn;    // only its claimer touches it
  const bool flush_denormals;  // the caller's mode, whichever thread runs fn
  std::atomic<int> stage{kPending};
  std::atomic<int> refs;
  State* prev = nullptr;  // on the pending list (guarded by its mutex)
  State* next = nullptr;
  bool listed = false;
};

namespace {

// The states whose task has not run yet. A waiter that ran fn itself
// leaves its task queued, holding the state, until a thread takes it;
// libtbb keeps queued tasks in memory LeakSanitizer does not scan and
// drops them, unrun, at exit. Listed here, such a state stays reachable
// from a global until its task runs, and is freed then.
struct PendingStates {
  Mutex mu;
  BackgroundCall::State* head CKFLOW_GUARDED_BY(mu) = nullptr;
  int64_t count CKFLOW_GUARDED_BY(mu) = 0;
};

PendingStates& Pending() {
  static PendingStates* pending = new PendingStates;  // never destroyed: tasks outlive exit
  return *pending;
}

void ListPending(BackgroundCall::State* state) {
  PendingStates& p = Pending();
  MutexLock lock(&p.mu);
  state->next = p.head;
  if (p.head != nullptr) p.head->prev = state;
  p.head = state;
  state->listed = true;
  ++p.count;
}

void Unlist(BackgroundCall::State* state) {
  PendingStates& p = Pending();
  MutexLock lock(&p.mu);
  (state->prev != nullptr ? state->prev->next : p.head) = state->next;
  if (state->next != nullptr) state->next->prev = state->prev;
  --p.count;
}

}  // namespace

void BackgroundCall::State::Unref() {
  if (refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  if (listed) Unlist(this);
  delete this;
}

namespace internal {
int64_t PendingBackgroundCalls() {
  PendingStates& p = Pending();
  MutexLock lock(&p.mu);
  return p.count;
}
}  // namespace internal

namespace {

// What libtbb runs: offers the call's fn, then drops the task's reference.
// libtbb builds the task in its memory and hands it to a worker out of
// TSan's sight: as ParallelForBody does, each copy states its construction
// for whoever reads it next, and the state was released for the task
// before it was enqueued (tsan_internal.h).
class BackgroundTask {
 public:
  explicit BackgroundTask(BackgroundCall::State* state) : state_(state) {
    internal::TsanRelease(this);
  }
  BackgroundTask(const BackgroundTask& other)
      : state_((internal::TsanAcquire(&other), other.state_)) {
    internal::TsanRelease(this);
  }
  BackgroundTask& operator=(const BackgroundTask&) = delete;

  void operator()() const {
    internal::TsanAcquire(this);
    BackgroundCall::State* state = state_;
    internal::TsanAcquire(state);
    if (state->Claim()) state->Run();
    state->Unref();
  }

 private:
  BackgroundCall::State* state_;
};

}  // namespace

BackgroundCall::BackgroundCall() = default;
BackgroundCall::~BackgroundCall() { Wait(); }

void BackgroundCall::Start(std::function<void()> fn) {
  Wait();
  const bool offered = intra_op_threads != 1 && MaxParallelism() > 1;
  state_ = new State(std::move(fn), internal::FlushesDenormals(), offered ? 2 : 1);
  if (offered) {
    ListPending(state_);
    internal::TsanRelease(state_);
    tbb::this_task_arena::enqueue(BackgroundTask(state_));
  }
}

void BackgroundCall::Wait() {
  if (state_ == nullptr) return;
  if (state_->Claim()) {
    state_->Run();
  } else {
    for (int stage = state_->stage.load(std::memory_order_acquire); stage != State::kDone;
         stage = state_->stage.load(std::memory_order_acquire)) {
      state_->stage.wait(stage, std::memory_order_acquire);
    }
  }
  std::exchange(state_, nullptr)->Unref();
}

#ifdef CKFLOW_TSAN
namespace internal {
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
void TsanRelease(const void* addr) { __tsan_release(const_cast<void*>(addr)); }
void TsanAcquire(const void* addr) { __tsan_acquire(const_cast<void*>(addr)); }
}  // namespace internal

// What oneTBB synchronizes inside the uninstrumented libtbb TSan cannot
// see: its header code on its own task, range and partitioner objects
// (fold_tree's atomic loads on recycled tree nodes show up under a
// libstdc++ frame), our NodeTask, ParallelForBody and BackgroundTask built
// into task memory its allocator recycled from another thread, and that
// allocator's memsets.
// None is a ckflow race; a race with ckflow code on top is still reported.
extern "C" const char* __tsan_default_suppressions() {
  return "race_top:/oneapi/tbb/\n"
         "race_top:tbb::detail::\n"
         "race:tbb::detail::d1::node::node\n"
         "race:tbb::detail::d1::tree_node::tree_node\n"
         "race:tbb::detail::d1::fold_tree\n"
         "race_top:ckflow::internal::NodeTask::NodeTask\n"
         // The same reuse of task memory, where the task's construction is
         // inlined into Spawn, or the partitioner's check for a stolen task
         // into the caller (it is never on the stack of a loop's body).
         "race_top:ckflow::internal::Executor::Spawn\n"
         "race:check_being_stolen\n"
         "race_top:ParallelForBody\n"
         "race_top:BackgroundTask\n"
         "called_from_lib:libtbb.so\n";
}
#endif

int MaxParallelism() {
  return std::min(static_cast<int>(tbb::global_control::active_value(
                      tbb::global_control::max_allowed_parallelism)),
                  tbb::this_task_arena::max_concurrency());
}

namespace internal {
int SetIntraOpThreads(int threads) { return std::exchange(intra_op_threads, threads); }
}  // namespace internal

}  // namespace ckflow
