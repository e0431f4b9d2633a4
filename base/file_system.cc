#include "base/file_system.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>

namespace ckflow {
namespace {

Status IoError(const std::string& path, int err) {
  std::string message = path + ": " + std::strerror(err);
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      return Status(StatusCode::kNotFound, message);
    case EACCES:
    case EPERM:
    case EROFS:
      return Status(StatusCode::kPermissionDenied, message);
    case ENOSPC:
    case EDQUOT:
    case EMFILE:
    case ENFILE:
      return Status(StatusCode::kResourceExhausted, message);
    case EEXIST:
      return Status(StatusCode::kAlreadyExists, message);
    case ENAMETOOLONG:
    case EINVAL:
    case EISDIR:
      return Status(StatusCode::kInvalidArgument, message);
    default:
      return Status(StatusCode::kUnknown, message);
  }
}

class PosixRandomAccessFile final : public RandomAccessFile {
 public:
  PosixRandomAccessFile(std::string path, int fd, uint64_t size)
      : path_(std::move(path)), fd_(fd), size_(size) {}
  ~PosixRandomAccessFile() override { ::close(fd_); }

  Status ReadAt(uint64_t offset, size_t n, char* dst) const override {
    while (n > 0) {
      ssize_t r = ::pread(fd_, dst, n, static_cast<off_t>(offset));
      if (r < 0) {
        if (errno == EINTR) continue;
        return IoError(path_, errno);
      }
      if (r == 0) {
        return DataLossError(path_, ": unexpected end of file at offset ", offset, " (", n,
                             " more bytes wanted)");
      }
      dst += r;
      n -= static_cast<size_t>(r);
      offset += static_cast<uint64_t>(r);
    }
    return OkStatus();
  }
  uint64_t size() const override { return size_; }
  const std::string& path() const override { return path_; }

 private:
  const std::string path_;
  const int fd_;
  const uint64_t size_;
};

class PosixWritableFile final : public WritableFile {
 public:
  PosixWritableFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixWritableFile() override { Close().IgnoreError(); }

  void StartWriteback(uint64_t offset, size_t n) override {
    if (fd_ >= 0) {
      (void)::sync_file_range(fd_, static_cast<off_t>(offset), static_cast<off_t>(n),
                              SYNC_FILE_RANGE_WRITE);
    }
  }

  Status WriteAt(uint64_t offset, std::string_view data) override {
    if (fd_ < 0) return FailedPreconditionError(path_, ": write after close");
    const char* p = data.data();
    size_t n = data.size();
    while (n > 0) {
      ssize_t w = ::pwrite(fd_, p, n, static_cast<off_t>(offset));
      if (w < 0) {
        if (errno == EINTR) continue;
        return IoError(path_, errno);
      }
      p += w;
      n -= static_cast<size_t>(w);
      offset += static_cast<uint64_t>(w);
    }
    return OkStatus();
  }
  Status Sync() override {
    if (fd_ < 0) return FailedPreconditionError(path_, ": sync after close");
    if (::fdatasync(fd_) != 0) return IoError(path_, errno);
    return OkStatus();
  }
  Status Close() override {
    if (fd_ < 0) return OkStatus();
    int rc = ::close(fd_);
    fd_ = -1;
    if (rc != 0) return IoError(path_, errno);
    return OkStatus();
  }
  const std::string& path() const override { return path_; }

 private:
  const std::string path_;
  int fd_;
};

class PosixFileSystem final : public FileSystem {
 public:
  StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return IoError(path, errno);
    return std::unique_ptr<WritableFile>(new PosixWritableFile(path, fd));
  }

  StatusOr<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(
      const std::string& path) override {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return IoError(path, errno);
    struct stat st;
    if (::fstat(fd, &st) != 0) {
      Status s = IoError(path, errno);
      ::close(fd);
      return s;
    }
    if (S_ISDIR(st.st_mode)) {
      ::close(fd);
      return IoError(path, EISDIR);
    }
    return std::unique_ptr<RandomAccessFile>(
        new PosixRandomAccessFile(path, fd, static_cast<uint64_t>(st.st_size)));
  }

  Status RenameFile(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) {
      return IoError(from, errno).WithContext("rename to " + to);
    }
    return OkStatus();
  }

  Status DeleteFile(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) return IoError(path, errno);
    return OkStatus();
  }

  Status CreateDirs(const std::string& path) override {
    if (path.empty() || IsDirectory(path)) return OkStatus();
    std::string parent = Dirname(path);
    if (parent != path) CKFLOW_RETURN_IF_ERROR(CreateDirs(parent));
    if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) return IoError(path, errno);
    if (!IsDirectory(path)) return IoError(path, ENOTDIR);
    return OkStatus();
  }

  Status DeleteDir(const std::string& path) override {
    if (::rmdir(path.c_str()) != 0) return IoError(path, errno);
    return OkStatus();
  }

  Status FileExists(const std::string& path) override {
    if (::access(path.c_str(), F_OK) != 0) return IoError(path, errno);
    return OkStatus();
  }

  bool IsDirectory(const std::string& path) override {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  }
};

}  // namespace

FileSystem* FileSystem::Default() {
  static FileSystem* const fs = new PosixFileSystem();
  return fs;
}

StatusOr<std::string> FileSystem::ReadFileToString(const std::string& path) {
  CKFLOW_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, NewRandomAccessFile(path));
  std::string contents;
  try {
    contents.resize(file->size());
  } catch (const std::exception&) {
    return ResourceExhaustedError(path, ": ", file->size(), " bytes do not fit in memory");
  }
  CKFLOW_RETURN_IF_ERROR(file->ReadAt(0, contents.size(), contents.data()));
  return contents;
}

std::string Dirname(std::string_view path) {
  size_t slash = path.rfind('/');
  if (slash == std::string_view::npos) return ".";
  // Strip the run of slashes before the name ("a//b" -> "a").
  size_t end = slash;
  while (end > 0 && path[end - 1] == '/') --end;
  if (end == 0) return "/";
  return std::string(path.substr(0, end));
}

std::string_view Basename(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

std::string JoinPath(std::string_view dir, std::string_view name) {
  if (!name.empty() && name.front() == '/') return std::string(name);
  if (dir.empty()) return std::string(name);
  std::string out(dir);
  if (out.back() != '/') out += '/';
  out += name;
  return out;
}

}  // namespace ckflow
