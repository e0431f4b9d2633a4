// How the calling thread's floating-point unit treats subnormal numbers.
//
// TensorFlow runs every kernel with subnormals flushed to zero (its
// executors and thread pools set the CPU's flush-to-zero and
// denormals-are-zero modes around each op), and ckflow does the same, for
// two reasons. Its numbers: a softmax over a causally masked row gives
// exactly 0 where TensorFlow's does, not the subnormal that Eigen's
// vectorized exp returns for arguments below -88. And its speed: a product
// with subnormal operands takes a microcode assist per element, which made
// the attention layer's probabilities-times-values product 20 times slower.
//
// The executor sets the mode once per run on the calling thread and once
// per task on the threads that take tasks, the eager context around each
// kernel, and ParallelFor hands the caller's mode to every chunk, so a
// kernel's bits do not depend on which thread ran which chunk. A restore that converts dtypes keeps
// IEEE arithmetic, as NumPy does (ScopedDenormals(false) around it).
//
// Thread safety: the mode is per thread; a guard changes only its own
// thread's and restores it when it goes out of scope.

#ifndef CKFLOW_BASE_DENORMAL_INTERNAL_H_
#define CKFLOW_BASE_DENORMAL_INTERNAL_H_

#include <cstdint>

#if defined(__SSE2__)
#include <xmmintrin.h>
#endif

namespace ckflow::internal {

#if defined(__SSE2__)
// MXCSR's flush-to-zero (results) and denormals-are-zero (inputs) bits.
inline constexpr uint32_t kFlushDenormalBits = 0x8040;
inline uint32_t FloatControl() { return _mm_getcsr(); }
inline void SetFloatControl(uint32_t bits) { _mm_setcsr(bits); }
#elif defined(__aarch64__)
// FPCR's FZ bit: subnormal inputs and results are zero.
inline constexpr uint32_t kFlushDenormalBits = uint32_t{1} << 24;
inline uint32_t FloatControl() {
  uint64_t fpcr;
  __asm__ __volatile__("mrs %0, fpcr" : "=r"(fpcr));
  return static_cast<uint32_t>(fpcr);
}
inline void SetFloatControl(uint32_t bits) {
  const uint64_t fpcr = bits;
  __asm__ __volatile__("msr fpcr, %0" : : "r"(fpcr));
}
#else
// Elsewhere subnormals keep IEEE arithmetic.
inline constexpr uint32_t kFlushDenormalBits = 0;
inline uint32_t FloatControl() { return 0; }
inline void SetFloatControl(uint32_t) {}
#endif

// Whether this thread flushes subnormals to zero now.
inline bool FlushesDenormals() {
  return kFlushDenormalBits != 0 && (FloatControl() & kFlushDenormalBits) == kFlushDenormalBits;
}

// Flushes subnormals to zero (flush = true) or keeps them (false) until it
// goes out of scope, when the previous mode comes back (the exception flags
// the scope raised stay raised). The control register is written only if
// the mode changes, since a write costs more than a read.
class ScopedDenormals {
 public:
  explicit ScopedDenormals(bool flush) {
    const uint32_t control = FloatControl();
    saved_ = control & kFlushDenormalBits;
    const uint32_t want = flush ? kFlushDenormalBits : 0;
    changed_ = saved_ != want;
    if (changed_) SetFloatControl((control & ~kFlushDenormalBits) | want);
  }
  ~ScopedDenormals() {
    if (changed_) SetFloatControl((FloatControl() & ~kFlushDenormalBits) | saved_);
  }
  ScopedDenormals(const ScopedDenormals&) = delete;
  ScopedDenormals& operator=(const ScopedDenormals&) = delete;

 private:
  uint32_t saved_;
  bool changed_;
};

}  // namespace ckflow::internal

#endif  // CKFLOW_BASE_DENORMAL_INTERNAL_H_
