// Structure-aware mutations of the checkpoint fuzz target's inputs (the
// packed index and data files of checkpoint_checks.h), for libFuzzer's
// LLVMFuzzerCustomMutator and LLVMFuzzerCustomCrossOver.
//
// Flipped bytes rarely get past an index's block checksums or a value's
// entry checksum, so byte mutation alone seldom reaches what they guard: the
// entry decoding, the object graph and the matching of it to live objects.
// These mutations parse the input with the project's own table and bundle
// code, change the TrackableObjectGraph (children, local names, node ids,
// attributes and their keys, slot references, nodes themselves) or the
// index (entries' keys, dtypes, shapes, shard ids, offsets, sizes, slices;
// the header; a value's bytes) field by field, and write the result back
// with valid block checksums and, where the entry's byte range lies in its
// data file, a fresh entry checksum. Inputs that do not parse, and some
// that do, go to the byte mutator instead.
//
// Thread safety: pure functions of their arguments.

#ifndef CKFLOW_TESTS_FUZZ_CHECKPOINT_MUTATOR_H_
#define CKFLOW_TESTS_FUZZ_CHECKPOINT_MUTATOR_H_

#include <cstddef>
#include <cstdint>
#include <functional>

namespace ckflow::fuzz {

// libFuzzer's LLVMFuzzerMutate: mutates data[0, size) in place, returns the
// new size (at most max_size).
using ByteMutator = std::function<size_t(uint8_t* data, size_t size, size_t max_size)>;

// Mutates the input in data[0, size) in place, choosing by `seed`; returns
// its new size, at most max_size.
size_t MutateCheckpointInput(uint8_t* data, size_t size, size_t max_size, unsigned seed,
                             const ByteMutator& bytes);

// Writes into out[0, max_out) an input made of two: the first's files with
// the second's object graph, or with some of the second's entries (their
// values copied into the first's data). Returns its size; 0 if neither
// parses as a checkpoint or the result would not fit.
size_t CrossOverCheckpointInputs(const uint8_t* a, size_t a_size, const uint8_t* b, size_t b_size,
                                 uint8_t* out, size_t max_out, unsigned seed);

}  // namespace ckflow::fuzz

#endif  // CKFLOW_TESTS_FUZZ_CHECKPOINT_MUTATOR_H_
