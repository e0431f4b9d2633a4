// Tensors saved in slices (TensorFlow's partitioned variables): the slice
// spec texts, the slice-key encoding, BundleWriter::AddSlice and reading the
// whole tensor or any box of it whatever the stored partitioning; corrupt
// slice metadata is an error naming the key.

#include "bundle/tensor_slice.h"

#include <gtest/gtest.h>

#include <limits>
#include <map>

#include "bundle/bundle_format.h"
#include "bundle/bundle_index_internal.h"
#include "bundle/bundle_reader.h"
#include "bundle/bundle_writer.h"
#include "bundle/protos/tensor_bundle.pb.h"
#include "tests/bundle/bundle_test_util.h"
#include "tests/bundle/testdata_util.h"
#include "tests/observed_file_system.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

using testing::StatusIs;

TEST(TensorSlice, ParsesAndPrintsTensorFlowSpecs) {
  CKFLOW_ASSERT_OK_AND_ASSIGN(TensorSlice s, ParseTensorSlice("0,4:-"));
  ASSERT_EQ(s.rank(), 2);
  EXPECT_EQ(s.extents[0], (TensorSlice::Extent{0, 4}));
  EXPECT_EQ(s.extents[1], (TensorSlice::Extent{0, TensorSlice::kFullExtent}));
  EXPECT_EQ(s.ToString(), "0,4:-");
  EXPECT_EQ(s.ShapeIn(TensorShape({10, 3})), TensorShape({4, 3}));

  CKFLOW_ASSERT_OK_AND_ASSIGN(ShapeAndSlice sas, ParseShapeAndSlice("10 4 4,3:0,4"));
  EXPECT_EQ(sas.full_shape, TensorShape({10, 4}));
  EXPECT_EQ(sas.slice.ToString(), "4,3:0,4");
  EXPECT_EQ(ShapeAndSliceString(sas.full_shape, sas.slice), "10 4 4,3:0,4");
  EXPECT_FALSE(sas.slice.IsFullIn(sas.full_shape));
  EXPECT_TRUE(ParseTensorSlice("0,10:0,4")->IsFullIn(TensorShape({10, 4})));
}

TEST(TensorSlice, RejectsSpecsThatDoNotParseOrFit) {
  EXPECT_THAT(ParseShapeAndSlice("10 4 8,3:-").status(),
              StatusIs(StatusCode::kInvalidArgument, "does not fit"));
  EXPECT_THAT(ParseShapeAndSlice("10 4 0,4").status(),
              StatusIs(StatusCode::kInvalidArgument, "dimension(s)"));
  EXPECT_THAT(ParseShapeAndSlice("10 x 0,4:-").status(),
              StatusIs(StatusCode::kInvalidArgument, "'x' is not an integer"));
  EXPECT_THAT(ParseShapeAndSlice("-").status(), StatusIs(StatusCode::kInvalidArgument, "'-'"));
  EXPECT_THAT(ParseTensorSlice("1:-").status(), StatusIs(StatusCode::kInvalidArgument, "'1'"));
  EXPECT_THAT(ParseTensorSlice("-1,2").status(),
              StatusIs(StatusCode::kInvalidArgument, "negative"));
}

// The bytes TensorFlow's EncodeTensorNameSlice produces (OrderedCode).
TEST(TensorSlice, SliceKeysAreTensorFlowsOrderedCode) {
  TensorSlice s{{{0, 4}, {0, TensorSlice::kFullExtent}}};
  EXPECT_EQ(EncodeTensorNameSlice("w", s),
            std::string("\x00w\x00\x01\x01\x02\x80\x84\x80\x7f", 10));
  // 64 needs two bytes; -65 too; names escape 0x00 and 0xff.
  TensorSlice wide{{{64, 1}, {0, 2}}};
  EXPECT_EQ(EncodeTensorNameSlice(std::string("a\0\xff", 3), wide),
            std::string("\x00"
                        "a\x00\xff\xff\x00\x00\x01"
                        "\x01\x02"
                        "\xc0\x40\x81\x80\x82",
                        15));
  for (int64_t v : {int64_t{0}, int64_t{1}, int64_t{63}, int64_t{64}, int64_t{-64}, int64_t{-65},
                    int64_t{1} << 40, -(int64_t{1} << 40), int64_t{1} << 55, int64_t{1} << 62,
                    std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()}) {
    SCOPED_TRACE(v);
    TensorSlice one{{{v, v}}};
    CKFLOW_ASSERT_OK_AND_ASSIGN(auto decoded,
                                DecodeTensorNameSlice(EncodeTensorNameSlice("x", one)));
    EXPECT_EQ(decoded.first, "x");
    EXPECT_EQ(decoded.second, one);
  }
  EXPECT_THAT(DecodeTensorNameSlice("w").status(),
              StatusIs(StatusCode::kInvalidArgument, "not a tensor slice key"));
  const std::string key = EncodeTensorNameSlice("w", s);
  for (size_t n = 0; n < key.size(); ++n) {
    EXPECT_FALSE(DecodeTensorNameSlice(key.substr(0, n)).ok()) << n;
  }
}

using testing::Grid;

// Writes a [10, 6] grid as `n` slices along `axis` under key "w" (and a
// plain "b" beside it).
Status WriteSliced(const std::string& prefix, int n, int axis) {
  CKFLOW_ASSIGN_OR_RETURN(std::unique_ptr<BundleWriter> writer, BundleWriter::Create(prefix));
  const TensorShape full({10, 6});
  auto parts = testing::FixedSizeParts(full.dim(axis), n);
  // Reverse order: slices may come in any order.
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
    const auto [offset, length] = *it;
    const int64_t rows = axis == 0 ? length : 10, cols = axis == 1 ? length : 6;
    const int64_t row0 = axis == 0 ? offset : 0, col0 = axis == 1 ? offset : 0;
    TensorSlice slice = TensorSlice::FromOffsets(std::vector<int64_t>{row0, col0},
                                                 std::vector<int64_t>{rows, cols});
    CKFLOW_RETURN_IF_ERROR(writer->AddSlice("w", full, slice, Grid(rows, cols, row0, col0)));
  }
  CKFLOW_RETURN_IF_ERROR(writer->Add("b", Tensor::Scalar(5.0f)));
  return writer->Finish();
}

void ExpectSameBits(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.shape(), b.shape());
  ASSERT_EQ(a.TotalBytes(), b.TotalBytes());
  EXPECT_EQ(std::memcmp(a.raw_data(), b.raw_data(), a.TotalBytes()), 0);
}

class SlicedBundleTest : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(SlicedBundleTest, ReadsWholeAndInAnyOtherPartitioning) {
  const auto [n, axis] = GetParam();
  const std::string prefix = testing::NewTempDir("sliced") + "/ckpt";
  CKFLOW_ASSERT_OK(WriteSliced(prefix, n, axis));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix));
  const BundleEntry* w = reader->FindEntry("w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->shape, TensorShape({10, 6}));
  EXPECT_EQ(w->slices.size(), n == 1 ? 0u : static_cast<size_t>(n));  // one part: stored whole

  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor whole, reader->Lookup("w"));
  ExpectSameBits(whole, Grid(10, 6));
  Tensor into(DT_FLOAT, TensorShape({10, 6}));
  CKFLOW_ASSERT_OK(reader->ReadInto("w", &into));
  ExpectSameBits(into, Grid(10, 6));
  // Every other partitioning, along either axis, and a box across slices.
  for (int m = 1; m <= 4; ++m) {
    for (int other_axis : {0, 1}) {
      for (auto [offset, length] : testing::FixedSizeParts(other_axis == 0 ? 10 : 6, m)) {
        SCOPED_TRACE(::testing::Message()
                     << m << " parts on axis " << other_axis << " at " << offset);
        const int64_t rows = other_axis == 0 ? length : 10, cols = other_axis == 1 ? length : 6;
        const int64_t row0 = other_axis == 0 ? offset : 0, col0 = other_axis == 1 ? offset : 0;
        TensorSlice want = TensorSlice::FromOffsets(std::vector<int64_t>{row0, col0},
                                                    std::vector<int64_t>{rows, cols});
        CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor part, reader->LookupSlice("w", want));
        ExpectSameBits(part, Grid(rows, cols, row0, col0));
      }
    }
  }
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor box, reader->LookupSlice("w", *ParseTensorSlice("3,5:1,4")));
  ExpectSameBits(box, Grid(5, 4, 3, 1));
  EXPECT_EQ(reader->Lookup("b")->scalar<float>(), 5.0f);

  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string listing, testing::CheckBundle(prefix));
  if (n > 1) {
    EXPECT_NE(listing.find("w float32[10,6] in " + std::to_string(n) + " slices: "),
              std::string::npos)
        << listing;
  }
}

INSTANTIATE_TEST_SUITE_P(PartsAndAxes, SlicedBundleTest,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4),
                                            ::testing::Values(0, 1)));

// Reading a sliced tensor reads each stored slice it needs once, and no
// other: whole, the tensor's bytes; a box inside the first slice, that
// slice's.
TEST(SlicedBundle, EachStoredSliceIsReadOnce) {
  for (int axis : {0, 1}) {
    SCOPED_TRACE(axis);
    const std::string prefix = testing::NewTempDir("read_once") + "/ckpt";
    CKFLOW_ASSERT_OK(WriteSliced(prefix, 3, axis));
    testing::ObservedFileSystem fs;
    auto take_bytes = [&fs] {
      const int64_t bytes = fs.DataFiles().bytes_read;
      fs.Clear();
      return bytes;
    };
    CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader,
                                BundleReader::Open(prefix, {.fs = &fs}));
    take_bytes();
    CKFLOW_ASSERT_OK(reader->Lookup("w").status());
    EXPECT_EQ(take_bytes(), 10 * 6 * 4);
    Tensor into(DT_FLOAT, TensorShape({10, 6}));
    CKFLOW_ASSERT_OK(reader->ReadInto("w", &into));
    EXPECT_EQ(take_bytes(), 10 * 6 * 4);
    // The first part is 4 rows (axis 0) or 2 columns (axis 1).
    CKFLOW_ASSERT_OK(
        reader->LookupSlice("w", *ParseTensorSlice(axis == 0 ? "1,2:-" : "-:0,1")).status());
    EXPECT_EQ(take_bytes(), (axis == 0 ? 4 * 6 : 10 * 2) * 4);
  }
}

// A box of whole rows inside one stored slice is read straight into place
// (the slice's other rows only checksummed): a flipped byte in those other
// rows is still DataLoss, and an intact file gives the rows.
TEST(SlicedBundle, RowsReadInPlaceStillChecksumTheWholeStoredSlice) {
  const std::string prefix = testing::NewTempDir("rows_in_place") + "/ckpt";
  CKFLOW_ASSERT_OK(WriteSliced(prefix, 2, 0));  // rows 0-4 and 5-9
  const TensorSlice rows_3_to_6 = *ParseTensorSlice("3,4:-");
  {
    CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix));
    CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor rows, reader->LookupSlice("w", rows_3_to_6));
    ExpectSameBits(rows, Grid(4, 6, 3, 0));
  }
  // Row 0 of the stored slice of rows 0-4: outside the box asked for.
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix));
  const BundleEntry* first = reader->FindEntry(EncodeTensorNameSlice(
      "w", TensorSlice::FromOffsets(std::vector<int64_t>{0, 0}, std::vector<int64_t>{5, 6})));
  ASSERT_NE(first, nullptr);
  const std::string data_path = DataFilename(prefix, 0, 1);
  std::string data = testing::ReadFileOrDie(data_path);
  data[static_cast<size_t>(first->offset)] ^= 0x01;
  testing::WriteFileOrDie(data_path, data);
  CKFLOW_ASSERT_OK_AND_ASSIGN(reader, BundleReader::Open(prefix));
  Status status = reader->LookupSlice("w", rows_3_to_6).status();
  EXPECT_EQ(status.code(), StatusCode::kDataLoss) << status;
  EXPECT_NE(status.message().find("checksum mismatch"), std::string::npos) << status;
}

TEST(SlicedBundle, WholeDimensionsAreEmptyExtentsAndKeysUseMinusOne) {
  const std::string prefix = testing::NewTempDir("full_dims") + "/ckpt";
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleWriter> writer, BundleWriter::Create(prefix));
  const TensorShape full({10, 6});
  CKFLOW_ASSERT_OK(writer->AddSlice("w", full, *ParseTensorSlice("0,4:-"), Grid(4, 6)));
  CKFLOW_ASSERT_OK(writer->AddSlice("w", full, *ParseTensorSlice("4,6:-"), Grid(6, 6, 4)));
  CKFLOW_ASSERT_OK(writer->Finish());
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string listing, testing::CheckBundle(prefix));
  EXPECT_NE(listing.find("w float32[10,6] in 2 slices: 0,4:- 4,6:-\n"), std::string::npos)
      << listing;
  // A whole dimension: an empty extent in the entry's TensorSliceProto, and
  // length -1 in the slice's key.
  CKFLOW_ASSERT_OK_AND_ASSIGN(
      auto table, internal::ReadTable("index", testing::ReadFileOrDie(IndexFilename(prefix))));
  const std::map<std::string, std::string> by_key(table.begin(), table.end());
  tensorflow::BundleEntryProto entry;
  ASSERT_TRUE(entry.ParseFromString(by_key.at("w")));
  ASSERT_EQ(entry.slices_size(), 2);
  EXPECT_EQ(entry.slices(0).extent(0).length(), 4);
  EXPECT_EQ(entry.slices(0).extent(1).ByteSizeLong(), 0u);
  EXPECT_TRUE(by_key.count(EncodeTensorNameSlice("w", *ParseTensorSlice("4,6:-"))));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix));
  ExpectSameBits(reader->Lookup("w").value(), Grid(10, 6));
}

TEST(SlicedBundle, StringTensorsReadInSlices) {
  const std::string prefix = testing::NewTempDir("strings") + "/ckpt";
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleWriter> writer, BundleWriter::Create(prefix));
  const TensorShape full({2, 3});
  CKFLOW_ASSERT_OK(
      writer->AddSlice("s", full, *ParseTensorSlice("-:0,1"),
                       Tensor::FromVector<std::string>({"a", "d"}, TensorShape({2, 1}))));
  CKFLOW_ASSERT_OK(
      writer->AddSlice("s", full, *ParseTensorSlice("-:1,2"),
                       Tensor::FromVector<std::string>({"b", "c", "e", std::string("\0f", 2)},
                                                       TensorShape({2, 2}))));
  CKFLOW_ASSERT_OK(writer->Finish());
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix));
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor s, reader->Lookup("s"));
  std::vector<std::string> got(s.flat<std::string>().begin(), s.flat<std::string>().end());
  EXPECT_EQ(got, (std::vector<std::string>{"a", "b", "c", "d", "e", std::string("\0f", 2)}));
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor row, reader->LookupSlice("s", *ParseTensorSlice("1,1:-")));
  EXPECT_EQ(row.flat<std::string>()[2], std::string("\0f", 2));
}

TEST(SlicedBundle, WriterRefusesSlicesThatDisagree) {
  const std::string prefix = testing::NewTempDir("refuse") + "/ckpt";
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleWriter> writer, BundleWriter::Create(prefix));
  const TensorShape full({10, 6});
  EXPECT_THAT(writer->AddSlice("w", full, *ParseTensorSlice("0,4:-"), Grid(3, 6)),
              StatusIs(StatusCode::kInvalidArgument, "[4,6]"));
  EXPECT_THAT(writer->AddSlice("w", full, *ParseTensorSlice("8,4:-"), Grid(4, 6)),
              StatusIs(StatusCode::kInvalidArgument, "does not fit"));
  CKFLOW_ASSERT_OK(writer->AddSlice("w", full, *ParseTensorSlice("0,4:-"), Grid(4, 6)));
  EXPECT_THAT(writer->AddSlice("w", TensorShape({11, 6}), *ParseTensorSlice("4,4:-"), Grid(4, 6)),
              StatusIs(StatusCode::kInvalidArgument, "'w'"));
  EXPECT_THAT(writer->AddSlice("w", full, *ParseTensorSlice("0,4:-"), Grid(4, 6)),
              StatusIs(StatusCode::kInvalidArgument, "added twice"));
  EXPECT_THAT(writer->Add("w", Grid(10, 6)), StatusIs(StatusCode::kInvalidArgument, "added twice"));
  CKFLOW_ASSERT_OK(writer->Add("plain", Grid(10, 6)));
  EXPECT_THAT(writer->AddSlice("plain", full, *ParseTensorSlice("0,4:-"), Grid(4, 6)),
              StatusIs(StatusCode::kInvalidArgument, "unsliced"));
}

// A valid 3-slice bundle whose index is then rewritten by `corrupt`.
class CorruptSlicesTest : public ::testing::Test {
 protected:
  using Entries = std::vector<std::pair<std::string, tensorflow::BundleEntryProto>>;
  void SetUp() override {
    prefix_ = testing::NewTempDir("corrupt_slices") + "/ckpt";
    CKFLOW_ASSERT_OK(WriteSliced(prefix_, 3, 0));
  }
  void Rewrite(const std::function<void(Entries&)>& corrupt) {
    StatusOr<internal::BundleIndex> index =
        internal::ReadBundleIndex(FileSystem::Default(), prefix_);
    ASSERT_TRUE(index.ok()) << index.status();
    corrupt(index->entries);
    std::sort(index->entries.begin(), index->entries.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    StatusOr<std::string> bytes = internal::BuildBundleIndex(index->header, index->entries);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    testing::WriteFileOrDie(IndexFilename(prefix_), *bytes);
  }
  static tensorflow::BundleEntryProto& Find(Entries& entries, const std::string& key) {
    for (auto& [k, e] : entries) {
      if (k == key) return e;
    }
    ADD_FAILURE() << "no key";
    return entries[0].second;
  }
  // Reading "w" whole, into a buffer and as a box, fails with `code` naming it.
  void ExpectReadsFail(StatusCode code, const std::string& what) {
    CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix_));
    EXPECT_THAT(reader->Lookup("w").status(), StatusIs(code, what));
    EXPECT_THAT(reader->Lookup("w").status(), StatusIs(code, "'w'"));
    Tensor into(DT_FLOAT, TensorShape({10, 6}));
    EXPECT_THAT(reader->ReadInto("w", &into), StatusIs(code, what));
    EXPECT_THAT(reader->LookupSlice("w", *ParseTensorSlice("2,5:-")).status(),
                StatusIs(code, what));
    EXPECT_EQ(reader->Lookup("b")->scalar<float>(), 5.0f);  // the rest still reads
  }
  std::string prefix_;
};

TEST_F(CorruptSlicesTest, SliceOutOfRangeIsDataLossAtOpen) {
  Rewrite([](Entries& e) { Find(e, "w").mutable_slices(0)->mutable_extent(0)->set_length(100); });
  EXPECT_THAT(BundleReader::Open(prefix_).status(), StatusIs(StatusCode::kDataLoss, "'w'"));
  EXPECT_THAT(BundleReader::Open(prefix_).status(),
              StatusIs(StatusCode::kDataLoss, "does not fit"));
}

TEST_F(CorruptSlicesTest, SliceOfTheWrongRankIsDataLossAtOpen) {
  Rewrite([](Entries& e) { Find(e, "w").mutable_slices(1)->add_extent(); });
  EXPECT_THAT(BundleReader::Open(prefix_).status(), StatusIs(StatusCode::kDataLoss, "'w'"));
}

TEST_F(CorruptSlicesTest, OverlappingSlicesAreDataLoss) {
  Rewrite([](Entries& e) {
    auto& w = Find(e, "w");
    *w.mutable_slices(1) = w.slices(0);
  });
  ExpectReadsFail(StatusCode::kDataLoss, "overlap");
}

TEST_F(CorruptSlicesTest, SlicesNotCoveringTheTensorAreDataLoss) {
  Rewrite([](Entries& e) { Find(e, "w").mutable_slices()->RemoveLast(); });
  ExpectReadsFail(StatusCode::kDataLoss, "fewer elements");
}

TEST_F(CorruptSlicesTest, MissingSliceKeyIsDataLoss) {
  const std::string key = EncodeTensorNameSlice("w", *ParseTensorSlice("4,3:0,6"));
  Rewrite([&](Entries& e) {
    e.erase(std::find_if(e.begin(), e.end(), [&](const auto& kv) { return kv.first == key; }));
  });
  ExpectReadsFail(StatusCode::kDataLoss, "slice 4,3:0,6 is missing");
}

TEST_F(CorruptSlicesTest, SliceOfAnotherDtypeIsDataLoss) {
  const std::string key = EncodeTensorNameSlice("w", *ParseTensorSlice("7,3:0,6"));
  Rewrite([&](Entries& e) { Find(e, key).set_dtype(tensorflow::DT_INT32); });
  ExpectReadsFail(StatusCode::kDataLoss, "is int32");
}

TEST_F(CorruptSlicesTest, SliceStoredInAnotherShapeIsDataLoss) {
  const std::string key = EncodeTensorNameSlice("w", *ParseTensorSlice("7,3:0,6"));
  Rewrite([&](Entries& e) {
    auto* shape = Find(e, key).mutable_shape();
    shape->mutable_dim(0)->set_size(2);
    shape->mutable_dim(1)->set_size(9);
  });
  ExpectReadsFail(StatusCode::kDataLoss, "stored as [2,9]");
}

// A full shape of 2^40 x 6 floats "stored" in the three small slices: found
// short before anything of that size is allocated.
TEST_F(CorruptSlicesTest, HugeFullShapeIsDataLossWithoutAllocating) {
  Rewrite(
      [](Entries& e) { Find(e, "w").mutable_shape()->mutable_dim(0)->set_size(int64_t{1} << 40); });
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix_));
  EXPECT_THAT(reader->Lookup("w").status(), StatusIs(StatusCode::kDataLoss, "fewer elements"));
  EXPECT_THAT(reader->LookupSlice("w", *ParseTensorSlice("0,1099511627000:-")).status(),
              StatusIs(StatusCode::kDataLoss, "'w'"));
}

TEST_F(CorruptSlicesTest, BoxOutsideTheTensorIsInvalidArgument) {
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix_));
  EXPECT_THAT(reader->LookupSlice("w", *ParseTensorSlice("8,4:-")).status(),
              StatusIs(StatusCode::kInvalidArgument, "'w'"));
  Tensor wrong(DT_FLOAT, TensorShape({3, 6}));
  EXPECT_THAT(reader->ReadSliceInto("w", *ParseTensorSlice("0,4:-"), &wrong),
              StatusIs(StatusCode::kInvalidArgument, "slice 0,4:-"));
  EXPECT_THAT(reader->LookupSlice("nope", *ParseTensorSlice("0,4:-")).status(),
              StatusIs(StatusCode::kNotFound, "'nope'"));
}

}  // namespace
}  // namespace ckflow
