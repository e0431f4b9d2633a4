// BundleReader on bad input: files missing, truncated, corrupted on purpose
// or crafted to lie. Each case checks the error code and that the message
// names the file and the key; under ASan/UBSan each also proves the reader
// neither crashes nor allocates what a corrupt field asks for.

#include "bundle/bundle_reader.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <limits>
#include <thread>

#include "base/cast.h"
#include "bundle/bundle_coding_internal.h"
#include "bundle/bundle_format.h"
#include "bundle/bundle_index_internal.h"
#include "bundle/bundle_writer.h"
#include "bundle/crc32c.h"
#include "tests/bundle/bundle_test_util.h"
#include "tests/observed_file_system.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

using Entries = std::vector<std::pair<std::string, tensorflow::BundleEntryProto>>;

tensorflow::BundleEntryProto Entry(int dtype, std::vector<int64_t> dims, int64_t offset,
                                   int64_t size, uint32_t masked_crc, int shard = 0) {
  tensorflow::BundleEntryProto e;
  e.set_dtype(static_cast<tensorflow::DataType>(dtype));
  for (int64_t d : dims) e.mutable_shape()->add_dim()->set_size(d);
  e.set_shard_id(shard);
  e.set_offset(offset);
  e.set_size(size);
  e.set_crc32c(masked_crc);
  return e;
}

// Writes an index with `header` and `entries`, and a data file of `data`.
void WriteCrafted(const std::string& prefix, const tensorflow::BundleHeaderProto& header,
                  const Entries& entries, const std::string& data) {
  StatusOr<std::string> index = internal::BuildBundleIndex(header, entries);
  ASSERT_TRUE(index.ok()) << index.status();
  testing::WriteFileOrDie(IndexFilename(prefix), *index);
  testing::WriteFileOrDie(DataFilename(prefix, 0, std::max(1, header.num_shards())), data);
}

void WriteCrafted(const std::string& prefix, const Entries& entries, const std::string& data) {
  WriteCrafted(prefix, internal::MakeBundleHeader(1), entries, data);
}

std::string Floats(std::initializer_list<float> values) {
  std::string out;
  for (float v : values) out.append(reinterpret_cast<const char*>(&v), 4);
  return out;
}

uint32_t MaskedCrc(const std::string& bytes) { return crc32c::Mask(crc32c::Value(bytes)); }

void ExpectError(const Status& s, StatusCode code, std::initializer_list<std::string> names) {
  EXPECT_EQ(s.code(), code) << s;
  for (const std::string& name : names) EXPECT_THAT(s, testing::StatusIs(code, name));
}

class BundleReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::NewTempDir("reader");
    prefix_ = dir_ + "/ckpt";
  }
  // A valid bundle: "a" = float32 [2] {1, 2}, "b" = int64 scalar 7.
  void WriteValid() {
    CKFLOW_ASSERT_OK(testing::WriteBundle(
        prefix_, {{"a", Tensor::FromVector<float>({1, 2})}, {"b", Tensor::Scalar(int64_t{7})}}));
  }
  std::string index_path() const { return IndexFilename(prefix_); }
  std::string data_path() const { return DataFilename(prefix_, 0, 1); }
  std::string ReadIndex() const { return testing::ReadFileOrDie(index_path()); }

  std::string dir_, prefix_;
};

TEST_F(BundleReaderTest, MissingIndexIsNotFound) {
  ExpectError(BundleReader::Open(prefix_).status(), StatusCode::kNotFound, {"ckpt.index"});
}

TEST_F(BundleReaderTest, MissingDataFileIsNotFoundNamingFileAndKey) {
  WriteValid();
  std::filesystem::remove(data_path());
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix_));
  ExpectError(reader->Lookup("a").status(), StatusCode::kNotFound,
              {"ckpt.data-00000-of-00001", "'a'"});
}

TEST_F(BundleReaderTest, IndexShorterThanTheFooterIsDataLoss) {
  WriteValid();
  testing::WriteFileOrDie(index_path(), ReadIndex().substr(0, 47));
  ExpectError(BundleReader::Open(prefix_).status(), StatusCode::kDataLoss,
              {"ckpt.index", "too short"});
  testing::WriteFileOrDie(index_path(), "");
  ExpectError(BundleReader::Open(prefix_).status(), StatusCode::kDataLoss, {"ckpt.index"});
}

TEST_F(BundleReaderTest, BadMagicIsDataLoss) {
  WriteValid();
  std::string index = ReadIndex();
  index[index.size() - 1] ^= 0x01;
  testing::WriteFileOrDie(index_path(), index);
  ExpectError(BundleReader::Open(prefix_).status(), StatusCode::kDataLoss,
              {"ckpt.index", "bad magic"});
}

TEST_F(BundleReaderTest, EveryFlippedIndexByteIsCaught) {
  WriteValid();
  const std::string index = ReadIndex();
  // Every byte of every block (and its trailer) is covered by a CRC; the
  // footer's handles and magic are checked. Padding bytes are not read.
  for (size_t i = 0; i < index.size(); ++i) {
    std::string bad = index;
    bad[i] ^= 0x20;
    testing::WriteFileOrDie(index_path(), bad);
    StatusOr<std::unique_ptr<BundleReader>> reader = BundleReader::Open(prefix_);
    if (reader.ok()) {
      // Only the footer's zero padding may change unnoticed.
      EXPECT_GE(i, index.size() - 48) << "byte " << i;
      EXPECT_LT(i, index.size() - 8) << "byte " << i;
      continue;
    }
    EXPECT_THAT(reader.status(), testing::StatusIs(StatusCode::kDataLoss, "ckpt.index"));
  }
}

TEST_F(BundleReaderTest, BlockChecksumMismatchNamesTheOffset) {
  WriteValid();
  std::string index = ReadIndex();
  index[3] ^= 0x01;  // inside data block 0
  testing::WriteFileOrDie(index_path(), index);
  ExpectError(BundleReader::Open(prefix_).status(), StatusCode::kDataLoss,
              {"ckpt.index", "block checksum mismatch at offset 0"});
}

TEST_F(BundleReaderTest, TensorChecksumMismatchNamesFileAndKey) {
  WriteValid();
  std::string data = testing::ReadFileOrDie(data_path());
  data[2] ^= 0x01;  // a byte of "a"
  testing::WriteFileOrDie(data_path(), data);
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix_));
  ExpectError(reader->Lookup("a").status(), StatusCode::kDataLoss,
              {"ckpt.data-00000-of-00001", "'a'", "checksum mismatch"});
  Tensor dest(DT_FLOAT, TensorShape({2}));
  ExpectError(reader->ReadInto("a", &dest), StatusCode::kDataLoss, {"'a'"});
  CKFLOW_EXPECT_OK(reader->Lookup("b").status());
}

TEST_F(BundleReaderTest, LargeTensorChecksumMismatchIsCaughtInAnyChunk) {
  Tensor big(DT_FLOAT, TensorShape({5 << 18}));  // 5 MiB: five parallel chunks
  std::memset(big.raw_data(), 0, big.TotalBytes());
  CKFLOW_ASSERT_OK(testing::WriteBundle(prefix_, {{"big", big}}));
  const std::string good = testing::ReadFileOrDie(data_path());
  for (size_t pos : {size_t{0}, (size_t{3} << 20) + 5, good.size() - 1}) {
    std::string bad = good;
    bad[pos] = 1;
    testing::WriteFileOrDie(data_path(), bad);
    CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix_));
    Tensor dest(DT_FLOAT, big.shape());
    ExpectError(reader->ReadInto("big", &dest), StatusCode::kDataLoss, {"'big'", "checksum"});
    ExpectError(reader->Verify(reader->entries()[0]), StatusCode::kDataLoss, {"'big'", "checksum"});
  }
}

TEST_F(BundleReaderTest, EntryPastTheEndOfItsDataFileIsDataLoss) {
  WriteValid();
  std::string data = testing::ReadFileOrDie(data_path());
  testing::WriteFileOrDie(data_path(), data.substr(0, data.size() - 1));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix_));
  ExpectError(reader->Lookup("b").status(), StatusCode::kDataLoss,
              {"ckpt.data-00000-of-00001", "'b'", "has 15 bytes"});
}

TEST_F(BundleReaderTest, HugeTensorPastTheEndIsRefusedBeforeAllocating) {
  // Consistent metadata for 4 TiB of floats, in a 12-byte data file.
  WriteCrafted(prefix_, {{"huge", Entry(DT_FLOAT, {1 << 20, 1 << 20}, 0, int64_t{4} << 40, 0)}},
               Floats({1, 2, 3}));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix_));
  ExpectError(reader->Lookup("huge").status(), StatusCode::kDataLoss, {"'huge'", "needs bytes"});
}

struct BadEntryCase {
  std::string name;
  tensorflow::BundleEntryProto entry;
  std::string message;
};

TEST_F(BundleReaderTest, InconsistentEntriesAreRejectedAtOpen) {
  const std::string data = Floats({1, 2, 3, 4, 5, 6});
  const BadEntryCase cases[] = {
      {"overflow", Entry(DT_FLOAT, {int64_t{1} << 40, int64_t{1} << 40}, 0, 24, 0), "overflows"},
      {"negative_dim", Entry(DT_FLOAT, {-2, 3}, 0, 24, 0), "negative dimension"},
      {"size_mismatch", Entry(DT_FLOAT, {2, 3}, 0, 20, 0), "size 20 disagrees with float32[2,3]"},
      {"size_times_element_overflows", Entry(DT_INT64, {int64_t{1} << 61}, 0, 8, 0), "disagrees"},
      {"shard_out_of_range", Entry(DT_FLOAT, {2, 3}, 0, 24, 0, /*shard=*/3),
       "shard_id 3 out of range"},
      {"negative_shard", Entry(DT_FLOAT, {2, 3}, 0, 24, 0, /*shard=*/-1), "shard_id -1"},
      {"negative_offset", Entry(DT_FLOAT, {2, 3}, -4, 24, 0), "negative offset"},
      {"strings_cannot_fit", Entry(DT_STRING, {1000000000000}, 0, 10, 0), "too small"},
  };
  for (const BadEntryCase& c : cases) {
    SCOPED_TRACE(c.name);
    WriteCrafted(prefix_, {{c.name, c.entry}}, data);
    ExpectError(BundleReader::Open(prefix_).status(), StatusCode::kDataLoss,
                {"ckpt.index", "'" + c.name + "'", c.message});
  }
}

TEST_F(BundleReaderTest, UnknownRankShapeIsDataLoss) {
  tensorflow::BundleEntryProto e = Entry(DT_FLOAT, {}, 0, 4, 0);
  e.mutable_shape()->set_unknown_rank(true);
  WriteCrafted(prefix_, {{"x", e}}, Floats({1}));
  ExpectError(BundleReader::Open(prefix_).status(), StatusCode::kDataLoss, {"'x'", "unknown rank"});
}

TEST_F(BundleReaderTest, UnknownDtypeIsInvalidArgumentOnRead) {
  const std::string data = Floats({1});
  WriteCrafted(prefix_, {{"x", Entry(99, {}, 0, 4, MaskedCrc(data))}}, data);
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix_));
  EXPECT_EQ(reader->FindEntry("x")->dtype, 99);
  ExpectError(reader->Lookup("x").status(), StatusCode::kInvalidArgument,
              {"ckpt.index", "'x'", "unknown dtype dtype99"});
  ExpectError(reader->Verify(*reader->FindEntry("x")), StatusCode::kInvalidArgument, {"'x'"});
}

TEST_F(BundleReaderTest, UnparsableEntryIsDataLoss) {
  std::vector<internal::KeyValue> table = {{"", internal::MakeBundleHeader(1).SerializeAsString()},
                                           {"x", "\xff\xff\xff"}};
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string index, internal::BuildTable(table));
  testing::WriteFileOrDie(index_path(), index);
  ExpectError(BundleReader::Open(prefix_).status(), StatusCode::kDataLoss,
              {"ckpt.index", "'x'", "not a BundleEntryProto"});
}

// LevelDB reads a block entry's lengths as 32-bit numbers and checks their
// sum in 32 bits, so an entry whose key and value lengths add up past 2^32
// would send it reading gigabytes past the block. An index with such an
// entry and every checksum right (what a writer with a bug, or an attacker,
// makes) is DataLoss naming the file before LevelDB parses it.
TEST_F(BundleReaderTest, BlockEntryLengthsThatWrapIn32BitsAreDataLoss) {
  const std::string key = "abcdefgh";
  std::vector<internal::KeyValue> table = {{"", internal::MakeBundleHeader(1).SerializeAsString()},
                                           {key, Entry(DT_FLOAT, {}, 0, 4, 0).SerializeAsString()}};
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string index, internal::BuildTable(table));
  // The one data block comes first, up to its 5-byte trailer, which the
  // metaindex block (the footer's first handle) follows.
  const char* footer = index.data() + index.size() - 48;
  uint64_t metaindex_offset = 0;
  ASSERT_TRUE(internal::GetVarint64(&footer, index.data() + index.size(), &metaindex_offset));
  const size_t block_size = metaindex_offset - 5;
  // The key's entry: shared 0, unshared 8, value size, one byte each, then
  // the key. From the unshared length on: 0xfffffff0 (5 bytes) and 0x20,
  // whose 32-bit sum is 0x10, less than what is left of the block.
  const size_t at = index.find(key);
  ASSERT_LT(at + key.size(), block_size);
  ASSERT_EQ(index[at - 2], static_cast<char>(key.size()));
  index.replace(at - 2, 6, "\xf0\xff\xff\xff\x0f\x20", 6);
  const uint32_t crc = crc32c::Extend(crc32c::Value(index.data(), block_size), "\0", 1);
  ASSERT_EQ(index[block_size], '\0');  // not compressed
  const uint32_t masked = crc32c::Mask(crc);
  for (int i = 0; i < 4; ++i) index[block_size + 1 + i] = static_cast<char>(masked >> (8 * i));
  testing::WriteFileOrDie(index_path(), index);
  ExpectError(BundleReader::Open(prefix_).status(), StatusCode::kDataLoss,
              {"ckpt.index", "data block", "entry runs past the block"});
}

TEST_F(BundleReaderTest, MissingHeaderIsDataLoss) {
  std::vector<internal::KeyValue> table = {{"x", Entry(DT_FLOAT, {}, 0, 4, 0).SerializeAsString()}};
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string index, internal::BuildTable(table));
  testing::WriteFileOrDie(index_path(), index);
  ExpectError(BundleReader::Open(prefix_).status(), StatusCode::kDataLoss,
              {"ckpt.index", "no header"});
}

TEST_F(BundleReaderTest, UnreadableVersionsAreInvalidArgument) {
  struct Case {
    std::string name;
    int producer, min_consumer;
    std::vector<int> bad_consumers;
    std::string message;
  };
  const Case cases[] = {
      {"negative producer", -1, 0, {}, "producer version -1"},
      {"newer consumer", 1, 2, {}, "version 2 or newer"},
      {"bad consumer", 1, 0, {0, 1}, "disallows reader version 1"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    tensorflow::BundleHeaderProto header = internal::MakeBundleHeader(1);
    header.mutable_version()->set_producer(c.producer);
    header.mutable_version()->set_min_consumer(c.min_consumer);
    for (int b : c.bad_consumers) header.mutable_version()->add_bad_consumers(b);
    WriteCrafted(prefix_, header, {}, "");
    ExpectError(BundleReader::Open(prefix_).status(), StatusCode::kInvalidArgument,
                {"ckpt.index", c.message});
  }
}

TEST_F(BundleReaderTest, NonBoolByteIsDataLoss) {
  const std::string data("\x01\x02", 2);
  WriteCrafted(prefix_, {{"flags", Entry(DT_BOOL, {2}, 0, 2, MaskedCrc(data))}}, data);
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix_));
  ExpectError(reader->Lookup("flags").status(), StatusCode::kDataLoss,
              {"'flags'", "byte 2 at element 1 is not a bool"});
  ExpectError(reader->Verify(*reader->FindEntry("flags")), StatusCode::kDataLoss,
              {"'flags'", "byte 2 at element 1 is not a bool"});
}

TEST_F(BundleReaderTest, CorruptStringEncodingsAreDataLoss) {
  struct Case {
    std::string name;
    std::string data;
    std::string message;
  };
  std::string lengths_too_long("\x64\x00\x00\x00\x00", 5);  // length 100 in 5 bytes
  std::string truncated_varint(12, '\xff');                 // a varint that never ends
  std::string bad_length_checksum(
      "\x01\x00\x00\x00\x00"
      "a",
      6);
  const Case cases[] = {
      {"too_long", lengths_too_long, "lengths add up to more"},
      {"varint", truncated_varint, "truncated or malformed"},
      {"length_crc", bad_length_checksum, "length checksum mismatch"},
  };
  // A scalar and a one-string vector: the scalar is decoded in place.
  for (const std::vector<int64_t>& dims : {std::vector<int64_t>{}, std::vector<int64_t>{1}}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(c.name + " in shape [" + std::to_string(dims.size()) + "]");
      WriteCrafted(prefix_,
                   {{c.name, Entry(DT_STRING, dims, 0, static_cast<int64_t>(c.data.size()),
                                   MaskedCrc(c.data))}},
                   c.data);
      CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader,
                                  BundleReader::Open(prefix_));
      ExpectError(reader->Lookup(c.name).status(), StatusCode::kDataLoss,
                  {"ckpt.data-00000-of-00001", "'" + c.name + "'", c.message});
    }
  }
}

// A string scalar is read into the buffer it becomes (its prefix cut off in
// place): its bytes, of a two-byte length, come back whole, and a flipped
// byte of them is the entry's checksum mismatch.
TEST_F(BundleReaderTest, StringScalarsReadWholeAndChecked) {
  std::string long_value(300, '\0');
  for (size_t i = 0; i < long_value.size(); ++i) long_value[i] = static_cast<char>(i * 7);
  CKFLOW_ASSERT_OK(testing::WriteBundle(
      prefix_, {{"empty", Tensor::Scalar(std::string())},
                {"long", Tensor::Scalar(long_value)},
                {"pair", Tensor::FromVector<std::string>({"ab", long_value})}}));
  {
    CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix_));
    for (const auto& [key, want] :
         {std::pair<std::string, std::string>{"empty", ""}, {"long", long_value}}) {
      CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor t, reader->Lookup(key));
      ASSERT_EQ(t.shape().rank(), 0) << key;
      EXPECT_EQ(t.flat<std::string>()[0], want) << key;
    }
    CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor pair, reader->Lookup("pair"));
    EXPECT_EQ(pair.flat<std::string>()[0], "ab");
    EXPECT_EQ(pair.flat<std::string>()[1], long_value);
  }
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix_));
  const BundleEntry& e = *reader->FindEntry("long");
  const std::string data_path = DataFilename(prefix_, 0, 1);
  std::string data = testing::ReadFileOrDie(data_path);
  data[static_cast<size_t>(e.offset + e.size - 1)] ^= 0x20;
  testing::WriteFileOrDie(data_path, data);
  CKFLOW_ASSERT_OK_AND_ASSIGN(reader, BundleReader::Open(prefix_));
  ExpectError(reader->Lookup("long").status(), StatusCode::kDataLoss, {"'long'", "checksum"});
}

TEST_F(BundleReaderTest, DestinationMismatchIsInvalidArgument) {
  WriteValid();
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix_));
  Tensor wrong_dtype(DT_INT32, TensorShape({2}));
  ExpectError(reader->ReadInto("a", &wrong_dtype), StatusCode::kInvalidArgument,
              {"'a'", "float32[2]", "int32[2]"});
  Tensor wrong_shape(DT_FLOAT, TensorShape({3}));
  ExpectError(reader->ReadInto("a", &wrong_shape), StatusCode::kInvalidArgument,
              {"'a'", "float32[3]"});
  ExpectError(reader->ReadInto("a", nullptr), StatusCode::kInvalidArgument, {"'a'"});
}

// ------------------------------------------------------------ ReadCastInto

// A float64 tensor of several chunks and a ragged last one, read into
// float32 and bfloat16: every element is what CastElements makes of it.
TEST_F(BundleReaderTest, ReadCastIntoConvertsEveryChunkOfALargeTensor) {
  const int64_t n = (int64_t{3} << 17) + 5;  // 3 MiB + 40 bytes of float64
  Tensor wide(DT_DOUBLE, TensorShape({n}));
  for (int64_t i = 0; i < n; ++i) wide.flat<double>()[i] = (i - n / 2) * 1.000000123456789;
  CKFLOW_ASSERT_OK(testing::WriteBundle(prefix_, {{"w", wide}}));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix_));
  for (DataType to : {DT_FLOAT, DT_BFLOAT16, DT_INT32}) {
    SCOPED_TRACE(DataTypeName(to));
    Tensor expected(to, wide.shape());
    CastElements(DT_DOUBLE, wide.raw_data(), to, expected.raw_data(), n);
    Tensor dest(to, wide.shape());
    CKFLOW_ASSERT_OK(reader->ReadCastInto(reader->entries()[0], nullptr, &dest));
    EXPECT_EQ(std::memcmp(dest.raw_data(), expected.raw_data(), dest.TotalBytes()), 0);
  }
}

TEST_F(BundleReaderTest, ReadCastIntoChecksTheStoredBytesChecksum) {
  Tensor wide(DT_DOUBLE, TensorShape({int64_t{3} << 17}));
  std::memset(wide.raw_data(), 0, wide.TotalBytes());
  CKFLOW_ASSERT_OK(testing::WriteBundle(prefix_, {{"w", wide}}));
  std::string data = testing::ReadFileOrDie(data_path());
  data[(size_t{2} << 20) + 3] = 1;  // in the third chunk
  testing::WriteFileOrDie(data_path(), data);
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix_));
  Tensor dest(DT_FLOAT, wide.shape());
  ExpectError(reader->ReadCastInto(reader->entries()[0], nullptr, &dest), StatusCode::kDataLoss,
              {"'w'", "checksum mismatch"});
}

// A tensor saved in parts, read whole and as a box, into another dtype.
TEST_F(BundleReaderTest, ReadCastIntoReadsPartsAndBoxes) {
  const Tensor grid = testing::Grid(4, 3);
  Tensor wide(DT_DOUBLE, grid.shape());
  CastElements(DT_FLOAT, grid.raw_data(), DT_DOUBLE, wide.raw_data(), grid.NumElements());
  {
    CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleWriter> writer,
                                BundleWriter::Create(prefix_));
    for (int64_t row0 : {0, 2}) {
      Tensor part(DT_DOUBLE, TensorShape({2, 3}));
      std::memcpy(part.raw_data(), wide.flat<double>().data() + row0 * 3, 6 * sizeof(double));
      CKFLOW_ASSERT_OK_AND_ASSIGN(TensorSlice slice,
                                  ParseTensorSlice(std::to_string(row0) + ",2:-"));
      CKFLOW_ASSERT_OK(writer->AddSlice("g", grid.shape(), slice, part));
    }
    CKFLOW_ASSERT_OK(writer->Finish());
  }
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix_));
  const BundleEntry* entry = reader->FindEntry("g");
  ASSERT_NE(entry, nullptr);
  Tensor whole(DT_FLOAT, grid.shape());
  CKFLOW_ASSERT_OK(reader->ReadCastInto(*entry, nullptr, &whole));
  EXPECT_EQ(std::memcmp(whole.raw_data(), grid.raw_data(), grid.TotalBytes()), 0);
  CKFLOW_ASSERT_OK_AND_ASSIGN(TensorSlice box, ParseTensorSlice("1,2:1,2"));
  Tensor part(DT_FLOAT, TensorShape({2, 2}));
  CKFLOW_ASSERT_OK(reader->ReadCastInto(*entry, &box, &part));
  EXPECT_EQ(part.flat<float>()[0], 101.0f);
  EXPECT_EQ(part.flat<float>()[3], 202.0f);
  Tensor wrong(DT_FLOAT, TensorShape({3, 2}));
  ExpectError(reader->ReadCastInto(*entry, &box, &wrong), StatusCode::kInvalidArgument,
              {"'g'", "[2,2]", "[3,2]"});
}

TEST_F(BundleReaderTest, ReadCastIntoRefusesWhatNoRuleConverts) {
  CKFLOW_ASSERT_OK(testing::WriteBundle(prefix_, {{"c", Tensor(DT_COMPLEX64, TensorShape({2}))},
                                                  {"s", Tensor::FromVector<std::string>({"a"})}}));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix_));
  Tensor real(DT_FLOAT, TensorShape({2}));
  ExpectError(reader->ReadCastInto(*reader->FindEntry("c"), nullptr, &real),
              StatusCode::kInvalidArgument, {"'c'", "imaginary"});
  Tensor number(DT_FLOAT, TensorShape({1}));
  ExpectError(reader->ReadCastInto(*reader->FindEntry("s"), nullptr, &number),
              StatusCode::kInvalidArgument, {"'s'", "no rule converts string"});
}

// A bool that is neither 0 nor 1 is caught on the converting path too, and
// a big-endian float64 converts after its bytes are swapped.
TEST_F(BundleReaderTest, ReadCastIntoChecksBoolsAndSwapsBigEndian) {
  const std::string bools("\x01\x00\x02", 3);
  WriteCrafted(prefix_, {{"b", Entry(DT_BOOL, {3}, 0, 3, MaskedCrc(bools))}}, bools);
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix_));
  Tensor ints(DT_INT32, TensorShape({3}));
  ExpectError(reader->ReadCastInto(reader->entries()[0], nullptr, &ints), StatusCode::kDataLoss,
              {"'b'", "not a bool"});

  tensorflow::BundleHeaderProto header = internal::MakeBundleHeader(1);
  header.set_endianness(tensorflow::BundleHeaderProto::BIG);
  std::string doubles;
  for (double v : {1.5, -1e300}) {
    uint64_t bits;
    std::memcpy(&bits, &v, 8);
    bits = __builtin_bswap64(bits);
    doubles.append(reinterpret_cast<const char*>(&bits), 8);
  }
  WriteCrafted(prefix_, header, {{"d", Entry(DT_DOUBLE, {2}, 0, 16, MaskedCrc(doubles))}}, doubles);
  CKFLOW_ASSERT_OK_AND_ASSIGN(reader, BundleReader::Open(prefix_));
  Tensor floats(DT_FLOAT, TensorShape({2}));
  CKFLOW_ASSERT_OK(reader->ReadCastInto(reader->entries()[0], nullptr, &floats));
  EXPECT_EQ(floats.flat<float>()[0], 1.5f);
  EXPECT_EQ(floats.flat<float>()[1], -std::numeric_limits<float>::infinity());
}

TEST_F(BundleReaderTest, OnlyKeyIndexesJustThatKey) {
  WriteValid();
  std::unique_ptr<BundleReader> one = BundleReader::Open(prefix_, {.only_key = "b"}).value();
  ASSERT_EQ(one->entries().size(), 1u);
  EXPECT_EQ(one->entries()[0].key, "b");
  EXPECT_FALSE(one->Contains("a"));
  EXPECT_EQ(one->Lookup("b").value().scalar<int64_t>(), 7);
  // An absent key leaves nothing indexed (and is not an error).
  EXPECT_TRUE(BundleReader::Open(prefix_, {.only_key = "zz"}).value()->entries().empty());
  EXPECT_TRUE(BundleReader::Open(prefix_, {.only_key = "0"}).value()->entries().empty());
}

TEST_F(BundleReaderTest, OnlyKeyStillChecksTheWholeIndex) {
  WriteValid();
  std::string index = testing::ReadFileOrDie(index_path());
  index[index.size() / 3] ^= 0x40;  // somewhere in the data block
  testing::WriteFileOrDie(index_path(), index);
  StatusOr<std::unique_ptr<BundleReader>> one = BundleReader::Open(prefix_, {.only_key = "b"});
  EXPECT_EQ(one.status().code(), StatusCode::kDataLoss) << one.status();
}

TEST_F(BundleReaderTest, MissingKeyIsNotFound) {
  WriteValid();
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix_));
  EXPECT_FALSE(reader->Contains("zzz"));
  ExpectError(reader->Lookup("zzz").status(), StatusCode::kNotFound, {"'zzz'", "ckpt.index"});
}

TEST_F(BundleReaderTest, SlicedTensorWithoutItsSlicesIsDataLoss) {
  tensorflow::BundleEntryProto full = Entry(DT_FLOAT, {4}, 0, 0, 0);
  full.add_slices()->add_extent()->set_length(2);
  WriteCrafted(prefix_, {{"part", full}}, "");
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix_));
  EXPECT_EQ(reader->FindEntry("part")->slices.size(), 1u);
  ExpectError(reader->Lookup("part").status(), StatusCode::kDataLoss,
              {"'part'", "slice 0,2 is missing"});
  ExpectError(reader->ReadRaw(*reader->FindEntry("part")).status(), StatusCode::kInvalidArgument,
              {"'part'", "1 slices"});
}

// A bundle written on a big-endian host: numeric data and string length
// checksums in big-endian order; reads swap.
TEST_F(BundleReaderTest, BigEndianBundleReadsSwapped) {
  tensorflow::BundleHeaderProto header = internal::MakeBundleHeader(1);
  header.set_endianness(tensorflow::BundleHeaderProto::BIG);
  std::string floats;
  for (float v : {1.5f, -2.0f}) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    bits = __builtin_bswap32(bits);
    floats.append(reinterpret_cast<const char*>(&bits), 4);
  }
  const uint32_t be_length = __builtin_bswap32(3u);
  const uint32_t length_crc = crc32c::Value(&be_length, 4);
  const uint32_t stored = __builtin_bswap32(crc32c::Mask(length_crc));
  std::string strings("\x03", 1);
  strings.append(reinterpret_cast<const char*>(&stored), 4);
  strings += "abc";
  uint32_t string_crc = crc32c::Extend(crc32c::Extend(length_crc, &stored, 4), "abc");
  WriteCrafted(prefix_, header,
               {{"f", Entry(DT_FLOAT, {2}, 0, 8, MaskedCrc(floats))},
                {"s", Entry(DT_STRING, {1}, 8, static_cast<int64_t>(strings.size()),
                            crc32c::Mask(string_crc))}},
               floats + strings);
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix_));
  EXPECT_TRUE(reader->big_endian());
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor f, reader->Lookup("f"));
  EXPECT_EQ(f.flat<float>()[0], 1.5f);
  EXPECT_EQ(f.flat<float>()[1], -2.0f);
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor s, reader->Lookup("s"));
  EXPECT_EQ(s.flat<std::string>()[0], "abc");
}

// Two keys may point at the same bytes (a writer that stores equal values
// once): a batch read of a big-endian bundle swaps each value in its read
// buffer, and must hand the next key the file's bytes, not swapped ones.
TEST_F(BundleReaderTest, BigEndianBatchReadsKeysThatShareBytes) {
  tensorflow::BundleHeaderProto header = internal::MakeBundleHeader(1);
  header.set_endianness(tensorflow::BundleHeaderProto::BIG);
  std::string floats;
  for (float v : {1.5f, -2.0f, 3.25f}) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    bits = __builtin_bswap32(bits);
    floats.append(reinterpret_cast<const char*>(&bits), 4);
  }
  // "a" is [1.5, -2], "b" the same bytes, "c" [-2, 3.25] overlapping both.
  WriteCrafted(prefix_, header,
               {{"a", Entry(DT_FLOAT, {2}, 0, 8, MaskedCrc(floats.substr(0, 8)))},
                {"b", Entry(DT_FLOAT, {2}, 0, 8, MaskedCrc(floats.substr(0, 8)))},
                {"c", Entry(DT_FLOAT, {2}, 4, 8, MaskedCrc(floats.substr(4, 8)))}},
               floats);
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix_));
  std::vector<const BundleEntry*> batch;
  for (const char* key : {"a", "b", "c"}) batch.push_back(reader->FindEntry(key));
  std::vector<std::vector<float>> read(batch.size());
  CKFLOW_ASSERT_OK(reader->ReadBatch(batch, [&](size_t i, std::string_view bytes) {
    read[i].resize(bytes.size() / sizeof(float));
    std::memcpy(read[i].data(), bytes.data(), bytes.size());
    return OkStatus();
  }));
  EXPECT_EQ(read[0], (std::vector<float>{1.5f, -2.0f}));
  EXPECT_EQ(read[1], (std::vector<float>{1.5f, -2.0f}));
  EXPECT_EQ(read[2], (std::vector<float>{-2.0f, 3.25f}));
}

// A thread's first batch of only empty values: its read buffer was never
// allocated, and the consumer must still get a pointer it may hand to
// memcpy (the checkpoint fuzz target's check found a null one).
TEST_F(BundleReaderTest, BatchOfEmptyValuesHandsOutNonNullBytes) {
  {
    CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleWriter> writer,
                                BundleWriter::Create(prefix_));
    CKFLOW_ASSERT_OK(writer->Add("empty", Tensor(DT_FLOAT, TensorShape({0, 3}))));
    CKFLOW_ASSERT_OK(writer->Finish());
  }
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix_));
  const std::vector<const BundleEntry*> batch = {reader->FindEntry("empty")};
  ASSERT_NE(batch[0], nullptr);
  Status read;
  const char* data = nullptr;
  size_t size = 1;
  std::thread fresh([&] {  // a fresh thread_local buffer
    read = reader->ReadBatch(batch, [&](size_t, std::string_view bytes) {
      data = bytes.data();
      size = bytes.size();
      return OkStatus();
    });
  });
  fresh.join();
  CKFLOW_ASSERT_OK(read);
  EXPECT_EQ(size, 0u);
  EXPECT_NE(data, nullptr);
}

// A batch of many small values is read in ranges of at most
// kMaxBatchReadBytes, so the read buffer a thread keeps stays that small; a
// value larger than that is still read whole, in one range.
TEST_F(BundleReaderTest, BatchReadsRangesOfBoundedSize) {
  constexpr int kSmall = 700;  // 1 KiB each: several ranges' worth
  const int64_t big_elements = static_cast<int64_t>(BundleReader::kMaxBatchReadBytes) / 4 + 100;
  {
    CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleWriter> writer,
                                BundleWriter::Create(prefix_));
    for (int i = 0; i < kSmall; ++i) {
      Tensor t(DT_FLOAT, TensorShape({256}));
      for (int k = 0; k < 256; ++k) t.flat<float>()[k] = static_cast<float>(i * 256 + k);
      char key[16];
      std::snprintf(key, sizeof(key), "v%04d", i);
      CKFLOW_ASSERT_OK(writer->Add(key, t));
    }
    Tensor big(DT_FLOAT, TensorShape({big_elements}));
    for (int64_t k = 0; k < big_elements; ++k) big.flat<float>()[k] = static_cast<float>(-k);
    CKFLOW_ASSERT_OK(writer->Add("w_big", big));
    CKFLOW_ASSERT_OK(writer->Finish());
  }
  testing::ObservedFileSystem fs;
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader,
                              BundleReader::Open(prefix_, {.fs = &fs}));
  std::vector<const BundleEntry*> small;
  for (const BundleEntry& e : reader->entries()) {
    if (e.key != "w_big") small.push_back(&e);
  }
  ASSERT_EQ(small.size(), static_cast<size_t>(kSmall));
  int wrong = 0;
  CKFLOW_ASSERT_OK(reader->ReadBatch(small, [&](size_t i, std::string_view bytes) {
    std::vector<float> v(bytes.size() / sizeof(float));
    std::memcpy(v.data(), bytes.data(), bytes.size());
    for (size_t k = 0; k < v.size(); ++k) {
      wrong += v[k] != static_cast<float>(static_cast<int>(i) * 256 + static_cast<int>(k));
    }
    return OkStatus();
  }));
  EXPECT_EQ(wrong, 0);
  EXPECT_LE(fs.DataFiles().largest_read, BundleReader::kMaxBatchReadBytes);
  EXPECT_GE(fs.DataFiles().reads, kSmall * 1024 / BundleReader::kMaxBatchReadBytes);

  const BundleEntry* big = reader->FindEntry("w_big");
  ASSERT_NE(big, nullptr);
  fs.Clear();
  int64_t big_wrong = 0;
  CKFLOW_ASSERT_OK(reader->ReadBatch(std::span(&big, 1), [&](size_t, std::string_view bytes) {
    EXPECT_EQ(bytes.size(), static_cast<size_t>(big_elements) * 4);
    for (int64_t k = 0; k < big_elements; ++k) {
      float f;
      std::memcpy(&f, bytes.data() + 4 * k, 4);
      big_wrong += f != static_cast<float>(-k);
    }
    return OkStatus();
  }));
  EXPECT_EQ(big_wrong, 0);
  EXPECT_EQ(fs.DataFiles().reads, 1);
  EXPECT_EQ(fs.DataFiles().largest_read, big->size);
}

// Hand-built tables whose checksums are right but whose structure lies:
// LevelDB would allocate what these handles say.
class CraftedTableTest : public BundleReaderTest {
 protected:
  static void PutHandle(std::string* out, uint64_t offset, uint64_t size) {
    internal::PutVarint64(out, offset);
    internal::PutVarint64(out, size);
  }
  static void AppendBlock(std::string* file, const std::string& contents, char type) {
    *file += contents;
    std::string trailer(1, type);
    const uint32_t crc = crc32c::Extend(crc32c::Value(contents), trailer);
    internal::PutFixed32(&trailer, crc32c::Mask(crc));
    *file += trailer;
  }
  // One data block (`data`, of `type`) whose index entry says
  // (data_offset, data_size).
  static std::string Table(const std::string& data, char type, uint64_t data_offset,
                           uint64_t data_size) {
    std::string file;
    AppendBlock(&file, data, type);
    const uint64_t meta_offset = file.size();
    AppendBlock(&file, std::string("\0\0\0\0\1\0\0\0", 8), 0);
    std::string index_block("\x00\x01", 2);
    std::string handle;
    PutHandle(&handle, data_offset, data_size);
    index_block += static_cast<char>(handle.size());
    index_block += "z" + handle;
    internal::PutFixed32(&index_block, 0);
    internal::PutFixed32(&index_block, 1);
    const uint64_t index_offset = file.size();
    AppendBlock(&file, index_block, 0);
    std::string footer;
    PutHandle(&footer, meta_offset, 8);
    PutHandle(&footer, index_offset, index_block.size());
    footer.resize(40, '\0');
    footer += std::string("\x57\xfb\x80\x8b\x24\x75\x47\xdb", 8);
    return file + footer;
  }
};

// A data block of full-key entries (no shared prefixes), one restart.
std::string DataBlock(const std::vector<internal::KeyValue>& entries) {
  std::string block;
  for (const auto& [key, value] : entries) {
    block += '\0';
    internal::PutVarint64(&block, key.size());
    internal::PutVarint64(&block, value.size());
    block += key + value;
  }
  internal::PutFixed32(&block, 0);
  internal::PutFixed32(&block, 1);
  return block;
}

TEST_F(CraftedTableTest, KeysOutOfOrderAreDataLoss) {
  const std::string block = DataBlock({{"", internal::MakeBundleHeader(1).SerializeAsString()},
                                       {"b", Entry(DT_FLOAT, {}, 0, 4, 0).SerializeAsString()},
                                       {"a", Entry(DT_FLOAT, {}, 0, 4, 0).SerializeAsString()}});
  testing::WriteFileOrDie(index_path(), Table(block, 0, 0, block.size()));
  ExpectError(BundleReader::Open(prefix_).status(), StatusCode::kDataLoss,
              {"ckpt.index", "out of order ('b' then 'a')"});
}

TEST_F(CraftedTableTest, GarbageDataBlockIsDataLoss) {
  for (const std::string& garbage : {std::string("\xff\xff\xff\xff\xff\xff\xff\xff\x01\0\0\0", 12),
                                     std::string("\x05\x01\x01xy\0\0\0\0\x01\0\0\0", 13),
                                     std::string("\x01", 1), std::string(64, '\x7f')}) {
    testing::WriteFileOrDie(index_path(), Table(garbage, 0, 0, garbage.size()));
    Status s = BundleReader::Open(prefix_).status();
    EXPECT_THAT(s, testing::StatusIs(StatusCode::kDataLoss, "ckpt.index"));
  }
}

TEST_F(CraftedTableTest, HandCraftedTableIsReadable) {
  // The crafting itself is right: an empty data block reads as no entries.
  testing::WriteFileOrDie(index_path(), Table(std::string("\0\0\0\0\1\0\0\0", 8), 0, 0, 8));
  ExpectError(BundleReader::Open(prefix_).status(), StatusCode::kDataLoss, {"no header entry"});
}

TEST_F(CraftedTableTest, BlockHandlePastTheEndIsDataLoss) {
  testing::WriteFileOrDie(index_path(), Table(std::string(8, '\0'), 0, 0, uint64_t{1} << 62));
  ExpectError(BundleReader::Open(prefix_).status(), StatusCode::kDataLoss,
              {"ckpt.index", "data block at offset 0", "runs past the end"});
}

TEST_F(CraftedTableTest, BadBlockTypeIsDataLoss) {
  testing::WriteFileOrDie(index_path(), Table(std::string(8, '\0'), 7, 0, 8));
  ExpectError(BundleReader::Open(prefix_).status(), StatusCode::kDataLoss,
              {"ckpt.index", "bad block type 7"});
}

TEST_F(CraftedTableTest, CorruptSnappyBlockIsDataLoss) {
  // A Snappy header claiming 4 GiB of output, then nothing.
  testing::WriteFileOrDie(index_path(), Table(std::string("\xff\xff\xff\xff\x0f", 5), 1, 0, 5));
  ExpectError(BundleReader::Open(prefix_).status(), StatusCode::kDataLoss,
              {"ckpt.index", "corrupt Snappy block"});
}

TEST_F(BundleReaderTest, ConcurrentReadsAgree) {
  Tensor big(DT_INT32, TensorShape({1 << 20}));
  for (int64_t i = 0; i < big.NumElements(); ++i) big.flat<int32_t>()[i] = static_cast<int32_t>(i);
  CKFLOW_ASSERT_OK(testing::WriteBundle(prefix_, {{"big", big}, {"s", Tensor::Scalar(1.0f)}}));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix_));
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 5; ++i) {
        StatusOr<Tensor> r = reader->Lookup(i % 2 ? "big" : "s");
        if (!r.ok() || (i % 2 && r->flat<int32_t>()[12345] != 12345)) ++failures;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

// A restore reads the data files mostly in order: the reader says so once
// per data file it opens, so the system reads ahead further.
TEST_F(BundleReaderTest, AdvisesSequentialReadsOnceOnEachDataFile) {
  WriteValid();
  testing::ObservedFileSystem fs;
  StatusOr<std::unique_ptr<BundleReader>> reader = BundleReader::Open(prefix_, {.fs = &fs});
  CKFLOW_ASSERT_OK(reader.status());
  for (const char* key : {"a", "b", "a"}) CKFLOW_ASSERT_OK((*reader)->Lookup(key).status());
  EXPECT_EQ(fs.of(data_path()).advised_sequential, 1);
  EXPECT_EQ(fs.of(index_path()).advised_sequential, 0);
}

// PrefetchData asks for every data file whole, once, when they hold at most
// the limit together; above it, for none.
TEST_F(BundleReaderTest, PrefetchesEveryDataFileWholeWithinTheLimit) {
  WriteValid();
  const uint64_t data_bytes = std::filesystem::file_size(data_path());
  testing::ObservedFileSystem fs;
  StatusOr<std::unique_ptr<BundleReader>> reader = BundleReader::Open(prefix_, {.fs = &fs});
  CKFLOW_ASSERT_OK(reader.status());
  (*reader)->PrefetchData(data_bytes - 1);
  EXPECT_EQ(fs.of(data_path()).prefetched, 0u);
  (*reader)->PrefetchData(data_bytes);
  EXPECT_EQ(fs.of(data_path()).prefetched, data_bytes);
  EXPECT_EQ(fs.of(data_path()).prefetches_not_from_start, 0);
  EXPECT_EQ(fs.of(index_path()).prefetched, 0u);
  // The file it opened to prefetch is the one reads use.
  CKFLOW_ASSERT_OK((*reader)->Lookup("a").status());
  EXPECT_EQ(fs.of(data_path()).advised_sequential, 1);
}

}  // namespace
}  // namespace ckflow
