#include <cstdint>
#include <cstring>

#include "base/copy_internal.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace ckflow::internal {

void StreamingCopy(void* dst, const void* src, size_t n) {
#if defined(__SSE2__)
  // Below a few pages the destination is likely to be read soon and the
  // fence costs more than the stores save.
  constexpr size_t kMinBytes = size_t{64} << 10;
  if (n < kMinBytes) {
    std::memcpy(dst, src, n);
    return;
  }
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  // Streaming stores need a 16-byte aligned destination; loads may be
  // unaligned.
  const size_t head = (16 - (reinterpret_cast<uintptr_t>(d) & 15)) & 15;
  std::memcpy(d, s, head);
  d += head;
  s += head;
  n -= head;
  const size_t body = n & ~size_t{63};
  for (size_t i = 0; i < body; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 48), e);
  }
  std::memcpy(d + body, s + body, n - body);
  // Streaming stores are weakly ordered: without the fence, the thread the
  // buffer is handed to could read stale bytes.
  _mm_sfence();
#else
  std::memcpy(dst, src, n);
#endif
}

}  // namespace ckflow::internal
