#include <string>
#include <vector>

#include "checkpoint/step_counter_internal.h"

namespace ckflow::internal {

StatusOr<int64_t> ReadStepCounter(Session& session, const Variable& step, std::string_view owner,
                                  std::string_view role) {
  // An eager variable's value() is read already; a graph one's runs.
  const Output read = step.value();
  StatusOr<std::vector<Tensor>> value =
      read.node() != nullptr && read.node()->has_values()
          ? StatusOr<std::vector<Tensor>>(std::vector<Tensor>{read.value()})
          : session.Run({}, {read});
  if (!value.ok()) {
    return value.status().WithContext(std::string(owner) + ": reading " + std::string(role) + " '" +
                                      step.name() + "'");
  }
  const Tensor& t = (*value)[0];
  if (t.NumElements() != 1 || (t.dtype() != DT_INT64 && t.dtype() != DT_INT32)) {
    return InvalidArgumentError(owner, ": ", role, " '", step.name(),
                                "' must be an int64 or int32 scalar, got ", DataTypeName(t.dtype()),
                                t.shape().ToString());
  }
  return t.dtype() == DT_INT64 ? t.scalar<int64_t>() : int64_t{t.scalar<int32_t>()};
}

}  // namespace ckflow::internal
