// An index whose blocks are Snappy-compressed, as LevelDB's TableBuilder
// writes one with compression on (older TensorFlow writers and other tools
// did; TensorFlow 2.21 never compresses, tests/testdata/README.md): the
// reader decodes it to the same entries and values.

#include <gtest/gtest.h>
#include <leveldb/env.h>
#include <leveldb/options.h>
#include <leveldb/table_builder.h>

#include <string>
#include <vector>

#include "bundle/bundle_format.h"
#include "bundle/bundle_index_internal.h"
#include "bundle/bundle_reader.h"
#include "tests/bundle/bundle_test_util.h"
#include "tests/bundle/testdata_util.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

// A leveldb::WritableFile that appends to a string.
class StringSink final : public leveldb::WritableFile {
 public:
  leveldb::Status Append(const leveldb::Slice& data) override {
    bytes.append(data.data(), data.size());
    return leveldb::Status::OK();
  }
  leveldb::Status Close() override { return leveldb::Status::OK(); }
  leveldb::Status Flush() override { return leveldb::Status::OK(); }
  leveldb::Status Sync() override { return leveldb::Status::OK(); }
  std::string bytes;
};

// The table `entries` make with TensorFlow's block size and restart
// interval and Snappy compression.
std::string SnappyTable(const std::vector<internal::KeyValue>& entries) {
  leveldb::Options options;
  options.block_size = internal::kTableBlockSize;
  options.block_restart_interval = internal::kTableRestartInterval;
  options.compression = leveldb::kSnappyCompression;
  StringSink sink;
  leveldb::TableBuilder builder(options, &sink);
  for (const auto& [key, value] : entries) builder.Add(key, value);
  EXPECT_TRUE(builder.Finish().ok());
  return sink.bytes;
}

TEST(SnappyIndex, ReadsAsTheUncompressedIndexDoes) {
  const std::string dir = testing::NewTempDir("snappy");
  testing::NamedTensors tensors;
  for (int i = 0; i < 40; ++i) {  // similar keys and entries: blocks that compress
    tensors.emplace_back("model/layer_" + std::to_string(i) + "/kernel/.ATTRIBUTES/VARIABLE_VALUE",
                         Tensor::FromVector<float>({1.0f * i, 2, 3}));
  }
  tensors.emplace_back("words",
                       Tensor::FromVector<std::string>({"", "snappy", std::string("a\0b", 3)}));
  CKFLOW_ASSERT_OK(testing::WriteBundle(dir + "/plain", tensors));
  CKFLOW_ASSERT_OK(testing::WriteBundle(dir + "/snappy", tensors));
  CKFLOW_ASSERT_OK_AND_ASSIGN(
      auto entries, internal::ReadTable("plain", testing::ReadFileOrDie(dir + "/plain.index")));
  testing::WriteFileOrDie(IndexFilename(dir + "/snappy"), SnappyTable(entries));

  CKFLOW_ASSERT_OK_AND_ASSIGN(testing::TableLayout layout,
                              testing::ReadTableLayout(IndexFilename(dir + "/snappy")));
  EXPECT_EQ(layout.compression, std::vector<int>{1}) << "the data block is Snappy-compressed";
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> plain,
                              BundleReader::Open(dir + "/plain"));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> snappy,
                              BundleReader::Open(dir + "/snappy"));
  ASSERT_EQ(snappy->entries().size(), tensors.size());
  for (const auto& [key, tensor] : tensors) {
    CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor value, snappy->Lookup(key));
    EXPECT_TRUE(testing::SameTensor(value, tensor)) << key;
  }
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string listing, testing::CheckBundle(dir + "/snappy"));
  EXPECT_NE(listing.find("Snappy blocks"), std::string::npos) << listing;
}

}  // namespace
}  // namespace ckflow
