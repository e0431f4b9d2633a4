#include "graph/trackable.h"

#include <algorithm>
#include <atomic>
#include <charconv>

#include "graph/structure_generation.h"

namespace ckflow {

PartialShape SaveableAttribute::saved_shape() const {
  if (slice_spec.empty()) return shape;
  // "d0 d1 ... spec": every space-separated word but the last is a dim.
  std::vector<int64_t> dims;
  size_t start = 0;
  for (size_t end; (end = slice_spec.find(' ', start)) != std::string::npos; start = end + 1) {
    int64_t d = -1;
    const char* first = slice_spec.data() + start;
    auto [p, ec] = std::from_chars(first, slice_spec.data() + end, d);
    if (ec != std::errc() || p != slice_spec.data() + end || d < 0) return PartialShape::Unknown();
    dims.push_back(d);
  }
  return PartialShape(dims);
}
namespace {

// Relaxed: a save reads it on the thread that built the objects (building
// the object graph is single-threaded), so only atomicity matters.
std::atomic<uint64_t> structure_generation{0};
// Not relaxed: an object may die on another thread, and a save must then
// see the count move before it trusts its cached objects.
std::atomic<uint64_t> trackables_destroyed{0};

// Newest restore first, as TensorFlow pops deferred positions.
void RunNewestFirst(std::vector<std::shared_ptr<DeferredRestore>> restores,
                    const std::shared_ptr<Trackable>& object) {
  std::stable_sort(restores.begin(), restores.end(), [](const auto& a, const auto& b) {
    return a->restore_uid() > b->restore_uid();
  });
  for (const auto& r : restores) r->Restore(object);
}

}  // namespace

uint64_t TrackableStructureGeneration() {
  return structure_generation.load(std::memory_order_relaxed);
}

void NoteTrackableStructureChanged() {
  structure_generation.fetch_add(1, std::memory_order_relaxed);
}

uint64_t TrackablesDestroyed() { return trackables_destroyed.load(std::memory_order_acquire); }

Trackable::~Trackable() { trackables_destroyed.fetch_add(1, std::memory_order_release); }

void Trackable::RecordTrackingError(Status error) {
  NoteTrackableStructureChanged();
  if (tracking_status_.ok()) tracking_status_ = std::move(error);
}

void Trackable::TrackImpl(const std::string& name, const std::shared_ptr<Trackable>& child,
                          bool owned, bool overwrite) {
  if (child == nullptr) {
    RecordTrackingError(
        InvalidArgumentError(TypeName(), ": Track('", name, "'): the object to track is null"));
    return;
  }
  TrackedChild entry{.name = name, .owned = owned ? child : nullptr, .reference = child};
  auto [it, inserted] = child_index_.emplace(name, children_.size());
  if (inserted) {
    children_.push_back(std::move(entry));
  } else if (children_[it->second].get() == child) {
    return;  // declared already; nothing can be deferred under a taken name
  } else if (overwrite || children_[it->second].get() == nullptr) {
    // An expired reference no longer declares the name.
    children_[it->second] = std::move(entry);
  } else {
    // TensorFlow's _track_trackable raises here: a second object under one
    // name would make the checkpoint key ambiguous.
    RecordTrackingError(
        InvalidArgumentError(TypeName(), ": Track('", name, "', ", child->TypeName(),
                             "): a Trackable with this name is already declared as a dependency (",
                             children_[it->second].get()->TypeName(), "); names must be unique"));
    return;
  }
  NoteTrackableStructureChanged();
  auto deferred = deferred_.find(name);
  if (deferred != deferred_.end()) {
    std::vector<std::shared_ptr<DeferredRestore>> restores = std::move(deferred->second);
    deferred_.erase(deferred);
    RunNewestFirst(std::move(restores), child);
  }
}

std::vector<std::pair<std::string, std::shared_ptr<Trackable>>> Trackable::Children() const {
  std::vector<std::pair<std::string, std::shared_ptr<Trackable>>> out;
  out.reserve(children_.size());
  for (const TrackedChild& c : children_) {
    if (auto p = c.get()) out.emplace_back(c.name, std::move(p));
  }
  return out;
}

std::shared_ptr<Trackable> Trackable::LookupChild(std::string_view name, size_t position) const {
  if (position < children_.size() && children_[position].name == name) {
    return children_[position].get();
  }
  auto it = child_index_.find(name);
  return it == child_index_.end() ? nullptr : children_[it->second].get();
}

void Trackable::AddDeferredRestore(const std::string& child_name,
                                   std::shared_ptr<DeferredRestore> restore) {
  deferred_[child_name].push_back(std::move(restore));
}

void SlotOwner::CreateOrRestoreSlot(const std::shared_ptr<Trackable>& variable,
                                    const std::string& slot_name,
                                    std::shared_ptr<DeferredRestore> restore) {
  if (std::shared_ptr<Trackable> slot = GetSlot(*variable, slot_name)) {
    restore->Restore(slot);
    return;
  }
  deferred_slots_[{slot_name, variable.get()}].push_back(std::move(restore));
  OnSlotRestoreDeferred(variable, slot_name);
}

void SlotOwner::OnSlotCreated(const Trackable& variable, const std::string& slot_name,
                              const std::shared_ptr<Trackable>& slot) {
  NoteTrackableStructureChanged();
  auto it = deferred_slots_.find({slot_name, &variable});
  if (it == deferred_slots_.end()) return;
  std::vector<std::shared_ptr<DeferredRestore>> restores = std::move(it->second);
  deferred_slots_.erase(it);
  RunNewestFirst(std::move(restores), slot);
}

}  // namespace ckflow
