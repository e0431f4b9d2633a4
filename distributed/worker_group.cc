#include "distributed/worker_group.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace ckflow {
namespace {

Status MpiError(int code, std::string_view call) {
  if (code == MPI_SUCCESS) return OkStatus();
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return UnavailableError(call, ": ", std::string_view(text, length));
}

void FinalizeAtExit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

using Clock = std::chrono::steady_clock;

// Meet's messages, as one byte from a member to rank 0 (and kGo back). They
// live in static storage, and their sends are freed at once: a send to a
// member that never arrives never completes, and MPI may read its buffer at
// any later time.
constexpr char kArrived = 'a';
constexpr char kWithdrawn = 'w';
constexpr char kGo = 'g';

// A send nobody waits for (MPI_Request_free lets it complete on its own);
// `bytes` must outlive it.
Status SendAndForget(const char* bytes, int length, int to, int tag, MPI_Comm comm) {
  MPI_Request request;
  CKFLOW_RETURN_IF_ERROR(
      MpiError(MPI_Isend(bytes, length, MPI_CHAR, to, tag, comm, &request), "MPI_Isend"));
  return MpiError(MPI_Request_free(&request), "MPI_Request_free");
}

// The pause between polls: short at first, since most steps meet within
// microseconds, growing to a millisecond, so that many ranks
// oversubscribed on a few cores do not spin against each other (MPI's own
// blocking calls busy-poll).
class Backoff {
 public:
  void Wait() {
    std::this_thread::sleep_for(pause_);
    pause_ = std::min(pause_ * 2, std::chrono::microseconds(1000));
  }
  void Reset() { pause_ = std::chrono::microseconds(10); }

 private:
  std::chrono::microseconds pause_{10};
};

// `timeout` on the steady clock, capped so that "forever" cannot overflow.
Clock::duration ClockDuration(GroupTimeout timeout) {
  const GroupTimeout cap = std::chrono::hours(24 * 365);
  return std::chrono::duration_cast<Clock::duration>(
      std::clamp(timeout, GroupTimeout::zero(), cap));
}

// A duplicate of `comm` that returns its errors.
Status Duplicate(MPI_Comm comm, int* handle, int* rank, int* size) {
  MPI_Comm dup;
  CKFLOW_RETURN_IF_ERROR(MpiError(MPI_Comm_dup(comm, &dup), "MPI_Comm_dup"));
  CKFLOW_RETURN_IF_ERROR(
      MpiError(MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler"));
  CKFLOW_RETURN_IF_ERROR(MpiError(MPI_Comm_rank(dup, rank), "MPI_Comm_rank"));
  CKFLOW_RETURN_IF_ERROR(MpiError(MPI_Comm_size(dup, size), "MPI_Comm_size"));
  *handle = MPI_Comm_c2f(dup);
  return OkStatus();
}

}  // namespace

StatusOr<std::unique_ptr<WorkerGroup>> WorkerGroup::World() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  int provided = 0;
  if (!initialized) {
    CKFLOW_RETURN_IF_ERROR(MpiError(
        MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread"));
    std::atexit(FinalizeAtExit);
  } else {
    MPI_Query_thread(&provided);
  }
  if (provided < MPI_THREAD_MULTIPLE) {
    return FailedPreconditionError(
        "WorkerGroup: MPI provides thread level ", provided,
        ", below MPI_THREAD_MULTIPLE (async saves call MPI from their own thread)");
  }
  return FromFortranHandle(MPI_Comm_c2f(MPI_COMM_WORLD));
}

StatusOr<std::unique_ptr<WorkerGroup>> WorkerGroup::FromFortranHandle(int comm) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) return FailedPreconditionError("WorkerGroup: MPI is not initialized");
  int handle = 0, vote_handle = 0, rank = 0, size = 0;
  CKFLOW_RETURN_IF_ERROR(Duplicate(MPI_Comm_f2c(comm), &handle, &rank, &size));
  CKFLOW_RETURN_IF_ERROR(Duplicate(MPI_Comm_f2c(comm), &vote_handle, &rank, &size));
  int* tag_limit = nullptr;
  int found = 0;
  CKFLOW_RETURN_IF_ERROR(
      MpiError(MPI_Comm_get_attr(MPI_Comm_f2c(handle), MPI_TAG_UB, &tag_limit, &found),
               "MPI_Comm_get_attr"));
  // The standard guarantees at least 32767.
  return std::unique_ptr<WorkerGroup>(
      new WorkerGroup(handle, vote_handle, rank, size, found && tag_limit ? *tag_limit : 32767));
}

WorkerGroup::~WorkerGroup() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  // A vote still pending (its FinishMax timed out) keeps its communicator:
  // freeing it under a pending collective is erroneous.
  for (int handle : {comm_, vote_comm_}) {
    if (handle == vote_comm_ && max_request_) continue;
    MPI_Comm comm = MPI_Comm_f2c(handle);
    MPI_Comm_free(&comm);
  }
}

// Every collective step starts here, since MPI's own collectives cannot
// time out and cannot be cancelled: once a member has entered MPI_Barrier
// it stays there until every other member enters it too. So the members
// first meet through point-to-point messages that can be polled and given
// up on, with rank 0 as the judge, and only a step every member has reached
// goes on to MPI's collective (which then cannot hang, short of a member
// dying, which mpirun turns into the end of the job).
//
// Each step has a tag of its own. Every other member sends rank 0 kArrived
// and polls for rank 0's verdict. Rank 0 collects arrivals until all are
// in (verdict kGo to every member) or until its deadline, `timeout` after
// it arrived (verdict: the error text, naming the members missing, sent to
// every member). One verdict, from one rank, so every member that hears it
// goes on alike, and the group stays usable.
//
// The late member: the verdict is waiting for it when it arrives, so it
// gets the same DeadlineExceeded (naming itself) at once, and the step
// fails everywhere. What it did meanwhile (a part written into the save's
// "_temp" directory, which rank 0 removed when it gave up) is debris the
// next save removes.
//
// A late rank 0: a member that has waited `timeout` sends kWithdrawn and
// keeps polling for another `timeout`. Rank 0, finding a withdrawal among
// the messages of the step, fails the step, so the verdict stays one for
// all; a member that hears nothing in 2 x `timeout` returns
// DeadlineExceeded naming rank 0. If rank 0 then arrives, it finds the
// withdrawals waiting and fails the step too: every member failed it.
//
// Messages of a failed step that arrive after it (a late arrival, a
// verdict nobody polls for) stay unreceived under their step's tag; the
// tags wrap only after MPI_TAG_UB steps (2^31 - 1 in Open MPI).
Status WorkerGroup::Meet(GroupTimeout timeout) {
  if (size_ == 1) return OkStatus();
  MPI_Comm comm = MPI_Comm_f2c(comm_);
  tag_ = tag_ >= tag_limit_ ? 0 : tag_ + 1;
  const int tag = tag_;
  const Clock::time_point deadline = Clock::now() + ClockDuration(timeout);
  char within[64];
  std::snprintf(within, sizeof(within), " within %g s", timeout.count());
  Backoff backoff;
  int flag = 0;
  MPI_Status status;
  if (rank_ != 0) {
    CKFLOW_RETURN_IF_ERROR(SendAndForget(&kArrived, 1, 0, tag, comm));
    bool withdrawn = false;
    for (;;) {
      CKFLOW_RETURN_IF_ERROR(MpiError(MPI_Iprobe(0, tag, comm, &flag, &status), "MPI_Iprobe"));
      if (flag) break;
      const Clock::time_point now = Clock::now();
      if (!withdrawn && now >= deadline) {
        CKFLOW_RETURN_IF_ERROR(SendAndForget(&kWithdrawn, 1, 0, tag, comm));
        withdrawn = true;
      }
      if (now >= deadline + ClockDuration(timeout)) {
        return DeadlineExceededError("WorkerGroup: rank 0 of ", size_,
                                     ", which judges every collective step, did not answer", within,
                                     " twice over (hung or lost)");
      }
      backoff.Wait();
    }
    int length = 0;
    CKFLOW_RETURN_IF_ERROR(MpiError(MPI_Get_count(&status, MPI_CHAR, &length), "MPI_Get_count"));
    std::string verdict(static_cast<size_t>(length), '\0');
    CKFLOW_RETURN_IF_ERROR(MpiError(
        MPI_Recv(verdict.data(), length, MPI_CHAR, 0, tag, comm, MPI_STATUS_IGNORE), "MPI_Recv"));
    if (verdict.size() == 1 && verdict[0] == kGo) return OkStatus();
    return DeadlineExceededError(verdict);
  }

  std::vector<bool> arrived(size_, false);
  arrived[0] = true;
  int count = 1;
  int withdrew = -1;
  // Takes one message of this step if there is one.
  auto take = [&]() -> StatusOr<bool> {
    CKFLOW_RETURN_IF_ERROR(
        MpiError(MPI_Iprobe(MPI_ANY_SOURCE, tag, comm, &flag, &status), "MPI_Iprobe"));
    if (!flag) return false;
    char kind = 0;
    CKFLOW_RETURN_IF_ERROR(MpiError(
        MPI_Recv(&kind, 1, MPI_CHAR, status.MPI_SOURCE, tag, comm, MPI_STATUS_IGNORE), "MPI_Recv"));
    if (kind == kWithdrawn) {
      if (withdrew < 0) withdrew = status.MPI_SOURCE;
    } else if (!arrived[status.MPI_SOURCE]) {
      arrived[status.MPI_SOURCE] = true;
      ++count;
    }
    return true;
  };
  while (count < size_ && withdrew < 0) {
    CKFLOW_ASSIGN_OR_RETURN(const bool took, take());
    if (took) {
      backoff.Reset();
      continue;
    }
    if (Clock::now() >= deadline) break;
    backoff.Wait();
  }
  // A withdrawal already here outweighs a full house: its sender may be
  // about to give up.
  for (bool took = true; took && withdrew < 0;) {
    CKFLOW_ASSIGN_OR_RETURN(took, take());
  }
  if (count == size_ && withdrew < 0) {
    for (int r = 1; r < size_; ++r) CKFLOW_RETURN_IF_ERROR(SendAndForget(&kGo, 1, r, tag, comm));
    return OkStatus();
  }
  std::string missing;
  for (int r = 1; r < size_; ++r) {
    if (arrived[r]) continue;
    missing += (missing.empty() ? "" : ", ") + std::to_string(r);
  }
  // Sent to members that may never receive it: the text must outlive the
  // sends, so it is never freed (a few bytes per failed step).
  const std::string* text = new std::string(
      missing.empty() ? "WorkerGroup: rank 0 of " + std::to_string(size_) + " arrived after rank " +
                            std::to_string(withdrew) + " had waited" + within
                      : "WorkerGroup: rank(s) " + missing + " of " + std::to_string(size_) +
                            " did not arrive at the collective step" + within);
  for (int r = 1; r < size_; ++r) {
    CKFLOW_RETURN_IF_ERROR(
        SendAndForget(text->data(), static_cast<int>(text->size()), r, tag, comm));
  }
  return DeadlineExceededError(*text);
}

Status WorkerGroup::Barrier(GroupTimeout timeout) { return Meet(timeout); }

StatusOr<std::vector<std::string>> WorkerGroup::AllGather(std::string_view mine,
                                                          GroupTimeout timeout) {
  MPI_Comm comm = MPI_Comm_f2c(comm_);
  CKFLOW_RETURN_IF_ERROR(Meet(timeout));
  // -1: over 2 GiB, which every member then fails alike.
  const int length =
      mine.size() > static_cast<size_t>(INT32_MAX) ? -1 : static_cast<int>(mine.size());
  std::vector<int> lengths(size_);
  CKFLOW_RETURN_IF_ERROR(MpiError(
      MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, comm), "MPI_Allgather"));
  std::vector<int> offsets(size_);
  int64_t total = 0;
  for (int r = 0; r < size_; ++r) {
    if (lengths[r] < 0) {
      return InvalidArgumentError("WorkerGroup::AllGather: rank ", r, " of ", size_,
                                  " gives over 2 GiB");
    }
    offsets[r] = static_cast<int>(total);
    total += lengths[r];
  }
  if (total > INT32_MAX) {
    return InvalidArgumentError("WorkerGroup::AllGather: ", total, " bytes in all is over 2 GiB");
  }
  std::string all(static_cast<size_t>(total), '\0');
  CKFLOW_RETURN_IF_ERROR(MpiError(MPI_Allgatherv(mine.data(), length, MPI_CHAR, all.data(),
                                                 lengths.data(), offsets.data(), MPI_CHAR, comm),
                                  "MPI_Allgatherv"));
  std::vector<std::string> result(size_);
  for (int r = 0; r < size_; ++r) result[r] = all.substr(offsets[r], lengths[r]);
  return result;
}

Status WorkerGroup::StartMax(std::vector<int64_t> mine, GroupTimeout) {
  if (max_request_) return FailedPreconditionError("WorkerGroup::StartMax: one is pending");
  if (mine.size() > static_cast<size_t>(INT32_MAX)) {
    return InvalidArgumentError("WorkerGroup::StartMax: ", mine.size(), " values");
  }
  max_mine_ = std::move(mine);
  max_result_.assign(max_mine_.size(), 0);
  MPI_Request request;
  CKFLOW_RETURN_IF_ERROR(MpiError(
      MPI_Iallreduce(max_mine_.data(), max_result_.data(), static_cast<int>(max_mine_.size()),
                     MPI_INT64_T, MPI_MAX, MPI_Comm_f2c(vote_comm_), &request),
      "MPI_Iallreduce"));
  max_request_ = MPI_Request_c2f(request);
  return OkStatus();
}

StatusOr<std::vector<int64_t>> WorkerGroup::FinishMax(GroupTimeout timeout) {
  if (!max_request_) return FailedPreconditionError("WorkerGroup::FinishMax: none is pending");
  MPI_Request request = MPI_Request_f2c(*max_request_);
  const Clock::time_point deadline = Clock::now() + ClockDuration(timeout);
  Backoff backoff;
  for (;;) {
    int done = 0;
    CKFLOW_RETURN_IF_ERROR(MpiError(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test"));
    if (done) break;
    if (Clock::now() >= deadline) {
      max_request_ = MPI_Request_c2f(request);
      return DeadlineExceededError("WorkerGroup::FinishMax: rank ", rank_, " of ", size_,
                                   ": the others did not all vote within ", timeout.count(), " s");
    }
    backoff.Wait();
  }
  max_request_.reset();
  return std::move(max_result_);
}

}  // namespace ckflow
