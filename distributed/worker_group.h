// WorkerGroup: the processes `mpirun` started, as a CheckpointGroup
// (checkpoint/group.h), so a Checkpoint or CheckpointManager saves and
// restores as one member of them:
//
//   CKFLOW_ASSIGN_OR_RETURN(std::unique_ptr<WorkerGroup> workers, WorkerGroup::World());
//   Checkpoint checkpoint(scope, {{"model", model}}, {.group = {.group = workers.get()}});
//   CKFLOW_ASSIGN_OR_RETURN(auto manager, CheckpointManager::Create(checkpoint, dir, {}));
//   manager->Save(*session);  // every rank, together
//
// This header does not include mpi.h, so a program that does not call MPI
// itself needs no MPI compiler flags: a group is made from MPI_COMM_WORLD
// (World) or from a communicator's Fortran handle (MPI_Comm_c2f), which is
// a plain integer in every MPI. Either way the group works on a duplicate of
// the communicator, so its collectives never mix with the program's own
// (an async save runs them on a background thread while training runs its
// MPI_Allreduce), and MPI errors on it are returned, not fatal.
//
// Errors: a collective that fails is Unavailable naming the MPI call and
// MPI's error string. A member that dies (SIGKILL) is not an error the
// others see: Open MPI's mpirun aborts the whole job, so no member hangs,
// and the previous checkpoint stays the latest (README, "Running under
// mpirun"). A member that hangs instead (a stuck disk) is what the timeout
// of each collective is for: see Meet in worker_group.cc for who gets
// which DeadlineExceeded.
//
// Thread safety: rank() and size() anywhere; the collectives from one
// thread at a time (a Checkpoint serializes its own).

#ifndef CKFLOW_DISTRIBUTED_WORKER_GROUP_H_
#define CKFLOW_DISTRIBUTED_WORKER_GROUP_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "checkpoint/group.h"

namespace ckflow {

class WorkerGroup : public CheckpointGroup {
 public:
  // Every process of the job (MPI_COMM_WORLD). Initializes MPI with
  // MPI_THREAD_MULTIPLE if the program has not (then finalizes it at exit);
  // FailedPrecondition if MPI was initialized with less, since async saves
  // call MPI from their own thread.
  static StatusOr<std::unique_ptr<WorkerGroup>> World();
  // The processes of the communicator whose Fortran handle (MPI_Comm_c2f)
  // is `comm`; MPI must be initialized.
  static StatusOr<std::unique_ptr<WorkerGroup>> FromFortranHandle(int comm);

  ~WorkerGroup() override;
  WorkerGroup(const WorkerGroup&) = delete;
  WorkerGroup& operator=(const WorkerGroup&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  StatusOr<std::vector<std::string>> AllGather(std::string_view mine,
                                               GroupTimeout timeout) override;
  // MPI_Iallreduce on a second duplicate of the communicator (so it never
  // mixes with the collectives an async save runs on its own thread);
  // FinishMax polls it with MPI_Test. A member that never starts its
  // StartMax leaves the others' FinishMax DeadlineExceeded, with the
  // request still pending (MPI cannot cancel a collective).
  Status StartMax(std::vector<int64_t> mine, GroupTimeout timeout) override;
  StatusOr<std::vector<int64_t>> FinishMax(GroupTimeout timeout) override;

  // Collective: returns once every member has called it; DeadlineExceeded
  // as AllGather.
  Status Barrier(GroupTimeout timeout = kDefaultGroupTimeout);
  // Collective: OK everywhere if `mine` is OK everywhere, else the first
  // failing rank's error on every member ("rank R of N: ...").
  Status AgreeOn(const Status& mine, GroupTimeout timeout = kDefaultGroupTimeout) {
    return AgreeOnStatus(*this, mine, timeout);
  }

 private:
  WorkerGroup(int comm, int vote_comm, int rank, int size, int tag_limit)
      : comm_(comm), vote_comm_(vote_comm), rank_(rank), size_(size), tag_limit_(tag_limit) {}
  // Returns once every member has arrived at this collective step, or
  // DeadlineExceeded (worker_group.cc).
  Status Meet(GroupTimeout timeout);

  const int comm_;       // the duplicate's Fortran handle
  const int vote_comm_;  // StartMax's duplicate
  const int rank_;
  const int size_;
  const int tag_limit_;  // MPI_TAG_UB
  int tag_ = 0;          // of the last step
  // The pending StartMax: its request's Fortran handle and its buffers,
  // which MPI reads and writes until it completes.
  std::optional<int> max_request_;
  std::vector<int64_t> max_mine_, max_result_;
};

}  // namespace ckflow

#endif  // CKFLOW_DISTRIBUTED_WORKER_GROUP_H_
