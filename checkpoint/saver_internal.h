// Saver: the cached save and restore ops of one checkpoint root (TensorFlow's
// TrackableSaver). A Checkpoint, a SaveWeights root and a NameBasedSaver each
// own one; every status restored through it shares it.
//
// This file and saver.cc are the save's layout: which values go into which
// data file, the save ops that write them (cached), and the write itself.
// Beside them: restore planning (restore_planner_internal.h), the
// asynchronous writer (async_writer_internal.h) and the collective steps of
// a group's save (group_save_internal.h).
//
// Thread safety: one thread at a time (its owner's), except that an
// asynchronous write runs on a thread of its own, joined by
// WaitForPendingWrite or the next Write.

#ifndef CKFLOW_CHECKPOINT_SAVER_INTERNAL_H_
#define CKFLOW_CHECKPOINT_SAVER_INTERNAL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/file_system.h"
#include "base/status.h"
#include "base/tensor.h"
#include "bundle/bundle_reader.h"
#include "checkpoint/async_writer_internal.h"
#include "checkpoint/checkpoint_options.h"
#include "checkpoint/group.h"
#include "checkpoint/group_internal.h"
#include "checkpoint/group_save_internal.h"
#include "checkpoint/object_graph_internal.h"
#include "checkpoint/restore_planner_internal.h"
#include "graph/graph.h"
#include "runtime/session.h"

namespace ckflow::internal {

class VariableResource;  // ops/variable_resource_internal.h

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
  // With group.group set, this process is one member of a group that
  // saves and restores together (group.h).
  explicit Saver(const Scope& scope, FileSystem* fs = nullptr, SaverFormat format = {},
                 GroupOptions group = {})
      : scope_(scope.Unowned()),
        fs_(fs ? fs : FileSystem::Default()),
        format_(format),
        group_(std::move(group)),
        owners_(group_),
        restore_(scope_, scope.shared_graph(), fs_, group_, owners_) {}

  FileSystem* file_system() const { return fs_; }
  // Null when the saver is not a member of a group.
  CheckpointGroup* group() const { return group_.group; }
  GroupTimeout group_timeout() const { return group_.timeout; }
  const GroupOptions& group_options() const { return group_; }

  // FailedPrecondition once the graph is gone: a status kept past its graph
  // must not run the ops it built there, nor a deferred restore (an object
  // moved to a new graph) build more.
  Status CheckGraphAlive() const { return restore_.CheckGraphAlive(); }

  // The string placeholder restore ops read the checkpoint prefix from.
  Output restore_prefix() { return restore_.restore_prefix(); }
  // Restore ops for `items` (split into groups the session runs in
  // parallel), reusing ops built before for the same items. In a group, for
  // the items this member owns (GroupOptions::restore_owned_only). In an
  // eager scope the values are restored now, through `reader` (the
  // restore's open reader of `save_path`; null: opened here), and no ops are
  // returned. `cast` converts a value whose dtype is not its variable's
  // (RestoreOptions::cast; the caller has checked the rule allows it).
  StatusOr<std::vector<Output>> RestoreOps(std::vector<RestoreItem> items,
                                           const std::string& save_path,
                                           const BundleReader* reader = nullptr,
                                           CastRule cast = CastRule::kNone) {
    return restore_.RestoreOps(std::move(items), save_path, reader, cast);
  }

  ~Saver();

  // Writes a checkpoint of `graph` at exactly `prefix`: one SaveV2 per data
  // file (SaveOptions::files_per_device for each device) into
  // "<prefix>_temp/part-…", then MergeV2Checkpoints; then runs
  // `on_written` (state-file updates), if set. First waits for a pending
  // asynchronous write and returns its error, if it failed.
  //
  // In a group (group.h) every member calls Write alike: each writes its
  // own part, member 0 merges them and runs `on_written` before the second
  // barrier, the others run it after (bookkeeping only: they must not touch
  // the state file).
  //
  // With options.async, returns once the values are copied into this
  // saver's snapshot buffers (reused from save to save); writing, syncing
  // and `on_written` happen on a background thread, whose status
  // WaitForPendingWrite (or the next Write) returns. `session` must outlive
  // that thread.
  //
  // REQUIRES: CheckOptions(options) is OK. Each public entry point (Save,
  // Write, a manager's Create, SaveWeights, NameBasedSaver::Save) checks
  // once, before anything changes (Save before its counter moves).
  Status Write(const ObjectGraph& graph, const std::string& prefix, Session& session,
               const SaveOptions& options, std::function<Status()> on_written = {});
  // Write of BuildObjectGraph(root), keeping what the save derives from the
  // object graph (its values, the serialized TrackableObjectGraph, the split
  // into files and the save ops) while TrackableStructureGeneration() does
  // not move and every object of it lives: a save of an unchanged model
  // builds no object graph and serializes nothing but values. Returns the
  // root's tracking_status, if not OK.
  Status WriteObjects(const std::shared_ptr<Trackable>& root, const std::string& prefix,
                      Session& session, const SaveOptions& options,
                      std::function<Status()> on_written = {});
  // InvalidArgument, naming `what`, for options no save can follow (and,
  // for a member of `group`, that a group cannot).
  static Status CheckOptions(const SaveOptions& options, const std::string& what,
                             const CheckpointGroup* group = nullptr);
  // Waits for the background write, if any, and returns its status (once).
  Status WaitForPendingWrite();

  const Scope& scope() const { return scope_; }
  // For tests: how many restore ops were ever built.
  int num_restore_ops_built() const { return restore_.num_restore_ops_built(); }

 private:
  struct SaveGraph {
    std::vector<Output> shard_prefixes;  // one per device group
    Output object_graph;                 // fed serialized proto
    Output merge_inputs;                 // fed list of shard prefixes
    Output merge_destination;
    Output merge;                // invalid for a group member's part
    std::vector<Output> shards;  // the SaveV2 or SaveVariables ops
    // Every value read, once, in order of first use: with SaveV2 (from a
    // snapshot) all of them, with SaveVariables those of handles that are
    // not a VarHandleOp's.
    std::vector<Output> reads;
    // Where a snapshot takes each read's value: for a VarHandleOp's, the
    // variable itself in the session's resources (looked up once per
    // session), for the rest the read, run. Weak, so a session's variables
    // go with it.
    struct SnapshotSources {
      // A resource of that session's own, named by the session's
      // ResourceMgr for as long as it lives (the ResourceMgr's address can
      // come back with the next session; this control block cannot while
      // it is referenced).
      std::weak_ptr<ResourceBase> token;
      std::vector<std::weak_ptr<VariableResource>> variables;  // per read
      std::vector<bool> direct;  // per read: from variables, else from runs
      std::vector<Output> runs;
      std::vector<size_t> run_at;  // the read each of runs is
    } sources;
  };
  // Every value `save` reads, without a session step for the reads of
  // VarHandleOps' variables: each sharing its variable's buffer, but a
  // large variable the loop updates by rows as a snapshot by blocks, which
  // the write reads while the loop goes on (VariableResource::
  // SnapshotByBlocksLocked), so the save copies none of it.
  static StatusOr<std::vector<Tensor>> ReadAll(SaveGraph& save, Session& session);
  // From this size on, a variable updated by rows is snapshotted by blocks:
  // a copy of it would stall the loop for milliseconds.
  static constexpr size_t kMinBlockSnapshotBytes = size_t{16} << 20;
  // What a save derives from one object graph.
  struct SavePlan {
    uint64_t generation = 0;
    const Trackable* root = nullptr;
    // Every object of the graph: one reached only through a reference
    // (TrackReference) can expire without the generation moving. None has
    // while TrackablesDestroyed() is still `destroyed`.
    std::vector<std::weak_ptr<Trackable>> objects;
    uint64_t destroyed = 0;
    std::vector<ObjectGraph::Value> values;
    Tensor object_graph;  // serialized TrackableObjectGraph (string scalar)
    // The last split of values into data files and its save ops, for the
    // options and pool size it was made under.
    struct Layout {
      uint64_t id = 0;  // unique among this saver's layouts
      int files_per_device = 0;
      bool durable = false;
      int threads = 0;
      std::vector<std::vector<int>> files;  // indices into values
      SaveGraph* save = nullptr;            // built at the first sync save
      SaveGraph* snapshot_save = nullptr;   // built at the first async save
    };
    std::optional<Layout> layout;
    // The variable behind each value, for its version (an incremental
    // save's test of change); null for a value no variable's version
    // vouches for. Looked up once per session, as SnapshotSources.
    struct VersionSources {
      std::weak_ptr<ResourceBase> token;
      std::vector<std::weak_ptr<VariableResource>> variables;
    } version_sources;
  };
  // A checkpoint this saver wrote, as an incremental save builds on it:
  // which layout, and each value's version when it was saved.
  struct SavedFiles {
    uint64_t layout_id = 0;
    std::string prefix;
    std::vector<uint64_t> versions;  // per value; 0: counts as changed
    // Each data file as written, so one replaced or rewritten since (a
    // later save under the same name, a user's copy) is not linked.
    std::vector<FileStat> data_files;
  };
  // The values' versions now (0 where none vouches).
  StatusOr<std::vector<uint64_t>> VersionsOf(SavePlan& plan, Session& session);
  // Makes `files` of plan's layout parts of the save into `prefix`
  // (<prefix>_temp/part-f-of-n) from `base`'s data files, linked, each with
  // an index of `base`'s entries for it. FailedPrecondition (naming what)
  // where `base` is no longer as it was written; then a full save follows.
  Status LinkUnchanged(const SavedFiles& base, const SavePlan& plan, const std::vector<int>& files,
                       const std::string& prefix);
  // Removes what LinkUnchanged put under `prefix`_temp (a save that does
  // not go on; the linked-from checkpoint keeps its names).
  void RemoveLinked(const std::string& prefix);
  // `prefix`'s data files as they are now, for SavedFiles::data_files.
  static StatusOr<std::vector<FileStat>> StatDataFiles(FileSystem* fs, const std::string& prefix,
                                                       int num_files);
  // The plan saving `values` (graph's own, moved out by a caller done with
  // them: a copy of every key and attribute was most of a first save's
  // memory) and, if asked, graph's serialized object graph.
  static StatusOr<SavePlan> PlanOf(const ObjectGraph& graph, std::vector<ObjectGraph::Value> values,
                                   bool object_graph);
  Status WritePlan(SavePlan& plan, const std::string& prefix, Session& session,
                   const SaveOptions& options, std::function<Status()> on_written);

  // Copies the values `save` reads into the writer's snapshot buffers (the
  // large ones updated by rows are snapshotted by blocks instead, see
  // ReadAll) and appends feeds that stand in for the reads.
  Status Snapshot(SaveGraph& save, Session& session, std::vector<Feed>* feeds);
  // The cached save ops for these value groups; durable ones sync their
  // files (starting writeback while writing). For a save from a snapshot
  // (async), SaveV2 ops whose values come from ReadVariableOps (reads), which
  // Snapshot's feeds replace; otherwise SaveVariables ops, which read the
  // variables themselves. A group member's part has no merge, and the
  // object graph only on member 0.
  StatusOr<SaveGraph*> SaveGraphFor(const std::vector<ObjectGraph::Value>& values,
                                    const std::vector<std::vector<int>>& groups, bool durable,
                                    bool from_snapshot, bool merge = true,
                                    bool object_graph = true);
  // Write for a group member (see Write): this member's part, then the
  // group's collective steps (group_save_internal.h).
  Status WriteGroup(const ObjectGraph& graph, const std::string& prefix, Session& session,
                    const SaveOptions& options, std::function<Status()> on_written);

  const Scope scope_;  // Unowned: see the constructor
  FileSystem* const fs_;
  const SaverFormat format_;
  const GroupOptions group_;
  // Who writes and reads what: placed as restore ops appear and at saves,
  // and kept, so a member saves what it restored.
  Owners owners_;
  RestorePlanner restore_;
  std::unordered_map<std::string, std::unique_ptr<SaveGraph>> save_graphs_;
  std::unordered_map<int, Output> reads_;  // ReadVariableOp per handle node id
  std::unique_ptr<SavePlan> plan_;         // of WriteObjects' last root
  uint64_t last_layout_id_ = 0;
  // The last save an incremental one can build on, and the asynchronous
  // write that becomes it if it succeeds (filled by the writer's thread,
  // read after WaitForPendingWrite joins it).
  std::optional<SavedFiles> last_saved_;
  std::shared_ptr<SavedFiles> pending_saved_;

  AsyncWriter writer_;  // last: stopped before what writes use
};

}  // namespace ckflow::internal

#endif  // CKFLOW_CHECKPOINT_SAVER_INTERNAL_H_
