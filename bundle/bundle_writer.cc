#include "bundle/bundle_writer.h"

#include <utility>
#include <vector>

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
      data_file_(std::move(data_file)) {
  buffer_.reserve(kBufferSize);
}

BundleWriter::~BundleWriter() {
  if (!renamed_) DeleteTempFiles();
}

void BundleWriter::DeleteTempFiles() {
  if (data_file_) {
    data_file_->Close().IgnoreError();
    data_file_.reset();
  }
  fs_->DeleteFile(data_temp_path_).IgnoreError();
  fs_->DeleteFile(index_temp_path_).IgnoreError();
}

Status BundleWriter::CheckAdd(std::string_view key) const {
  if (finished_) return FailedPreconditionError("bundle '", prefix_, "' is already finished");
  if (!write_error_.ok()) return write_error_;
  if (key.empty()) return InvalidArgumentError("key \"\" is reserved for the bundle header");
  if (entries_.find(key) != entries_.end()) {
    return InvalidArgumentError("key '", key, "' added twice to bundle '", prefix_, "'");
  }
  return OkStatus();
}

Status BundleWriter::FlushBuffer() {
  if (buffer_.empty()) return OkStatus();
  Status s = data_file_->WriteAt(size_ - buffer_.size(), buffer_);
  // A synced bundle starts writeback as it goes, so the final fsync
  // overlaps with the writing instead of following all of it.
  if (options_.sync) data_file_->StartWriteback(size_ - buffer_.size(), buffer_.size());
  buffer_.clear();
  return s;
}

StatusOr<uint32_t> BundleWriter::AppendData(std::string_view data) {
  if (data.size() < kBufferSize) {
    uint32_t crc = crc32c::Value(data);
    buffer_.append(data);
    size_ += data.size();
    if (buffer_.size() >= kBufferSize) CKFLOW_RETURN_IF_ERROR(FlushBuffer());
    return crc;
  }
  CKFLOW_RETURN_IF_ERROR(FlushBuffer());
  const uint64_t base = size_;
  WritableFile* file = data_file_.get();
  CKFLOW_ASSIGN_OR_RETURN(
      uint32_t crc,
      internal::ParallelChunkedCrc(data.size(), kChunkSize,
                                   [&](uint64_t offset, uint64_t length) -> StatusOr<uint32_t> {
                                     std::string_view piece = data.substr(offset, length);
                                     uint32_t piece_crc = crc32c::Value(piece);
                                     CKFLOW_RETURN_IF_ERROR(file->WriteAt(base + offset, piece));
                                     if (options_.sync) file->StartWriteback(base + offset, length);
                                     return piece_crc;
                                   }));
  size_ += data.size();
  return crc;
}

Status BundleWriter::Add(std::string_view key, const Tensor& tensor) {
  CKFLOW_RETURN_IF_ERROR(CheckAdd(key));
  if (!tensor.IsValid()) {
    return InvalidArgumentError("key '", key, "': cannot save an invalid (default) tensor");
  }
  if (tensor.dtype() == DT_RESOURCE) {
    return InvalidArgumentError("key '", key, "': a resource tensor cannot be saved");
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
  entries_.emplace(std::string(key),
                   Entry{DT_STRING, tensor.shape(), static_cast<int64_t>(offset),
                         static_cast<int64_t>(encoded.size()), crc32c::Mask(crc)});
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
  entries_.emplace(std::string(key), Entry{dtype, shape, static_cast<int64_t>(offset),
                                           static_cast<int64_t>(data.size()), crc32c::Mask(*crc)});
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
  auto it = entries_.find(full_key);
  if (it == entries_.end()) {
    CKFLOW_RETURN_IF_ERROR(CheckAdd(full_key));
  } else if (it->second.slices.empty() || it->second.dtype != slice_tensor.dtype() ||
             !(it->second.shape == full_shape)) {
    return InvalidArgumentError(
        "key '", full_key, "': a slice of ", DataTypeName(slice_tensor.dtype()),
        full_shape.ToString(), " added to ",
        it->second.slices.empty() ? "an unsliced tensor" : "a tensor of another dtype or shape",
        ", ", StoredDataTypeName(it->second.dtype), it->second.shape.ToString());
  }
  CKFLOW_RETURN_IF_ERROR(Add(EncodeTensorNameSlice(full_key, slice), slice_tensor));
  if (it == entries_.end()) {
    it = entries_.emplace(std::string(full_key), Entry{slice_tensor.dtype(), full_shape, 0, 0, 0})
             .first;
  }
  it->second.slices.push_back(slice);
  return OkStatus();
}

Status BundleWriter::FinishFiles() {
  CKFLOW_RETURN_IF_ERROR(write_error_);
  CKFLOW_RETURN_IF_ERROR(FlushBuffer());
  if (options_.sync) CKFLOW_RETURN_IF_ERROR(data_file_->Sync());
  CKFLOW_RETURN_IF_ERROR(data_file_->Close());
  data_file_.reset();

  std::vector<std::pair<std::string, tensorflow::BundleEntryProto>> entries;
  entries.reserve(entries_.size());
  for (const auto& [key, e] : entries_) {
    tensorflow::BundleEntryProto proto;
    proto.set_dtype(static_cast<tensorflow::DataType>(e.dtype));
    tensorflow::TensorShapeProto* shape = proto.mutable_shape();  // present even for scalars
    for (int64_t d : e.shape.dims()) shape->add_dim()->set_size(d);
    proto.set_shard_id(0);
    proto.set_offset(e.offset);
    proto.set_size(e.size);
    proto.set_crc32c(e.masked_crc32c);
    for (const TensorSlice& slice : e.slices) {
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
    entries.emplace_back(key, std::move(proto));
  }
  CKFLOW_ASSIGN_OR_RETURN(std::string index,
                          internal::BuildBundleIndex(internal::MakeBundleHeader(1), entries));
  {
    CKFLOW_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file,
                            fs_->NewWritableFile(index_temp_path_));
    CKFLOW_RETURN_IF_ERROR(file->WriteAt(0, index));
    if (options_.sync) CKFLOW_RETURN_IF_ERROR(file->Sync());
    CKFLOW_RETURN_IF_ERROR(file->Close());
  }
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
