#include "distributed/worker_group.h"

#include <mpi.h>

#include <cstdint>
#include <cstdlib>

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
  int handle = 0, rank = 0, size = 0;
  CKFLOW_RETURN_IF_ERROR(Duplicate(MPI_Comm_f2c(comm), &handle, &rank, &size));
  return std::unique_ptr<WorkerGroup>(new WorkerGroup(handle, rank, size));
}

WorkerGroup::~WorkerGroup() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  MPI_Comm comm = MPI_Comm_f2c(comm_);
  MPI_Comm_free(&comm);
}

Status WorkerGroup::Barrier() { return MpiError(MPI_Barrier(MPI_Comm_f2c(comm_)), "MPI_Barrier"); }

StatusOr<std::vector<std::string>> WorkerGroup::AllGather(std::string_view mine) {
  MPI_Comm comm = MPI_Comm_f2c(comm_);
  if (mine.size() > static_cast<size_t>(INT32_MAX)) {
    return InvalidArgumentError("WorkerGroup::AllGather: ", mine.size(), " bytes is over 2 GiB");
  }
  int length = static_cast<int>(mine.size());
  std::vector<int> lengths(size_);
  CKFLOW_RETURN_IF_ERROR(MpiError(
      MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, comm), "MPI_Allgather"));
  std::vector<int> offsets(size_);
  int64_t total = 0;
  for (int r = 0; r < size_; ++r) {
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

}  // namespace ckflow
