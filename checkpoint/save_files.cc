#include <optional>
#include <set>
#include <vector>

#include "base/atomic_file_internal.h"
#include "bundle/bundle_format.h"
#include "bundle/checkpoint_state.h"
#include "checkpoint/save_files_internal.h"

namespace ckflow::internal {
namespace {

// Consumes a run of at least `min` decimal digits from the front of *s.
bool ConsumeDigits(std::string_view* s, size_t min = 1, size_t max = 32) {
  size_t n = 0;
  while (n < s->size() && n < max && (*s)[n] >= '0' && (*s)[n] <= '9') ++n;
  if (n < min) return false;
  s->remove_prefix(n);
  return true;
}

bool Consume(std::string_view* s, std::string_view what) {
  if (!s->starts_with(what)) return false;
  s->remove_prefix(what.size());
  return true;
}

// "-SSSSS-of-NNNNN" (after ".data").
bool ConsumeShardSuffix(std::string_view* s) {
  return Consume(s, "-") && ConsumeDigits(s, 5, 5) && Consume(s, "-of-") && ConsumeDigits(s, 5, 5);
}

// A final file name of a bundle: ".index" or ".data-SSSSS-of-NNNNN".
bool ConsumeBundleFileSuffix(std::string_view* s) {
  if (Consume(s, ".index")) return true;
  return Consume(s, ".data") && ConsumeShardSuffix(s);
}

// ".tempstate<digits>" or ".old<digits>" (base/atomic_file_internal.h),
// ending the name.
bool IsTempSuffix(std::string_view s) { return IsTempStateSuffix(s) || IsSetAsideSuffix(s); }

// Consumes the checkpoint name (B or B-N) from the front of *s.
bool ConsumeCheckpointName(const CheckpointNaming& naming, std::string_view* s) {
  if (!Consume(s, naming.base)) return false;
  if (!naming.numbered) return true;
  return Consume(s, "-") && ConsumeDigits(s);
}

// A file a SaveV2 makes in a "_temp" directory.
bool IsPartFileName(std::string_view s) {
  if (!(Consume(&s, "part") && ConsumeShardSuffix(&s) && ConsumeBundleFileSuffix(&s))) {
    return false;
  }
  return s.empty() || IsTempSuffix(s);
}

// For "B-N.data-SSSSS-of-NNNNN", "B-N".
std::optional<std::string> OrphanDataPrefix(const CheckpointNaming& naming, std::string_view name) {
  std::string_view rest = name;
  if (!ConsumeCheckpointName(naming, &rest)) return std::nullopt;
  const size_t prefix_size = name.size() - rest.size();
  if (!Consume(&rest, ".data") || !ConsumeShardSuffix(&rest) || !rest.empty()) return std::nullopt;
  return std::string(name.substr(0, prefix_size));
}

}  // namespace

bool CheckpointNaming::IsCheckpointName(std::string_view name) const {
  return ConsumeCheckpointName(*this, &name) && name.empty();
}

bool IsDebrisName(const CheckpointNaming& naming, std::string_view name) {
  if (IsCheckpointStateTempName(name)) return true;
  if (!ConsumeCheckpointName(naming, &name)) return false;
  if (name == "_temp") return true;
  return ConsumeBundleFileSuffix(&name) && IsTempSuffix(name);
}

bool IsDebrisIn(const CheckpointNaming& naming, const std::string& name,
                const std::set<std::string>& present) {
  // A data file under a final name whose index is missing: a merge that
  // died between its renames (the index goes last). Never a checkpoint.
  if (std::optional<std::string> prefix = OrphanDataPrefix(naming, name)) {
    return !present.count(*prefix + ".index");
  }
  return IsDebrisName(naming, name);
}

StatusOr<std::vector<std::string>> ListSaveDebris(FileSystem* fs, const std::string& dir,
                                                  const CheckpointNaming& naming) {
  StatusOr<std::vector<std::string>> names = fs->ListDir(dir);
  if (!names.ok()) {
    if (IsNotFound(names.status())) return std::vector<std::string>();
    return names.status();
  }
  const std::set<std::string> present(names->begin(), names->end());
  std::vector<std::string> debris;
  for (const std::string& name : *names) {
    if (IsDebrisIn(naming, name, present)) debris.push_back(name);
  }
  return debris;
}

StatusOr<DebrisRemoved> RemoveSaveDebris(FileSystem* fs, const std::string& dir,
                                         const CheckpointNaming& naming) {
  DebrisRemoved removed;
  StatusOr<std::vector<std::string>> names = fs->ListDir(dir);
  if (!names.ok()) {
    if (IsNotFound(names.status())) return removed;  // nothing saved here yet
    return names.status();
  }
  Status first_error;
  auto remove_file = [&](const std::string& path) {
    StatusOr<FileStat> st = fs->Stat(path);
    Status s = fs->DeleteFile(path);
    if (s.ok()) {
      ++removed.files;
      if (st.ok()) removed.bytes += st->size;
    } else if (!IsNotFound(s) && first_error.ok()) {
      first_error = s;
    }
  };
  std::set<std::string> present(names->begin(), names->end());
  // A file set aside by a save over an existing checkpoint that died before
  // its new file took the name goes back; otherwise it is stale.
  for (const std::string& name : *names) {
    const size_t old = name.rfind(".old");
    if (old == std::string::npos || !IsDebrisName(naming, name)) continue;
    const std::string final_name = name.substr(0, old);
    if (present.count(final_name)) continue;
    if (fs->RenameFile(JoinPath(dir, name), JoinPath(dir, final_name)).ok()) {
      present.insert(final_name);
      present.erase(name);
    }
  }
  for (const std::string& name : *names) {
    if (!present.count(name) || !IsDebrisIn(naming, name, present)) continue;
    const std::string path = JoinPath(dir, name);
    if (!name.ends_with("_temp")) {
      remove_file(path);
      continue;
    }
    StatusOr<std::vector<std::string>> parts = fs->ListDir(path);
    if (!parts.ok()) {
      if (!IsNotFound(parts.status()) && first_error.ok()) first_error = parts.status();
      continue;
    }
    bool foreign = false;
    for (const std::string& part : *parts) {
      if (IsPartFileName(part)) {
        remove_file(JoinPath(path, part));
      } else {
        foreign = true;  // not ours: leave it, and so the directory
      }
    }
    if (!foreign) {
      Status s = fs->DeleteDir(path);
      if (!s.ok() && !IsNotFound(s) && first_error.ok()) first_error = s;
    }
  }
  if (!first_error.ok()) return first_error.WithContext("removing debris of dead saves");
  return removed;
}

Status RemoveCheckpointFiles(FileSystem* fs, const std::string& prefix) {
  Status first_error = fs->DeleteFile(IndexFilename(prefix));
  if (IsNotFound(first_error)) first_error = OkStatus();
  const std::string dir = Dirname(prefix);
  StatusOr<std::vector<std::string>> names = fs->ListDir(dir);
  if (!names.ok()) return first_error.ok() ? names.status() : first_error;
  const std::string data = std::string(Basename(prefix)) + ".data";
  for (const std::string& name : *names) {
    std::string_view rest = name;
    if (!Consume(&rest, data) || !ConsumeShardSuffix(&rest) || !rest.empty()) continue;
    Status s = fs->DeleteFile(JoinPath(dir, name));
    if (!s.ok() && !IsNotFound(s) && first_error.ok()) first_error = s;
  }
  return first_error;
}

}  // namespace ckflow::internal
