#include "bundle/crc32c.h"

#include <isa-l/crc.h>

#include <array>
#include <limits>

namespace ckflow::crc32c {
namespace {

// The CRC32C polynomial, bit-reflected (bit 31 is the coefficient of x^0).
constexpr uint32_t kPoly = 0x82f63b78u;

// a(x) * b(x) modulo the polynomial, in the reflected representation.
constexpr uint32_t MultiplyModP(uint32_t a, uint32_t b) {
  uint32_t m = 1u << 31;
  uint32_t p = 0;
  for (;;) {
    if (a & m) {
      p ^= b;
      if ((a & (m - 1)) == 0) break;
    }
    m >>= 1;
    b = (b & 1) ? (b >> 1) ^ kPoly : b >> 1;
  }
  return p;
}

// kPowers[k] = x^(2^k) modulo the polynomial, for every k a 64-bit byte
// count can reach (bit 63 of the count is x^(2^66)). Not periodic with period
// 32 as for zlib's polynomial, so the table is not folded.
constexpr std::array<uint32_t, 67> MakePowers() {
  std::array<uint32_t, 67> powers{};
  uint32_t p = 1u << 30;  // x^1
  for (uint32_t& power : powers) {
    power = p;
    p = MultiplyModP(p, p);
  }
  return powers;
}
constexpr std::array<uint32_t, 67> kPowers = MakePowers();

// x^(8 * bytes) modulo the polynomial: the operator that shifts a CRC past
// `bytes` zero bytes.
uint32_t ShiftOperator(uint64_t bytes) {
  uint32_t p = 1u << 31;  // x^0
  for (int k = 3; bytes != 0; bytes >>= 1, ++k) {
    if (bytes & 1) p = MultiplyModP(kPowers[k], p);
  }
  return p;
}

}  // namespace

uint32_t Extend(uint32_t crc, const void* data, size_t n) {
  // ISA-L works on the unconditioned register: standard = raw ^ ~0. Its
  // length is an int, so huge buffers go in pieces.
  constexpr size_t kMaxPiece = size_t{1} << 30;
  auto* p = static_cast<unsigned char*>(const_cast<void*>(data));
  uint32_t raw = crc ^ 0xffffffffu;
  while (n > 0) {
    size_t piece = n < kMaxPiece ? n : kMaxPiece;
    raw = crc32_iscsi(p, static_cast<int>(piece), raw);
    p += piece;
    n -= piece;
  }
  return raw ^ 0xffffffffu;
}

uint32_t Combine(uint32_t crc1, uint32_t crc2, uint64_t len2) {
  // The pre- and post-conditioning (~0) cancel out, as in zlib's
  // crc32_combine: crc(a ++ b) = crc(a) * x^(8 len(b)) + crc(b).
  return MultiplyModP(ShiftOperator(len2), crc1) ^ crc2;
}

}  // namespace ckflow::crc32c
