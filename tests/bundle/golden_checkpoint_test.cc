// Reading the golden checkpoints TensorFlow 2.21 wrote (tests/testdata/),
// checked against TensorFlow's own account of each (its manifest.json: every
// key's dtype, shape and value bytes, the object graph, the state file), and
// writing them back byte for byte.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "bundle/bundle_format.h"
#include "bundle/bundle_writer.h"
#include "bundle/merge.h"
#include "bundle/object_tree.h"
#include "bundle/v1_checkpoint_reader.h"
#include "tests/bundle/bundle_test_util.h"
#include "tests/bundle/testdata_util.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

using testing::GoldenCheckpoint;
using testing::GoldenFolder;
using testing::GoldenTensor;

std::vector<int64_t> Dims(const TensorShape& shape) { return shape.dim_sizes(); }

// The checkpoint's tensor `key` against TensorFlow's account of it.
void ExpectAsTensorFlowReadIt(const GoldenTensor& want, const Tensor& got) {
  SCOPED_TRACE(want.key);
  EXPECT_EQ(DataTypeName(got.dtype()), want.dtype);
  EXPECT_EQ(Dims(got.shape()), want.shape);
  const std::string bytes = testing::ValueBytes(got);
  EXPECT_EQ(static_cast<int64_t>(bytes.size()), want.bytes);
  EXPECT_EQ(testing::Crc32(bytes), want.crc32) << "the value's bytes differ from TensorFlow's";
}

class GoldenTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    StatusOr<GoldenFolder> folder = testing::ReadGoldenFolder(GetParam());
    ASSERT_TRUE(folder.ok()) << folder.status();
    folder_ = *std::move(folder);
  }
  GoldenFolder folder_;
};

TEST_P(GoldenTest, EveryKeyReadsAsTensorFlowReadIt) {
  for (const GoldenCheckpoint& c : folder_.checkpoints) {
    SCOPED_TRACE(c.prefix);
    std::vector<std::string> want_keys, keys;
    for (const GoldenTensor& t : c.tensors) want_keys.push_back(t.key);
    if (c.v1) {
      CKFLOW_ASSERT_OK_AND_ASSIGN(auto reader, V1CheckpointReader::Open(c.prefix));
      for (const auto& t : reader->tensors()) keys.push_back(t.name);
      ASSERT_EQ(keys, want_keys);
      for (const GoldenTensor& t : c.tensors) {
        CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor value, reader->Lookup(t.key));
        ExpectAsTensorFlowReadIt(t, value);
      }
      continue;
    }
    CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(c.prefix));
    for (const BundleEntry& e : reader->entries()) {
      if (e.key.empty() || e.key[0] != '\0') keys.push_back(e.key);  // not a slice's own entry
    }
    ASSERT_EQ(keys, want_keys);
    for (const GoldenTensor& t : c.tensors) {
      CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor value, reader->Lookup(t.key));
      ExpectAsTensorFlowReadIt(t, value);
    }
  }
}

TEST_P(GoldenTest, EveryChecksumVerifies) {
  for (const GoldenCheckpoint& c : folder_.checkpoints) {
    if (c.v1) continue;  // no per-entry checksums: V1CheckpointReader checks its blocks
    CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(c.prefix));
    for (const BundleEntry& e : reader->entries()) {
      if (!e.is_sliced()) CKFLOW_EXPECT_OK(reader->Verify(e));
    }
  }
}

TEST_P(GoldenTest, ReadIntoFillsACallersTensor) {
  for (const GoldenCheckpoint& c : folder_.checkpoints) {
    if (c.v1) continue;
    CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(c.prefix));
    for (const GoldenTensor& t : c.tensors) {
      const BundleEntry* e = reader->FindEntry(t.key);
      ASSERT_NE(e, nullptr) << t.key;
      Tensor dest(static_cast<DataType>(e->dtype), e->shape);
      CKFLOW_ASSERT_OK(reader->ReadInto(*e, &dest));
      ExpectAsTensorFlowReadIt(t, dest);
    }
  }
}

TEST_P(GoldenTest, ObjectGraphIsTheOneTensorFlowParsed) {
  for (const GoldenCheckpoint& c : folder_.checkpoints) {
    if (c.v1) continue;
    CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(c.prefix));
    StatusOr<CheckpointObjectGraph> graph = ReadCheckpointObjectGraph(*reader);
    if (c.object_graph.empty()) {
      EXPECT_THAT(graph, testing::StatusIs(StatusCode::kNotFound, ""));
      continue;
    }
    ASSERT_TRUE(graph.ok()) << graph.status();
    EXPECT_EQ(testing::CanonicalGraph(*graph), c.object_graph);
  }
}

TEST_P(GoldenTest, StateFileIsTheOneTensorFlowRead) {
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::optional<CheckpointStateData> state,
                              ReadCheckpointState(folder_.dir));
  ASSERT_EQ(state.has_value(), folder_.state.has_value());
  if (!state) return;
  EXPECT_EQ(state->model_checkpoint_path, folder_.state->model_checkpoint_path);
  EXPECT_EQ(state->all_model_checkpoint_paths, folder_.state->all_model_checkpoint_paths);
  EXPECT_EQ(state->all_model_checkpoint_timestamps, folder_.state->all_model_checkpoint_timestamps);
  EXPECT_EQ(state->last_preserved_timestamp, folder_.state->last_preserved_timestamp);
}

// Writes the checkpoint's tensors back, each shard's in its data order, and
// compares every file with TensorFlow's byte for byte. A checkpoint of
// several data files is rebuilt as TensorFlow saves one: a bundle per file,
// then MergeBundles; a partitioned tensor's slices go in through AddSlice.
TEST_P(GoldenTest, RewriteIsByteIdentical) {
  for (const GoldenCheckpoint& c : folder_.checkpoints) {
    if (c.v1) continue;  // ckflow writes no V1 files
    SCOPED_TRACE(c.prefix);
    CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(c.prefix));
    const int shards = reader->num_shards();
    std::vector<const BundleEntry*> order;
    for (const BundleEntry& e : reader->entries()) {
      if (!e.is_sliced()) order.push_back(&e);
    }
    std::sort(order.begin(), order.end(), [](const BundleEntry* a, const BundleEntry* b) {
      return std::tie(a->shard_id, a->offset) < std::tie(b->shard_id, b->offset);
    });
    const std::string prefix = testing::NewTempDir("rewrite") + "/ckpt";
    std::vector<std::string> parts;
    for (int shard = 0; shard < shards; ++shard) {
      const std::string part =
          shards == 1 ? prefix : DataFilename(prefix + "_temp/part", shard, shards);
      CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleWriter> writer, BundleWriter::Create(part));
      for (const BundleEntry* e : order) {
        if (e->shard_id != shard) continue;
        CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor t, reader->Lookup(e->key));
        if (e->key[0] != '\0') {
          CKFLOW_ASSERT_OK(writer->Add(e->key, t));
          continue;
        }
        CKFLOW_ASSERT_OK_AND_ASSIGN(auto name_and_slice, DecodeTensorNameSlice(e->key));
        const BundleEntry* full = reader->FindEntry(name_and_slice.first);
        ASSERT_NE(full, nullptr);
        CKFLOW_ASSERT_OK(writer->AddSlice(full->key, full->shape, name_and_slice.second, t));
      }
      CKFLOW_ASSERT_OK(writer->Finish());
      parts.push_back(part);
    }
    if (shards > 1) CKFLOW_ASSERT_OK(MergeBundles(parts, prefix));
    for (int shard = 0; shard < shards; ++shard) {
      EXPECT_TRUE(testing::ReadFileOrDie(DataFilename(prefix, shard, shards)) ==
                  testing::ReadFileOrDie(DataFilename(c.prefix, shard, shards)))
          << "data file " << shard << " differs";
    }
    EXPECT_TRUE(testing::ReadFileOrDie(IndexFilename(prefix)) ==
                testing::ReadFileOrDie(IndexFilename(c.prefix)))
        << "index differs";
  }
}

// CheckBundle, the check the tests run on what ckflow writes, passes on
// what TensorFlow wrote (except where the object graph names keys the
// bundle lacks, which it reports).
TEST_P(GoldenTest, CheckBundlePasses) {
  for (const GoldenCheckpoint& c : folder_.checkpoints) {
    if (c.v1) continue;
    CKFLOW_ASSERT_OK_AND_ASSIGN(std::string listing, testing::CheckBundle(c.prefix));
    EXPECT_NE(listing.find(c.object_graph.empty() ? "no object graph" : "object graph: "),
              std::string::npos)
        << listing;
  }
}

INSTANTIATE_TEST_SUITE_P(TestData, GoldenTest, ::testing::ValuesIn(testing::GoldenFolderNames()),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

TEST(Golden, EveryFolderIsThere) {
  // tests/testdata/README.md lists fifteen; a missing one is a broken checkout.
  EXPECT_EQ(testing::GoldenFolderNames().size(), 15u);
}

TEST(Golden, StringTensorsHoldEmptyLongAndNulStrings) {
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader,
                              BundleReader::Open(testing::GoldenPrefix("string_tensors")));
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor strs, reader->Lookup("strs"));
  ASSERT_EQ(strs.shape(), TensorShape({4}));
  EXPECT_EQ(strs.flat<std::string>()[0], "hello");
  EXPECT_EQ(strs.flat<std::string>()[1], "");
  EXPECT_EQ(strs.flat<std::string>()[2], "x01");
  EXPECT_EQ(strs.flat<std::string>()[3], std::string(1024, 'c'));
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor empty, reader->Lookup("string_tensor"));
  EXPECT_EQ(empty.flat<std::string>()[0], "");
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor nuls, reader->Lookup("nul_bytes"));
  EXPECT_EQ(nuls.flat<std::string>()[1], std::string("a\0", 2));
  EXPECT_EQ(nuls.flat<std::string>()[2], std::string("\0\0z", 3));
  // The data file is in the order written (strs first, floats last), not
  // in key order.
  EXPECT_EQ(reader->FindEntry("strs")->offset, 0);
  EXPECT_GT(reader->FindEntry("floats")->offset, reader->FindEntry("string_tensor")->offset);
}

TEST(Golden, ObjectGraphNamesKeysTheBundleLacks) {
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader,
                              BundleReader::Open(testing::GoldenPrefix("uninitialized_variable")));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string listing, testing::CheckBundle(reader->prefix()));
  EXPECT_NE(listing.find("missing uninitialized_variable/.ATTRIBUTES/VARIABLE_VALUE "
                         "sub_module/uninitialized_variable/.ATTRIBUTES/VARIABLE_VALUE"),
            std::string::npos)
      << listing;
}

TEST(Golden, ShardedSavesPutTheObjectGraphAndTheVariableInDifferentFiles) {
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader,
                              BundleReader::Open(testing::GoldenPrefix("two_shards")));
  EXPECT_EQ(reader->num_shards(), 2);
  EXPECT_EQ(reader->FindEntry(kObjectGraphKey)->shard_id, 0);
  EXPECT_EQ(reader->FindEntry("v/.ATTRIBUTES/VARIABLE_VALUE")->shard_id, 1);
}

TEST(Golden, MaxShardSizeCutsValuesIntoSlicesAcrossFiles) {
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader,
                              BundleReader::Open(testing::GoldenPrefix("sliced_values")));
  EXPECT_EQ(reader->num_shards(), 6);
  const BundleEntry* v0 = reader->FindEntry("model/v0/.ATTRIBUTES/VARIABLE_VALUE");
  ASSERT_NE(v0, nullptr);
  EXPECT_GT(v0->slices.size(), 1u);
}

}  // namespace
}  // namespace ckflow
