#include <optional>
#include <random>
#include <vector>

#include "base/atomic_file_internal.h"

namespace ckflow::internal {
namespace {

// Whether `s` is `prefix` and then 1 to 32 decimal digits.
bool IsPrefixAndDigits(std::string_view s, std::string_view prefix) {
  if (!s.starts_with(prefix)) return false;
  s.remove_prefix(prefix.size());
  if (s.empty() || s.size() > 32) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// 32 lowercase hex digits, like Python's uuid4().hex.
std::string RandomHex32() {
  thread_local std::mt19937_64 rng(std::random_device{}());
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (int word = 0; word < 2; ++word) {
    uint64_t v = rng();
    for (int i = 0; i < 16; ++i, v >>= 4) out += kHex[v & 15];
  }
  return out;
}

}  // namespace

std::string TempStateSuffix() {
  thread_local std::mt19937_64 rng(std::random_device{}());
  return ".tempstate" + std::to_string(rng());
}

bool IsTempStateSuffix(std::string_view suffix) { return IsPrefixAndDigits(suffix, ".tempstate"); }

bool IsSetAsideSuffix(std::string_view suffix) { return IsPrefixAndDigits(suffix, ".old"); }

bool IsReplaceTempName(std::string_view name, std::string_view final_name) {
  if (!name.starts_with(final_name)) return false;
  name.remove_prefix(final_name.size());
  if (name.size() != 4 + 32 || !name.starts_with(".tmp")) return false;
  for (char c : name.substr(4)) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

Status WriteNewFile(FileSystem* fs, const std::string& path, std::string_view contents, bool sync) {
  CKFLOW_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, fs->NewWritableFile(path));
  Status s = file->WriteAt(0, contents);
  if (s.ok() && sync) s = file->Sync();
  Status closed = file->Close();
  if (s.ok()) s = closed;
  if (!s.ok()) fs->DeleteFile(path).IgnoreError();
  return s;
}

Status MoveIntoPlace(FileSystem* fs, std::span<const std::pair<std::string, std::string>> moves) {
  std::vector<std::pair<std::string, std::string>> set_aside;  // final -> backup
  std::vector<const std::pair<std::string, std::string>*> done;
  auto undo = [&] {
    for (auto it = done.rbegin(); it != done.rend(); ++it) {
      fs->RenameFile((*it)->second, (*it)->first).IgnoreError();
    }
    for (auto it = set_aside.rbegin(); it != set_aside.rend(); ++it) {
      fs->RenameFile(it->second, it->first).IgnoreError();
    }
  };
  for (const auto& [from, to] : moves) {
    if (!fs->FileExists(to).ok()) continue;
    std::string backup = to + ".old" + std::to_string(std::random_device{}());
    Status s = fs->RenameFile(to, backup);
    if (!s.ok()) {
      undo();
      return s;
    }
    set_aside.emplace_back(to, std::move(backup));
  }
  for (const auto& move : moves) {
    Status s = fs->RenameFile(move.first, move.second);
    if (!s.ok()) {
      undo();
      return s;
    }
    done.push_back(&move);
  }
  for (const auto& [final_name, backup] : set_aside) fs->DeleteFile(backup).IgnoreError();
  return OkStatus();
}

Status MoveIntoPlaceDurably(FileSystem* fs,
                            std::span<const std::pair<std::string, std::string>> moves, bool sync,
                            std::string_view what) {
  CKFLOW_RETURN_IF_ERROR(MoveIntoPlace(fs, moves));
  if (!sync || moves.empty()) return OkStatus();
  Status synced = fs->SyncDir(Dirname(moves.back().second));
  if (synced.ok()) return OkStatus();
  for (auto it = moves.rbegin(); it != moves.rend(); ++it) fs->DeleteFile(it->second).IgnoreError();
  return synced.WithContext("making " + std::string(what) + " durable");
}

Status ReplaceFile(FileSystem* fs, const std::string& dir, std::string_view name,
                   std::string_view contents, bool durable) {
  const std::string path = JoinPath(dir, name);
  // A durable write that fails after its rename puts the old contents
  // back, so that an error always means the previous file.
  std::optional<std::string> previous;
  if (durable) {
    StatusOr<std::string> old = fs->ReadFileToString(path);
    if (old.ok()) {
      previous = *std::move(old);
    } else if (!IsNotFound(old.status())) {
      return old.status();
    }
  }
  const std::string temp = path + ".tmp" + RandomHex32();
  CKFLOW_RETURN_IF_ERROR(WriteNewFile(fs, temp, contents, durable));
  Status s = fs->RenameFile(temp, path);
  if (!s.ok()) {
    fs->DeleteFile(temp).IgnoreError();
    return s;
  }
  if (!durable) return OkStatus();
  Status synced = fs->SyncDir(dir);
  if (synced.ok()) return OkStatus();
  Status undone;
  if (previous.has_value()) {
    const std::string back = path + ".tmp" + RandomHex32();
    undone = WriteNewFile(fs, back, *previous, /*sync=*/true);
    if (undone.ok()) undone = fs->RenameFile(back, path);
    if (!undone.ok()) fs->DeleteFile(back).IgnoreError();
  } else {
    undone = fs->DeleteFile(path);
  }
  if (!undone.ok()) {
    return synced.WithContext("the new state could not be undone either (" + undone.ToString() +
                              ")");
  }
  return synced;
}

}  // namespace ckflow::internal
