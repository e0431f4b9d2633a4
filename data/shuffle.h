// A seeded shuffle of a data set's examples, one order per epoch, the same
// on every machine and easy to reproduce elsewhere (the interop suite does
// it in Python to feed TensorFlow the same batches).
//
//   std::vector<int64_t> order = ShuffledIndices(60000, /*seed=*/1, epoch);
//   // the examples of step s of that epoch: order[s * batch, (s + 1) * batch)
//
// The algorithm, exactly: SplitMix64's mix function
//   mix(z) = z ^= z >> 30, z *= 0xbf58476d1ce4e5b9, z ^= z >> 27,
//            z *= 0x94d049bb133111eb, z ^ (z >> 31)      (mod 2^64)
// and its stream: state += 0x9e3779b97f4a7c15, then output mix(state).
// The stream of (seed, epoch) starts at state = seed ^ mix(epoch); the
// indices start as 0, 1, ..., n - 1, and for i from n - 1 down to 1 the
// next output r swaps index i with index r % (i + 1) (Fisher-Yates). A
// resumed run finds the order of any epoch again from (seed, epoch) alone.
//
// Thread safety: a pure function.

#ifndef CKFLOW_DATA_SHUFFLE_H_
#define CKFLOW_DATA_SHUFFLE_H_

#include <cstdint>
#include <vector>

namespace ckflow {

// A permutation of 0..n-1 (empty for n <= 0), as described above.
std::vector<int64_t> ShuffledIndices(int64_t n, uint64_t seed, int64_t epoch);

}  // namespace ckflow

#endif  // CKFLOW_DATA_SHUFFLE_H_
