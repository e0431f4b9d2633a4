// What the fuzz targets check, shared by the libFuzzer binaries (built with
// clang, `./run.sh fuzz`) and the GoogleTest that replays seeds, deterministic
// mutations of them and saved crash inputs in every ctest run.
//
// A fuzz input packs the files of one checkpoint:
//   [u32 n][n bytes: P.index] ([u32 n][n bytes: P.data-0000i-of-0000N])...
// little-endian lengths; N is the number of data records, a length past the
// end takes what is left. The checks write those files, then drive every
// reader a user reaches with a checkpoint from elsewhere: the bundle (open,
// look up, batch-read, verify), the object graph as `ckflow tree` renders it,
// and object-based restores into the structures of restore_targets.h. Bad input must come back as a
// Status with a code a reader of foreign files can get (DataLoss, NotFound, InvalidArgument, ...),
// never as a crash, an Internal error or an unbounded allocation, and the fast batch path must
// return the bytes the one-tensor path does.

#ifndef CKFLOW_TESTS_FUZZ_CHECKPOINT_CHECKS_H_
#define CKFLOW_TESTS_FUZZ_CHECKPOINT_CHECKS_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "tests/fuzz/restore_targets.h"

namespace ckflow::fuzz {

// The records of a packed input, and the packing of one record.
std::vector<std::span<const uint8_t>> UnpackRecords(std::span<const uint8_t> input);
void AppendRecord(std::string_view bytes, std::vector<uint8_t>* out);

// A named fuzz input.
struct Seed {
  std::string name;
  std::vector<uint8_t> bytes;
};

// Seeds for CheckCheckpointInput: every V2 checkpoint under `testdata_dir`
// (TensorFlow's golden files, tests/testdata/), each named
// "<folder>_<prefix>", and one of each structure RestoreTargets restores
// into, "ckflow_<structure>", saved under `scratch_dir`.
StatusOr<std::vector<Seed>> CheckpointSeeds(const std::string& testdata_dir,
                                            const std::string& scratch_dir);
// Seeds for CheckStateInput: the state files under `testdata_dir` and one
// ckflow writes.
StatusOr<std::vector<Seed>> StateSeeds(const std::string& testdata_dir,
                                       const std::string& scratch_dir);

struct CheckResult {
  std::string finding;  // "" or a description of what broke
  // The structures that restored everything, every assertion passed.
  std::vector<std::string> restored;
};

// Inputs made from a CheckpointSeeds seed by changing one field of one
// index entry (dtype, shape, shard, offset, size, slices) or of the header,
// and writing the index again with fresh block checksums and, where the new
// byte range lies in a data file, a fresh entry checksum: mutations that
// reach the parsers behind the CRCs, which flipped bits mostly do not. At
// most `max_entries` entries per seed (spread over the index) are mutated.
std::vector<Seed> IndexMutations(const Seed& seed, size_t max_entries);

// Writes the input's files under `dir` of `targets`' in-memory file system
// (replacing what the last call wrote) and runs the checks, restoring into
// `targets`' structures.
CheckResult CheckCheckpointInput(std::span<const uint8_t> input, const std::string& dir,
                                 RestoreTargets& targets);

// The input as the `checkpoint` state file of `dir`: read it, resolve the
// directory and ask for its latest checkpoint.
std::string CheckStateInput(std::span<const uint8_t> input, const std::string& dir);

// The input as a recipe for a checkpoint: tensors of every dtype ckflow
// holds (empty ones, odd string lengths, arbitrary key bytes) written into
// two shards by BundleWriter and merged by MergeBundles. Reading it back must
// give every tensor bit for bit, through Lookup and ReadBatch alike; writing
// or merging may fail only where it must (an empty or repeated key).
std::string CheckRoundTripInput(std::span<const uint8_t> input, const std::string& dir);

}  // namespace ckflow::fuzz

#endif  // CKFLOW_TESTS_FUZZ_CHECKPOINT_CHECKS_H_
