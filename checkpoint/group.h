// Several processes that save and restore one checkpoint together, each
// writing and reading only the values it owns. The checkpoint layer needs
// only the few collectives below, so it stays free of MPI; distributed/'s
// WorkerGroup provides them over an MPI communicator (tests also use
// threads).
//
// With CheckpointOptions::group set, every member builds the same objects
// (the same model, in the same order) and calls the same Checkpoint or
// CheckpointManager methods in the same order:
//
//   Save: member 0 removes the debris of dead saves; every member writes the
//   values placement gives it (a variable's optimizer slots go with it) with
//   SaveV2 into "<prefix>_temp/part-<rank>-of-<size>" (or, spread over
//   SaveOptions::files_per_device files as one process spreads a device's,
//   "...-of-<size>-file-<i>-of-<n>"), member 0 also the
//   object graph and save_counter; a barrier; member 0 merges the parts
//   (MergeBundles: data files renamed, never copied) and commits the state
//   file (and a CheckpointManager's retention, deleting once); a second
//   barrier. Every member returns the same path, or the same error, whose
//   message starts "rank R: " naming the first member that failed. An error
//   leaves the previous checkpoint the latest and intact.
//
//   Restore: matching (and so the LoadStatus assertions) happens on every
//   member; the restore ops read only the values the member owns (all of
//   them with restore_owned_only = false), save_counter on every member. A
//   variable a member does not own is neither read nor initialized there by
//   InitializeOrRestore. The assertions are collective: a checkpointed value
//   matched on any member counts as consumed, and a failure is the same
//   error on every member.
//
// Timeouts: a member that hangs (a stuck disk, a stalled node) must not
// hang the others. Each collective step waits GroupOptions::timeout for
// every member to arrive; past it, the members that waited return
// DeadlineExceeded naming the members that did not arrive (when the group
// knows them), and a save leaves the previous checkpoint the latest and
// intact. What the late member gets is up to the group (WorkerGroup: an
// error of its own when it arrives).
//
// The file system must be shared: a file written by one member before a
// barrier is visible to every member after it, and rename is atomic.
//
// Thread safety: the collectives of a group are called from one thread at a
// time. An async save (SaveOptions::async) runs its collectives on the
// save's background thread, so do not call a group status's assertions
// while a save is pending (Checkpoint::Sync first).

#ifndef CKFLOW_CHECKPOINT_GROUP_H_
#define CKFLOW_CHECKPOINT_GROUP_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace ckflow {

// How long a member waits at a collective step for the others.
using GroupTimeout = std::chrono::duration<double>;
inline constexpr GroupTimeout kDefaultGroupTimeout = std::chrono::minutes(10);

// The collectives a group save and restore run, from whatever starts the
// processes.
class CheckpointGroup {
 public:
  virtual ~CheckpointGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Collective (so also a barrier): every member's `mine`, in rank order.
  // DeadlineExceeded if the others have not all arrived `timeout` after
  // this member did, naming the ones missing if the group knows them. The
  // outcome must be the same on every member that arrived in time (all
  // gather, or all fail), so that they all go on alike.
  virtual StatusOr<std::vector<std::string>> AllGather(std::string_view mine,
                                                       GroupTimeout timeout) = 0;

  // Collective, split so that it need not block: the elementwise maximum
  // of every member's `mine` (all of one length). StartMax begins it and
  // FinishMax returns the result, waiting at most `timeout` for the others;
  // between the two the member goes on with its work (PreemptionHandler
  // votes this way every step). One at a time per member:
  // FailedPrecondition for a StartMax while one is pending, or a FinishMax
  // with none. A group that can run it in the background (WorkerGroup:
  // MPI_Iallreduce on a communicator of its own, so it never mixes with an
  // async save's collectives on another thread) overrides both; this
  // default runs an AllGather in StartMax, so it blocks there and follows
  // the one-thread rule above.
  virtual Status StartMax(std::vector<int64_t> mine, GroupTimeout timeout);
  virtual StatusOr<std::vector<int64_t>> FinishMax(GroupTimeout timeout);

 private:
  // The default StartMax's result, until FinishMax hands it out.
  std::optional<StatusOr<std::vector<int64_t>>> pending_max_;
};

// Collective: OK on every member if `mine` is OK on every member; else, on
// every member, the error of the lowest failing rank, with its code and its
// message led by "rank R: ".
Status AgreeOnStatus(CheckpointGroup& group, const Status& mine,
                     GroupTimeout timeout = kDefaultGroupTimeout);

// One variable as placement sees it: its object path (e.g.
// "model/dense/kernel") and its bytes with those of its optimizer slots.
struct PlacementItem {
  std::string name;
  int64_t bytes = 0;
};

// The rank of each item, for a group of `ranks`. Every member calls it with
// the same items (sorted by name) and must get the same answer, without
// talking: it must be a function of its arguments only. A rank out of range
// fails the save or restore with InvalidArgument.
using Placement =
    std::function<std::vector<int>(const std::vector<PlacementItem>& items, int ranks)>;

// The default placement: largest item first, each to the rank with the
// fewest bytes so far (ties to the lower rank).
std::vector<int> BalancedByBytes(const std::vector<PlacementItem>& items, int ranks);

// How a Checkpoint takes part in a group (CheckpointOptions::group).
struct GroupOptions {
  // Null: no group, a single-process checkpoint. Must outlive the
  // Checkpoint.
  CheckpointGroup* group = nullptr;
  Placement placement;  // null: BalancedByBytes
  // Restore reads only the member's own values. false: every member reads
  // every value (replicas, as in data-parallel training); saving still
  // writes each value once.
  bool restore_owned_only = true;
  // How long each collective step of a save or restore waits for the
  // other members (see Timeouts above).
  GroupTimeout timeout = kDefaultGroupTimeout;
};

}  // namespace ckflow

#endif  // CKFLOW_CHECKPOINT_GROUP_H_
