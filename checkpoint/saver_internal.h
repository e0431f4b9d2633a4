// Saver: the cached save and restore ops of one checkpoint root (TensorFlow's
// TrackableSaver). A Checkpoint, a SaveWeights root and a NameBasedSaver each
// own one; every status restored through it shares it.
//
// Thread safety: one thread at a time (its owner's), except that an
// asynchronous write runs on a thread of its own, joined by
// WaitForPendingWrite or the next Write.

#ifndef CKFLOW_CHECKPOINT_SAVER_INTERNAL_H_
#define CKFLOW_CHECKPOINT_SAVER_INTERNAL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/file_system.h"
#include "base/status.h"
#include "base/tensor.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/object_graph_internal.h"
#include "graph/graph.h"
#include "runtime/session.h"

namespace ckflow::internal {

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
  // parallel), reusing ops built before for the same items. In an eager
  // scope the values are restored now from `save_path` (through the reader
  // handed over to the eager context) and no ops are returned.
  StatusOr<std::vector<Output>> RestoreOps(std::vector<RestoreItem> items,
                                           const std::string& save_path);

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
  // RestoreOps in an eager scope.
  StatusOr<std::vector<Output>> RestoreNow(std::vector<RestoreItem> items,
                                           const std::string& save_path);
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

}  // namespace ckflow::internal

#endif  // CKFLOW_CHECKPOINT_SAVER_INTERNAL_H_
