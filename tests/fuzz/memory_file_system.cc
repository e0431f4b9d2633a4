#include "tests/fuzz/memory_file_system.h"

#include <algorithm>
#include <utility>

namespace ckflow::fuzz {
namespace {

using Contents = MemoryFileSystem::Contents;

class MemoryReadFile final : public RandomAccessFile {
 public:
  MemoryReadFile(std::string path, std::shared_ptr<Contents> contents, uint64_t size)
      : path_(std::move(path)), contents_(std::move(contents)), size_(size) {}

  Status ReadAt(uint64_t offset, size_t n, char* dst) const override {
    MutexLock lock(&contents_->mu);
    const size_t size = contents_->bytes.size();
    if (offset > size || n > size - offset) {
      return DataLossError(path_, ": read of ", n, " bytes at ", offset, " past the end (", size,
                           " bytes)");
    }
    std::copy_n(contents_->bytes.data() + offset, n, dst);
    return OkStatus();
  }
  uint64_t size() const override { return size_; }
  const std::string& path() const override { return path_; }

 private:
  const std::string path_;
  const std::shared_ptr<Contents> contents_;
  const uint64_t size_;
};

class MemoryWriteFile final : public WritableFile {
 public:
  MemoryWriteFile(std::string path, std::shared_ptr<Contents> contents)
      : path_(std::move(path)), contents_(std::move(contents)) {}

  Status WriteAt(uint64_t offset, std::string_view data) override {
    if (closed_) return FailedPreconditionError(path_, ": write after Close");
    MutexLock lock(&contents_->mu);
    if (contents_->bytes.size() < offset + data.size()) {
      contents_->bytes.resize(offset + data.size());
    }
    std::copy(data.begin(), data.end(), contents_->bytes.begin() + static_cast<ptrdiff_t>(offset));
    return OkStatus();
  }
  Status Sync() override { return OkStatus(); }
  Status Close() override {
    closed_ = true;
    return OkStatus();
  }
  const std::string& path() const override { return path_; }

 private:
  const std::string path_;
  const std::shared_ptr<Contents> contents_;
  bool closed_ = false;
};

Status NoSuch(const std::string& path, std::string_view op) {
  return NotFoundError(path, ": ", op, ": No such file or directory (ENOENT)");
}

}  // namespace

bool MemoryFileSystem::IsDirectoryLocked(const std::string& path) const {
  return path == "/" || path == "." || dirs_.count(path) > 0;
}

StatusOr<std::unique_ptr<WritableFile>> MemoryFileSystem::NewWritableFile(const std::string& path) {
  const std::string p = CleanPath(path);
  MutexLock lock(&mu_);
  if (!IsDirectoryLocked(Dirname(p))) return NoSuch(path, "open");
  if (IsDirectoryLocked(p)) return InvalidArgumentError(path, ": open: Is a directory (EISDIR)");
  auto contents = std::make_shared<Contents>();
  contents->inode = next_inode_++;
  files_[p] = contents;
  return std::unique_ptr<WritableFile>(new MemoryWriteFile(path, std::move(contents)));
}

StatusOr<std::unique_ptr<RandomAccessFile>> MemoryFileSystem::NewRandomAccessFile(
    const std::string& path) {
  std::shared_ptr<Contents> contents;
  {
    MutexLock lock(&mu_);
    auto it = files_.find(CleanPath(path));
    if (it == files_.end()) return NoSuch(path, "open");
    contents = it->second;
  }
  uint64_t size;
  {
    MutexLock lock(&contents->mu);
    size = contents->bytes.size();
  }
  return std::unique_ptr<RandomAccessFile>(new MemoryReadFile(path, std::move(contents), size));
}

Status MemoryFileSystem::RenameFile(const std::string& from, const std::string& to) {
  const std::string f = CleanPath(from), t = CleanPath(to);
  MutexLock lock(&mu_);
  auto it = files_.find(f);
  if (it == files_.end()) return NoSuch(from, "rename to " + to);
  if (!IsDirectoryLocked(Dirname(t))) return NoSuch(to, "rename from " + from);
  std::shared_ptr<Contents> contents = std::move(it->second);
  files_.erase(it);
  files_[t] = std::move(contents);
  return OkStatus();
}

Status MemoryFileSystem::DeleteFile(const std::string& path) {
  MutexLock lock(&mu_);
  return files_.erase(CleanPath(path)) > 0 ? OkStatus() : NoSuch(path, "unlink");
}

Status MemoryFileSystem::CreateDirs(const std::string& path) {
  std::string p = CleanPath(path);
  MutexLock lock(&mu_);
  while (!IsDirectoryLocked(p)) {
    if (files_.count(p)) return FailedPreconditionError(p, ": mkdir: a file has this name");
    dirs_.insert(p);
    p = Dirname(p);
  }
  return OkStatus();
}

Status MemoryFileSystem::DeleteDir(const std::string& path) {
  const std::string p = CleanPath(path);
  MutexLock lock(&mu_);
  if (!dirs_.count(p)) return NoSuch(path, "rmdir");
  const std::string inside = p + "/";
  auto under = [&](const auto& set) {
    auto it = set.lower_bound(inside);
    return it != set.end() && std::string_view(*it).starts_with(inside);
  };
  auto file = files_.lower_bound(inside);
  if (under(dirs_) || (file != files_.end() && file->first.starts_with(inside))) {
    return FailedPreconditionError(path, ": rmdir: Directory not empty (ENOTEMPTY)");
  }
  dirs_.erase(p);
  return OkStatus();
}

Status MemoryFileSystem::FileExists(const std::string& path) {
  const std::string p = CleanPath(path);
  MutexLock lock(&mu_);
  return files_.count(p) || IsDirectoryLocked(p) ? OkStatus() : NoSuch(path, "stat");
}

bool MemoryFileSystem::IsDirectory(const std::string& path) {
  MutexLock lock(&mu_);
  return IsDirectoryLocked(CleanPath(path));
}

StatusOr<std::vector<std::string>> MemoryFileSystem::ListDir(const std::string& dir) {
  const std::string p = CleanPath(dir);
  MutexLock lock(&mu_);
  if (!IsDirectoryLocked(p)) return NoSuch(dir, "opendir");
  std::vector<std::string> names;
  for (const auto& [path, contents] : files_) {
    if (Dirname(path) == p) names.emplace_back(Basename(path));
  }
  for (const std::string& path : dirs_) {
    if (Dirname(path) == p) names.emplace_back(Basename(path));
  }
  return names;
}

StatusOr<FileStat> MemoryFileSystem::Stat(const std::string& path) {
  const std::string p = CleanPath(path);
  MutexLock lock(&mu_);
  if (IsDirectoryLocked(p)) return FileStat{.is_directory = true};
  auto it = files_.find(p);
  if (it == files_.end()) return NoSuch(path, "stat");
  MutexLock file_lock(&it->second->mu);
  return FileStat{.size = it->second->bytes.size(), .inode = it->second->inode};
}

Status MemoryFileSystem::SyncDir(const std::string& dir) {
  MutexLock lock(&mu_);
  return IsDirectoryLocked(CleanPath(dir)) ? OkStatus() : NoSuch(dir, "open");
}

Status MemoryFileSystem::Put(const std::string& path, std::string_view bytes) {
  CKFLOW_RETURN_IF_ERROR(CreateDirs(Dirname(CleanPath(path))));
  CKFLOW_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, NewWritableFile(path));
  CKFLOW_RETURN_IF_ERROR(file->WriteAt(0, bytes));
  return file->Close();
}

void MemoryFileSystem::RemoveAll(const std::string& dir) {
  const std::string p = CleanPath(dir);
  const std::string inside = p + "/";
  MutexLock lock(&mu_);
  std::erase_if(files_, [&](const auto& f) { return f.first.starts_with(inside); });
  std::erase_if(dirs_, [&](const std::string& d) { return d == p || d.starts_with(inside); });
}

}  // namespace ckflow::fuzz
