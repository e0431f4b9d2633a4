// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
// 3", SC 2011): a counter-based generator. Block b of a stream is a pure
// function of (key, counter = b), so the random ops compute element i from
// (seed, seed2, run, i) alone: the same numbers however the work is split
// over threads, and any element without computing the ones before it.
//
// Thread safety: pure functions and immutable values.

#ifndef CKFLOW_OPS_PHILOX_INTERNAL_H_
#define CKFLOW_OPS_PHILOX_INTERNAL_H_

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numbers>

namespace ckflow::internal {

using PhiloxBlock = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

inline constexpr uint64_t kPhiloxMul0 = 0xD2511F53, kPhiloxMul1 = 0xCD9E8D57;
inline constexpr uint32_t kPhiloxWeyl0 = 0x9E3779B9, kPhiloxWeyl1 = 0xBB67AE85;

// Ten rounds of Philox4x32 on `counter` under `key`.
inline PhiloxBlock Philox4x32(PhiloxBlock ctr, PhiloxKey key) {
  constexpr uint64_t kMul0 = kPhiloxMul0, kMul1 = kPhiloxMul1;
  constexpr uint32_t kWeyl0 = kPhiloxWeyl0, kWeyl1 = kPhiloxWeyl1;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = kMul0 * ctr[0];
    const uint64_t p1 = kMul1 * ctr[2];
    ctr = {static_cast<uint32_t>(p1 >> 32) ^ ctr[1] ^ key[0], static_cast<uint32_t>(p1),
           static_cast<uint32_t>(p0 >> 32) ^ ctr[3] ^ key[1], static_cast<uint32_t>(p0)};
    key[0] += kWeyl0;
    key[1] += kWeyl1;
  }
  return ctr;
}

// The stream of one run of one seeded kernel. The (seed, seed2, run)
// triple is itself hashed through Philox into the stream's key and the high
// half of its counters, so distinct triples give unrelated streams.
class PhiloxStream {
 public:
  PhiloxStream(uint64_t seed, uint64_t seed2, uint64_t run) {
    PhiloxBlock d = Philox4x32({Lo(run), Hi(run), Lo(seed2), Hi(seed2)}, {Lo(seed), Hi(seed)});
    key_ = {d[0], d[1]};
    high_ = {d[2], d[3]};
  }
  // 128 random bits: block b of the stream.
  PhiloxBlock Block(uint64_t b) const {
    return Philox4x32({Lo(b), Hi(b), high_[0], high_[1]}, key_);
  }

  // Blocks first, ..., first + kLanes - 1 at once, word by word: words[j][i]
  // is word j of block first + i, as Block gives it. Laid out so, the
  // rounds are the same operation on every lane, which the compiler runs
  // in vectors (a block at a time is a chain of dependent multiplies).
  static constexpr int kLanes = 16;
  void Blocks(uint64_t first, uint32_t (&words)[4][kLanes]) const {
    for (int i = 0; i < kLanes; ++i) {
      words[0][i] = Lo(first + i);
      words[1][i] = Hi(first + i);
      words[2][i] = high_[0];
      words[3][i] = high_[1];
    }
    uint32_t k0 = key_[0], k1 = key_[1];
    for (int round = 0; round < 10; ++round) {
      for (int i = 0; i < kLanes; ++i) {
        const uint64_t p0 = kPhiloxMul0 * words[0][i];
        const uint64_t p1 = kPhiloxMul1 * words[2][i];
        words[0][i] = static_cast<uint32_t>(p1 >> 32) ^ words[1][i] ^ k0;
        words[1][i] = static_cast<uint32_t>(p1);
        words[2][i] = static_cast<uint32_t>(p0 >> 32) ^ words[3][i] ^ k1;
        words[3][i] = static_cast<uint32_t>(p0);
      }
      k0 += kPhiloxWeyl0;
      k1 += kPhiloxWeyl1;
    }
  }

 private:
  static uint32_t Lo(uint64_t v) { return static_cast<uint32_t>(v); }
  static uint32_t Hi(uint64_t v) { return static_cast<uint32_t>(v >> 32); }
  PhiloxKey key_;
  std::array<uint32_t, 2> high_;
};

// Uniform in [0, 1) from the low 23 (float) or 52 (double) bits: the bits
// become the mantissa of a number in [1, 2), minus 1.
inline float UniformFloat(uint32_t x) {
  const uint32_t bits = 0x3f800000u | (x & 0x7fffffu);
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f - 1.0f;
}
inline double UniformDouble(uint32_t lo, uint32_t hi) {
  const uint64_t bits = 0x3ff0000000000000ull | ((uint64_t{hi} << 32 | lo) & 0xfffffffffffffull);
  double d;
  std::memcpy(&d, &bits, sizeof(d));
  return d - 1.0;
}

// Values of type T one Philox block yields: 4 floats or 2 doubles.
template <typename T>
inline constexpr int kValuesPerBlock = sizeof(T) == 4 ? 4 : 2;

template <typename T>
std::array<T, kValuesPerBlock<T>> UniformValues(const PhiloxBlock& b) {
  if constexpr (sizeof(T) == 4) {
    return {UniformFloat(b[0]), UniformFloat(b[1]), UniformFloat(b[2]), UniformFloat(b[3])};
  } else {
    return {UniformDouble(b[0], b[1]), UniformDouble(b[2], b[3])};
  }
}

// Standard normal pairs by Box-Muller; u1 is kept off 0 so log stays
// finite.
template <typename T>
std::array<T, kValuesPerBlock<T>> NormalValues(const PhiloxBlock& b) {
  std::array<T, kValuesPerBlock<T>> u = UniformValues<T>(b);
  constexpr T kEpsilon = T(1e-7);
  for (int i = 0; i < kValuesPerBlock<T>; i += 2) {
    const T r = std::sqrt(T(-2) * std::log(std::max(u[i], kEpsilon)));
    const T theta = T(2 * std::numbers::pi) * u[i + 1];
    u[i] = r * std::sin(theta);
    u[i + 1] = r * std::cos(theta);
  }
  return u;
}

}  // namespace ckflow::internal

#endif  // CKFLOW_OPS_PHILOX_INTERNAL_H_
