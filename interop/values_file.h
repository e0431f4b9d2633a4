// The side file the interop suite compares values through: both sides dump
// the live values of their variables, keyed by checkpoint key (DumpValues),
// and read the other side's dump (interop/values.py is the Python half).
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

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "base/tensor.h"
#include "graph/trackable.h"
#include "ops/variables.h"
#include "runtime/session.h"

namespace ckflow::interop {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

Status WriteValues(const std::string& path, const NamedTensors& values);
StatusOr<NamedTensors> ReadValues(const std::string& path);

// Every variable reachable from `root`, with the checkpoint key its value is
// saved under: breadth first, as the object graph is numbered, so a shared
// object gets its first path; slots keyed by variable and optimizer path.
std::vector<std::pair<std::string, std::shared_ptr<Variable>>> VariablesByKey(
    const std::shared_ptr<Trackable>& root);
// The values of VariablesByKey(root) in `session`, then `extra`, written to
// `path`.
Status DumpValues(Session& session, const std::shared_ptr<Trackable>& root, const std::string& path,
                  const NamedTensors& extra = {});

}  // namespace ckflow::interop

#endif  // CKFLOW_INTEROP_VALUES_FILE_H_
