// ExecutionPlan: one pruned subgraph of a Graph, flattened for running many
// times. Internal to the session.
//
// A plan is built once per (feeds, fetches, targets) signature by ExecutionPlan::Build
// and then only read. Every tensor a run produces or is fed lives in a
// numbered slot of a per-run array:
//
//   slot:  0 .. F-1          F .. F+k0-1        F+k0 .. ...
//          feed 0..F-1       outputs of node 0  outputs of node 1 ...
//
// A node's inputs are slot numbers, so a fed output simply reads its feed's
// slot and the fed node is not run unless something else needs it. Each node
// has a count of distinct predecessors (data and control) in the plan; a run
// starts the nodes with none and, as each node finishes, decrements its
// successors' counts. Ready nodes that ran cheaply before (the plan learns
// each node's cost from timed runs) stay on the thread that made them ready;
// expensive ones get oneTBB tasks of their own, and long ready lists are
// split into a few tasks (see Executor in executor.cc). On one thread, or
// when asked to run serially, the nodes simply run in order on the calling
// thread. A slot is cleared as soon as its last consumer has run (unless it
// is fetched), so a step does not hold every intermediate tensor until its
// end.
//
// Thread safety: a built plan is immutable but for its learned node costs
// (relaxed atomics, hints only); Run may be called from many threads at once
// (each run takes its own per-run state from a small pool).

#ifndef CKFLOW_RUNTIME_EXECUTOR_INTERNAL_H_
#define CKFLOW_RUNTIME_EXECUTOR_INTERNAL_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "base/mutex.h"
#include "base/resource.h"
#include "base/status.h"
#include "base/tensor.h"
#include "graph/graph.h"
#include "graph/op_def.h"
#include "runtime/session.h"

namespace ckflow::internal {

// One node of a plan. Ranges index the plan's flat arrays.
struct PlanNode {
  const Node* node = nullptr;
  const Kernel* kernel = nullptr;
  int32_t inputs_begin = 0;  // into ExecutionPlan::input_slots_
  int32_t num_inputs = 0;
  int32_t first_output_slot = 0;
  int32_t num_outputs = 0;
  int32_t successors_begin = 0;  // into ExecutionPlan::successors_
  int32_t num_successors = 0;
  int32_t releases_begin = 0;  // into ExecutionPlan::releases_
  int32_t num_releases = 0;
  int32_t drops_begin = 0;  // into ExecutionPlan::drops_
  int32_t num_drops = 0;
  int32_t num_predecessors = 0;  // distinct nodes that must finish first
};

// What an output slot's producer declared (dtype, and shape as far as
// known), copied out of the Node so that checking a kernel's outputs reads
// only the plan's flat arrays.
struct SlotSpec {
  DataType dtype = DT_INVALID;
  int32_t rank = -1;       // -1: any rank
  int32_t dims_begin = 0;  // into ExecutionPlan::declared_dims_; -1 entries are any size
};

struct RunState;

// The kernel of a node, created once per (session, node) by the caller.
using KernelLookup = std::function<StatusOr<const Kernel*>(const Node&)>;

class ExecutionPlan {
 public:
  // Prunes the graph to what `fetches` and `targets` need, walking data and
  // control inputs backwards and stopping at fed outputs, and builds the
  // plan. REQUIRES: every Output is valid, from one graph, with an output
  // index in range (targets may name nodes without outputs), and no output
  // is fed twice; the session checks these with messages in the user's
  // terms. Errors come from `kernel_for`. With `remap_with`, chains of ops
  // run as the fused ops of that registry (runtime/remapper_internal.h).
  static StatusOr<std::unique_ptr<ExecutionPlan>> Build(std::vector<Output> feeds,
                                                        const std::vector<Output>& fetches,
                                                        const std::vector<Output>& targets,
                                                        const KernelLookup& kernel_for,
                                                        const OpRegistry* remap_with = nullptr);
  ~ExecutionPlan();
  ExecutionPlan(const ExecutionPlan&) = delete;
  ExecutionPlan& operator=(const ExecutionPlan&) = delete;

  // Runs the plan. `feeds[i].value` is the value of the plan's i-th feed
  // (already checked against its output's dtype and shape). On success
  // `*fetched` holds the fetched tensors in order. An op's error is returned
  // as "<node> (<op type>): <message>" with the kernel's code; nothing throws.
  // Kernels see `file_system` as KernelContext::file_system() and
  // `bundle_reader` as KernelContext::bundle_reader(). `serial`
  // runs the nodes one after another on the calling thread (also done
  // whenever oneTBB allows one thread only); `intra_op_threads` > 0 limits
  // each kernel's ParallelFor to that many threads.
  Status Run(std::span<const Feed> feeds, ResourceMgr& resources, std::vector<Tensor>* fetched,
             FileSystem* file_system = nullptr, bool serial = false, int intra_op_threads = 0,
             const BundleReader* bundle_reader = nullptr) const;

  // The outputs the feeds replace, in feed order.
  const std::vector<Output>& feeds() const { return feeds_; }
  int num_nodes() const { return static_cast<int>(nodes_.size()); }
  // Fused ops standing for chains of the graph's nodes (remap_with).
  int num_fused_ops() const { return static_cast<int>(fused_nodes_.size()); }
  const std::vector<Output>& fused_nodes() const { return fused_nodes_; }

 private:
  friend class Executor;
  friend struct RunState;
  ExecutionPlan() = default;

  std::unique_ptr<RunState> AcquireState() const CKFLOW_EXCLUDES(pool_mu_);
  void ReleaseState(std::unique_ptr<RunState> state) const CKFLOW_EXCLUDES(pool_mu_);

  // Constant after construction.
  std::vector<PlanNode> nodes_;
  std::vector<int32_t> input_slots_;
  std::vector<int32_t> successors_;
  // Slots a node's run ends the use of (its distinct, unfetched,
  // non-feed input slots).
  std::vector<int32_t> releases_;
  // Distinct consumers of each slot (how many releases clear it).
  std::vector<int32_t> slot_consumers_;
  // Output slots nothing in the run reads or fetches, dropped by the
  // thread that made them as soon as their node has run.
  std::vector<int32_t> drops_;
  // Per slot (feeds' slots unused), what its producer declared.
  std::vector<SlotSpec> slot_specs_;
  std::vector<int64_t> declared_dims_;
  std::vector<int32_t> roots_;  // nodes without predecessors
  std::vector<Output> feeds_;
  std::vector<int32_t> fetch_slots_;
  int32_t num_slots_ = 0;
  // The fused nodes standing for chains of the graph's nodes, and their
  // kernels.
  std::vector<Output> fused_nodes_;
  std::vector<std::unique_ptr<Kernel>> fused_kernels_;

  // Each node's cost in ns as last learned (-1: not yet timed, taken as
  // expensive), and the number of parallel runs so far, which picks the
  // runs that time every node.
  std::unique_ptr<std::atomic<int64_t>[]> cost_ns_;
  mutable std::atomic<uint32_t> runs_{0};

  // Per-run state of finished runs, reused so a step allocates nothing but
  // tensors.
  mutable Mutex pool_mu_;
  mutable std::vector<std::unique_ptr<RunState>> pool_ CKFLOW_GUARDED_BY(pool_mu_);
};

// True if `shape` has the rank of `declared` and each dimension -1 there
// or equal: PartialShape's own check without building a PartialShape, for
// the per-run paths.
inline bool DimsAdmit(std::span<const int64_t> declared, const TensorShape& shape) {
  if (static_cast<int>(declared.size()) != shape.rank()) return false;
  for (int i = 0; i < shape.rank(); ++i) {
    if (declared[i] >= 0 && declared[i] != shape.dim(i)) return false;
  }
  return true;
}

// True if `shape` could be a value of `partial`.
inline bool ShapeAdmits(const PartialShape& partial, const TensorShape& shape) {
  return !partial.known_rank() || DimsAdmit(partial.dims(), shape);
}

}  // namespace ckflow::internal

#endif  // CKFLOW_RUNTIME_EXECUTOR_INTERNAL_H_
