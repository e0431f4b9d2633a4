// Helpers shared by the checkpoint tests: writing bundles, directory
// listings and a file system that fails on purpose (the golden checkpoints
// and the reader-level check of ckflow's output are in testdata_util.h).

#ifndef CKFLOW_TESTS_BUNDLE_BUNDLE_TEST_UTIL_H_
#define CKFLOW_TESTS_BUNDLE_BUNDLE_TEST_UTIL_H_

#include <atomic>
#include <string>
#include <utility>
#include <vector>

#include "base/file_system.h"
#include "base/status.h"
#include "base/tensor.h"

namespace ckflow::testing {

// A [rows, cols] float32 tensor whose element (r, c) is (row0 + r) * 100 +
// (col0 + c): the box at (row0, col0) of one grid, so that slices of it
// read from anywhere can be compared bit for bit.
Tensor Grid(int64_t rows, int64_t cols, int64_t row0 = 0, int64_t col0 = 0);

// The parts TensorFlow's fixed_size_partitioner(n) makes of `size` along
// one axis, as (offset, length): the first size % n parts one longer.
std::vector<std::pair<int64_t, int64_t>> FixedSizeParts(int64_t size, int n);

// The names of the files in `dir`, sorted.
std::vector<std::string> ListDir(const std::string& dir);

void WriteFileOrDie(const std::string& path, const std::string& contents);

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// Writes `tensors` in this order into a bundle with `prefix`.
Status WriteBundle(const std::string& prefix, const NamedTensors& tensors,
                   FileSystem* fs = nullptr);

// The default file system, except that the `fail_at`-th mutating operation
// (1-based: file creation, write, sync, close, rename, directory creation)
// fails with ResourceExhausted, as a full disk would. 0 never fails.
class FaultyFileSystem final : public FileSystemWrapper {
 public:
  explicit FaultyFileSystem(int fail_at)
      : FileSystemWrapper(FileSystem::Default()), fail_at_(fail_at) {}
  // Operations counted so far.
  int operations() const { return count_.load(); }
  bool failed() const { return failed_.load(); }

  StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override;
  Status RenameFile(const std::string& from, const std::string& to) override;
  Status CreateDirs(const std::string& path) override;

  // Counts one operation; its injected error, or OK.
  Status Tick(const std::string& what);

 private:
  const int fail_at_;
  std::atomic<int> count_{0};
  std::atomic<bool> failed_{false};
};

}  // namespace ckflow::testing

#endif  // CKFLOW_TESTS_BUNDLE_BUNDLE_TEST_UTIL_H_
