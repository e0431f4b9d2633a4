// The machinery behind Checkpoint::Save/Restore and LoadStatus: TensorFlow's
// TrackableSaver (cached save and restore ops), _CheckpointRestoreCoordinator
// (one per restore) and CheckpointPosition (a node of the checkpoint's object
// graph, bound to a live object).
//
// Lifetimes: a LoadStatus holds its coordinator and the root object; objects
// that wait for a deferred restore hold a CheckpointPosition, which holds the
// coordinator. So a status outlives its Checkpoint, and a coordinator lives
// as long as anything can still be restored from it. The coordinator warns
// about unmatched values when it dies.

#ifndef CKFLOW_CHECKPOINT_RESTORE_INTERNAL_H_
#define CKFLOW_CHECKPOINT_RESTORE_INTERNAL_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "bundle/bundle_reader.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/object_graph_internal.h"
#include "graph/trackable.h"

namespace ckflow::internal {

// A globally increasing id per restore (TensorFlow's restore_uid).
int64_t NewRestoreUid();

// One value to restore: its checkpoint key and the attribute to assign.
struct RestoreItem {
  std::string key;
  SaveableAttribute attribute;
  int64_t position = -1;  // of key among the checkpoint's entries, once found
};

// What a Saver's files hold and how values are spread over them: an
// object-based checkpoint (the object graph, one SaveV2 per task, as
// TensorFlow's MultiDeviceSaver) or a TF1 Saver's name-based one (no object
// graph; with `shard_per_device`, one SaveV2 per device string, as
// tf.compat.v1.train.Saver(sharded=True) groups them).
struct SaverFormat {
  bool object_graph = true;
  bool shard_per_device = false;
};

// Cached save and restore ops of one Checkpoint (or SaveWeights root), shared
// by every status restored through it.
class Saver {
 public:
  // Builds in `scope`'s graph without keeping it alive: restore
  // coordinators hold their saver, and objects the graph owns (its
  // variables) can hold a coordinator while they wait for a deferred
  // restore, so owning the graph here would be a reference cycle.
  //
  // Every file the saver's ops and its caller touch goes through `fs`
  // (null: FileSystem::Default()), handed to the kernels with each run.
  explicit Saver(const Scope& scope, FileSystem* fs = nullptr, SaverFormat format = {})
      : graph_(scope.shared_graph()),
        scope_(scope.Unowned()),
        fs_(fs ? fs : FileSystem::Default()),
        format_(format) {}

  FileSystem* file_system() const { return fs_; }

  // FailedPrecondition once the graph is gone: a status kept past its graph
  // must not run the ops it built there, nor a deferred restore (an object
  // moved to a new graph) build more.
  Status CheckGraphAlive() const;

  // The string placeholder restore ops read the checkpoint prefix from.
  Output restore_prefix();
  // Restore ops for `items` (split into groups the session runs in
  // parallel), reusing ops built before for the same items.
  StatusOr<std::vector<Output>> RestoreOps(std::vector<RestoreItem> items);

  ~Saver();

  // Writes a checkpoint of `graph` at exactly `prefix`: one SaveV2 per data
  // file (SaveOptions::files_per_device for each device) into
  // "<prefix>_temp/part-…", then MergeV2Checkpoints; then runs
  // `on_written` (state-file updates), if set. First waits for a pending
  // asynchronous write and returns its error, if it failed.
  //
  // With options.async, returns once the values are copied into this
  // saver's snapshot buffers (reused from save to save); writing, syncing
  // and `on_written` happen on a background thread, whose status
  // WaitForPendingWrite (or the next Write) returns. `session` must outlive
  // that thread.
  Status Write(const ObjectGraph& graph, const std::string& prefix, Session& session,
               const SaveOptions& options, std::function<Status()> on_written = {});
  // InvalidArgument, naming `what`, for options no save can follow. Save
  // checks before its counter moves, Write again for every other caller.
  static Status CheckOptions(const SaveOptions& options, const std::string& what);
  // Waits for the background write, if any, and returns its status (once).
  Status WaitForPendingWrite();

  const Scope& scope() const { return scope_; }
  // For tests: how many restore ops were ever built.
  int num_restore_ops_built() const { return static_cast<int>(restore_ops_.size()); }

 private:
  struct SaveGraph {
    std::vector<Output> shard_prefixes;  // one per device group
    Output object_graph;                 // fed serialized proto
    Output merge_inputs;                 // fed list of shard prefixes
    Output merge_destination;
    Output merge;
    std::vector<Output> reads;  // every value read, once, in order of first use
  };
  // Copies the values `save` reads into snapshot_ (reusing its buffers) and
  // appends feeds that stand in for the reads.
  Status Snapshot(const SaveGraph& save, Session& session, std::vector<Feed>* feeds);
  // The cached save ops for these value groups; durable ones have SaveV2
  // sync its files (starting writeback while writing).
  StatusOr<SaveGraph*> SaveGraphFor(const ObjectGraph& graph,
                                    const std::vector<std::vector<int>>& groups, bool durable);

  const std::weak_ptr<Graph> graph_;
  const Scope scope_;  // Unowned: see the constructor
  FileSystem* const fs_;
  const SaverFormat format_;
  Output restore_prefix_;
  std::unordered_map<std::string, Output> restore_ops_;  // by item signature
  std::unordered_map<std::string, std::unique_ptr<SaveGraph>> save_graphs_;
  std::unordered_map<int, Output> reads_;  // ReadVariableOp per handle node id

  // The asynchronous write in flight; its status is set by the thread
  // before it ends and read only after join().
  std::thread pending_;
  Status pending_status_;
  std::vector<Tensor> snapshot_;  // not touched while pending_ runs
};

struct SlotRestoration {
  int optimizer_id;
  int slot_variable_id;
  std::string slot_name;
};
struct DeferredSlotRestoration {
  std::weak_ptr<Trackable> original_variable;
  int slot_variable_id;
  std::string slot_name;
};

class RestoreCoordinator : public std::enable_shared_from_this<RestoreCoordinator> {
 public:
  RestoreCoordinator(std::string save_path, std::unique_ptr<google::protobuf::Arena> arena,
                     const tensorflow::TrackableObjectGraph* proto, std::shared_ptr<Saver> saver);
  ~RestoreCoordinator();

  const int64_t uid;
  const std::string save_path;
  // The checkpoint's whole index; set once, before anything is matched
  // (it is parsed while the object graph is).
  std::shared_ptr<const BundleReader> reader;
  // The checkpoint's object graph, parsed into an arena (one allocation
  // for tens of thousands of nodes, and no per-node teardown).
  const std::unique_ptr<google::protobuf::Arena> arena;
  const tensorflow::TrackableObjectGraph& proto;
  const std::shared_ptr<Saver> saver;

  std::vector<std::weak_ptr<Trackable>> object_by_proto_id;  // expired = unbound
  std::vector<bool> bound;
  std::vector<bool> matched;  // by proto id: ever bound to an object
  std::map<int, std::vector<std::string>> unused_attributes;
  std::vector<Output> restore_ops;
  int64_t restored_values = 0;  // the values restore_ops restore
  std::map<int, std::vector<SlotRestoration>> slot_restorations;
  std::map<int, std::vector<DeferredSlotRestoration>> deferred_slot_restorations;
  // Values that cannot be restored (missing key, dtype or shape mismatch):
  // RunRestoreOps reports them.
  std::vector<Status> problems;
  bool expect_partial = false;
  // RestoreOptions::skip_slot_variables: slot_restorations stays empty, and
  // neither the checkpoint's slot nodes nor the program's slots need match.
  bool skip_slot_variables = false;

  // Binds proto_id to object; false if it was bound already (to it or to
  // another object, which is warned about).
  bool Bind(int proto_id, const std::shared_ptr<Trackable>& object);
  // The live objects bound to a node. Built when an assertion asks, not
  // kept up to date by Bind: a hash insert per object was a cache miss or
  // two for each of the walk's objects, and only assertions need the set.
  std::unordered_set<const Trackable*> BoundObjects() const;

  // A node's path for messages, "(root).model.dense". The paths are built
  // on the first message: a restore that goes well prints none, and one
  // string per node was a fifth of reading a large object graph
  // (checkpoint/NOTES.md).
  const std::string& NodeName(int proto_id) const;

  // Checks `items` against the checkpoint, builds their restore ops and
  // appends them to restore_ops.
  void AddRestoreOps(std::vector<std::pair<int, RestoreItem>> items);

 private:
  mutable std::once_flag node_names_once_;
  mutable std::vector<std::string> node_names_;  // set once, under node_names_once_
};

// A node of the checkpoint's object graph; Restore(object) binds it and walks
// the object's subtree breadth first (TensorFlow's CheckpointPosition).
class CheckpointPosition : public DeferredRestore {
 public:
  CheckpointPosition(std::shared_ptr<RestoreCoordinator> coordinator, int proto_id)
      : coordinator_(std::move(coordinator)), proto_id_(proto_id) {}

  int64_t restore_uid() const override { return coordinator_->uid; }
  void Restore(const std::shared_ptr<Trackable>& object) override;

 private:
  std::shared_ptr<RestoreCoordinator> coordinator_;
  int proto_id_;
};

// The three status kinds.
class LoadStatusImpl {
 public:
  virtual ~LoadStatusImpl() = default;
  virtual LoadStatus::Kind kind() const = 0;
  virtual Status AssertConsumed() = 0;
  virtual Status AssertExistingObjectsMatched() = 0;
  virtual Status AssertNontrivialMatch() = 0;
  virtual void ExpectPartial() = 0;
  virtual Status RunRestoreOps(Session& session) = 0;
  virtual Status InitializeOrRestore(Session& session) = 0;
  virtual const std::string& save_path() const = 0;

  static LoadStatus Wrap(std::shared_ptr<LoadStatusImpl> impl) {
    return LoadStatus(std::move(impl));
  }
};

std::shared_ptr<LoadStatusImpl> NewCheckpointLoadStatus(std::shared_ptr<RestoreCoordinator> coord,
                                                        std::shared_ptr<Trackable> root);
std::shared_ptr<LoadStatusImpl> NewInitializationOnlyStatus(std::shared_ptr<Trackable> root);

// Restores `root` from `save_path` through `saver`: the object-based path if
// the checkpoint has an object graph, else the name-based one (nullopt: an
// initialization-only status). `make_save_counter`, if set, runs after the
// status is built (as TensorFlow creates save_counter then) and returns the
// counter, which a name-based restore treats as optional.
StatusOr<LoadStatus> RestoreRoot(
    const std::shared_ptr<Trackable>& root, const std::shared_ptr<Saver>& saver,
    const std::optional<std::string>& save_path,
    const std::function<std::shared_ptr<Trackable>()>& make_save_counter,
    const RestoreOptions& options = {});

}  // namespace ckflow::internal

#endif  // CKFLOW_CHECKPOINT_RESTORE_INTERNAL_H_
