// Saver: the save's layout (which values go into which data file), its
// cached save ops, and the write; see saver_internal.h.

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "base/atomic_file_internal.h"
#include "base/logging.h"
#include "base/parallel.h"
#include "bundle/bundle_format.h"
#include "bundle/bundle_index_internal.h"
#include "bundle/tensor_slice.h"
#include "checkpoint/group_internal.h"
#include "checkpoint/save_files_internal.h"
#include "checkpoint/saver_internal.h"
#include "graph/structure_generation.h"
#include "ops/array_ops.h"
#include "ops/checkpoint_ops.h"
#include "ops/variable_ops.h"
#include "ops/variable_resource_internal.h"

namespace ckflow::internal {
namespace {

// Whether the variable behind `handle` can be found by the name its handle
// op declares (SaveVariables, and snapshots, read it from the session's
// resources) rather than by running a read of the handle.
bool FoundByName(const Output& handle) { return handle.node()->type() == "VarHandleOp"; }

Tensor StringVector(const std::vector<std::string>& values) {
  return Tensor::FromVector<std::string>(values);
}

// The device a task's save runs on, as TensorFlow's set_cpu0 maps a
// variable's device: the same job, replica and task, device CPU:0
// ("/job:w/replica:0/task:1/device:GPU:0" -> "/job:w/replica:0/task:1/
// device:CPU:0"; "/cpu:1" -> "/device:CPU:0"). TensorFlow writes one data
// file per such host, so devices of one task share a file. "" stays "".
std::string HostDevice(std::string_view device) {
  if (device.empty()) return "";
  std::string host;
  size_t start = 0;
  while (start < device.size()) {
    size_t end = device.find('/', start);
    if (end == std::string_view::npos) end = device.size();
    std::string_view part = device.substr(start, end - start);
    start = end + 1;
    if (part.empty()) continue;
    // Everything but the device's type and number: "device:GPU:0" and the
    // legacy "cpu:1", "gpu:0", "CPU:0" forms.
    std::string lower(part);
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower.starts_with("device:") || lower.starts_with("cpu:") || lower.starts_with("gpu:") ||
        lower.starts_with("tpu:") || lower == "cpu" || lower == "gpu") {
      continue;
    }
    host += "/";
    host += part;
  }
  return host + "/device:CPU:0";
}

// A save of at least this much per file is spread over the pool's threads,
// one data file each (SaveOptions::files_per_device). Below it the extra
// files cost more than the parallel write gains.
constexpr int64_t kMinBytesPerAutoFile = int64_t{32} << 20;

// Deals one device's values over `files` groups, largest first, each to the
// group with the fewest bytes so far (within 4/3 of the best split), ties to
// the group with fewest values, so that values of no size (empty or of
// unknown shape) still fill every group. None is left empty, and each is in
// key order: the bundle writer takes keys that come sorted at one comparison
// each, and a saver's layout is computed once and reused by every save.
std::vector<std::vector<int>> SplitBySize(const std::vector<ObjectGraph::Value>& all,
                                          std::vector<int> values, int files) {
  auto by_key = [&all](int a, int b) { return all[a].key < all[b].key; };
  files = std::min<int>(files, static_cast<int>(values.size()));
  if (files <= 1) {
    std::sort(values.begin(), values.end(), by_key);
    return {std::move(values)};
  }
  std::vector<int64_t> bytes(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    bytes[i] = DeclaredBytes(all[values[i]].attribute);
  }
  std::vector<size_t> order(values.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return bytes[a] > bytes[b]; });
  // (bytes, values) of each group.
  std::vector<std::pair<int64_t, size_t>> load(files, {0, 0});
  std::vector<int> file_of(values.size());
  for (size_t i : order) {
    const int f = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    file_of[i] = f;
    load[f].first = std::min(load[f].first + bytes[i], std::numeric_limits<int64_t>::max() / 2);
    ++load[f].second;
  }
  std::vector<std::vector<int>> groups(files);
  for (size_t i = 0; i < values.size(); ++i) groups[file_of[i]].push_back(values[i]);
  for (std::vector<int>& group : groups) std::sort(group.begin(), group.end(), by_key);
  return groups;
}

// How many files a device's values go into under `options`.
int FilesFor(const std::vector<ObjectGraph::Value>& all, const std::vector<int>& values,
             const SaveOptions& options) {
  if (options.files_per_device > 0) return options.files_per_device;
  int64_t total = 0;
  for (int v : values) {
    total =
        std::min(total + DeclaredBytes(all[v].attribute), std::numeric_limits<int64_t>::max() / 2);
  }
  return static_cast<int>(
      std::clamp<int64_t>(total / kMinBytesPerAutoFile, 1, std::max(1, MaxParallelism())));
}

std::string ShardPrefix(const std::string& prefix, int shard, int num_shards) {
  char suffix[64];
  std::snprintf(suffix, sizeof(suffix), "_temp/part-%05d-of-%05d", shard, num_shards);
  return prefix + suffix;
}

// Below this many bytes rewritten needlessly, an incremental save does not
// regroup its files (a full save) to avoid them.
constexpr int64_t kMinRegroupBytes = int64_t{1} << 20;

// The data files a save spreads `values` over: one SaveV2 per task (its
// host device, as TensorFlow groups them), in order of first appearance,
// values without a device (save_counter, say) and the object graph with the
// first; then each task's values over as many files as write in parallel.
// With `changed` (an incremental save regrouping), each task's changed
// values go into files apart from its unchanged ones, first, so that the
// unchanged files can be linked from save to save; the first file is then
// the first task's changed values, possibly none but the object graph.
std::vector<std::vector<int>> LayoutFiles(const std::vector<ObjectGraph::Value>& values,
                                          const SaveOptions& options, bool shard_per_device,
                                          bool object_graph, const std::vector<bool>* changed) {
  std::vector<std::string> devices;
  std::vector<std::vector<int>> groups;
  std::vector<int> default_group;
  for (size_t v = 0; v < values.size(); ++v) {
    const std::string device =
        shard_per_device ? values[v].attribute.device : HostDevice(values[v].attribute.device);
    if (device.empty()) {
      default_group.push_back(static_cast<int>(v));
      continue;
    }
    auto it = std::find(devices.begin(), devices.end(), device);
    if (it == devices.end()) {
      devices.push_back(device);
      groups.emplace_back();
      it = devices.end() - 1;
    }
    groups[it - devices.begin()].push_back(static_cast<int>(v));
  }
  if (groups.empty()) groups.emplace_back();
  groups[0].insert(groups[0].begin(), default_group.begin(), default_group.end());
  std::vector<std::vector<int>> files;
  auto spread = [&](std::vector<int> group) {
    const int count = FilesFor(values, group, options);
    for (std::vector<int>& file : SplitBySize(values, std::move(group), count)) {
      files.push_back(std::move(file));
    }
  };
  for (size_t g = 0; g < groups.size(); ++g) {
    if (changed == nullptr) {
      spread(std::move(groups[g]));
      continue;
    }
    std::vector<int> hot;
    std::vector<int> cold;
    for (int v : groups[g]) ((*changed)[v] ? hot : cold).push_back(v);
    if (!hot.empty() || (g == 0 && object_graph)) spread(std::move(hot));
    if (!cold.empty()) spread(std::move(cold));
  }
  return files;
}
}  // namespace

StatusOr<Saver::SaveGraph*> Saver::SaveGraphFor(const std::vector<ObjectGraph::Value>& values,
                                                const std::vector<std::vector<int>>& groups,
                                                bool durable, bool from_snapshot, bool merge,
                                                bool object_graph) {
  object_graph = object_graph && format_.object_graph;
  std::string sig = durable ? "durable\1" : "";
  if (from_snapshot) sig += "snapshot\1";
  if (!merge) sig += object_graph ? "part+graph\1" : "part\1";
  for (const auto& group : groups) {
    for (int v : group) {
      sig += values[v].key;
      sig += '\0';
      sig += std::to_string(values[v].attribute.handle.node()->id());
      sig += '\0';
    }
    sig += '\1';
  }
  auto cached = save_graphs_.find(sig);
  if (cached != save_graphs_.end()) return cached->second.get();

  auto save = std::make_unique<SaveGraph>();
  // Built once and run by a session at every save, also in an eager scope.
  Scope scope = scope_.WithoutExecution().NewSubScope("save");
  save->object_graph = ops::Placeholder(scope.WithOpName("object_graph"), DT_STRING,
                                        {.shape = PartialShape::Scalar()});
  std::vector<Output> shard_ops;
  std::unordered_set<int> read_once;
  for (size_t g = 0; g < groups.size(); ++g) {
    // Values read by ReadVariableOps (tensors, under names)...
    std::vector<std::string> names;
    std::vector<std::string> slices;
    std::vector<Output> tensors;
    // ...and, without a snapshot, those a SaveVariables op reads itself.
    std::vector<std::string> variable_keys;
    std::vector<std::string> variable_slices;
    std::vector<Output> handles;
    std::string device;  // the group's host (see HostDevice)
    // SaveVariables takes slices only for its variables: a part of a
    // partitioned variable behind another kind of handle (a Trackable's own
    // attributes) keeps the whole file on SaveV2.
    const bool save_v2 =
        from_snapshot || std::any_of(groups[g].begin(), groups[g].end(), [&](int v) {
          return !values[v].attribute.slice_spec.empty() &&
                 !FoundByName(values[v].attribute.handle);
        });
    for (int v : groups[g]) {
      const ObjectGraph::Value& value = values[v];
      if (!value.attribute.device.empty()) device = HostDevice(value.attribute.device);
      const Node* handle = value.attribute.handle.node();
      if (!save_v2 && FoundByName(value.attribute.handle)) {
        variable_keys.push_back(value.key);
        variable_slices.push_back(value.attribute.slice_spec);
        handles.push_back(value.attribute.handle);
        continue;
      }
      names.push_back(value.key);
      slices.push_back(value.attribute.slice_spec);
      auto read = reads_.find(handle->id());
      if (read == reads_.end()) {
        // Read where the variable lives; the save runs on its task's host.
        Output r = ops::ReadVariableOp(scope.WithDevice(value.attribute.device),
                                       value.attribute.handle, value.attribute.dtype);
        read = reads_.emplace(handle->id(), r).first;
      }
      if (read_once.insert(handle->id()).second) save->reads.push_back(read->second);
      tensors.push_back(read->second);
    }
    if (g == 0 && object_graph) {
      // Where it sorts among the (sorted) keys, which the writer takes fastest.
      const auto at = std::lower_bound(names.begin(), names.end(), kObjectGraphKey) - names.begin();
      names.insert(names.begin() + at, std::string(kObjectGraphKey));
      slices.insert(slices.begin() + at, std::string());
      tensors.insert(tensors.begin() + at, save->object_graph);
    }
    Scope shard = scope.WithDevice(device);
    Output prefix = ops::Placeholder(shard, DT_STRING, {.shape = PartialShape::Scalar()});
    save->shard_prefixes.push_back(prefix);
    if (save_v2) {
      Output names_t = ops::Const(shard, StringVector(names));
      Output slices_t = ops::Const(shard, StringVector(slices));
      shard_ops.push_back(ops::SaveV2(shard, prefix, names_t, slices_t, tensors, durable));
      continue;
    }
    StatusOr<ops::VariableDeclarations> declared = ops::DeclarationsOf(handles);
    if (!declared.ok()) return declared.status().WithContext("building save ops");
    shard_ops.push_back(ops::SaveVariables(shard, prefix, std::move(variable_keys),
                                           *std::move(declared), std::move(variable_slices),
                                           std::move(names), tensors, durable));
  }
  save->shards = shard_ops;
  if (!merge) {
    if (!scope.ok()) return scope.status().WithContext("building save ops");
    SaveGraph* result = save.get();
    save_graphs_.emplace(std::move(sig), std::move(save));
    return result;
  }
  save->merge_inputs = ops::Placeholder(scope, DT_STRING, {.shape = PartialShape({-1})});
  save->merge_destination = ops::Placeholder(scope, DT_STRING, {.shape = PartialShape::Scalar()});
  save->merge =
      ops::MergeV2Checkpoints(scope.WithControlDependencies(shard_ops), save->merge_inputs,
                              save->merge_destination, /*delete_old_dirs=*/true, durable);
  if (!scope.ok()) return scope.status().WithContext("building save ops");
  SaveGraph* result = save.get();
  save_graphs_.emplace(std::move(sig), std::move(save));
  return result;
}

Saver::~Saver() {
  Status s = WaitForPendingWrite();
  if (!s.ok()) Log(LogSeverity::kError, "an asynchronous checkpoint save failed: " + s.ToString());
}

Status Saver::WaitForPendingWrite() {
  Status s = writer_.Wait();
  if (pending_saved_ != nullptr) {
    if (s.ok() && !pending_saved_->data_files.empty()) last_saved_ = std::move(*pending_saved_);
    pending_saved_.reset();
  }
  return s;
}

namespace {

// A resource of `session`'s own, which names it for as long as it lives (a
// session's address, or its ResourceMgr's, can come back with the next one).
StatusOr<std::shared_ptr<ResourceBase>> SessionToken(Session& session) {
  struct Token : ResourceBase {};
  CKFLOW_ASSIGN_OR_RETURN(std::shared_ptr<Token> token,
                          session.resources().LookupOrCreate<Token>("_ckflow_snapshot_sources", [] {
                            return std::make_shared<Token>();
                          }));
  return std::shared_ptr<ResourceBase>(std::move(token));
}

// The variables VarHandleOp `handles` name in `session` (made, uninitialized,
// where missing, as running the handle ops would).
StatusOr<std::vector<std::shared_ptr<VariableResource>>> SessionVariables(
    Session& session, const std::vector<Output>& handles) {
  CKFLOW_ASSIGN_OR_RETURN(ops::VariableDeclarations declared, ops::DeclarationsOf(handles));
  return LookupOrCreateVariables(session.resources(), declared.shared_names, declared.dtypes,
                                 declared.shapes);
}

}  // namespace

StatusOr<std::vector<Tensor>> Saver::ReadAll(SaveGraph& save, Session& session) {
  SaveGraph::SnapshotSources& sources = save.sources;
  CKFLOW_ASSIGN_OR_RETURN(std::shared_ptr<ResourceBase> token, SessionToken(session));
  if (sources.token.lock() != token) {
    // Running a read per variable cost a handle op and a read op each (a
    // save of 20,000 small variables stalled for 40,000 nodes).
    sources = SaveGraph::SnapshotSources();
    std::vector<Output> handles;
    sources.direct.resize(save.reads.size());
    for (size_t i = 0; i < save.reads.size(); ++i) {
      const Output& handle = save.reads[i].node()->input(0);
      sources.direct[i] = FoundByName(handle);
      if (sources.direct[i]) {
        handles.push_back(handle);
      } else {
        sources.runs.push_back(save.reads[i]);
        sources.run_at.push_back(i);
      }
    }
    CKFLOW_ASSIGN_OR_RETURN(std::vector<std::shared_ptr<VariableResource>> variables,
                            SessionVariables(session, handles));
    sources.variables.resize(save.reads.size());
    for (size_t i = 0, k = 0; i < save.reads.size(); ++i) {
      if (sources.direct[i]) sources.variables[i] = variables[k++];
    }
    sources.token = token;
  }
  std::vector<Tensor> values(save.reads.size());
  if (!sources.runs.empty()) {
    CKFLOW_ASSIGN_OR_RETURN(std::vector<Tensor> ran, session.Run({}, sources.runs, {}));
    for (size_t k = 0; k < ran.size(); ++k) values[sources.run_at[k]] = std::move(ran[k]);
  }
  for (size_t i = 0; i < values.size(); ++i) {
    if (!sources.direct[i]) continue;
    // The session's resources hold their variables as long as they live.
    std::shared_ptr<VariableResource> variable = sources.variables[i].lock();
    if (variable == nullptr) return InternalError("a variable left its session's resources");
    MutexLock lock(&variable->mu());
    if (variable->updated_by_rows_locked() && variable->initialized_locked() &&
        variable->dtype() != DT_STRING) {
      CKFLOW_ASSIGN_OR_RETURN(const Tensor* value, variable->PeekLocked());
      if (value->TotalBytes() >= kMinBlockSnapshotBytes) {
        CKFLOW_ASSIGN_OR_RETURN(values[i], variable->SnapshotByBlocksLocked());
        continue;
      }
    }
    CKFLOW_ASSIGN_OR_RETURN(values[i], variable->ReadLocked());
  }
  return values;
}

Status Saver::Snapshot(SaveGraph& save, Session& session, std::vector<Feed>* feeds) {
  // The reads share the variables' buffers (no copy); the writer copies
  // them, and the shares are dropped before the training loop resumes. The
  // snapshots by blocks are fed as they are.
  CKFLOW_ASSIGN_OR_RETURN(std::vector<Tensor> values, ReadAll(save, session));
  return writer_.Snapshot(values, save.reads, feeds);
}

namespace {

// Runs the save ops (for a durable save they sync the files and the
// directory themselves). On failure removes the temp shards: the previous
// checkpoint was never touched, and no new one is in place.
Status RunSave(Session& session, FileSystem* fs, const std::vector<Feed>& feeds,
               const Output& merge, const std::string& prefix) {
  StatusOr<std::vector<Tensor>> ran = session.Run(feeds, {}, {merge}, {.file_system = fs});
  if (!ran.ok()) {
    const std::string dir = Dirname(prefix);
    CheckpointNaming naming{std::string(Basename(prefix)), /*numbered=*/false};
    RemoveSaveDebris(fs, dir, naming).status().IgnoreError();
    return ran.status().WithContext("saving checkpoint '" + prefix + "'");
  }
  return OkStatus();
}

}  // namespace

Status Saver::CheckOptions(const SaveOptions& options, const std::string& what,
                           const CheckpointGroup* group) {
  if (options.files_per_device < 0) {
    return InvalidArgumentError(what, ": SaveOptions::files_per_device is ",
                                options.files_per_device, "; it must be 0 (automatic) or more");
  }
  if (options.incremental && group != nullptr) {
    // Each member's part is placed anew at every save, and the members
    // would have to agree on which files each may link.
    return InvalidArgumentError(what, ": SaveOptions::incremental is not for a member of a group");
  }
  return OkStatus();
}

namespace {

// Whether two plans save the same values the same way: the same keys, read
// from the same handles, with the same devices and slices.
bool SameValues(const std::vector<ObjectGraph::Value>& a,
                const std::vector<ObjectGraph::Value>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const auto& x, const auto& y) {
    return x.key == y.key && x.attribute.handle.node() == y.attribute.handle.node() &&
           x.attribute.handle.index() == y.attribute.handle.index() &&
           x.attribute.dtype == y.attribute.dtype && x.attribute.device == y.attribute.device &&
           x.attribute.slice_spec == y.attribute.slice_spec;
  });
}

}  // namespace

StatusOr<Saver::SavePlan> Saver::PlanOf(const ObjectGraph& graph,
                                        std::vector<ObjectGraph::Value> values, bool object_graph) {
  SavePlan plan;
  plan.values = std::move(values);
  if (object_graph) {
    CKFLOW_ASSIGN_OR_RETURN(std::string serialized, SerializeObjectGraph(graph));
    plan.object_graph = Tensor::Scalar(std::move(serialized));
  }
  return plan;
}

Status Saver::Write(const ObjectGraph& graph, const std::string& prefix, Session& session,
                    const SaveOptions& options, std::function<Status()> on_written) {
  if (group_.group != nullptr) {
    return WriteGroup(graph, prefix, session, options, std::move(on_written));
  }
  StatusOr<SavePlan> plan = PlanOf(graph, graph.values, format_.object_graph);
  if (!plan.ok()) return plan.status().WithContext("saving checkpoint '" + prefix + "'");
  return WritePlan(*plan, prefix, session, options, std::move(on_written));
}

Status Saver::WriteObjects(const std::shared_ptr<Trackable>& root, const std::string& prefix,
                           Session& session, const SaveOptions& options,
                           std::function<Status()> on_written) {
  if (group_.group != nullptr) {
    // A member writes only what placement gives it: no cached plan.
    ObjectGraph graph = BuildObjectGraph(root);
    CKFLOW_RETURN_IF_ERROR(graph.tracking_status);
    return WriteGroup(graph, prefix, session, options, std::move(on_written));
  }
  const uint64_t generation = TrackableStructureGeneration();
  // Read before the objects are: one that dies after it is seen next save.
  const uint64_t destroyed = TrackablesDestroyed();
  auto any_expired = [&] {
    return std::any_of(plan_->objects.begin(), plan_->objects.end(),
                       [](const std::weak_ptr<Trackable>& o) { return o.expired(); });
  };
  if (plan_ != nullptr && plan_->generation == generation && plan_->root == root.get() &&
      plan_->destroyed != destroyed && !any_expired()) {
    plan_->destroyed = destroyed;
  }
  if (plan_ == nullptr || plan_->generation != generation || plan_->root != root.get() ||
      plan_->destroyed != destroyed) {
    std::unique_ptr<SavePlan> old = std::move(plan_);
    ObjectGraph graph = BuildObjectGraph(root);
    CKFLOW_RETURN_IF_ERROR(graph.tracking_status);
    StatusOr<SavePlan> plan = PlanOf(graph, std::move(graph.values), format_.object_graph);
    if (!plan.ok()) return plan.status().WithContext("saving checkpoint '" + prefix + "'");
    plan->generation = generation;
    plan->destroyed = destroyed;
    plan->root = root.get();
    plan->objects.reserve(graph.nodes.size());
    for (const ObjectGraphNode& node : graph.nodes) plan->objects.push_back(node.object);
    // The generation is the whole process's: an object tracked anywhere
    // (another Checkpoint's save counter) moves it. Where the values are
    // still the same, so are their files, their save ops and what an
    // incremental save may link.
    if (old != nullptr && old->root == root.get() && SameValues(old->values, plan->values)) {
      plan->layout = std::move(old->layout);
      plan->version_sources = std::move(old->version_sources);
    }
    plan_ = std::make_unique<SavePlan>(*std::move(plan));
  }
  return WritePlan(*plan_, prefix, session, options, std::move(on_written));
}

Status Saver::WritePlan(SavePlan& plan, const std::string& prefix, Session& session,
                        const SaveOptions& options, std::function<Status()> on_written) {
  CKFLOW_RETURN_IF_ERROR(WaitForPendingWrite());
  const std::vector<ObjectGraph::Value>& values = plan.values;
  const int threads = MaxParallelism();
  auto new_layout = [&](const std::vector<bool>* changed) {
    plan.layout = SavePlan::Layout{.id = ++last_layout_id_,
                                   .files_per_device = options.files_per_device,
                                   .durable = options.durable,
                                   .threads = threads,
                                   .files = LayoutFiles(values, options, format_.shard_per_device,
                                                        format_.object_graph, changed)};
  };
  if (!plan.layout || plan.layout->files_per_device != options.files_per_device ||
      plan.layout->durable != options.durable || plan.layout->threads != threads) {
    new_layout(nullptr);
  }
  CKFLOW_RETURN_IF_ERROR(fs_->CreateDirs(Dirname(prefix)));

  // An incremental save takes the files of the last save whose values all
  // kept their versions (linked), and writes the rest.
  std::vector<uint64_t> versions;
  std::vector<int> linked;
  if (options.incremental) {
    StatusOr<std::vector<uint64_t>> now = VersionsOf(plan, session);
    if (!now.ok()) return now.status().WithContext("saving checkpoint '" + prefix + "'");
    versions = *std::move(now);
    if (last_saved_ && last_saved_->layout_id == plan.layout->id &&
        CleanPath(last_saved_->prefix) != CleanPath(prefix)) {
      std::vector<bool> changed(values.size());
      for (size_t v = 0; v < values.size(); ++v) {
        changed[v] = versions[v] == 0 || versions[v] != last_saved_->versions[v];
      }
      // Bytes of changed values, and of unchanged ones written only because
      // they share a file with a changed one.
      int64_t needed = 0;
      int64_t wasted = 0;
      const std::vector<std::vector<int>>& files = plan.layout->files;
      for (size_t f = 0; f < files.size(); ++f) {
        bool write = f == 0 && format_.object_graph;  // the object graph's
        int64_t file_changed = 0;
        int64_t file_unchanged = 0;
        for (int v : files[f]) {
          write = write || changed[v];
          (changed[v] ? file_changed : file_unchanged) += DeclaredBytes(values[v].attribute);
        }
        if (!write) {
          linked.push_back(static_cast<int>(f));
        } else {
          needed += file_changed;
          wasted += file_unchanged;
        }
      }
      if (linked.size() == files.size()) linked.erase(linked.begin());  // something to write
      if (wasted > std::max(needed, kMinRegroupBytes)) {
        // Most of what would be written has not changed: save in full once
        // with changed and unchanged values in files apart, so that the
        // saves after this one write only what changes.
        linked.clear();
        new_layout(&changed);
      }
    }
    if (!linked.empty()) {
      Status link = LinkUnchanged(*last_saved_, plan, linked, prefix);
      if (!link.ok()) {
        Log(LogSeverity::kWarning, "incremental save of '" + prefix +
                                       "': writing every file, as nothing can be linked from '" +
                                       last_saved_->prefix + "': " + link.ToString());
        linked.clear();
        RemoveLinked(prefix);
      }
    }
  }

  const std::vector<std::vector<int>>& files = plan.layout->files;
  const int n = static_cast<int>(files.size());
  std::vector<int> written;
  for (int f = 0, k = 0; f < n; ++f) {
    if (k < static_cast<int>(linked.size()) && linked[k] == f) {
      ++k;
    } else {
      written.push_back(f);
    }
  }
  SaveGraph* save = nullptr;
  if (linked.empty()) {
    SaveGraph*& cached = options.async ? plan.layout->snapshot_save : plan.layout->save;
    if (cached == nullptr) {
      CKFLOW_ASSIGN_OR_RETURN(cached, SaveGraphFor(values, files, options.durable,
                                                   /*from_snapshot=*/options.async));
    }
    save = cached;
  } else {
    // The files that changed, in the layout's order (the first, with the
    // object graph, always among them); cached by SaveGraphFor's signature,
    // which repeats from save to save while the same values change.
    std::vector<std::vector<int>> changed_files;
    for (int f : written) changed_files.push_back(files[f]);
    StatusOr<SaveGraph*> built = SaveGraphFor(values, changed_files, options.durable,
                                              /*from_snapshot=*/options.async);
    if (!built.ok()) {
      RemoveLinked(prefix);
      return built.status();
    }
    save = *built;
  }

  std::vector<Feed> feeds;
  std::vector<std::string> shard_prefixes;
  for (int f = 0; f < n; ++f) shard_prefixes.push_back(ShardPrefix(prefix, f, n));
  for (size_t k = 0; k < written.size(); ++k) {
    feeds.emplace_back(save->shard_prefixes[k], Tensor::Scalar(shard_prefixes[written[k]]));
  }
  if (format_.object_graph) feeds.emplace_back(save->object_graph, plan.object_graph);
  feeds.emplace_back(save->merge_inputs, StringVector(shard_prefixes));
  feeds.emplace_back(save->merge_destination, Tensor::Scalar(prefix));

  std::shared_ptr<SavedFiles> record;
  if (options.incremental) {
    record = std::make_shared<SavedFiles>(SavedFiles{
        .layout_id = plan.layout->id, .prefix = prefix, .versions = std::move(versions)});
  }
  if (!options.async) {
    CKFLOW_RETURN_IF_ERROR(RunSave(session, fs_, feeds, save->merge, prefix));
    if (record != nullptr) {
      StatusOr<std::vector<FileStat>> stats = StatDataFiles(fs_, prefix, n);
      if (stats.ok()) record->data_files = *std::move(stats);
    }
    CKFLOW_RETURN_IF_ERROR(on_written ? on_written() : OkStatus());
    if (record != nullptr && !record->data_files.empty()) last_saved_ = std::move(*record);
    return OkStatus();
  }
  if (Status s = Snapshot(*save, session, &feeds); !s.ok()) {
    if (!linked.empty()) RemoveLinked(prefix);
    return s.WithContext("snapshotting for '" + prefix + "'");
  }
  pending_saved_ = record;
  writer_.Start([fs = fs_, &session, feeds = std::move(feeds), merge = save->merge, prefix, n,
                 record, on_written = std::move(on_written), on_done = options.on_done] {
    Status s = RunSave(session, fs, feeds, merge, prefix);
    if (s.ok() && record != nullptr) {
      StatusOr<std::vector<FileStat>> stats = StatDataFiles(fs, prefix, n);
      if (stats.ok()) record->data_files = *std::move(stats);
    }
    if (s.ok() && on_written) s = on_written();
    if (on_done) on_done(prefix, s);
    return s;
  });
  return OkStatus();
}

void Saver::RemoveLinked(const std::string& prefix) {
  const CheckpointNaming naming{std::string(Basename(prefix)), /*numbered=*/false};
  RemoveSaveDebris(fs_, Dirname(prefix), naming).status().IgnoreError();
}

StatusOr<std::vector<uint64_t>> Saver::VersionsOf(SavePlan& plan, Session& session) {
  SavePlan::VersionSources& sources = plan.version_sources;
  CKFLOW_ASSIGN_OR_RETURN(std::shared_ptr<ResourceBase> token, SessionToken(session));
  if (sources.token.lock() != token) {
    sources = SavePlan::VersionSources();
    std::vector<Output> handles;
    std::vector<size_t> at;
    for (size_t v = 0; v < plan.values.size(); ++v) {
      if (!FoundByName(plan.values[v].attribute.handle)) continue;
      handles.push_back(plan.values[v].attribute.handle);
      at.push_back(v);
    }
    CKFLOW_ASSIGN_OR_RETURN(std::vector<std::shared_ptr<VariableResource>> variables,
                            SessionVariables(session, handles));
    sources.variables.resize(plan.values.size());
    for (size_t k = 0; k < at.size(); ++k) sources.variables[at[k]] = variables[k];
    sources.token = token;
  }
  std::vector<uint64_t> versions(plan.values.size(), 0);
  for (size_t v = 0; v < versions.size(); ++v) {
    if (std::shared_ptr<VariableResource> variable = sources.variables[v].lock()) {
      MutexLock lock(&variable->mu());
      versions[v] = variable->version_locked();
    }
  }
  return versions;
}

StatusOr<std::vector<FileStat>> Saver::StatDataFiles(FileSystem* fs, const std::string& prefix,
                                                     int num_files) {
  std::vector<FileStat> stats;
  for (int f = 0; f < num_files; ++f) {
    CKFLOW_ASSIGN_OR_RETURN(FileStat stat, fs->Stat(DataFilename(prefix, f, num_files)));
    stats.push_back(stat);
  }
  return stats;
}

Status Saver::LinkUnchanged(const SavedFiles& base, const SavePlan& plan,
                            const std::vector<int>& files, const std::string& prefix) {
  const int n = static_cast<int>(plan.layout->files.size());
  CKFLOW_ASSIGN_OR_RETURN(BundleIndex index, ReadBundleIndex(fs_, base.prefix));
  if (index.header.num_shards() != n || static_cast<int>(base.data_files.size()) != n) {
    return FailedPreconditionError(index.path, ": ", index.header.num_shards(),
                                   " data files, not the ", n, " it was saved with");
  }
  std::unordered_map<std::string_view, const tensorflow::BundleEntryProto*> entries;
  for (const auto& [key, entry] : index.entries) entries.emplace(key, &entry);
  auto find = [&](std::string_view key,
                  int shard) -> StatusOr<const tensorflow::BundleEntryProto*> {
    auto it = entries.find(key);
    if (it == entries.end() || (shard >= 0 && it->second->shard_id() != shard)) {
      return FailedPreconditionError(index.path, ": no entry for key '", key, "' in data file ",
                                     shard, " (not the checkpoint this saver wrote)");
    }
    return it->second;
  };
  tensorflow::BundleHeaderProto header = index.header;
  header.set_num_shards(1);
  CKFLOW_RETURN_IF_ERROR(fs_->CreateDirs(prefix + "_temp"));
  for (int f : files) {
    const std::string from = DataFilename(base.prefix, f, n);
    CKFLOW_ASSIGN_OR_RETURN(FileStat now, fs_->Stat(from));
    const FileStat& then = base.data_files[f];
    if (now.size != then.size || now.inode != then.inode || now.device != then.device ||
        now.mtime_ns != then.mtime_ns) {
      return FailedPreconditionError(from, ": replaced or rewritten since it was saved");
    }
    // The entries SaveV2 would have written for these values: each at the
    // same offset of the same bytes, in the part's only data file; a part
    // of a partitioned variable also under the full tensor's entry, which
    // lists the slices this part holds.
    std::vector<std::pair<std::string, tensorflow::BundleEntryProto>> part;
    std::map<std::string, tensorflow::BundleEntryProto> full;
    for (int v : plan.layout->files[f]) {
      const ObjectGraph::Value& value = plan.values[v];
      std::string key = value.key;
      std::optional<TensorSlice> slice;
      if (!value.attribute.slice_spec.empty()) {
        CKFLOW_ASSIGN_OR_RETURN(ShapeAndSlice spec, ParseShapeAndSlice(value.attribute.slice_spec));
        key = EncodeTensorNameSlice(value.key, spec.slice);
        slice = spec.slice;
      }
      CKFLOW_ASSIGN_OR_RETURN(const tensorflow::BundleEntryProto* entry, find(key, f));
      part.emplace_back(key, *entry).second.set_shard_id(0);
      if (!slice) continue;
      CKFLOW_ASSIGN_OR_RETURN(const tensorflow::BundleEntryProto* whole, find(value.key, -1));
      auto [it, added] = full.try_emplace(value.key);
      if (added) {
        it->second.set_dtype(whole->dtype());
        *it->second.mutable_shape() = whole->shape();
      }
      for (const tensorflow::TensorSliceProto& s : whole->slices()) {
        if (EncodeTensorNameSlice(value.key, TensorSliceFromProto(s)) == key) {
          *it->second.add_slices() = s;
          break;
        }
      }
    }
    for (auto& [key, entry] : full) part.emplace_back(key, std::move(entry));
    std::sort(part.begin(), part.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    CKFLOW_ASSIGN_OR_RETURN(std::string table, BuildBundleIndex(header, part));
    const std::string part_prefix = ShardPrefix(prefix, f, n);
    CKFLOW_RETURN_IF_ERROR(fs_->LinkFile(from, DataFilename(part_prefix, 0, 1)));
    CKFLOW_RETURN_IF_ERROR(WriteNewFile(fs_, IndexFilename(part_prefix), table));
  }
  return OkStatus();
}

Status Saver::WriteGroup(const ObjectGraph& graph, const std::string& prefix, Session& session,
                         const SaveOptions& options, std::function<Status()> on_written) {
  CKFLOW_RETURN_IF_ERROR(WaitForPendingWrite());
  CheckpointGroup& group = *group_.group;
  const int rank = group.rank();
  const int size = group.size();
  GroupWrite write;
  write.prefix = prefix;
  write.part = ShardPrefix(prefix, rank, size);
  write.durable = options.durable;
  write.on_written = std::move(on_written);
  // Every member places every value alike (each variable where it was
  // restored or saved before). Anything that goes wrong here is carried into
  // the first agreement: a member that left early would leave the others
  // waiting for it.
  write.prepared = [&]() -> Status {
    std::vector<std::pair<std::string, int64_t>> sized;
    sized.reserve(graph.values.size());
    for (const ObjectGraph::Value& v : graph.values) {
      sized.emplace_back(v.key, DeclaredBytes(v.attribute));
    }
    CKFLOW_ASSIGN_OR_RETURN(std::vector<int> placed, owners_.Place(sized));
    std::vector<int> mine;
    for (size_t v = 0; v < placed.size(); ++v) {
      if (placed[v] == rank) mine.push_back(static_cast<int>(v));
    }
    if (mine.empty() && rank != 0) return OkStatus();  // member 0 writes the object graph
    // The member's values over files_per_device files, as one process
    // spreads a device's; member 0 merges every member's (gathered by
    // FinishGroupWrite, since each member's count is its own when automatic).
    const int count = FilesFor(graph.values, mine, options);
    std::vector<std::vector<int>> files = SplitBySize(graph.values, std::move(mine), count);
    CKFLOW_ASSIGN_OR_RETURN(SaveGraph * save, SaveGraphFor(graph.values, files, options.durable,
                                                           /*from_snapshot=*/options.async,
                                                           /*merge=*/false, rank == 0));
    write.targets = save->shards;
    for (size_t f = 0; f < files.size(); ++f) {
      std::string file = write.part;
      if (files.size() > 1) {
        char suffix[64];
        std::snprintf(suffix, sizeof(suffix), "-file-%05zu-of-%05zu", f, files.size());
        file += suffix;
      }
      write.feeds.emplace_back(save->shard_prefixes[f], Tensor::Scalar(file));
      write.files.push_back(std::move(file));
    }
    if (rank == 0 && format_.object_graph) {
      StatusOr<std::string> serialized = SerializeObjectGraph(graph);
      if (!serialized.ok()) {
        return serialized.status().WithContext("saving checkpoint '" + prefix + "'");
      }
      write.feeds.emplace_back(save->object_graph, Tensor::Scalar(*std::move(serialized)));
    }
    CKFLOW_RETURN_IF_ERROR(fs_->CreateDirs(Dirname(prefix)));
    if (options.async) {
      CKFLOW_RETURN_IF_ERROR(
          Snapshot(*save, session, &write.feeds).WithContext("snapshotting for '" + prefix + "'"));
    }
    return OkStatus();
  }();
  if (!options.async) return FinishGroupWrite(session, fs_, group_, write);
  writer_.Start([this, &session, write = std::move(write), on_done = options.on_done] {
    Status s = FinishGroupWrite(session, fs_, group_, write);
    if (on_done) on_done(write.prefix, s);
    return s;
  });
  return OkStatus();
}

}  // namespace ckflow::internal
