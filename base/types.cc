#include "base/types.h"

#include <array>
#include <bit>
#include <cmath>
#include <utility>

namespace ckflow {
namespace {

struct TypeInfo {
  DataType dtype;
  std::string_view name;
  std::string_view tf_name;
  size_t size;
};

constexpr std::array<TypeInfo, 18> kTypes = {{
    {DT_FLOAT, "float32", "DT_FLOAT", 4},
    {DT_DOUBLE, "float64", "DT_DOUBLE", 8},
    {DT_INT32, "int32", "DT_INT32", 4},
    {DT_UINT8, "uint8", "DT_UINT8", 1},
    {DT_INT16, "int16", "DT_INT16", 2},
    {DT_INT8, "int8", "DT_INT8", 1},
    {DT_STRING, "string", "DT_STRING", 0},
    // Held and checkpointed (bit for bit, as TensorFlow's pairs of floats);
    // no op computes with them.
    {DT_COMPLEX64, "complex64", "DT_COMPLEX64", 8},
    {DT_COMPLEX128, "complex128", "DT_COMPLEX128", 16},
    {DT_INT64, "int64", "DT_INT64", 8},
    {DT_BOOL, "bool", "DT_BOOL", 1},
    {DT_BFLOAT16, "bfloat16", "DT_BFLOAT16", 2},
    {DT_UINT16, "uint16", "DT_UINT16", 2},
    {DT_HALF, "float16", "DT_HALF", 2},
    {DT_RESOURCE, "resource", "DT_RESOURCE", 0},
    {DT_UINT32, "uint32", "DT_UINT32", 4},
    {DT_UINT64, "uint64", "DT_UINT64", 8},
    {DT_INVALID, "invalid", "DT_INVALID", 0},
}};

const TypeInfo* Find(DataType dtype) {
  for (const TypeInfo& info : kTypes) {
    if (info.dtype == dtype) return &info;
  }
  return nullptr;
}

}  // namespace

std::string_view DataTypeName(DataType dtype) {
  const TypeInfo* info = Find(dtype);
  return info ? info->name : "invalid";
}

std::optional<DataType> DataTypeFromName(std::string_view name) {
  for (const TypeInfo& info : kTypes) {
    if (info.dtype != DT_INVALID && (info.name == name || info.tf_name == name)) {
      return info.dtype;
    }
  }
  if (name == "float") return DT_FLOAT;
  if (name == "double") return DT_DOUBLE;
  if (name == "half") return DT_HALF;
  return std::nullopt;
}

bool IsSupportedDataType(DataType dtype) { return dtype != DT_INVALID && Find(dtype) != nullptr; }

size_t DataTypeSize(DataType dtype) {
  const TypeInfo* info = Find(dtype);
  return info ? info->size : 0;
}

bool IsFloatingType(DataType dtype) {
  return dtype == DT_FLOAT || dtype == DT_DOUBLE || dtype == DT_BFLOAT16 || dtype == DT_HALF;
}

bool IsIntegerType(DataType dtype) {
  switch (dtype) {
    case DT_INT8:
    case DT_INT16:
    case DT_INT32:
    case DT_INT64:
    case DT_UINT8:
    case DT_UINT16:
    case DT_UINT32:
    case DT_UINT64:
      return true;
    default:
      return false;
  }
}

bool IsNumericType(DataType dtype) { return IsFloatingType(dtype) || IsIntegerType(dtype); }

bfloat16::bfloat16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if (std::isnan(f)) {
    bits = static_cast<uint16_t>((u >> 16) | 0x40);  // keep it a quiet NaN
    return;
  }
  uint32_t rounding = 0x7FFF + ((u >> 16) & 1);
  bits = static_cast<uint16_t>((u + rounding) >> 16);
}

bfloat16::operator float() const { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

float16::float16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  uint32_t sign = (u >> 16) & 0x8000;
  uint32_t abs = u & 0x7FFFFFFF;
  if (abs >= 0x7F800000) {  // inf or NaN
    bits = static_cast<uint16_t>(sign | 0x7C00 | (abs > 0x7F800000 ? 0x200 : 0));
    return;
  }
  if (abs >= 0x477FF000) {  // rounds to >= 65520: overflow to inf
    bits = static_cast<uint16_t>(sign | 0x7C00);
    return;
  }
  if (abs < 0x38800000) {  // below the smallest normal half: subnormal or 0
    // Add 0.5 so the float adder does the round-to-nearest-even for us.
    float magic = std::bit_cast<float>(abs) + 0.5f;
    bits = static_cast<uint16_t>(sign | (std::bit_cast<uint32_t>(magic) - 0x3F000000));
    return;
  }
  uint32_t mant_odd = (abs >> 13) & 1;
  abs += 0xC8000FFF + mant_odd;  // rebias exponent (-112 << 23) and round
  bits = static_cast<uint16_t>(sign | (abs >> 13));
}

float16::operator float() const {
  uint32_t sign = static_cast<uint32_t>(bits & 0x8000) << 16;
  uint32_t exp = (bits >> 10) & 0x1F;
  uint32_t mant = bits & 0x3FF;
  if (exp == 0x1F) {
    return std::bit_cast<float>(sign | 0x7F800000 | (mant << 13));
  }
  if (exp == 0) {
    float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
}

}  // namespace ckflow
