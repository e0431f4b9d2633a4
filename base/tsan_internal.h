// ThreadSanitizer support for code that hands work to oneTBB.
//
// Debian's libtbb is not built with -fsanitize=thread, so TSan cannot see
// the happens-before edges oneTBB creates inside it (a spawn before the
// task runs, a task's end before task_group::wait returns) and reports
// every tensor a task touches as a race. Code that spawns tasks states
// those edges with TsanRelease/TsanAcquire; they compile to nothing outside
// TSan builds. The races TSan still reports inside oneTBB's own header code
// (its task objects, recycled by its allocator) are suppressed narrowly in
// parallel.cc, so a race in ckflow code is still reported.
//
// Thread safety: the functions are thread-safe.

#ifndef CKFLOW_BASE_TSAN_INTERNAL_H_
#define CKFLOW_BASE_TSAN_INTERNAL_H_

#if defined(__SANITIZE_THREAD__)
#define CKFLOW_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CKFLOW_TSAN 1
#endif
#endif

namespace ckflow::internal {

#ifdef CKFLOW_TSAN
// Everything this thread did so far happens before whatever a later
// TsanAcquire(addr) on another thread does next. Defined in parallel.cc,
// with the suppressions, so every binary that states an edge also gets them.
void TsanRelease(const void* addr);
void TsanAcquire(const void* addr);
#else
inline void TsanRelease(const void*) {}
inline void TsanAcquire(const void*) {}
#endif

}  // namespace ckflow::internal

#endif  // CKFLOW_BASE_TSAN_INTERNAL_H_
