// Mutex, SharedMutex and CondVar: std::mutex, std::shared_mutex and
// std::condition_variable with clang's thread-safety annotations
// (base/thread_annotations.h), as LevelDB's port::Mutex and Abseil's Mutex
// are, so that a clang build with -Wthread-safety checks every member
// annotated CKFLOW_GUARDED_BY one of them. Each method is one inline call to
// the standard type: the wrappers cost nothing at run time.
//
//   Mutex mu_;
//   int count_ CKFLOW_GUARDED_BY(mu_);
//   void Add() CKFLOW_EXCLUDES(mu_) {
//     MutexLock lock(&mu_);
//     ++count_;
//   }
//
// Waiting on a condition is a loop the analysis can check, not a predicate
// lambda it cannot:
//
//   MutexLock lock(&mu_);
//   while (!ready_) changed_.Wait(&mu_);
//
// Thread safety: the types are what threads synchronize with; their methods
// may be called from any thread.

#ifndef CKFLOW_BASE_MUTEX_H_
#define CKFLOW_BASE_MUTEX_H_

#include <condition_variable>
#include <mutex>
#include <shared_mutex>

#include "base/thread_annotations.h"

namespace ckflow {

class CKFLOW_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() CKFLOW_ACQUIRE() { mu_.lock(); }
  void Unlock() CKFLOW_RELEASE() { mu_.unlock(); }
  // Tells the analysis the calling thread holds the mutex, where it cannot
  // see so itself (a lock taken by a caller it does not follow). Checks
  // nothing at run time: std::mutex cannot tell who holds it.
  void AssertHeld() const CKFLOW_ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// A reader-writer mutex: one writer (Lock) or any number of readers
// (LockShared) at a time.
class CKFLOW_CAPABILITY("shared_mutex") SharedMutex {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  void Lock() CKFLOW_ACQUIRE() { mu_.lock(); }
  void Unlock() CKFLOW_RELEASE() { mu_.unlock(); }
  void LockShared() CKFLOW_ACQUIRE_SHARED() { mu_.lock_shared(); }
  void UnlockShared() CKFLOW_RELEASE_SHARED() { mu_.unlock_shared(); }

 private:
  std::shared_mutex mu_;
};

// Holds `mu` from construction to destruction.
class CKFLOW_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) CKFLOW_ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() CKFLOW_RELEASE() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// Holds `mu` exclusively from construction to destruction.
class CKFLOW_SCOPED_CAPABILITY WriterMutexLock {
 public:
  explicit WriterMutexLock(SharedMutex* mu) CKFLOW_ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~WriterMutexLock() CKFLOW_RELEASE() { mu_->Unlock(); }
  WriterMutexLock(const WriterMutexLock&) = delete;
  WriterMutexLock& operator=(const WriterMutexLock&) = delete;

 private:
  SharedMutex* const mu_;
};

// Holds `mu` shared from construction to destruction.
class CKFLOW_SCOPED_CAPABILITY ReaderMutexLock {
 public:
  explicit ReaderMutexLock(SharedMutex* mu) CKFLOW_ACQUIRE_SHARED(mu) : mu_(mu) {
    mu_->LockShared();
  }
  ~ReaderMutexLock() CKFLOW_RELEASE() { mu_->UnlockShared(); }
  ReaderMutexLock(const ReaderMutexLock&) = delete;
  ReaderMutexLock& operator=(const ReaderMutexLock&) = delete;

 private:
  SharedMutex* const mu_;
};

// A condition variable waited on with a Mutex held.
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  // Releases `mu`, blocks until woken by Signal/SignalAll (or spuriously),
  // and takes `mu` again before returning: wait in a loop on the condition.
  void Wait(Mutex* mu) CKFLOW_REQUIRES(mu) {
    // The unique_lock only borrows the held mutex for the wait: it adopts
    // it, and gives it back unreleased.
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace ckflow

#endif  // CKFLOW_BASE_MUTEX_H_
