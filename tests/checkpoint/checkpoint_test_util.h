// Helpers for object-based checkpoint tests: small trackable modules, a
// session per program, variable values, and a "mirror" that rebuilds the
// object structure a checkpoint describes out of plain C++ objects.

#ifndef CKFLOW_TESTS_CHECKPOINT_CHECKPOINT_TEST_UTIL_H_
#define CKFLOW_TESTS_CHECKPOINT_CHECKPOINT_TEST_UTIL_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "graph/trackable.h"
#include "ops/variables.h"
#include "runtime/session.h"
#include "tests/test_util.h"  // SameTensor
#include "workloads/model_program.h"

namespace ckflow::testing {

// The model program the benchmarks run too (workloads/model_program.h).
using workloads::ModelProgram;
using workloads::Module;

std::unique_ptr<Session> NewSession(const Scope& scope);

// A float32 variable of `shape` with values start, start+1, ...
std::shared_ptr<Variable> CountingVariable(const Scope& scope, const std::string& name,
                                           const TensorShape& shape, float start,
                                           VariableOptions options = {});

// The variable's value in `session` (empty Tensor and a test failure if the
// read fails).
Tensor ValueOf(Session& session, const Variable& variable);
// Assigns `value` to the variable in `session`.
void SetValue(Session& session, const Variable& variable, const Tensor& value);
// Runs `targets`, failing the test on error.
void RunOrFail(Session& session, const std::vector<Output>& targets);
// Every file of checkpoint `prefix` (its contents), by name without the
// prefix: ".index", ".data-00000-of-00001", ...
std::map<std::string, std::string> FilesOf(const std::string& prefix);

// An optimizer-like object built from a checkpoint: it makes the slot
// variables the checkpoint lists for it when asked.
class MirrorOptimizer : public SlotOwner {
 public:
  std::string TypeName() const override { return "MirrorOptimizer"; }
  std::vector<std::string> SlotNames() const override;
  std::shared_ptr<Trackable> GetSlot(const Trackable& variable,
                                     std::string_view slot_name) const override;
  struct PendingSlot {
    std::shared_ptr<Variable> variable;
    std::string slot_name;
    DataType dtype;
    TensorShape shape;
    std::string key;  // the slot's checkpoint key
  };
  // Creates every slot recorded in `pending` (restores fire here).
  void CreateSlots(const Scope& scope);
  std::vector<PendingSlot> pending;
  std::map<std::string, std::shared_ptr<Variable>> slot_by_key;

 private:
  std::map<std::pair<const Trackable*, std::string>, std::shared_ptr<Variable>> slots_;
};

// A user's Trackable that builds its value's attribute by hand: `variable`'s,
// changed by `edit` (a name of its own, no shared_name, ...).
class EditedAttribute final : public Trackable {
 public:
  EditedAttribute(std::shared_ptr<Variable> variable, std::function<void(SaveableAttribute&)> edit)
      : variable_(std::move(variable)), edit_(std::move(edit)) {}
  std::vector<SaveableAttribute> Attributes() const override {
    std::vector<SaveableAttribute> attributes = variable_->Attributes();
    edit_(attributes[0]);
    return attributes;
  }
  Output initializer() const override { return variable_->initializer(); }

 private:
  std::shared_ptr<Variable> variable_;
  std::function<void(SaveableAttribute&)> edit_;
};

// The C++ object structure a checkpoint's object graph describes: a Module
// per node, a Variable per VARIABLE_VALUE (dtype and shape from the bundle;
// float32 scalar where the bundle lacks the key), a MirrorOptimizer per node
// with slot variables. Shared nodes and cycles become references.
struct Mirror {
  std::shared_ptr<Trackable> root;
  std::map<std::string, std::shared_ptr<Variable>> variable_by_key;
  std::vector<std::shared_ptr<MirrorOptimizer>> optimizers;
};
StatusOr<Mirror> MirrorCheckpoint(const Scope& scope, const std::string& prefix);

}  // namespace ckflow::testing

#endif  // CKFLOW_TESTS_CHECKPOINT_CHECKPOINT_TEST_UTIL_H_
