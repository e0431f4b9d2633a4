// TensorSource: a tensor's bytes that are not in a buffer of its own, handed
// out a range at a time. An asynchronous save of a large variable the
// training loop updates by rows uses one instead of a copy (see
// ops/variable_resource_internal.h): the save reads the variable's buffer
// block by block while the loop keeps writing it, and the loop sets a block
// aside only before it first changes one the save has not read yet.
//
// A tensor over a source has a dtype and a shape but no data: raw_data() is
// null and flat() must not be used. Only code that asks SourceOf (the bundle
// writer) can read it; it reaches nothing else (a save graph feeds it
// straight to SaveV2).

#ifndef CKFLOW_BASE_TENSOR_SOURCE_INTERNAL_H_
#define CKFLOW_BASE_TENSOR_SOURCE_INTERNAL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>

#include "base/status.h"
#include "base/tensor.h"

namespace ckflow::internal {

class TensorSource {
 public:
  virtual ~TensorSource() = default;
  // Calls `consume` with the bytes [offset, offset + length), in one or more
  // pieces in order, and returns its first error. Each byte may be read
  // once: the source may let a range go once it is read. Safe to call from
  // several threads at once for disjoint ranges.
  virtual Status Read(uint64_t offset, uint64_t length,
                      const std::function<Status(std::string_view)>& consume) const = 0;
};

// A tensor of `dtype` and `shape` whose TotalBytes() bytes `source` gives.
// REQUIRES: dtype is fixed-size (not DT_STRING or DT_RESOURCE).
Tensor TensorOverSource(DataType dtype, const TensorShape& shape,
                        std::shared_ptr<const TensorSource> source);

// The source of a tensor TensorOverSource made; null for any other.
const TensorSource* SourceOf(const Tensor& tensor);

}  // namespace ckflow::internal

#endif  // CKFLOW_BASE_TENSOR_SOURCE_INTERNAL_H_
