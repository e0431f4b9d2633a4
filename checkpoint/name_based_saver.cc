#include "checkpoint/name_based_saver.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <set>
#include <unordered_map>

#include "base/logging.h"
#include "bundle/bundle_format.h"
#include "bundle/bundle_reader.h"
#include "bundle/checkpoint_state.h"
#include "bundle/object_tree.h"
#include "bundle/tensor_slice.h"
#include "bundle/v1_checkpoint_reader.h"
#include "checkpoint/load_status_internal.h"
#include "checkpoint/step_counter_internal.h"
#include "ops/array_ops.h"
#include "ops/variables.h"

namespace ckflow {
namespace {

double WallClock() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

NameBasedSaver::NameBasedSaver(const Scope& scope, std::vector<Entry> entries, Options options)
    : entries_(std::move(entries)),
      options_(std::move(options)),
      saver_(std::make_shared<internal::Saver>(
          scope.NewSubScope("save"), /*fs=*/nullptr,
          internal::SaverFormat{.object_graph = false, .shard_per_device = options_.sharded})) {
  next_keep_time_ = options_.clock() + options_.keep_checkpoint_every_n_hours * 3600.0;
}

NameBasedSaver::~NameBasedSaver() = default;

StatusOr<std::unique_ptr<NameBasedSaver>> NameBasedSaver::Make(const Scope& scope,
                                                               std::vector<Entry> entries,
                                                               Options options) {
  CKFLOW_RETURN_IF_ERROR(scope.status());
  if (entries.empty() && !options.allow_empty) {
    return InvalidArgumentError(
        "No variables to save (NameBasedSaver: the variable list is empty; "
        "set allow_empty to make an empty saver)");
  }
  if (options.max_to_keep.has_value() && *options.max_to_keep < 0) {
    return InvalidArgumentError("NameBasedSaver: max_to_keep must not be negative, got ",
                                *options.max_to_keep);
  }
  if (!options.clock) options.clock = WallClock;
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.key < b.key; });
  for (size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].variable == nullptr) {
      return InvalidArgumentError("NameBasedSaver: variable '", entries[i].key, "' is null");
    }
    if (entries[i].key.empty()) {
      return InvalidArgumentError("NameBasedSaver: a variable (", entries[i].variable->name(),
                                  ") has an empty name");
    }
    // Parts of a partitioned variable share its key, each a slice of it.
    const auto sliced = [](const Entry& e) { return e.variable->save_slice_info().has_value(); };
    if (i > 0 && entries[i - 1].key == entries[i].key &&
        !(sliced(entries[i - 1]) && sliced(entries[i]))) {
      return InvalidArgumentError("NameBasedSaver: at least two variables have the same name: ",
                                  entries[i].key);
    }
    if (entries[i].key == kObjectGraphKey) {
      return InvalidArgumentError("NameBasedSaver: '", kObjectGraphKey,
                                  "' is reserved for object-based checkpoints");
    }
  }
  return std::unique_ptr<NameBasedSaver>(
      new NameBasedSaver(scope, std::move(entries), std::move(options)));
}

StatusOr<std::unique_ptr<NameBasedSaver>> NameBasedSaver::Create(
    const Scope& scope, const std::vector<std::shared_ptr<Variable>>& variables, Options options) {
  std::vector<std::shared_ptr<Variable>> list = variables;
  if (list.empty()) list = GlobalVariables(scope.graph());
  std::vector<Entry> entries;
  for (const auto& v : list) {
    if (v == nullptr) return InvalidArgumentError("NameBasedSaver: a variable is null");
    // As TensorFlow's op_list_to_dict: a part of a partitioned variable is
    // saved under the whole variable's name.
    entries.push_back({v->save_slice_info() ? v->save_slice_info()->full_name : v->name(), v});
  }
  return Make(scope, std::move(entries), std::move(options));
}

StatusOr<std::unique_ptr<NameBasedSaver>> NameBasedSaver::CreateFromMap(
    const Scope& scope, const std::map<std::string, std::shared_ptr<Variable>>& variables,
    Options options) {
  std::vector<Entry> entries;
  for (const auto& [name, v] : variables) entries.push_back({name, v});
  return Make(scope, std::move(entries), std::move(options));
}

StatusOr<std::string> NameBasedSaver::Save(Session& session, const std::string& save_path,
                                           const Variable& global_step, bool write_state,
                                           const std::string& latest_filename) {
  CKFLOW_ASSIGN_OR_RETURN(int64_t step, internal::ReadStepCounter(session, global_step,
                                                                  "NameBasedSaver", "global_step"));
  return Save(session, save_path, step, write_state, latest_filename);
}

StatusOr<std::string> NameBasedSaver::Save(Session& session, const std::string& save_path,
                                           std::optional<int64_t> global_step, bool write_state,
                                           const std::string& latest_filename) {
  if (save_path.empty()) return InvalidArgumentError("NameBasedSaver::Save: empty save path");
  if (latest_filename.empty() || latest_filename.find('/') != std::string::npos) {
    return InvalidArgumentError(
        "'latest_filename' must not contain path components (NameBasedSaver", "::Save: got '",
        latest_filename, "')");
  }
  std::string path = save_path;
  if (global_step.has_value()) {
    // TensorFlow's "%s-%d", or "%s-%08d" when padded.
    char step[32];
    std::snprintf(step, sizeof(step), options_.pad_step_number ? "-%08lld" : "-%lld",
                  static_cast<long long>(*global_step));
    path += step;
  } else if (!options_.sharded && Basename(path) == latest_filename) {
    return InvalidArgumentError("'latest_filename' collides with 'save_path': '", latest_filename,
                                "' and '", save_path, "'");
  }
  if (entries_.empty()) return std::string();  // allow_empty: TensorFlow returns None
  const std::string dir = Dirname(path);
  internal::ObjectGraph values;
  for (const Entry& e : entries_) {
    std::vector<SaveableAttribute> attributes = e.variable->Attributes();
    SaveableAttribute attribute = std::move(attributes.at(0));
    // Unsharded: one file whatever the devices.
    if (!options_.sharded) attribute.device.clear();
    values.values.push_back({e.key, std::move(attribute), -1});
  }
  CKFLOW_RETURN_IF_ERROR(saver_->Write(values, path, session, {.files_per_device = 1}));
  if (!write_state) return path;
  Record(path);
  std::vector<std::string> all;
  for (const auto& [p, t] : last_checkpoints_) all.push_back(p);
  CKFLOW_RETURN_IF_ERROR(UpdateCheckpointState(dir, path,
                                               {.all_model_checkpoint_paths = all,
                                                .save_relative_paths = options_.save_relative_paths,
                                                .latest_filename = latest_filename}));
  // TensorFlow deletes after the state file no longer names the checkpoint.
  while (!to_delete_.empty()) {
    auto [old_path, time] = to_delete_.front();
    to_delete_.erase(to_delete_.begin());
    if (time > next_keep_time_) {
      next_keep_time_ += options_.keep_checkpoint_every_n_hours * 3600.0;
      continue;
    }
    Status removed = RemoveCheckpoint(old_path);
    if (!removed.ok()) Log(LogSeverity::kWarning, "NameBasedSaver: ignoring " + removed.ToString());
  }
  return path;
}

void NameBasedSaver::Record(const std::string& path) {
  if (!options_.max_to_keep.has_value() || *options_.max_to_keep == 0) return;
  last_checkpoints_.erase(std::remove_if(last_checkpoints_.begin(), last_checkpoints_.end(),
                                         [&](const auto& e) { return e.first == path; }),
                          last_checkpoints_.end());
  last_checkpoints_.emplace_back(path, options_.clock());
  if (last_checkpoints_.size() > static_cast<size_t>(*options_.max_to_keep)) {
    to_delete_.push_back(last_checkpoints_.front());
    last_checkpoints_.erase(last_checkpoints_.begin());
  }
}

std::vector<std::string> NameBasedSaver::last_checkpoints() const {
  std::vector<std::string> out;
  for (const auto& [p, t] : last_checkpoints_) out.push_back(p);
  return out;
}

void NameBasedSaver::SetLastCheckpoints(const std::vector<std::string>& paths) {
  last_checkpoints_.clear();
  const double now = options_.clock();
  for (const std::string& p : paths) last_checkpoints_.emplace_back(p, now);
}

Status NameBasedSaver::Restore(Session& session, const std::string& save_path) {
  if (entries_.empty()) return OkStatus();  // allow_empty, as TensorFlow: before any check
  if (save_path.empty()) {
    return InvalidArgumentError(
        "Can't load save_path when it is None (NameBasedSaver::Restore: "
        "empty save path)");
  }
  if (!CheckpointExists(save_path)) {
    return InvalidArgumentError("The passed save_path is not a valid checkpoint: ", save_path);
  }
  CKFLOW_RETURN_IF_ERROR(saver_->CheckGraphAlive());
  if (IsV1Checkpoint(save_path)) return RestoreV1(session, save_path);
  CKFLOW_ASSIGN_OR_RETURN(std::shared_ptr<const BundleReader> reader,
                          BundleReader::Open(save_path));
  // An object-based checkpoint keys values by object path; its object graph
  // records each value's variable name, which TensorFlow's Saver falls back
  // to.
  std::unordered_map<std::string, std::string> key_by_name;
  bool has_object_graph = reader->Contains(kObjectGraphKey);
  if (has_object_graph) {
    CKFLOW_ASSIGN_OR_RETURN(CheckpointObjectGraph graph, ReadCheckpointObjectGraph(*reader));
    for (const auto& node : graph.nodes) {
      for (const auto& a : node.attributes) {
        if (!a.full_name.empty()) key_by_name.emplace(a.full_name, a.checkpoint_key);
      }
    }
  }
  std::vector<internal::RestoreItem> items;
  for (const Entry& e : entries_) {
    std::string key = e.key;
    const BundleEntry* entry = reader->FindEntry(key);
    if (entry == nullptr && has_object_graph) {
      if (auto it = key_by_name.find(e.key); it != key_by_name.end()) {
        key = it->second;
        entry = reader->FindEntry(key);
      }
    }
    if (entry == nullptr) {
      return NotFoundError("Key ", e.key, " not found in checkpoint '", save_path, "' (variable '",
                           e.variable->name(), "'",
                           has_object_graph ? ", nor among its object graph's variable names" : "",
                           ")");
    }
    SaveableAttribute attribute = std::move(e.variable->Attributes().at(0));
    if (entry->dtype != attribute.dtype ||
        !attribute.saved_shape().IsCompatibleWith(entry->shape)) {
      return InvalidArgumentError(
          "checkpoint '", save_path, "': key '", key, "' is ", StoredDataTypeName(entry->dtype),
          entry->shape.ToString(), " but variable '", e.variable->name(), "' is ",
          DataTypeName(attribute.dtype), attribute.shape.ToString(),
          attribute.slice_spec.empty() ? std::string()
                                       : " (a part of " + attribute.saved_shape().ToString() + ")");
    }
    items.push_back({key, std::move(attribute), entry - reader->entries().data()});
  }
  CKFLOW_ASSIGN_OR_RETURN(std::vector<Output> ops, saver_->RestoreOps(std::move(items), save_path));
  // The restore kernels read through this reader instead of opening the
  // checkpoint again, as an object-based restore's do.
  StatusOr<std::vector<Tensor>> ran =
      session.Run({Feed(saver_->restore_prefix(), Tensor::Scalar(save_path))}, {}, ops,
                  {.bundle_reader = reader.get()});
  return ran.status().WithContext("restoring '" + save_path + "'");
}

Status NameBasedSaver::RestoreV1(Session& session, const std::string& save_path) {
  CKFLOW_ASSIGN_OR_RETURN(std::unique_ptr<V1CheckpointReader> reader,
                          V1CheckpointReader::Open(save_path));
  if (v1_assigns_.empty()) {
    const Scope scope = saver_->scope().NewSubScope("restore_v1");
    for (const Entry& e : entries_) {
      Output value = ops::Placeholder(scope, e.variable->dtype(), {.shape = e.variable->shape()});
      v1_assigns_.emplace_back(value, e.variable->Assign(scope, value));
    }
    if (!scope.ok()) {
      v1_assigns_.clear();
      return scope.status().WithContext("NameBasedSaver: building the V1 restore");
    }
  }
  std::vector<Feed> feeds;
  std::vector<Output> assigns;
  for (size_t i = 0; i < entries_.size(); ++i) {
    const Entry& e = entries_[i];
    const V1CheckpointReader::TensorInfo* info = reader->Find(e.key);
    if (info == nullptr) {
      return NotFoundError("Key ", e.key, " not found in checkpoint '", save_path,
                           "' (a V1 checkpoint; variable '", e.variable->name(), "')");
    }
    SaveableAttribute attribute = std::move(e.variable->Attributes().at(0));
    if (info->dtype != attribute.dtype || !attribute.saved_shape().IsCompatibleWith(info->shape)) {
      return InvalidArgumentError("checkpoint '", save_path, "': key '", e.key, "' is ",
                                  DataTypeName(info->dtype), info->shape.ToString(),
                                  " but variable '", e.variable->name(), "' is ",
                                  DataTypeName(attribute.dtype), attribute.shape.ToString());
    }
    StatusOr<Tensor> value = Tensor();
    if (attribute.slice_spec.empty()) {
      value = reader->Lookup(e.key);
    } else {
      CKFLOW_ASSIGN_OR_RETURN(ShapeAndSlice part, ParseShapeAndSlice(attribute.slice_spec));
      value = reader->LookupSlice(e.key, part.slice);
    }
    if (!value.ok()) return value.status();
    feeds.emplace_back(v1_assigns_[i].first, *std::move(value));
    assigns.push_back(v1_assigns_[i].second);
  }
  return session.Run(feeds, {}, assigns).status().WithContext("restoring '" + save_path + "'");
}

}  // namespace ckflow
