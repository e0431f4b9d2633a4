// Clang's thread-safety annotations, so the compiler checks the locking
// rules that would otherwise be comments: which mutex guards a member
// (CKFLOW_GUARDED_BY), which a function needs held (CKFLOW_REQUIRES) or takes
// itself (CKFLOW_EXCLUDES). A clang build with -Wthread-safety (the
// ckflow_warnings target adds it, and `./run.sh fuzz` builds the library with
// clang) turns a broken rule into an error. Other compilers see nothing.
//
//   class Cache {
//    public:
//     void Put(int v) CKFLOW_EXCLUDES(mu_) {
//       MutexLock lock(&mu_);
//       PutLocked(v);
//     }
//    private:
//     void PutLocked(int v) CKFLOW_REQUIRES(mu_) { values_.push_back(v); }
//     Mutex mu_;
//     std::vector<int> values_ CKFLOW_GUARDED_BY(mu_);
//   };
//
// The mutexes to annotate with are base/mutex.h's. Where the analysis cannot
// follow a lock (one held across a callback it cannot see into, a set of
// locks taken in a loop), the escape is CKFLOW_NO_THREAD_SAFETY_ANALYSIS on
// one small function, with a comment saying why the rule still holds.
// Documented at https://clang.llvm.org/docs/ThreadSafetyAnalysis.html.
//
// Thread safety: macros only.

#ifndef CKFLOW_BASE_THREAD_ANNOTATIONS_H_
#define CKFLOW_BASE_THREAD_ANNOTATIONS_H_

#if defined(__clang__)
#define CKFLOW_THREAD_ANNOTATION_(x) __attribute__((x))
#else
#define CKFLOW_THREAD_ANNOTATION_(x)
#endif

// On a class: its objects are a capability (a mutex) of kind `x`.
#define CKFLOW_CAPABILITY(x) CKFLOW_THREAD_ANNOTATION_(capability(x))
// On a class: an RAII object that holds a capability while it lives.
#define CKFLOW_SCOPED_CAPABILITY CKFLOW_THREAD_ANNOTATION_(scoped_lockable)

// On a data member: read and written only with `x` held.
#define CKFLOW_GUARDED_BY(x) CKFLOW_THREAD_ANNOTATION_(guarded_by(x))
// On a pointer member: what it points at is read and written only with `x`
// held (the pointer itself is not).
#define CKFLOW_PT_GUARDED_BY(x) CKFLOW_THREAD_ANNOTATION_(pt_guarded_by(x))

// On a mutex member: the order in which mutexes are taken.
#define CKFLOW_ACQUIRED_BEFORE(...) CKFLOW_THREAD_ANNOTATION_(acquired_before(__VA_ARGS__))
#define CKFLOW_ACQUIRED_AFTER(...) CKFLOW_THREAD_ANNOTATION_(acquired_after(__VA_ARGS__))

// On a function: the caller must hold the capabilities (exclusively, or at
// least shared).
#define CKFLOW_REQUIRES(...) CKFLOW_THREAD_ANNOTATION_(requires_capability(__VA_ARGS__))
#define CKFLOW_REQUIRES_SHARED(...) \
  CKFLOW_THREAD_ANNOTATION_(requires_shared_capability(__VA_ARGS__))

// On a function: it acquires (releases) the capabilities and returns with
// them held (released). With no argument, on a method: the object itself.
#define CKFLOW_ACQUIRE(...) CKFLOW_THREAD_ANNOTATION_(acquire_capability(__VA_ARGS__))
#define CKFLOW_ACQUIRE_SHARED(...) CKFLOW_THREAD_ANNOTATION_(acquire_shared_capability(__VA_ARGS__))
#define CKFLOW_RELEASE(...) CKFLOW_THREAD_ANNOTATION_(release_capability(__VA_ARGS__))
#define CKFLOW_RELEASE_SHARED(...) CKFLOW_THREAD_ANNOTATION_(release_shared_capability(__VA_ARGS__))
// Releases a capability held either way (a scoped lock's destructor).
#define CKFLOW_RELEASE_GENERIC(...) \
  CKFLOW_THREAD_ANNOTATION_(release_generic_capability(__VA_ARGS__))
// Acquires the capabilities if it returns `b` (the first argument).
#define CKFLOW_TRY_ACQUIRE(...) CKFLOW_THREAD_ANNOTATION_(try_acquire_capability(__VA_ARGS__))

// On a function: the caller must not hold the capabilities (the function
// takes them itself; holding one would deadlock).
#define CKFLOW_EXCLUDES(...) CKFLOW_THREAD_ANNOTATION_(locks_excluded(__VA_ARGS__))

// On a function: from the call on, the analysis takes the capability as held
// (a check that it is, or a fact the analysis cannot see).
#define CKFLOW_ASSERT_CAPABILITY(x) CKFLOW_THREAD_ANNOTATION_(assert_capability(x))
#define CKFLOW_ASSERT_SHARED_CAPABILITY(x) CKFLOW_THREAD_ANNOTATION_(assert_shared_capability(x))

// On a function: it returns a reference to the capability `x`, so locking
// what it returns is locking `x`.
#define CKFLOW_RETURN_CAPABILITY(x) CKFLOW_THREAD_ANNOTATION_(lock_returned(x))

// On a function: not analysed. The narrowest escape; say why next to it.
#define CKFLOW_NO_THREAD_SAFETY_ANALYSIS CKFLOW_THREAD_ANNOTATION_(no_thread_safety_analysis)

#endif  // CKFLOW_BASE_THREAD_ANNOTATIONS_H_
