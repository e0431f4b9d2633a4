// A small registry of fake ops for session tests and benchmarks, so they
// test the session and not the standard kernels.
//
//   FakeOps ops;                          // owns its OpRegistry and state
//   Scope root = Scope::NewRootScope();
//   Output x = ops.Placeholder(root, DT_FLOAT, {2});
//   Output y = ops.Add(root, x, ops.Const(root, Tensor::FromVector<float>({1, 2})));
//   auto session = Session::Create(root.graph(), {.registry = &ops.registry()});
//
// The ops:
//   Const       the "value" attr
//   Placeholder fails when run: it must be fed
//   Add         float32 elementwise a + b (equal shapes)
//   NoOp        nothing
//   Split2      float32 x -> (x, -x)
//   Negate      float32 x -> -x through ForwardInputOrAllocateOutput; appends
//               "in place" to log() if it wrote into x's buffer, else
//               "new buffer"
//   Log         no outputs; appends its "tag" attr to log()
//   Fail        fails with the "code" and "message" attrs
//   Throw       throws std::runtime_error, or std::bad_alloc if "bad_alloc"
//   BadOutput   breaks its contract as "mode" says: "unset", "dtype", "shape"
//   Rendezvous  waits (bounded) until "parties" Rendezvous kernels have
//               arrived; DeadlineExceeded if they never do
//   Count       increments the session's counter resource "name"; int64 out
//   FailIfNegative  float32 x -> x; InvalidArgument if x[0] < 0
//   Hold        float32[2] out, a tensor FakeOps keeps a reference to too
//   LogHeld     no outputs; appends "dropped" to log() if nothing but
//               FakeOps holds Hold's tensor any more, else "kept"
//
// Thread safety: kernels may run concurrently; log() and the counters are
// guarded.

#ifndef CKFLOW_TESTS_RUNTIME_FAKE_OPS_H_
#define CKFLOW_TESTS_RUNTIME_FAKE_OPS_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/tensor.h"
#include "graph/graph.h"
#include "graph/op_def.h"

namespace ckflow::testing {

// The state of a Count op, kept in a session's ResourceMgr.
struct CounterResource : ResourceBase {
  std::atomic<int64_t> value{0};
};

class FakeOps {
 public:
  FakeOps();
  FakeOps(const FakeOps&) = delete;
  FakeOps& operator=(const FakeOps&) = delete;

  const OpRegistry& registry() const { return registry_; }
  // REQUIRES: `type` is one of the ops above.
  const OpDef& op(std::string_view type) const;

  // Builders; each returns output 0 (or the node for ops without outputs).
  Output Const(const Scope& s, const Tensor& value) const;
  Output Placeholder(const Scope& s, DataType dtype, PartialShape shape) const;
  Output Add(const Scope& s, Output a, Output b) const;
  Node* Split2(const Scope& s, Output x) const;
  Output Negate(const Scope& s, Output x) const;
  Output Log(const Scope& s, const std::string& tag) const;
  Output Fail(const Scope& s, StatusCode code, const std::string& message) const;
  Output Throw(const Scope& s, bool bad_alloc) const;
  Output BadOutput(const Scope& s, const std::string& mode) const;
  Output Rendezvous(const Scope& s, int parties) const;
  Output Count(const Scope& s, const std::string& name) const;
  Output FailIfNegative(const Scope& s, Output x) const;
  Output Hold(const Scope& s) const;
  Output LogHeld(const Scope& s) const;

  // Tags of the Log kernels run so far, in order.
  std::vector<std::string> log() const;
  // How often the kernel factory of `type` was called.
  int factory_calls(const std::string& type) const;

  // How long a Rendezvous waits for the others before failing.
  static constexpr std::chrono::seconds kRendezvousTimeout{20};

 private:
  void Register(OpDef def);
  Output Build(const Scope& s, std::string_view type, std::vector<Output> inputs,
               AttrMap attrs = {}) const;

  OpRegistry registry_;

  mutable std::mutex mu_;
  std::vector<std::string> log_;              // guarded by mu_
  std::map<std::string, int> factory_calls_;  // guarded by mu_
  std::condition_variable arrived_cv_;
  int arrived_ = 0;  // guarded by mu_
  const Tensor held_ = Tensor::FromVector<float>({1, 2});
};

}  // namespace ckflow::testing

#endif  // CKFLOW_TESTS_RUNTIME_FAKE_OPS_H_
