// Where a benchmark writes its checkpoints: a new directory under
// $CKFLOW_BENCH_DIR (run.sh points it at /dev/shm, so the page cache is not
// measured), else the system's temp directory, removed with everything in it
// when the ScratchDir goes (a benchmark in /dev/shm must not leave its
// checkpoints in memory). Not installed: a measuring tool of this project's.

#ifndef CKFLOW_WORKLOADS_SCRATCH_DIR_H_
#define CKFLOW_WORKLOADS_SCRATCH_DIR_H_

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

namespace ckflow::workloads {

class ScratchDir {
 public:
  // `name` prefixes the directory's name. An empty path() if it cannot be
  // made (the caller reports that).
  explicit ScratchDir(const std::string& name) {
    const char* env = std::getenv("CKFLOW_BENCH_DIR");
    std::error_code ec;
    const std::filesystem::path base =
        env != nullptr ? std::filesystem::path(env) : std::filesystem::temp_directory_path(ec);
    std::string dir = (base / (name + "-XXXXXX")).string();
    if (!ec && ::mkdtemp(dir.data()) != nullptr) path_ = dir;
  }
  ~ScratchDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace ckflow::workloads

#endif  // CKFLOW_WORKLOADS_SCRATCH_DIR_H_
