// The process's resident memory, as the benchmarks report it beside their
// timings: the current and peak resident set (VmRSS, VmHWM of
// /proc/self/status), and a reset of the peak to the current size so the
// peak of one phase can be read on its own. Linux only; elsewhere every
// figure is -1. Not installed: a measuring tool of this project's.

#ifndef CKFLOW_WORKLOADS_MEMORY_H_
#define CKFLOW_WORKLOADS_MEMORY_H_

#include <sys/resource.h>

#include <cstdint>
#include <cstdio>
#include <cstring>

namespace ckflow::workloads {

struct MemoryUse {
  int64_t rss = -1;   // bytes resident now (VmRSS)
  int64_t peak = -1;  // most bytes resident since the start or ResetPeakRss (VmHWM)
};

inline MemoryUse ReadMemoryUse() {
  MemoryUse use;
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return use;
  char line[256];
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    long long kib = 0;
    if (std::sscanf(line, "VmRSS: %lld kB", &kib) == 1) use.rss = kib * 1024;
    if (std::sscanf(line, "VmHWM: %lld kB", &kib) == 1) use.peak = kib * 1024;
  }
  std::fclose(f);
  return use;
}

// Page faults the process has taken without I/O (its first touch of a
// page of new memory, mostly): a new process's restore pays for every page
// it writes for the first time. -1 if unknown.
inline int64_t MinorPageFaults() {
  struct rusage usage;
  if (::getrusage(RUSAGE_SELF, &usage) != 0) return -1;
  return static_cast<int64_t>(usage.ru_minflt);
}

// Sets the peak to the current resident size (writing 5 to
// /proc/self/clear_refs). False if the kernel refused: the peak then
// counts from the process's start.
inline bool ResetPeakRss() {
  std::FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (f == nullptr) return false;
  const bool ok = std::fputs("5", f) >= 0;
  return std::fclose(f) == 0 && ok;
}

// What one phase adds to the resident set at its peak: create it before the
// phase, read added() after.
class PeakRssProbe {
 public:
  PeakRssProbe() : reset_(ResetPeakRss()), before_(ReadMemoryUse().rss) {}
  // Bytes the peak rose above the resident size at construction; -1 if the
  // peak could not be reset or read.
  int64_t added() const {
    const MemoryUse now = ReadMemoryUse();
    if (!reset_ || now.peak < 0 || before_ < 0) return -1;
    return now.peak > before_ ? now.peak - before_ : 0;
  }
  int64_t before() const { return before_; }

 private:
  bool reset_;
  int64_t before_;
};

}  // namespace ckflow::workloads

#endif  // CKFLOW_WORKLOADS_MEMORY_H_
