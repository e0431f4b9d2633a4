// The program checkpoints are tested and measured on: variables tracked by
// one Module under "model", a Checkpoint over it and a session. The tests
// grow it by hand (Add, then Finish); the benchmarks and `ckflow bench` make
// the synthetic model with Synthetic. Not installed: a fixture of this
// project's, not API.
//
// Thread safety: none; one program per thread.

#ifndef CKFLOW_WORKLOADS_MODEL_PROGRAM_H_
#define CKFLOW_WORKLOADS_MODEL_PROGRAM_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "checkpoint/checkpoint.h"
#include "graph/graph.h"
#include "graph/trackable.h"
#include "ops/optimizers.h"
#include "ops/variables.h"
#include "runtime/session.h"
#include "workloads/raw_io.h"

namespace ckflow::workloads {

// tf.Module: a trackable with nothing of its own.
class Module : public Trackable {
 public:
  std::string TypeName() const override { return "Module"; }
};

// What trains the synthetic model: nothing, or Adam, whose slots m and v
// make three variables of each of the model's (and two scalars more).
enum class SyntheticOptimizer { kNone, kAdam };

// The optimizer's name ("none", "adam"), as `ckflow bench --optimizer` takes it.
const char* OptimizerName(SyntheticOptimizer optimizer);
// The optimizer named `name`; InvalidArgument naming --optimizer for
// another name.
StatusOr<SyntheticOptimizer> OptimizerNamed(const std::string& name);
// Variables per variable of the model, its slots included (1 for kNone).
int VariablesPerModelVariable(SyntheticOptimizer optimizer);

struct ModelProgram {
  Scope scope = Scope::NewRootScope();
  std::shared_ptr<Module> model = std::make_shared<Module>();
  std::vector<std::shared_ptr<Variable>> vars;
  std::shared_ptr<Optimizer> optimizer;  // tracked as "optimizer"; null for kNone
  std::unique_ptr<Checkpoint> checkpoint;
  std::unique_ptr<Session> session;

  // Tracks `variable` under `name` and keeps it in `vars`.
  void Add(const std::string& name, std::shared_ptr<Variable> variable);

  // Makes the checkpoint and the session. With `initialize`, runs the
  // variables' initializers; without, they wait for a restore. Returns the
  // graph's build error, if any.
  Status Finish(bool initialize = true);

  // `count` float32 variables v0..v<count-1> of `elements` each, variable i
  // holding `first + i` once initialized. With `initialize` the program is
  // as one that has saved once: initialized through an empty restore, so it
  // has save_counter and a restore from its files can AssertConsumed.
  // With `layers` > 1 the variables are not the model's own children but
  // spread in order over that many modules model/layer<k>, as a deep
  // model's are. With an optimizer, every variable has its slots (made
  // by building one update of each, never run), as in a training program.
  static StatusOr<std::unique_ptr<ModelProgram>> Synthetic(
      int64_t count, int64_t elements, float first, bool initialize, int64_t layers = 1,
      SyntheticOptimizer optimizer = SyntheticOptimizer::kNone);
};

// Where a checkpoint of the model holds its variables' values (save_counter
// left out): the pieces and data files the raw read baseline reads.
struct ValueLayout {
  std::vector<Piece> pieces;
  std::vector<std::string> data_files;  // by shard id
};
StatusOr<ValueLayout> LayoutOf(const std::string& prefix);

// A program's first restore: builds the synthetic model of `count` x
// `elements` (variables not initialized, their pages never touched), then
// times Checkpoint::Restore(prefix) + LoadStatus::InitializeOrRestore (every
// CRC checked), then checks that every value of the checkpoint was taken
// and that the last variable holds what Synthetic(count, elements, 0.0f,
// ...) gave it.
struct TimedRestore {
  double seconds = 0;
  int64_t page_faults = -1;  // minor page faults taken meanwhile (MinorPageFaults)
};
StatusOr<TimedRestore> TimeRestoreIntoNewModel(
    const std::string& prefix, int64_t count, int64_t elements,
    SyntheticOptimizer optimizer = SyntheticOptimizer::kNone);

}  // namespace ckflow::workloads

#endif  // CKFLOW_WORKLOADS_MODEL_PROGRAM_H_
