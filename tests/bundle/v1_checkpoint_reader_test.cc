// V1CheckpointReader: TensorFlow 2.21's own V1 file read tensor by tensor
// and box by box, and damaged files (truncated, bits flipped, entries
// crafted wrong behind valid checksums) refused with DataLoss naming the
// file and the key, never a crash.
#include "bundle/v1_checkpoint_reader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "bundle/bundle_index_internal.h"
#include "bundle/protos/saved_tensor_slice.pb.h"
#include "bundle/tensor_slice.h"
#include "tests/bundle/bundle_test_util.h"
#include "tests/bundle/testdata_util.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

using testing::StatusIs;

class V1CheckpointReaderTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& bytes) {
    const std::string path = dir_ + "/" + name;
    testing::WriteFileOrDie(path, bytes);
    return path;
  }
  std::string dir_ = testing::NewTempDir("v1");
};

template <typename T>
std::vector<T> Values(const Tensor& t) {
  std::vector<T> out(t.NumElements());
  std::memcpy(out.data(), t.raw_data(), out.size() * sizeof(T));
  return out;
}

TEST_F(V1CheckpointReaderTest, ReadsEveryTensorOfTensorFlowsFile) {
  const std::string path = Write("model.ckpt", testing::TfV1CheckpointBytes());
  EXPECT_TRUE(IsV1Checkpoint(path));
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto reader, V1CheckpointReader::Open(path));
  std::vector<std::string> names;
  for (const auto& t : reader->tensors()) names.push_back(t.name);
  EXPECT_EQ(names, (std::vector<std::string>{"dense/kernel", "emb", "f64", "flag", "h", "i32",
                                             "step", "words"}));
  const auto* emb = reader->Find("emb");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->shape, TensorShape({5, 2}));
  EXPECT_EQ(emb->slices.size(), 2u);

  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor kernel, reader->Lookup("dense/kernel"));
  EXPECT_EQ(kernel.shape(), TensorShape({2, 3}));
  EXPECT_EQ(Values<float>(kernel), (std::vector<float>{-1, -0.5, 0, 0.5, 1, 1.5}));
  EXPECT_EQ(reader->Lookup("step").value().scalar<int64_t>(), -3);
  EXPECT_EQ(Values<int32_t>(reader->Lookup("i32").value()), (std::vector<int32_t>{1, -2, 3}));
  EXPECT_EQ(Values<double>(reader->Lookup("f64").value()), (std::vector<double>{1.5, -2.25}));
  EXPECT_EQ(Values<uint8_t>(reader->Lookup("flag").value()), (std::vector<uint8_t>{1, 0, 1}));
  EXPECT_EQ(Values<uint16_t>(reader->Lookup("h").value()),
            (std::vector<uint16_t>{0x3e00, 0xc000}));  // float16 1.5, -2
  Tensor words = reader->Lookup("words").value();
  EXPECT_EQ(
      std::vector<std::string>(words.flat<std::string>().begin(), words.flat<std::string>().end()),
      (std::vector<std::string>{"ab", "", std::string("\0z", 2)}));

  // The partitioned variable whole, and a box across its two slices.
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor whole, reader->Lookup("emb"));
  std::vector<float> expected;
  for (int i = 0; i < 10; ++i) expected.push_back(i + 0.25f);
  EXPECT_EQ(Values<float>(whole), expected);
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor box,
                              reader->LookupSlice("emb", ParseTensorSlice("2,2:1,1").value()));
  EXPECT_EQ(Values<float>(box), (std::vector<float>{5.25f, 7.25f}));

  EXPECT_THAT(reader->Lookup("missing"), StatusIs(StatusCode::kNotFound, "no tensor 'missing'"));
  EXPECT_THAT(reader->LookupSlice("emb", ParseTensorSlice("4,2:-").value()),
              StatusIs(StatusCode::kInvalidArgument, "tensor 'emb'"));
}

TEST_F(V1CheckpointReaderTest, TellsAV1FileFromAV2PrefixOrADirectory) {
  EXPECT_FALSE(IsV1Checkpoint(dir_));
  EXPECT_FALSE(IsV1Checkpoint(dir_ + "/none"));
  Write("v2.index", "x");
  Write("v2", "x");
  EXPECT_FALSE(IsV1Checkpoint(dir_ + "/v2"));  // the index wins, as in TensorFlow
  EXPECT_THAT(V1CheckpointReader::Open(dir_ + "/none"), StatusIs(StatusCode::kNotFound, "none"));
  EXPECT_THAT(V1CheckpointReader::Open(Write("text", "not a table")),
              StatusIs(StatusCode::kDataLoss, "text"));
}

// The file cut at every length and with every bit flipped: each is an
// input error or reads (a flip in the footer's padding changes nothing),
// and nothing crashes or asks for memory the file cannot fill.
TEST_F(V1CheckpointReaderTest, EveryTruncationAndBitFlipIsAnInputErrorNotACrash) {
  const std::string good = testing::TfV1CheckpointBytes();
  const auto check = [&](const std::string& bytes, const std::string& what) {
    const std::string path = Write("damaged", bytes);
    StatusOr<std::unique_ptr<V1CheckpointReader>> reader = V1CheckpointReader::Open(path);
    Status s = reader.status();
    if (reader.ok()) {
      for (const auto& t : (*reader)->tensors()) {
        s = (*reader)->Lookup(t.name).status();
        if (!s.ok()) break;
      }
    }
    if (!s.ok()) {
      EXPECT_TRUE(s.code() == StatusCode::kDataLoss || s.code() == StatusCode::kInvalidArgument)
          << what << ": " << s;
      EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr(path)) << what;
    }
    return s.ok();
  };
  for (size_t n = 0; n < good.size(); ++n) {
    EXPECT_FALSE(check(good.substr(0, n), "cut at " + std::to_string(n)));
  }
  int readable = 0;
  // One bit of each byte, a different one from byte to byte.
  for (size_t bit = 0; bit < good.size() * 8; bit += 9) {
    std::string bytes = good;
    bytes[bit / 8] = static_cast<char>(bytes[bit / 8] ^ (1 << (bit % 8)));
    readable += check(bytes, "bit " + std::to_string(bit));
  }
  EXPECT_LT(readable, 40) << "flips outside the checksummed blocks only";
}

// A V1 file written here entry by entry, as TensorFlow's slice writer lays
// it out, to damage one entry behind valid block checksums.
class CraftedV1Test : public V1CheckpointReaderTest {
 protected:
  struct Slice {
    std::string slice;  // slice spec text
    std::vector<float> values;
  };
  // A float32 tensor "w" of `shape` stored as `slices`; `listed` (default:
  // the same) are the slices the metadata names.
  std::string Build(const std::vector<int64_t>& shape, const std::vector<Slice>& slices,
                    std::vector<std::string> listed = {}) {
    if (listed.empty()) {
      for (const Slice& s : slices) listed.push_back(s.slice);
    }
    const auto to_proto = [](const std::string& spec, tensorflow::TensorSliceProto* proto) {
      const TensorSlice slice = ParseTensorSlice(spec).value();
      for (const auto& e : slice.extents) {
        auto* extent = proto->add_extent();
        if (e.length != TensorSlice::kFullExtent) {
          extent->set_start(e.start);
          extent->set_length(e.length);
        }
      }
    };
    tensorflow::SavedTensorSlices meta;
    tensorflow::SavedSliceMeta* m = meta.mutable_meta()->add_tensor();
    m->set_name("w");
    for (int64_t d : shape) m->mutable_shape()->add_dim()->set_size(d);
    m->set_type(tensorflow::DT_FLOAT);
    for (const std::string& spec : listed) to_proto(spec, m->add_slice());
    std::vector<internal::KeyValue> entries = {{"", meta.SerializeAsString()}};
    for (const Slice& s : slices) {
      tensorflow::SavedTensorSlices value;
      value.mutable_data()->set_name("w");
      to_proto(s.slice, value.mutable_data()->mutable_slice());
      for (float x : s.values) value.mutable_data()->mutable_data()->add_float_val(x);
      entries.emplace_back(EncodeTensorNameSlice("w", ParseTensorSlice(s.slice).value()),
                           value.SerializeAsString());
    }
    std::sort(entries.begin(), entries.end());
    return Write("crafted", internal::BuildTable(entries).value());
  }
};

TEST_F(CraftedV1Test, SlicesAssembleWhole) {
  const std::string path = Build({2, 2}, {{"0,1:-", {1, 2}}, {"1,1:-", {3, 4}}});
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto reader, V1CheckpointReader::Open(path));
  EXPECT_EQ(Values<float>(reader->Lookup("w").value()), (std::vector<float>{1, 2, 3, 4}));
}

TEST_F(CraftedV1Test, DamagedEntriesAreDataLossNamingTheFileAndTheKey) {
  const std::string path = dir_ + "/crafted";
  // Too few values for the slice's elements.
  Build({2, 2}, {{"0,1:-", {1, 2}}, {"1,1:-", {3}}});
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto short_slice, V1CheckpointReader::Open(path));
  EXPECT_THAT(short_slice->Lookup("w"),
              StatusIs(StatusCode::kDataLoss,
                       path + ": key 'w' slice 1,1:-: holds 1 values for 2 elements"));
  // A listed slice without its entry.
  Build({2, 2}, {{"0,1:-", {1, 2}}}, {"0,1:-", "1,1:-"});
  EXPECT_THAT(V1CheckpointReader::Open(path),
              StatusIs(StatusCode::kDataLoss, path + ": key 'w': slice 1,1:- is missing"));
  // Slices that overlap, or leave a gap.
  Build({3, 2}, {{"0,2:-", {1, 2, 3, 4}}, {"1,2:-", {5, 6, 7, 8}}}, {"0,2:-", "1,2:-"});
  EXPECT_THAT(V1CheckpointReader::Open(path), StatusIs(StatusCode::kDataLoss, "key 'w'"));
  Build({3, 2}, {{"0,2:0,1", {1, 2}}, {"1,2:-", {5, 6, 7, 8}}});  // (1,0) twice, (0,1) never
  EXPECT_THAT(V1CheckpointReader::Open(path),
              StatusIs(StatusCode::kDataLoss, "key 'w': slice 1,2:- overlaps another"));
  Build({3, 2}, {{"0,1:-", {1, 2}}, {"2,1:-", {5, 6}}});
  EXPECT_THAT(V1CheckpointReader::Open(path),
              StatusIs(StatusCode::kDataLoss, "key 'w': slices hold 4 of 6 elements"));
  // A slice outside the tensor.
  Build({2, 2}, {{"0,3:-", {1, 2, 3, 4, 5, 6}}});
  EXPECT_THAT(V1CheckpointReader::Open(path), StatusIs(StatusCode::kDataLoss, "key 'w': slice"));
  // A shape claiming more elements than the file holds bytes.
  Build({1000000, 1000}, {{"-:-", {1}}});
  EXPECT_THAT(V1CheckpointReader::Open(path),
              StatusIs(StatusCode::kDataLoss, "key 'w': slice -:- of 1000000000 elements"));
}

}  // namespace
}  // namespace ckflow
