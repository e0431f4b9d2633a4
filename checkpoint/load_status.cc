// The three status kinds Checkpoint::Restore returns (TensorFlow's
// CheckpointLoadStatus, InitializationOnlyStatus, NameBasedSaverStatus), and
// RestoreRoot, which picks one. What each assertion requires follows
// TensorFlow's python/checkpoint/checkpoint.py (spec §5.6); the messages lead
// with TensorFlow's words.

#include <algorithm>
#include <unordered_set>

#include "base/logging.h"
#include "base/parallel.h"
#include "base/resource.h"
#include "bundle/bundle_format.h"
#include "bundle/checkpoint_object_graph_internal.h"
#include "checkpoint/group_internal.h"
#include "checkpoint/load_status_internal.h"
#include "checkpoint/restore_coordinator_internal.h"
#include "ops/variables.h"

namespace ckflow::internal {
namespace {

constexpr int kMaxListed = 10;  // objects listed per message, as TensorFlow

// The first kMaxListed of `lines`, one per line, and how many more of
// `total` (default: all the lines) there are.
std::string JoinLines(const std::vector<std::string>& lines, size_t total = 0) {
  total = std::max(total, lines.size());
  std::string out;
  for (size_t i = 0; i < std::min<size_t>(lines.size(), kMaxListed); ++i) out += "\n  " + lines[i];
  if (total > kMaxListed) out += "\n  ... and " + std::to_string(total - kMaxListed) + " more";
  return out;
}

// FailedPrecondition: `head`, then the lines (at most kMaxListed of them,
// as TensorFlow lists); OK if there are none.
Status Unmet(const std::string& head, const std::vector<std::string>& lines) {
  if (lines.empty()) return OkStatus();
  return FailedPreconditionError(head, JoinLines(lines));
}

std::string ObjectDescription(const std::string& path, const Trackable& object) {
  return (path.empty() ? std::string("(root)") : path) + " (" + object.TypeName() + ")";
}

// The objects that exist now, reachable from the root (children, slots),
// without paths or keys: an assertion that fails names only the first
// kMaxListed of what it counts, so it builds only their paths.
ObjectGraph CurrentObjects(const std::shared_ptr<Trackable>& root) {
  return BuildObjectGraph(root, ObjectGraphDetail::kObjectsOnly);
}

// The initializers of the objects that exist now and that `skip` does not
// exclude (restored ones).
std::vector<Output> Initializers(const std::shared_ptr<Trackable>& root,
                                 const std::function<bool(const Trackable&)>& skip) {
  std::vector<Output> initializers;
  ForEachReachableObject(root, [&](const Trackable& object) {
    // The cheap test first: after a full restore every object is skipped.
    if (skip(object)) return;
    Output init = object.initializer();
    if (init.valid()) initializers.push_back(init);
  });
  return initializers;
}

// Runs `targets`; restore ops read through `reader`, the restore's open
// checkpoint (RunOptions::bundle_reader).
Status RunTargets(Session& session, const std::vector<Feed>& feeds,
                  const std::vector<Output>& targets, FileSystem* fs = nullptr,
                  const BundleReader* reader = nullptr) {
  if (targets.empty()) return OkStatus();
  StatusOr<std::vector<Tensor>> result =
      session.Run(feeds, {}, targets, {.file_system = fs, .bundle_reader = reader});
  return result.status();
}

class CheckpointLoadStatusImpl : public LoadStatusImpl {
 public:
  CheckpointLoadStatusImpl(std::shared_ptr<RestoreCoordinator> coord,
                           std::shared_ptr<Trackable> root)
      : coord_(std::move(coord)), root_(std::move(root)) {}

  LoadStatus::Kind kind() const override { return LoadStatus::Kind::kCheckpointLoad; }
  const std::string& save_path() const override { return coord_->save_path(); }

  // In a group (group.h) each assertion is collective: every member runs
  // the same collectives in the same order and returns the same status.
  Status AssertExistingObjectsMatched() override { return Agreed(ExistingObjectsMatched()); }

  Status AssertConsumed() override {
    CKFLOW_RETURN_IF_ERROR(AssertExistingObjectsMatched());
    const RestoreCoordinator& c = *coord_;
    CKFLOW_ASSIGN_OR_RETURN(const std::vector<std::string> unresolved,
                            OnEveryMember(c.UnresolvedValues()));
    CKFLOW_RETURN_IF_ERROR(
        Unmet("Unresolved object(s) in checkpoint '" + c.save_path() +
                  "': " + std::to_string(unresolved.size()) +
                  " checkpointed value(s) were not matched to any object (create these objects "
                  "— e.g. call the layer or run Minimize — before asserting, or call "
                  "ExpectPartial() if they are not needed):",
              unresolved));
    CKFLOW_ASSIGN_OR_RETURN(const std::vector<std::string> slots, OnEveryMember(c.PendingSlots()));
    CKFLOW_RETURN_IF_ERROR(Unmet("Unresolved slot restorations in checkpoint '" + c.save_path() +
                                     "': " + std::to_string(slots.size()) +
                                     " slot variable(s) could not be restored because their "
                                     "variable was never matched:",
                                 slots));
    return Agreed(
        Unmet("Unused attributes in these objects (the attributes exist in the checkpoint but were "
              "not restored), checkpoint '" +
                  c.save_path() + "': the matched objects do not have these attributes:",
              c.UnusedAttributes()));
  }

  Status AssertNontrivialMatch() override { return Agreed(NontrivialMatch()); }

 private:
  CheckpointGroup* group() const { return coord_->saver()->group(); }
  GroupTimeout timeout() const { return coord_->saver()->group_timeout(); }
  Status Agreed(const Status& mine) const {
    return group() ? AgreeOnStatus(*group(), mine, timeout()) : mine;
  }
  // What did not match on any member: a value matched on one counts.
  StatusOr<std::vector<std::string>> OnEveryMember(std::vector<std::string> lines) const {
    if (group() == nullptr) return lines;
    return LinesOnEveryMember(*group(), lines, timeout());
  }

  Status ExistingObjectsMatched() const {
    const RestoreCoordinator& c = *coord_;
    // In graph mode running the restore ops reports these; eager restores
    // have no ops to run.
    if (eager()) CKFLOW_RETURN_IF_ERROR(c.Problems());
    CKFLOW_RETURN_IF_ERROR(
        Unmet("Object(s) not assigned a value from checkpoint '" + c.save_path() + "':",
              c.StaleObjects()));
    const std::unordered_set<const Trackable*> bound_objects = c.BoundObjects();
    const auto may_be_unmatched = [&](const ObjectGraphNode& node) {
      return !bound_objects.count(node.object.get()) && !(node.is_slot && c.skip_slot_variables());
    };
    // Only the unbound objects are asked for their attributes, and only
    // the listed ones get paths and keys: a full match, the common case of
    // a program asserting after every restore, builds no strings.
    const ObjectGraph current = CurrentObjects(root_);
    std::vector<std::string> unmatched;
    size_t num_unmatched = 0;
    for (int id = 0; id < static_cast<int>(current.nodes.size()); ++id) {
      const ObjectGraphNode& node = current.nodes[id];
      if (!may_be_unmatched(node)) continue;
      const std::vector<SaveableAttribute> attributes = node.object->Attributes();
      if (attributes.empty() || ++num_unmatched > kMaxListed) continue;
      const std::string path = ObjectPath(current, id);
      std::string line = ObjectDescription(path, *node.object);
      // The parts of a partitioned variable share one key.
      std::string last_key;
      for (const SaveableAttribute& attribute : attributes) {
        std::string key = AttributeKey(path, attribute.name);
        if (key != last_key) line += ", would be key '" + key + "'";
        last_key = std::move(key);
      }
      unmatched.push_back(std::move(line));
    }
    if (num_unmatched == 0) return OkStatus();
    return FailedPreconditionError(
        "Found ", num_unmatched,
        " object(s) that were not bound to checkpointed values, likely due to changes in the "
        "program (checkpoint '",
        c.save_path(),
        "'; the program has objects the checkpoint does not: if that is expected, don't assert, "
        "or restore a checkpoint written by this program):",
        JoinLines(unmatched, num_unmatched));
  }

  Status NontrivialMatch() const {
    const RestoreCoordinator& c = *coord_;
    if (c.NumLiveBound() > 1) return OkStatus();
    const ObjectGraph current = CurrentObjects(root_);
    // TensorFlow lists the objects that have no matching value.
    std::vector<std::string> unmatched;
    size_t num_unmatched = 0;
    for (int id = 0; id < static_cast<int>(current.nodes.size()); ++id) {
      const ObjectGraphNode& node = current.nodes[id];
      if (node.object->Attributes().empty() || ++num_unmatched > kMaxListed) continue;
      unmatched.push_back(ObjectDescription(ObjectPath(current, id), *node.object));
    }
    if (num_unmatched > 0) {
      return FailedPreconditionError(
          "Nothing except the root object matched a checkpointed value (checkpoint '",
          c.save_path(),
          "'). Typically this means that the checkpoint does not match the program: it was "
          "written with another root (e.g. SaveWeights vs Checkpoint{model}) or for another "
          "program; compare `ckflow tree` of the checkpoint with your objects. The following "
          "objects have no matching checkpointed value:",
          JoinLines(unmatched, num_unmatched));
    }
    return FailedPreconditionError(
        "Nothing to load. No dependencies have been added to the root "
        "object yet (checkpoint '",
        c.save_path(), "').");
  }

 public:
  void ExpectPartial() override { coord_->ExpectPartial(); }

  Status RunRestoreOps(Session& session) override {
    const RestoreCoordinator& c = *coord_;
    CKFLOW_RETURN_IF_ERROR(c.saver()->CheckGraphAlive());
    CKFLOW_RETURN_IF_ERROR(c.Problems());
    // Fewer resources than values to restore: a fresh session, whose
    // variables the restore ops create. Making room for them first spares
    // the table its rehashes as it grows (see ResourceMgr::Reserve).
    ResourceMgr& resources = session.resources();
    const auto values = static_cast<size_t>(c.restored_values());
    if (resources.size() < values) resources.Reserve(values);
    return RunTargets(session, {Feed(c.saver()->restore_prefix(), Tensor::Scalar(c.save_path()))},
                      c.restore_ops(), c.saver()->file_system(), c.reader().get());
  }

  Status InitializeOrRestore(Session& session) override {
    const RestoreCoordinator& c = *coord_;
    CKFLOW_RETURN_IF_ERROR(c.Problems());
    // The restore ops run while the objects are walked for the initializers
    // still needed (the walk reads only the objects, the ops only the
    // session); those initializers, none after a full match, run after.
    Status restored;
    std::vector<Output> initializers;
    ParallelInvoke([&] { restored = RunRestoreOps(session); },
                   [&] {
                     // Matching stamps every object it binds with this
                     // restore's uid (or a newer restore did), so the uid
                     // alone says "bound here or restored since".
                     initializers = Initializers(root_, [&](const Trackable& object) {
                       return object.update_uid() >= c.uid();
                     });
                   });
    CKFLOW_RETURN_IF_ERROR(restored);
    return RunTargets(session, {}, initializers);
  }

 private:
  std::shared_ptr<RestoreCoordinator> coord_;
  std::shared_ptr<Trackable> root_;
};

class InitializationOnlyStatusImpl : public LoadStatusImpl {
 public:
  explicit InitializationOnlyStatusImpl(std::shared_ptr<Trackable> root)
      : root_(std::move(root)), uid_(NewRestoreUid()) {}

  LoadStatus::Kind kind() const override { return LoadStatus::Kind::kInitializationOnly; }
  const std::string& save_path() const override { return empty_; }
  Status AssertConsumed() override { return NothingRestored(); }
  Status AssertExistingObjectsMatched() override { return NothingRestored(); }
  Status AssertNontrivialMatch() override { return NothingRestored(); }
  void ExpectPartial() override {}
  Status RunRestoreOps(Session&) override {
    return FailedPreconditionError(
        "no checkpoint was specified (Restore(nullopt)), so there are no restore ops to run; use "
        "InitializeOrRestore to initialize the variables");
  }
  Status InitializeOrRestore(Session& session) override {
    return RunTargets(session, {}, Initializers(root_, [&](const Trackable& object) {
                        return object.update_uid() >= uid_;
                      }));
  }

 private:
  static Status NothingRestored() {
    return FailedPreconditionError(
        "no checkpoint was specified (Restore(nullopt)); nothing is being restored");
  }
  std::shared_ptr<Trackable> root_;
  int64_t uid_;
  std::string empty_;
};

class NameBasedSaverStatusImpl : public LoadStatusImpl,
                                 public std::enable_shared_from_this<NameBasedSaverStatusImpl> {
 public:
  NameBasedSaverStatusImpl(std::string save_path, std::shared_ptr<const BundleReader> reader,
                           std::shared_ptr<Saver> saver, std::shared_ptr<Trackable> root,
                           CastRule cast)
      : save_path_(std::move(save_path)),
        reader_(std::move(reader)),
        saver_(std::move(saver)),
        root_(std::move(root)),
        uid_(NewRestoreUid()),
        cast_(cast) {
    Log(LogSeverity::kWarning,
        "Restoring a name-based checkpoint ('" + save_path_ +
            "', written by a TensorFlow 1 Saver): variables are matched by their names. Save an "
            "object-based checkpoint to match by object paths.");
  }
  ~NameBasedSaverStatusImpl() override {
    if (hook_id_ >= 0 && saver_->CheckGraphAlive().ok()) {
      RemoveVariableCreatorHook(saver_->scope().graph(), hook_id_);
    }
  }

  void MarkOptional(const Trackable* object) { optional_.insert(object); }

  // Eager: TensorFlow's NameBasedSaverStatus restores on creation by name.
  // The variables that exist are restored now; every variable created in
  // the graph later, the moment it is (a creator hook), while this status
  // lives. A TF1 Saver restores by variable name whatever owns the
  // variable, and so does this.
  Status RestoreEagerly() {
    CKFLOW_ASSIGN_OR_RETURN(std::vector<RestoreItem> items, MatchCurrentObjects());
    CKFLOW_RETURN_IF_ERROR(Restore(std::move(items)));
    std::weak_ptr<NameBasedSaverStatusImpl> self = weak_from_this();
    hook_id_ = AddVariableCreatorHook(saver_->scope().graph(),
                                      [self](const std::shared_ptr<Variable>& variable) {
                                        if (auto status = self.lock())
                                          status->RestoreCreated(*variable);
                                      });
    return OkStatus();
  }

  LoadStatus::Kind kind() const override { return LoadStatus::Kind::kNameBasedSaver; }
  const std::string& save_path() const override { return save_path_; }

  Status AssertConsumed() override {
    if (!problems_.empty()) return problems_.front();
    std::vector<std::string> unused;
    for (const auto& [object, description] : unused_) {
      if (!optional_.count(object.get())) unused.push_back(description);
    }
    CKFLOW_RETURN_IF_ERROR(Unmet(
        "name-based checkpoint '" + save_path_ + "' has no value for these variables:", unused));
    const ObjectGraph current = BuildObjectGraph(root_);
    std::vector<std::string> pending;
    for (const ObjectGraphNode& node : current.nodes) {
      // Eagerly, an object without values (a layer) has nothing to wait for.
      if (eager() && node.attributes.empty()) continue;
      if (node.object->update_uid() < uid_ && !optional_.count(node.object.get())) {
        pending.push_back(ObjectDescription(node.path, *node.object));
      }
    }
    return Unmet("name-based checkpoint '" + save_path_ +
                     "': these objects are not restored yet (a name-based restore matches when "
                     "its ops run: call RunRestoreOps or InitializeOrRestore first):",
                 pending);
  }
  Status AssertExistingObjectsMatched() override { return AssertConsumed(); }
  Status AssertNontrivialMatch() override { return AssertConsumed(); }
  void ExpectPartial() override {}

  Status RunRestoreOps(Session& session) override {
    CKFLOW_ASSIGN_OR_RETURN(std::vector<RestoreItem> items, MatchCurrentObjects());
    if (!items.empty()) {
      CKFLOW_ASSIGN_OR_RETURN(std::vector<Output> ops,
                              saver_->RestoreOps(std::move(items), save_path_, nullptr, cast_));
      restore_ops_.insert(restore_ops_.end(), ops.begin(), ops.end());
    }
    return RunTargets(session, {Feed(saver_->restore_prefix(), Tensor::Scalar(save_path_))},
                      restore_ops_, saver_->file_system(), reader_.get());
  }
  // TensorFlow's NameBasedSaverStatus initializes nothing, which leaves a
  // save_counter the TF1 checkpoint lacks uninitialized, and the loop's
  // next Save failing on it. (TensorFlow 2.21 fails earlier: its graph-mode
  // name-based restore asks the checkpoint for save_counter.) ckflow
  // initializes the optional values the checkpoint lacks; nothing else.
  Status InitializeOrRestore(Session& session) override {
    CKFLOW_RETURN_IF_ERROR(RunRestoreOps(session));
    std::vector<Output> initializers;
    for (const auto& [object, description] : unused_) {
      if (!optional_.count(object.get())) continue;
      if (Output init = object->initializer(); init.valid()) initializers.push_back(init);
    }
    // Once: a second call must not reset them.
    std::erase_if(unused_, [&](const auto& u) { return optional_.count(u.first.get()) != 0; });
    return RunTargets(session, {}, initializers);
  }

 private:
  // The values of `object`'s attributes under their full names, marking it
  // restored by this status; a name the checkpoint lacks goes to unused_.
  // InvalidArgument for a value of another dtype or shape.
  Status Match(const std::shared_ptr<Trackable>& object, const std::string& description,
               const std::vector<SaveableAttribute>& attributes, std::vector<RestoreItem>& items) {
    object->set_update_uid(uid_);
    for (const SaveableAttribute& attr : attributes) {
      const BundleEntry* entry = reader_->FindEntry(attr.full_name);
      if (entry == nullptr) {
        // save_counter and the like are optional; everything else is reported by
        // AssertConsumed, as TensorFlow records unused attributes.
        unused_.emplace_back(object, description + ": no key '" + attr.full_name + "'");
        continue;
      }
      const std::string why = CastRefusal(static_cast<DataType>(entry->dtype), attr.dtype, cast_);
      if (!why.empty() || !attr.saved_shape().IsCompatibleWith(entry->shape)) {
        return InvalidArgumentError(
            "name-based checkpoint '", save_path_, "': key '", attr.full_name, "' is ",
            StoredDataTypeName(entry->dtype), entry->shape.ToString(), " but the variable is ",
            DataTypeName(attr.dtype), attr.shape.ToString(), why.empty() ? "" : ": ", why);
      }
      items.push_back({attr.full_name, attr, entry - reader_->entries().data()});
    }
    return OkStatus();
  }

  // Match for every object of the root's graph not restored yet.
  StatusOr<std::vector<RestoreItem>> MatchCurrentObjects() {
    CKFLOW_RETURN_IF_ERROR(saver_->CheckGraphAlive());
    const ObjectGraph current = BuildObjectGraph(root_);
    std::vector<RestoreItem> items;
    for (const ObjectGraphNode& node : current.nodes) {
      if (node.object->update_uid() >= uid_) continue;
      CKFLOW_RETURN_IF_ERROR(
          Match(node.object, ObjectDescription(node.path, *node.object), node.attributes, items));
    }
    return items;
  }

  // Eager: the values go into the variables now, through the one reader.
  Status Restore(std::vector<RestoreItem> items) {
    if (items.empty()) return OkStatus();
    return saver_->RestoreOps(std::move(items), save_path_, reader_.get(), cast_).status();
  }

  // The creator hook's work: a problem is kept for AssertConsumed, as an
  // eager object-based restore keeps its own.
  void RestoreCreated(Variable& variable) {
    if (variable.update_uid() >= uid_) return;
    std::vector<RestoreItem> items;
    Status s = Match(variable.shared_from_this(), "variable '" + variable.name() + "'",
                     variable.Attributes(), items);
    if (s.ok()) s = Restore(std::move(items));
    if (!s.ok()) problems_.push_back(std::move(s));
  }

  std::string save_path_;
  std::shared_ptr<const BundleReader> reader_;
  std::shared_ptr<Saver> saver_;
  std::shared_ptr<Trackable> root_;
  int64_t uid_;
  CastRule cast_;
  int hook_id_ = -1;
  std::unordered_set<const Trackable*> optional_;
  // Attributes the checkpoint has no key for, with their objects (which may
  // turn out optional: save_counter is created after the status).
  std::vector<std::pair<std::shared_ptr<Trackable>, std::string>> unused_;
  std::vector<Status> problems_;  // eager restores on creation
  std::vector<Output> restore_ops_;
};

// The checkpoint's object graph, read through `reader`, parsed and checked
// (a restore needs the root node); null if the checkpoint has none
// (a name-based one).
StatusOr<std::unique_ptr<const StoredObjectGraph>> ObjectGraphOf(const BundleReader& reader,
                                                                 const std::string& path) {
  CKFLOW_ASSIGN_OR_RETURN(std::unique_ptr<const StoredObjectGraph> parsed,
                          ParseCheckpointObjectGraph(reader));
  if (parsed != nullptr && parsed->nodes_size() == 0) {
    return DataLossError(path, ": the object graph has no nodes");
  }
  return parsed;
}

// ObjectGraphOf the checkpoint at `path`, with one seek into its index.
StatusOr<std::unique_ptr<const StoredObjectGraph>> ReadObjectGraph(const std::string& path,
                                                                   FileSystem* fs) {
  CKFLOW_ASSIGN_OR_RETURN(
      std::unique_ptr<BundleReader> one,
      BundleReader::Open(path, {.fs = fs, .only_key = std::string(kObjectGraphKey)}));
  return ObjectGraphOf(*one, path);
}

// A checkpoint of many small values has its data files prefetched as soon
// as its index is read: from a cold page cache, the device then reads them
// while the values are matched to variables (about a microsecond each)
// instead of after; from a warm cache the hint costs a few system calls.
// A few values take no time to match; large ones are read in parallel
// chunks with readahead already; and more than kMaxPrefetchBytes could
// evict what was prefetched before the reads get there.
void MaybePrefetch(const BundleReader& reader) {
  constexpr uint64_t kMaxAverageValueBytes = 64 << 10;
  constexpr uint64_t kMaxPrefetchBytes = uint64_t{1} << 30;
  constexpr size_t kMinValues = 1000;
  const std::vector<BundleEntry>& entries = reader.entries();
  if (entries.size() < kMinValues) return;
  uint64_t bytes = 0;
  for (const BundleEntry& e : entries) bytes += static_cast<uint64_t>(e.size);
  if (bytes / entries.size() <= kMaxAverageValueBytes) reader.PrefetchData(kMaxPrefetchBytes);
}

}  // namespace

StatusOr<LoadStatus> RestoreRoot(
    const std::shared_ptr<Trackable>& root, const std::shared_ptr<Saver>& saver,
    const std::optional<std::string>& save_path,
    const std::function<std::shared_ptr<Trackable>()>& make_save_counter,
    const RestoreOptions& options, Session* run_later_restores_in) {
  const bool eager = saver->scope().eager();
  if (!save_path.has_value()) {
    auto status = std::make_shared<InitializationOnlyStatusImpl>(root);
    status->set_eager(eager);
    if (make_save_counter) make_save_counter();
    return LoadStatusImpl::Wrap(status);
  }
  // The index (every entry, for the restore ops) and the object graph (one
  // entry, for matching) are read and parsed on two threads: for thousands
  // of variables each is a large part of Restore.
  StatusOr<std::shared_ptr<const BundleReader>> reader = options.reader;
  StatusOr<std::unique_ptr<const StoredObjectGraph>> graph = nullptr;
  if (options.reader != nullptr) {
    if (options.reader->prefix() != *save_path) {
      return InvalidArgumentError("RestoreOptions::reader was opened for '",
                                  options.reader->prefix(), "', not for '", *save_path, "'");
    }
    graph = ObjectGraphOf(*options.reader, *save_path);
  } else {
    ParallelInvoke(
        [&] {
          StatusOr<std::unique_ptr<BundleReader>> opened =
              BundleReader::Open(*save_path, {.fs = saver->file_system()});
          if (opened.ok()) {
            MaybePrefetch(**opened);
            reader = std::shared_ptr<const BundleReader>(*std::move(opened));
          } else {
            reader = opened.status();
          }
        },
        [&] { graph = ReadObjectGraph(*save_path, saver->file_system()); });
  }
  CKFLOW_RETURN_IF_ERROR(reader.status());
  CKFLOW_RETURN_IF_ERROR(graph.status());
  if (*graph == nullptr) {
    auto status =
        std::make_shared<NameBasedSaverStatusImpl>(*save_path, *reader, saver, root, options.cast);
    status->set_eager(eager);
    if (eager) CKFLOW_RETURN_IF_ERROR(status->RestoreEagerly());
    if (make_save_counter) {
      if (std::shared_ptr<Trackable> counter = make_save_counter())
        status->MarkOptional(counter.get());
    }
    return LoadStatusImpl::Wrap(status);
  }
  auto coordinator = std::make_shared<RestoreCoordinator>(*save_path, *std::move(reader),
                                                          *std::move(graph), saver, options);
  coordinator->RestoreFrom(0, root);
  // After the first walk: what exists now is restored by the caller's own
  // RunRestoreOps.
  if (run_later_restores_in != nullptr && !eager) {
    coordinator->RunLaterRestoresIn(run_later_restores_in);
  }
  auto status = std::make_shared<CheckpointLoadStatusImpl>(std::move(coordinator), root);
  status->set_eager(eager);
  if (make_save_counter) make_save_counter();
  return LoadStatusImpl::Wrap(status);
}

}  // namespace ckflow::internal

// ------------------------------------------------------------ LoadStatus

namespace ckflow {

LoadStatus::Kind LoadStatus::kind() const { return impl_->kind(); }

std::string_view LoadStatus::kind_name() const {
  switch (kind()) {
    case Kind::kCheckpointLoad:
      return "CheckpointLoadStatus";
    case Kind::kInitializationOnly:
      return "InitializationOnlyStatus";
    case Kind::kNameBasedSaver:
      return "NameBasedSaverStatus";
  }
  return "LoadStatus";
}

Status LoadStatus::AssertConsumed() const { return impl_->AssertConsumed(); }
Status LoadStatus::AssertExistingObjectsMatched() const {
  return impl_->AssertExistingObjectsMatched();
}
Status LoadStatus::AssertNontrivialMatch() const { return impl_->AssertNontrivialMatch(); }
LoadStatus& LoadStatus::ExpectPartial() {
  impl_->ExpectPartial();
  return *this;
}
Status LoadStatus::RunRestoreOps(Session& session) const {
  if (impl_->eager()) return OkStatus();
  return impl_->RunRestoreOps(session);
}
Status LoadStatus::InitializeOrRestore(Session& session) const {
  if (impl_->eager()) return OkStatus();
  return impl_->InitializeOrRestore(session);
}
Status LoadStatus::RunRestoreOps() const {
  if (impl_->eager()) return OkStatus();
  return FailedPreconditionError("RunRestoreOps of '", save_path(),
                                 "': a graph-mode restore runs its ops in a Session");
}
Status LoadStatus::InitializeOrRestore() const {
  if (impl_->eager()) return OkStatus();
  return FailedPreconditionError("InitializeOrRestore of '", save_path(),
                                 "': a graph-mode restore runs its ops in a Session");
}
const std::string& LoadStatus::save_path() const { return impl_->save_path(); }

}  // namespace ckflow
