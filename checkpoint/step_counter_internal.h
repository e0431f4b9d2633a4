// Reading a training step from a variable: CheckpointManager's step_counter
// (checkpoint_interval) and NameBasedSaver's global_step (the number of the
// checkpoint's path).

#ifndef CKFLOW_CHECKPOINT_STEP_COUNTER_INTERNAL_H_
#define CKFLOW_CHECKPOINT_STEP_COUNTER_INTERNAL_H_

#include <cstdint>
#include <string_view>

#include "base/status.h"
#include "ops/variables.h"
#include "runtime/session.h"

namespace ckflow::internal {

// The value of `step`, an int64 or int32 scalar variable: read at once if
// it is an eager variable, else by running its read in `session`. Errors
// name `owner` and the variable's `role` ("CheckpointManager",
// "step_counter"): the run's error with the context "<owner>: reading <role>
// '<name>'", or InvalidArgument "<owner>: <role> '<name>' must be an int64 or
// int32 scalar, got <dtype><shape>".
StatusOr<int64_t> ReadStepCounter(Session& session, const Variable& step, std::string_view owner,
                                  std::string_view role);

}  // namespace ckflow::internal

#endif  // CKFLOW_CHECKPOINT_STEP_COUNTER_INTERNAL_H_
