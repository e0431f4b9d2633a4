#include "graph/eager.h"

#include <span>
#include <string>
#include <utility>

#include "base/denormal_internal.h"
#include "graph/graph.h"

namespace ckflow {

EagerContext::EagerContext(FileSystem* file_system)
    : resources_(std::make_shared<ResourceMgr>()), file_system_(file_system), pinned_(kPinned) {}

Status EagerContext::Execute(Node& node) {
  // Built only for an error: eager runs one op at a time, so what each op
  // costs around its kernel is paid on every step.
  auto where = [&node] { return node.name() + " (" + node.type() + ")"; };
  const OpDef& def = node.op_def();
  if (!def.kernel_factory) return UnimplementedError(where(), ": the op has no kernel");
  std::vector<const Tensor*> inputs(node.num_inputs());
  for (int i = 0; i < node.num_inputs(); ++i) {
    const Output& in = node.input(i);
    if (!in.node()->has_values()) {
      return FailedPreconditionError(where(), ": input ", i, " (", in.name(),
                                     ") has no value: it was built without running (a "
                                     "Placeholder or a graph-mode op); eager ops take values");
    }
    inputs[i] = &in.node()->value(in.index());
  }
  StatusOr<Kernel> kernel = def.kernel_factory(node);
  if (!kernel.ok()) return kernel.status().WithContext(where());
  std::vector<Tensor> outputs(node.num_outputs());
  KernelContext ctx(node, inputs, std::span<Tensor>(outputs), *resources_, file_system_);
  {
    // Subnormals flushed to zero, as in a session and in TensorFlow.
    const internal::ScopedDenormals denormals(true);
    if (Status s = (*kernel)(ctx); !s.ok()) return s.WithContext(where());
  }
  for (int i = 0; i < node.num_outputs(); ++i) {
    if (outputs[i].dtype() != node.output_type(i)) {
      return InternalError(where(), ": output ", i, " is ", DataTypeName(outputs[i].dtype()),
                           ", but the node declares ", DataTypeName(node.output_type(i)));
    }
    node.output_shapes_[i] = PartialShape(outputs[i].shape());
  }
  node.values_ = std::move(outputs);
  if (node.transient() && !observers_.empty()) {
    std::shared_ptr<Node> shared = node.shared_from_this();
    for (EagerObserver* observer : observers_) observer->OnExecuted(shared);
  }
  // A node marked _keep_inputs keeps them for as long as it lives: a
  // sparse gradient (ops/gradients.h) is read back through its inputs.
  if (node.transient() && node.input_holds_ == 0 && !node.attrs().GetOr("_keep_inputs", false)) {
    std::vector<Output>().swap(node.inputs_);
  }
  return OkStatus();
}

void EagerContext::HoldInputs(Node& node) { ++node.input_holds_; }

void EagerContext::ReleaseInputs(Node& node) {
  if (--node.input_holds_ == 0 && !node.attrs().GetOr("_keep_inputs", false)) {
    std::vector<Output>().swap(node.inputs_);
  }
}

void EagerContext::AddObserver(EagerObserver* observer) { observers_.push_back(observer); }

void EagerContext::RemoveObserver(EagerObserver* observer) { std::erase(observers_, observer); }

void EagerContext::Pin(std::shared_ptr<Node> node) {
  pinned_[next_pin_] = std::move(node);
  next_pin_ = (next_pin_ + 1) % kPinned;
}

}  // namespace ckflow
