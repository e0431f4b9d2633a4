// A program outside the ckflow tree: only installed public headers.
#include <cstdio>
#include <string>

#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_management.h"
#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "ops/variables.h"
#include "runtime/session.h"

int main(int argc, char** argv) {
  using namespace ckflow;
  if (argc < 2) return 2;
  const std::string dir = argv[1];
  Scope scope = Scope::NewRootScope();
  auto v = Variable::Create(scope, "v", ops::Const(scope, 40.0f));
  Output plus_two = ops::Add(scope, v->value(), ops::Const(scope, 2.0f));
  Checkpoint checkpoint(scope, {{"v", v}});
  auto session = Session::Create(scope.graph());
  if (!session.ok()) return 1;
  if (!(*session)->Run({}, {}, {GlobalVariablesInitializer(scope)}).ok()) return 1;
  if (!(*session)->Run({}, {}, {v->Assign(scope, plus_two)}).ok()) return 1;
  auto path = checkpoint.Save(dir + "/ckpt", **session);
  if (!path.ok()) return 1;

  Scope scope2 = Scope::NewRootScope();
  auto w = Variable::Create(scope2, "v", ops::Const(scope2, 0.0f));
  Checkpoint checkpoint2(scope2, {{"v", w}});
  auto status = checkpoint2.Restore(LatestCheckpoint(dir));
  auto session2 = Session::Create(scope2.graph());
  if (!status.ok() || !session2.ok()) return 1;
  if (!status->InitializeOrRestore(**session2).ok()) return 1;
  auto out = (*session2)->Run({}, {w->value()});
  if (!out.ok()) return 1;
  std::printf("restored %g\n", (*out)[0].scalar<float>());
  return 0;
}
