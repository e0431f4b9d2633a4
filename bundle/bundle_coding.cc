#include <algorithm>
#include <bit>
#include <vector>

#include "base/parallel.h"
#include "bundle/bundle_coding_internal.h"
#include "bundle/crc32c.h"

namespace ckflow::internal {

static_assert(std::endian::native == std::endian::little,
              "ckflow reads and writes little-endian checkpoints on little-endian hosts");

void PutVarint64(std::string* dst, uint64_t v) {
  char buf[10];
  int n = 0;
  while (v >= 0x80) {
    buf[n++] = static_cast<char>(v | 0x80);
    v >>= 7;
  }
  buf[n++] = static_cast<char>(v);
  dst->append(buf, n);
}

bool GetVarint64(const char** p, const char* end, uint64_t* v) {
  uint64_t result = 0;
  const char* q = *p;
  for (int shift = 0; shift <= 63 && q < end; shift += 7) {
    uint64_t byte = static_cast<unsigned char>(*q++);
    result |= (byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) {
      *p = q;
      *v = result;
      return true;
    }
  }
  return false;
}

namespace {

// Feeds one string length into the length checksum as TensorFlow does: as a
// uint32 unless it does not fit. `swapped`: the writer's byte order.
uint32_t ExtendWithLength(uint32_t crc, uint64_t length, bool swapped) {
  if (length <= 0xffffffffu) {
    uint32_t l = static_cast<uint32_t>(length);
    if (swapped) l = __builtin_bswap32(l);
    return crc32c::Extend(crc, &l, sizeof(l));
  }
  if (swapped) length = __builtin_bswap64(length);
  return crc32c::Extend(crc, &length, sizeof(length));
}

}  // namespace

uint64_t EncodedStringTensorSize(std::span<const std::string> strings) {
  uint64_t size = 4;
  for (const std::string& s : strings) {
    uint64_t n = s.size();
    do {
      ++size;
      n >>= 7;
    } while (n != 0);
    size += s.size();
  }
  return size;
}

uint32_t EncodeStringTensor(std::span<const std::string> strings, std::string* out) {
  uint32_t crc = 0;
  for (const std::string& s : strings) {
    PutVarint64(out, s.size());
    crc = ExtendWithLength(crc, s.size(), /*swapped=*/false);
  }
  uint32_t masked = crc32c::Mask(crc);
  PutFixed32(out, masked);
  crc = crc32c::Extend(crc, &masked, sizeof(masked));
  for (const std::string& s : strings) {
    out->append(s);
    crc = crc32c::Extend(crc, s);
  }
  return crc;
}

namespace {

// Checks that `bytes` encode exactly `n` strings and computes the entry's
// CRC into *crc; their lengths go to *lengths. Returns where the strings'
// bytes begin.
StatusOr<size_t> CheckStringTensor(std::string_view bytes, size_t n, bool swapped, uint32_t* crc,
                                   std::vector<uint64_t>* lengths) {
  const char* p = bytes.data();
  const char* end = p + bytes.size();
  // Every length takes at least one byte, so this vector is bounded by the
  // (already bounds-checked) entry size.
  if (n > bytes.size()) return DataLossError(n, " strings cannot fit in ", bytes.size(), " bytes");
  lengths->resize(n);
  uint32_t c = 0;
  uint64_t total = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!GetVarint64(&p, end, &(*lengths)[i])) {
      return DataLossError("string length ", i, " is truncated or malformed");
    }
    if ((*lengths)[i] > bytes.size() - total) {
      return DataLossError("string lengths add up to more than the entry's ", bytes.size(),
                           " bytes");
    }
    total += (*lengths)[i];
    c = ExtendWithLength(c, (*lengths)[i], swapped);
  }
  if (end - p < 4) return DataLossError("string length checksum is truncated");
  uint32_t stored = DecodeFixed32(p);
  uint32_t stored_host = swapped ? __builtin_bswap32(stored) : stored;
  if (crc32c::kVerifyStored && crc32c::Unmask(stored_host) != c) {
    return DataLossError("string length checksum mismatch: stored ", crc32c::Unmask(stored_host),
                         ", computed ", c);
  }
  c = crc32c::Extend(c, p, 4);
  p += 4;
  if (static_cast<uint64_t>(end - p) != total) {
    return DataLossError("string bytes take ", end - p, " bytes but the lengths add up to ", total);
  }
  *crc = crc32c::Extend(c, p, total);  // the strings lie back to back
  return static_cast<size_t>(p - bytes.data());
}

}  // namespace

Status DecodeStringTensor(std::string_view bytes, std::span<std::string> out, bool swapped,
                          uint32_t* crc) {
  std::vector<uint64_t> lengths;
  CKFLOW_ASSIGN_OR_RETURN(size_t at, CheckStringTensor(bytes, out.size(), swapped, crc, &lengths));
  for (size_t i = 0; i < out.size(); ++i) {
    out[i].assign(bytes.data() + at, lengths[i]);
    at += lengths[i];
  }
  return OkStatus();
}

Status DecodeStringScalarInPlace(std::string* bytes, bool swapped, uint32_t* crc) {
  std::vector<uint64_t> lengths;
  CKFLOW_ASSIGN_OR_RETURN(const size_t at, CheckStringTensor(*bytes, 1, swapped, crc, &lengths));
  bytes->erase(0, at);
  return OkStatus();
}

StatusOr<uint32_t> ParallelChunkedCrc(
    uint64_t n, uint64_t chunk, const std::function<StatusOr<uint32_t>(uint64_t, uint64_t)>& fn) {
  const uint64_t num_chunks = n == 0 ? 0 : (n - 1) / chunk + 1;
  std::vector<uint32_t> crcs(num_chunks);
  std::vector<Status> errors(num_chunks);
  // A chunk costs about a cycle per byte (copy plus CRC).
  ParallelFor(static_cast<int64_t>(num_chunks), static_cast<int64_t>(chunk),
              [&](int64_t begin, int64_t end) {
                for (int64_t i = begin; i < end; ++i) {
                  uint64_t offset = static_cast<uint64_t>(i) * chunk;
                  StatusOr<uint32_t> crc = fn(offset, std::min(chunk, n - offset));
                  if (crc.ok()) {
                    crcs[i] = *crc;
                  } else {
                    errors[i] = crc.status();
                  }
                }
              });
  uint32_t crc = 0;
  for (uint64_t i = 0; i < num_chunks; ++i) {
    if (!errors[i].ok()) return errors[i];
    crc = crc32c::Combine(crc, crcs[i], std::min(chunk, n - i * chunk));
  }
  return crc;
}

void SwapBytes(void* data, size_t elem_size, size_t n) {
  auto* p = static_cast<unsigned char*>(data);
  switch (elem_size) {
    case 1:
      return;
    case 2:
      for (size_t i = 0; i < n; ++i, p += 2) {
        uint16_t v;
        std::memcpy(&v, p, 2);
        v = __builtin_bswap16(v);
        std::memcpy(p, &v, 2);
      }
      return;
    case 4:
      for (size_t i = 0; i < n; ++i, p += 4) {
        uint32_t v;
        std::memcpy(&v, p, 4);
        v = __builtin_bswap32(v);
        std::memcpy(p, &v, 4);
      }
      return;
    case 8:
      for (size_t i = 0; i < n; ++i, p += 8) {
        uint64_t v;
        std::memcpy(&v, p, 8);
        v = __builtin_bswap64(v);
        std::memcpy(p, &v, 8);
      }
      return;
    case 16:
      SwapBytes(data, 8, 2 * n);
      return;
    default:
      return;
  }
}

}  // namespace ckflow::internal
