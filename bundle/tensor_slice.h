// TensorSlice: a box inside a tensor, as TensorFlow describes the parts of a
// partitioned variable (tensorflow::TensorSlice, tensor_slice.proto), and the
// two text and key forms checkpoints use for it.
//
// A slice has one extent per dimension: a start and a length, or the whole
// dimension (length kFullExtent). TensorFlow's texts:
//
//   slice spec        "0,4:-"        extents joined by ':'; "-" is a whole
//                                    dimension, "start,length" a range
//   shape and slice   "10 4 0,4:0,4" the full shape's dims, then the spec
//                                    (SaveV2/RestoreV2's shape_and_slices,
//                                    Python's SaveSliceInfo.spec)
//
// The bundle stores a partitioned tensor as one entry under its name (dtype,
// full shape, the slices; no data) and each slice's data under
// EncodeTensorNameSlice(name, slice), an OrderedCode key:
//
//   WriteNumIncreasing(0)  WriteString(name)  WriteNumIncreasing(rank)
//   then per dimension WriteSignedNumIncreasing(start),
//                      WriteSignedNumIncreasing(length or -1)
//
//   NumIncreasing(v)       one byte n, then v in n big-endian bytes (0: "\0")
//   String(s)              s with 0x00 -> 00 ff and 0xff -> ff 00, then 00 01
//   SignedNumIncreasing(v) v in n bytes, big-endian two's complement, whose
//                          first n+1 bits (all copies of the sign) are XORed
//                          with n ones and a zero; n is the fewest bytes with
//                          7n-1 bits for v's magnitude (1 byte for -64..63)
//
// Slice keys begin with a 0 byte, so they sort before every ordinary key.
//
// Thread safety: values and pure functions.

#ifndef CKFLOW_BUNDLE_TENSOR_SLICE_H_
#define CKFLOW_BUNDLE_TENSOR_SLICE_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "base/tensor.h"

namespace ckflow {

struct TensorSlice {
  static constexpr int64_t kFullExtent = -1;
  struct Extent {
    int64_t start = 0;
    int64_t length = kFullExtent;  // kFullExtent: the whole dimension
    friend bool operator==(const Extent&, const Extent&) = default;
  };
  std::vector<Extent> extents;

  // The whole of a tensor of rank `rank`.
  static TensorSlice Full(int rank);
  // [offsets, offsets + lengths) as explicit ranges (TensorFlow's
  // SaveSliceInfo writes every dimension so, whole ones included).
  static TensorSlice FromOffsets(std::span<const int64_t> offsets,
                                 std::span<const int64_t> lengths);

  int rank() const { return static_cast<int>(extents.size()); }
  // Extent d within a dimension of `size`: [begin, end).
  int64_t Begin(int d) const { return extents[d].length == kFullExtent ? 0 : extents[d].start; }
  int64_t End(int d, int64_t size) const {
    return extents[d].length == kFullExtent ? size : extents[d].start + extents[d].length;
  }
  // The slice's shape inside a tensor of `full_shape`. REQUIRES: the slice
  // fits it (CheckFits).
  TensorShape ShapeIn(const TensorShape& full_shape) const;
  // Covers all of `full_shape`.
  bool IsFullIn(const TensorShape& full_shape) const;
  // InvalidArgument unless the ranks agree and every extent lies within its
  // dimension (starts >= 0, lengths >= 0 or kFullExtent with start 0).
  Status CheckFits(const TensorShape& full_shape) const;

  // TensorFlow's spec text, "0,4:-".
  std::string ToString() const;
  friend bool operator==(const TensorSlice&, const TensorSlice&) = default;
};

// Parses a slice spec ("0,4:-"; "" is a scalar's). InvalidArgument naming
// the text if it is not one.
StatusOr<TensorSlice> ParseTensorSlice(std::string_view spec);

struct ShapeAndSlice {
  TensorShape full_shape;
  TensorSlice slice;
};
// Parses "10 4 0,4:-" and checks the slice fits the shape; InvalidArgument
// naming the text otherwise.
StatusOr<ShapeAndSlice> ParseShapeAndSlice(std::string_view text);
// "10 4 0,4:-", the inverse.
std::string ShapeAndSliceString(const TensorShape& full_shape, const TensorSlice& slice);

// The bundle key of `slice` of the tensor saved as `name` (see above).
std::string EncodeTensorNameSlice(std::string_view name, const TensorSlice& slice);
// The inverse; InvalidArgument if `key` is not such a key.
StatusOr<std::pair<std::string, TensorSlice>> DecodeTensorNameSlice(std::string_view key);

}  // namespace ckflow

#endif  // CKFLOW_BUNDLE_TENSOR_SLICE_H_
