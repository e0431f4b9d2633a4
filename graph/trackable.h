// Trackable: an object in the object graph that checkpoints save.
//
// Layers, models, optimizers, variables and Checkpoint itself are Trackable.
// Each lists its named children (the edges of the object graph, in tracking
// order) and the values it owns directly (its attributes: a variable owns
// VARIABLE_VALUE). A checkpoint records that graph and matches values by
// their path in it ("model/dense/kernel"), not by variable names.
//
//   class Regress : public Model {
//    public:
//     Regress() { input_transform_ = Track("input_transform", Dense::Make(10)); }
//     ...
//   };
//
// Restore-on-create: when a restore finds a child in the checkpoint that the
// object does not have yet (a layer's weights before its first call, an
// optimizer's slot before Minimize), it leaves a DeferredRestore on the
// parent under the child's name. Track() hands the new child to it at the
// moment it appears. Slot variables are deferred on the optimizer
// (SlotOwner) by (slot name, variable) in the same way.
//
// Ownership: a parent owns its children through shared_ptr. An edge that
// would close a cycle (a child pointing back to its parent) is tracked with
// TrackReference, which does not own.
//
// Thread safety: building the object graph is single-threaded, like graph
// building.

#ifndef CKFLOW_GRAPH_TRACKABLE_H_
#define CKFLOW_GRAPH_TRACKABLE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "graph/graph.h"

namespace ckflow {

class Trackable;

// One value an object owns and a checkpoint saves: for a variable, its
// VARIABLE_VALUE. Saving reads `handle`'s value; restoring assigns to it.
struct SaveableAttribute {
  std::string name;       // "VARIABLE_VALUE"
  std::string full_name;  // the name a name-based (TF1 Saver) checkpoint uses
  Output handle;          // a DT_RESOURCE output (VarHandleOp)
  DataType dtype = DT_INVALID;
  PartialShape shape;
  // The handle's VarHandleOp's shared_name, dtype and shape are `dtype`,
  // `shape` and this, when it is set (a Variable sets it). A restore then
  // names the variable without reading the handle's node: for thousands of
  // variables, those node reads, each cold in cache, were a tenth of it.
  // Empty: read off the node.
  std::string shared_name;
  std::string device;
  // For one part of a partitioned variable: the whole variable's shape and
  // the part's place in it, as TensorFlow's shape_and_slice text
  // ("10 4 0,4:0,4", see bundle/tensor_slice.h); the value is saved as that
  // slice of the tensor under its key. Empty for a whole variable.
  std::string slice_spec;
  // The shape the checkpoint holds under the key: the whole variable's for
  // a part (from slice_spec; unknown if that does not parse), else `shape`.
  PartialShape saved_shape() const;
};

// A pending restore of a child that did not exist when the checkpoint was
// restored. Implemented by the checkpoint layer.
class DeferredRestore {
 public:
  virtual ~DeferredRestore() = default;
  // The restore this belongs to; newer restores (larger uid) win.
  virtual int64_t restore_uid() const = 0;
  // Binds `object` to the checkpoint position and creates its restore ops
  // (and those of its subtree).
  virtual void Restore(const std::shared_ptr<Trackable>& object) = 0;
};

struct TrackedChild {
  std::string name;
  std::shared_ptr<Trackable> owned;  // null for a reference
  std::weak_ptr<Trackable> reference;
  std::shared_ptr<Trackable> get() const { return owned ? owned : reference.lock(); }
};

class Trackable : public std::enable_shared_from_this<Trackable> {
 public:
  Trackable() = default;
  virtual ~Trackable();  // counts itself (TrackablesDestroyed)
  Trackable(const Trackable&) = delete;
  Trackable& operator=(const Trackable&) = delete;

  // Adds `child` under `name` and hands it to restores deferred under
  // `name`, newest first. Returns the child, typed, so a member can be set in
  // the same line.
  //
  // A name is declared once, as in TensorFlow: tracking a second object
  // under a name already taken is refused (the first child stays) and
  // recorded as this object's tracking_status(), InvalidArgument naming the
  // object and the name; tracking the same object again is a no-op. A null
  // child is refused the same way.
  template <typename T>
  std::shared_ptr<T> Track(const std::string& name, std::shared_ptr<T> child) {
    TrackImpl(name, child, /*owned=*/true, /*overwrite=*/false);
    return child;
  }
  // Like Track, without ownership: for edges that close a cycle.
  void TrackReference(const std::string& name, const std::shared_ptr<Trackable>& child) {
    TrackImpl(name, child, /*owned=*/false, /*overwrite=*/false);
  }

  // The first refused Track or TrackReference (see Track), OK if none. Layer
  // calls, Checkpoint saves and SaveWeights report it (the object graph
  // would silently miss the refused child); a program may check it at once.
  const Status& tracking_status() const { return tracking_status_; }

  // Children in tracking order (checkpoints number them in this order).
  // Subclasses may override to reorder the tracked children, not to add any.
  virtual std::vector<std::pair<std::string, std::shared_ptr<Trackable>>> Children() const;
  // Calls fn(child, owned), child a const std::shared_ptr<Trackable>&, for
  // each live child in tracking order: the objects Children() lists (which
  // may only reorder them), without copying names or owners. For walks that
  // need the set of objects, not their edges: a module of 20,000 variables
  // made Children() copy 20,000 names and shared_ptrs. An owned child's
  // pointer is this object's own, alive while it tracks the child; a
  // referenced one's is a temporary, so a walk that keeps the child beyond
  // the call holds a copy of it.
  template <typename F>
  void ForEachChild(F&& fn) const {
    for (const TrackedChild& c : children_) {
      if (c.owned) {
        fn(c.owned, true);
      } else if (std::shared_ptr<Trackable> p = c.reference.lock()) {
        fn(p, false);
      }
    }
  }
  // The child tracked under `name`, or null. Constant time: restores look up
  // every checkpointed edge. `position` is where the child is expected in
  // tracking order (a checkpoint numbers edges in that order); when the name
  // is there, the lookup reads the children in sequence instead of hashing,
  // which matters once they no longer fit in cache.
  std::shared_ptr<Trackable> LookupChild(std::string_view name,
                                         size_t position = kNoPosition) const;
  static constexpr size_t kNoPosition = static_cast<size_t>(-1);

  // Values this object owns directly. Variables return VARIABLE_VALUE.
  virtual std::vector<SaveableAttribute> Attributes() const { return {}; }
  // The op that initializes this object's values, if any (variables).
  virtual Output initializer() const { return Output(); }
  // A short description for messages ("Dense", "Variable float32[3,10]").
  virtual std::string TypeName() const { return "Trackable"; }

  // Restore bookkeeping (TensorFlow's _update_uid): the uid of the newest
  // restore that assigned this object's values; -1 if none.
  int64_t update_uid() const { return update_uid_; }
  void set_update_uid(int64_t uid) { update_uid_ = uid; }

  void AddDeferredRestore(const std::string& child_name, std::shared_ptr<DeferredRestore> restore);
  bool HasDeferredRestores() const { return !deferred_.empty(); }
  // Whether a restore waits for the child `child_name`.
  bool HasDeferredRestore(std::string_view child_name) const {
    return deferred_.find(child_name) != deferred_.end();
  }

 protected:
  // For subclasses whose children are not all Track()ed (e.g. an optimizer
  // listing its non-slot variables first).
  const std::vector<TrackedChild>& tracked_children() const { return children_; }
  // Tracks `child` under `name`, replacing the child of that name in place
  // (the order of children stays the order of first registration): Keras'
  // overwrite=True, for a subclass that deliberately reassigns a child (a
  // layer attribute set anew) or renumbers its own edges (Sequential's
  // "layer_with_weights-K").
  void TrackReplacing(const std::string& name, const std::shared_ptr<Trackable>& child) {
    TrackImpl(name, child, /*owned=*/true, /*overwrite=*/true);
  }
  // Records `error` as tracking_status() unless an earlier one is there.
  void RecordTrackingError(Status error);

 private:
  void TrackImpl(const std::string& name, const std::shared_ptr<Trackable>& child, bool owned,
                 bool overwrite);

  std::vector<TrackedChild> children_;
  // Looks names up as string_views without building a string.
  struct NameHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, size_t, NameHash, std::equal_to<>>
      child_index_;  // name -> position in children_
  std::map<std::string, std::vector<std::shared_ptr<DeferredRestore>>, std::less<>> deferred_;
  int64_t update_uid_ = -1;
  Status tracking_status_;
};

// An object that keeps slot variables per (variable, slot name): optimizers.
// Slots are not children: a checkpoint records them separately, and restores
// them when both the optimizer and the variable are bound.
class SlotOwner : public Trackable {
 public:
  // Slot names this optimizer creates, sorted ("m", "v").
  virtual std::vector<std::string> SlotNames() const = 0;
  // The slot `slot_name` of `variable`, or null if not created (yet).
  virtual std::shared_ptr<Trackable> GetSlot(const Trackable& variable,
                                             std::string_view slot_name) const = 0;

  // Whether a restore waits for the slot `slot_name` of `variable`.
  bool HasDeferredSlotRestore(const Trackable& variable, const std::string& slot_name) const {
    return deferred_slots_.count({slot_name, &variable}) != 0;
  }
  // Restores the slot now if it exists, else when it is created.
  void CreateOrRestoreSlot(const std::shared_ptr<Trackable>& variable, const std::string& slot_name,
                           std::shared_ptr<DeferredRestore> restore);

 protected:
  // Subclasses call this right after creating a slot: it runs the restores
  // waiting for it (newest first). The one place slot creation goes through.
  void OnSlotCreated(const Trackable& variable, const std::string& slot_name,
                     const std::shared_ptr<Trackable>& slot);
  // Called when a restore of the slot `slot_name` of `variable` starts to
  // wait (the slot does not exist yet): an owner whose slot of `variable`
  // is made of several variables (a partitioned variable's) notes it here,
  // to announce the whole through OnSlotCreated once its pieces exist.
  virtual void OnSlotRestoreDeferred(const std::shared_ptr<Trackable>& /*variable*/,
                                     const std::string& /*slot_name*/) {}

 private:
  // (slot name, variable) -> pending restores.
  std::map<std::pair<std::string, const Trackable*>, std::vector<std::shared_ptr<DeferredRestore>>>
      deferred_slots_;
};

}  // namespace ckflow

#endif  // CKFLOW_GRAPH_TRACKABLE_H_
