// Matching a checkpoint's object graph to live objects, and the three status
// kinds. The conditions follow TensorFlow's python/checkpoint/ (restore.py,
// checkpoint.py), spec §5.5–5.6.

#include <algorithm>
#include <atomic>
#include <deque>
#include <sstream>
#include <unordered_set>

#include "base/logging.h"
#include "base/parallel.h"
#include "base/resource.h"
#include "bundle/bundle_format.h"
#include "checkpoint/restore_internal.h"
#include "ops/checkpoint_ops_internal.h"

namespace ckflow::internal {
namespace {

constexpr int kMaxListed = 10;  // objects listed per message, as TensorFlow

std::string JoinLines(const std::vector<std::string>& lines) {
  std::string out;
  const int n = static_cast<int>(lines.size());
  for (int i = 0; i < std::min(n, kMaxListed); ++i) out += "\n  " + lines[i];
  if (n > kMaxListed) out += "\n  ... and " + std::to_string(n - kMaxListed) + " more";
  return out;
}

// Whether a proto node, or anything below it, holds values (TensorFlow's
// has_checkpoint_values, with its fallback for older checkpoints).
bool NodeHasValues(const tensorflow::TrackableObjectGraph::TrackableObject& node) {
  if (node.has_has_checkpoint_values()) return node.has_checkpoint_values().value();
  return node.children_size() > 0 || node.attributes_size() > 0 || node.slot_variables_size() > 0 ||
         node.has_registered_saver();
}

std::string ObjectDescription(const ObjectGraphNode& node) {
  return (node.path.empty() ? std::string("(root)") : node.path) + " (" + node.object->TypeName() +
         ")";
}

Status ValidateProto(const tensorflow::TrackableObjectGraph& proto, const std::string& path) {
  const int n = proto.nodes_size();
  if (n == 0) return DataLossError(path, ": the object graph has no nodes");
  auto bad = [&](int id) { return id < 0 || id >= n; };
  for (int id = 0; id < n; ++id) {
    for (const auto& c : proto.nodes(id).children()) {
      if (bad(c.node_id())) {
        return DataLossError(path, ": object graph node ", id, " has child '", c.local_name(),
                             "' pointing at node ", c.node_id(), " of ", n);
      }
    }
    for (const auto& s : proto.nodes(id).slot_variables()) {
      if (bad(s.original_variable_node_id()) || bad(s.slot_variable_node_id())) {
        return DataLossError(path, ": object graph node ", id, " has slot '", s.slot_name(),
                             "' referring to a node out of range");
      }
    }
  }
  return OkStatus();
}

}  // namespace

int64_t NewRestoreUid() {
  static std::atomic<int64_t> next{1};
  return next.fetch_add(1);
}

// ------------------------------------------------------------ coordinator

RestoreCoordinator::RestoreCoordinator(std::string path, std::unique_ptr<google::protobuf::Arena> a,
                                       const tensorflow::TrackableObjectGraph* p,
                                       std::shared_ptr<Saver> s)
    : uid(NewRestoreUid()),
      save_path(std::move(path)),
      arena(std::move(a)),
      proto(*p),
      saver(std::move(s)),
      object_by_proto_id(proto.nodes_size()),
      bound(proto.nodes_size(), false),
      matched(proto.nodes_size(), false) {
  for (int id = 0; id < proto.nodes_size(); ++id) {
    for (const auto& slot : proto.nodes(id).slot_variables()) {
      slot_restorations[slot.original_variable_node_id()].push_back(
          {id, slot.slot_variable_node_id(), slot.slot_name()});
    }
  }
}

RestoreCoordinator::~RestoreCoordinator() {
  if (expect_partial) return;
  std::vector<bool> skipped(proto.nodes_size(), false);
  if (skip_slot_variables) {
    for (const auto& node : proto.nodes()) {
      for (const auto& slot : node.slot_variables()) skipped[slot.slot_variable_node_id()] = true;
    }
  }
  std::vector<std::string> lines;
  for (int id = 0; id < proto.nodes_size(); ++id) {
    if (proto.nodes(id).attributes_size() > 0 && !matched[id] && !skipped[id]) {
      lines.push_back(
          "Value in checkpoint could not be found in the restored object: " + NodeName(id) +
          " (key '" + proto.nodes(id).attributes(0).checkpoint_key() + "')");
    }
  }
  for (const auto& [id, names] : unused_attributes) {
    for (const std::string& name : names) {
      lines.push_back(
          "An attribute in the restored object could not be found in the checkpoint. "
          "Object: " +
          NodeName(id) + ", attribute: " + name);
    }
  }
  if (lines.empty()) return;
  std::string message = "A checkpoint status for '" + save_path +
                        "' is being deleted with unrestored values. If this is expected, call "
                        "ExpectPartial() on the status returned by Restore to silence this "
                        "warning; otherwise create the missing objects before running the restore "
                        "ops.";
  for (const std::string& line : lines) message += "\n  " + line;
  Log(LogSeverity::kWarning, message);
}

bool RestoreCoordinator::Bind(int proto_id, const std::shared_ptr<Trackable>& object) {
  matched[proto_id] = true;
  std::shared_ptr<Trackable> current =
      bound[proto_id] ? object_by_proto_id[proto_id].lock() : nullptr;
  if (current == nullptr) {
    bound[proto_id] = true;
    object_by_proto_id[proto_id] = object;
    return true;
  }
  if (current != object) {
    Log(LogSeverity::kWarning, "Inconsistent references when restoring '" + save_path +
                                   "': checkpoint node " + NodeName(proto_id) +
                                   " is already bound to another object; the other reference "
                                   "is not restored from it.");
  }
  return false;
}

const std::string& RestoreCoordinator::NodeName(int proto_id) const {
  std::call_once(node_names_once_, [&] { node_names_ = ProtoNodeNames(proto); });
  return node_names_[proto_id];
}

std::unordered_set<const Trackable*> RestoreCoordinator::BoundObjects() const {
  std::unordered_set<const Trackable*> objects;
  for (size_t id = 0; id < bound.size(); ++id) {
    if (!bound[id]) continue;
    if (std::shared_ptr<Trackable> object = object_by_proto_id[id].lock()) {
      objects.insert(object.get());
    }
  }
  return objects;
}

void RestoreCoordinator::AddRestoreOps(std::vector<std::pair<int, RestoreItem>> items) {
  // Each item's entry, checked against its variable: a lookup per value, so
  // thousands of them are checked in parallel; the rare problem is then
  // described in order.
  std::vector<const BundleEntry*> entries(items.size());
  std::vector<char> fits(items.size());
  ParallelFor(static_cast<int64_t>(items.size()), 2000, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      RestoreItem& item = items[i].second;
      entries[i] = reader->FindEntry(item.key);
      if (entries[i] != nullptr) item.position = entries[i] - reader->entries().data();
      fits[i] = entries[i] != nullptr && entries[i]->dtype == item.attribute.dtype &&
                item.attribute.shape.IsCompatibleWith(entries[i]->shape);
    }
  });
  std::vector<RestoreItem> ok_items;
  ok_items.reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    auto& [id, item] = items[i];
    if (fits[i]) {
      ok_items.push_back(std::move(item));
      continue;
    }
    const std::string where = "restoring " + NodeName(id) + " from '" + save_path + "'";
    const BundleEntry* entry = entries[i];
    if (entry == nullptr) {
      problems.push_back(NotFoundError(where, ": the checkpoint's object graph names key '",
                                       item.key, "' but its bundle has no such tensor"));
    } else if (entry->dtype != item.attribute.dtype) {
      problems.push_back(InvalidArgumentError(where, ": key '", item.key, "' holds ",
                                              StoredDataTypeName(entry->dtype), " but variable '",
                                              item.attribute.full_name, "' is ",
                                              DataTypeName(item.attribute.dtype)));
    } else {
      problems.push_back(InvalidArgumentError(
          where, ": key '", item.key, "' has shape ", entry->shape.ToString(), " but variable '",
          item.attribute.full_name, "' has shape ", item.attribute.shape.ToString()));
    }
  }
  if (ok_items.empty()) return;
  restored_values += static_cast<int64_t>(ok_items.size());
  StatusOr<std::vector<Output>> ops = saver->RestoreOps(std::move(ok_items));
  if (!ops.ok()) {
    problems.push_back(ops.status());
    return;
  }
  restore_ops.insert(restore_ops.end(), ops->begin(), ops->end());
}

// ------------------------------------------------------------ positions

void CheckpointPosition::Restore(const std::shared_ptr<Trackable>& object) {
  RestoreCoordinator& c = *coordinator_;
  if (!c.Bind(proto_id_, object)) return;
  std::vector<std::pair<int, RestoreItem>> items;
  // From the root, nearly every node has a value: growing the vector would
  // move each item's four strings about twice.
  if (proto_id_ == 0) items.reserve(c.proto.nodes_size());
  std::deque<std::pair<int, std::shared_ptr<Trackable>>> queue{{proto_id_, object}};
  while (!queue.empty()) {
    auto [id, obj] = std::move(queue.front());
    queue.pop_front();
    const auto& node = c.proto.nodes(id);

    // This object's own values, unless a newer restore already set them.
    if (c.uid > obj->update_uid()) {
      std::vector<SaveableAttribute> attributes = obj->Attributes();
      for (const auto& serialized : node.attributes()) {
        auto match = std::find_if(attributes.begin(), attributes.end(), [&](const auto& a) {
          return a.name == serialized.name() || EscapeLocalName(a.name) == serialized.name();
        });
        if (match == attributes.end()) {
          c.unused_attributes[id].push_back(serialized.name());
          continue;
        }
        // The usual single attribute is moved, not copied.
        items.push_back(
            {id, RestoreItem{serialized.checkpoint_key(),
                             node.attributes_size() == 1 ? std::move(*match) : *match}});
      }
      obj->set_update_uid(c.uid);
    }

    for (int k = 0; k < node.children_size(); ++k) {
      const auto& child = node.children(k);
      std::shared_ptr<Trackable> local = obj->LookupChild(child.local_name(), k);
      if (local == nullptr) {
        if (NodeHasValues(c.proto.nodes(child.node_id()))) {
          obj->AddDeferredRestore(child.local_name(), std::make_shared<CheckpointPosition>(
                                                          coordinator_, child.node_id()));
        }
        continue;
      }
      if (c.Bind(child.node_id(), local)) queue.emplace_back(child.node_id(), local);
    }

    // This object is an optimizer whose variables were bound earlier.
    if (auto it = c.deferred_slot_restorations.find(id); it != c.deferred_slot_restorations.end()) {
      std::vector<DeferredSlotRestoration> pending = std::move(it->second);
      c.deferred_slot_restorations.erase(it);
      if (auto* owner = dynamic_cast<SlotOwner*>(obj.get())) {
        for (const DeferredSlotRestoration& d : pending) {
          if (auto variable = d.original_variable.lock()) {
            owner->CreateOrRestoreSlot(
                variable, d.slot_name,
                std::make_shared<CheckpointPosition>(coordinator_, d.slot_variable_id));
          }
        }
      }
    }
    // This object is a variable that has slots in the checkpoint.
    if (auto it = c.slot_restorations.find(id); it != c.slot_restorations.end()) {
      std::vector<SlotRestoration> slots = std::move(it->second);
      c.slot_restorations.erase(it);
      for (const SlotRestoration& s : slots) {
        std::shared_ptr<Trackable> optimizer =
            c.bound[s.optimizer_id] ? c.object_by_proto_id[s.optimizer_id].lock() : nullptr;
        if (optimizer == nullptr) {
          c.deferred_slot_restorations[s.optimizer_id].push_back(
              {obj, s.slot_variable_id, s.slot_name});
        } else if (auto* owner = dynamic_cast<SlotOwner*>(optimizer.get())) {
          owner->CreateOrRestoreSlot(
              obj, s.slot_name,
              std::make_shared<CheckpointPosition>(coordinator_, s.slot_variable_id));
        }
      }
    }
  }
  c.AddRestoreOps(std::move(items));
}

// ------------------------------------------------------------ statuses

namespace {

// The objects that exist now, reachable from the root (children, slots).
ObjectGraph CurrentObjects(const std::shared_ptr<Trackable>& root) {
  return BuildObjectGraph(root);
}

// The initializers of the objects that exist now and that `skip` does not
// exclude (restored ones).
std::vector<Output> Initializers(const std::shared_ptr<Trackable>& root,
                                 const std::function<bool(const Trackable&)>& skip) {
  std::vector<Output> initializers;
  for (const ObjectGraphNode& node :
       BuildObjectGraph(root, ObjectGraphDetail::kObjectsOnly).nodes) {
    Output init = node.object->initializer();
    if (init.valid() && !skip(*node.object)) initializers.push_back(init);
  }
  return initializers;
}

Status RunTargets(Session& session, const std::vector<Feed>& feeds,
                  const std::vector<Output>& targets, FileSystem* fs = nullptr) {
  if (targets.empty()) return OkStatus();
  StatusOr<std::vector<Tensor>> result = session.Run(feeds, {}, targets, {.file_system = fs});
  return result.status();
}

class CheckpointLoadStatusImpl : public LoadStatusImpl {
 public:
  CheckpointLoadStatusImpl(std::shared_ptr<RestoreCoordinator> coord,
                           std::shared_ptr<Trackable> root)
      : coord_(std::move(coord)), root_(std::move(root)) {}

  LoadStatus::Kind kind() const override { return LoadStatus::Kind::kCheckpointLoad; }
  const std::string& save_path() const override { return coord_->save_path; }

  Status AssertExistingObjectsMatched() override {
    RestoreCoordinator& c = *coord_;
    std::vector<std::string> stale;
    for (size_t id = 0; id < c.bound.size(); ++id) {
      if (!c.bound[id]) continue;
      auto obj = c.object_by_proto_id[id].lock();
      if (obj && obj->update_uid() < c.uid) {
        stale.push_back(c.NodeName(id) +
                        " was matched but not assigned a value from the checkpoint");
      }
    }
    if (!stale.empty()) {
      return FailedPreconditionError("Object(s) not assigned a value from checkpoint '",
                                     c.save_path, "':", JoinLines(stale));
    }
    ObjectGraph current = CurrentObjects(root_);
    const std::unordered_set<const Trackable*> bound_objects = c.BoundObjects();
    std::vector<std::string> unmatched;
    for (const ObjectGraphNode& node : current.nodes) {
      if (node.attributes.empty() || bound_objects.count(node.object.get())) continue;
      if (node.is_slot && c.skip_slot_variables) continue;
      std::string line = ObjectDescription(node);
      for (const std::string& key : node.keys) line += ", would be key '" + key + "'";
      unmatched.push_back(line);
    }
    if (!unmatched.empty()) {
      return FailedPreconditionError(
          "Found ", unmatched.size(),
          " object(s) that were not bound to checkpointed values, likely due to changes in the "
          "program (checkpoint '",
          c.save_path,
          "'; the program has objects the checkpoint does not: if that is expected, don't "
          "assert, or restore a checkpoint written by this program):",
          JoinLines(unmatched));
    }
    return OkStatus();
  }

  Status AssertConsumed() override {
    CKFLOW_RETURN_IF_ERROR(AssertExistingObjectsMatched());
    RestoreCoordinator& c = *coord_;
    // With skip_slot_variables the checkpoint's slots are expected to stay
    // unmatched, as TensorFlow's assert_consumed ignores them then.
    std::unordered_set<int> skipped_slots;
    if (c.skip_slot_variables) {
      for (const auto& node : c.proto.nodes()) {
        for (const auto& slot : node.slot_variables()) {
          skipped_slots.insert(slot.slot_variable_node_id());
        }
      }
    }
    std::vector<std::string> unresolved;
    for (int id = 0; id < c.proto.nodes_size(); ++id) {
      const auto& node = c.proto.nodes(id);
      if (node.attributes_size() == 0 || skipped_slots.count(id)) continue;
      if (c.bound[id] && !c.object_by_proto_id[id].expired()) continue;
      unresolved.push_back(c.NodeName(id) + " (key '" + node.attributes(0).checkpoint_key() + "')");
    }
    if (!unresolved.empty()) {
      return FailedPreconditionError(
          "Unresolved object(s) in checkpoint '", c.save_path, "': ", unresolved.size(),
          " checkpointed value(s) were not matched to any object (create these objects — e.g. "
          "call the layer or run Minimize — before asserting, or call ExpectPartial() if they "
          "are not needed):",
          JoinLines(unresolved));
    }
    std::vector<std::string> slots;
    for (const auto& [var_id, restorations] : c.slot_restorations) {
      for (const SlotRestoration& s : restorations) {
        slots.push_back("slot '" + s.slot_name + "' of " + c.NodeName(var_id) + " (optimizer " +
                        c.NodeName(s.optimizer_id) + ")");
      }
    }
    if (!slots.empty()) {
      return FailedPreconditionError("Unresolved slot restorations in checkpoint '", c.save_path,
                                     "': ", slots.size(),
                                     " slot variable(s) could not be restored because their "
                                     "variable was never matched:",
                                     JoinLines(slots));
    }
    std::vector<std::string> unused;
    for (const auto& [id, names] : c.unused_attributes) {
      for (const std::string& name : names) {
        unused.push_back(c.NodeName(id) + " has no attribute '" + name + "'");
      }
    }
    if (!unused.empty()) {
      return FailedPreconditionError(
          "Unused attributes in these objects (the attributes exist in the checkpoint but were "
          "not restored), checkpoint '",
          c.save_path, "': the matched objects do not have these attributes:", JoinLines(unused));
    }
    return OkStatus();
  }

  Status AssertNontrivialMatch() override {
    RestoreCoordinator& c = *coord_;
    ObjectGraph current = CurrentObjects(root_);
    // TensorFlow lists the objects that have no matching value.
    std::vector<std::string> unmatched;
    for (const ObjectGraphNode& node : current.nodes) {
      if (!node.attributes.empty()) unmatched.push_back(ObjectDescription(node));
    }
    const bool owns_values = !unmatched.empty();
    int matched = 0;
    for (size_t id = 0; id < c.bound.size(); ++id) {
      if (c.bound[id] && !c.object_by_proto_id[id].expired()) ++matched;
    }
    if (matched > 1) return OkStatus();
    if (owns_values) {
      return FailedPreconditionError(
          "Nothing except the root object matched a checkpointed value (checkpoint '", c.save_path,
          "'). Typically this means that the checkpoint does not match the program: it was "
          "written with another root (e.g. SaveWeights vs Checkpoint{model}) or for another "
          "program; compare `ckflow tree` of the checkpoint with your objects. The following "
          "objects have no matching checkpointed value:",
          JoinLines(unmatched));
    }
    return FailedPreconditionError(
        "Nothing to load. No dependencies have been added to the root "
        "object yet (checkpoint '",
        c.save_path, "').");
  }

  void ExpectPartial() override { coord_->expect_partial = true; }

  Status RunRestoreOps(Session& session) override {
    RestoreCoordinator& c = *coord_;
    CKFLOW_RETURN_IF_ERROR(c.saver->CheckGraphAlive());
    CKFLOW_RETURN_IF_ERROR(Problems());
    // Fewer resources than values to restore: a fresh session, whose
    // variables the restore ops create. Making room for them first spares
    // the table its rehashes as it grows (see ResourceMgr::Reserve).
    ResourceMgr& resources = session.resources();
    const auto values = static_cast<size_t>(c.restored_values);
    if (resources.size() < values) resources.Reserve(values);
    CKFLOW_RETURN_IF_ERROR(HandOverBundleReader(resources, c.reader));
    return RunTargets(session, {Feed(c.saver->restore_prefix(), Tensor::Scalar(c.save_path))},
                      c.restore_ops, c.saver->file_system());
  }

  Status InitializeOrRestore(Session& session) override {
    RestoreCoordinator& c = *coord_;
    CKFLOW_RETURN_IF_ERROR(Problems());
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
                       return object.update_uid() >= c.uid;
                     });
                   });
    CKFLOW_RETURN_IF_ERROR(restored);
    return RunTargets(session, {}, initializers);
  }

 private:
  // What matching found wrong (a missing key, a dtype or shape mismatch):
  // the first problem, and how many more.
  Status Problems() const {
    const RestoreCoordinator& c = *coord_;
    if (c.problems.empty()) return OkStatus();
    Status first = c.problems.front();
    if (c.problems.size() == 1) return first;
    return Status(first.code(), std::string(first.message()) + " (and " +
                                    std::to_string(c.problems.size() - 1) + " more problem(s))");
  }

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

class NameBasedSaverStatusImpl : public LoadStatusImpl {
 public:
  NameBasedSaverStatusImpl(std::string save_path, std::shared_ptr<const BundleReader> reader,
                           std::shared_ptr<Saver> saver, std::shared_ptr<Trackable> root)
      : save_path_(std::move(save_path)),
        reader_(std::move(reader)),
        saver_(std::move(saver)),
        root_(std::move(root)),
        uid_(NewRestoreUid()) {
    Log(LogSeverity::kWarning,
        "Restoring a name-based checkpoint ('" + save_path_ +
            "', written by a TensorFlow 1 Saver): variables are matched by their names. Save an "
            "object-based checkpoint to match by object paths.");
  }

  void MarkOptional(const Trackable* object) { optional_.insert(object); }

  LoadStatus::Kind kind() const override { return LoadStatus::Kind::kNameBasedSaver; }
  const std::string& save_path() const override { return save_path_; }

  Status AssertConsumed() override {
    if (!unused_.empty()) {
      return FailedPreconditionError("name-based checkpoint '", save_path_,
                                     "' has no value for these variables:", JoinLines(unused_));
    }
    ObjectGraph current = CurrentObjects(root_);
    std::vector<std::string> pending;
    for (const ObjectGraphNode& node : current.nodes) {
      if (node.object->update_uid() < uid_ && !optional_.count(node.object.get())) {
        pending.push_back(ObjectDescription(node));
      }
    }
    if (!pending.empty()) {
      return FailedPreconditionError(
          "name-based checkpoint '", save_path_,
          "': these objects are not restored yet (a name-based restore matches when its ops run: "
          "call RunRestoreOps or InitializeOrRestore first):",
          JoinLines(pending));
    }
    return OkStatus();
  }
  Status AssertExistingObjectsMatched() override { return AssertConsumed(); }
  Status AssertNontrivialMatch() override { return AssertConsumed(); }
  void ExpectPartial() override {}

  Status RunRestoreOps(Session& session) override {
    CKFLOW_RETURN_IF_ERROR(saver_->CheckGraphAlive());
    ObjectGraph current = CurrentObjects(root_);
    std::vector<RestoreItem> items;
    for (const ObjectGraphNode& node : current.nodes) {
      if (node.object->update_uid() >= uid_) continue;
      node.object->set_update_uid(uid_);
      for (const SaveableAttribute& attr : node.attributes) {
        const BundleEntry* entry = reader_->FindEntry(attr.full_name);
        if (entry == nullptr) {
          // save_counter and the like are optional; everything else is reported by
          // AssertConsumed, as TensorFlow records unused attributes.
          if (optional_.count(node.object.get())) {
            optional_missing_.push_back(node.object);
          } else {
            unused_.push_back(ObjectDescription(node) + ": no key '" + attr.full_name + "'");
          }
          continue;
        }
        if (entry->dtype != attr.dtype || !attr.shape.IsCompatibleWith(entry->shape)) {
          return InvalidArgumentError("name-based checkpoint '", save_path_, "': key '",
                                      attr.full_name, "' is ", StoredDataTypeName(entry->dtype),
                                      entry->shape.ToString(), " but the variable is ",
                                      DataTypeName(attr.dtype), attr.shape.ToString());
        }
        items.push_back({attr.full_name, attr, entry - reader_->entries().data()});
      }
    }
    if (!items.empty()) {
      CKFLOW_ASSIGN_OR_RETURN(std::vector<Output> ops, saver_->RestoreOps(std::move(items)));
      restore_ops_.insert(restore_ops_.end(), ops.begin(), ops.end());
    }
    CKFLOW_RETURN_IF_ERROR(HandOverBundleReader(session.resources(), reader_));
    return RunTargets(session, {Feed(saver_->restore_prefix(), Tensor::Scalar(save_path_))},
                      restore_ops_, saver_->file_system());
  }
  // TensorFlow's NameBasedSaverStatus initializes nothing, which leaves a
  // save_counter the TF1 checkpoint lacks uninitialized, and the loop's
  // next Save failing on it. (TensorFlow 2.21 fails earlier: its graph-mode
  // name-based restore asks the checkpoint for save_counter.) ckflow
  // initializes the optional values the checkpoint lacks; nothing else.
  Status InitializeOrRestore(Session& session) override {
    CKFLOW_RETURN_IF_ERROR(RunRestoreOps(session));
    std::vector<Output> initializers;
    for (const auto& object : optional_missing_) {
      if (Output init = object->initializer(); init.valid()) initializers.push_back(init);
    }
    optional_missing_.clear();
    return RunTargets(session, {}, initializers);
  }

 private:
  std::string save_path_;
  std::shared_ptr<const BundleReader> reader_;
  std::shared_ptr<Saver> saver_;
  std::shared_ptr<Trackable> root_;
  int64_t uid_;
  std::unordered_set<const Trackable*> optional_;
  // Optional objects whose values the checkpoint lacks (save_counter).
  std::vector<std::shared_ptr<Trackable>> optional_missing_;
  std::vector<std::string> unused_;
  std::vector<Output> restore_ops_;
};

// A coordinator (without its reader) for the object graph of the checkpoint
// at `path`; null if the checkpoint has none (a name-based one).
StatusOr<std::shared_ptr<RestoreCoordinator>> ReadObjectGraph(const std::string& path,
                                                              const std::shared_ptr<Saver>& saver) {
  CKFLOW_ASSIGN_OR_RETURN(std::unique_ptr<BundleReader> one,
                          BundleReader::Open(path, {.fs = saver->file_system(),
                                                    .only_key = std::string(kObjectGraphKey)}));
  if (!one->Contains(kObjectGraphKey)) return nullptr;
  CKFLOW_ASSIGN_OR_RETURN(Tensor graph_tensor, one->Lookup(kObjectGraphKey));
  if (graph_tensor.dtype() != DT_STRING || graph_tensor.NumElements() != 1) {
    return DataLossError(path, ": ", kObjectGraphKey, " is not a string scalar");
  }
  auto arena = std::make_unique<google::protobuf::Arena>();
  auto* proto =
      google::protobuf::Arena::CreateMessage<tensorflow::TrackableObjectGraph>(arena.get());
  if (!proto->ParseFromString(graph_tensor.flat<std::string>()[0])) {
    return DataLossError(path, ": ", kObjectGraphKey, " does not parse as a TrackableObjectGraph");
  }
  CKFLOW_RETURN_IF_ERROR(ValidateProto(*proto, path));
  return std::make_shared<RestoreCoordinator>(path, std::move(arena), proto, saver);
}

}  // namespace

StatusOr<LoadStatus> RestoreRoot(
    const std::shared_ptr<Trackable>& root, const std::shared_ptr<Saver>& saver,
    const std::optional<std::string>& save_path,
    const std::function<std::shared_ptr<Trackable>()>& make_save_counter,
    const RestoreOptions& options) {
  if (!save_path.has_value()) {
    auto status = std::make_shared<InitializationOnlyStatusImpl>(root);
    if (make_save_counter) make_save_counter();
    return LoadStatusImpl::Wrap(status);
  }
  // The index (every entry, for the restore ops) and the object graph (one
  // entry, for matching) are read and parsed on two threads: for thousands
  // of variables each is a large part of Restore.
  StatusOr<std::shared_ptr<const BundleReader>> reader = nullptr;
  StatusOr<std::shared_ptr<RestoreCoordinator>> coordinator = nullptr;
  ParallelInvoke(
      [&] {
        StatusOr<std::unique_ptr<BundleReader>> opened =
            BundleReader::Open(*save_path, {.fs = saver->file_system()});
        if (opened.ok()) {
          reader = std::shared_ptr<const BundleReader>(*std::move(opened));
        } else {
          reader = opened.status();
        }
      },
      [&] { coordinator = ReadObjectGraph(*save_path, saver); });
  CKFLOW_RETURN_IF_ERROR(reader.status());
  CKFLOW_RETURN_IF_ERROR(coordinator.status());
  if (*coordinator == nullptr) {
    auto status = std::make_shared<NameBasedSaverStatusImpl>(*save_path, *reader, saver, root);
    if (make_save_counter) {
      if (std::shared_ptr<Trackable> counter = make_save_counter())
        status->MarkOptional(counter.get());
    }
    return LoadStatusImpl::Wrap(status);
  }
  (*coordinator)->reader = *std::move(reader);
  if (options.skip_slot_variables) {
    (*coordinator)->skip_slot_variables = true;
    (*coordinator)->slot_restorations.clear();
  }
  CheckpointPosition(*coordinator, 0).Restore(root);
  auto status = std::make_shared<CheckpointLoadStatusImpl>(*std::move(coordinator), root);
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
Status LoadStatus::RunRestoreOps(Session& session) const { return impl_->RunRestoreOps(session); }
Status LoadStatus::InitializeOrRestore(Session& session) const {
  return impl_->InitializeOrRestore(session);
}
const std::string& LoadStatus::save_path() const { return impl_->save_path(); }

}  // namespace ckflow
