// The program the cross-size tests run, under mpirun or alone:
//
//   group_roundtrip save   DIR SEED [SMALL LARGE SLOTS]   as a WorkerGroup member
//                          (with the model's sizes given, no assign ops: the scale test)
//   group_roundtrip verify DIR SEED [SMALL LARGE SLOTS]   restore DIR's latest as a member
//   group_roundtrip save-plain / verify-plain ...         the same without MPI
//   group_roundtrip kill   DIR SEED                       saves ckpt-1, then rank 1
//                                                          SIGKILLs itself writing ckpt-2
//
// verify checks every value a member restored bit for bit against SEED, and
// that the members together restored every value exactly once (each its
// own), with AssertConsumed passing everywhere. Exit 0 on success; else 1
// and the error on stderr.

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "checkpoint/checkpoint_management.h"
#include "distributed/worker_group.h"
#include "tests/checkpoint/group_model.h"

namespace ckflow {
namespace {

// SIGKILLs the process when it opens a file of its part of ckpt-2.
class KillingFs : public FileSystemWrapper {
 public:
  explicit KillingFs(std::string part) : FileSystemWrapper(FileSystem::Default()), part_(part) {}
  StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    if (path.find(part_) != std::string::npos) std::raise(SIGKILL);
    return FileSystemWrapper::NewWritableFile(path);
  }

 private:
  std::string part_;
};

Status Run(int argc, char** argv) {
  if (argc < 4)
    return InvalidArgumentError("usage: group_roundtrip MODE DIR SEED [SMALL LARGE SLOTS]");
  const std::string mode = argv[1];
  const std::string dir = argv[2];
  const auto seed = static_cast<uint32_t>(std::atoi(argv[3]));
  testing::GroupModelSpec spec;
  if (argc >= 7) {
    spec.small = std::atoi(argv[4]);
    spec.large = std::atoi(argv[5]);
    spec.slots = std::atoi(argv[6]) != 0;
    // Large models (the scale test) skip the assign ops: their values are
    // the initializers', SEED's when saving, another's when restoring.
    spec.assignable = false;
    spec.init_seed = seed + (mode.starts_with("verify") ? 1 : 0);
  }
  const bool plain = mode.ends_with("-plain");
  std::unique_ptr<WorkerGroup> workers;
  CheckpointOptions options;
  if (!plain) {
    CKFLOW_ASSIGN_OR_RETURN(workers, WorkerGroup::World());
    options.group.group = workers.get();
  }
  std::unique_ptr<KillingFs> killing;
  if (mode == "kill" && workers->rank() == 1) {
    killing = std::make_unique<KillingFs>("ckpt-2_temp/part-00001-of-");
    options.file_system = killing.get();
  }
  CKFLOW_ASSIGN_OR_RETURN(std::unique_ptr<testing::GroupModel> m,
                          testing::GroupModel::Create(spec, std::move(options)));
  if (mode == "save" || mode == "save-plain" || mode == "kill") {
    CKFLOW_RETURN_IF_ERROR(m->Set(seed));
    CKFLOW_ASSIGN_OR_RETURN(std::string path, m->checkpoint().Save(dir + "/ckpt", m->session()));
    if (mode == "kill") {
      CKFLOW_RETURN_IF_ERROR(m->Set(seed + 1));
      CKFLOW_ASSIGN_OR_RETURN(path, m->checkpoint().Save(dir + "/ckpt", m->session()));
      return InternalError("rank 1 was to be killed writing its part of ", path);
    }
    if (plain || workers->rank() == 0) std::cout << "saved " << path << "\n";
    return OkStatus();
  }
  if (mode != "verify" && mode != "verify-plain") {
    return InvalidArgumentError("unknown mode '", mode, "'");
  }
  std::optional<std::string> latest = LatestCheckpoint(dir);
  if (!latest) return NotFoundError("no checkpoint in ", dir);
  CKFLOW_ASSIGN_OR_RETURN(LoadStatus status, m->checkpoint().Restore(*latest));
  CKFLOW_RETURN_IF_ERROR(status.InitializeOrRestore(m->session()));
  CKFLOW_RETURN_IF_ERROR(status.AssertConsumed());
  StatusOr<int> restored = m->CheckInitialized(seed);
  if (plain) {
    CKFLOW_RETURN_IF_ERROR(restored.status());
    if (*restored != m->num_values()) {
      return DataLossError("restored ", *restored, " of ", m->num_values(), " values");
    }
    std::cout << "verified " << *latest << ": " << *restored << " values\n";
    return OkStatus();
  }
  CKFLOW_RETURN_IF_ERROR(workers->AgreeOn(restored.status()));
  CKFLOW_ASSIGN_OR_RETURN(std::vector<std::string> counts,
                          workers->AllGather(std::to_string(*restored), kDefaultGroupTimeout));
  int total = 0;
  for (const std::string& c : counts) total += std::atoi(c.c_str());
  if (total != m->num_values()) {
    return DataLossError("the members restored ", total, " values of ", m->num_values());
  }
  if (workers->rank() == 0) {
    std::cout << "verified " << *latest << " with " << workers->size() << " ranks: " << total
              << " values\n";
  }
  return OkStatus();
}

}  // namespace
}  // namespace ckflow

int main(int argc, char** argv) {
  ckflow::Status s = ckflow::Run(argc, argv);
  if (!s.ok()) {
    std::cerr << "group_roundtrip: " << s << "\n";
    return 1;
  }
  return 0;
}
