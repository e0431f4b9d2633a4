// RestorePlanner: the restore ops of one checkpoint root, planned and
// cached. Values to restore are split into groups (at most 512 values or 64
// MiB each) that the session runs in parallel, one RestoreVariables op per
// group, cached by its (key, variable) list so a repeated restore adds no
// node; in an eager scope the values are read into the variables at once,
// without ops. A Saver owns one (saver_internal.h).
//
// Thread safety: one thread at a time (the owner's).

#ifndef CKFLOW_CHECKPOINT_RESTORE_PLANNER_INTERNAL_H_
#define CKFLOW_CHECKPOINT_RESTORE_PLANNER_INTERNAL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/cast.h"
#include "base/file_system.h"
#include "base/status.h"
#include "bundle/bundle_reader.h"
#include "checkpoint/group.h"
#include "checkpoint/group_internal.h"
#include "graph/graph.h"
#include "graph/trackable.h"

namespace ckflow::internal {

// Restore ops are split so the session can run them in parallel: each takes
// at most this many values (or 64 MiB; large tensors are also read in
// parallel chunks inside one op).
inline constexpr size_t kMaxValuesPerRestoreOp = 512;

// How many matched values a restore's walk gathers before it builds their
// restore ops (RestoreCoordinator::RestoreFrom): a multiple of the above, so
// small values are grouped into ops as if gathered all at once.
inline constexpr size_t kRestoreItemsPerBatch = 8 * kMaxValuesPerRestoreOp;

// One value to restore: its checkpoint key and the attribute to assign.
struct RestoreItem {
  std::string key;
  SaveableAttribute attribute;
  int64_t position = -1;  // of key among the checkpoint's entries, once found
  int node_id = -1;       // the object graph's node it came from, if any
};

// Whether `op`, a RestoreVariables op, restores exactly items [begin, end)
// under `cast`: the same keys into the same variables, in order. A cached
// op is found by a digest of its items and confirmed by this.
bool RestoreOpRestores(const Output& op, const std::vector<RestoreItem>& items, size_t begin,
                       size_t end, CastRule cast);

class RestorePlanner {
 public:
  // Builds in `scope` (Unowned: see Saver) while `graph` lives; `owners`
  // places values on a group's members (group.h), and must outlive this.
  RestorePlanner(const Scope& scope, std::weak_ptr<Graph> graph, FileSystem* fs,
                 const GroupOptions& group, Owners& owners);
  RestorePlanner(const RestorePlanner&) = delete;
  RestorePlanner& operator=(const RestorePlanner&) = delete;

  // FailedPrecondition once the graph is gone (see Saver::CheckGraphAlive).
  Status CheckGraphAlive() const;
  // The string placeholder the restore ops read the checkpoint prefix from.
  Output restore_prefix();
  // As Saver::RestoreOps.
  StatusOr<std::vector<Output>> RestoreOps(std::vector<RestoreItem> items,
                                           const std::string& save_path, const BundleReader* reader,
                                           CastRule cast);
  // For tests: how many restore ops were ever built.
  int num_restore_ops_built() const { return built_; }

 private:
  // RestoreOps in an eager scope.
  StatusOr<std::vector<Output>> RestoreNow(std::vector<RestoreItem> items,
                                           const std::string& save_path, const BundleReader* reader,
                                           CastRule cast);

  const Scope scope_;
  const std::weak_ptr<Graph> graph_;
  FileSystem* const fs_;
  const GroupOptions& group_;
  Owners& owners_;
  Output restore_prefix_;
  std::unordered_map<uint64_t, Output> restore_ops_;  // by Digest of their items
  int built_ = 0;
};

}  // namespace ckflow::internal

#endif  // CKFLOW_CHECKPOINT_RESTORE_PLANNER_INTERNAL_H_
