#include "bundle/tensor_slice.h"

#include <charconv>
#include <limits>

namespace ckflow {
namespace {

StatusOr<int64_t> ParseInt(std::string_view text, std::string_view whole) {
  int64_t v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || p != end) {
    return InvalidArgumentError("'", whole, "': '", text, "' is not an integer");
  }
  return v;
}

std::vector<std::string_view> Split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  for (size_t start = 0;;) {
    const size_t end = text.find(sep, start);
    parts.push_back(text.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

// ------------------------------------------------------------ OrderedCode

void WriteNumIncreasing(std::string* out, uint64_t v) {
  char bytes[8];
  int n = 0;
  for (; v != 0; v >>= 8) bytes[n++] = static_cast<char>(v & 0xff);
  out->push_back(static_cast<char>(n));
  while (n > 0) out->push_back(bytes[--n]);
}

void WriteString(std::string* out, std::string_view s) {
  for (char c : s) {
    if (c == '\0') {
      out->append("\x00\xff", 2);
    } else if (c == '\xff') {
      out->append("\xff\x00", 2);
    } else {
      out->push_back(c);
    }
  }
  out->append("\x00\x01", 2);
}

// The first two bytes' header bits of an n-byte signed number, n = 1..10.
constexpr unsigned char kHeader[11][2] = {{0, 0},    {0x80, 0},    {0xc0, 0},   {0xe0, 0},
                                          {0xf0, 0}, {0xf8, 0},    {0xfc, 0},   {0xfe, 0},
                                          {0xff, 0}, {0xff, 0x80}, {0xff, 0xc0}};

void WriteSignedNumIncreasing(std::string* out, int64_t v) {
  const uint64_t magnitude = v < 0 ? ~static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  const int bits = magnitude == 0 ? 0 : 64 - __builtin_clzll(magnitude);
  int n = 1;
  while (7 * n - 1 < bits) ++n;
  // v sign-extended to 10 bytes, big-endian.
  unsigned char buf[10];
  const unsigned char sign = v < 0 ? 0xff : 0;
  buf[0] = buf[1] = sign;
  for (int i = 0; i < 8; ++i)
    buf[9 - i] = static_cast<unsigned char>(static_cast<uint64_t>(v) >> (8 * i));
  unsigned char* begin = buf + 10 - n;
  begin[0] ^= kHeader[n][0];
  if (n > 1) begin[1] ^= kHeader[n][1];
  out->append(reinterpret_cast<const char*>(begin), n);
}

class KeyDecoder {
 public:
  explicit KeyDecoder(std::string_view key) : key_(key) {}
  bool done() const { return pos_ == key_.size(); }

  bool NumIncreasing(uint64_t* v) {
    if (pos_ >= key_.size()) return false;
    const auto n = static_cast<unsigned char>(key_[pos_++]);
    if (n > 8 || key_.size() - pos_ < n) return false;
    *v = 0;
    for (unsigned i = 0; i < n; ++i) *v = (*v << 8) | static_cast<unsigned char>(key_[pos_++]);
    return true;
  }

  bool String(std::string* s) {
    while (pos_ + 1 < key_.size()) {
      const char c = key_[pos_];
      const char next = key_[pos_ + 1];
      if (c == '\0' && next == '\x01') {
        pos_ += 2;
        return true;
      }
      if (c == '\0' || c == '\xff') {
        if (next != (c == '\0' ? '\xff' : '\0')) return false;
        s->push_back(c);
        pos_ += 2;
        continue;
      }
      s->push_back(c);
      ++pos_;
    }
    return false;
  }

  bool SignedNumIncreasing(int64_t* v) {
    if (pos_ >= key_.size()) return false;
    const bool negative = (static_cast<unsigned char>(key_[pos_]) & 0x80) == 0;
    const unsigned char flip = negative ? 0xff : 0;
    const auto first = static_cast<unsigned char>(key_[pos_] ^ flip);
    int n = 0;
    if (first != 0xff) {
      while (n < 8 && (first & (0x80 >> n))) ++n;
    } else {
      if (pos_ + 1 >= key_.size()) return false;
      const auto second = static_cast<unsigned char>(key_[pos_ + 1] ^ flip);
      n = second < 0x80 ? 8 : second < 0xc0 ? 9 : 10;
    }
    if (n < 1 || key_.size() - pos_ < static_cast<size_t>(n)) return false;
    unsigned char buf[10];
    for (int i = 0; i < n; ++i) buf[i] = static_cast<unsigned char>(key_[pos_ + i]);
    buf[0] ^= kHeader[n][0];
    if (n > 1) buf[1] ^= kHeader[n][1];
    // Sign-extended to 80 bits; the top 16 must be copies of bit 63.
    uint64_t value = negative ? ~uint64_t{0} : 0;
    unsigned char high = negative ? 0xff : 0;
    for (int i = 0; i < n; ++i) {
      const int from_end = n - 1 - i;  // byte 0 is the least significant
      if (from_end >= 8) {
        if (buf[i] != high) return false;
      } else {
        value &= ~(uint64_t{0xff} << (8 * from_end));
        value |= uint64_t{buf[i]} << (8 * from_end);
      }
    }
    if (n >= 9 && ((value >> 63) != 0) != negative) return false;
    *v = static_cast<int64_t>(value);
    pos_ += n;
    return true;
  }

 private:
  std::string_view key_;
  size_t pos_ = 0;
};

}  // namespace

TensorSlice TensorSlice::Full(int rank) {
  TensorSlice s;
  s.extents.resize(rank);
  return s;
}

TensorSlice TensorSlice::FromOffsets(std::span<const int64_t> offsets,
                                     std::span<const int64_t> lengths) {
  TensorSlice s;
  for (size_t d = 0; d < offsets.size() && d < lengths.size(); ++d) {
    s.extents.push_back({offsets[d], lengths[d]});
  }
  return s;
}

TensorShape TensorSlice::ShapeIn(const TensorShape& full_shape) const {
  std::vector<int64_t> dims(extents.size());
  for (int d = 0; d < rank(); ++d) dims[d] = End(d, full_shape.dim(d)) - Begin(d);
  return TensorShape(std::move(dims));
}

bool TensorSlice::IsFullIn(const TensorShape& full_shape) const {
  if (rank() != full_shape.rank()) return false;
  for (int d = 0; d < rank(); ++d) {
    if (Begin(d) != 0 || End(d, full_shape.dim(d)) != full_shape.dim(d)) return false;
  }
  return true;
}

Status TensorSlice::CheckFits(const TensorShape& full_shape) const {
  if (rank() != full_shape.rank()) {
    return InvalidArgumentError("slice '", ToString(), "' has ", rank(),
                                " dimension(s), the tensor is ", full_shape.ToString());
  }
  for (int d = 0; d < rank(); ++d) {
    const Extent& e = extents[d];
    const bool full = e.length == kFullExtent;
    if ((full && e.start != 0) ||
        (!full && (e.start < 0 || e.length < 0 || e.start > full_shape.dim(d) ||
                   e.length > full_shape.dim(d) - e.start))) {
      return InvalidArgumentError("slice '", ToString(), "' does not fit in ",
                                  full_shape.ToString(), " (dimension ", d, ")");
    }
  }
  return OkStatus();
}

std::string TensorSlice::ToString() const {
  std::string out;
  for (int d = 0; d < rank(); ++d) {
    if (d) out += ":";
    if (extents[d].length == kFullExtent) {
      out += "-";
    } else {
      out += std::to_string(extents[d].start) + "," + std::to_string(extents[d].length);
    }
  }
  return out;
}

StatusOr<TensorSlice> ParseTensorSlice(std::string_view spec) {
  TensorSlice slice;
  if (spec.empty()) return slice;
  for (std::string_view part : Split(spec, ':')) {
    if (part == "-") {
      slice.extents.push_back({});
      continue;
    }
    std::vector<std::string_view> pair = Split(part, ',');
    if (pair.size() != 2) {
      return InvalidArgumentError("slice spec '", spec, "': '", part,
                                  "' is neither '-' nor 'start,length'");
    }
    CKFLOW_ASSIGN_OR_RETURN(int64_t start, ParseInt(pair[0], spec));
    CKFLOW_ASSIGN_OR_RETURN(int64_t length, ParseInt(pair[1], spec));
    if (start < 0 || length < 0) {
      return InvalidArgumentError("slice spec '", spec, "': negative start or length in '", part,
                                  "'");
    }
    slice.extents.push_back({start, length});
  }
  return slice;
}

StatusOr<ShapeAndSlice> ParseShapeAndSlice(std::string_view text) {
  std::vector<std::string_view> parts = Split(text, ' ');
  if (parts.size() < 2) {
    return InvalidArgumentError("shape_and_slice '", text,
                                "' must be the full shape's dims and a slice spec, e.g. "
                                "'10 4 0,4:-'");
  }
  std::vector<int64_t> dims;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    CKFLOW_ASSIGN_OR_RETURN(int64_t d, ParseInt(parts[i], text));
    dims.push_back(d);
  }
  StatusOr<TensorShape> shape = TensorShape::Make(dims);
  if (!shape.ok()) return shape.status().WithContext("shape_and_slice '" + std::string(text) + "'");
  StatusOr<TensorSlice> slice = ParseTensorSlice(parts.back());
  if (!slice.ok()) return slice.status().WithContext("shape_and_slice '" + std::string(text) + "'");
  CKFLOW_RETURN_IF_ERROR(
      slice->CheckFits(*shape).WithContext("shape_and_slice '" + std::string(text) + "'"));
  return ShapeAndSlice{*std::move(shape), *std::move(slice)};
}

std::string ShapeAndSliceString(const TensorShape& full_shape, const TensorSlice& slice) {
  std::string out;
  for (int64_t d : full_shape.dims()) out += std::to_string(d) + " ";
  return out + slice.ToString();
}

std::string EncodeTensorNameSlice(std::string_view name, const TensorSlice& slice) {
  std::string key;
  WriteNumIncreasing(&key, 0);
  WriteString(&key, name);
  WriteNumIncreasing(&key, static_cast<uint64_t>(slice.rank()));
  for (const TensorSlice::Extent& e : slice.extents) {
    const bool full = e.length == TensorSlice::kFullExtent;
    WriteSignedNumIncreasing(&key, full ? 0 : e.start);
    WriteSignedNumIncreasing(&key, full ? TensorSlice::kFullExtent : e.length);
  }
  return key;
}

StatusOr<std::pair<std::string, TensorSlice>> DecodeTensorNameSlice(std::string_view key) {
  KeyDecoder in(key);
  uint64_t zero = 1;
  uint64_t rank = 0;
  std::string name;
  TensorSlice slice;
  bool ok = in.NumIncreasing(&zero) && zero == 0 && in.String(&name) && in.NumIncreasing(&rank) &&
            rank <= key.size();
  for (uint64_t d = 0; ok && d < rank; ++d) {
    TensorSlice::Extent e;
    ok = in.SignedNumIncreasing(&e.start) && in.SignedNumIncreasing(&e.length);
    slice.extents.push_back(e);
  }
  if (!ok || !in.done()) {
    return InvalidArgumentError("'", key, "' is not a tensor slice key");
  }
  return std::make_pair(std::move(name), std::move(slice));
}

}  // namespace ckflow
