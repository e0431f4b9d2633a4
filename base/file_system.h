// The file layer under every checkpoint reader and writer.
//
// Checkpoint code touches the disk only through a FileSystem, so tests can
// inject faults (a full disk, a failed rename) and prove that a failed save
// leaves the previous checkpoint intact. FileSystem::Default() is POSIX:
// pread/pwrite on file descriptors, rename(2) for atomic replacement.
//
// Errors carry the path: "NotFound: /d/ckpt-1.index: No such file or
// directory". errno maps to TensorFlow's codes (ENOENT NotFound, EACCES
// PermissionDenied, ENOSPC ResourceExhausted, EEXIST AlreadyExists, others
// Unknown).
//
// Thread safety: FileSystem methods may be called concurrently. A
// RandomAccessFile may be read from many threads at once; a WritableFile may
// be written from many threads at once at disjoint offsets.

#ifndef CKFLOW_BASE_FILE_SYSTEM_H_
#define CKFLOW_BASE_FILE_SYSTEM_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"

namespace ckflow {

class RandomAccessFile {
 public:
  virtual ~RandomAccessFile() = default;
  // Reads exactly n bytes at `offset` into dst[0, n). DataLoss if the file
  // ends first.
  virtual Status ReadAt(uint64_t offset, size_t n, char* dst) const = 0;
  // The file's size when it was opened.
  virtual uint64_t size() const = 0;
  virtual const std::string& path() const = 0;
};

class WritableFile {
 public:
  virtual ~WritableFile() = default;
  // Writes all of `data` at `offset`, extending the file as needed.
  virtual Status WriteAt(uint64_t offset, std::string_view data) = 0;
  // Flushes the file's data to stable storage (fsync).
  virtual Status Sync() = 0;
  // Starts writing [offset, offset + n) to storage without waiting, so a
  // later Sync finds less to do (a hint; the default does nothing).
  virtual void StartWriteback(uint64_t offset, size_t n) {
    (void)offset;
    (void)n;
  }
  // Closes the file; further writes fail. Called by the destructor if needed
  // (errors then ignored).
  virtual Status Close() = 0;
  virtual const std::string& path() const = 0;
};

class FileSystem {
 public:
  virtual ~FileSystem() = default;

  // The POSIX file system; never null, lives forever.
  static FileSystem* Default();

  // Creates or truncates `path`.
  virtual StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) = 0;
  virtual StatusOr<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(
      const std::string& path) = 0;
  // Atomically replaces `to` (if it exists) by `from`.
  virtual Status RenameFile(const std::string& from, const std::string& to) = 0;
  virtual Status DeleteFile(const std::string& path) = 0;
  // Creates `path` and its missing parents; an existing directory is OK.
  virtual Status CreateDirs(const std::string& path) = 0;
  // Removes an empty directory (fails on a non-empty one).
  virtual Status DeleteDir(const std::string& path) = 0;
  // OK if `path` exists, NotFound if it does not, another code if that
  // cannot be told.
  virtual Status FileExists(const std::string& path) = 0;
  virtual bool IsDirectory(const std::string& path) = 0;
  // The whole file as a string (the state file, index files).
  virtual StatusOr<std::string> ReadFileToString(const std::string& path);
};

// "a/b" for "a/b/c"; "." for "c"; "/" for "/c".
std::string Dirname(std::string_view path);
// "c" for "a/b/c".
std::string_view Basename(std::string_view path);
// "a/b" + "c" = "a/b/c"; an absolute `name` is returned as is.
std::string JoinPath(std::string_view dir, std::string_view name);

}  // namespace ckflow

#endif  // CKFLOW_BASE_FILE_SYSTEM_H_
