// Counters inside a Session, for tests and benchmarks that check the step
// loop's steady state (plans cached, kernels made once). Not part of the
// public API.
//
// Thread safety: callable while other threads Run the session.

#ifndef CKFLOW_RUNTIME_SESSION_INTERNAL_H_
#define CKFLOW_RUNTIME_SESSION_INTERNAL_H_

#include <string>
#include <vector>

#include "runtime/session.h"

namespace ckflow::internal {

class SessionInternals {
 public:
  // Plans in the session's cache: one per distinct (feeds, fetches,
  // targets) signature run successfully so far.
  static int num_cached_plans(const Session& session);
  // Kernels the session has created (one per node it ever planned).
  static int num_kernels(const Session& session);
  // Fused ops the remapper put in the cached plans (SessionOptions::
  // remapping).
  static int num_fused_ops(const Session& session);
  // Their op types, sorted.
  static std::vector<std::string> fused_op_types(const Session& session);
};

}  // namespace ckflow::internal

#endif  // CKFLOW_RUNTIME_SESSION_INTERNAL_H_
