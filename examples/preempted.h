// The examples' PreemptionHandler exit_fn: a line on stdout saying what was
// saved (the tests that send SIGTERM read it), then exit with the code.

#ifndef CKFLOW_EXAMPLES_PREEMPTED_H_
#define CKFLOW_EXAMPLES_PREEMPTED_H_

#include <cstdio>
#include <cstdlib>

#include "checkpoint/preemption.h"

namespace ckflow::examples {

// Prints "preempted (signal S): saved PATH at step N, exiting with C".
inline void Report(const PreemptionSave& save) {
  std::fprintf(stderr, "\n");  // past a progress bar's line
  std::printf("preempted (signal %d): saved %s at step %lld, exiting with %d\n", save.signal,
              save.path.c_str(), static_cast<long long>(save.step), save.exit_code);
  std::fflush(stdout);
}

[[noreturn]] inline void ReportAndExit(const PreemptionSave& save) {
  Report(save);
  std::exit(save.exit_code);
}

}  // namespace ckflow::examples

#endif  // CKFLOW_EXAMPLES_PREEMPTED_H_
