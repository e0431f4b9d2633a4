// libFuzzer target for one of the checks in checkpoint_checks.h. Built by
// `./run.sh fuzz` with clang; a finding aborts so libFuzzer saves the input.

#include <tbb/global_control.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "base/logging.h"
#include "tests/fuzz/checkpoint_checks.h"
#include "tests/fuzz/checkpoint_mutator.h"

#ifndef CKFLOW_FUZZ_CHECK
#error "define CKFLOW_FUZZ_CHECK as one of the checks in checkpoint_checks.h"
#endif

namespace {

// One directory per process: libFuzzer's -jobs/-fork run several at once.
// In memory where there is a tmpfs: the checks write an input's files and
// make its directory anew each time, and creating inodes on ext4 took a
// fifth of the checkpoint target's time.
const std::string& WorkDir() {
  static const std::string dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::error_code ec;
    const std::string base = tmp != nullptr                                  ? tmp
                             : std::filesystem::is_directory("/dev/shm", ec) ? "/dev/shm"
                                                                             : "/tmp";
    return base + "/ckflow-fuzz-" + std::to_string(getpid());
  }();
  return dir;
}

// Each binary calls one of these, by the check it was built for.
// The object-based restores go into structures built once per process
// (restore_targets.h).
[[maybe_unused]] std::string Check(std::string (*check)(std::span<const uint8_t>,
                                                        const std::string&),
                                   std::span<const uint8_t> input) {
  return check(input, WorkDir());
}
[[maybe_unused]] std::string Check(
    ckflow::fuzz::CheckResult (*check)(std::span<const uint8_t>, const std::string&,
                                       ckflow::fuzz::RestoreTargets&),
    std::span<const uint8_t> input) {
  static ckflow::fuzz::RestoreTargets* const targets = new ckflow::fuzz::RestoreTargets;
  return check(input, WorkDir(), *targets).finding;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  ckflow::SetLogSink([](ckflow::LogSeverity, std::string_view) {});  // bad input warns by design
  // One core per fuzzing process (-jobs runs more): restores and sessions
  // run their parallel loops inline rather than waking a worker per input.
  static tbb::global_control one_thread(tbb::global_control::max_allowed_parallelism, 1);
  // libFuzzer ends with exit() when it is done; a finding's abort() leaves
  // the directory with the files that broke, for a look. The name is made
  // first, so that it is destroyed after the handler runs.
  WorkDir();
  std::atexit([] {
    std::error_code ignored;
    std::filesystem::remove_all(WorkDir(), ignored);
  });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string problem = Check(&ckflow::fuzz::CKFLOW_FUZZ_CHECK, {data, size});
  if (!problem.empty()) {
    std::fprintf(stderr, "ckflow fuzz finding: %s\n", problem.c_str());
    std::abort();
  }
  return 0;
}

#ifdef CKFLOW_FUZZ_STRUCTURED
// The checkpoint target's inputs are checkpoints: mutate them as such
// (checkpoint_mutator.h), with libFuzzer's byte mutations beside.
extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size,
                                          unsigned int seed) {
  return ckflow::fuzz::MutateCheckpointInput(data, size, max_size, seed, LLVMFuzzerMutate);
}

extern "C" size_t LLVMFuzzerCustomCrossOver(const uint8_t* data1, size_t size1,
                                            const uint8_t* data2, size_t size2, uint8_t* out,
                                            size_t max_out_size, unsigned int seed) {
  return ckflow::fuzz::CrossOverCheckpointInputs(data1, size1, data2, size2, out, max_out_size,
                                                 seed);
}
#endif
