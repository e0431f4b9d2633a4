// Byte-level codecs shared by the bundle reader, writer and index code:
// varints, fixed-width little-endian integers, TensorFlow's DT_STRING tensor
// encoding and byte swapping.
//
// DT_STRING encoding of N elements (N >= 0), as TensorFlow writes it:
//
//   +----------------------+-----------------+-------------------------+
//   | N x varint64 length  | fixed32 LE      | the N strings' bytes,   |
//   | (1-10 bytes each)    | Mask(len_crc)   | concatenated            |
//   +----------------------+-----------------+-------------------------+
//
//   len_crc   = CRC32C over each length as a 4-byte LE uint32 (an 8-byte LE
//               uint64 if it exceeds 0xffffffff), not over the varint bytes.
//   entry crc = CRC32C continuing len_crc over the 4 stored checksum bytes,
//               then over all string bytes; BundleEntryProto.crc32c holds
//               Mask(entry crc).
//
// Thread safety: pure functions.

#ifndef CKFLOW_BUNDLE_BUNDLE_CODING_INTERNAL_H_
#define CKFLOW_BUNDLE_BUNDLE_CODING_INTERNAL_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "base/status.h"

namespace ckflow::internal {

void PutVarint64(std::string* dst, uint64_t v);
// Decodes a varint64 at *p (not reading at or past `end`), advancing *p.
// False if truncated or longer than 10 bytes.
bool GetVarint64(const char** p, const char* end, uint64_t* v);

inline uint32_t DecodeFixed32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);  // little-endian hosts only (static_assert'ed in the .cc)
  return v;
}
inline void PutFixed32(std::string* dst, uint32_t v) {
  char buf[4];
  std::memcpy(buf, &v, 4);
  dst->append(buf, 4);
}

// Appends the encoding of `strings` to *out; returns the unmasked entry CRC.
uint32_t EncodeStringTensor(std::span<const std::string> strings, std::string* out);

// The encoded size of `strings`, without encoding them.
uint64_t EncodedStringTensorSize(std::span<const std::string> strings);

// Decodes exactly `bytes` into out[0, N); *crc receives the unmasked entry
// CRC. `swapped` means the file's byte order differs from the host's (the
// checksums were computed in the writer's order). DataLoss, without file or
// key context, if the bytes are not a valid encoding of N strings.
Status DecodeStringTensor(std::string_view bytes, std::span<std::string> out, bool swapped,
                          uint32_t* crc);

// DecodeStringTensor of one string, left in *bytes itself: its prefix (the
// length and its checksum) is cut off, no second buffer is allocated.
Status DecodeStringScalarInPlace(std::string* bytes, bool swapped, uint32_t* crc);

// Splits [0, n) into pieces of `chunk` bytes (the last may be shorter),
// calls fn(offset, length) -> CRC32C of that piece on them in parallel, and
// returns the CRC32C of the whole range, joined with crc32c::Combine; or the
// error of the first failing piece.
StatusOr<uint32_t> ParallelChunkedCrc(
    uint64_t n, uint64_t chunk, const std::function<StatusOr<uint32_t>(uint64_t, uint64_t)>& fn);

// Reverses the byte order of n elements of elem_size (1, 2, 4, 8 or 16: a
// complex128 swaps each 8-byte half) bytes in place.
void SwapBytes(void* data, size_t elem_size, size_t n);

}  // namespace ckflow::internal

#endif  // CKFLOW_BUNDLE_BUNDLE_CODING_INTERNAL_H_
