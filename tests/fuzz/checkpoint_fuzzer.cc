// libFuzzer target for one of the checks in checkpoint_checks.h. Built by
// `./run.sh fuzz` with clang; a finding aborts so libFuzzer saves the input.

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "base/logging.h"
#include "tests/fuzz/checkpoint_checks.h"

#ifndef CKFLOW_FUZZ_CHECK
#error "define CKFLOW_FUZZ_CHECK as one of the checks in checkpoint_checks.h"
#endif

namespace {

// One directory per process: libFuzzer's -jobs/-fork run several at once.
const std::string& WorkDir() {
  static const std::string dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    return std::string(tmp != nullptr ? tmp : "/tmp") + "/ckflow-fuzz-" + std::to_string(getpid());
  }();
  return dir;
}

// Each binary calls one of these, by the check it was built for.
[[maybe_unused]] std::string FindingOf(std::string finding) { return finding; }
[[maybe_unused]] std::string FindingOf(ckflow::fuzz::CheckResult result) {
  return std::move(result.finding);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  ckflow::SetLogSink([](ckflow::LogSeverity, std::string_view) {});  // bad input warns by design
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
  const std::string problem = FindingOf(ckflow::fuzz::CKFLOW_FUZZ_CHECK({data, size}, WorkDir()));
  if (!problem.empty()) {
    std::fprintf(stderr, "ckflow fuzz finding: %s\n", problem.c_str());
    std::abort();
  }
  return 0;
}
