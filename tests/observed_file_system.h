// A FileSystem for tests that records what is asked of the files it opens:
// reads, readahead advice and prefetches, per path.

#ifndef CKFLOW_TESTS_OBSERVED_FILE_SYSTEM_H_
#define CKFLOW_TESTS_OBSERVED_FILE_SYSTEM_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "base/file_system.h"

namespace ckflow::testing {

// Wraps FileSystem::Default(); thread-safe.
class ObservedFileSystem final : public FileSystemWrapper {
 public:
  struct Observed {
    int64_t reads = 0;
    int64_t bytes_read = 0;
    int64_t largest_read = 0;
    int advised_sequential = 0;
    uint64_t prefetched = 0;  // bytes asked for by Prefetch calls from offset 0
    int prefetches_not_from_start = 0;
  };

  ObservedFileSystem() : FileSystemWrapper(FileSystem::Default()) {}

  StatusOr<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(const std::string& path) override;

  // What the files opened at `path` were asked, so far.
  Observed of(const std::string& path) const;
  // The same, summed over every data file (P.data-SSSSS-of-NNNNN).
  Observed DataFiles() const;
  // Forgets everything recorded.
  void Clear();

 private:
  class File;
  mutable std::mutex mu_;
  std::map<std::string, Observed> observed_;
};

}  // namespace ckflow::testing

#endif  // CKFLOW_TESTS_OBSERVED_FILE_SYSTEM_H_
