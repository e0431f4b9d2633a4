// Node names TensorFlow's Python API gives ("init", "init_1", "Adam") that
// the C++ Scope cannot derive from an op type. Internal to ops/.

#ifndef CKFLOW_OPS_UNIQUE_NAMES_INTERNAL_H_
#define CKFLOW_OPS_UNIQUE_NAMES_INTERNAL_H_

#include <string>
#include <string_view>

#include "graph/graph.h"

namespace ckflow::internal {

// `scope` naming its next node `base`, or base_1, base_2, ... (the first
// name not yet used in the scope's name scope).
inline Scope WithUniqueOpName(const Scope& scope, std::string_view base) {
  const std::string prefix = scope.name_prefix().empty() ? "" : scope.name_prefix() + "/";
  std::string name(base);
  for (int i = 1; scope.graph().IsNameUsed(prefix + name); ++i) {
    name = std::string(base) + "_" + std::to_string(i);
  }
  return scope.WithOpName(name);
}

}  // namespace ckflow::internal

#endif  // CKFLOW_OPS_UNIQUE_NAMES_INTERNAL_H_
