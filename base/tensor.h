// TensorShape and Tensor.
//
// A Tensor is a dtype, a shape and a contiguous, 64-byte-aligned, row-major
// buffer shared by reference count: copying a Tensor is cheap and aliases the
// same bytes (like TensorFlow's Tensor). Use Clone() for a deep copy.
// DT_STRING tensors hold std::string elements; DT_RESOURCE tensors hold one
// opaque handle (see ResourceHandle below). Eigen views of a tensor's buffer
// live in runtime/tensor_eigen_internal.h, so this header stays Eigen-free.
//
// Thread safety: a Tensor object is a value. Distinct Tensor objects that
// share a buffer may be read from many threads at once; writing through one
// while another reads the same buffer is the caller's to synchronize (the
// session does this for variables).

#ifndef CKFLOW_BASE_TENSOR_H_
#define CKFLOW_BASE_TENSOR_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "base/types.h"

namespace ckflow {

// A fully known shape: every dimension >= 0. Up to kInlineRank dimensions
// are held inline, so copying a tensor (which every read of a variable and
// every hand-over between ops does) allocates nothing for its shape.
class TensorShape {
 public:
  static constexpr int kInlineRank = 4;

  TensorShape() = default;  // a scalar
  // REQUIRES: every dim >= 0 and the product fits in int64 (use Make() for
  // dimensions that come from a user or a file).
  TensorShape(std::initializer_list<int64_t> dims);
  explicit TensorShape(std::span<const int64_t> dims);
  explicit TensorShape(const std::vector<int64_t>& dims)
      : TensorShape(std::span<const int64_t>(dims)) {}

  // InvalidArgument if a dim is negative or the element count overflows.
  static StatusOr<TensorShape> Make(std::span<const int64_t> dims);

  TensorShape(const TensorShape& other) { *this = other; }
  TensorShape& operator=(const TensorShape& other);
  TensorShape(TensorShape&& other) noexcept { *this = std::move(other); }
  TensorShape& operator=(TensorShape&& other) noexcept;
  ~TensorShape() = default;

  int rank() const { return rank_; }
  int64_t dim(int i) const { return data()[i]; }
  std::span<const int64_t> dims() const { return {data(), static_cast<size_t>(rank_)}; }
  // A copy of dims() to edit (as TensorFlow's dim_sizes()).
  std::vector<int64_t> dim_sizes() const { return {data(), data() + rank_}; }
  int64_t num_elements() const { return num_elements_; }
  bool IsScalar() const { return rank_ == 0; }

  void AddDim(int64_t size);     // REQUIRES: size >= 0, no overflow
  std::string ToString() const;  // "[2,3]", "[]" for a scalar

  friend bool operator==(const TensorShape& a, const TensorShape& b) {
    return a.rank_ == b.rank_ && std::equal(a.data(), a.data() + a.rank_, b.data());
  }

 private:
  const int64_t* data() const { return rank_ <= kInlineRank ? inline_ : heap_.get(); }

  int64_t num_elements_ = 1;
  int rank_ = 0;
  int64_t inline_[kInlineRank] = {};  // the dims while rank_ <= kInlineRank
  std::unique_ptr<int64_t[]> heap_;   // the dims past that
};

// What a DT_RESOURCE tensor holds: a pointer to some session-owned state
// (a variable), kept alive by the handle.
struct ResourceBase {
  virtual ~ResourceBase() = default;
};
struct ResourceHandle {
  std::string name;
  std::shared_ptr<ResourceBase> resource;
};

class Tensor;
namespace internal {
class TensorSource;
Tensor TensorOverSource(DataType dtype, const TensorShape& shape,
                        std::shared_ptr<const TensorSource> source);
const TensorSource* SourceOf(const Tensor& tensor);
}  // namespace internal

class Tensor {
 public:
  static constexpr size_t kAlignment = 64;

  // An empty float32 scalar-less tensor with no buffer (dtype DT_INVALID).
  Tensor() = default;
  // Allocates an uninitialized buffer (strings start empty, resources null).
  // REQUIRES: IsSupportedDataType(dtype). Use Allocate() for sizes a user or
  // a file controls: it reports what the constructor would abort on.
  Tensor(DataType dtype, const TensorShape& shape);
  static StatusOr<Tensor> Allocate(DataType dtype, const TensorShape& shape);

  // Scalars and vectors from values: Tensor::Scalar(1.5f),
  // Tensor::FromVector<int32_t>({1, 2, 3}, {3}).
  template <typename T>
  static Tensor Scalar(T value);
  template <typename T>
  static Tensor FromVector(const std::vector<T>& values, const TensorShape& shape);
  template <typename T>
  static Tensor FromVector(const std::vector<T>& values) {
    return FromVector(values, TensorShape({static_cast<int64_t>(values.size())}));
  }

  bool IsValid() const { return dtype_ != DT_INVALID; }
  DataType dtype() const { return dtype_; }
  const TensorShape& shape() const { return shape_; }
  int64_t NumElements() const { return shape_.num_elements(); }
  // Bytes of the buffer: NumElements() * DataTypeSize(dtype) for fixed-size
  // types; NumElements() * sizeof(std::string) for strings.
  size_t TotalBytes() const;

  void* raw_data() { return data_; }
  const void* raw_data() const { return data_; }
  // Typed views. REQUIRES: DataTypeOf<T>() == dtype().
  template <typename T>
  std::span<T> flat() {
    CheckType(DataTypeOf<T>());
    return {static_cast<T*>(data_), static_cast<size_t>(NumElements())};
  }
  template <typename T>
  std::span<const T> flat() const {
    CheckType(DataTypeOf<T>());
    return {static_cast<const T*>(data_), static_cast<size_t>(NumElements())};
  }
  template <typename T>
  T& scalar() {
    return flat<T>()[0];
  }
  template <typename T>
  const T& scalar() const {
    return flat<T>()[0];
  }
  // REQUIRES: dtype() == DT_RESOURCE.
  ResourceHandle& resource_handle();
  const ResourceHandle& resource_handle() const;

  // A tensor with the same buffer and a new shape of equal element count.
  StatusOr<Tensor> Reshaped(const TensorShape& shape) const;
  // A deep copy into a new buffer.
  Tensor Clone() const;
  // Copies elements from `other` (same dtype and element count) into this
  // tensor's buffer, in place.
  Status CopyFrom(const Tensor& other);
  bool SharesBufferWith(const Tensor& other) const {
    return buffer_ != nullptr && buffer_ == other.buffer_;
  }
  // True if no other Tensor shares this buffer (so writing in place is safe).
  bool RefCountIsOne() const { return buffer_ && buffer_.use_count() == 1; }

  // "float32[2,3] {1, 2, 3, 4, 5, 6}" with at most `max_values` values.
  std::string DebugString(int max_values = 8) const;
  // Element i as a double, for numeric and bool types (tests and tools).
  // Complex values are pairs: use ComplexElement.
  double ElementAsDouble(int64_t i) const;
  // Element i of a complex64 or complex128 tensor as (real, imaginary).
  std::pair<double, double> ComplexElement(int64_t i) const;

 private:
  struct Buffer;
  void CheckType(DataType expected) const;
  // base/tensor_source_internal.h: a tensor whose bytes a source gives.
  friend Tensor internal::TensorOverSource(DataType dtype, const TensorShape& shape,
                                           std::shared_ptr<const internal::TensorSource> source);
  friend const internal::TensorSource* internal::SourceOf(const Tensor& tensor);

  DataType dtype_ = DT_INVALID;
  TensorShape shape_;
  std::shared_ptr<Buffer> buffer_;
  void* data_ = nullptr;  // == buffer_->data
};

template <typename T>
Tensor Tensor::Scalar(T value) {
  Tensor t(DataTypeOf<T>(), TensorShape());
  t.flat<T>()[0] = std::move(value);
  return t;
}

template <typename T>
Tensor Tensor::FromVector(const std::vector<T>& values, const TensorShape& shape) {
  Tensor t(DataTypeOf<T>(), shape);
  CKFLOW_CHECK(static_cast<int64_t>(values.size()) == shape.num_elements());
  std::span<T> out = t.flat<T>();
  for (size_t i = 0; i < values.size(); ++i) out[i] = values[i];
  return t;
}

}  // namespace ckflow

#endif  // CKFLOW_BASE_TENSOR_H_
