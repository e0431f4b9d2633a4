// CRC32C (Castagnoli), the checksum of every TensorFlow checkpoint file, and
// TensorFlow's masking of stored CRCs.
//
// Value/Extend run on the CPU's CRC32 instructions through ISA-L (many GB/s
// per core). Combine joins the CRCs of two adjacent pieces without touching
// their bytes, so a large buffer can be checksummed in parallel chunks.
// Mask/Unmask are the rotation TensorFlow (like LevelDB) applies before
// storing a CRC, so that a CRC of data that itself contains CRCs stays well
// distributed.
//
// Thread safety: pure functions.

#ifndef CKFLOW_BUNDLE_CRC32C_H_
#define CKFLOW_BUNDLE_CRC32C_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ckflow::crc32c {

// The CRC32C of data[0, n) appended to a stream whose CRC so far is `crc`.
// Extend(Value(a), b) == Value(a ++ b). Value("") == 0.
uint32_t Extend(uint32_t crc, const void* data, size_t n);
inline uint32_t Value(const void* data, size_t n) { return Extend(0, data, n); }
inline uint32_t Value(std::string_view data) { return Value(data.data(), data.size()); }
inline uint32_t Extend(uint32_t crc, std::string_view data) {
  return Extend(crc, data.data(), data.size());
}

// The CRC32C of a ++ b, given crc1 = Value(a), crc2 = Value(b) and
// len2 = b's length. O(log len2), independent of the data.
uint32_t Combine(uint32_t crc1, uint32_t crc2, uint64_t len2);

inline constexpr uint32_t kMaskDelta = 0xa282ead8u;

// Rotate right by 15 bits, then add a constant.
constexpr uint32_t Mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + kMaskDelta; }

// The inverse of Mask.
constexpr uint32_t Unmask(uint32_t masked) {
  uint32_t rot = masked - kMaskDelta;
  return (rot >> 17) | (rot << 15);
}

// Whether a stored checksum has to match what was read. Only a fuzzing build
// (CKFLOW_FUZZ, which sets OSS-Fuzz's FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION)
// accepts any: a mutated file would otherwise stop at the first checksum and
// never reach the parsing behind it (tests/fuzz).
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
inline constexpr bool kVerifyStored = false;
#else
inline constexpr bool kVerifyStored = true;
#endif

}  // namespace ckflow::crc32c

#endif  // CKFLOW_BUNDLE_CRC32C_H_
