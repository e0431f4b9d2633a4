#include "bundle/bundle_reader.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

#include "base/cast.h"
#include "bundle/bundle_coding_internal.h"
#include "bundle/bundle_format.h"
#include "bundle/bundle_index_internal.h"
#include "bundle/crc32c.h"

namespace ckflow {
namespace {

// Reads are issued in pieces of this size, each checksummed right after its
// pread while the bytes are still in cache: a whole chunk per pread, as
// larger requests keep a cold device busier and cost nothing warm.
constexpr uint64_t kPieceSize = uint64_t{1} << 20;
// Tensors larger than this are split into chunks of this size read in
// parallel.
constexpr uint64_t kChunkSize = uint64_t{1} << 20;

std::string DescribeDims(std::span<const int64_t> dims) {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) out += ",";
    out += std::to_string(dims[i]);
  }
  return out + "]";
}

// Checks one index entry, decoded by DecodePlainEntry or by protobuf (then
// with its `slices`), and makes it a BundleEntry; errors are DataLoss naming
// the index file and the key.
StatusOr<BundleEntry> MakeEntry(
    const std::string& index_path, int num_shards, std::string_view key,
    const internal::PlainEntry& fields, std::span<const int64_t> dims,
    const google::protobuf::RepeatedPtrField<tensorflow::TensorSliceProto>* slices) {
  auto corrupt = [&](auto&&... what) {
    return DataLossError(index_path, ": key '", key, "': ", what...);
  };
  BundleEntry e;
  e.dtype = fields.dtype;
  StatusOr<TensorShape> shape = TensorShape::Make(dims);
  if (!shape.ok()) {
    return corrupt("invalid shape ", DescribeDims(dims), ": ", shape.status().message());
  }
  e.shape = std::move(shape).value();
  e.shard_id = fields.shard_id;
  e.offset = fields.offset;
  e.size = fields.size;
  e.masked_crc32c = fields.crc32c;
  if (slices != nullptr) {
    for (const tensorflow::TensorSliceProto& proto_slice : *slices) {
      TensorSlice slice = internal::TensorSliceFromProto(proto_slice);
      if (Status fits = slice.CheckFits(e.shape); !fits.ok()) {
        return corrupt("slice ", e.slices.size(), ": ", fits.message());
      }
      e.slices.push_back(std::move(slice));
    }
  }
  if (e.slices.empty()) {
    if (e.shard_id < 0 || e.shard_id >= num_shards) {
      return corrupt("shard_id ", e.shard_id, " out of range: the checkpoint has ", num_shards,
                     " shard(s)");
    }
    if (e.offset < 0 || e.size < 0) {
      return corrupt("negative offset ", e.offset, " or size ", e.size);
    }
    const int64_t n = e.shape.num_elements();
    const auto element_size = static_cast<int64_t>(StoredElementSize(e.dtype));
    if (element_size > 0) {
      if (n > std::numeric_limits<int64_t>::max() / element_size || n * element_size != e.size) {
        return corrupt("size ", e.size, " disagrees with ", StoredDataTypeName(e.dtype),
                       e.shape.ToString());
      }
    } else if (e.dtype == DT_STRING && n > 0 && (n > e.size || e.size - n < 4)) {
      return corrupt("size ", e.size, " is too small for ", n, " strings");
    }
  }
  e.key = std::string(key);
  return e;
}

// An entry DecodePlainEntry leaves to protobuf.
StatusOr<BundleEntry> MakeEntryFromProto(const std::string& index_path, int num_shards,
                                         std::string_view key,
                                         const tensorflow::BundleEntryProto& proto) {
  if (proto.shape().unknown_rank()) {
    return DataLossError(index_path, ": key '", key, "': shape has unknown rank");
  }
  std::vector<int64_t> dims;
  dims.reserve(proto.shape().dim_size());
  for (const auto& d : proto.shape().dim()) dims.push_back(d.size());
  internal::PlainEntry fields;
  fields.dtype = static_cast<int32_t>(proto.dtype());
  fields.shard_id = proto.shard_id();
  fields.offset = proto.offset();
  fields.size = proto.size();
  fields.crc32c = proto.crc32c();
  return MakeEntry(index_path, num_shards, key, fields, dims, &proto.slices());
}

// Only bytes 0 and 1 are bools; anything else would be undefined behaviour
// once read through a bool. `first` is the index of p[0] in the tensor.
Status CheckBools(const BundleEntry& e, const RandomAccessFile& file, const char* p, size_t n,
                  uint64_t first) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(p);
  const auto* bad = std::find_if(bytes, bytes + n, [](unsigned char b) { return b > 1; });
  if (bad == bytes + n) return OkStatus();
  return DataLossError(file.path(), ": key '", e.key, "': byte ", static_cast<int>(*bad),
                       " at element ", first + static_cast<uint64_t>(bad - bytes),
                       " is not a bool");
}

}  // namespace

StatusOr<std::unique_ptr<BundleReader>> BundleReader::Open(const std::string& prefix,
                                                           const Options& options) {
  FileSystem* fs = options.fs ? options.fs : FileSystem::Default();
  const std::string index_path = IndexFilename(prefix);
  std::vector<BundleEntry> entries;
  tensorflow::BundleEntryProto proto;  // reused for the entries protobuf parses
  CKFLOW_ASSIGN_OR_RETURN(
      tensorflow::BundleHeaderProto header,
      internal::VisitBundleIndexBytes(
          fs, index_path, options.only_key,
          [&](std::string_view key, const tensorflow::BundleHeaderProto& header,
              std::string_view value) -> Status {
            internal::PlainEntry plain;
            StatusOr<BundleEntry> e = [&]() -> StatusOr<BundleEntry> {
              if (internal::DecodePlainEntry(value, &plain)) {
                return MakeEntry(index_path, header.num_shards(), key, plain,
                                 std::span<const int64_t>(plain.dims, plain.rank), nullptr);
              }
              if (!proto.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
                return DataLossError(index_path, ": entry of key '", key,
                                     "' is not a BundleEntryProto");
              }
              return MakeEntryFromProto(index_path, header.num_shards(), key, proto);
            }();
            if (!e.ok()) return e.status();
            entries.push_back(*std::move(e));
            return OkStatus();
          },
          // Allocated once: growing by doubling put a fresh process's
          // first restore of 20,000 variables through 9.7 MB of buffers
          // (each page a fault) for 3 MB of entries, and then a copy to fit.
          [&](uint64_t n) { entries.reserve(n); }));
  const int num_shards = header.num_shards();
  const bool big_endian = header.endianness() == tensorflow::BundleHeaderProto::BIG;
  return std::unique_ptr<BundleReader>(
      new BundleReader(prefix, fs, num_shards, big_endian, std::move(entries)));
}

BundleReader::BundleReader(std::string prefix, FileSystem* fs, int num_shards, bool big_endian,
                           std::vector<BundleEntry> entries)
    : prefix_(std::move(prefix)),
      index_path_(IndexFilename(prefix_)),
      fs_(fs),
      num_shards_(num_shards),
      big_endian_(big_endian),
      entries_(std::move(entries)) {}

BundleReader::~BundleReader() = default;

std::string BundleReader::DataPath(int shard) const {
  return DataFilename(prefix_, shard, num_shards_);
}

const BundleEntry* BundleReader::FindEntry(std::string_view key) const {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), key,
                             [](const BundleEntry& e, std::string_view k) { return e.key < k; });
  return it != entries_.end() && it->key == key ? &*it : nullptr;
}

const BundleEntry* BundleReader::FindEntry(std::string_view key, int64_t position) const {
  if (position >= 0 && static_cast<size_t>(position) < entries_.size() &&
      entries_[position].key == key) {
    return &entries_[position];
  }
  return FindEntry(key);
}

StatusOr<const RandomAccessFile*> BundleReader::DataFile(int shard) const {
  MutexLock lock(&mu_);
  std::unique_ptr<RandomAccessFile>& file = data_files_[shard];
  if (!file) {
    CKFLOW_ASSIGN_OR_RETURN(file, fs_->NewRandomAccessFile(DataPath(shard)));
    // Restores read a data file mostly in order; from a cold page cache the
    // larger readahead keeps more of the device's reads ahead of them.
    file->AdviseSequential();
  }
  return file.get();
}

void BundleReader::PrefetchData(uint64_t max_bytes) const {
  std::vector<const RandomAccessFile*> files;
  uint64_t bytes = 0;
  for (int shard = 0; shard < num_shards_; ++shard) {
    StatusOr<const RandomAccessFile*> file = DataFile(shard);
    if (!file.ok()) continue;
    files.push_back(*file);
    bytes += (*file)->size();
    if (bytes > max_bytes) return;
  }
  for (const RandomAccessFile* file : files) file->Prefetch(0, file->size());
}

StatusOr<const RandomAccessFile*> BundleReader::EntryFile(const BundleEntry& e) const {
  CKFLOW_RETURN_IF_ERROR(CheckHasData(e));
  StatusOr<const RandomAccessFile*> file = DataFile(e.shard_id);
  if (!file.ok()) return file.status().WithContext("key '" + e.key + "'");
  CKFLOW_RETURN_IF_ERROR(CheckWithin(e, **file));
  return *file;
}

Status BundleReader::CheckHasData(const BundleEntry& e) const {
  if (e.is_sliced()) {
    return InvalidArgumentError(index_path_, ": key '", e.key, "' is a tensor saved in ",
                                e.slices.size(),
                                " slices, which hold its data; it has none of its own");
  }
  if (StoredElementSize(e.dtype) == 0 && e.dtype != DT_STRING) {
    return InvalidArgumentError(
        index_path_, ": key '", e.key, "' has ",
        IsSupportedDataType(static_cast<DataType>(e.dtype)) || e.dtype == DT_VARIANT
            ? "unsupported dtype "
            : "unknown dtype ",
        StoredDataTypeName(e.dtype));
  }
  return OkStatus();
}

Status BundleReader::CheckWithin(const BundleEntry& e, const RandomAccessFile& file) {
  const uint64_t file_size = file.size();
  const auto offset = static_cast<uint64_t>(e.offset);
  const auto size = static_cast<uint64_t>(e.size);
  if (offset > file_size || size > file_size - offset) {
    return DataLossError(file.path(), ": key '", e.key, "' needs bytes [", offset, ", ",
                         offset + size, ") but the file has ", file_size, " bytes");
  }
  return OkStatus();
}

Status BundleReader::ReadChecked(const BundleEntry& e, const RandomAccessFile& file, char* dst,
                                 uint64_t keep_begin, uint64_t keep_end) const {
  const auto base = static_cast<uint64_t>(e.offset);
  const auto size = static_cast<uint64_t>(e.size);
  keep_end = std::min(keep_end, size);
  auto read_and_crc = [&](uint64_t offset, uint64_t length) -> StatusOr<uint32_t> {
    uint32_t crc = 0;
    for (uint64_t done = 0; done < length;) {
      const uint64_t at = offset + done;
      // Pieces stop at the window's edges: each lands in dst or in scratch.
      uint64_t n = std::min(kPieceSize, length - done);
      if (at < keep_begin) n = std::min(n, keep_begin - at);
      if (at >= keep_begin && at < keep_end) n = std::min(n, keep_end - at);
      char* piece;
      if (at >= keep_begin && at < keep_end) {
        piece = dst + (at - keep_begin);
      } else {
        thread_local std::vector<char> scratch;
        scratch.resize(kPieceSize);
        piece = scratch.data();
      }
      CKFLOW_RETURN_IF_ERROR(file.ReadAt(base + at, n, piece));
      crc = crc32c::Extend(crc, piece, n);
      done += n;
    }
    return crc;
  };
  StatusOr<uint32_t> crc = size <= kChunkSize
                               ? read_and_crc(0, size)
                               : internal::ParallelChunkedCrc(size, kChunkSize, read_and_crc);
  if (!crc.ok()) return crc.status().WithContext("key '" + e.key + "'");
  return CheckCrc(e, file, *crc);
}

Status BundleReader::CheckCrc(const BundleEntry& e, const RandomAccessFile& file,
                              uint32_t crc) const {
  if (!crc32c::kVerifyStored || crc == crc32c::Unmask(e.masked_crc32c)) return OkStatus();
  char msg[64];
  std::snprintf(msg, sizeof(msg), "stored %08x, computed %08x", e.masked_crc32c, crc32c::Mask(crc));
  return DataLossError(file.path(), ": checksum mismatch for key '", e.key, "' (", msg, ")");
}

Status BundleReader::ReadNumeric(const BundleEntry& e, const RandomAccessFile& file, char* dst,
                                 uint64_t keep_begin, uint64_t keep_end) const {
  CKFLOW_RETURN_IF_ERROR(ReadChecked(e, file, dst, keep_begin, keep_end));
  const auto size =
      static_cast<size_t>(std::min<uint64_t>(keep_end, static_cast<uint64_t>(e.size)) - keep_begin);
  if (e.dtype == DT_BOOL) CKFLOW_RETURN_IF_ERROR(CheckBools(e, file, dst, size, keep_begin));
  if (big_endian_) {
    const size_t element_size = StoredElementSize(e.dtype);
    internal::SwapBytes(dst, element_size, size / element_size);
  }
  return OkStatus();
}

Status BundleReader::DecodeStrings(const BundleEntry& e, const RandomAccessFile& file,
                                   std::string_view bytes, std::span<std::string> dst) const {
  if (bytes.empty()) return OkStatus();  // as TensorFlow: nothing stored, nothing checked
  uint32_t crc = 0;
  Status s = internal::DecodeStringTensor(bytes, dst, big_endian_, &crc);
  if (!s.ok()) return s.WithContext(file.path() + ": key '" + e.key + "'");
  return CheckCrc(e, file, crc);
}

StatusOr<std::string> BundleReader::ReadBytes(const BundleEntry& e,
                                              const RandomAccessFile& file) const {
  std::string bytes(static_cast<size_t>(e.size), '\0');
  Status s = file.ReadAt(static_cast<uint64_t>(e.offset), bytes.size(), bytes.data());
  if (!s.ok()) return s.WithContext("key '" + e.key + "'");
  return bytes;
}

Status BundleReader::ReadValidated(const BundleEntry& e, const RandomAccessFile& file,
                                   Tensor* dest) const {
  if (e.dtype != DT_STRING) return ReadNumeric(e, file, static_cast<char*>(dest->raw_data()));
  CKFLOW_ASSIGN_OR_RETURN(std::string bytes, ReadBytes(e, file));
  std::span<std::string> strings = dest->flat<std::string>();
  if (strings.size() != 1 || bytes.empty()) return DecodeStrings(e, file, bytes, strings);
  // A scalar (an object graph: 17 MB for 200,000 objects) becomes the buffer
  // it was read into, not a copy of it.
  uint32_t crc = 0;
  Status s = internal::DecodeStringScalarInPlace(&bytes, big_endian_, &crc);
  if (!s.ok()) return s.WithContext(file.path() + ": key '" + e.key + "'");
  CKFLOW_RETURN_IF_ERROR(CheckCrc(e, file, crc));
  strings[0] = std::move(bytes);
  return OkStatus();
}

namespace {

Status CheckDestination(const BundleEntry& e, const std::string& index_path,
                        const TensorShape& shape, std::string_view what, const Tensor* dest) {
  if (dest != nullptr && dest->dtype() == e.dtype && dest->shape() == shape) return OkStatus();
  return InvalidArgumentError(
      "key '", e.key, "' in ", index_path, what, " is ", StoredDataTypeName(e.dtype),
      shape.ToString(), ", the destination is ",
      dest && dest->IsValid() ? std::string(DataTypeName(dest->dtype())) : "an invalid tensor",
      dest && dest->IsValid() ? dest->shape().ToString() : "");
}

// Row-major strides of `shape`, in elements.
std::vector<int64_t> Strides(const TensorShape& shape) {
  std::vector<int64_t> strides(shape.rank(), 1);
  for (int d = shape.rank() - 2; d >= 0; --d) strides[d] = strides[d + 1] * shape.dim(d + 1);
  return strides;
}

// Calls copy(src_index, dst_index, n) for each run of n elements of the box
// [lo, hi) that is contiguous in both a tensor of `src` shape whose origin
// is at `src_origin` and one of `dst` shape whose origin is at `dst_origin`.
template <typename Copy>
void ForEachRow(const std::vector<int64_t>& lo, const std::vector<int64_t>& hi,
                const TensorShape& src, const std::vector<int64_t>& src_origin,
                const TensorShape& dst, const std::vector<int64_t>& dst_origin, Copy copy) {
  const int rank = static_cast<int>(lo.size());
  if (rank == 0) {
    copy(0, 0, 1);
    return;
  }
  const std::vector<int64_t> src_strides = Strides(src);
  const std::vector<int64_t> dst_strides = Strides(dst);
  const int64_t n = hi[rank - 1] - lo[rank - 1];
  std::vector<int64_t> at(lo.begin(), lo.end());
  for (;;) {
    int64_t s = 0;
    int64_t t = 0;
    for (int d = 0; d < rank; ++d) {
      s += (at[d] - src_origin[d]) * src_strides[d];
      t += (at[d] - dst_origin[d]) * dst_strides[d];
    }
    copy(s, t, n);
    int d = rank - 2;
    for (; d >= 0; --d) {
      if (++at[d] < hi[d]) break;
      at[d] = lo[d];
    }
    if (d < 0) return;
  }
}

}  // namespace

StatusOr<std::vector<BundleReader::StoredSlice>> BundleReader::StoredSlicesOf(
    const BundleEntry& full) const {
  std::vector<StoredSlice> stored;
  if (!full.is_sliced()) {
    CKFLOW_RETURN_IF_ERROR(EntryFile(full).status());
    stored.push_back({TensorSlice::Full(full.shape.rank()), &full});
    return stored;
  }
  auto corrupt = [&](auto&&... what) {
    return DataLossError(index_path_, ": key '", full.key, "' (", StoredDataTypeName(full.dtype),
                         full.shape.ToString(), " in ", full.slices.size(), " slices): ", what...);
  };
  const int64_t total = full.shape.num_elements();
  int64_t covered = 0;
  stored.reserve(full.slices.size());
  for (const TensorSlice& slice : full.slices) {
    const BundleEntry* entry = FindEntry(EncodeTensorNameSlice(full.key, slice));
    if (entry == nullptr) return corrupt("slice ", slice.ToString(), " is missing");
    if (entry->dtype != full.dtype || entry->is_sliced()) {
      return corrupt("slice ", slice.ToString(), " is ", StoredDataTypeName(entry->dtype),
                     entry->is_sliced() ? " and sliced itself" : "");
    }
    const TensorShape shape = slice.ShapeIn(full.shape);
    if (!(entry->shape == shape)) {
      return corrupt("slice ", slice.ToString(), " is stored as ", entry->shape.ToString(),
                     ", not ", shape.ToString());
    }
    CKFLOW_RETURN_IF_ERROR(EntryFile(*entry).status());
    covered += shape.num_elements();  // each at most total: no overflow below
    if (covered > total) break;
    stored.push_back({slice, entry});
  }
  // Disjoint boxes inside the shape whose sizes add up to it tile it. Boxes
  // are compared only with those overlapping them in dimension 0.
  std::sort(stored.begin(), stored.end(), [](const StoredSlice& a, const StoredSlice& b) {
    return a.slice.rank() > 0 && a.slice.Begin(0) < b.slice.Begin(0);
  });
  const int rank = full.shape.rank();
  for (size_t i = 0; i < stored.size(); ++i) {
    for (size_t j = i + 1; j < stored.size(); ++j) {
      const TensorSlice& a = stored[i].slice;
      const TensorSlice& b = stored[j].slice;
      if (rank > 0 && b.Begin(0) >= a.End(0, full.shape.dim(0))) break;
      bool overlap = true;
      for (int d = 0; d < rank && overlap; ++d) {
        const int64_t size = full.shape.dim(d);
        overlap = std::max(a.Begin(d), b.Begin(d)) < std::min(a.End(d, size), b.End(d, size));
      }
      if (overlap && stored[i].slice.ShapeIn(full.shape).num_elements() > 0 &&
          stored[j].slice.ShapeIn(full.shape).num_elements() > 0) {
        return corrupt("slices ", a.ToString(), " and ", b.ToString(), " overlap");
      }
    }
  }
  if (covered != total) {
    return corrupt("the slices hold ", covered > total ? "more" : "fewer", " elements than the ",
                   total, " of the tensor");
  }
  return stored;
}

Status BundleReader::CopyStoredSlice(const BundleEntry& full, const StoredSlice& stored,
                                     const TensorSlice& want, Tensor* dest) const {
  const int rank = full.shape.rank();
  std::vector<int64_t> lo(rank), hi(rank), stored_origin(rank), want_origin(rank);
  for (int d = 0; d < rank; ++d) {
    const int64_t size = full.shape.dim(d);
    stored_origin[d] = stored.slice.Begin(d);
    want_origin[d] = want.Begin(d);
    lo[d] = std::max(stored_origin[d], want_origin[d]);
    hi[d] = std::min(stored.slice.End(d, size), want.End(d, size));
    if (lo[d] >= hi[d]) return OkStatus();  // nothing of it is wanted
  }
  const BundleEntry& e = *stored.entry;
  CKFLOW_ASSIGN_OR_RETURN(const RandomAccessFile* file, EntryFile(e));
  const TensorShape& stored_shape = e.shape;
  const TensorShape& dest_shape = dest->shape();
  if (e.dtype == DT_STRING) {
    std::vector<std::string> strings(static_cast<size_t>(stored_shape.num_elements()));
    CKFLOW_ASSIGN_OR_RETURN(std::string bytes, ReadBytes(e, *file));
    CKFLOW_RETURN_IF_ERROR(DecodeStrings(e, *file, bytes, strings));
    std::span<std::string> out = dest->flat<std::string>();
    ForEachRow(lo, hi, stored_shape, stored_origin, dest_shape, want_origin,
               [&](int64_t s, int64_t t, int64_t n) {
                 std::move(strings.begin() + s, strings.begin() + s + n, out.begin() + t);
               });
    return OkStatus();
  }
  const size_t element_size = StoredElementSize(e.dtype);
  char* out = static_cast<char*>(dest->raw_data());
  // The whole stored slice is wanted and its rows are consecutive in the
  // destination (every dimension after the first it does not span whole
  // is whole there, those before it one wide): read it in place.
  bool in_place = true;
  int innermost_partial = -1;
  for (int d = rank - 1; d >= 0; --d) {
    if (lo[d] != stored_origin[d] || hi[d] - lo[d] != stored_shape.dim(d)) in_place = false;
    if (hi[d] - lo[d] != dest_shape.dim(d) && innermost_partial < 0) innermost_partial = d;
  }
  for (int d = 0; d < innermost_partial; ++d) in_place = in_place && hi[d] - lo[d] == 1;
  if (in_place) {
    const std::vector<int64_t> strides = Strides(dest_shape);
    int64_t offset = 0;
    for (int d = 0; d < rank; ++d) offset += (lo[d] - want_origin[d]) * strides[d];
    return ReadNumeric(e, *file, out + offset * static_cast<int64_t>(element_size));
  }
  // Whole rows of the stored slice, each whole in the destination too (a
  // part of a variable partitioned along its first axis): those bytes are
  // read straight into place, the others only checksummed.
  bool rows_whole = true;
  for (int d = 1; d < rank; ++d) {
    rows_whole = rows_whole && lo[d] == stored_origin[d] && hi[d] - lo[d] == stored_shape.dim(d) &&
                 hi[d] - lo[d] == dest_shape.dim(d);
  }
  if (rank >= 1 && rows_whole) {
    const auto row_bytes = static_cast<uint64_t>(stored_shape.num_elements() /
                                                 std::max<int64_t>(1, stored_shape.dim(0))) *
                           element_size;
    const uint64_t begin = static_cast<uint64_t>(lo[0] - stored_origin[0]) * row_bytes;
    const uint64_t end = static_cast<uint64_t>(hi[0] - stored_origin[0]) * row_bytes;
    return ReadNumeric(e, *file, out + (lo[0] - want_origin[0]) * row_bytes, begin, end);
  }
  // Bounded by the data file (EntryFile checked the entry lies within it).
  std::vector<char> buffer(static_cast<size_t>(e.size));
  CKFLOW_RETURN_IF_ERROR(ReadNumeric(e, *file, buffer.data()));
  ForEachRow(lo, hi, stored_shape, stored_origin, dest_shape, want_origin,
             [&](int64_t s, int64_t t, int64_t n) {
               std::memcpy(out + t * element_size, buffer.data() + s * element_size,
                           n * element_size);
             });
  return OkStatus();
}

Status BundleReader::ReadBox(const BundleEntry& full, const TensorSlice& want, Tensor* dest) const {
  CKFLOW_ASSIGN_OR_RETURN(std::vector<StoredSlice> stored, StoredSlicesOf(full));
  if (dest->NumElements() == 0) return OkStatus();
  for (const StoredSlice& piece : stored) {
    CKFLOW_RETURN_IF_ERROR(CopyStoredSlice(full, piece, want, dest));
  }
  return OkStatus();
}

Status BundleReader::ReadInto(const BundleEntry& e, Tensor* dest) const {
  CKFLOW_RETURN_IF_ERROR(CheckDestination(e, index_path_, e.shape, "", dest));
  if (e.is_sliced()) return ReadBox(e, TensorSlice::Full(e.shape.rank()), dest);
  CKFLOW_ASSIGN_OR_RETURN(const RandomAccessFile* file, EntryFile(e));
  return ReadValidated(e, *file, dest);
}

Status BundleReader::ReadSliceInto(std::string_view key, const TensorSlice& slice,
                                   Tensor* dest) const {
  const BundleEntry* e = FindEntry(key);
  if (e == nullptr) return NotFoundError("key '", key, "' not found in ", index_path_);
  return ReadSliceInto(*e, slice, dest);
}

Status BundleReader::ReadSliceInto(const BundleEntry& e, const TensorSlice& slice,
                                   Tensor* dest) const {
  Status fits = slice.CheckFits(e.shape);
  if (!fits.ok()) return fits.WithContext("key '" + e.key + "' in " + index_path_);
  CKFLOW_RETURN_IF_ERROR(CheckDestination(e, index_path_, slice.ShapeIn(e.shape),
                                          " (slice " + slice.ToString() + ")", dest));
  return ReadBox(e, slice, dest);
}

StatusOr<Tensor> BundleReader::LookupSlice(std::string_view key, const TensorSlice& slice) const {
  const BundleEntry* e = FindEntry(key);
  if (e == nullptr) return NotFoundError("key '", key, "' not found in ", index_path_);
  Status fits = slice.CheckFits(e->shape);
  if (!fits.ok()) return fits.WithContext("key '" + e->key + "' in " + index_path_);
  // The stored pieces first: once they are known to lie within their files
  // and to tile the tensor, the allocation is no larger than the files.
  CKFLOW_RETURN_IF_ERROR(StoredSlicesOf(*e).status());
  if (!IsSupportedDataType(static_cast<DataType>(e->dtype)) || e->dtype == DT_RESOURCE) {
    return InvalidArgumentError(index_path_, ": key '", e->key, "' has dtype ",
                                StoredDataTypeName(e->dtype),
                                ", which a ckflow Tensor cannot hold");
  }
  CKFLOW_ASSIGN_OR_RETURN(
      Tensor t, Tensor::Allocate(static_cast<DataType>(e->dtype), slice.ShapeIn(e->shape)));
  CKFLOW_RETURN_IF_ERROR(ReadBox(*e, slice, &t));
  return t;
}

Status BundleReader::ReadCastInto(const BundleEntry& e, const TensorSlice* slice,
                                  Tensor* dest) const {
  const auto stored = static_cast<DataType>(e.dtype);
  if (dest == nullptr || !dest->IsValid()) {
    return InvalidArgumentError("key '", e.key, "' in ", index_path_,
                                ": the destination is an invalid tensor");
  }
  if (stored == dest->dtype()) return slice ? ReadSliceInto(e, *slice, dest) : ReadInto(e, dest);
  if (std::string why = CastRefusal(stored, dest->dtype(), CastRule::kAny); !why.empty()) {
    return InvalidArgumentError("key '", e.key, "' in ", index_path_, " is ",
                                StoredDataTypeName(e.dtype), ": ", why);
  }
  if (slice != nullptr) {
    Status fits = slice->CheckFits(e.shape);
    if (!fits.ok()) return fits.WithContext("key '" + e.key + "' in " + index_path_);
  }
  const TensorShape shape = slice ? slice->ShapeIn(e.shape) : e.shape;
  if (dest->shape() != shape) {
    return InvalidArgumentError("key '", e.key, "' in ", index_path_, " is ", shape.ToString(),
                                ", the destination is ", dest->shape().ToString());
  }
  const DataType to = dest->dtype();
  if (slice != nullptr || e.is_sliced()) {
    // A part, or a tensor saved in parts (a partitioned variable): read in
    // the stored dtype, then converted. A second pass, but only for these;
    // the stored pieces are checked against their files before anything of
    // their size is allocated.
    CKFLOW_RETURN_IF_ERROR(StoredSlicesOf(e).status());
    CKFLOW_ASSIGN_OR_RETURN(Tensor part, Tensor::Allocate(stored, shape));
    CKFLOW_RETURN_IF_ERROR(slice ? ReadSliceInto(e, *slice, &part) : ReadInto(e, &part));
    CastElements(stored, part.raw_data(), to, dest->raw_data(), part.NumElements());
    return OkStatus();
  }
  CKFLOW_ASSIGN_OR_RETURN(const RandomAccessFile* file, EntryFile(e));
  const size_t in_size = StoredElementSize(e.dtype);
  const size_t out_size = DataTypeSize(to);
  char* out = static_cast<char*>(dest->raw_data());
  const auto base = static_cast<uint64_t>(e.offset);
  // Chunks and pieces are whole numbers of elements (1 MiB, and elements of
  // at most 16 bytes), so each converts on its own, in cache.
  StatusOr<uint32_t> crc = internal::ParallelChunkedCrc(
      static_cast<uint64_t>(e.size), kChunkSize,
      [&](uint64_t offset, uint64_t length) -> StatusOr<uint32_t> {
        thread_local std::vector<char> buffer;
        uint32_t piece_crc = 0;
        for (uint64_t done = 0; done < length;) {
          const uint64_t n = std::min(kPieceSize, length - done);
          const uint64_t at = offset + done;
          buffer.resize(n);
          CKFLOW_RETURN_IF_ERROR(file->ReadAt(base + at, n, buffer.data()));
          piece_crc = crc32c::Extend(piece_crc, buffer.data(), n);
          if (e.dtype == DT_BOOL)
            CKFLOW_RETURN_IF_ERROR(CheckBools(e, *file, buffer.data(), n, at));
          if (big_endian_) internal::SwapBytes(buffer.data(), in_size, n / in_size);
          CastElements(stored, buffer.data(), to, out + (at / in_size) * out_size,
                       static_cast<int64_t>(n / in_size));
          done += n;
        }
        return piece_crc;
      });
  if (!crc.ok()) return crc.status().WithContext("key '" + e.key + "'");
  return CheckCrc(e, *file, *crc);
}

Status BundleReader::ReadBatch(
    std::span<const BundleEntry* const> entries,
    const std::function<Status(size_t, std::string_view)>& consume) const {
  // Ranges are merged across gaps of up to kBatchGap bytes (padding, or an
  // entry not asked for) and grow to at most kMaxBatchReadBytes (or one
  // entry).
  constexpr uint64_t kBatchGap = 4 << 10;
  std::vector<size_t> order(entries.size());
  for (size_t i = 0; i < order.size(); ++i) {
    const BundleEntry& e = *entries[i];
    if (e.dtype == DT_STRING) {
      return InvalidArgumentError(index_path_, ": key '", e.key,
                                  "' holds strings, which cannot be read in a batch");
    }
    order[i] = i;
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const BundleEntry& x = *entries[a];
    const BundleEntry& y = *entries[b];
    return x.shard_id != y.shard_id ? x.shard_id < y.shard_id : x.offset < y.offset;
  });
  thread_local std::vector<char> buffer;
  // A batch of zero-byte values still hands out a pointer into the buffer:
  // memcpy and memcmp must not get null, even for a length of 0, and an
  // unallocated vector's data() is null.
  if (buffer.capacity() == 0) buffer.reserve(1);
  size_t begin = 0;
  while (begin < order.size()) {
    const BundleEntry& first = *entries[order[begin]];
    CKFLOW_ASSIGN_OR_RETURN(const RandomAccessFile* file, EntryFile(first));
    const auto start = static_cast<uint64_t>(first.offset);
    uint64_t end = start + static_cast<uint64_t>(first.size);
    size_t last = begin + 1;
    for (; last < order.size(); ++last) {
      const BundleEntry& e = *entries[order[last]];
      const auto offset = static_cast<uint64_t>(e.offset);
      const uint64_t e_end = offset + static_cast<uint64_t>(e.size);
      if (e.shard_id != first.shard_id || offset > end + kBatchGap ||
          std::max(end, e_end) - start > kMaxBatchReadBytes) {
        break;
      }
      // The same file as `first`'s: checked without looking it up again.
      CKFLOW_RETURN_IF_ERROR(CheckHasData(e));
      CKFLOW_RETURN_IF_ERROR(CheckWithin(e, *file));
      end = std::max(end, e_end);
    }
    buffer.resize(end - start);
    Status read = file->ReadAt(start, buffer.size(), buffer.data());
    if (!read.ok()) return read.WithContext("key '" + first.key + "'");
    for (size_t k = begin; k < last; ++k) {
      const BundleEntry& e = *entries[order[k]];
      char* p = buffer.data() + (static_cast<uint64_t>(e.offset) - start);
      const auto size = static_cast<size_t>(e.size);
      CKFLOW_RETURN_IF_ERROR(CheckCrc(e, *file, crc32c::Value(p, size)));
      if (e.dtype == DT_BOOL) CKFLOW_RETURN_IF_ERROR(CheckBools(e, *file, p, size, 0));
      const size_t element_size = StoredElementSize(e.dtype);
      if (big_endian_) internal::SwapBytes(p, element_size, size / element_size);
      Status consumed = consume(order[k], std::string_view(p, size));
      // Entries may share bytes (a writer that stores equal values once):
      // the next one must see the file's bytes, not this one's swapped.
      if (big_endian_ && k + 1 < last &&
          static_cast<uint64_t>(entries[order[k + 1]]->offset) <
              static_cast<uint64_t>(e.offset) + size) {
        internal::SwapBytes(p, element_size, size / element_size);
      }
      CKFLOW_RETURN_IF_ERROR(consumed);
    }
    begin = last;
  }
  return OkStatus();
}

Status BundleReader::ReadInto(std::string_view key, Tensor* dest) const {
  const BundleEntry* e = FindEntry(key);
  if (e == nullptr) return NotFoundError("key '", key, "' not found in ", index_path_);
  return ReadInto(*e, dest);
}

StatusOr<Tensor> BundleReader::Lookup(std::string_view key) const {
  const BundleEntry* e = FindEntry(key);
  if (e == nullptr) return NotFoundError("key '", key, "' not found in ", index_path_);
  if (e->is_sliced()) return LookupSlice(key, TensorSlice::Full(e->shape.rank()));
  // Bounds first: the allocation below is then no larger than the file.
  CKFLOW_ASSIGN_OR_RETURN(const RandomAccessFile* file, EntryFile(*e));
  if (!IsSupportedDataType(static_cast<DataType>(e->dtype)) || e->dtype == DT_RESOURCE) {
    return InvalidArgumentError(index_path_, ": key '", e->key, "' has dtype ",
                                StoredDataTypeName(e->dtype),
                                ", which a ckflow Tensor cannot hold");
  }
  CKFLOW_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(static_cast<DataType>(e->dtype), e->shape));
  CKFLOW_RETURN_IF_ERROR(ReadValidated(*e, *file, &t));
  return t;
}

StatusOr<std::string> BundleReader::ReadRaw(const BundleEntry& e) const {
  CKFLOW_ASSIGN_OR_RETURN(const RandomAccessFile* file, EntryFile(e));
  if (e.dtype != DT_STRING) {
    std::string bytes(static_cast<size_t>(e.size), '\0');
    CKFLOW_RETURN_IF_ERROR(ReadChecked(e, *file, bytes.data()));
    return bytes;
  }
  CKFLOW_ASSIGN_OR_RETURN(std::string bytes, ReadBytes(e, *file));
  // Decoding checks the encoding and computes the entry's CRC. At most one
  // string per stored byte, so this is bounded by the file.
  std::vector<std::string> strings(static_cast<size_t>(e.shape.num_elements()));
  CKFLOW_RETURN_IF_ERROR(DecodeStrings(e, *file, bytes, strings));
  return bytes;
}

Status BundleReader::Verify(const BundleEntry& e) const {
  if (e.dtype == DT_STRING) return ReadRaw(e).status();
  CKFLOW_ASSIGN_OR_RETURN(const RandomAccessFile* file, EntryFile(e));
  // Chunk by chunk through a small buffer per thread: verifying a huge
  // tensor needs no memory of its size.
  const auto base = static_cast<uint64_t>(e.offset);
  StatusOr<uint32_t> crc = internal::ParallelChunkedCrc(
      static_cast<uint64_t>(e.size), kChunkSize,
      [&](uint64_t offset, uint64_t length) -> StatusOr<uint32_t> {
        thread_local std::vector<char> buffer;
        buffer.resize(length);
        CKFLOW_RETURN_IF_ERROR(file->ReadAt(base + offset, length, buffer.data()));
        if (e.dtype == DT_BOOL) {
          CKFLOW_RETURN_IF_ERROR(CheckBools(e, *file, buffer.data(), length, offset));
        }
        return crc32c::Value(buffer.data(), length);
      });
  if (!crc.ok()) return crc.status().WithContext("key '" + e.key + "'");
  return CheckCrc(e, *file, *crc);
}

}  // namespace ckflow
