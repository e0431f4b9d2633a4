#include "tests/checkpoint/recording_file_system.h"

#include <cerrno>
#include <filesystem>

namespace ckflow::testing {

const char* FsOpName(FsOp op) {
  switch (op) {
    case FsOp::kCreate:
      return "create";
    case FsOp::kWrite:
      return "write";
    case FsOp::kSync:
      return "sync";
    case FsOp::kClose:
      return "close";
    case FsOp::kRename:
      return "rename";
    case FsOp::kDelete:
      return "delete";
    case FsOp::kCreateDirs:
      return "mkdirs";
    case FsOp::kDeleteDir:
      return "rmdir";
    case FsOp::kSyncDir:
      return "syncdir";
    case FsOp::kLink:
      return "link";
    case FsOp::kOpen:
      return "open";
    case FsOp::kList:
      return "list";
    case FsOp::kStat:
      return "stat";
    case FsOp::kExists:
      return "exists";
  }
  return "?";
}

bool IsMutation(FsOp op) { return op < FsOp::kOpen; }

std::string FsEvent::ToString() const {
  std::string s = "step " + std::to_string(step) + ": " + FsOpName(op) + " " + path;
  if (op == FsOp::kRename || op == FsOp::kLink) s += " -> " + to;
  return s;
}

Status RecordingFileSystem::Begin(FsEvent* event, bool* short_write) {
  bool fail = false;
  int err = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (IsMutation(event->op) || count_reads_) event->step = ++steps_;
    event->index = events_.size();
    events_.push_back(*event);
    if (event->step != 0 && event->step == fail_step_) {
      fail = true;
      err = fail_errno_;
      failed_ = *event;
    }
  }
  if (event->step != 0 && hook_) hook_(*event, /*after=*/false);
  if (!fail) return OkStatus();
  if (short_write != nullptr) *short_write = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    events_[event->index].ok = false;
  }
  const std::string what = event->op == FsOp::kRename || event->op == FsOp::kLink
                               ? std::string(FsOpName(event->op)) + " to " + event->to
                               : FsOpName(event->op);
  return ErrnoStatus(err, what + " (injected)", event->path);
}

void RecordingFileSystem::End(const FsEvent& event, bool ok) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    events_[event.index].ok = ok;
  }
  if (event.step != 0 && hook_) hook_(event, /*after=*/true);
}

namespace {

class RecordingWritableFile final : public WritableFile {
 public:
  RecordingWritableFile(std::unique_ptr<WritableFile> base, RecordingFileSystem* fs)
      : base_(std::move(base)), fs_(fs) {}
  ~RecordingWritableFile() override { Close().IgnoreError(); }

  Status WriteAt(uint64_t offset, std::string_view data) override {
    FsEvent e{FsOp::kWrite, base_->path()};
    bool short_write = false;
    Status s = fs_->Begin(&e, &short_write);
    if (!s.ok()) {
      if (short_write) base_->WriteAt(offset, data.substr(0, data.size() / 2)).IgnoreError();
      return s;
    }
    s = base_->WriteAt(offset, data);
    fs_->End(e, s.ok());
    return s;
  }
  Status Sync() override {
    FsEvent e{FsOp::kSync, base_->path()};
    CKFLOW_RETURN_IF_ERROR(fs_->Begin(&e));
    Status s = base_->Sync();
    fs_->End(e, s.ok());
    return s;
  }
  void StartWriteback(uint64_t offset, size_t n) override { base_->StartWriteback(offset, n); }
  Status Close() override {
    if (closed_) return OkStatus();
    closed_ = true;
    FsEvent e{FsOp::kClose, base_->path()};
    Status injected = fs_->Begin(&e);
    Status s = base_->Close();  // the descriptor is gone either way
    fs_->End(e, s.ok());
    return injected.ok() ? s : injected;
  }
  const std::string& path() const override { return base_->path(); }

 private:
  std::unique_ptr<WritableFile> base_;
  RecordingFileSystem* const fs_;
  bool closed_ = false;
};

}  // namespace

StatusOr<std::unique_ptr<WritableFile>> RecordingFileSystem::NewWritableFile(
    const std::string& path) {
  FsEvent e{FsOp::kCreate, path};
  CKFLOW_RETURN_IF_ERROR(Begin(&e));
  StatusOr<std::unique_ptr<WritableFile>> file = target()->NewWritableFile(path);
  End(e, file.ok());
  if (!file.ok()) return file.status();
  return std::unique_ptr<WritableFile>(new RecordingWritableFile(*std::move(file), this));
}

StatusOr<std::unique_ptr<RandomAccessFile>> RecordingFileSystem::NewRandomAccessFile(
    const std::string& path) {
  FsEvent e{FsOp::kOpen, path};
  CKFLOW_RETURN_IF_ERROR(Begin(&e));
  auto file = target()->NewRandomAccessFile(path);
  End(e, file.ok());
  return file;
}

Status RecordingFileSystem::RenameFile(const std::string& from, const std::string& to) {
  FsEvent e{FsOp::kRename, from, to};
  CKFLOW_RETURN_IF_ERROR(Begin(&e));
  Status s = target()->RenameFile(from, to);
  End(e, s.ok());
  return s;
}

Status RecordingFileSystem::LinkFile(const std::string& from, const std::string& to) {
  FsEvent e{FsOp::kLink, from, to};
  CKFLOW_RETURN_IF_ERROR(Begin(&e));
  Status s = target()->LinkFile(from, to);
  End(e, s.ok());
  return s;
}

#define CKFLOW_RECORD(op, path, call) \
  FsEvent e{op, path};                \
  CKFLOW_RETURN_IF_ERROR(Begin(&e));  \
  auto result = call;                 \
  End(e, result.ok());                \
  return result

Status RecordingFileSystem::DeleteFile(const std::string& path) {
  CKFLOW_RECORD(FsOp::kDelete, path, target()->DeleteFile(path));
}
Status RecordingFileSystem::CreateDirs(const std::string& path) {
  CKFLOW_RECORD(FsOp::kCreateDirs, path, target()->CreateDirs(path));
}
Status RecordingFileSystem::DeleteDir(const std::string& path) {
  CKFLOW_RECORD(FsOp::kDeleteDir, path, target()->DeleteDir(path));
}
Status RecordingFileSystem::FileExists(const std::string& path) {
  CKFLOW_RECORD(FsOp::kExists, path, target()->FileExists(path));
}
StatusOr<std::vector<std::string>> RecordingFileSystem::ListDir(const std::string& dir) {
  CKFLOW_RECORD(FsOp::kList, dir, target()->ListDir(dir));
}
StatusOr<FileStat> RecordingFileSystem::Stat(const std::string& path) {
  CKFLOW_RECORD(FsOp::kStat, path, target()->Stat(path));
}
Status RecordingFileSystem::SyncDir(const std::string& dir) {
  CKFLOW_RECORD(FsOp::kSyncDir, dir, target()->SyncDir(dir));
}

#undef CKFLOW_RECORD

namespace {

// `path` relative to `root`, or "" if it is not under it.
std::string Under(const std::string& root, const std::string& path) {
  const std::string r = CleanPath(root);
  const std::string p = CleanPath(path);
  if (p.size() <= r.size() + 1 || p.compare(0, r.size(), r) != 0 || p[r.size()] != '/') return "";
  return p.substr(r.size() + 1);
}

}  // namespace

std::set<std::string> ReplayTree(const std::vector<FsEvent>& events, const std::string& root,
                                 std::set<std::string> tree) {
  for (const FsEvent& e : events) {
    if (!e.ok) continue;
    const std::string path = Under(root, e.path);
    switch (e.op) {
      case FsOp::kCreate:
        if (!path.empty()) tree.insert(path);
        break;
      case FsOp::kRename: {
        if (!path.empty()) tree.erase(path);
        const std::string to = Under(root, e.to);
        if (!to.empty()) tree.insert(to);
        break;
      }
      case FsOp::kLink: {
        const std::string to = Under(root, e.to);
        if (!to.empty()) tree.insert(to);
        break;
      }
      case FsOp::kDelete:
        if (!path.empty()) tree.erase(path);
        break;
      case FsOp::kCreateDirs: {
        // Every missing directory on the way down.
        std::string p = path;
        while (!p.empty() && p != ".") {
          tree.insert(p + "/");
          const std::string parent = Dirname(p);
          p = parent == "." ? "" : parent;
        }
        break;
      }
      case FsOp::kDeleteDir:
        if (!path.empty()) tree.erase(path + "/");
        break;
      default:
        break;
    }
  }
  return tree;
}

std::set<std::string> DiskTree(const std::string& root) {
  std::set<std::string> tree;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
    std::string p = std::filesystem::relative(entry.path(), root).string();
    tree.insert(entry.is_directory() ? p + "/" : p);
  }
  return tree;
}

}  // namespace ckflow::testing
