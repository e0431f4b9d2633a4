// The file layer under every checkpoint reader and writer.
//
// Every effect a save or restore has on the disk -- create, write, sync,
// rename, remove, list, stat -- goes through a FileSystem, as LevelDB's Env:
// the bundle writer, reader and merge, the state file, Checkpoint,
// CheckpointManager and the checkpoint kernels (which receive it from the
// session, SessionOptions::file_system or RunOptions::file_system). So a
// test can count every step of a save, fail any one of them (a full disk, a
// failed rename or fsync) or kill the process before it, and prove that the
// previous checkpoint survives. FileSystem::Default() is POSIX: pread/pwrite
// on file descriptors, fdatasync, rename(2) for atomic replacement, fsync of
// a directory to make renames in it durable. Files that must never be seen
// half written (a temp name, write, sync, rename) are written with the
// helpers of base/atomic_file_internal.h.
//
// errno is mapped to a code in one place, ErrnoStatus, and every error names
// the file and the operation: "/d/ckpt-1.index: fsync: Input/output error
// (EIO)" is DataLoss. ENOENT, ENOTDIR NotFound; EACCES, EPERM, EROFS
// PermissionDenied; ENOSPC, EDQUOT, EMFILE, ENFILE, ENOMEM
// ResourceExhausted; EEXIST AlreadyExists; EIO DataLoss; EFBIG OutOfRange;
// ENOTEMPTY, EXDEV FailedPrecondition; EINVAL, EISDIR, ENAMETOOLONG, ELOOP
// InvalidArgument; EAGAIN, EBUSY Unavailable; others Unknown.
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
#include <vector>

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
  // Tells the system that the file will be read mostly from start to end,
  // so that it reads further ahead of the reads (a hint; the default does
  // nothing).
  virtual void AdviseSequential() const {}
  // Starts reading [offset, offset + n) into the system's cache without
  // waiting for it, so later reads of it do not wait on the device (a hint;
  // the default does nothing).
  virtual void Prefetch(uint64_t offset, uint64_t n) const {
    (void)offset;
    (void)n;
  }
};

class WritableFile {
 public:
  virtual ~WritableFile() = default;
  // Writes all of `data` at `offset`, extending the file as needed. A short
  // write is retried; an error leaves the file's contents unspecified.
  virtual Status WriteAt(uint64_t offset, std::string_view data) = 0;
  // Flushes the file's data to stable storage (fdatasync).
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

// What Stat tells about a path.
struct FileStat {
  uint64_t size = 0;
  bool is_directory = false;
  int64_t mtime_ns = 0;
  // Which file this is (st_dev, st_ino), so a file replaced under the same
  // name is told apart from the one read before.
  uint64_t device = 0;
  uint64_t inode = 0;
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
  // Atomically replaces `to` (if it exists) by `from`. The error names both.
  virtual Status RenameFile(const std::string& from, const std::string& to) = 0;
  virtual Status DeleteFile(const std::string& path) = 0;
  // Creates `path` and its missing parents; an existing directory is OK.
  virtual Status CreateDirs(const std::string& path) = 0;
  // Removes an empty directory (FailedPrecondition on a non-empty one).
  virtual Status DeleteDir(const std::string& path) = 0;
  // OK if `path` exists, NotFound if it does not, another code if that
  // cannot be told.
  virtual Status FileExists(const std::string& path) = 0;
  virtual bool IsDirectory(const std::string& path) = 0;
  // The names in directory `dir` (not "." or ".."), in no particular order.
  virtual StatusOr<std::vector<std::string>> ListDir(const std::string& dir) = 0;
  virtual StatusOr<FileStat> Stat(const std::string& path) = 0;
  // Makes the entries of directory `dir` (files created, renamed or removed
  // in it) durable: fsync of the directory.
  virtual Status SyncDir(const std::string& dir) = 0;
  // The whole file as a string (the state file, index files).
  virtual StatusOr<std::string> ReadFileToString(const std::string& path);
  // Makes `to` (which must not exist) name the same contents as `from`: a
  // hard link where the file system has them (an incremental save's data
  // files that did not change, shared by two checkpoints at no cost in
  // bytes), else a copy, synced. Both are safe because nothing rewrites a
  // checkpoint's file in place: a save over it renames a new file onto the
  // name. This default copies; the POSIX one links and copies only where
  // link(2) is refused (another device, a file system without links).
  virtual Status LinkFile(const std::string& from, const std::string& to);
};

// Forwards every call to another FileSystem: the base of file systems that
// count, fail or redirect some operations (tests), as LevelDB's EnvWrapper.
class FileSystemWrapper : public FileSystem {
 public:
  explicit FileSystemWrapper(FileSystem* target) : target_(target) {}
  FileSystem* target() const { return target_; }

  StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    return target_->NewWritableFile(path);
  }
  StatusOr<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(
      const std::string& path) override {
    return target_->NewRandomAccessFile(path);
  }
  Status RenameFile(const std::string& from, const std::string& to) override {
    return target_->RenameFile(from, to);
  }
  Status DeleteFile(const std::string& path) override { return target_->DeleteFile(path); }
  Status CreateDirs(const std::string& path) override { return target_->CreateDirs(path); }
  Status DeleteDir(const std::string& path) override { return target_->DeleteDir(path); }
  Status FileExists(const std::string& path) override { return target_->FileExists(path); }
  bool IsDirectory(const std::string& path) override { return target_->IsDirectory(path); }
  StatusOr<std::vector<std::string>> ListDir(const std::string& dir) override {
    return target_->ListDir(dir);
  }
  StatusOr<FileStat> Stat(const std::string& path) override { return target_->Stat(path); }
  Status SyncDir(const std::string& dir) override { return target_->SyncDir(dir); }
  Status LinkFile(const std::string& from, const std::string& to) override {
    return target_->LinkFile(from, to);
  }

 private:
  FileSystem* const target_;
};

// The status for `err` (an errno value) from operation `op` ("open",
// "write", "fsync", "rename to /d/x", ...) on `path`, with the code listed
// at the top of this file. The one place errno becomes a code.
Status ErrnoStatus(int err, std::string_view op, std::string_view path);

// "a/b" for "a/b/c"; "." for "c"; "/" for "/c".
std::string Dirname(std::string_view path);
// "c" for "a/b/c".
std::string_view Basename(std::string_view path);
// "a/b" + "c" = "a/b/c"; an absolute `name` is returned as is.
std::string JoinPath(std::string_view dir, std::string_view name);
// `path` without "." components, repeated or trailing slashes, and with
// "x/.." pairs removed, lexically (symbolic links are not followed): "a/./b/"
// is "a/b", "a/../../b" is "../b", "" is ".".
std::string CleanPath(std::string_view path);
// `path` made absolute against the process's working directory (as given
// if it already is), then CleanPath'd: lexical, as os.path.abspath.
std::string AbsolutePath(std::string_view path);
// Whether `path` names something inside directory `dir` (or `dir` itself
// is false), compared lexically after CleanPath: a relative `path` is taken
// relative to `dir`; an absolute one must start with `dir` made absolute
// (against the process's working directory when `dir` is relative).
bool IsInsideDirectory(std::string_view dir, std::string_view path);

}  // namespace ckflow

#endif  // CKFLOW_BASE_FILE_SYSTEM_H_
