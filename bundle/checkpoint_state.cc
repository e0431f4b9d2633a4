#include "bundle/checkpoint_state.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include "base/atomic_file_internal.h"
#include "bundle/bundle_format.h"
#include "bundle/protos/checkpoint_state.pb.h"

namespace ckflow {
namespace {

// Keeps protobuf's parse errors for our message instead of its log.
class ErrorCollector final : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, int column, const std::string& message) override {
    if (first_.empty()) {
      first_ = "line " + std::to_string(line + 1) + ", column " + std::to_string(column + 1) +
               ": " + message;
    }
  }
  const std::string& first() const { return first_; }

 private:
  std::string first_;
};

// If `path` ends in ".data-<digits>-of-<digits>" (at least 5 digits each),
// the position of that suffix.
std::optional<size_t> DataSuffixPosition(std::string_view path) {
  const size_t pos = path.rfind(".data-");
  if (pos == std::string_view::npos) return std::nullopt;
  std::string_view rest = path.substr(pos + 6);
  auto digits = [&rest]() {
    size_t n = 0;
    while (n < rest.size() && rest[n] >= '0' && rest[n] <= '9') ++n;
    rest.remove_prefix(n);
    return n;
  };
  if (digits() < 5 || !rest.starts_with("-of-")) return std::nullopt;
  rest.remove_prefix(4);
  if (digits() < 5 || !rest.empty()) return std::nullopt;
  return pos;
}

}  // namespace

StatusOr<std::optional<CheckpointStateData>> ReadCheckpointState(const std::string& dir,
                                                                 FileSystem* fs,
                                                                 std::string_view latest_filename) {
  if (fs == nullptr) fs = FileSystem::Default();
  const std::string path = JoinPath(dir, latest_filename);
  StatusOr<std::string> text = fs->ReadFileToString(path);
  if (!text.ok()) {
    if (IsNotFound(text.status())) return std::optional<CheckpointStateData>();
    return text.status();
  }
  tensorflow::CheckpointState proto;
  google::protobuf::TextFormat::Parser parser;
  ErrorCollector errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(*text, &proto)) {
    return DataLossError("Invalid checkpoint state loaded from ", dir, ": ", path,
                         " is not a text CheckpointState (", errors.first(), ")");
  }
  // TensorFlow's get_checkpoint_state refuses a state that names no
  // checkpoint: an empty file is what a write cut short leaves behind, and
  // treating it as "no checkpoints yet" would let training start over.
  if (proto.model_checkpoint_path().empty()) {
    return DataLossError("Invalid checkpoint state loaded from ", dir, ": ", path,
                         " has no model_checkpoint_path",
                         text->empty() ? " (the file is empty)" : "");
  }
  CheckpointStateData state;
  state.model_checkpoint_path = proto.model_checkpoint_path();
  state.all_model_checkpoint_paths.assign(proto.all_model_checkpoint_paths().begin(),
                                          proto.all_model_checkpoint_paths().end());
  state.all_model_checkpoint_timestamps.assign(proto.all_model_checkpoint_timestamps().begin(),
                                               proto.all_model_checkpoint_timestamps().end());
  state.last_preserved_timestamp = proto.last_preserved_timestamp();
  return std::optional<CheckpointStateData>(std::move(state));
}

bool IsCheckpointStateTempName(std::string_view name) {
  return internal::IsReplaceTempName(name, kCheckpointStateFilename);
}

Status WriteCheckpointState(const std::string& dir, const CheckpointStateData& state,
                            FileSystem* fs, bool durable, std::string_view latest_filename) {
  if (fs == nullptr) fs = FileSystem::Default();
  tensorflow::CheckpointState proto;
  proto.set_model_checkpoint_path(state.model_checkpoint_path);
  for (const std::string& p : state.all_model_checkpoint_paths) {
    proto.add_all_model_checkpoint_paths(p);
  }
  for (double t : state.all_model_checkpoint_timestamps) {
    proto.add_all_model_checkpoint_timestamps(t);
  }
  proto.set_last_preserved_timestamp(state.last_preserved_timestamp);
  std::string text;
  if (!google::protobuf::TextFormat::PrintToString(proto, &text)) {
    return InternalError("printing a CheckpointState");
  }
  CKFLOW_RETURN_IF_ERROR(fs->CreateDirs(dir));
  return internal::ReplaceFile(fs, dir, latest_filename, text, durable);
}

namespace {

bool IsAbsolute(std::string_view path) { return !path.empty() && path[0] == '/'; }

// `path` relative to `dir` when it lies under it (both as written: no
// symlinks resolved, as os.path.relpath).
std::string RelativeTo(const std::string& dir, const std::string& path) {
  auto parts = [](const std::string& p) {
    std::vector<std::string> out;
    const std::string clean = CleanPath(p);
    size_t start = 0;
    while (start <= clean.size()) {
      size_t end = clean.find('/', start);
      if (end == std::string::npos) end = clean.size();
      if (end > start && clean.compare(start, end - start, ".") != 0) {
        out.push_back(clean.substr(start, end - start));
      }
      start = end + 1;
    }
    return out;
  };
  const std::vector<std::string> from = parts(dir);
  const std::vector<std::string> to = parts(path);
  size_t common = 0;
  while (common < from.size() && common < to.size() && from[common] == to[common]) ++common;
  std::string out;
  for (size_t i = common; i < from.size(); ++i) out += out.empty() ? ".." : "/..";
  for (size_t i = common; i < to.size(); ++i) out += (out.empty() ? "" : "/") + to[i];
  return out.empty() ? "." : out;
}

}  // namespace

StatusOr<std::optional<CheckpointStateData>> GetCheckpointState(const std::string& dir,
                                                                FileSystem* fs,
                                                                std::string_view latest_filename) {
  CKFLOW_ASSIGN_OR_RETURN(std::optional<CheckpointStateData> state,
                          ReadCheckpointState(dir, fs, latest_filename));
  if (!state.has_value()) return state;
  auto absolute = [&dir](std::string& p) {
    if (!IsAbsolute(p)) p = JoinPath(dir, p);
  };
  absolute(state->model_checkpoint_path);
  for (std::string& p : state->all_model_checkpoint_paths) absolute(p);
  return state;
}

Status UpdateCheckpointState(const std::string& dir, const std::string& model_checkpoint_path,
                             const UpdateCheckpointStateOptions& options, FileSystem* fs) {
  if (model_checkpoint_path.empty()) {
    return InvalidArgumentError("UpdateCheckpointState('", dir,
                                "'): the model checkpoint path is empty");
  }
  CheckpointStateData state;
  auto relative = [&](const std::string& p) {
    return options.save_relative_paths && IsAbsolute(p) ? RelativeTo(dir, p) : p;
  };
  state.model_checkpoint_path = relative(model_checkpoint_path);
  for (const std::string& p : options.all_model_checkpoint_paths) {
    state.all_model_checkpoint_paths.push_back(relative(p));
  }
  if (state.all_model_checkpoint_paths.empty() ||
      state.all_model_checkpoint_paths.back() != state.model_checkpoint_path) {
    state.all_model_checkpoint_paths.push_back(state.model_checkpoint_path);
  }
  // As TensorFlow's generate_checkpoint_state_proto: with a relative
  // directory, a relative path (relative to the working directory, as the
  // directory is) is stored relative to the directory, so ("train",
  // "train/model-0") stores "model-0", which reads back as train/model-0.
  if (!IsAbsolute(dir)) {
    // Both from the working directory, so that ".." resolves as
    // os.path.relpath resolves it.
    const std::string from = AbsolutePath(dir);
    auto from_dir = [&](std::string& p) {
      if (!IsAbsolute(p)) p = RelativeTo(from, AbsolutePath(p));
    };
    from_dir(state.model_checkpoint_path);
    for (std::string& p : state.all_model_checkpoint_paths) from_dir(p);
  }
  state.all_model_checkpoint_timestamps = options.all_model_checkpoint_timestamps;
  if (!state.all_model_checkpoint_timestamps.empty() &&
      state.all_model_checkpoint_timestamps.size() != state.all_model_checkpoint_paths.size()) {
    return InvalidArgumentError("UpdateCheckpointState('", dir,
                                "'): checkpoint timestamps, if provided, must match "
                                "checkpoint paths (got ",
                                state.all_model_checkpoint_paths.size(), " paths and ",
                                state.all_model_checkpoint_timestamps.size(), " timestamps)");
  }
  state.last_preserved_timestamp = options.last_preserved_timestamp;
  const std::string state_path = JoinPath(dir, options.latest_filename);
  if (model_checkpoint_path == state_path ||
      JoinPath(dir, state.model_checkpoint_path) == state_path) {
    return InvalidArgumentError("Save path '", model_checkpoint_path,
                                "' conflicts with path used for checkpoint state. Please use a "
                                "different save path.");
  }
  return WriteCheckpointState(dir, state, fs, /*durable=*/false, options.latest_filename);
}

bool CheckpointExists(const std::string& prefix, FileSystem* fs) {
  if (fs == nullptr) fs = FileSystem::Default();
  if (fs->FileExists(IndexFilename(prefix)).ok()) return true;
  return fs->FileExists(prefix).ok() && !fs->IsDirectory(prefix);
}

Status RemoveCheckpoint(const std::string& prefix, FileSystem* fs) {
  if (fs == nullptr) fs = FileSystem::Default();
  std::vector<std::string> paths = {IndexFilename(prefix)};
  const std::string dir = Dirname(prefix);
  const std::string data_prefix = std::string(Basename(prefix)) + ".data-";
  StatusOr<std::vector<std::string>> names = fs->ListDir(dir.empty() ? "." : dir);
  if (names.ok()) {
    for (const std::string& name : *names) {
      if (name.size() > data_prefix.size() && name.starts_with(data_prefix) &&
          DataSuffixPosition(name) == Basename(prefix).size()) {
        paths.push_back(JoinPath(dir, name));
      }
    }
  } else if (!IsNotFound(names.status())) {
    return names.status();
  }
  int removed = 0;
  for (const std::string& path : paths) {
    Status s = fs->DeleteFile(path);
    if (s.ok()) {
      ++removed;
    } else if (!IsNotFound(s)) {
      return s;
    }
  }
  if (removed == 0)
    return NotFoundError("RemoveCheckpoint: no checkpoint files for '", prefix, "'");
  return OkStatus();
}

StatusOr<std::string> ResolveCheckpointPath(const std::string& path, FileSystem* fs,
                                            bool allow_outside_directory) {
  if (fs == nullptr) fs = FileSystem::Default();
  constexpr std::string_view kIndexSuffix = ".index";
  if (path.size() > kIndexSuffix.size() && path.ends_with(kIndexSuffix)) {
    return path.substr(0, path.size() - kIndexSuffix.size());
  }
  if (std::optional<size_t> pos = DataSuffixPosition(path); pos && *pos > 0) {
    return path.substr(0, *pos);
  }
  if (!fs->IsDirectory(path)) return path;
  CKFLOW_ASSIGN_OR_RETURN(std::optional<CheckpointStateData> state, ReadCheckpointState(path, fs));
  const std::string state_path = JoinPath(path, kCheckpointStateFilename);
  if (!state.has_value()) {
    return NotFoundError(path, ": a directory without a '", kCheckpointStateFilename,
                         "' state file; name a checkpoint prefix instead");
  }
  if (state->model_checkpoint_path.empty()) {
    return NotFoundError(state_path, ": names no checkpoint (model_checkpoint_path is empty)");
  }
  if (!allow_outside_directory && !IsInsideDirectory(path, state->model_checkpoint_path)) {
    return InvalidArgumentError(state_path, ": its newest checkpoint '",
                                state->model_checkpoint_path,
                                "' lies outside the directory; name it directly to read it");
  }
  std::string prefix = JoinPath(path, state->model_checkpoint_path);
  if (!fs->FileExists(IndexFilename(prefix)).ok()) {
    return NotFoundError(state_path, ": its newest checkpoint '", state->model_checkpoint_path,
                         "' has no index file ", IndexFilename(prefix));
  }
  return prefix;
}

}  // namespace ckflow
