// Eager execution: the same op functions and kernels as graph building, run
// the moment they are called.
//
//   Scope scope = Scope::NewEagerScope();
//   Output y = ops::MatMul(scope, x, w->value());   // runs now
//   Tensor t = y.value();                           // [batch, units]
//   if (!scope.ok()) ... scope.status() names the op and the problem
//
// An eager Scope builds each node exactly as a graph Scope does (the op's
// shape function checks dtypes and shapes, with the same messages), then
// runs the op's kernel on its inputs' values and keeps the outputs in the
// node, where Output::value() finds them. Errors are Status values, sticky
// in the scope, as in graph mode.
//
// Nodes an eager scope builds are transient: owned by the Outputs that
// refer to them (and by the nodes that take them as inputs), not by the
// graph, so a training loop does not grow the graph and a step's tensors
// are freed once nothing refers to its outputs. They have no id, no
// reserved name and no control inputs (ops already run in program order).
// Variables are the exception: their handle nodes are permanent graph
// nodes, named as in graph mode, and their values live in the context's
// ResourceMgr, the same kind of state a Session keeps (a Session created
// with SessionOptions::resources = the context's runs graph-mode ops, such
// as a checkpoint's save ops, on the eager variables).
//
// Thread safety: one thread at a time per eager graph.

#ifndef CKFLOW_GRAPH_EAGER_H_
#define CKFLOW_GRAPH_EAGER_H_

#include <memory>
#include <vector>

#include "base/resource.h"
#include "base/status.h"

namespace ckflow {

class FileSystem;  // base/file_system.h
class Node;

// Told about every transient node an eager context runs (GradientTape
// records them).
class EagerObserver {
 public:
  virtual ~EagerObserver() = default;
  virtual void OnExecuted(const std::shared_ptr<Node>& node) = 0;
};

class EagerContext {
 public:
  // `file_system` (null: FileSystem::Default()) is what file-touching
  // kernels (RestoreVariables) use; it must outlive the context.
  explicit EagerContext(FileSystem* file_system = nullptr);
  EagerContext(const EagerContext&) = delete;
  EagerContext& operator=(const EagerContext&) = delete;

  ResourceMgr& resources() { return *resources_; }
  const std::shared_ptr<ResourceMgr>& shared_resources() const { return resources_; }
  FileSystem* file_system() const { return file_system_; }

  // Runs `node`'s kernel on the values of its inputs and keeps the outputs
  // in the node, their shapes becoming its static output shapes. Errors
  // are prefixed "<node> (<op type>): ", as a Session prefixes them;
  // FailedPrecondition names an input that has no value (a Placeholder, or
  // an op built without execution).
  Status Execute(Node& node);

  // Observers see each transient node after it ran. REQUIRES: an observer
  // is removed before it is destroyed.
  void AddObserver(EagerObserver* observer);
  void RemoveObserver(EagerObserver* observer);

  // A transient node that ran keeps its inputs (and so their values) only
  // while an observer that differentiates through it (a GradientTape) holds
  // them; once nobody does, it drops them, as a TensorFlow eager tensor does
  // not keep the ops it came from. So a kept result (a step's loss, its
  // gradients) does not keep every value it was computed from: not the
  // activations, nor the reads of variables, which an optimizer would
  // otherwise have to copy before updating them in place. Holds are counted
  // (tapes nest); HoldInputs is called from OnExecuted, before the drop.
  // A node whose attrs set "_keep_inputs" never drops them (a sparse
  // gradient's rows are its inputs).
  static void HoldInputs(Node& node);
  static void ReleaseInputs(Node& node);

  // Keeps a new transient node alive until a few more have been built: op
  // functions hold a node's raw pointer for a moment before wrapping it in
  // an Output, which then owns it. The ring is short on purpose: a pinned
  // node keeps its values, and a pinned read of a variable made the
  // optimizer copy the variable before updating it (a 64-node ring cost an
  // eager MLP step 3% in such copies).
  void Pin(std::shared_ptr<Node> node);

 private:
  static constexpr size_t kPinned = 4;

  std::shared_ptr<ResourceMgr> resources_;
  FileSystem* file_system_;
  std::vector<EagerObserver*> observers_;
  std::vector<std::shared_ptr<Node>> pinned_;  // a ring of kPinned
  size_t next_pin_ = 0;
};

}  // namespace ckflow

#endif  // CKFLOW_GRAPH_EAGER_H_
