// Runs the fuzz targets' checks (checkpoint_checks.h) in every ctest run,
// without libFuzzer: on the seeds, on deterministic mutations of them
// (truncations, bit flips, all-ones words where lengths and sizes live) and
// on the custom mutator's. What libFuzzer finds becomes a unit test beside
// the code it broke (as CheckpointTest.ARestoreWaitingOnAVariableDoesNotKeepTheGraphAlive
// and BundleReaderTest.BigEndianBatchReadsKeysThatShareBytes did), and its
// input goes into tests/fuzz/corpus/<target>, which ctest replays
// (fuzz_corpus_<target>).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "base/logging.h"
#include "bundle/bundle_format.h"
#include "bundle/bundle_index_internal.h"
#include "bundle/protos/tensor_bundle.pb.h"
#include "tests/fuzz/checkpoint_checks.h"
#include "tests/fuzz/checkpoint_mutator.h"
#include "tests/fuzz/memory_file_system.h"
#include "tests/test_util.h"

namespace ckflow::fuzz {
namespace {

// [offset, size) of each record of a packed checkpoint (see the header).
struct Record {
  size_t offset;
  size_t size;
};

std::vector<Record> RecordsOf(const std::vector<uint8_t>& input) {
  std::vector<Record> records;
  size_t at = 0;
  while (input.size() - at >= 4) {
    const uint32_t n = input[at] | input[at + 1] << 8 | input[at + 2] << 16 |
                       static_cast<uint32_t>(input[at + 3]) << 24;
    at += 4;
    const size_t take = std::min<size_t>(n, input.size() - at);
    records.push_back({at, take});
    at += take;
  }
  return records;
}

std::vector<uint8_t> TruncateRecord(const std::vector<uint8_t>& input, const Record& record,
                                    size_t size) {
  std::vector<uint8_t> out(input.begin(), input.begin() + static_cast<ptrdiff_t>(record.offset));
  for (int i = 0; i < 4; ++i) out[record.offset - 4 + i] = static_cast<uint8_t>(size >> (8 * i));
  out.insert(out.end(), input.begin() + static_cast<ptrdiff_t>(record.offset),
             input.begin() + static_cast<ptrdiff_t>(record.offset + size));
  out.insert(out.end(), input.begin() + static_cast<ptrdiff_t>(record.offset + record.size),
             input.end());
  return out;
}

// `count` positions spread evenly over [begin, end).
std::vector<size_t> Spread(size_t begin, size_t end, size_t count) {
  std::vector<size_t> positions;
  if (end <= begin) return positions;
  count = std::min(count, end - begin);
  for (size_t i = 0; i < count; ++i) positions.push_back(begin + (end - begin) * i / count);
  return positions;
}

class FuzzReplayTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    SetLogSink([](LogSeverity, std::string_view) {});  // bad input warns by design
    scratch_ = new std::string(testing::NewTempDir("fuzz-seeds"));
    auto checkpoints = CheckpointSeeds(testing::TestDataDir(), *scratch_);
    auto states = StateSeeds(testing::TestDataDir(), *scratch_);
    ASSERT_TRUE(checkpoints.ok()) << checkpoints.status();
    ASSERT_TRUE(states.ok()) << states.status();
    checkpoint_seeds_ = new std::vector<Seed>(*std::move(checkpoints));
    targets_ = new RestoreTargets;
    state_seeds_ = new std::vector<Seed>(*std::move(states));
  }
  static void TearDownTestSuite() {
    SetLogSink(nullptr);
    delete scratch_;
    delete checkpoint_seeds_;
    delete state_seeds_;
    delete targets_;
  }

  void ExpectNoFinding(const std::vector<uint8_t>& input, const std::string& what) {
    EXPECT_EQ(CheckCheckpointInput(input, dir_, *targets_).finding, "") << what;
  }

  static std::string* scratch_;
  static std::vector<Seed>* checkpoint_seeds_;
  static std::vector<Seed>* state_seeds_;
  // Built once for the suite, as the fuzz target builds them once.
  static RestoreTargets* targets_;
  const std::string dir_ = testing::NewTempDir("fuzz");
};

std::string* FuzzReplayTest::scratch_ = nullptr;
std::vector<Seed>* FuzzReplayTest::checkpoint_seeds_ = nullptr;
std::vector<Seed>* FuzzReplayTest::state_seeds_ = nullptr;
RestoreTargets* FuzzReplayTest::targets_ = nullptr;

TEST_F(FuzzReplayTest, SeedsCoverEveryGoldenCheckpointAndOurOwn) {
  // One per V2 checkpoint of tests/testdata (fifteen, four of them in
  // several data files), and one of each structure restores go into.
  const std::vector<std::string> structures = RestoreTargets::Names();
  ASSERT_EQ(checkpoint_seeds_->size(), 15 + structures.size());
  for (const Seed& seed : *checkpoint_seeds_) {
    EXPECT_EQ(CheckCheckpointInput(seed.bytes, dir_, *targets_).finding, "") << seed.name;
  }
}

// Ours restore in full into their own structure, so mutations of them reach
// the restore ops and the value checks.
TEST_F(FuzzReplayTest, EachStructureRestoresItsOwnCheckpointInFull) {
  for (const std::string& name : RestoreTargets::Names()) {
    const auto seed = std::find_if(checkpoint_seeds_->begin(), checkpoint_seeds_->end(),
                                   [&](const Seed& s) { return s.name == "ckflow_" + name; });
    ASSERT_NE(seed, checkpoint_seeds_->end()) << name;
    const CheckResult result = CheckCheckpointInput(seed->bytes, dir_, *targets_);
    EXPECT_EQ(result.finding, "") << name;
    EXPECT_THAT(result.restored, ::testing::Contains(name));
  }
}

// A structure is built on its first restore and reused, and built again
// after kRestoresPerBuild restores, so what restores leave behind stays
// bounded.
TEST_F(FuzzReplayTest, StructuresAreBuiltOnceAndAgainAfterManyRestores) {
  RestoreTargets targets;
  const auto seed = std::find_if(checkpoint_seeds_->begin(), checkpoint_seeds_->end(),
                                 [](const Seed& s) { return s.name == "ckflow_adam_mlp"; });
  ASSERT_NE(seed, checkpoint_seeds_->end());
  for (int i = 0; i < RestoreTargets::kRestoresPerBuild; ++i) {
    ASSERT_EQ(CheckCheckpointInput(seed->bytes, dir_, targets).finding, "");
  }
  EXPECT_THAT(targets.builds(), ::testing::ElementsAre(1, 0, 0));
  ASSERT_EQ(CheckCheckpointInput(seed->bytes, dir_, targets).finding, "");
  EXPECT_THAT(targets.builds(), ::testing::ElementsAre(2, 0, 0));
}

TEST_F(FuzzReplayTest, TruncatedFiles) {
  for (const Seed& seed : *checkpoint_seeds_) {
    for (const Record& record : RecordsOf(seed.bytes)) {
      std::vector<size_t> sizes = Spread(0, record.size, 16);
      if (record.size > 0) sizes.push_back(record.size - 1);
      for (size_t size : sizes) {
        ExpectNoFinding(TruncateRecord(seed.bytes, record, size),
                        seed.name + " with a record at offset " + std::to_string(record.offset) +
                            " cut to " + std::to_string(size) + " bytes");
      }
    }
  }
}

TEST_F(FuzzReplayTest, FlippedBits) {
  for (const Seed& seed : *checkpoint_seeds_) {
    const std::vector<Record> records = RecordsOf(seed.bytes);
    ASSERT_FALSE(records.empty()) << seed.name;
    // Most flips go to the index, where the structure is; the rest to data.
    std::vector<size_t> positions =
        Spread(records[0].offset, records[0].offset + records[0].size, 96);
    for (size_t r = 1; r < records.size(); ++r) {
      for (size_t p : Spread(records[r].offset, records[r].offset + records[r].size, 16)) {
        positions.push_back(p);
      }
    }
    for (size_t i = 0; i < positions.size(); ++i) {
      std::vector<uint8_t> flipped = seed.bytes;
      flipped[positions[i]] ^= static_cast<uint8_t>(i % 2 == 0 ? 0xff : 1u << (i / 2 % 8));
      ExpectNoFinding(flipped,
                      seed.name + " with byte " + std::to_string(positions[i]) + " flipped");
    }
  }
}

// All-ones words turn varints, block handles, sizes and shapes into their
// largest values: the inputs that tempt a reader into a huge allocation.
TEST_F(FuzzReplayTest, HugeLengthsAndSizes) {
  for (const Seed& seed : *checkpoint_seeds_) {
    const Record index = RecordsOf(seed.bytes).at(0);
    for (size_t p :
         Spread(index.offset, index.offset + index.size - std::min<size_t>(index.size, 4), 48)) {
      std::vector<uint8_t> stamped = seed.bytes;
      std::fill_n(stamped.begin() + static_cast<ptrdiff_t>(p), 4, uint8_t{0xff});
      ExpectNoFinding(stamped, seed.name + " with 0xffffffff at byte " + std::to_string(p));
    }
  }
}

// Mutations that keep every checksum true, so they reach what the CRCs
// guard: the entry decoding, shape and dtype checks, range checks, restore.
TEST_F(FuzzReplayTest, IndexEntriesMutatedBehindFreshChecksums) {
  size_t tried = 0;
  for (const Seed& seed : *checkpoint_seeds_) {
    const std::vector<Seed> mutants = IndexMutations(seed, 8);
    EXPECT_FALSE(mutants.empty()) << seed.name;
    for (const Seed& mutant : mutants) {
      ExpectNoFinding(mutant.bytes, mutant.name);
      ++tried;
    }
  }
  // Eight entries of each of the eighteen seeds, each in about thirty ways.
  EXPECT_GE(tried, 1000u);
}

// The custom mutator's inputs carry valid block checksums, so in this build
// (which checks them, unlike the fuzzing build) they reach the entries,
// the object graph and the restore; and none of them is a finding.
TEST_F(FuzzReplayTest, StructuredMutationsKeepTheIndexReadable) {
  size_t structured = 0;
  for (const Seed& seed : *checkpoint_seeds_) {
    if (seed.bytes.size() > 65536) continue;  // the 1 MiB seed: its index is as the others'
    for (unsigned mutation = 1; mutation <= 60; ++mutation) {
      std::vector<uint8_t> bytes = seed.bytes;
      bytes.resize(bytes.size() + 4096);
      bool by_bytes = false;
      const size_t size = MutateCheckpointInput(bytes.data(), seed.bytes.size(), bytes.size(),
                                                mutation, [&](uint8_t*, size_t n, size_t) {
                                                  by_bytes = true;
                                                  return n;
                                                });
      bytes.resize(size);
      const std::string what = seed.name + " mutation " + std::to_string(mutation);
      if (!by_bytes) {
        ++structured;
        const std::vector<std::span<const uint8_t>> records = UnpackRecords(bytes);
        ASSERT_FALSE(records.empty()) << what;
        const std::string_view index(reinterpret_cast<const char*>(records[0].data()),
                                     records[0].size());
        EXPECT_TRUE(internal::ReadTable(what, index).ok()) << what;
      }
      ExpectNoFinding(bytes, what);
    }
  }
  // Four in five mutations are structured (the fifth goes to bytes anyway).
  EXPECT_GE(structured, 17u * 60 * 3 / 4);
}

// The stored bytes of a packed checkpoint's object graph; "" if it has none.
std::string GraphBytes(const std::vector<uint8_t>& input) {
  const std::vector<std::span<const uint8_t>> records = UnpackRecords(input);
  if (records.empty()) return "";
  auto as_view = [](std::span<const uint8_t> r) {
    return std::string_view(reinterpret_cast<const char*>(r.data()), r.size());
  };
  StatusOr<std::vector<internal::KeyValue>> table = internal::ReadTable("in", as_view(records[0]));
  if (!table.ok()) return "";
  for (const auto& [key, value] : *table) {
    tensorflow::BundleEntryProto entry;
    if (key != kObjectGraphKey || !entry.ParseFromString(value)) continue;
    const size_t file = static_cast<size_t>(entry.shard_id()) + 1;
    if (file >= records.size()) return "";
    return std::string(
        as_view(records[file])
            .substr(static_cast<size_t>(entry.offset()), static_cast<size_t>(entry.size())));
  }
  return "";
}

// A crossover is the first input with the second's object graph, as stored,
// or with some of the second's values; each of them readable, and none a
// finding.
TEST_F(FuzzReplayTest, CrossOversTakeTheSecondsGraphOrSomeOfItsValues) {
  int graphs = 0;
  int values = 0;
  for (size_t i = 0; i + 1 < checkpoint_seeds_->size(); ++i) {
    const Seed& a = (*checkpoint_seeds_)[i];
    const Seed& b = (*checkpoint_seeds_)[i + 1];
    if (a.bytes.size() > 65536 || b.bytes.size() > 65536) continue;
    const std::string a_graph = GraphBytes(a.bytes);
    const std::string b_graph = GraphBytes(b.bytes);
    for (unsigned seed = 1; seed <= 12; ++seed) {
      const std::string what = a.name + " x " + b.name + " seed " + std::to_string(seed);
      std::vector<uint8_t> out(a.bytes.size() + b.bytes.size() + 4096);
      const size_t size = CrossOverCheckpointInputs(a.bytes.data(), a.bytes.size(), b.bytes.data(),
                                                    b.bytes.size(), out.data(), out.size(), seed);
      ASSERT_GT(size, 0u) << what;
      out.resize(size);
      const std::string out_graph = GraphBytes(out);
      if (!b_graph.empty() && out_graph == b_graph && b_graph != a_graph) {
        ++graphs;
      } else {
        EXPECT_EQ(out_graph, a_graph) << what;
        if (out != a.bytes) ++values;
      }
      ExpectNoFinding(out, what);
    }
  }
  EXPECT_GE(graphs, 20);
  EXPECT_GE(values, 20);
}

// The checkpoint target's files: what a save and a restore ask of a file
// system, with the codes the disk would give.
TEST(MemoryFileSystemTest, BehavesAsTheDiskDoesForWhatCheckpointsDo) {
  MemoryFileSystem fs;
  EXPECT_EQ(fs.NewWritableFile("/d/x").status().code(), StatusCode::kNotFound);  // no /d yet
  CKFLOW_ASSERT_OK(fs.Put("/d/e/x.tmp", "abc"));
  CKFLOW_ASSERT_OK(fs.RenameFile("/d/e/x.tmp", "/d/e/./x"));
  EXPECT_EQ(fs.FileExists("/d/e/x.tmp").code(), StatusCode::kNotFound);
  EXPECT_TRUE(fs.IsDirectory("/d") && !fs.IsDirectory("/d/e/x"));
  CKFLOW_ASSERT_OK_AND_ASSIGN(FileStat stat, fs.Stat("/d/e/x"));
  EXPECT_EQ(stat.size, 3u);
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string bytes, fs.ReadFileToString("/d/e/x"));
  EXPECT_EQ(bytes, "abc");
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<RandomAccessFile> file,
                              fs.NewRandomAccessFile("/d/e/x"));
  char two[2];
  EXPECT_EQ(file->ReadAt(2, 2, two).code(), StatusCode::kDataLoss);
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<std::string> names, fs.ListDir("/d"));
  EXPECT_THAT(names, ::testing::ElementsAre("e"));
  EXPECT_EQ(fs.DeleteDir("/d/e").code(), StatusCode::kFailedPrecondition);
  CKFLOW_ASSERT_OK(fs.DeleteFile("/d/e/x"));
  CKFLOW_ASSERT_OK(fs.DeleteDir("/d/e"));
  CKFLOW_ASSERT_OK(fs.Put("/d/y", "z"));
  fs.RemoveAll("/d");
  EXPECT_EQ(fs.FileExists("/d").code(), StatusCode::kNotFound);
  EXPECT_EQ(fs.FileExists("/d/y").code(), StatusCode::kNotFound);
}

TEST_F(FuzzReplayTest, StateFiles) {
  ASSERT_GE(state_seeds_->size(), 2u);
  for (const Seed& seed : *state_seeds_) {
    EXPECT_EQ(CheckStateInput(seed.bytes, dir_), "") << seed.name;
    for (size_t size = 0; size < seed.bytes.size(); ++size) {
      std::vector<uint8_t> cut(seed.bytes.begin(),
                               seed.bytes.begin() + static_cast<ptrdiff_t>(size));
      EXPECT_EQ(CheckStateInput(cut, dir_), "") << seed.name << " cut to " << size;
      std::vector<uint8_t> flipped = seed.bytes;
      flipped[size] ^= 0x20;
      EXPECT_EQ(CheckStateInput(flipped, dir_), "") << seed.name << " flipped at " << size;
    }
  }
}

// The writer and the merge against what they were given, on inputs from a
// fixed-seed generator: random recipes, and the cases they rarely hit.
TEST_F(FuzzReplayTest, RoundTrips) {
  std::mt19937 random(20261201);
  for (int i = 0; i < 300; ++i) {
    std::vector<uint8_t> input(random() % 1500);
    for (uint8_t& byte : input) byte = static_cast<uint8_t>(random());
    EXPECT_EQ(CheckRoundTripInput(input, dir_), "") << "random input " << i;
  }
  // shard, key length, key, dtype (float), rank 0, 4 data bytes: "a" into
  // shard 0, then "a" into shard 1 (the merge must refuse), then "a" twice
  // into one shard (the second Add must refuse).
  const std::vector<uint8_t> a_in_both = {0, 1, 'a', 0, 0, 1, 2, 3, 4, 1, 1, 'a', 0, 0, 5, 6, 7, 8};
  EXPECT_EQ(CheckRoundTripInput(a_in_both, dir_), "");
  const std::vector<uint8_t> a_twice = {0, 1, 'a', 0, 0, 1, 2, 3, 4, 0, 1, 'a', 0, 0, 5, 6, 7, 8};
  EXPECT_EQ(CheckRoundTripInput(a_twice, dir_), "");
  // An empty key, and an empty recipe (two empty shards merged).
  EXPECT_EQ(CheckRoundTripInput(std::vector<uint8_t>{0, 0, 0, 0}, dir_), "");
  EXPECT_EQ(CheckRoundTripInput({}, dir_), "");
}

}  // namespace
}  // namespace ckflow::fuzz
