// A FileSystem held in memory, for the checkpoint fuzz target: each input is
// written as a checkpoint's files and restored, and on disk (even tmpfs) the
// directory made and removed per input and the files' opens and reads took
// a tenth of the target's time. Paths are compared after CleanPath; "/" and
// "." always exist as directories.
//
// Thread safety: as FileSystem's.

#ifndef CKFLOW_TESTS_FUZZ_MEMORY_FILE_SYSTEM_H_
#define CKFLOW_TESTS_FUZZ_MEMORY_FILE_SYSTEM_H_

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/file_system.h"
#include "base/mutex.h"

namespace ckflow::fuzz {

class MemoryFileSystem final : public FileSystem {
 public:
  StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override;
  StatusOr<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(const std::string& path) override;
  Status RenameFile(const std::string& from, const std::string& to) override;
  Status DeleteFile(const std::string& path) override;
  Status CreateDirs(const std::string& path) override;
  Status DeleteDir(const std::string& path) override;
  Status FileExists(const std::string& path) override;
  bool IsDirectory(const std::string& path) override;
  StatusOr<std::vector<std::string>> ListDir(const std::string& dir) override;
  StatusOr<FileStat> Stat(const std::string& path) override;
  Status SyncDir(const std::string& dir) override;

  // Writes `bytes` as the whole of file `path`, creating its directory.
  Status Put(const std::string& path, std::string_view bytes);
  // Removes `dir` and everything under it.
  void RemoveAll(const std::string& dir);

  // A file's bytes, shared by its open handles (which lock `mu`).
  struct Contents {
    Mutex mu;
    std::string bytes CKFLOW_GUARDED_BY(mu);
    uint64_t inode = 0;
  };

 private:
  bool IsDirectoryLocked(const std::string& path) const CKFLOW_REQUIRES(mu_);

  Mutex mu_;
  std::map<std::string, std::shared_ptr<Contents>> files_ CKFLOW_GUARDED_BY(mu_);
  std::set<std::string> dirs_ CKFLOW_GUARDED_BY(mu_);
  uint64_t next_inode_ CKFLOW_GUARDED_BY(mu_) = 1;
};

}  // namespace ckflow::fuzz

#endif  // CKFLOW_TESTS_FUZZ_MEMORY_FILE_SYSTEM_H_
