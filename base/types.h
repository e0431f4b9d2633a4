// Element types of tensors.
//
// DataType values are TensorFlow's DT_* numbers, because they are data: they
// are written into checkpoint files. bfloat16 and float16 are storage types
// with conversion to and from float; kernels compute in float.
//
// Thread safety: everything here is a value or a pure function.

#ifndef CKFLOW_BASE_TYPES_H_
#define CKFLOW_BASE_TYPES_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace ckflow {

enum DataType : int {
  DT_INVALID = 0,
  DT_FLOAT = 1,
  DT_DOUBLE = 2,
  DT_INT32 = 3,
  DT_UINT8 = 4,
  DT_INT16 = 5,
  DT_INT8 = 6,
  DT_STRING = 7,
  DT_COMPLEX64 = 8,
  DT_INT64 = 9,
  DT_BOOL = 10,
  DT_BFLOAT16 = 14,
  DT_UINT16 = 17,
  DT_COMPLEX128 = 18,
  DT_HALF = 19,
  DT_RESOURCE = 20,
  DT_VARIANT = 21,
  DT_UINT32 = 22,
  DT_UINT64 = 23,
};

// "float32", "float64", "int32", ..., "bfloat16", "float16", "complex64",
// "complex128", "string", "resource"; "invalid" for anything else.
std::string_view DataTypeName(DataType dtype);
// Inverse of DataTypeName; also accepts TensorFlow's "DT_FLOAT" spelling.
std::optional<DataType> DataTypeFromName(std::string_view name);
// True for the types a Tensor can hold (everything above but DT_INVALID and
// variant). Complex values are held and checkpointed, not computed with.
bool IsSupportedDataType(DataType dtype);
// Bytes per element of a fixed-size type; 0 for string, resource, invalid.
size_t DataTypeSize(DataType dtype);
bool IsFloatingType(DataType dtype);  // float, double, bfloat16, half
bool IsIntegerType(DataType dtype);
bool IsNumericType(DataType dtype);  // floating or integer (not bool)

// Brain floating point: the upper half of an IEEE float.
struct bfloat16 {
  uint16_t bits = 0;
  bfloat16() = default;
  explicit bfloat16(float f);  // round to nearest even; NaN stays NaN
  explicit operator float() const;
};

// IEEE 754 binary16.
struct float16 {
  uint16_t bits = 0;
  float16() = default;
  explicit float16(float f);  // round to nearest even
  explicit operator float() const;
};

// Maps a C++ element type to its DataType: DataTypeOf<float>() == DT_FLOAT.
template <typename T>
constexpr DataType DataTypeOf();
template <>
constexpr DataType DataTypeOf<float>() {
  return DT_FLOAT;
}
template <>
constexpr DataType DataTypeOf<double>() {
  return DT_DOUBLE;
}
template <>
constexpr DataType DataTypeOf<int32_t>() {
  return DT_INT32;
}
template <>
constexpr DataType DataTypeOf<int64_t>() {
  return DT_INT64;
}
template <>
constexpr DataType DataTypeOf<int8_t>() {
  return DT_INT8;
}
template <>
constexpr DataType DataTypeOf<int16_t>() {
  return DT_INT16;
}
template <>
constexpr DataType DataTypeOf<uint8_t>() {
  return DT_UINT8;
}
template <>
constexpr DataType DataTypeOf<uint16_t>() {
  return DT_UINT16;
}
template <>
constexpr DataType DataTypeOf<uint32_t>() {
  return DT_UINT32;
}
template <>
constexpr DataType DataTypeOf<uint64_t>() {
  return DT_UINT64;
}
template <>
constexpr DataType DataTypeOf<bool>() {
  return DT_BOOL;
}
template <>
constexpr DataType DataTypeOf<std::string>() {
  return DT_STRING;
}
template <>
constexpr DataType DataTypeOf<bfloat16>() {
  return DT_BFLOAT16;
}
template <>
constexpr DataType DataTypeOf<float16>() {
  return DT_HALF;
}

}  // namespace ckflow

#endif  // CKFLOW_BASE_TYPES_H_
