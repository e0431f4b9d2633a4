// ReadIdx: every IDX type read into its dtype and dims, plain and gzip'd
// (several members too), through the FileSystem it is given; every damage
// (truncation anywhere, bad magic, unknown type, trailing bytes, a corrupt
// or truncated gzip stream, dims that claim more than the file holds or
// overflow) is DataLoss naming the file, never a crash or a huge allocation
// (the suite runs under ASan, which aborts on one).

#include "data/idx.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "tests/test_util.h"

namespace ckflow {
namespace {

using ::ckflow::testing::StatusIs;

// An IDX file's bytes: magic, big-endian dims, then `payload` as given.
std::string IdxBytes(uint8_t type, const std::vector<uint32_t>& dims, const std::string& payload) {
  std::string out = {0, 0, static_cast<char>(type), static_cast<char>(dims.size())};
  for (uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>((d >> shift) & 0xff);
  }
  return out + payload;
}

// `values` as big-endian bytes of their width.
template <typename T>
std::string BigEndian(const std::vector<T>& values) {
  std::string out;
  for (const T& v : values) {
    char bytes[sizeof(T)];
    std::memcpy(bytes, &v, sizeof(T));
    for (size_t i = sizeof(T); i > 0; --i) out += bytes[i - 1];
  }
  return out;
}

// `data` as one gzip member.
std::string Gzip(const std::string& data) {
  z_stream s{};
  EXPECT_EQ(deflateInit2(&s, Z_BEST_SPEED, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY),
            Z_OK);
  std::string out(deflateBound(&s, data.size()), '\0');
  s.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  s.avail_in = static_cast<uInt>(data.size());
  s.next_out = reinterpret_cast<Bytef*>(out.data());
  s.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&s, Z_FINISH), Z_STREAM_END);
  out.resize(s.total_out);
  deflateEnd(&s);
  return out;
}

class IdxTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& bytes) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }

  const std::string dir_ = testing::NewTempDir("idx");
};

TEST_F(IdxTest, ReadsUint8ImagesIntoTheirDims) {
  std::string pixels;
  for (int i = 0; i < 2 * 3 * 4; ++i) pixels += static_cast<char>(i * 10);
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor t,
                              ReadIdx(Write("images", IdxBytes(0x08, {2, 3, 4}, pixels))));
  EXPECT_EQ(t.dtype(), DT_UINT8);
  EXPECT_EQ(t.shape(), TensorShape({2, 3, 4}));
  for (int i = 0; i < 24; ++i) EXPECT_EQ(t.flat<uint8_t>()[i], i * 10) << i;
}

TEST_F(IdxTest, ReadsEveryTypeBigEndianIntoItsDtype) {
  const Tensor int8 = Tensor::FromVector<int8_t>({-128, -1, 0, 127});
  const Tensor int16 = Tensor::FromVector<int16_t>({-32768, -2, 258, 32767});
  const Tensor int32 = Tensor::FromVector<int32_t>({INT32_MIN, -3, 0x01020304, INT32_MAX});
  const Tensor float32 = Tensor::FromVector<float>({-1.5f, 0.0f, 3.25e-20f, 1e30f});
  const Tensor float64 = Tensor::FromVector<double>({-1.5, 1e-300, 2.0 / 3.0, 1e300});
  const struct {
    uint8_t type;
    Tensor want;
    std::string payload;
  } cases[] = {
      {0x09, int8, BigEndian(std::vector<int8_t>{-128, -1, 0, 127})},
      {0x0B, int16, BigEndian(std::vector<int16_t>{-32768, -2, 258, 32767})},
      {0x0C, int32, BigEndian(std::vector<int32_t>{INT32_MIN, -3, 0x01020304, INT32_MAX})},
      {0x0D, float32, BigEndian(std::vector<float>{-1.5f, 0.0f, 3.25e-20f, 1e30f})},
      {0x0E, float64, BigEndian(std::vector<double>{-1.5, 1e-300, 2.0 / 3.0, 1e300})},
  };
  for (const auto& c : cases) {
    const std::string path = Write("typed", IdxBytes(c.type, {4}, c.payload));
    CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor t, ReadIdx(path));
    EXPECT_TRUE(testing::SameTensor(t, c.want))
        << t.DebugString() << " vs " << c.want.DebugString();
  }
}

TEST_F(IdxTest, ReadsGzipFilesWhateverTheirName) {
  std::string labels;
  for (int i = 0; i < 5000; ++i) labels += static_cast<char>(i % 10);
  const std::string idx = IdxBytes(0x08, {5000}, labels);
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor plain, ReadIdx(Write("labels", idx)));
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor gzipped, ReadIdx(Write("labels.idx", Gzip(idx))));
  EXPECT_TRUE(testing::SameTensor(plain, gzipped));
  EXPECT_EQ(gzipped.shape(), TensorShape({5000}));
}

TEST_F(IdxTest, ReadsConcatenatedGzipMembersAsOneStream) {
  const std::string idx = IdxBytes(0x08, {2, 3}, "abcdef");
  const std::string path = Write("two_members.gz", Gzip(idx.substr(0, 7)) + Gzip(idx.substr(7)));
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor t, ReadIdx(path));
  EXPECT_EQ(t.shape(), TensorShape({2, 3}));
  EXPECT_EQ(std::string(static_cast<const char*>(t.raw_data()), 6), "abcdef");
}

TEST_F(IdxTest, ReadsAScalarAndEmptyDims) {
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor scalar, ReadIdx(Write("scalar", IdxBytes(0x08, {}, "x"))));
  EXPECT_EQ(scalar.shape(), TensorShape());
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor empty, ReadIdx(Write("empty", IdxBytes(0x0D, {0, 28}, ""))));
  EXPECT_EQ(empty.shape(), TensorShape({0, 28}));
}

TEST_F(IdxTest, DamagedFilesAreDataLossNamingTheFileAndTheFault) {
  const std::string good = IdxBytes(0x08, {2, 3}, "abcdef");
  const struct {
    const char* name;
    std::string bytes;
    const char* message;
  } cases[] = {
      {"empty", "", "truncated: the magic needs 4 bytes, got 0"},
      {"short_magic", good.substr(0, 3), "truncated: the magic needs 4 bytes, got 3"},
      {"short_dims", good.substr(0, 9), "truncated: the dims needs 8 bytes, got 5"},
      {"short_data", good.substr(0, good.size() - 1),
       "truncated: dims [2,3] need 6 bytes of data, the file holds 5"},
      {"trailing", good + "g", "trailing bytes: dims [2,3] need 6 bytes of data, the file holds 7"},
      {"bad_magic", "\x01" + good.substr(1), "bad magic 0x01000802"},
      {"unknown_type", IdxBytes(0x0A, {2, 3}, "abcdef"), "unknown type code 0x0a"},
      {"float_mislabeled", IdxBytes(0x0D, {2, 3}, "abcdef"),
       "truncated: dims [2,3] need 24 bytes of data, the file holds 6"},
      {"overflow", IdxBytes(0x0E, {0xffffffff, 0xffffffff, 0xffffffff}, ""),
       "the dims' byte count overflows at dimension 1"},
      {"huge_claim", IdxBytes(0x08, {65536, 65536, 1024}, "abc"),
       "truncated: dims [65536,65536,1024] need 4398046511104 bytes of data, the file holds 3"},
  };
  for (const auto& c : cases) {
    const std::string path = Write(c.name, c.bytes);
    EXPECT_THAT(ReadIdx(path), StatusIs(StatusCode::kDataLoss, path + ": IDX: " + c.message))
        << c.name;
  }
}

TEST_F(IdxTest, DamagedGzipFilesAreDataLoss) {
  std::string pixels;
  for (int i = 0; i < 20000; ++i) pixels += static_cast<char>((i * 7919) % 251);
  const std::string idx = IdxBytes(0x08, {20000}, pixels);
  const std::string gz = Gzip(idx);
  std::string flipped = gz;
  flipped[gz.size() / 2] ^= 0x55;
  std::string bad_crc = gz;
  bad_crc[gz.size() - 8] ^= 1;  // the trailer's CRC-32
  const struct {
    const char* name;
    std::string bytes;
    const char* message;
  } cases[] = {
      {"cut.gz", gz.substr(0, gz.size() / 2), "the gzip stream ends early"},
      {"cut_trailer.gz", gz.substr(0, gz.size() - 3), "the gzip stream ends early"},
      {"flipped.gz", flipped, "corrupt gzip data"},
      {"bad_crc.gz", bad_crc, "corrupt gzip data"},
      {"garbage_after.gz", gz + "garbage", "corrupt gzip data"},
      {"short_data.gz", Gzip(idx.substr(0, idx.size() - 1)),
       "truncated: dims [20000] need 20000 bytes of data, the file holds 19999"},
      {"trailing.gz", Gzip(idx + "x"),
       "trailing bytes: dims [20000] need 20000 bytes of data, the file holds more"},
      // Claims 4 TiB, holds 3 bytes: read only as far as it inflates.
      {"huge_claim.gz", Gzip(IdxBytes(0x08, {65536, 65536, 1024}, "abc")),
       "truncated: dims [65536,65536,1024] need 4398046511104 bytes of data, the file holds 3"},
  };
  for (const auto& c : cases) {
    const std::string path = Write(c.name, c.bytes);
    EXPECT_THAT(ReadIdx(path), StatusIs(StatusCode::kDataLoss, path + ": IDX: ")) << c.name;
    EXPECT_THAT(ReadIdx(path), StatusIs(StatusCode::kDataLoss, c.message)) << c.name;
  }
}

TEST_F(IdxTest, AMissingFileIsNotFound) {
  EXPECT_THAT(ReadIdx(dir_ + "/missing"), StatusIs(StatusCode::kNotFound, dir_ + "/missing"));
}

// Opens every file under another directory: proves every read goes through
// the FileSystem given.
class RedirectingFileSystem : public FileSystemWrapper {
 public:
  RedirectingFileSystem(std::string from, std::string to)
      : FileSystemWrapper(FileSystem::Default()), from_(std::move(from)), to_(std::move(to)) {}

  StatusOr<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(
      const std::string& path) override {
    opened.push_back(path);
    return target()->NewRandomAccessFile(to_ + path.substr(from_.size()));
  }

  std::vector<std::string> opened;

 private:
  const std::string from_, to_;
};

TEST_F(IdxTest, ReadsThroughTheFileSystemGiven) {
  Write("labels", IdxBytes(0x08, {3}, "abc"));
  RedirectingFileSystem fs("/nowhere", dir_);
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor t, ReadIdx("/nowhere/labels", &fs));
  EXPECT_EQ(t.shape(), TensorShape({3}));
  EXPECT_EQ(fs.opened, std::vector<std::string>{"/nowhere/labels"});
}

}  // namespace
}  // namespace ckflow
