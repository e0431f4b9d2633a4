// BundleWriter: round trips of every dtype, the bytes TensorFlow expects,
// and what a failed save leaves behind.

#include "bundle/bundle_writer.h"

#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "base/tensor_source_internal.h"
#include "bundle/bundle_format.h"
#include "bundle/bundle_index_internal.h"
#include "bundle/bundle_reader.h"
#include "bundle/crc32c.h"
#include "tests/bundle/bundle_test_util.h"
#include "tests/bundle/testdata_util.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

using testing::NamedTensors;

template <typename T>
Tensor Make(const std::vector<T>& values, TensorShape shape) {
  return Tensor::FromVector(values, shape);
}

// A tensor of every dtype with telling values: extremes, negative zero,
// NaN and infinities where the type has them.
NamedTensors EveryDtype() {
  const float inf = std::numeric_limits<float>::infinity();
  return {
      {"float32", Make<float>({1.5f, -0.0f, inf, -inf, std::nanf(""), 3.4e38f}, {2, 3})},
      {"float64", Make<double>({1e-300, -2.5, std::numeric_limits<double>::max()}, {3})},
      {"int32", Make<int32_t>({std::numeric_limits<int32_t>::min(), -1, 0, 7}, {2, 2})},
      {"int64", Make<int64_t>({std::numeric_limits<int64_t>::max(), -3}, {2})},
      {"int8", Make<int8_t>({-128, 127, 0}, {3})},
      {"int16", Make<int16_t>({-32768, 32767}, {2, 1})},
      {"uint8", Make<uint8_t>({0, 255, 17}, {3})},
      {"uint16", Make<uint16_t>({0, 65535}, {2})},
      {"bool", Make<bool>({true, false, true}, {3})},
      {"bfloat16", Make<bfloat16>({bfloat16(1.0f), bfloat16(-3.5f), bfloat16(inf)}, {3})},
      {"float16", Make<float16>({float16(0.5f), float16(-65504.0f)}, {2})},
      {"string",
       Make<std::string>({"", "a", std::string(100000, 'x'), std::string("\0\xff\n", 3)}, {2, 2})},
      {"scalar_float", Tensor::Scalar(2.25f)},
      {"scalar_string", Tensor::Scalar(std::string("hello"))},
      {"empty_float", Tensor(DT_FLOAT, TensorShape({0}))},
      {"empty_int64", Tensor(DT_INT64, TensorShape({2, 0, 3}))},
      {"empty_string", Tensor(DT_STRING, TensorShape({0}))},
      {"empty_strings", Make<std::string>({"", ""}, {2})},
  };
}

void ExpectSameTensor(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.dtype(), b.dtype());
  ASSERT_EQ(a.shape(), b.shape());
  if (a.dtype() == DT_STRING) {
    for (int64_t i = 0; i < a.NumElements(); ++i) {
      EXPECT_EQ(a.flat<std::string>()[i], b.flat<std::string>()[i]) << "element " << i;
    }
  } else {
    EXPECT_EQ(std::memcmp(a.raw_data(), b.raw_data(), a.TotalBytes()), 0);
  }
}

TEST(BundleWriter, EveryDtypeRoundTrips) {
  const std::string prefix = testing::NewTempDir("rt") + "/ckpt";
  const NamedTensors tensors = EveryDtype();
  CKFLOW_ASSERT_OK(testing::WriteBundle(prefix, tensors));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix));
  ASSERT_EQ(reader->entries().size(), tensors.size());
  for (const auto& [key, tensor] : tensors) {
    SCOPED_TRACE(key);
    CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor read, reader->Lookup(key));
    ExpectSameTensor(read, tensor);
    Tensor into(tensor.dtype(), tensor.shape());
    CKFLOW_ASSERT_OK(reader->ReadInto(key, &into));
    ExpectSameTensor(into, tensor);
  }
}

// CheckBundle reads every byte back: each entry's checksum, the data files
// covered with no gap or overlap, the table's blocks.
TEST(BundleWriter, EveryKindPassesTheReaderLevelCheck) {
  const std::string dir = testing::NewTempDir("check");
  CKFLOW_ASSERT_OK(testing::WriteBundle(dir + "/every_dtype", EveryDtype()));
  CKFLOW_ASSERT_OK(testing::WriteBundle(dir + "/no_tensors", {}));
  // A tensor big enough to take the parallel chunked path (3 MiB).
  Tensor big(DT_FLOAT, TensorShape({3, 1 << 18}));
  for (int64_t i = 0; i < big.NumElements(); ++i) big.flat<float>()[i] = static_cast<float>(i);
  CKFLOW_ASSERT_OK(
      testing::WriteBundle(dir + "/big", {{"big", big}, {"small", Tensor::Scalar(1)}}));
  for (const char* name : {"every_dtype", "no_tensors", "big"}) {
    StatusOr<std::string> listing = testing::CheckBundle(dir + "/" + name);
    EXPECT_TRUE(listing.ok()) << name << ": " << listing.status();
  }
}

// The bundle at `prefix` stores `want` under `key`: its CRC32C and its bytes.
void ExpectStoredAs(const std::string& prefix, const std::string& key, const Tensor& want) {
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix));
  const BundleEntry* entry = reader->FindEntry(key);
  ASSERT_NE(entry, nullptr) << key;
  EXPECT_EQ(entry->masked_crc32c, crc32c::Mask(crc32c::Value(want.raw_data(), want.TotalBytes())));
  Tensor into(want.dtype(), want.shape());
  CKFLOW_ASSERT_OK(reader->ReadInto(key, &into));
  ExpectSameTensor(into, want);
}

TEST(BundleWriter, LargeTensorsReadBackUnderEveryParallelism) {
  const std::string prefix = testing::NewTempDir("large") + "/ckpt";
  // 9 MiB + 3 bytes: chunks of 1 MiB and a ragged tail.
  Tensor big(DT_UINT8, TensorShape({(9 << 20) + 3}));
  std::mt19937 rng(1);
  for (uint8_t& b : big.flat<uint8_t>()) b = static_cast<uint8_t>(rng());
  for (int threads : {1, 2, 4}) {
    SCOPED_TRACE(threads);
    tbb::global_control limit(tbb::global_control::max_allowed_parallelism, threads);
    CKFLOW_ASSERT_OK(testing::WriteBundle(prefix, {{"big", big}}));
    ExpectStoredAs(prefix, "big", big);
  }
}

// Small tensors are gathered into the writer's buffer, and each full
// buffer is written on another thread while the next one fills: megabytes
// of them, of ragged sizes and with a large one between, read back whole,
// and the files come out the same bytes whatever the parallelism.
TEST(BundleWriter, ManySmallTensorsReadBackUnderEveryParallelism) {
  const std::string dir = testing::NewTempDir("small");
  NamedTensors tensors;
  std::mt19937 rng(3);
  for (int i = 0; i < 5000; ++i) {
    const int64_t n = i == 2500 ? (3 << 20) : 1 + static_cast<int64_t>(rng() % 2048);
    Tensor t(DT_UINT8, TensorShape({n}));
    for (uint8_t& b : t.flat<uint8_t>()) b = static_cast<uint8_t>(rng());
    tensors.emplace_back("v" + std::to_string(10000 + i), std::move(t));
  }
  for (int threads : {1, 2, 4}) {
    SCOPED_TRACE(threads);
    tbb::global_control limit(tbb::global_control::max_allowed_parallelism, threads);
    const std::string prefix = dir + "/t" + std::to_string(threads);
    CKFLOW_ASSERT_OK(testing::WriteBundle(prefix, tensors));
    CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix));
    ASSERT_EQ(reader->entries().size(), tensors.size());
    for (const auto& [key, want] : tensors) {
      CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor got, reader->Lookup(key));
      ASSERT_EQ(got.TotalBytes(), want.TotalBytes()) << key;
      ASSERT_EQ(std::memcmp(got.raw_data(), want.raw_data(), want.TotalBytes()), 0) << key;
    }
    if (threads == 1) continue;
    EXPECT_TRUE(testing::ReadFileOrDie(prefix + ".index") ==
                testing::ReadFileOrDie(dir + "/t1.index"));
    EXPECT_TRUE(testing::ReadFileOrDie(DataFilename(prefix, 0, 1)) ==
                testing::ReadFileOrDie(DataFilename(dir + "/t1", 0, 1)));
  }
}

// A tensor over a source (an asynchronous save's snapshot of a large
// variable) is written as the tensor itself would be: the same bytes and
// CRC, whether it is buffered or written in parallel chunks. The source is
// read once, in pieces; its error fails the add and the bundle.
class StringSource : public internal::TensorSource {
 public:
  explicit StringSource(std::string bytes, bool fail = false)
      : bytes_(std::move(bytes)), fail_(fail) {}
  Status Read(uint64_t offset, uint64_t length,
              const std::function<Status(std::string_view)>& consume) const override {
    if (fail_) return DataLossError("the source broke");
    read_ += length;
    // Two pieces, as a source of blocks gives them.
    const uint64_t half = length / 2;
    CKFLOW_RETURN_IF_ERROR(consume(std::string_view(bytes_).substr(offset, half)));
    return consume(std::string_view(bytes_).substr(offset + half, length - half));
  }
  uint64_t read() const { return read_; }

 private:
  std::string bytes_;
  bool fail_;
  mutable std::atomic<uint64_t> read_{0};
};

TEST(BundleWriter, TensorsOverASourceAreWrittenAsTheTensorsThemselves) {
  const std::string prefix = testing::NewTempDir("source") + "/ckpt";
  std::mt19937 rng(2);
  for (int64_t n : {int64_t{1000}, int64_t{(3 << 18) + 1}}) {  // 4 KB; 3 MiB + 4 bytes
    SCOPED_TRACE(n);
    Tensor plain(DT_FLOAT, TensorShape({n}));
    for (float& x : plain.flat<float>()) x = static_cast<float>(rng());
    auto source = std::make_shared<StringSource>(
        std::string(static_cast<const char*>(plain.raw_data()), plain.TotalBytes()));
    CKFLOW_ASSERT_OK(testing::WriteBundle(
        prefix, {{"a", Tensor::Scalar(1.0f)},
                 {"b", internal::TensorOverSource(DT_FLOAT, plain.shape(), source)}}));
    EXPECT_EQ(source->read(), plain.TotalBytes());
    ExpectStoredAs(prefix, "b", plain);
  }
  auto broken = std::make_shared<StringSource>(std::string(4 << 20, 'x'), /*fail=*/true);
  EXPECT_THAT(testing::WriteBundle(
                  prefix + "2",
                  {{"big", internal::TensorOverSource(DT_FLOAT, TensorShape({1 << 20}), broken)}}),
              testing::StatusIs(StatusCode::kDataLoss, "the source broke"));
  EXPECT_FALSE(BundleReader::Open(prefix + "2").ok());
}

TEST(BundleWriter, KeysMayComeInAnyOrderAndDataKeepsAddOrder) {
  const std::string prefix = testing::NewTempDir("order") + "/ckpt";
  CKFLOW_ASSERT_OK(testing::WriteBundle(prefix, {{"zeta", Tensor::Scalar(1.0f)},
                                                 {"alpha", Tensor::Scalar(int64_t{2})},
                                                 {"mid", Tensor::Scalar(3.0)}}));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix));
  ASSERT_EQ(reader->entries().size(), 3u);
  EXPECT_EQ(reader->entries()[0].key, "alpha");
  EXPECT_EQ(reader->entries()[2].key, "zeta");
  EXPECT_EQ(reader->FindEntry("zeta")->offset, 0);
  EXPECT_EQ(reader->FindEntry("alpha")->offset, 4);
  EXPECT_EQ(reader->FindEntry("mid")->offset, 12);
}

// The writer takes a run of increasing keys at one comparison each and the
// keys after the run through a lookup table: duplicates are refused in both,
// and the index comes out sorted either way.
TEST(BundleWriter, SortedRunAndOutOfOrderKeysAreAllFoundAndChecked) {
  const std::string prefix = testing::NewTempDir("runs") + "/ckpt";
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleWriter> writer, BundleWriter::Create(prefix));
  std::vector<std::string> keys;
  for (int i = 0; i < 300; ++i) keys.push_back("var/" + std::to_string(1000 + i));
  std::vector<std::string> late;  // come after the sorted run, in any order
  for (int i = 0; i < 50; ++i) late.push_back("late/" + std::to_string(7919 * i % 50));
  late.push_back("a/first");
  late.push_back("var/1150x");  // sorts inside the run
  for (size_t i = 0; i < keys.size(); ++i) {
    CKFLOW_ASSERT_OK(writer->Add(keys[i], Tensor::Scalar(static_cast<int64_t>(i))));
  }
  for (size_t i = 0; i < late.size(); ++i) {
    CKFLOW_ASSERT_OK(writer->Add(late[i], Tensor::Scalar(static_cast<int64_t>(-1 - i))));
  }
  for (const std::string& again : {keys[0], keys[150], keys[299], late[0], late[50]}) {
    EXPECT_THAT(writer->Add(again, Tensor::Scalar(0.0f)),
                testing::StatusIs(StatusCode::kInvalidArgument, "'" + again + "' added twice"));
  }
  // A slice's full entry is found again wherever its key falls.
  const TensorShape full({4});
  for (int64_t part = 0; part < 2; ++part) {
    TensorSlice slice;
    slice.extents.push_back({part * 2, 2});
    CKFLOW_ASSERT_OK(writer->AddSlice("b/sliced", full, slice,
                                      Tensor::FromVector<float>({1, 2}, TensorShape({2}))));
  }
  CKFLOW_ASSERT_OK(writer->Finish());

  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix));
  for (size_t i = 1; i < reader->entries().size(); ++i) {
    EXPECT_LT(reader->entries()[i - 1].key, reader->entries()[i].key);
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor t, reader->Lookup(keys[i]));
    EXPECT_EQ(t.flat<int64_t>()[0], static_cast<int64_t>(i)) << keys[i];
  }
  for (size_t i = 0; i < late.size(); ++i) {
    CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor t, reader->Lookup(late[i]));
    EXPECT_EQ(t.flat<int64_t>()[0], -1 - static_cast<int64_t>(i)) << late[i];
  }
  const BundleEntry* sliced = reader->FindEntry("b/sliced");
  ASSERT_NE(sliced, nullptr);
  EXPECT_EQ(sliced->shape, full);
  EXPECT_EQ(sliced->slices.size(), 2u);
}

// Spec 2.3 and 2.6: the header entry of a little-endian single-shard bundle
// and the entry of a float32 [2,3] tensor saved first.
TEST(BundleWriter, HeaderAndEntryBytesAreTensorFlows) {
  const std::string prefix = testing::NewTempDir("bytes") + "/ckpt";
  Tensor t = Make<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  CKFLOW_ASSERT_OK(testing::WriteBundle(prefix, {{"x", t}, {"s", Tensor::Scalar(2.0f)}}));
  CKFLOW_ASSERT_OK_AND_ASSIGN(
      auto table, internal::ReadTable("index", testing::ReadFileOrDie(IndexFilename(prefix))));
  ASSERT_EQ(table.size(), 3u);
  EXPECT_EQ(table[0].first, "");
  EXPECT_EQ(table[0].second, std::string("\x08\x01\x1a\x02\x08\x01", 6));
  const uint32_t crc = crc32c::Mask(crc32c::Value(t.raw_data(), 24));
  std::string expected("\x08\x01\x12\x08\x12\x02\x08\x02\x12\x02\x08\x03\x28\x18\x35", 15);
  expected.append(reinterpret_cast<const char*>(&crc), 4);
  EXPECT_EQ(table[2].first, "x");
  EXPECT_EQ(table[2].second, expected);
  // A scalar still carries its (empty) shape, "12 00"; offset 24 is "20 18".
  EXPECT_EQ(table[1].second.substr(0, 8), std::string("\x08\x01\x12\x00\x20\x18\x28\x04", 8));
}

// Spec 2.1: an empty metaindex block, the index separator shortened to one
// byte, and the 48-byte footer ending in the magic number.
TEST(BundleWriter, IndexFileLayoutIsTensorFlows) {
  const std::string prefix = testing::NewTempDir("layout") + "/ckpt";
  CKFLOW_ASSERT_OK(testing::WriteBundle(prefix, {{"v/x", Tensor::Scalar(1.0f)}}));
  const std::string index = testing::ReadFileOrDie(IndexFilename(prefix));
  ASSERT_GE(index.size(), 48u);
  EXPECT_EQ(index.substr(index.size() - 8), std::string("\x57\xfb\x80\x8b\x24\x75\x47\xdb", 8));
  CKFLOW_ASSERT_OK_AND_ASSIGN(testing::TableLayout layout,
                              testing::ReadTableLayout(IndexFilename(prefix)));
  EXPECT_EQ(layout.metaindex_entries, 0);
  EXPECT_EQ(layout.separators, std::vector<std::string>{"w"});
  EXPECT_TRUE(layout.footer_padding_zero);
  EXPECT_EQ(layout.compression, std::vector<int>{0});
}

TEST(BundleWriter, EmptyStringTensorStoresOnlyTheMaskedZeroChecksum) {
  const std::string prefix = testing::NewTempDir("es") + "/ckpt";
  CKFLOW_ASSERT_OK(testing::WriteBundle(prefix, {{"e", Tensor(DT_STRING, TensorShape({0}))}}));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix));
  EXPECT_EQ(reader->entries()[0].size, 4);
  EXPECT_EQ(testing::ReadFileOrDie(DataFilename(prefix, 0, 1)), std::string("\xd8\xea\x82\xa2", 4));
}

// Spec 2.5: the length checksum is over 4-byte lengths, not varints; the
// entry CRC covers lengths, the stored checksum and the bytes.
TEST(BundleWriter, StringEncodingMatchesTheSpec) {
  const std::string prefix = testing::NewTempDir("str") + "/ckpt";
  const std::string long_string(300, 'z');  // a 2-byte varint length
  CKFLOW_ASSERT_OK(
      testing::WriteBundle(prefix, {{"s", Make<std::string>({"ab", long_string}, {2})}}));
  const std::string data = testing::ReadFileOrDie(DataFilename(prefix, 0, 1));
  const uint32_t lengths[] = {2, 300};
  const uint32_t length_crc = crc32c::Value(lengths, sizeof(lengths));
  const uint32_t masked = crc32c::Mask(length_crc);
  std::string expected("\x02\xac\x02", 3);
  expected.append(reinterpret_cast<const char*>(&masked), 4);
  expected += "ab" + long_string;
  EXPECT_EQ(data, expected);
  uint32_t entry_crc = crc32c::Extend(length_crc, &masked, 4);
  entry_crc = crc32c::Extend(entry_crc, "ab" + long_string);
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix));
  EXPECT_EQ(reader->entries()[0].masked_crc32c, crc32c::Mask(entry_crc));
}

// TensorFlow's table builder (not LevelDB's) starts a new data block before
// an entry of at least 2 x 256 KiB; without that rule the small entries and
// the huge one would share one block.
TEST(BundleWriter, HugeEntryStartsItsOwnBlockAsTensorFlowDoes) {
  const std::string prefix = testing::NewTempDir("huge") + "/ckpt";
  const std::string huge_key(600 << 10, 'k');
  CKFLOW_ASSERT_OK(testing::WriteBundle(
      prefix, {{"a", Tensor::Scalar(1.0f)}, {huge_key, Tensor::Scalar(2.0f)}}));
  CKFLOW_ASSERT_OK_AND_ASSIGN(testing::TableLayout layout,
                              testing::ReadTableLayout(IndexFilename(prefix)));
  EXPECT_EQ(layout.data_blocks, 2);
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix));
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor t, reader->Lookup(huge_key));
  EXPECT_EQ(t.scalar<float>(), 2.0f);
}

TEST(BundleWriter, ManyKeysSpanSeveralBlocks) {
  const std::string prefix = testing::NewTempDir("many") + "/ckpt";
  NamedTensors tensors;
  for (int i = 0; i < 20000; ++i) {
    tensors.emplace_back("layer_" + std::to_string(i) + "/kernel/.ATTRIBUTES/VARIABLE_VALUE",
                         Tensor::Scalar(static_cast<float>(i)));
  }
  CKFLOW_ASSERT_OK(testing::WriteBundle(prefix, tensors));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix));
  ASSERT_EQ(reader->entries().size(), tensors.size());
  // Allocated once, for the count the check of the index's blocks found.
  EXPECT_EQ(reader->entries().capacity(), tensors.size());
  for (const std::optional<std::string_view> only_key :
       {std::optional<std::string_view>(), std::optional<std::string_view>("layer_7/kernel")}) {
    std::vector<uint64_t> expected;
    uint64_t visited = 0;
    CKFLOW_ASSERT_OK(
        internal::VisitBundleIndexBytes(
            FileSystem::Default(), IndexFilename(prefix), only_key,
            [&](std::string_view, const tensorflow::BundleHeaderProto&, std::string_view) {
              ++visited;
              return OkStatus();
            },
            [&](uint64_t n) { expected.push_back(n); })
            .status());
    if (only_key.has_value()) {
      EXPECT_TRUE(expected.empty());  // a seek: nothing is counted
      EXPECT_EQ(visited, 0u);
    } else {
      EXPECT_EQ(expected, std::vector<uint64_t>{tensors.size()});
      EXPECT_EQ(visited, tensors.size());
    }
  }
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor t,
                              reader->Lookup("layer_12345/kernel/.ATTRIBUTES/VARIABLE_VALUE"));
  EXPECT_EQ(t.scalar<float>(), 12345.0f);
  CKFLOW_ASSERT_OK_AND_ASSIGN(testing::TableLayout layout,
                              testing::ReadTableLayout(IndexFilename(prefix)));
  EXPECT_GT(layout.data_blocks, 1);
  CKFLOW_EXPECT_OK(testing::CheckBundle(prefix).status());
}

TEST(BundleWriter, AddRawWritesDtypesATensorCannotHold) {
  const std::string prefix = testing::NewTempDir("raw") + "/ckpt";
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleWriter> writer, BundleWriter::Create(prefix));
  const auto qint16 = static_cast<DataType>(15);  // DT_QINT16, which ckflow cannot hold
  const int16_t values[] = {1, -2, 3, -4, 5, -6, 7, -8};
  const std::string_view bytes_in(reinterpret_cast<const char*>(values), sizeof(values));
  CKFLOW_ASSERT_OK(writer->AddRaw("c", qint16, TensorShape({8}), bytes_in));
  Status wrong = writer->AddRaw("d", qint16, TensorShape({3}), std::string(16, '\0'));
  EXPECT_THAT(wrong, testing::StatusIs(StatusCode::kInvalidArgument, "'d'"));
  CKFLOW_ASSERT_OK(writer->Finish());
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string bytes, reader->ReadRaw(*reader->FindEntry("c")));
  EXPECT_EQ(bytes, bytes_in);
  Status lookup = reader->Lookup("c").status();
  EXPECT_THAT(lookup, testing::StatusIs(StatusCode::kInvalidArgument, "qint16"));
}

TEST(BundleWriter, RejectsBadKeysAndTensors) {
  const std::string prefix = testing::NewTempDir("bad") + "/ckpt";
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleWriter> writer, BundleWriter::Create(prefix));
  CKFLOW_ASSERT_OK(writer->Add("x", Tensor::Scalar(1.0f)));
  struct Case {
    std::string key;
    Tensor tensor;
    std::string message;
  };
  const Case cases[] = {
      {"", Tensor::Scalar(1.0f), "reserved for the bundle header"},
      {"x", Tensor::Scalar(2.0f), "'x' added twice"},
      {"invalid", Tensor(), "'invalid'"},
      {"handle", Tensor(DT_RESOURCE, TensorShape()), "resource"},
  };
  for (const Case& c : cases) {
    Status s = writer->Add(c.key, c.tensor);
    EXPECT_THAT(s, testing::StatusIs(StatusCode::kInvalidArgument, c.message));
  }
  CKFLOW_ASSERT_OK(writer->Finish());  // argument errors do not spoil the bundle
  Status after = writer->Add("y", Tensor::Scalar(1.0f));
  EXPECT_TRUE(IsFailedPrecondition(after)) << after;
  EXPECT_TRUE(IsFailedPrecondition(writer->Finish()));
}

TEST(BundleWriter, AbandonedWriterLeavesNoFiles) {
  const std::string dir = testing::NewTempDir("abandon");
  {
    CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleWriter> writer,
                                BundleWriter::Create(dir + "/ckpt"));
    CKFLOW_ASSERT_OK(writer->Add("x", Tensor::Scalar(1.0f)));
  }
  EXPECT_TRUE(testing::ListDir(dir).empty());
}

TEST(BundleWriter, CreatesMissingDirectories) {
  const std::string prefix = testing::NewTempDir("dirs") + "/a/b/ckpt";
  CKFLOW_ASSERT_OK(testing::WriteBundle(prefix, {{"x", Tensor::Scalar(1.0f)}}));
  EXPECT_EQ(testing::ListDir(Dirname(prefix)),
            (std::vector<std::string>{"ckpt.data-00000-of-00001", "ckpt.index"}));
}

TEST(BundleWriter, UnwritableDirectoryIsAnErrorNamingThePath) {
  Status s = BundleWriter::Create("/proc/ckflow_cannot_write_here/ckpt").status();
  EXPECT_THAT(s, testing::StatusIs(StatusCode::kNotFound, "/proc/ckflow_cannot_write_here"));
}

// Every write-path operation of a save fails in turn (as on a full disk):
// each failure is reported, leaves no file of the new save behind, and the
// checkpoint saved before under the same prefix still reads back whole.
TEST(BundleWriter, FailedSaveNeverDamagesThePreviousCheckpoint) {
  const std::string dir = testing::NewTempDir("faults");
  const std::string prefix = dir + "/ckpt";
  Tensor big(DT_FLOAT, TensorShape({3 << 18}));  // 3 MiB: the parallel path
  for (int64_t i = 0; i < big.NumElements(); ++i) big.flat<float>()[i] = static_cast<float>(i);
  const NamedTensors old_tensors = {{"v", Tensor::Scalar(1.0f)}, {"big", big}};
  CKFLOW_ASSERT_OK(testing::WriteBundle(prefix, old_tensors));
  const std::vector<std::string> old_files = testing::ListDir(dir);
  NamedTensors new_tensors = {
      {"v", Tensor::Scalar(2.0f)}, {"big", big.Clone()}, {"w", Tensor::Scalar(3.0f)}};
  // 3 MiB of small values after the big one: buffered writes that fail on
  // another thread while values are still being added.
  for (int i = 0; i < 3000; ++i) {
    new_tensors.emplace_back("x" + std::to_string(10000 + i),
                             Tensor::FromVector(std::vector<float>(256, 0.5f * i), {256}));
  }
  int failures = 0;
  for (int fail_at = 1;; ++fail_at) {
    SCOPED_TRACE(fail_at);
    testing::FaultyFileSystem fs(fail_at);
    Status s = testing::WriteBundle(prefix, new_tensors, &fs);
    if (!fs.failed()) {
      CKFLOW_ASSERT_OK(s);
      break;
    }
    ++failures;
    EXPECT_TRUE(IsResourceExhausted(s)) << s;
    EXPECT_EQ(testing::ListDir(dir), old_files);
    CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix));
    ASSERT_EQ(reader->entries().size(), 2u);
    CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor v, reader->Lookup("v"));
    EXPECT_EQ(v.scalar<float>(), 1.0f);
    for (const BundleEntry& e : reader->entries()) CKFLOW_EXPECT_OK(reader->Verify(e));
  }
  // dirs, create, writes (each buffered megabyte's, some on another thread
  // while values are still added), close, index file, renames
  EXPECT_GE(failures, 15);
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix));
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor v, reader->Lookup("v"));
  EXPECT_EQ(v.scalar<float>(), 2.0f);
  EXPECT_EQ(testing::ListDir(dir), old_files);
}

TEST(BundleWriter, SyncOptionWritesTheSameBytes) {
  const std::string dir = testing::NewTempDir("sync");
  const NamedTensors tensors = EveryDtype();
  CKFLOW_ASSERT_OK(testing::WriteBundle(dir + "/a", tensors));
  BundleWriter::Options options;
  options.sync = true;
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleWriter> writer,
                              BundleWriter::Create(dir + "/b", options));
  for (const auto& [key, tensor] : tensors) CKFLOW_ASSERT_OK(writer->Add(key, tensor));
  CKFLOW_ASSERT_OK(writer->Finish());
  EXPECT_TRUE(testing::ReadFileOrDie(dir + "/a.index") == testing::ReadFileOrDie(dir + "/b.index"));
  EXPECT_TRUE(testing::ReadFileOrDie(DataFilename(dir + "/a", 0, 1)) ==
              testing::ReadFileOrDie(DataFilename(dir + "/b", 0, 1)));
}

}  // namespace
}  // namespace ckflow
