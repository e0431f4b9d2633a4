// The side file the interop suite compares values through: both sides dump
// the live values of their variables, keyed by checkpoint key, and read the
// other side's dump (interop/values.py is the Python half).
//
//   "ckflow-values 1\n"
//   then per value:
//     key "\n"
//     dtype "\n"            TensorFlow's DataType number, in decimal
//     dims "\n"             space-separated, empty for a scalar
//     nbytes "\n"
//     nbytes raw bytes      the tensor's buffer, little-endian; for strings,
//                           each element as a uint64 length then its bytes
//     "\n"
//
// Raw bytes, so a comparison is bit for bit (NaN payloads, -0, bfloat16).
#ifndef CKFLOW_INTEROP_VALUES_FILE_H_
#define CKFLOW_INTEROP_VALUES_FILE_H_

#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "base/tensor.h"

namespace ckflow::interop {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

Status WriteValues(const std::string& path, const NamedTensors& values);
StatusOr<NamedTensors> ReadValues(const std::string& path);

}  // namespace ckflow::interop

#endif  // CKFLOW_INTEROP_VALUES_FILE_H_
