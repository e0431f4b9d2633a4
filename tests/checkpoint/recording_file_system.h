// RecordingFileSystem: a FileSystem that records every operation that goes
// through it, and can fail one (with an errno, as the disk would) or run a
// hook before or after it (a crash point). Tests use it to see each step of
// a save, to fail any of them, and to kill a child process at any of them.

#ifndef CKFLOW_TESTS_CHECKPOINT_RECORDING_FILE_SYSTEM_H_
#define CKFLOW_TESTS_CHECKPOINT_RECORDING_FILE_SYSTEM_H_

#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/file_system.h"

namespace ckflow::testing {

enum class FsOp {
  // Effects on the disk, numbered as steps (1-based) for faults and hooks.
  kCreate,
  kWrite,
  kSync,
  kClose,
  kRename,
  kDelete,
  kCreateDirs,
  kDeleteDir,
  kSyncDir,
  kLink,
  // Reads; recorded, and numbered as steps too when `count_reads`.
  kOpen,
  kList,
  kStat,
  kExists,
};
const char* FsOpName(FsOp op);
bool IsMutation(FsOp op);

struct FsEvent {
  FsOp op;
  std::string path;
  std::string to;    // kRename and kLink only
  int step = 0;      // 0 if not a numbered step
  bool ok = true;    // it happened (set after the call)
  size_t index = 0;  // in events()
  std::string ToString() const;
};

class RecordingFileSystem final : public FileSystemWrapper {
 public:
  explicit RecordingFileSystem(FileSystem* target = FileSystem::Default())
      : FileSystemWrapper(target) {}

  // Step `step` fails with `err` (ErrnoStatus, as the POSIX file system
  // would report it) instead of happening; a failing kWrite first writes
  // half its bytes (a short write, then ENOSPC or whatever `err` is).
  void FailStep(int step, int err) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_step_ = step;
    fail_errno_ = err;
  }
  // Number reads (open, list, stat, exists) as steps too.
  void CountReads(bool count) {
    std::lock_guard<std::mutex> lock(mu_);
    count_reads_ = count;
  }
  // Called (without the lock) before each numbered step and after it (with
  // its status): a crash point.
  using Hook = std::function<void(const FsEvent& event, bool after)>;
  void SetHook(Hook hook) { hook_ = std::move(hook); }

  std::vector<FsEvent> events() const {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }
  // The step of the first recorded `op`; 0 if there is none.
  int FirstStep(FsOp op) const {
    std::lock_guard<std::mutex> lock(mu_);
    for (const FsEvent& e : events_) {
      if (e.op == op) return e.step;
    }
    return 0;
  }
  int steps() const {
    std::lock_guard<std::mutex> lock(mu_);
    return steps_;
  }
  // The event of the injected failure, if it happened.
  std::optional<FsEvent> failed_event() const {
    std::lock_guard<std::mutex> lock(mu_);
    return failed_;
  }
  void Clear() {
    std::lock_guard<std::mutex> lock(mu_);
    events_.clear();
    steps_ = 0;
    failed_.reset();
  }

  // Records `event`, numbering it; the injected error if it is the step
  // to fail (then *short_write is set for a write).
  Status Begin(FsEvent* event, bool* short_write = nullptr);
  void End(const FsEvent& event, bool ok);

  StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override;
  StatusOr<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(const std::string& path) override;
  Status RenameFile(const std::string& from, const std::string& to) override;
  Status DeleteFile(const std::string& path) override;
  Status CreateDirs(const std::string& path) override;
  Status DeleteDir(const std::string& path) override;
  Status FileExists(const std::string& path) override;
  StatusOr<std::vector<std::string>> ListDir(const std::string& dir) override;
  StatusOr<FileStat> Stat(const std::string& path) override;
  Status SyncDir(const std::string& dir) override;
  Status LinkFile(const std::string& from, const std::string& to) override;

 private:
  mutable std::mutex mu_;
  std::vector<FsEvent> events_;    // guarded by mu_
  int steps_ = 0;                  // guarded by mu_
  int fail_step_ = 0;              // guarded by mu_
  int fail_errno_ = 0;             // guarded by mu_
  bool count_reads_ = false;       // guarded by mu_
  std::optional<FsEvent> failed_;  // guarded by mu_
  Hook hook_;                      // set before use
};

// The files (paths relative to `root`, directories with a trailing '/')
// that the recorded creates, renames, deletes and directory operations
// under `root` leave, starting from `initial`: what the disk must hold if
// every effect went through the file system.
std::set<std::string> ReplayTree(const std::vector<FsEvent>& events, const std::string& root,
                                 std::set<std::string> initial);
// The files and directories under `root` on the real disk, as above.
std::set<std::string> DiskTree(const std::string& root);

}  // namespace ckflow::testing

#endif  // CKFLOW_TESTS_CHECKPOINT_RECORDING_FILE_SYSTEM_H_
