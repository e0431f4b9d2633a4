#include <algorithm>
#include <atomic>
#include <deque>

#include "base/logging.h"
#include "base/parallel.h"
#include "bundle/bundle_format.h"
#include "checkpoint/restore_coordinator_internal.h"

namespace ckflow::internal {
namespace {

// Whether a proto node, or anything below it, holds values (TensorFlow's
// has_checkpoint_values, with its fallback for older checkpoints).
bool NodeHasValues(const StoredObjectGraph::Node& node) {
  if (std::optional<bool> has = node.has_checkpoint_values()) return *has;
  return node.children_size() > 0 || node.attributes_size() > 0 || node.slot_variables_size() > 0 ||
         node.has_registered_saver();
}

}  // namespace

int64_t NewRestoreUid() {
  static std::atomic<int64_t> next{1};
  return next.fetch_add(1);
}

RestoreCoordinator::RestoreCoordinator(std::string save_path,
                                       std::shared_ptr<const BundleReader> reader,
                                       std::unique_ptr<const StoredObjectGraph> graph,
                                       std::shared_ptr<Saver> saver, const RestoreOptions& options)
    : uid_(NewRestoreUid()),
      save_path_(std::move(save_path)),
      reader_(std::move(reader)),
      graph_(std::move(graph)),
      saver_(std::move(saver)),
      options_(options),
      object_by_proto_id_(graph_->nodes_size()),
      bound_(graph_->nodes_size(), false),
      matched_(graph_->nodes_size(), false) {
  if (options_.skip_slot_variables) return;
  // Counted, then placed: a counting sort by variable node.
  const int num_nodes = graph_->nodes_size();
  slot_begin_.assign(static_cast<size_t>(num_nodes) + 1, 0);
  for (int id = 0; id < num_nodes; ++id) {
    for (const auto& slot : graph_->nodes(id).slot_variables()) {
      ++slot_begin_[slot.original_variable_node_id() + 1];
    }
  }
  for (int id = 0; id < num_nodes; ++id) slot_begin_[id + 1] += slot_begin_[id];
  slot_restorations_.resize(static_cast<size_t>(slot_begin_[num_nodes]));
  slots_taken_.assign(static_cast<size_t>(num_nodes), false);
  std::vector<int> next(slot_begin_.begin(), slot_begin_.end() - 1);
  for (int id = 0; id < num_nodes; ++id) {
    for (const auto& slot : graph_->nodes(id).slot_variables()) {
      slot_restorations_[next[slot.original_variable_node_id()]++] = {
          id, slot.slot_variable_node_id(), slot.slot_name()};
    }
  }
}

RestoreCoordinator::~RestoreCoordinator() {
  if (expect_partial_) return;
  const std::vector<bool> skipped = SkippedSlotNodes();
  std::vector<std::string> lines;
  for (int id = 0; id < graph_->nodes_size(); ++id) {
    // The bits first: reading a node parses it, and after a full match
    // no node needs reading.
    if (!matched_[id] && !skipped[id] && graph_->nodes(id).attributes_size() > 0) {
      lines.push_back(
          "Value in checkpoint could not be found in the restored object: " + NodeName(id) +
          " (key '" + std::string(graph_->nodes(id).attributes(0).checkpoint_key()) + "')");
    }
  }
  for (const auto& [id, names] : unused_attributes_) {
    for (const std::string& name : names) {
      lines.push_back(
          "An attribute in the restored object could not be found in the checkpoint. "
          "Object: " +
          NodeName(id) + ", attribute: " + name);
    }
  }
  if (lines.empty()) return;
  std::string message = "A checkpoint status for '" + save_path_ +
                        "' is being deleted with unrestored values. If this is expected, call "
                        "ExpectPartial() on the status returned by Restore to silence this "
                        "warning; otherwise create the missing objects before running the restore "
                        "ops.";
  for (const std::string& line : lines) message += "\n  " + line;
  Log(LogSeverity::kWarning, message);
}

std::vector<bool> RestoreCoordinator::SkippedSlotNodes() const {
  std::vector<bool> skipped(graph_->nodes_size(), false);
  if (options_.skip_slot_variables) {
    for (int id = 0; id < graph_->nodes_size(); ++id) {
      for (const auto& slot : graph_->nodes(id).slot_variables()) {
        skipped[slot.slot_variable_node_id()] = true;
      }
    }
  }
  return skipped;
}

bool RestoreCoordinator::Bind(int proto_id, const std::shared_ptr<Trackable>& object) {
  matched_[proto_id] = true;
  std::shared_ptr<Trackable> current =
      bound_[proto_id] ? object_by_proto_id_[proto_id].lock() : nullptr;
  if (current == nullptr) {
    bound_[proto_id] = true;
    object_by_proto_id_[proto_id] = object;
    return true;
  }
  if (current != object) {
    Log(LogSeverity::kWarning, "Inconsistent references when restoring '" + save_path_ +
                                   "': checkpoint node " + NodeName(proto_id) +
                                   " is already bound to another object; the other reference "
                                   "is not restored from it.");
  }
  return false;
}

const std::string& RestoreCoordinator::NodeName(int proto_id) const {
  std::call_once(node_names_once_, [&] { node_names_ = CheckpointNodeNames(*graph_); });
  return node_names_[proto_id];
}

// ------------------------------------------------------------ what matched

std::vector<std::string> RestoreCoordinator::StaleObjects() const {
  std::vector<std::string> stale;
  for (size_t id = 0; id < bound_.size(); ++id) {
    if (!bound_[id]) continue;
    auto object = object_by_proto_id_[id].lock();
    if (object && object->update_uid() < uid_) {
      stale.push_back(NodeName(static_cast<int>(id)) +
                      " was matched but not assigned a value from the checkpoint");
    }
  }
  return stale;
}

std::unordered_set<const Trackable*> RestoreCoordinator::BoundObjects() const {
  std::unordered_set<const Trackable*> objects;
  for (size_t id = 0; id < bound_.size(); ++id) {
    if (!bound_[id]) continue;
    if (std::shared_ptr<Trackable> object = object_by_proto_id_[id].lock()) {
      objects.insert(object.get());
    }
  }
  return objects;
}

std::vector<std::string> RestoreCoordinator::UnresolvedValues() const {
  const std::vector<bool> skipped = SkippedSlotNodes();
  std::vector<std::string> unresolved;
  for (int id = 0; id < graph_->nodes_size(); ++id) {
    const StoredObjectGraph::Node node = graph_->nodes(id);
    if (node.attributes_size() == 0 || skipped[id]) continue;
    if (bound_[id] && !object_by_proto_id_[id].expired()) continue;
    unresolved.push_back(NodeName(id) + " (key '" +
                         std::string(node.attributes(0).checkpoint_key()) + "')");
  }
  return unresolved;
}

std::vector<std::string> RestoreCoordinator::PendingSlots() const {
  std::vector<std::string> slots;
  for (int var_id = 0; var_id + 1 < static_cast<int>(slot_begin_.size()); ++var_id) {
    if (slots_taken_[var_id]) continue;
    for (int k = slot_begin_[var_id]; k < slot_begin_[var_id + 1]; ++k) {
      const SlotRestoration& s = slot_restorations_[k];
      slots.push_back("slot '" + std::string(s.slot_name) + "' of " + NodeName(var_id) +
                      " (optimizer " + NodeName(s.optimizer_id) + ")");
    }
  }
  return slots;
}

std::vector<std::string> RestoreCoordinator::UnusedAttributes() const {
  std::vector<std::string> unused;
  for (const auto& [id, names] : unused_attributes_) {
    for (const std::string& name : names) {
      unused.push_back(NodeName(id) + " has no attribute '" + name + "'");
    }
  }
  return unused;
}

int RestoreCoordinator::NumLiveBound() const {
  int n = 0;
  for (size_t id = 0; id < bound_.size(); ++id) {
    if (bound_[id] && !object_by_proto_id_[id].expired()) ++n;
  }
  return n;
}

Status RestoreCoordinator::Problems() const {
  if (problems_.empty()) return OkStatus();
  const Status& first = problems_.front();
  if (problems_.size() == 1) return first;
  return Status(first.code(), std::string(first.message()) + " (and " +
                                  std::to_string(problems_.size() - 1) + " more problem(s))");
}

// ------------------------------------------------------------ matching

void RestoreCoordinator::AddRestoreOps(std::vector<RestoreItem> items) {
  // Each item's entry, checked against its variable: a lookup per value, so
  // thousands of them are checked in parallel; the rare problem is then
  // described in order.
  std::vector<const BundleEntry*> entries(items.size());
  std::vector<char> fits(items.size());
  ParallelFor(static_cast<int64_t>(items.size()), 2000, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      RestoreItem& item = items[i];
      entries[i] = reader_->FindEntry(item.key);
      if (entries[i] != nullptr) item.position = entries[i] - reader_->entries().data();
      fits[i] = entries[i] != nullptr &&
                CastAllowed(static_cast<DataType>(entries[i]->dtype), item.attribute.dtype,
                            options_.cast) &&
                item.attribute.saved_shape().IsCompatibleWith(entries[i]->shape);
    }
  });
  // What fits stays in place (usually all of it: nothing moves).
  size_t kept = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    RestoreItem& item = items[i];
    if (fits[i]) {
      if (kept != i) items[kept] = std::move(item);
      ++kept;
      continue;
    }
    const std::string where = "restoring " + NodeName(item.node_id) + " from '" + save_path_ + "'";
    const BundleEntry* entry = entries[i];
    if (entry == nullptr) {
      problems_.push_back(NotFoundError(where, ": the checkpoint's object graph names key '",
                                        item.key, "' but its bundle has no such tensor"));
    } else if (std::string why = CastRefusal(static_cast<DataType>(entry->dtype),
                                             item.attribute.dtype, options_.cast);
               !why.empty()) {
      problems_.push_back(InvalidArgumentError(where, ": key '", item.key, "' holds ",
                                               StoredDataTypeName(entry->dtype), " but variable '",
                                               item.attribute.full_name, "' is ",
                                               DataTypeName(item.attribute.dtype), ": ", why));
    } else {
      problems_.push_back(InvalidArgumentError(
          where, ": key '", item.key, "' has shape ", entry->shape.ToString(), " but variable '",
          item.attribute.full_name, "' has shape ", item.attribute.saved_shape().ToString()));
    }
  }
  items.resize(kept);
  if (items.empty()) return;
  restored_values_ += static_cast<int64_t>(items.size());
  StatusOr<std::vector<Output>> ops =
      saver_->RestoreOps(std::move(items), save_path_, reader_.get(), options_.cast);
  if (!ops.ok()) {
    problems_.push_back(ops.status());
    return;
  }
  restore_ops_.insert(restore_ops_.end(), ops->begin(), ops->end());
  if (run_in_ != nullptr && !ops->empty()) {
    StatusOr<std::vector<Tensor>> ran =
        run_in_->Run({Feed(saver_->restore_prefix(), Tensor::Scalar(save_path_))}, {}, *ops,
                     {.file_system = saver_->file_system(), .bundle_reader = reader_.get()});
    if (!ran.ok()) {
      problems_.push_back(
          ran.status().WithContext("restoring on creation from '" + save_path_ + "'"));
    }
  }
}

void RestoreCoordinator::RestoreFrom(int proto_id, const std::shared_ptr<Trackable>& object) {
  if (!Bind(proto_id, object)) return;
  // The walk hands its items on a batch at a time. One vector of them all
  // (over 300 bytes an item) was, past about 100,000 variables, larger than
  // the allocator keeps for reuse (glibc maps anything over 32 MiB afresh
  // and unmaps it when freed): every restore then paid a page fault per
  // 4 KiB of it. A batch is reused from the heap.
  std::vector<RestoreItem> items;
  auto start_batch = [&]() {
    items.clear();
    // From the root, nearly every node has a value: growing the vector
    // would move each item's strings about twice.
    if (proto_id == 0) {
      items.reserve(std::min(static_cast<size_t>(graph_->nodes_size()), kRestoreItemsPerBatch));
    }
  };
  start_batch();
  std::deque<std::pair<int, std::shared_ptr<Trackable>>> queue{{proto_id, object}};
  // A slot that exists joins this walk, its values this batch's restore
  // ops: restored through a walk of its own (TensorFlow's
  // CheckpointPosition.restore), each slot of an Adam model became a restore
  // op of one value, and a model with Adam restored 6x slower per value than
  // one without. A slot not created yet waits for its owner to create it.
  auto restore_slot = [&](SlotOwner& owner, const std::shared_ptr<Trackable>& variable,
                          std::string_view slot_name, int slot_id) {
    if (std::shared_ptr<Trackable> slot = owner.GetSlot(*variable, slot_name)) {
      if (Bind(slot_id, slot)) queue.emplace_back(slot_id, std::move(slot));
      return;
    }
    owner.CreateOrRestoreSlot(variable, std::string(slot_name),
                              std::make_shared<CheckpointPosition>(shared_from_this(), slot_id));
  };
  while (!queue.empty()) {
    auto [id, obj] = std::move(queue.front());
    queue.pop_front();
    // Thousands of objects lie all over the heap: ask for one a few ahead
    // (what Attributes() and LookupChild read of it) while this one is
    // matched.
    constexpr size_t kAhead = 4;
    if (queue.size() > kAhead) {
      const char* ahead = reinterpret_cast<const char*>(queue[kAhead].second.get());
      for (int line = 0; line < 4; ++line) __builtin_prefetch(ahead + 64 * line);
    }
    const StoredObjectGraph::Node node = graph_->nodes(id);

    // This object's own values, unless a newer restore already set them.
    if (uid_ > obj->update_uid()) {
      std::vector<SaveableAttribute> attributes = obj->Attributes();
      for (const auto& serialized : node.attributes()) {
        // Every match: the parts of a partitioned variable share one name,
        // each restoring its slice of the key.
        bool matched = false;
        for (SaveableAttribute& a : attributes) {
          if (a.name != serialized.name() && EscapeLocalName(a.name) != serialized.name()) continue;
          matched = true;
          // The usual single attribute is moved, not copied.
          items.push_back(RestoreItem{
              .key = std::string(serialized.checkpoint_key()),
              .attribute = node.attributes_size() == 1 && attributes.size() == 1 ? std::move(a) : a,
              .node_id = id});
        }
        if (!matched) unused_attributes_[id].emplace_back(serialized.name());
      }
      obj->set_update_uid(uid_);
      if (items.size() >= kRestoreItemsPerBatch) {
        AddRestoreOps(std::move(items));
        start_batch();
      }
    }

    for (int k = 0; k < node.children_size(); ++k) {
      const auto& child = node.children(k);
      std::shared_ptr<Trackable> local = obj->LookupChild(child.local_name(), k);
      if (local == nullptr) {
        if (NodeHasValues(graph_->nodes(child.node_id()))) {
          obj->AddDeferredRestore(
              std::string(child.local_name()),
              std::make_shared<CheckpointPosition>(shared_from_this(), child.node_id()));
        }
        continue;
      }
      if (Bind(child.node_id(), local)) queue.emplace_back(child.node_id(), local);
    }

    // This object is an optimizer whose variables were bound earlier.
    if (auto it = deferred_slot_restorations_.find(id); it != deferred_slot_restorations_.end()) {
      std::vector<DeferredSlotRestoration> pending = std::move(it->second);
      deferred_slot_restorations_.erase(it);
      if (auto* owner = dynamic_cast<SlotOwner*>(obj.get())) {
        for (const DeferredSlotRestoration& d : pending) {
          if (auto variable = d.original_variable.lock()) {
            restore_slot(*owner, variable, d.slot_name, d.slot_variable_id);
          }
        }
      }
    }
    // This object is a variable that has slots in the checkpoint.
    if (!slot_begin_.empty() && slot_begin_[id] < slot_begin_[id + 1] && !slots_taken_[id]) {
      // Taken before they run: a restore they start may walk here again.
      slots_taken_[id] = true;
      for (int k = slot_begin_[id]; k < slot_begin_[id + 1]; ++k) {
        const SlotRestoration& s = slot_restorations_[k];
        std::shared_ptr<Trackable> optimizer =
            bound_[s.optimizer_id] ? object_by_proto_id_[s.optimizer_id].lock() : nullptr;
        if (optimizer == nullptr) {
          deferred_slot_restorations_[s.optimizer_id].push_back(
              {obj, s.slot_variable_id, s.slot_name});
        } else if (auto* owner = dynamic_cast<SlotOwner*>(optimizer.get())) {
          restore_slot(*owner, obj, s.slot_name, s.slot_variable_id);
        }
      }
    }
  }
  AddRestoreOps(std::move(items));
}

}  // namespace ckflow::internal
