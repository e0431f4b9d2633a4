// DecodePlainEntry against protobuf: wherever the fast decoder accepts
// bytes, protobuf must parse them to the same fields; the entries writers
// produce must take the fast path.

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>

#include "bundle/bundle_index_internal.h"
#include "bundle/protos/tensor_bundle.pb.h"

namespace ckflow::internal {
namespace {

// `padding` > 0 adds that many bytes of zero bits: a longer encoding of the
// same value, which protobuf reads (up to ten bytes in all).
void PutVarint(std::string* out, uint64_t v, int padding = 0) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  if (padding == 0) {
    out->push_back(static_cast<char>(v));
    return;
  }
  out->push_back(static_cast<char>(v | 0x80));
  for (int i = 1; i < padding; ++i) out->push_back(static_cast<char>(0x80));
  out->push_back(0);
}

void PutTag(std::string* out, int field, int wire_type) {
  PutVarint(out, static_cast<uint64_t>(field) << 3 | static_cast<uint64_t>(wire_type));
}

void PutBytes(std::string* out, int field, const std::string& bytes) {
  PutTag(out, field, 2);
  PutVarint(out, bytes.size());
  out->append(bytes);
}

// Random but mostly well-formed entries: every field kind DecodePlainEntry
// handles or refuses, then sometimes bytes cut or flipped.
class EntryGenerator {
 public:
  explicit EntryGenerator(uint32_t seed) : rng_(seed) {}

  std::string Next() {
    std::string out;
    const int fields = Pick(0, 8);
    for (int f = 0; f < fields; ++f) AddField(&out);
    if (!out.empty() && Pick(0, 9) == 0) out.resize(Pick(0, static_cast<int>(out.size()) - 1));
    if (!out.empty() && Pick(0, 9) == 0) {
      out[Pick(0, static_cast<int>(out.size()) - 1)] ^= static_cast<char>(1 << Pick(0, 7));
    }
    return out;
  }

 private:
  int Pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  uint64_t Value() {
    switch (Pick(0, 5)) {
      case 0:
        return Pick(0, 3);
      case 1:
        return rng_() & 0xffff;
      case 2:
        return static_cast<uint64_t>(-static_cast<int64_t>(Pick(1, 1000)));  // ten bytes
      case 3:
        return uint64_t{1} << Pick(0, 63);
      case 4:
        return static_cast<uint64_t>(rng_()) << 32 | rng_();
      default:
        return Pick(0, 200);
    }
  }
  void PutValue(std::string* out) { PutVarint(out, Value(), Pick(0, 7) == 0 ? Pick(1, 2) : 0); }

  std::string Dim() {
    std::string dim;
    const int fields = Pick(0, 3);
    for (int i = 0; i < fields; ++i) {
      if (Pick(0, 7) == 0) {
        PutBytes(&dim, 2, Pick(0, 1) ? "x" : std::string("\xff", 1));  // a name, or bad UTF-8
      } else {
        PutTag(&dim, 1, 0);
        PutValue(&dim);
      }
    }
    return dim;
  }

  std::string Shape() {
    std::string shape;
    const int dims = Pick(0, 10);
    for (int i = 0; i < dims; ++i) PutBytes(&shape, 2, Dim());
    if (Pick(0, 4) == 0) {
      PutTag(&shape, 3, 0);
      PutVarint(&shape, Pick(0, 1));
    }
    if (Pick(0, 19) == 0) {
      PutTag(&shape, 5, 0);  // unknown
      PutValue(&shape);
    }
    return shape;
  }

  void AddField(std::string* out) {
    switch (Pick(0, 11)) {
      case 0:
      case 1:
        PutTag(out, 1, 0);
        PutValue(out);
        break;
      case 2:
      case 3:
        PutBytes(out, 2, Shape());
        break;
      case 4:
        PutTag(out, 3, 0);
        PutValue(out);
        break;
      case 5:
        PutTag(out, 4, 0);
        PutValue(out);
        break;
      case 6:
        PutTag(out, 5, 0);
        PutValue(out);
        break;
      case 7: {
        PutTag(out, 6, 5);
        const uint32_t crc = rng_();
        out->append(reinterpret_cast<const char*>(&crc), 4);
        break;
      }
      case 8: {  // a slice: one extent {start: 1}
        std::string extent;
        PutTag(&extent, 1, 0);
        PutVarint(&extent, 1);
        std::string slice;
        PutBytes(&slice, 1, extent);
        PutBytes(out, 7, slice);
        break;
      }
      case 9:  // a known field with another wire type
        PutTag(out, Pick(1, 6), 1);
        out->append(8, '\0');
        break;
      case 10:  // an unknown field
        PutTag(out, Pick(8, 100), 0);
        PutValue(out);
        break;
      default:
        out->push_back(static_cast<char>(rng_()));
        break;
    }
  }

  std::mt19937 rng_;
};

void ExpectSameAsProtobuf(const std::string& bytes, const PlainEntry& plain) {
  tensorflow::BundleEntryProto proto;
  ASSERT_TRUE(proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
      << "DecodePlainEntry accepted bytes protobuf refuses";
  EXPECT_EQ(plain.dtype, static_cast<int32_t>(proto.dtype()));
  EXPECT_FALSE(proto.shape().unknown_rank());
  ASSERT_EQ(plain.rank, proto.shape().dim_size());
  for (int i = 0; i < plain.rank; ++i) {
    EXPECT_EQ(plain.dims[i], proto.shape().dim(i).size()) << "dim " << i;
    EXPECT_TRUE(proto.shape().dim(i).name().empty());
  }
  EXPECT_EQ(plain.shard_id, proto.shard_id());
  EXPECT_EQ(plain.offset, proto.offset());
  EXPECT_EQ(plain.size, proto.size());
  EXPECT_EQ(plain.crc32c, proto.crc32c());
  EXPECT_EQ(proto.slices_size(), 0);
}

TEST(PlainEntryTest, AgreesWithProtobufWhereverItDecodes) {
  EntryGenerator generator(20261205);
  int decoded = 0, left = 0;
  for (int i = 0; i < 200000; ++i) {
    const std::string bytes = generator.Next();
    PlainEntry plain;
    if (!DecodePlainEntry(bytes, &plain)) {
      ++left;
      continue;
    }
    ++decoded;
    ExpectSameAsProtobuf(bytes, plain);
    if (testing::Test::HasFailure()) {
      ADD_FAILURE() << "case " << i << ", " << bytes.size() << " bytes";
      return;
    }
  }
  // Both paths are exercised in quantity.
  EXPECT_GT(decoded, 20000);
  EXPECT_GT(left, 20000);
}

TEST(PlainEntryTest, DecodesWhatWritersWrite) {
  tensorflow::BundleEntryProto proto;
  proto.set_dtype(tensorflow::DT_DOUBLE);
  for (int64_t d : {3, 0, 1 << 20, 7}) proto.mutable_shape()->add_dim()->set_size(d);
  proto.set_shard_id(2);
  proto.set_offset(int64_t{5} << 33);
  proto.set_size(123456789);
  proto.set_crc32c(0xdeadbeef);
  PlainEntry plain;
  ASSERT_TRUE(DecodePlainEntry(proto.SerializeAsString(), &plain));
  ExpectSameAsProtobuf(proto.SerializeAsString(), plain);

  // A scalar: no shape field at all, every default.
  ASSERT_TRUE(DecodePlainEntry("", &plain));
  EXPECT_EQ(plain.rank, 0);
  EXPECT_EQ(plain.dtype, 0);
}

TEST(PlainEntryTest, LeavesTheRestToProtobuf) {
  PlainEntry plain;
  tensorflow::BundleEntryProto sliced;
  sliced.add_slices()->add_extent()->set_start(1);
  EXPECT_FALSE(DecodePlainEntry(sliced.SerializeAsString(), &plain));

  tensorflow::BundleEntryProto named;
  named.mutable_shape()->add_dim()->set_name("batch");
  EXPECT_FALSE(DecodePlainEntry(named.SerializeAsString(), &plain));

  tensorflow::BundleEntryProto unknown_rank;
  unknown_rank.mutable_shape()->set_unknown_rank(true);
  EXPECT_FALSE(DecodePlainEntry(unknown_rank.SerializeAsString(), &plain));

  tensorflow::BundleEntryProto high_rank;
  for (int i = 0; i <= PlainEntry::kMaxRank; ++i) high_rank.mutable_shape()->add_dim()->set_size(1);
  EXPECT_FALSE(DecodePlainEntry(high_rank.SerializeAsString(), &plain));

  // Two shape fields merge in protobuf (their dimensions concatenate).
  tensorflow::BundleEntryProto one;
  one.mutable_shape()->add_dim()->set_size(2);
  EXPECT_FALSE(DecodePlainEntry(one.SerializeAsString() + one.SerializeAsString(), &plain));

  // Truncated: the last byte of a crc32c cut off.
  tensorflow::BundleEntryProto crc;
  crc.set_crc32c(1);
  const std::string bytes = crc.SerializeAsString();
  EXPECT_FALSE(DecodePlainEntry(bytes.substr(0, bytes.size() - 1), &plain));
}

}  // namespace
}  // namespace ckflow::internal
