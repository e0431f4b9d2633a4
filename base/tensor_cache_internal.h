// The cache of large tensor buffers behind Tensor::Allocate. Internal to
// ckflow; tests and benchmarks look into it.
//
// A training step frees and allocates the same activations and gradients
// every step. glibc serves blocks of 128 KiB and more from fresh mmap()ed
// pages, so without reuse each step pays a page fault and a zeroed page per
// 4 KiB of output (a fifth of a one-thread MLP step on Eigen's AVX2 GEMMs).
// Freed buffers of kMinBlock to kMaxBlock bytes wait here for the next
// allocation of the same size, as TensorFlow's BFC and PyTorch's caching
// allocators keep theirs, but bounded: at most kCapacity bytes are held; a
// buffer that would overflow it first evicts blocks of the sizes that hold
// the most. kCapacity holds a transformer step's activations and gradients
// (batch 32 x 128 tokens, d_model 128, 2 blocks: at 256 MiB the cache
// overflowed every step and a 2-thread step took 40% longer). kMaxBlock
// covers a CNN's
// activations at inference batch sizes (22 MB for 32 channels of 26x26 on
// 256 images): at 16 MiB those went back to the system each step, and the
// page faults took half of the Fashion-MNIST model's inference time.
//
// Under AddressSanitizer a cached buffer is poisoned, so a read through a
// dangling pointer is still reported.
//
// Thread safety: the functions are thread-safe.

#ifndef CKFLOW_BASE_TENSOR_CACHE_INTERNAL_H_
#define CKFLOW_BASE_TENSOR_CACHE_INTERNAL_H_

#include <cstddef>

// Under AddressSanitizer (GCC's macro, clang's feature) the cache poisons
// what it holds, and tests can ask ASan about it.
#if defined(__SANITIZE_ADDRESS__)
#define CKFLOW_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CKFLOW_ASAN 1
#endif
#endif
#ifdef CKFLOW_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace ckflow::internal {

inline constexpr size_t kTensorCacheMinBlock = size_t{64} << 10;
inline constexpr size_t kTensorCacheMaxBlock = size_t{64} << 20;
inline constexpr size_t kTensorCacheCapacity = size_t{1} << 30;

// Bytes of freed buffers the cache holds now.
size_t TensorCacheBytes();

// Returns every cached buffer to the system allocator.
void ReleaseTensorCache();

}  // namespace ckflow::internal

#endif  // CKFLOW_BASE_TENSOR_CACHE_INTERNAL_H_
