#include "bundle/merge.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "bundle/bundle_format.h"
#include "bundle/bundle_index_internal.h"
#include "bundle/bundle_reader.h"
#include "bundle/bundle_writer.h"
#include "tests/bundle/bundle_test_util.h"
#include "tests/bundle/testdata_util.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

// TensorFlow's part names: P_temp/part-0000i-of-0000N.
std::string PartPrefix(const std::string& prefix, int i, int n) {
  return DataFilename(prefix + "_temp/part", i, n);
}

uint64_t Inode(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

// Writes n parts; part i holds "part<i>/x" = i and "part<i>/v" = [i, i+1].
std::vector<std::string> WriteParts(const std::string& prefix, int n) {
  std::vector<std::string> parts;
  for (int i = 0; i < n; ++i) {
    parts.push_back(PartPrefix(prefix, i, n));
    const auto f = static_cast<float>(i);
    Status s = testing::WriteBundle(
        parts.back(), {{"part" + std::to_string(i) + "/x", Tensor::Scalar(f)},
                       {"part" + std::to_string(i) + "/v", Tensor::FromVector<float>({f, f + 1})}});
    EXPECT_TRUE(s.ok()) << s;
  }
  return parts;
}

class MergeShardsTest : public ::testing::TestWithParam<int> {};

TEST_P(MergeShardsTest, MergesRenamesAndCleansUp) {
  const int n = GetParam();
  const std::string dir = testing::NewTempDir("merge");
  const std::string prefix = dir + "/ckpt-1";
  const std::vector<std::string> parts = WriteParts(prefix, n);
  std::vector<uint64_t> inodes;
  for (const std::string& part : parts) inodes.push_back(Inode(DataFilename(part, 0, 1)));

  CKFLOW_ASSERT_OK(MergeBundles(parts, prefix));

  std::vector<std::string> expected_files = {"ckpt-1.index"};
  for (int i = 0; i < n; ++i) {
    expected_files.push_back(std::string(Basename(DataFilename(prefix, i, n))));
    // Renamed, not copied.
    EXPECT_EQ(Inode(DataFilename(prefix, i, n)), inodes[i]) << "shard " << i;
  }
  std::sort(expected_files.begin(), expected_files.end());
  EXPECT_EQ(testing::ListDir(dir), expected_files);  // P_temp/ is gone

  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix));
  EXPECT_EQ(reader->num_shards(), n);
  ASSERT_EQ(reader->entries().size(), static_cast<size_t>(2 * n));
  for (int i = 0; i < n; ++i) {
    const std::string key = "part" + std::to_string(i) + "/v";
    EXPECT_EQ(reader->FindEntry(key)->shard_id, i);
    CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor v, reader->Lookup(key));
    EXPECT_EQ(v.flat<float>()[1], static_cast<float>(i + 1));
  }
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string listing, testing::CheckBundle(prefix));
  EXPECT_NE(listing.find("num_shards " + std::to_string(n) + "\n"), std::string::npos) << listing;
}

INSTANTIATE_TEST_SUITE_P(Shards, MergeShardsTest, ::testing::Values(1, 2, 5));

TEST(MergeBundles, OneShardMergeEqualsADirectWrite) {
  // Spec 1.4: for one shard the merge is a rename plus the same index.
  const std::string dir = testing::NewTempDir("merge1");
  const testing::NamedTensors tensors = {{"b", Tensor::Scalar(2.0f)}, {"a", Tensor::Scalar(1.0f)}};
  CKFLOW_ASSERT_OK(testing::WriteBundle(dir + "/direct", tensors));
  CKFLOW_ASSERT_OK(testing::WriteBundle(PartPrefix(dir + "/merged", 0, 1), tensors));
  const std::string part = PartPrefix(dir + "/merged", 0, 1);
  CKFLOW_ASSERT_OK(MergeBundles(std::vector<std::string>{part}, dir + "/merged"));
  EXPECT_TRUE(testing::ReadFileOrDie(dir + "/direct.index") ==
              testing::ReadFileOrDie(dir + "/merged.index"));
}

TEST(MergeBundles, OnePartIsRenamedNotRewritten) {
  // Its index is the one a merge would write, so neither the index nor the
  // data is copied: both keep their inodes.
  const std::string dir = testing::NewTempDir("merge1");
  const std::string prefix = dir + "/ckpt-1";
  const std::vector<std::string> parts = WriteParts(prefix, 1);
  const std::string index = testing::ReadFileOrDie(IndexFilename(parts[0]));
  const uint64_t index_inode = Inode(IndexFilename(parts[0]));
  const uint64_t data_inode = Inode(DataFilename(parts[0], 0, 1));
  for (const bool sync : {false, true}) {
    if (sync) {
      // Again, durable, over the checkpoint the first merge made.
      ASSERT_EQ(WriteParts(prefix, 1), parts);
    }
    const uint64_t new_index_inode = Inode(IndexFilename(parts[0]));
    CKFLOW_ASSERT_OK(MergeBundles(parts, prefix, {.sync = sync}));
    EXPECT_EQ(Inode(IndexFilename(prefix)), sync ? new_index_inode : index_inode);
    EXPECT_EQ(testing::ReadFileOrDie(IndexFilename(prefix)), index);
    EXPECT_EQ(testing::ListDir(dir),
              (std::vector<std::string>{"ckpt-1.data-00000-of-00001", "ckpt-1.index"}));
  }
  EXPECT_NE(data_inode, 0u);
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix));
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor v, reader->Lookup("part0/v"));
  EXPECT_EQ(v.flat<float>()[1], 1.0f);
  CKFLOW_EXPECT_OK(testing::CheckBundle(prefix).status());
}

// A saver deals variables to parts by size, so the parts' keys interleave;
// a partitioned variable's slices can land in different parts; and an input
// can itself be a merged checkpoint of several data files. The merge sorts
// the runs into one index, gathers the slices under one full entry and
// numbers the data files in the order entries first name them.
TEST(MergeBundles, InterleavedKeysSlicesAndMultiFileInputsMergeIntoOneSortedIndex) {
  const std::string dir = testing::NewTempDir("interleave");
  const std::string prefix = dir + "/ckpt";
  const std::vector<std::string> parts = {PartPrefix(prefix, 0, 3), PartPrefix(prefix, 1, 3),
                                          PartPrefix(prefix, 2, 3)};
  const TensorShape full({4});
  auto add_half = [&](BundleWriter& writer, int64_t half) {
    TensorSlice slice;
    slice.extents.push_back({half * 2, 2});
    const auto f = static_cast<float>(half * 2);
    return writer.AddSlice("p", full, slice,
                           Tensor::FromVector<float>({f + 1, f + 2}, TensorShape({2})));
  };
  for (int i = 0; i < 2; ++i) {
    CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleWriter> writer,
                                BundleWriter::Create(parts[i]));
    for (int k = i; k < 6; k += 2) {  // part 0: a, c, e; part 1: b, d, f
      CKFLOW_ASSERT_OK(writer->Add(std::string(1, static_cast<char>('a' + k)),
                                   Tensor::Scalar(static_cast<float>(k))));
    }
    CKFLOW_ASSERT_OK(add_half(*writer, i));
    CKFLOW_ASSERT_OK(writer->Finish());
  }
  // The third input: a checkpoint already merged from two parts of its own.
  const std::string inner = dir + "/inner";
  const std::vector<std::string> inner_parts = {PartPrefix(inner, 0, 2), PartPrefix(inner, 1, 2)};
  CKFLOW_ASSERT_OK(testing::WriteBundle(inner_parts[0], {{"h", Tensor::Scalar(7.0f)}}));
  CKFLOW_ASSERT_OK(testing::WriteBundle(inner_parts[1], {{"bb", Tensor::Scalar(8.0f)}}));
  CKFLOW_ASSERT_OK(MergeBundles(inner_parts, inner));
  CKFLOW_ASSERT_OK(MergeBundles(std::vector<std::string>{parts[0], parts[1], inner}, prefix));

  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix));
  EXPECT_EQ(reader->num_shards(), 4);
  std::vector<std::string> keys;
  for (const BundleEntry& e : reader->entries()) {
    if (!e.key.empty() && e.key[0] != '\0') keys.push_back(e.key);  // not a slice's own key
  }
  EXPECT_EQ(keys, (std::vector<std::string>{"a", "b", "bb", "c", "d", "e", "f", "h", "p"}));
  for (int k = 0; k < 6; ++k) {
    const std::string key(1, static_cast<char>('a' + k));
    CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor t, reader->Lookup(key));
    EXPECT_EQ(t.flat<float>()[0], static_cast<float>(k)) << key;
    EXPECT_EQ(reader->FindEntry(key)->shard_id, k % 2) << key;  // first part's file is 0
  }
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor h, reader->Lookup("h"));
  EXPECT_EQ(h.flat<float>()[0], 7.0f);
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor bb, reader->Lookup("bb"));
  EXPECT_EQ(bb.flat<float>()[0], 8.0f);
  EXPECT_NE(reader->FindEntry("h")->shard_id, reader->FindEntry("bb")->shard_id);
  const BundleEntry* p = reader->FindEntry("p");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->slices.size(), 2u);
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor whole, reader->Lookup("p"));
  EXPECT_EQ(std::vector<float>(whole.flat<float>().begin(), whole.flat<float>().end()),
            (std::vector<float>{1, 2, 3, 4}));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string listing, testing::CheckBundle(prefix));
  EXPECT_NE(listing.find("p float32[4] in 2 slices: "), std::string::npos) << listing;
}

TEST(MergeBundles, DuplicateKeyIsInvalidArgumentAndLeavesInputsAlone) {
  const std::string dir = testing::NewTempDir("dup");
  const std::string prefix = dir + "/ckpt";
  const std::vector<std::string> parts = {PartPrefix(prefix, 0, 2), PartPrefix(prefix, 1, 2)};
  CKFLOW_ASSERT_OK(testing::WriteBundle(parts[0], {{"shared/key", Tensor::Scalar(1.0f)}}));
  CKFLOW_ASSERT_OK(testing::WriteBundle(parts[1], {{"shared/key", Tensor::Scalar(2.0f)}}));
  Status s = MergeBundles(parts, prefix);
  EXPECT_THAT(s, testing::StatusIs(StatusCode::kInvalidArgument, "duplicate key 'shared/key'"));
  EXPECT_THAT(s, testing::StatusIs(StatusCode::kInvalidArgument, IndexFilename(parts[0])));
  EXPECT_THAT(s, testing::StatusIs(StatusCode::kInvalidArgument, IndexFilename(parts[1])));
  EXPECT_EQ(testing::ListDir(dir), std::vector<std::string>{"ckpt_temp"});
  for (const std::string& part : parts) CKFLOW_EXPECT_OK(BundleReader::Open(part).status());
}

TEST(MergeBundles, MissingInputIsNotFound) {
  const std::string dir = testing::NewTempDir("missing");
  Status s = MergeBundles(std::vector<std::string>{dir + "/nope"}, dir + "/ckpt");
  EXPECT_THAT(s, testing::StatusIs(StatusCode::kNotFound, "nope.index"));
}

TEST(MergeBundles, DifferentByteOrderIsInvalidArgument) {
  const std::string dir = testing::NewTempDir("endian");
  CKFLOW_ASSERT_OK(testing::WriteBundle(dir + "/little", {{"a", Tensor::Scalar(1.0f)}}));
  tensorflow::BundleHeaderProto header = internal::MakeBundleHeader(1);
  header.set_endianness(tensorflow::BundleHeaderProto::BIG);
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string index, internal::BuildBundleIndex(header, {}));
  testing::WriteFileOrDie(dir + "/big.index", index);
  Status s = MergeBundles(std::vector<std::string>{dir + "/little", dir + "/big"}, dir + "/out");
  EXPECT_THAT(s, testing::StatusIs(StatusCode::kInvalidArgument, "big.index"));
}

TEST(MergeBundles, EmptyPartsLeaveNoStrayFiles) {
  const std::string dir = testing::NewTempDir("empty");
  const std::string prefix = dir + "/ckpt";
  const std::vector<std::string> parts = {PartPrefix(prefix, 0, 3), PartPrefix(prefix, 1, 3),
                                          PartPrefix(prefix, 2, 3)};
  CKFLOW_ASSERT_OK(testing::WriteBundle(parts[0], {}));
  CKFLOW_ASSERT_OK(testing::WriteBundle(parts[1], {{"x", Tensor::Scalar(5.0f)}}));
  CKFLOW_ASSERT_OK(testing::WriteBundle(parts[2], {}));
  CKFLOW_ASSERT_OK(MergeBundles(parts, prefix));
  // The one part with data is the one data file; a reader finds it.
  EXPECT_EQ(testing::ListDir(dir),
            (std::vector<std::string>{"ckpt.data-00000-of-00001", "ckpt.index"}));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix));
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor x, reader->Lookup("x"));
  EXPECT_EQ(x.scalar<float>(), 5.0f);
  CKFLOW_EXPECT_OK(testing::CheckBundle(prefix).status());
}

TEST(MergeBundles, MergeOfOnlyEmptyPartsIsAnEmptyCheckpoint) {
  const std::string dir = testing::NewTempDir("allempty");
  const std::vector<std::string> parts = {PartPrefix(dir + "/ckpt", 0, 2),
                                          PartPrefix(dir + "/ckpt", 1, 2)};
  for (const std::string& part : parts) CKFLOW_ASSERT_OK(testing::WriteBundle(part, {}));
  CKFLOW_ASSERT_OK(MergeBundles(parts, dir + "/ckpt"));
  EXPECT_EQ(testing::ListDir(dir),
            (std::vector<std::string>{"ckpt.data-00000-of-00001", "ckpt.index"}));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader,
                              BundleReader::Open(dir + "/ckpt"));
  EXPECT_TRUE(reader->entries().empty());
}

// Each operation of a merge fails in turn: the error is reported, the
// checkpoint saved before under the same prefix is intact, and the inputs
// are intact, so the merge can be retried.
TEST(MergeBundles, FailedMergeKeepsThePreviousCheckpointAndTheInputs) {
  const std::string dir = testing::NewTempDir("mergefault");
  const std::string prefix = dir + "/ckpt";
  CKFLOW_ASSERT_OK(testing::WriteBundle(prefix, {{"old", Tensor::Scalar(1.0f)}}));
  const std::vector<std::string> parts = WriteParts(prefix, 2);
  const std::vector<std::string> before = testing::ListDir(dir);
  const std::vector<std::string> temp_before = testing::ListDir(prefix + "_temp");
  int failures = 0;
  for (int fail_at = 1;; ++fail_at) {
    SCOPED_TRACE(fail_at);
    testing::FaultyFileSystem fs(fail_at);
    MergeOptions options;
    options.fs = &fs;
    Status s = MergeBundles(parts, prefix, options);
    if (!fs.failed()) {
      CKFLOW_ASSERT_OK(s);
      break;
    }
    ++failures;
    EXPECT_FALSE(s.ok());
    EXPECT_EQ(testing::ListDir(dir), before);
    EXPECT_EQ(testing::ListDir(prefix + "_temp"), temp_before);
    CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> old, BundleReader::Open(prefix));
    CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor v, old->Lookup("old"));
    EXPECT_EQ(v.scalar<float>(), 1.0f);
  }
  EXPECT_GE(failures, 5);
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> merged, BundleReader::Open(prefix));
  EXPECT_FALSE(merged->Contains("old"));
  EXPECT_TRUE(merged->Contains("part1/v"));
}

}  // namespace
}  // namespace ckflow
