#include "bundle/bundle_writer.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "base/atomic_file_internal.h"
#include "base/parallel.h"
#include "base/tensor_source_internal.h"
#include "bundle/bundle_coding_internal.h"
#include "bundle/bundle_format.h"
#include "bundle/bundle_index_internal.h"
#include "bundle/crc32c.h"

namespace ckflow {
namespace {

// Small tensors are gathered into one write; a piece at least this large is
// written straight from the caller's memory.
constexpr size_t kBufferSize = size_t{1} << 20;
// Large tensors go out in pieces of this size, each checksummed right before
// it is written (so it is read from cache) and written in parallel.
constexpr uint64_t kChunkSize = uint64_t{1} << 20;

}  // namespace

StatusOr<std::unique_ptr<BundleWriter>> BundleWriter::Create(const std::string& prefix,
                                                             const Options& options) {
  if (prefix.empty()) return InvalidArgumentError("empty checkpoint prefix");
  FileSystem* fs = options.fs ? options.fs : FileSystem::Default();
  CKFLOW_RETURN_IF_ERROR(fs->CreateDirs(Dirname(prefix)));
  std::string data_temp = DataFilename(prefix, 0, 1) + internal::TempStateSuffix();
  CKFLOW_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, fs->NewWritableFile(data_temp));
  return std::unique_ptr<BundleWriter>(
      new BundleWriter(prefix, options, std::move(data_temp), std::move(file)));
}

BundleWriter::BundleWriter(std::string prefix, const Options& options, std::string data_temp_path,
                           std::unique_ptr<WritableFile> data_file)
    : prefix_(std::move(prefix)),
      options_(options),
      fs_(options.fs ? options.fs : FileSystem::Default()),
      data_temp_path_(std::move(data_temp_path)),
      index_temp_path_(IndexFilename(prefix_) + internal::TempStateSuffix()),
      data_file_(std::move(data_file)),
      write_(std::make_unique<BackgroundCall>()) {
  buffer_.reserve(kBufferSize);
}

BundleWriter::~BundleWriter() {
  if (!renamed_) DeleteTempFiles();
}

void BundleWriter::DeleteTempFiles() {
  write_->Wait();
  if (data_file_) {
    data_file_->Close().IgnoreError();
    data_file_.reset();
  }
  fs_->DeleteFile(data_temp_path_).IgnoreError();
  fs_->DeleteFile(index_temp_path_).IgnoreError();
}

Status BundleWriter::CheckAdd(std::string_view key) {
  if (finished_) return FailedPreconditionError("bundle '", prefix_, "' is already finished");
  if (!write_error_.ok()) return write_error_;
  if (key.empty()) return InvalidArgumentError("key \"\" is reserved for the bundle header");
  if (!FollowsAll(key) && Find(key) >= 0) {
    return InvalidArgumentError("key '", key, "' added twice to bundle '", prefix_, "'");
  }
  return OkStatus();
}

int64_t BundleWriter::Find(std::string_view key) const {
  const auto sorted_end = entries_.begin() + static_cast<std::ptrdiff_t>(sorted_);
  auto it = std::lower_bound(entries_.begin(), sorted_end, key,
                             [this](const Entry& e, std::string_view k) { return KeyOf(e) < k; });
  if (it != sorted_end && KeyOf(*it) == key) return it - entries_.begin();
  auto in_tail = tail_.find(std::string(key));
  return in_tail == tail_.end() ? -1 : static_cast<int64_t>(in_tail->second);
}

BundleWriter::Entry& BundleWriter::Insert(std::string_view key, int dtype,
                                          const TensorShape& shape) {
  if (FollowsAll(key)) {
    ++sorted_;
  } else {
    tail_.emplace(key, entries_.size());
  }
  Entry& e = entries_.emplace_back(Entry{.key_offset = keys_.size(),
                                         .key_size = key.size(),
                                         .dims_offset = dims_.size(),
                                         .rank = shape.rank(),
                                         .dtype = dtype});
  keys_.append(key);
  dims_.insert(dims_.end(), shape.dims().begin(), shape.dims().end());
  return e;
}

Status BundleWriter::FlushBuffer() {
  CKFLOW_RETURN_IF_ERROR(WaitForWrite());
  if (buffer_.empty()) return OkStatus();
  in_flight_.swap(buffer_);
  buffer_.clear();
  if (buffer_.capacity() < kBufferSize) buffer_.reserve(kBufferSize);
  const uint64_t offset = size_ - in_flight_.size();
  write_->Start([this, offset] {
    in_flight_status_ = data_file_->WriteAt(offset, in_flight_);
    // A synced bundle starts writeback as it goes, so the final fsync
    // overlaps with the writing instead of following all of it.
    if (options_.sync) data_file_->StartWriteback(offset, in_flight_.size());
  });
  return OkStatus();
}

Status BundleWriter::WaitForWrite() {
  write_->Wait();
  return std::exchange(in_flight_status_, OkStatus());
}

template <typename Read>
StatusOr<uint32_t> BundleWriter::AppendBytes(uint64_t size, const Read& read) {
  if (size < kBufferSize) {
    uint32_t crc = 0;
    CKFLOW_RETURN_IF_ERROR(read(0, size, [&](std::string_view piece) {
      crc = crc32c::Extend(crc, piece);
      buffer_.append(piece);
      return OkStatus();
    }));
    size_ += size;
    if (buffer_.size() >= kBufferSize) CKFLOW_RETURN_IF_ERROR(FlushBuffer());
    return crc;
  }
  // The chunks below are written on several threads: none while the
  // buffer's write is still going.
  CKFLOW_RETURN_IF_ERROR(FlushBuffer());
  CKFLOW_RETURN_IF_ERROR(WaitForWrite());
  const uint64_t base = size_;
  WritableFile* file = data_file_.get();
  CKFLOW_ASSIGN_OR_RETURN(
      uint32_t crc,
      internal::ParallelChunkedCrc(size, kChunkSize,
                                   [&](uint64_t offset, uint64_t length) -> StatusOr<uint32_t> {
                                     uint32_t piece_crc = 0;
                                     uint64_t at = base + offset;
                                     auto write = [&](std::string_view piece) {
                                       piece_crc = crc32c::Extend(piece_crc, piece);
                                       Status written = file->WriteAt(at, piece);
                                       at += piece.size();
                                       return written;
                                     };
                                     CKFLOW_RETURN_IF_ERROR(read(offset, length, write));
                                     if (options_.sync) file->StartWriteback(base + offset, length);
                                     return piece_crc;
                                   }));
  size_ += size;
  return crc;
}

StatusOr<uint32_t> BundleWriter::AppendData(std::string_view data) {
  return AppendBytes(data.size(), [data](uint64_t offset, uint64_t length, const auto& consume) {
    return consume(data.substr(offset, length));
  });
}

Status BundleWriter::Add(std::string_view key, const Tensor& tensor) {
  CKFLOW_RETURN_IF_ERROR(CheckAdd(key));
  if (!tensor.IsValid()) {
    return InvalidArgumentError("key '", key, "': cannot save an invalid (default) tensor");
  }
  if (tensor.dtype() == DT_RESOURCE) {
    return InvalidArgumentError("key '", key, "': a resource tensor cannot be saved");
  }
  if (const internal::TensorSource* source = internal::SourceOf(tensor)) {
    const uint64_t offset = size_;
    const uint64_t size = tensor.TotalBytes();
    StatusOr<uint32_t> crc =
        AppendBytes(size, [source](uint64_t at, uint64_t length, const auto& consume) {
          return source->Read(at, length, consume);
        });
    if (!crc.ok()) {
      write_error_ = crc.status().WithContext(data_temp_path_);
      return write_error_;
    }
    Entry& e = Insert(key, tensor.dtype(), tensor.shape());
    e.offset = static_cast<int64_t>(offset);
    e.size = static_cast<int64_t>(size);
    e.masked_crc32c = crc32c::Mask(*crc);
    return OkStatus();
  }
  if (tensor.dtype() != DT_STRING) {
    std::string_view bytes(static_cast<const char*>(tensor.raw_data()), tensor.TotalBytes());
    return AddRaw(key, tensor.dtype(), tensor.shape(), bytes);
  }
  std::string encoded;
  auto strings = tensor.flat<std::string>();
  encoded.reserve(internal::EncodedStringTensorSize(strings));
  const uint32_t crc = internal::EncodeStringTensor(strings, &encoded);
  const uint64_t offset = size_;
  StatusOr<uint32_t> written = AppendData(encoded);
  if (!written.ok()) {
    write_error_ = written.status().WithContext(data_temp_path_);
    return write_error_;
  }
  Entry& e = Insert(key, DT_STRING, tensor.shape());
  e.offset = static_cast<int64_t>(offset);
  e.size = static_cast<int64_t>(encoded.size());
  e.masked_crc32c = crc32c::Mask(crc);
  return OkStatus();
}

Status BundleWriter::AddRaw(std::string_view key, int dtype, const TensorShape& shape,
                            std::string_view data) {
  CKFLOW_RETURN_IF_ERROR(CheckAdd(key));
  const size_t element_size = StoredElementSize(dtype);
  if (element_size == 0) {
    return InvalidArgumentError("key '", key, "': dtype ", StoredDataTypeName(dtype),
                                " has no fixed element size");
  }
  if (data.size() / element_size != static_cast<uint64_t>(shape.num_elements()) ||
      data.size() % element_size != 0) {
    return InvalidArgumentError("key '", key, "': ", data.size(), " bytes do not hold ",
                                StoredDataTypeName(dtype), shape.ToString());
  }
  const uint64_t offset = size_;
  StatusOr<uint32_t> crc = AppendData(data);
  if (!crc.ok()) {
    write_error_ = crc.status().WithContext(data_temp_path_);
    return write_error_;
  }
  Entry& e = Insert(key, dtype, shape);
  e.offset = static_cast<int64_t>(offset);
  e.size = static_cast<int64_t>(data.size());
  e.masked_crc32c = crc32c::Mask(*crc);
  return OkStatus();
}

Status BundleWriter::AddSlice(std::string_view full_key, const TensorShape& full_shape,
                              const TensorSlice& slice, const Tensor& slice_tensor) {
  if (Status fits = slice.CheckFits(full_shape); !fits.ok()) {
    return fits.WithContext("adding a slice of '" + std::string(full_key) + "'");
  }
  const TensorShape shape = slice.ShapeIn(full_shape);
  if (!slice_tensor.IsValid() || !(slice_tensor.shape() == shape)) {
    return InvalidArgumentError(
        "key '", full_key, "': slice ", slice.ToString(), " of ", full_shape.ToString(), " is ",
        shape.ToString(), ", the tensor is ",
        slice_tensor.IsValid() ? slice_tensor.shape().ToString() : std::string("invalid"));
  }
  if (slice.IsFullIn(full_shape)) return Add(full_key, slice_tensor);
  int64_t full = Find(full_key);
  if (full < 0) {
    CKFLOW_RETURN_IF_ERROR(CheckAdd(full_key));
  } else if (const Entry& e = entries_[full]; e.slices.empty() || e.dtype != slice_tensor.dtype() ||
                                              !std::ranges::equal(DimsOf(e), full_shape.dims())) {
    return InvalidArgumentError(
        "key '", full_key, "': a slice of ", DataTypeName(slice_tensor.dtype()),
        full_shape.ToString(), " added to ",
        e.slices.empty() ? "an unsliced tensor" : "a tensor of another dtype or shape", ", ",
        StoredDataTypeName(e.dtype), TensorShape(DimsOf(e)).ToString());
  }
  CKFLOW_RETURN_IF_ERROR(Add(EncodeTensorNameSlice(full_key, slice), slice_tensor));
  if (full < 0) {
    Insert(full_key, slice_tensor.dtype(), full_shape);
    full = static_cast<int64_t>(entries_.size()) - 1;
  }
  entries_[full].slices.push_back(slice);
  return OkStatus();
}

Status BundleWriter::FinishFiles() {
  CKFLOW_RETURN_IF_ERROR(write_error_);
  CKFLOW_RETURN_IF_ERROR(FlushBuffer());
  CKFLOW_RETURN_IF_ERROR(WaitForWrite());
  if (options_.sync) CKFLOW_RETURN_IF_ERROR(data_file_->Sync());
  CKFLOW_RETURN_IF_ERROR(data_file_->Close());
  data_file_.reset();

  // The index wants key order: the in-order run as it is, merged with the
  // rest sorted.
  std::vector<const Entry*> order;
  order.reserve(entries_.size());
  for (const Entry& e : entries_) order.push_back(&e);
  if (!tail_.empty()) {
    auto by_key = [this](const Entry* a, const Entry* b) { return KeyOf(*a) < KeyOf(*b); };
    const auto run_end = order.begin() + static_cast<std::ptrdiff_t>(sorted_);
    std::sort(run_end, order.end(), by_key);
    std::inplace_merge(order.begin(), run_end, order.end(), by_key);
  }
  internal::TableWriter table;
  std::string value;  // reused by every entry, as is the proto
  internal::MakeBundleHeader(1).SerializeToString(&value);
  CKFLOW_RETURN_IF_ERROR(table.Add("", value));
  // Every field is set for every entry instead of Clear()ing the proto:
  // protobuf 3.21's Clear() deletes the shape sub-message, and the next
  // entry allocated it and its dims again (a fifth of the index's cost).
  // Zero fields are not serialized either way, so the bytes are the same.
  tensorflow::BundleEntryProto proto;
  google::protobuf::RepeatedPtrField<tensorflow::TensorShapeProto::Dim>* dims =
      proto.mutable_shape()->mutable_dim();  // present even for scalars
  for (const Entry* e : order) {
    proto.set_dtype(static_cast<tensorflow::DataType>(e->dtype));
    const std::span<const int64_t> sizes = DimsOf(*e);
    while (dims->size() > static_cast<int>(sizes.size())) dims->RemoveLast();
    for (size_t d = 0; d < sizes.size(); ++d) {
      (static_cast<int>(d) < dims->size() ? dims->Mutable(static_cast<int>(d)) : dims->Add())
          ->set_size(sizes[d]);
    }
    proto.set_shard_id(0);
    proto.set_offset(e->offset);
    proto.set_size(e->size);
    proto.set_crc32c(e->masked_crc32c);
    proto.clear_slices();
    for (const TensorSlice& slice : e->slices) {
      tensorflow::TensorSliceProto* slice_proto = proto.add_slices();
      for (const TensorSlice::Extent& extent : slice.extents) {
        tensorflow::TensorSliceProto::Extent* out = slice_proto->add_extent();
        // As TensorFlow's TensorSlice::AsProto: a whole dimension is an
        // empty extent.
        if (extent.length != TensorSlice::kFullExtent) {
          out->set_start(extent.start);
          out->set_length(extent.length);
        }
      }
    }
    proto.SerializeToString(&value);
    CKFLOW_RETURN_IF_ERROR(table.Add(KeyOf(*e), value));
  }
  CKFLOW_ASSIGN_OR_RETURN(std::string index, table.Finish());
  CKFLOW_RETURN_IF_ERROR(internal::WriteNewFile(fs_, index_temp_path_, index, options_.sync));
  // Both files are complete; only now touch the final names, index last, so
  // a reader never finds an index without its data.
  const std::pair<std::string, std::string> moves[] = {
      {data_temp_path_, DataFilename(prefix_, 0, 1)},
      {index_temp_path_, IndexFilename(prefix_)},
  };
  CKFLOW_RETURN_IF_ERROR(internal::MoveIntoPlace(fs_, moves));
  renamed_ = true;
  return OkStatus();
}

Status BundleWriter::Finish() {
  if (finished_) return FailedPreconditionError("bundle '", prefix_, "' is already finished");
  finished_ = true;
  Status s = FinishFiles();
  if (!s.ok()) DeleteTempFiles();
  return s;
}

}  // namespace ckflow
