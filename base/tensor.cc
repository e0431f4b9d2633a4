#include "base/tensor.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <sstream>
#include <unordered_map>
#include <vector>

#include "base/mutex.h"
#include "base/tensor_cache_internal.h"
#include "base/tensor_source_internal.h"

namespace ckflow {
namespace {

// See tensor_cache_internal.h.
class BlockCache {
 public:
  static BlockCache& Get() {
    // Never destroyed: tensors in static objects may free after exit starts.
    static auto* cache = new BlockCache;
    return *cache;
  }

  // Whether tensors of `bytes` use the cache.
  static bool Holds(size_t bytes) {
    return bytes >= internal::kTensorCacheMinBlock && bytes <= internal::kTensorCacheMaxBlock;
  }

  // A cached block of exactly `bytes`, or null.
  void* Take(size_t bytes) CKFLOW_EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    auto it = free_.find(bytes);
    if (it == free_.end()) return nullptr;
    void* block = it->second.back();
    it->second.pop_back();
    if (it->second.empty()) free_.erase(it);
    held_ -= bytes;
    Unpoison(block, bytes);
    return block;
  }

  // Keeps `block` (malloc()ed, `bytes` long) for a later Take; when full,
  // frees blocks of the sizes that hold the most until it fits.
  void Put(void* block, size_t bytes) CKFLOW_EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    while (held_ + bytes > internal::kTensorCacheCapacity && !free_.empty()) EvictOneLocked();
    try {
      free_[bytes].push_back(block);
    } catch (const std::bad_alloc&) {
      std::free(block);
      return;
    }
    held_ += bytes;
    Poison(block, bytes);
  }

  size_t held() CKFLOW_EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    return held_;
  }

  void Release() CKFLOW_EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    ReleaseLocked();
  }

 private:
  // Frees one block of the size whose blocks hold the most bytes: a working
  // set a little larger than the cache keeps most of its blocks (emptying
  // the whole cache instead would make every step fault them all in again).
  void EvictOneLocked() CKFLOW_REQUIRES(mu_) {
    auto most = free_.begin();
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->first * it->second.size() > most->first * most->second.size()) most = it;
    }
    void* block = most->second.back();
    most->second.pop_back();
    held_ -= most->first;
    Unpoison(block, most->first);
    std::free(block);
    if (most->second.empty()) free_.erase(most);
  }

  void ReleaseLocked() CKFLOW_REQUIRES(mu_) {
    for (auto& [bytes, blocks] : free_) {
      for (void* block : blocks) {
        Unpoison(block, bytes);
        std::free(block);
      }
    }
    free_.clear();
    held_ = 0;
  }

  static void Poison([[maybe_unused]] void* block, [[maybe_unused]] size_t bytes) {
#ifdef CKFLOW_ASAN
    ASAN_POISON_MEMORY_REGION(block, bytes);
#endif
  }
  static void Unpoison([[maybe_unused]] void* block, [[maybe_unused]] size_t bytes) {
#ifdef CKFLOW_ASAN
    ASAN_UNPOISON_MEMORY_REGION(block, bytes);
#endif
  }

  Mutex mu_;
  std::unordered_map<size_t, std::vector<void*>> free_ CKFLOW_GUARDED_BY(mu_);  // by exact size
  size_t held_ CKFLOW_GUARDED_BY(mu_) = 0;
};

}  // namespace

namespace internal {
size_t TensorCacheBytes() { return BlockCache::Get().held(); }
void ReleaseTensorCache() { BlockCache::Get().Release(); }
}  // namespace internal

TensorShape::TensorShape(std::initializer_list<int64_t> dims)
    : TensorShape(std::span<const int64_t>(dims.begin(), dims.size())) {}

TensorShape::TensorShape(std::span<const int64_t> dims) {
  StatusOr<TensorShape> shape = Make(dims);
  CKFLOW_CHECK(shape.ok());
  *this = std::move(shape).value();
}

StatusOr<TensorShape> TensorShape::Make(std::span<const int64_t> dims) {
  TensorShape shape;
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) {
      return InvalidArgumentError("negative dimension ", d, " in shape");
    }
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) {
      return InvalidArgumentError("shape's element count overflows int64");
    }
    n *= d;
  }
  if (dims.size() > static_cast<size_t>(kInlineRank)) {
    shape.heap_ = std::make_unique<int64_t[]>(dims.size());
    std::copy(dims.begin(), dims.end(), shape.heap_.get());
  } else {
    std::copy(dims.begin(), dims.end(), shape.inline_);
  }
  shape.rank_ = static_cast<int>(dims.size());
  shape.num_elements_ = n;
  return shape;
}

TensorShape& TensorShape::operator=(const TensorShape& other) {
  if (this == &other) return *this;
  if (other.rank_ > kInlineRank) {
    heap_ = std::make_unique<int64_t[]>(other.rank_);
    std::copy(other.heap_.get(), other.heap_.get() + other.rank_, heap_.get());
  } else {
    heap_.reset();
    std::copy(other.inline_, other.inline_ + kInlineRank, inline_);
  }
  rank_ = other.rank_;
  num_elements_ = other.num_elements_;
  return *this;
}

TensorShape& TensorShape::operator=(TensorShape&& other) noexcept {
  if (this == &other) return *this;
  std::copy(other.inline_, other.inline_ + kInlineRank, inline_);
  heap_ = std::move(other.heap_);
  rank_ = std::exchange(other.rank_, 0);
  num_elements_ = std::exchange(other.num_elements_, 1);
  return *this;
}

void TensorShape::AddDim(int64_t size) {
  CKFLOW_CHECK(size >= 0);
  CKFLOW_CHECK(size == 0 || num_elements_ <= std::numeric_limits<int64_t>::max() / size);
  if (rank_ < kInlineRank) {
    inline_[rank_] = size;
  } else {
    // Past the inline dims: a rare rank, so one allocation per added dim.
    auto grown = std::make_unique<int64_t[]>(rank_ + 1);
    std::copy(data(), data() + rank_, grown.get());
    grown[rank_] = size;
    heap_ = std::move(grown);
  }
  ++rank_;
  num_elements_ *= size;
}

std::string TensorShape::ToString() const {
  std::string out = "[";
  for (int i = 0; i < rank_; ++i) {
    if (i) out += ",";
    out += std::to_string(dim(i));
  }
  return out + "]";
}

// Owns the aligned allocation and the non-trivial elements in it.
struct Tensor::Buffer {
  DataType dtype;
  int64_t n;
  size_t block_bytes = 0;  // of block, the tensor's bytes and the slack
  bool cached = false;     // block comes from and goes back to the BlockCache
  void* block = nullptr;   // what malloc returned
  void* data = nullptr;    // block rounded up to kAlignment
  // Set instead of the rest for a tensor over a source (no bytes here).
  std::shared_ptr<const internal::TensorSource> source;

  explicit Buffer(std::shared_ptr<const internal::TensorSource> from)
      : dtype(DT_INVALID), n(0), source(std::move(from)) {}

  Buffer(DataType type, int64_t count, size_t bytes) : dtype(type), n(count) {
    // malloc and round up rather than aligned_alloc: glibc's memalign
    // cuts each block out of a larger one and frees the leftovers, and
    // creating thousands of small variables then walks those fragments.
    constexpr size_t kSlack = kAlignment - alignof(std::max_align_t);
    block_bytes = std::max<size_t>(bytes, 1) + kSlack;
    cached = BlockCache::Holds(bytes);
    if (cached) block = BlockCache::Get().Take(block_bytes);
    if (block == nullptr) block = std::malloc(block_bytes);
    if (block == nullptr) return;
    const auto address = reinterpret_cast<uintptr_t>(block);
    data = reinterpret_cast<void*>((address + kAlignment - 1) & ~uintptr_t{kAlignment - 1});
    if (dtype == DT_STRING) {
      auto* s = static_cast<std::string*>(data);
      for (int64_t i = 0; i < n; ++i) new (s + i) std::string();
    } else if (dtype == DT_RESOURCE) {
      auto* r = static_cast<ResourceHandle*>(data);
      for (int64_t i = 0; i < n; ++i) new (r + i) ResourceHandle();
    }
  }
  ~Buffer() {
    if (data == nullptr) return;
    if (dtype == DT_STRING) {
      auto* s = static_cast<std::string*>(data);
      for (int64_t i = 0; i < n; ++i) s[i].~basic_string();
    } else if (dtype == DT_RESOURCE) {
      auto* r = static_cast<ResourceHandle*>(data);
      for (int64_t i = 0; i < n; ++i) r[i].~ResourceHandle();
    }
    if (cached) {
      BlockCache::Get().Put(block, block_bytes);
    } else {
      std::free(block);
    }
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
};

namespace {

size_t ElementBytes(DataType dtype) {
  if (dtype == DT_STRING) return sizeof(std::string);
  if (dtype == DT_RESOURCE) return sizeof(ResourceHandle);
  return DataTypeSize(dtype);
}

}  // namespace

StatusOr<Tensor> Tensor::Allocate(DataType dtype, const TensorShape& shape) {
  if (!IsSupportedDataType(dtype)) {
    return InvalidArgumentError("unsupported dtype ", static_cast<int>(dtype));
  }
  size_t elem = ElementBytes(dtype);
  // Refuse what the machine could never hold rather than asking the
  // allocator: a corrupt file must not trigger a huge allocation attempt.
  constexpr int64_t kMaxBytes = int64_t{1} << 46;  // 64 TiB
  if (shape.num_elements() > kMaxBytes / static_cast<int64_t>(elem)) {
    return ResourceExhaustedError("tensor of ", DataTypeName(dtype), shape.ToString(),
                                  " is too large to allocate");
  }
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = shape;
  t.buffer_ = std::make_shared<Buffer>(dtype, shape.num_elements(),
                                       static_cast<size_t>(shape.num_elements()) * elem);
  if (t.buffer_->data == nullptr) {
    return ResourceExhaustedError("out of memory allocating ", DataTypeName(dtype),
                                  shape.ToString());
  }
  t.data_ = t.buffer_->data;
  return t;
}

namespace internal {

Tensor TensorOverSource(DataType dtype, const TensorShape& shape,
                        std::shared_ptr<const TensorSource> source) {
  CKFLOW_CHECK(IsSupportedDataType(dtype) && dtype != DT_STRING && dtype != DT_RESOURCE);
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = shape;
  t.buffer_ = std::make_shared<Tensor::Buffer>(std::move(source));
  return t;
}

const TensorSource* SourceOf(const Tensor& tensor) {
  return tensor.buffer_ != nullptr ? tensor.buffer_->source.get() : nullptr;
}

}  // namespace internal

Tensor::Tensor(DataType dtype, const TensorShape& shape) {
  StatusOr<Tensor> t = Allocate(dtype, shape);
  if (!t.ok()) internal::CheckFailed(__FILE__, __LINE__, t.status().ToString().c_str());
  *this = std::move(t).value();
}

size_t Tensor::TotalBytes() const {
  return static_cast<size_t>(NumElements()) * ElementBytes(dtype_);
}

void Tensor::CheckType(DataType expected) const {
  if (expected != dtype_) {
    std::string what = "tensor of dtype " + std::string(DataTypeName(dtype_)) + " accessed as " +
                       std::string(DataTypeName(expected));
    internal::CheckFailed(__FILE__, __LINE__, what.c_str());
  }
}

ResourceHandle& Tensor::resource_handle() {
  CheckType(DT_RESOURCE);
  CKFLOW_CHECK(NumElements() >= 1);
  return *static_cast<ResourceHandle*>(data_);
}

const ResourceHandle& Tensor::resource_handle() const {
  CheckType(DT_RESOURCE);
  CKFLOW_CHECK(NumElements() >= 1);
  return *static_cast<const ResourceHandle*>(data_);
}

StatusOr<Tensor> Tensor::Reshaped(const TensorShape& shape) const {
  if (shape.num_elements() != NumElements()) {
    return InvalidArgumentError("cannot reshape ", shape_.ToString(), " (", NumElements(),
                                " elements) to ", shape.ToString());
  }
  Tensor t = *this;
  t.shape_ = shape;
  return t;
}

Tensor Tensor::Clone() const {
  if (!IsValid()) return Tensor();
  Tensor t(dtype_, shape_);
  Status s = t.CopyFrom(*this);
  CKFLOW_CHECK(s.ok());
  return t;
}

Status Tensor::CopyFrom(const Tensor& other) {
  if (other.dtype_ != dtype_ || other.NumElements() != NumElements()) {
    return InvalidArgumentError("cannot copy ", DataTypeName(other.dtype_), other.shape_.ToString(),
                                " into ", DataTypeName(dtype_), shape_.ToString());
  }
  if (data_ == other.data_) return OkStatus();
  if (dtype_ == DT_STRING) {
    auto src = other.flat<std::string>();
    auto dst = flat<std::string>();
    for (size_t i = 0; i < src.size(); ++i) dst[i] = src[i];
  } else if (dtype_ == DT_RESOURCE) {
    auto* src = static_cast<const ResourceHandle*>(other.data_);
    auto* dst = static_cast<ResourceHandle*>(data_);
    for (int64_t i = 0; i < NumElements(); ++i) dst[i] = src[i];
  } else if (TotalBytes() > 0) {
    std::memcpy(data_, other.data_, TotalBytes());
  }
  return OkStatus();
}

double Tensor::ElementAsDouble(int64_t i) const {
  CKFLOW_CHECK(i >= 0 && i < NumElements());
  switch (dtype_) {
    case DT_FLOAT:
      return static_cast<const float*>(data_)[i];
    case DT_DOUBLE:
      return static_cast<const double*>(data_)[i];
    case DT_INT32:
      return static_cast<const int32_t*>(data_)[i];
    case DT_INT64:
      return static_cast<double>(static_cast<const int64_t*>(data_)[i]);
    case DT_INT8:
      return static_cast<const int8_t*>(data_)[i];
    case DT_INT16:
      return static_cast<const int16_t*>(data_)[i];
    case DT_UINT8:
      return static_cast<const uint8_t*>(data_)[i];
    case DT_UINT16:
      return static_cast<const uint16_t*>(data_)[i];
    case DT_UINT32:
      return static_cast<const uint32_t*>(data_)[i];
    case DT_UINT64:
      return static_cast<double>(static_cast<const uint64_t*>(data_)[i]);
    case DT_BOOL:
      return static_cast<const bool*>(data_)[i] ? 1.0 : 0.0;
    case DT_BFLOAT16:
      return static_cast<float>(static_cast<const bfloat16*>(data_)[i]);
    case DT_HALF:
      return static_cast<float>(static_cast<const float16*>(data_)[i]);
    default:
      internal::CheckFailed(__FILE__, __LINE__, "ElementAsDouble on a non-numeric tensor");
  }
}

std::pair<double, double> Tensor::ComplexElement(int64_t i) const {
  CKFLOW_CHECK(i >= 0 && i < NumElements());
  if (dtype_ == DT_COMPLEX64) {
    const float* p = static_cast<const float*>(data_) + 2 * i;
    return {p[0], p[1]};
  }
  CKFLOW_CHECK(dtype_ == DT_COMPLEX128);
  const double* p = static_cast<const double*>(data_) + 2 * i;
  return {p[0], p[1]};
}

std::string Tensor::DebugString(int max_values) const {
  if (!IsValid()) return "<invalid tensor>";
  std::ostringstream os;
  os << DataTypeName(dtype_) << shape_.ToString() << " {";
  int64_t n = std::min<int64_t>(NumElements(), max_values);
  for (int64_t i = 0; i < n; ++i) {
    if (i) os << ", ";
    if (dtype_ == DT_STRING) {
      const std::string& s = static_cast<const std::string*>(data_)[i];
      os << '"' << (s.size() > 40 ? s.substr(0, 40) + "..." : s) << '"';
    } else if (dtype_ == DT_RESOURCE) {
      os << "<resource " << static_cast<const ResourceHandle*>(data_)[i].name << ">";
    } else if (dtype_ == DT_COMPLEX64 || dtype_ == DT_COMPLEX128) {
      const auto [re, im] = ComplexElement(i);
      os << "(" << re << "," << im << ")";
    } else {
      os << ElementAsDouble(i);
    }
  }
  if (NumElements() > n) os << ", ...";
  os << "}";
  return os.str();
}

}  // namespace ckflow
