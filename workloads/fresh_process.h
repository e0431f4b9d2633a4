// A measurement in a process of its own, as a user's program meets a
// restore: the parent spawns the child (often itself, with arguments that
// make it the child), the child times its work and prints
//
//   seconds <s>
//   peak_rss <bytes>
//   page_faults <n>      (where the child counted them)
//
// on stdout (PrintChildResult), and the parent reads them back (RunChild).
// The environment reaches the child unchanged. Shared by
// bench/fresh_restore.cc and `ckflow bench restore --cold`. Not installed: a
// measuring tool of this project's.
//
// Thread safety: none needed; no shared state.

#ifndef CKFLOW_WORKLOADS_FRESH_PROCESS_H_
#define CKFLOW_WORKLOADS_FRESH_PROCESS_H_

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "base/status.h"
#include "workloads/memory.h"

extern char** environ;

namespace ckflow::workloads {

struct ChildResult {
  double seconds = -1;
  int64_t peak_rss = -1;     // -1 if the child did not say
  int64_t page_faults = -1;  // over what it timed; -1 if the child did not say
};

// This program's own path, to spawn it again.
inline std::string SelfPath() {
  std::error_code ec;
  return std::filesystem::read_symlink("/proc/self/exe", ec).string();
}

// What a child prints last: `seconds`, its peak resident set and, if
// counted (>= 0), the page faults taken over `seconds`.
inline void PrintChildResult(double seconds, int64_t page_faults = -1) {
  std::printf("seconds %.6f\npeak_rss %lld\n", seconds,
              static_cast<long long>(ReadMemoryUse().peak));
  if (page_faults >= 0) std::printf("page_faults %lld\n", static_cast<long long>(page_faults));
  std::fflush(stdout);
}

// Runs args[0] with `args` (stdout captured, stderr passed through) and
// waits for it. Internal if it cannot start, fails, or prints no seconds.
inline StatusOr<ChildResult> RunChild(const std::vector<std::string>& args) {
  int out[2];
  if (::pipe(out) != 0) return InternalError("pipe: ", std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  if (spawned != 0) {
    ::close(out[0]);
    return InternalError("cannot run ", args[0], ": ", std::strerror(spawned));
  }
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::read(out[0], buf, sizeof(buf))) > 0;) text.append(buf, n);
  ::close(out[0]);
  int wstatus = 0;
  ::waitpid(pid, &wstatus, 0);
  std::string command;
  for (size_t i = 0; i < args.size() && i < 4; ++i) command += (i ? " " : "") + args[i];
  if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
    return InternalError(command, " failed (",
                         WIFEXITED(wstatus) ? "exit " + std::to_string(WEXITSTATUS(wstatus))
                                            : "signal " + std::to_string(WTERMSIG(wstatus)),
                         "): ", text);
  }
  ChildResult r;
  long long rss = 0;
  const char* seconds = std::strstr(text.c_str(), "seconds ");
  const char* peak = std::strstr(text.c_str(), "peak_rss ");
  if (seconds == nullptr || std::sscanf(seconds, "seconds %lf", &r.seconds) != 1) {
    return InternalError("no time from ", command, ": ", text);
  }
  if (peak != nullptr && std::sscanf(peak, "peak_rss %lld", &rss) == 1) r.peak_rss = rss;
  long long faults = 0;
  const char* fault_line = std::strstr(text.c_str(), "page_faults ");
  if (fault_line != nullptr && std::sscanf(fault_line, "page_faults %lld", &faults) == 1) {
    r.page_faults = faults;
  }
  return r;
}

}  // namespace ckflow::workloads

#endif  // CKFLOW_WORKLOADS_FRESH_PROCESS_H_
