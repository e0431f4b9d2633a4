// ThreadSanitizer support for code that hands work to oneTBB.
//
// Debian's libtbb is not built with -fsanitize=thread, so TSan cannot see
// the happens-before edges oneTBB creates inside it (a spawn before the
// task runs, a task's end before task_group::wait returns) and reports
// every tensor a task touches as a race. Code that spawns tasks states
// those edges with TsanRelease/TsanAcquire; they compile to nothing outside
// TSan builds. The races TSan still reports inside oneTBB's own header code
// (its task objects, recycled by its allocator) are suppressed by top frame
// in executor.cc, so a race in ckflow code is still reported.
//
// Thread safety: the functions are thread-safe.

#ifndef CKFLOW_RUNTIME_TSAN_INTERNAL_H_
#define CKFLOW_RUNTIME_TSAN_INTERNAL_H_

#if defined(__SANITIZE_THREAD__)
#define CKFLOW_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CKFLOW_TSAN 1
#endif
#endif

#ifdef CKFLOW_TSAN
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#endif

namespace ckflow::internal {

// Everything this thread did so far happens before whatever a later
// TsanAcquire(addr) on another thread does next.
inline void TsanRelease([[maybe_unused]] const void* addr) {
#ifdef CKFLOW_TSAN
  __tsan_release(const_cast<void*>(addr));
#endif
}

inline void TsanAcquire([[maybe_unused]] const void* addr) {
#ifdef CKFLOW_TSAN
  __tsan_acquire(const_cast<void*>(addr));
#endif
}

}  // namespace ckflow::internal

#endif  // CKFLOW_RUNTIME_TSAN_INTERNAL_H_
