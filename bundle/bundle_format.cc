#include "bundle/bundle_format.h"

#include <cstdio>

namespace ckflow {

std::string IndexFilename(std::string_view prefix) { return std::string(prefix) + ".index"; }

std::string DataFilename(std::string_view prefix, int shard, int num_shards) {
  char suffix[64];
  std::snprintf(suffix, sizeof(suffix), ".data-%05d-of-%05d", shard, num_shards);
  return std::string(prefix) + suffix;
}

std::string EscapeLocalName(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  for (char c : name) {
    if (c == '.') {
      out += "..";
    } else if (c == '/') {
      out += ".S";
    } else {
      out += c;
    }
  }
  return out;
}

size_t StoredElementSize(int dtype) {
  switch (dtype) {
    case DT_COMPLEX64:
      return 8;
    case DT_COMPLEX128:
      return 16;
    case 11:
    case 12:
      return 1;  // DT_QINT8, DT_QUINT8
    case 13:
      return 4;  // DT_QINT32
    case 15:
    case 16:
      return 2;  // DT_QINT16, DT_QUINT16
    case DT_STRING:
    case DT_RESOURCE:
    case DT_VARIANT:
      return 0;
    default:
      return DataTypeSize(static_cast<DataType>(dtype));
  }
}

std::string StoredDataTypeName(int dtype) {
  switch (dtype) {
    case DT_COMPLEX64:
      return "complex64";
    case DT_COMPLEX128:
      return "complex128";
    case 11:
      return "qint8";
    case 12:
      return "quint8";
    case 13:
      return "qint32";
    case 15:
      return "qint16";
    case 16:
      return "quint16";
    case DT_VARIANT:
      return "variant";
    default:
      break;
  }
  if (IsSupportedDataType(static_cast<DataType>(dtype))) {
    return std::string(DataTypeName(static_cast<DataType>(dtype)));
  }
  return "dtype" + std::to_string(dtype);
}

}  // namespace ckflow
