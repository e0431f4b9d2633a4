#include "data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ckflow {
namespace {

constexpr size_t kChunk = 1 << 20;  // bytes per read of the file, and of inflated data

// The bytes of a file in order: plain, or inflated from gzip.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Up to n bytes into dst; fewer only at the end of the data.
  virtual StatusOr<size_t> Read(char* dst, size_t n) = 0;
  // How many bytes are left, where that is known without reading them.
  virtual std::optional<uint64_t> remaining() const = 0;
};

class PlainSource : public ByteSource {
 public:
  explicit PlainSource(const RandomAccessFile& file) : file_(file) {}

  StatusOr<size_t> Read(char* dst, size_t n) override {
    const size_t take = static_cast<size_t>(std::min<uint64_t>(n, *remaining()));
    CKFLOW_RETURN_IF_ERROR(file_.ReadAt(offset_, take, dst));
    offset_ += take;
    return take;
  }
  std::optional<uint64_t> remaining() const override { return file_.size() - offset_; }

 private:
  const RandomAccessFile& file_;
  uint64_t offset_ = 0;
};

// Inflates the gzip members of a file, one after another.
class GzipSource : public ByteSource {
 public:
  static StatusOr<std::unique_ptr<GzipSource>> Open(const RandomAccessFile& file) {
    auto source = std::unique_ptr<GzipSource>(new GzipSource(file));
    // 16 + MAX_WBITS: a gzip wrapper, whose CRC-32 and length zlib checks.
    if (inflateInit2(&source->stream_, 16 + MAX_WBITS) != Z_OK) {
      return ResourceExhaustedError("zlib: cannot start inflating");
    }
    source->started_ = true;
    return source;
  }
  ~GzipSource() override {
    if (started_) inflateEnd(&stream_);
  }

  StatusOr<size_t> Read(char* dst, size_t n) override {
    size_t done = 0;
    while (done < n && !finished_) {
      if (stream_.avail_in == 0) CKFLOW_RETURN_IF_ERROR(Refill());
      if (member_ended_) {
        // The file ends after a whole member, or another one follows (a
        // garbled one fails its header check below).
        if (stream_.avail_in == 0) {
          finished_ = true;
          break;
        }
        inflateReset(&stream_);
        member_ended_ = false;
      }
      const size_t want = std::min<size_t>(n - done, std::numeric_limits<uInt>::max());
      stream_.next_out = reinterpret_cast<Bytef*>(dst + done);
      stream_.avail_out = static_cast<uInt>(want);
      const int rc = inflate(&stream_, Z_NO_FLUSH);
      done += want - stream_.avail_out;
      if (rc == Z_STREAM_END) {
        member_ended_ = true;
      } else if (rc == Z_BUF_ERROR) {
        // No progress: zlib needs input and the file has none left.
        if (stream_.avail_in == 0 && offset_ == file_.size()) {
          return DataLossError("the gzip stream ends early, after ", offset_, " compressed bytes");
        }
      } else if (rc != Z_OK) {
        return DataLossError("corrupt gzip data after ", offset_ - stream_.avail_in,
                             " compressed bytes: ", stream_.msg ? stream_.msg : zError(rc));
      }
    }
    return done;
  }
  std::optional<uint64_t> remaining() const override { return std::nullopt; }

 private:
  explicit GzipSource(const RandomAccessFile& file) : file_(file), in_(kChunk) {}

  Status Refill() {
    const size_t take = static_cast<size_t>(std::min<uint64_t>(in_.size(), file_.size() - offset_));
    CKFLOW_RETURN_IF_ERROR(file_.ReadAt(offset_, take, in_.data()));
    offset_ += take;
    stream_.next_in = reinterpret_cast<Bytef*>(in_.data());
    stream_.avail_in = static_cast<uInt>(take);
    return OkStatus();
  }

  const RandomAccessFile& file_;
  std::vector<char> in_;
  uint64_t offset_ = 0;  // of the file, read so far
  z_stream stream_{};
  bool started_ = false;
  bool member_ended_ = false;
  bool finished_ = false;
};

struct IdxType {
  uint8_t code;
  DataType dtype;
  size_t width;
};
constexpr std::array<IdxType, 6> kTypes = {{{0x08, DT_UINT8, 1},
                                            {0x09, DT_INT8, 1},
                                            {0x0B, DT_INT16, 2},
                                            {0x0C, DT_INT32, 4},
                                            {0x0D, DT_FLOAT, 4},
                                            {0x0E, DT_DOUBLE, 8}}};

// "1f8b0803" for bytes 1f 8b 08 03.
std::string Hex(const unsigned char* p, size_t n = 4) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    out += kDigits[p[i] >> 4];
    out += kDigits[p[i] & 15];
  }
  return out;
}

uint32_t BigEndian32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

// Reads exactly n bytes, or DataLoss saying what was short.
Status ReadExactly(ByteSource& source, char* dst, size_t n, const char* what) {
  CKFLOW_ASSIGN_OR_RETURN(size_t got, source.Read(dst, n));
  if (got != n) return DataLossError("truncated: ", what, " needs ", n, " bytes, got ", got);
  return OkStatus();
}

// The elements (`bytes` of them) into a new tensor of `dtype` and `shape`.
StatusOr<Tensor> ReadElements(ByteSource& source, DataType dtype, const TensorShape& shape,
                              uint64_t bytes) {
  const std::string dims = shape.ToString();
  if (std::optional<uint64_t> left = source.remaining()) {
    // A plain file: its size says whether the data is all there.
    if (*left != bytes) {
      return DataLossError(*left < bytes ? "truncated" : "trailing bytes", ": dims ", dims,
                           " need ", bytes, " bytes of data, the file holds ", *left);
    }
    CKFLOW_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(dtype, shape));
    CKFLOW_RETURN_IF_ERROR(ReadExactly(source, static_cast<char*>(t.raw_data()), bytes, "data"));
    return t;
  }
  // Compressed: kept only as far as it inflates, and one byte past the
  // dims' count tells trailing data.
  std::string data;
  while (true) {
    const size_t old_size = data.size();
    const uint64_t want = std::min<uint64_t>(kChunk, bytes + 1 - old_size);
    data.resize(old_size + want);
    CKFLOW_ASSIGN_OR_RETURN(size_t got, source.Read(data.data() + old_size, want));
    data.resize(old_size + got);
    if (got < want || data.size() > bytes) break;
  }
  if (data.size() != bytes) {
    return DataLossError(data.size() < bytes ? "truncated" : "trailing bytes", ": dims ", dims,
                         " need ", bytes, " bytes of data, the file holds ",
                         data.size() < bytes ? std::to_string(data.size()) : "more");
  }
  CKFLOW_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(dtype, shape));
  std::memcpy(t.raw_data(), data.data(), bytes);
  return t;
}

// Big-endian elements of `width` bytes to the machine's order.
void ToHostOrder(Tensor& t, size_t width) {
  if (width == 1 || std::endian::native == std::endian::big) return;
  auto* p = static_cast<unsigned char*>(t.raw_data());
  const size_t n = static_cast<size_t>(t.NumElements());
  for (size_t i = 0; i < n; ++i, p += width) std::reverse(p, p + width);
}

StatusOr<Tensor> Read(ByteSource& source) {
  unsigned char magic[4];
  CKFLOW_RETURN_IF_ERROR(ReadExactly(source, reinterpret_cast<char*>(magic), 4, "the magic"));
  if (magic[0] != 0 || magic[1] != 0) {
    return DataLossError("bad magic 0x", Hex(magic), ": an IDX file starts with two zero bytes");
  }
  const auto type = std::find_if(kTypes.begin(), kTypes.end(),
                                 [&](const IdxType& t) { return t.code == magic[2]; });
  if (type == kTypes.end()) {
    return DataLossError("unknown type code 0x", Hex(magic + 2, 1), " in the magic 0x", Hex(magic));
  }
  const int rank = magic[3];
  std::vector<unsigned char> header(4 * static_cast<size_t>(rank));
  CKFLOW_RETURN_IF_ERROR(
      ReadExactly(source, reinterpret_cast<char*>(header.data()), header.size(), "the dims"));
  std::vector<int64_t> dims(rank);
  uint64_t bytes = type->width;
  for (int i = 0; i < rank; ++i) {
    dims[i] = BigEndian32(&header[4 * i]);
    if (dims[i] != 0 &&
        bytes > static_cast<uint64_t>(std::numeric_limits<int64_t>::max() / dims[i])) {
      return DataLossError("the dims' byte count overflows at dimension ", i);
    }
    bytes *= static_cast<uint64_t>(dims[i]);
  }
  CKFLOW_ASSIGN_OR_RETURN(TensorShape shape, TensorShape::Make(dims));
  CKFLOW_ASSIGN_OR_RETURN(Tensor t, ReadElements(source, type->dtype, shape, bytes));
  ToHostOrder(t, type->width);
  return t;
}

}  // namespace

StatusOr<Tensor> ReadIdx(const std::string& path, FileSystem* file_system) {
  if (file_system == nullptr) file_system = FileSystem::Default();
  StatusOr<Tensor> result = [&]() -> StatusOr<Tensor> {
    CKFLOW_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file,
                            file_system->NewRandomAccessFile(path));
    unsigned char head[2] = {0, 0};
    if (file->size() >= 2)
      CKFLOW_RETURN_IF_ERROR(file->ReadAt(0, 2, reinterpret_cast<char*>(head)));
    if (head[0] == 0x1f && head[1] == 0x8b) {
      CKFLOW_ASSIGN_OR_RETURN(std::unique_ptr<GzipSource> gzip, GzipSource::Open(*file));
      return Read(*gzip);
    }
    PlainSource plain(*file);
    return Read(plain);
  }();
  if (!result.ok() && result.status().code() == StatusCode::kDataLoss) {
    return Status(result.status()).WithContext(path + ": IDX");
  }
  return result;
}

}  // namespace ckflow
