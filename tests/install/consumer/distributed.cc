// The distributed component from outside the ckflow tree, run under
// mpirun: the ranks save one checkpoint together and each restores all of
// it. Only installed public headers, and no MPI header: worker_group.h
// needs none.
#include <cstdio>
#include <string>

#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_management.h"
#include "distributed/worker_group.h"
#include "ops/array_ops.h"
#include "ops/variables.h"
#include "runtime/session.h"

int main(int argc, char** argv) {
  using namespace ckflow;
  if (argc < 2) return 2;
  const std::string dir = argv[1];
  auto workers = WorkerGroup::World();
  if (!workers.ok()) return 1;
  GroupOptions group{.group = workers->get(), .restore_owned_only = false};

  Scope scope = Scope::NewRootScope();
  auto v = Variable::Create(scope, "v", ops::Const(scope, 42.0f));
  Checkpoint checkpoint(scope, {{"v", v}}, {.group = group});
  auto session = Session::Create(scope.graph());
  if (!session.ok()) return 1;
  if (!(*session)->Run({}, {}, {GlobalVariablesInitializer(scope)}).ok()) return 1;
  if (!checkpoint.Save(dir + "/ckpt", **session).ok()) return 1;

  Scope scope2 = Scope::NewRootScope();
  auto w = Variable::Create(scope2, "v", ops::Const(scope2, 0.0f));
  Checkpoint checkpoint2(scope2, {{"v", w}}, {.group = group});
  auto status = checkpoint2.Restore(LatestCheckpoint(dir));
  auto session2 = Session::Create(scope2.graph());
  if (!status.ok() || !session2.ok()) return 1;
  if (!status->AssertConsumed().ok()) return 1;
  if (!status->InitializeOrRestore(**session2).ok()) return 1;
  auto out = (*session2)->Run({}, {w->value()});
  if (!out.ok()) return 1;
  std::printf("rank %d of %d restored %g\n", (*workers)->rank(), (*workers)->size(),
              (*out)[0].scalar<float>());
  return 0;
}
