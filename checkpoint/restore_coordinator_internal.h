// Matching a checkpoint's object graph to live objects: TensorFlow's
// _CheckpointRestoreCoordinator (one per restore) and CheckpointPosition (a
// node of the checkpoint's object graph, waiting for or bound to a live
// object). The conditions follow TensorFlow's python/checkpoint/
// (restore.py, checkpoint.py), spec §5.5–5.6.
//
// The coordinator owns what one restore knows: the checkpoint (its reader
// and object graph), which nodes are bound to which objects, the restore ops
// built so far, and what did not match. The status objects ask it
// (load_status_internal.h); they never change its state but for
// ExpectPartial.
//
// Lifetimes: a status holds its coordinator and the root object; objects
// that wait for a deferred restore hold a CheckpointPosition, which holds the
// coordinator. So a coordinator lives as long as anything can still be
// restored from it, and warns about unmatched values when it dies.
//
// Thread safety: none; a restore runs on the thread that builds the graph.

#ifndef CKFLOW_CHECKPOINT_RESTORE_COORDINATOR_INTERNAL_H_
#define CKFLOW_CHECKPOINT_RESTORE_COORDINATOR_INTERNAL_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "bundle/bundle_reader.h"
#include "bundle/checkpoint_object_graph_internal.h"
#include "checkpoint/checkpoint_options.h"
#include "checkpoint/object_graph_internal.h"
#include "checkpoint/saver_internal.h"
#include "graph/trackable.h"
#include "runtime/session.h"

namespace ckflow::internal {

// A globally increasing id per restore (TensorFlow's restore_uid).
int64_t NewRestoreUid();

class RestoreCoordinator : public std::enable_shared_from_this<RestoreCoordinator> {
 public:
  // `graph` has been validated (every node id in range,
  // ParseCheckpointObjectGraph); `reader` is the same checkpoint's index.
  RestoreCoordinator(std::string save_path, std::shared_ptr<const BundleReader> reader,
                     std::unique_ptr<const StoredObjectGraph> graph, std::shared_ptr<Saver> saver,
                     const RestoreOptions& options);
  ~RestoreCoordinator();

  RestoreCoordinator(const RestoreCoordinator&) = delete;
  RestoreCoordinator& operator=(const RestoreCoordinator&) = delete;

  int64_t uid() const { return uid_; }
  const std::string& save_path() const { return save_path_; }
  const std::shared_ptr<const BundleReader>& reader() const { return reader_; }
  const std::shared_ptr<Saver>& saver() const { return saver_; }
  bool skip_slot_variables() const { return options_.skip_slot_variables; }

  // Binds node `proto_id` to `object` and walks the object's subtree breadth
  // first: values become restore ops, children not created yet and slots
  // not created yet become deferred restores that call back here.
  void RestoreFrom(int proto_id, const std::shared_ptr<Trackable>& object);

  // What the assertions check, a line per finding, nodes named by path.
  // Nodes bound to a live object that no restore of this checkpoint
  // assigned (a newer restore did, or a deferred one never ran).
  std::vector<std::string> StaleObjects() const;
  // The live objects bound to a node. Built when an assertion asks, not
  // kept up to date by binding: a hash insert per object was a cache miss
  // or two for each of the walk's objects, and only assertions need it.
  std::unordered_set<const Trackable*> BoundObjects() const;
  // Checkpointed values no live object took (slot values too, unless
  // skip_slot_variables).
  std::vector<std::string> UnresolvedValues() const;
  // Slots whose variable was never matched.
  std::vector<std::string> PendingSlots() const;
  // Checkpointed attributes a matched object does not have.
  std::vector<std::string> UnusedAttributes() const;
  // How many nodes are bound to an object still alive.
  int NumLiveBound() const;
  // What matching found wrong (a missing key, a dtype or shape mismatch):
  // the first problem, and how many more; OK if none.
  Status Problems() const;

  const std::vector<Output>& restore_ops() const { return restore_ops_; }
  int64_t restored_values() const { return restored_values_; }  // by restore_ops()
  // Silences the warning about unmatched values at destruction.
  void ExpectPartial() { expect_partial_ = true; }

  // From now on, restore ops built for objects that appear later run in
  // `session` at once, as Keras's graph-mode load_weights restores each
  // variable as it is created: its value is in place before any step reads
  // it, with no RunRestoreOps. A failure is kept for Problems(). `session`
  // must outlive the building of the objects (LoadWeights' caller's).
  void RunLaterRestoresIn(Session* session) { run_in_ = session; }

  // A node's path for messages, "(root).model.dense". The paths are built
  // on the first message: a restore that goes well prints none, and one
  // string per node was a fifth of reading a large object graph
  // (checkpoint/NOTES.md).
  const std::string& NodeName(int proto_id) const;

 private:
  struct SlotRestoration {
    int optimizer_id;
    int slot_variable_id;
    std::string_view slot_name;  // in graph_'s bytes
  };
  struct DeferredSlotRestoration {
    std::weak_ptr<Trackable> original_variable;
    int slot_variable_id;
    std::string_view slot_name;  // in graph_'s bytes
  };

  // By proto id: the checkpoint's slot nodes when skip_slot_variables (they
  // are expected to stay unmatched, as TensorFlow's assert_consumed ignores
  // them then); all false otherwise.
  std::vector<bool> SkippedSlotNodes() const;
  // Binds proto_id to object; false if it was bound already (to it or to
  // another object, which is warned about).
  bool Bind(int proto_id, const std::shared_ptr<Trackable>& object);
  // Checks `items` against the checkpoint, builds their restore ops and
  // appends them to restore_ops_; what does not fit goes to problems_.
  void AddRestoreOps(std::vector<RestoreItem> items);

  // Constant after construction.
  const int64_t uid_;
  const std::string save_path_;
  const std::shared_ptr<const BundleReader> reader_;
  const std::unique_ptr<const StoredObjectGraph> graph_;
  const std::shared_ptr<Saver> saver_;
  const RestoreOptions options_;

  // What matching has found so far.
  std::vector<std::weak_ptr<Trackable>> object_by_proto_id_;  // expired = unbound
  std::vector<bool> bound_;
  std::vector<bool> matched_;  // by proto id: ever bound to an object
  std::map<int, std::vector<std::string>> unused_attributes_;
  // The checkpoint's slots grouped by their variable's node: node id's are
  // slot_restorations_[slot_begin_[id], slot_begin_[id + 1]), until
  // slots_taken_[id]. Flat and by id, not a tree: the walk asks for every
  // node's, in about the order of ids.
  std::vector<SlotRestoration> slot_restorations_;
  std::vector<int> slot_begin_;    // empty when skip_slot_variables
  std::vector<bool> slots_taken_;  // by node id: walked, its slots restored or deferred
  std::map<int, std::vector<DeferredSlotRestoration>> deferred_slot_restorations_;  // by optimizer
  std::vector<Output> restore_ops_;
  Session* run_in_ = nullptr;  // RunLaterRestoresIn
  int64_t restored_values_ = 0;
  std::vector<Status> problems_;
  bool expect_partial_ = false;

  mutable std::once_flag node_names_once_;
  mutable std::vector<std::string> node_names_;  // set once, under node_names_once_
};

// A node of the checkpoint's object graph waiting for its object (a child
// or slot not created yet); Restore(object) binds it and walks from there.
class CheckpointPosition : public DeferredRestore {
 public:
  CheckpointPosition(std::shared_ptr<RestoreCoordinator> coordinator, int proto_id)
      : coordinator_(std::move(coordinator)), proto_id_(proto_id) {}

  int64_t restore_uid() const override { return coordinator_->uid(); }
  void Restore(const std::shared_ptr<Trackable>& object) override {
    coordinator_->RestoreFrom(proto_id_, object);
  }

 private:
  std::shared_ptr<RestoreCoordinator> coordinator_;
  int proto_id_;
};

}  // namespace ckflow::internal

#endif  // CKFLOW_CHECKPOINT_RESTORE_COORDINATOR_INTERNAL_H_
