#include "bundle/v1_checkpoint_reader.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

#include "bundle/bundle_format.h"
#include "bundle/bundle_index_internal.h"
#include "bundle/protos/saved_tensor_slice.pb.h"

namespace ckflow {
namespace {

// Whether two slices of a tensor of `shape` share an element.
bool Overlap(const TensorSlice& a, const TensorSlice& b, const TensorShape& shape) {
  for (int d = 0; d < shape.rank(); ++d) {
    if (std::max(a.Begin(d), b.Begin(d)) >=
        std::min(a.End(d, shape.dim(d)), b.End(d, shape.dim(d))))
      return false;
  }
  return true;
}

// Marks the elements of `slice` in *covered (one flag per element of
// `shape`, row-major); false if one was marked already.
bool MarkCovered(const TensorSlice& slice, const TensorShape& shape, std::vector<bool>* covered) {
  const auto mark = [covered](int64_t i) {
    if ((*covered)[i]) return false;
    (*covered)[i] = true;
    return true;
  };
  const int rank = shape.rank();
  if (rank == 0) return mark(0);
  std::vector<int64_t> at(rank);
  for (int d = 0; d < rank; ++d) at[d] = slice.Begin(d);
  for (int d = 0; d < rank; ++d) {
    if (slice.Begin(d) >= slice.End(d, shape.dim(d))) return true;  // empty
  }
  while (true) {
    int64_t flat = 0;
    for (int d = 0; d < rank; ++d) flat = flat * shape.dim(d) + at[d];
    for (int64_t i = 0; i < slice.End(rank - 1, shape.dim(rank - 1)) - at[rank - 1]; ++i) {
      if (!mark(flat + i)) return false;
    }
    int d = rank - 2;
    for (; d >= 0; --d) {
      if (++at[d] < slice.End(d, shape.dim(d))) break;
      at[d] = slice.Begin(d);
    }
    if (d < 0) return true;
  }
}

// Copies the elements `src` (box src_box of a tensor of `full` shape) and
// *dst (box dst_box) have in common from src into *dst, one contiguous run
// of the last dimension at a time.
void CopyIntersection(const Tensor& src, const TensorSlice& src_box, Tensor* dst,
                      const TensorSlice& dst_box, const TensorShape& full) {
  const int rank = full.rank();
  std::vector<int64_t> lo(rank), hi(rank);
  for (int d = 0; d < rank; ++d) {
    lo[d] = std::max(src_box.Begin(d), dst_box.Begin(d));
    hi[d] = std::min(src_box.End(d, full.dim(d)), dst_box.End(d, full.dim(d)));
    if (lo[d] >= hi[d]) return;
  }
  const auto offset = [&](const std::vector<int64_t>& at, const TensorSlice& box,
                          const TensorShape& shape) {
    int64_t flat = 0;
    for (int d = 0; d < rank; ++d) flat = flat * shape.dim(d) + (at[d] - box.Begin(d));
    return flat;
  };
  const int64_t run = rank == 0 ? 1 : hi[rank - 1] - lo[rank - 1];
  const size_t element_size = DataTypeSize(src.dtype());
  std::vector<int64_t> at = lo;
  while (true) {
    const int64_t from = offset(at, src_box, src.shape());
    const int64_t to = offset(at, dst_box, dst->shape());
    if (src.dtype() == DT_STRING) {
      std::copy_n(src.flat<std::string>().begin() + from, run,
                  dst->flat<std::string>().begin() + to);
    } else {
      std::memcpy(static_cast<char*>(dst->raw_data()) + to * element_size,
                  static_cast<const char*>(src.raw_data()) + from * element_size,
                  run * element_size);
    }
    int d = rank - 2;  // the last dimension is the run
    for (; d >= 0; --d) {
      if (++at[d] < hi[d]) break;
      at[d] = lo[d];
    }
    if (d < 0) return;
  }
}

// The field TensorFlow's slice writer fills for `dtype`, converted to
// element type T; `per_element` values make one element (2 for complex).
template <typename T, typename Field>
Status CopyValues(const Field& field, int per_element, Tensor* out, const std::string& what) {
  const int64_t n = out->NumElements() * per_element;
  if (static_cast<int64_t>(field.size()) != n) {
    return DataLossError(what, ": holds ", field.size(), " values for ", out->NumElements(),
                         " elements");
  }
  T* dst = static_cast<T*>(out->raw_data());
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<T>(field.Get(static_cast<int>(i)));
  return OkStatus();
}

Status DecodeValues(const tensorflow::TensorProto& proto, Tensor* out, const std::string& what) {
  switch (out->dtype()) {
    case DT_FLOAT:
      return CopyValues<float>(proto.float_val(), 1, out, what);
    case DT_DOUBLE:
      return CopyValues<double>(proto.double_val(), 1, out, what);
    case DT_INT32:
      return CopyValues<int32_t>(proto.int_val(), 1, out, what);
    case DT_INT16:
      return CopyValues<int16_t>(proto.int_val(), 1, out, what);
    case DT_INT8:
      return CopyValues<int8_t>(proto.int_val(), 1, out, what);
    case DT_UINT8:
      return CopyValues<uint8_t>(proto.int_val(), 1, out, what);
    case DT_UINT16:
      return CopyValues<uint16_t>(proto.int_val(), 1, out, what);
    case DT_HALF:
    case DT_BFLOAT16:
      return CopyValues<uint16_t>(proto.half_val(), 1, out, what);
    case DT_INT64:
      return CopyValues<int64_t>(proto.int64_val(), 1, out, what);
    case DT_UINT32:
      return CopyValues<uint32_t>(proto.uint32_val(), 1, out, what);
    case DT_UINT64:
      return CopyValues<uint64_t>(proto.uint64_val(), 1, out, what);
    case DT_BOOL:
      return CopyValues<bool>(proto.bool_val(), 1, out, what);
    case DT_COMPLEX64:
      return CopyValues<float>(proto.scomplex_val(), 2, out, what);
    case DT_COMPLEX128:
      return CopyValues<double>(proto.dcomplex_val(), 2, out, what);
    case DT_STRING: {
      if (proto.string_val_size() != out->NumElements()) {
        return DataLossError(what, ": holds ", proto.string_val_size(), " strings for ",
                             out->NumElements(), " elements");
      }
      std::span<std::string> dst = out->flat<std::string>();
      for (int i = 0; i < proto.string_val_size(); ++i) dst[i] = proto.string_val(i);
      return OkStatus();
    }
    default:
      return InvalidArgumentError(what, ": dtype ", StoredDataTypeName(out->dtype()),
                                  " cannot be read from a V1 checkpoint");
  }
}

}  // namespace

V1CheckpointReader::V1CheckpointReader(std::string path, std::vector<TensorInfo> tensors,
                                       std::map<std::string, std::string, std::less<>> values)
    : path_(std::move(path)), tensors_(std::move(tensors)), values_(std::move(values)) {}

V1CheckpointReader::~V1CheckpointReader() = default;

StatusOr<std::unique_ptr<V1CheckpointReader>> V1CheckpointReader::Open(const std::string& path,
                                                                       FileSystem* fs) {
  if (fs == nullptr) fs = FileSystem::Default();
  CKFLOW_ASSIGN_OR_RETURN(std::string contents, fs->ReadFileToString(path));
  CKFLOW_ASSIGN_OR_RETURN(std::vector<internal::KeyValue> pairs,
                          internal::ReadTable(path, contents));
  contents.clear();
  auto corrupt = [&](std::string_view key, auto&&... what) {
    return DataLossError(path, ": key '", key, "': ", what...);
  };
  if (pairs.empty() || !pairs[0].first.empty()) {
    return DataLossError(path, ": not a V1 checkpoint (no metadata entry under key \"\")");
  }
  tensorflow::SavedTensorSlices meta;
  if (!meta.ParseFromString(pairs[0].second) || !meta.has_meta()) {
    return corrupt("", "not a SavedTensorSliceMeta");
  }
  std::map<std::string, std::string, std::less<>> values;
  for (size_t i = 1; i < pairs.size(); ++i) values.emplace(std::move(pairs[i]));
  std::vector<TensorInfo> tensors;
  for (const tensorflow::SavedSliceMeta& m : meta.meta().tensor()) {
    TensorInfo info;
    info.name = m.name();
    info.dtype = static_cast<DataType>(m.type());
    if (!IsSupportedDataType(info.dtype) || info.dtype == DT_RESOURCE) {
      return corrupt(m.name(), "unsupported dtype ", StoredDataTypeName(m.type()));
    }
    if (m.shape().unknown_rank()) return corrupt(m.name(), "shape has unknown rank");
    std::vector<int64_t> dims;
    for (const auto& d : m.shape().dim()) dims.push_back(d.size());
    StatusOr<TensorShape> shape = TensorShape::Make(dims);
    if (!shape.ok()) return corrupt(m.name(), "invalid shape: ", shape.status().message());
    info.shape = *std::move(shape);
    if (m.slice_size() == 0) return corrupt(m.name(), "no slices");
    int64_t covered = 0;
    for (const tensorflow::TensorSliceProto& proto : m.slice()) {
      TensorSlice slice = internal::TensorSliceFromProto(proto);
      if (Status fits = slice.CheckFits(info.shape); !fits.ok()) {
        return corrupt(m.name(), "slice ", slice.ToString(), ": ", fits.message());
      }
      const std::string key = EncodeTensorNameSlice(info.name, slice);
      auto stored = values.find(key);
      if (stored == values.end())
        return corrupt(m.name(), "slice ", slice.ToString(), " is missing");
      // Every value takes at least a byte, so a lookup never allocates more
      // than the file could fill.
      const int64_t elements = slice.ShapeIn(info.shape).num_elements();
      if (elements > static_cast<int64_t>(stored->second.size())) {
        return corrupt(m.name(), "slice ", slice.ToString(), " of ", elements,
                       " elements is stored in ", stored->second.size(), " bytes");
      }
      covered += elements;
      info.slices.push_back(std::move(slice));
    }
    if (covered != info.shape.num_elements()) {
      return corrupt(m.name(), "slices hold ", covered, " of ", info.shape.num_elements(),
                     " elements");
    }
    // As many elements as the tensor (so no more than the file has bytes):
    // they tile it exactly unless two overlap.
    std::vector<bool> marks(info.shape.num_elements());
    for (const TensorSlice& slice : info.slices) {
      if (!MarkCovered(slice, info.shape, &marks)) {
        return corrupt(m.name(), "slice ", slice.ToString(), " overlaps another");
      }
    }
    tensors.push_back(std::move(info));
  }
  std::sort(tensors.begin(), tensors.end(),
            [](const TensorInfo& a, const TensorInfo& b) { return a.name < b.name; });
  for (size_t i = 1; i < tensors.size(); ++i) {
    if (tensors[i].name == tensors[i - 1].name) return corrupt(tensors[i].name, "listed twice");
  }
  return std::unique_ptr<V1CheckpointReader>(
      new V1CheckpointReader(path, std::move(tensors), std::move(values)));
}

const V1CheckpointReader::TensorInfo* V1CheckpointReader::Find(std::string_view name) const {
  auto it = std::lower_bound(tensors_.begin(), tensors_.end(), name,
                             [](const TensorInfo& t, std::string_view n) { return t.name < n; });
  return it != tensors_.end() && it->name == name ? &*it : nullptr;
}

StatusOr<Tensor> V1CheckpointReader::Lookup(std::string_view name) const {
  const TensorInfo* info = Find(name);
  if (info == nullptr) return NotFoundError(path_, ": no tensor '", name, "'");
  return LookupSlice(name, TensorSlice::Full(info->shape.rank()));
}

StatusOr<Tensor> V1CheckpointReader::LookupSlice(std::string_view name,
                                                 const TensorSlice& want) const {
  const TensorInfo* info = Find(name);
  if (info == nullptr) return NotFoundError(path_, ": no tensor '", name, "'");
  if (Status fits = want.CheckFits(info->shape); !fits.ok()) {
    return InvalidArgumentError(path_, ": tensor '", name, "': ", fits.message());
  }
  CKFLOW_ASSIGN_OR_RETURN(Tensor out, Tensor::Allocate(info->dtype, want.ShapeIn(info->shape)));
  for (const TensorSlice& stored : info->slices) {
    if (!Overlap(stored, want, info->shape)) continue;
    const std::string key = EncodeTensorNameSlice(info->name, stored);
    const std::string what = path_ + ": key '" + info->name + "' slice " + stored.ToString();
    tensorflow::SavedTensorSlices value;
    if (!value.ParseFromString(values_.find(key)->second) || !value.has_data()) {
      return DataLossError(what, ": not a SavedSlice");
    }
    if (value.data().name() != info->name ||
        !(internal::TensorSliceFromProto(value.data().slice()) == stored)) {
      return DataLossError(what, ": the entry names another slice ('", value.data().name(), "')");
    }
    CKFLOW_ASSIGN_OR_RETURN(Tensor part,
                            Tensor::Allocate(info->dtype, stored.ShapeIn(info->shape)));
    CKFLOW_RETURN_IF_ERROR(DecodeValues(value.data().data(), &part, what));
    CopyIntersection(part, stored, &out, want, info->shape);
  }
  return out;
}

bool IsV1Checkpoint(const std::string& path, FileSystem* fs) {
  if (fs == nullptr) fs = FileSystem::Default();
  return !fs->FileExists(IndexFilename(path)).ok() && fs->FileExists(path).ok() &&
         !fs->IsDirectory(path);
}

}  // namespace ckflow
