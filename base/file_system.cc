#include "base/file_system.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

namespace ckflow {

Status ErrnoStatus(int err, std::string_view op, std::string_view path) {
  const char* name = strerrorname_np(err);
  std::string message = std::string(path) + ": " + std::string(op) + ": " + std::strerror(err) +
                        " (" + (name ? name : std::to_string(err)) + ")";
  StatusCode code;
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      code = StatusCode::kNotFound;
      break;
    case EACCES:
    case EPERM:
    case EROFS:
      code = StatusCode::kPermissionDenied;
      break;
    case ENOSPC:
    case EDQUOT:
    case EMFILE:
    case ENFILE:
    case ENOMEM:
      code = StatusCode::kResourceExhausted;
      break;
    case EEXIST:
      code = StatusCode::kAlreadyExists;
      break;
    case EIO:
      // The device lost data, or may have: fsync's EIO means pages the
      // kernel held are gone.
      code = StatusCode::kDataLoss;
      break;
    case EFBIG:
      code = StatusCode::kOutOfRange;
      break;
    case ENOTEMPTY:
    case EXDEV:
      code = StatusCode::kFailedPrecondition;
      break;
    case ENAMETOOLONG:
    case EINVAL:
    case EISDIR:
    case ELOOP:
      code = StatusCode::kInvalidArgument;
      break;
    case EAGAIN:
    case EBUSY:
      code = StatusCode::kUnavailable;
      break;
    default:
      code = StatusCode::kUnknown;
  }
  return Status(code, message);
}

namespace {

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
        return ErrnoStatus(errno, "read", path_);
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
  // Linux doubles the file's readahead window.
  void AdviseSequential() const override { ::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL); }
  void Prefetch(uint64_t offset, uint64_t n) const override {
    ::posix_fadvise(fd_, static_cast<off_t>(offset), static_cast<off_t>(n), POSIX_FADV_WILLNEED);
  }

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
        return ErrnoStatus(errno, "write", path_);
      }
      p += w;
      n -= static_cast<size_t>(w);
      offset += static_cast<uint64_t>(w);
    }
    return OkStatus();
  }
  Status Sync() override {
    if (fd_ < 0) return FailedPreconditionError(path_, ": sync after close");
    if (::fdatasync(fd_) != 0) return ErrnoStatus(errno, "fsync", path_);
    return OkStatus();
  }
  Status Close() override {
    if (fd_ < 0) return OkStatus();
    int rc = ::close(fd_);
    fd_ = -1;
    if (rc != 0) return ErrnoStatus(errno, "close", path_);
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
    if (fd < 0) return ErrnoStatus(errno, "create", path);
    return std::unique_ptr<WritableFile>(new PosixWritableFile(path, fd));
  }

  StatusOr<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(
      const std::string& path) override {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus(errno, "open", path);
    struct stat st;
    if (::fstat(fd, &st) != 0) {
      Status s = ErrnoStatus(errno, "stat", path);
      ::close(fd);
      return s;
    }
    if (S_ISDIR(st.st_mode)) {
      ::close(fd);
      return ErrnoStatus(EISDIR, "open", path);
    }
    return std::unique_ptr<RandomAccessFile>(
        new PosixRandomAccessFile(path, fd, static_cast<uint64_t>(st.st_size)));
  }

  Status RenameFile(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) return ErrnoStatus(errno, "rename to " + to, from);
    return OkStatus();
  }

  Status DeleteFile(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) return ErrnoStatus(errno, "delete", path);
    return OkStatus();
  }

  Status CreateDirs(const std::string& path) override {
    if (path.empty() || IsDirectory(path)) return OkStatus();
    std::string parent = Dirname(path);
    if (parent != path) CKFLOW_RETURN_IF_ERROR(CreateDirs(parent));
    if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
      return ErrnoStatus(errno, "create directory", path);
    }
    if (!IsDirectory(path)) return ErrnoStatus(ENOTDIR, "create directory", path);
    return OkStatus();
  }

  Status DeleteDir(const std::string& path) override {
    if (::rmdir(path.c_str()) != 0) return ErrnoStatus(errno, "delete directory", path);
    return OkStatus();
  }

  Status FileExists(const std::string& path) override {
    if (::access(path.c_str(), F_OK) != 0) return ErrnoStatus(errno, "access", path);
    return OkStatus();
  }

  bool IsDirectory(const std::string& path) override {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  }

  StatusOr<std::vector<std::string>> ListDir(const std::string& dir) override {
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return ErrnoStatus(errno, "list", dir);
    std::vector<std::string> names;
    errno = 0;
    while (const struct dirent* entry = ::readdir(d)) {
      std::string_view name = entry->d_name;
      if (name != "." && name != "..") names.emplace_back(name);
      errno = 0;
    }
    const int err = errno;
    ::closedir(d);
    if (err != 0) return ErrnoStatus(err, "list", dir);
    return names;
  }

  StatusOr<FileStat> Stat(const std::string& path) override {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return ErrnoStatus(errno, "stat", path);
    return FileStat{.size = static_cast<uint64_t>(st.st_size),
                    .is_directory = S_ISDIR(st.st_mode),
                    .mtime_ns = int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec,
                    .device = static_cast<uint64_t>(st.st_dev),
                    .inode = static_cast<uint64_t>(st.st_ino)};
  }

  Status LinkFile(const std::string& from, const std::string& to) override {
    if (::link(from.c_str(), to.c_str()) == 0) return OkStatus();
    const int err = errno;
    // No link across devices, none on some file systems (FAT, some network
    // and overlay mounts), a full link count: the contents still go.
    if (err == EXDEV || err == EPERM || err == EOPNOTSUPP || err == EMLINK) {
      return FileSystem::LinkFile(from, to);
    }
    return ErrnoStatus(err, "link to " + to, from);
  }

  Status SyncDir(const std::string& dir) override {
    const std::string& path = dir.empty() ? kDot : dir;
    int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus(errno, "open directory", path);
    const int rc = ::fsync(fd);
    const int err = errno;
    ::close(fd);
    if (rc != 0) return ErrnoStatus(err, "fsync directory", path);
    return OkStatus();
  }

 private:
  const std::string kDot = ".";
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

Status FileSystem::LinkFile(const std::string& from, const std::string& to) {
  if (FileExists(to).ok()) return ErrnoStatus(EEXIST, "link to " + to, from);
  CKFLOW_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> in, NewRandomAccessFile(from));
  CKFLOW_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> out, NewWritableFile(to));
  constexpr size_t kChunk = size_t{4} << 20;
  std::string buffer(std::min<uint64_t>(in->size(), kChunk), '\0');
  Status s;
  for (uint64_t offset = 0; s.ok() && offset < in->size(); offset += buffer.size()) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(buffer.size(), in->size() - offset));
    s = in->ReadAt(offset, n, buffer.data());
    if (s.ok()) s = out->WriteAt(offset, std::string_view(buffer.data(), n));
  }
  // A link is as durable as its source; a copy is only once synced.
  if (s.ok()) s = out->Sync();
  Status closed = out->Close();
  if (s.ok()) s = closed;
  if (!s.ok()) {
    DeleteFile(to).IgnoreError();
    return s.WithContext("copying '" + from + "' to '" + to + "'");
  }
  return OkStatus();
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

std::string CleanPath(std::string_view path) {
  const bool absolute = !path.empty() && path.front() == '/';
  std::vector<std::string_view> parts;
  size_t i = 0;
  while (i <= path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    std::string_view part = path.substr(i, j - i);
    if (part == "..") {
      if (!parts.empty() && parts.back() != "..") {
        parts.pop_back();
      } else if (!absolute) {
        parts.push_back(part);  // "/.." is "/"
      }
    } else if (!part.empty() && part != ".") {
      parts.push_back(part);
    }
    i = j + 1;
  }
  std::string out = absolute ? "/" : "";
  for (size_t k = 0; k < parts.size(); ++k) {
    if (k > 0) out += '/';
    out += parts[k];
  }
  return out.empty() ? "." : out;
}

std::string AbsolutePath(std::string_view path) {
  if (!path.empty() && path.front() == '/') return CleanPath(path);
  char buffer[4096];
  const char* cwd = ::getcwd(buffer, sizeof(buffer));
  return CleanPath(JoinPath(cwd ? cwd : "/", path));
}

bool IsInsideDirectory(std::string_view dir, std::string_view path) {
  const bool absolute = !path.empty() && path.front() == '/';
  std::string d = CleanPath(dir);
  std::string p;
  if (absolute) {
    d = AbsolutePath(d);
    p = CleanPath(path);
  } else {
    p = CleanPath(JoinPath(d, path));
  }
  if (d == ".") return p != "." && p != ".." && !p.starts_with("../") && p.front() != '/';
  if (d == "/") return p.size() > 1 && p.front() == '/';
  return p.size() > d.size() + 1 && p.compare(0, d.size(), d) == 0 && p[d.size()] == '/';
}

}  // namespace ckflow
