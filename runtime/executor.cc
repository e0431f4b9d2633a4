#include <tbb/task_group.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <map>
#include <new>
#include <string>
#include <unordered_map>
#include <utility>

#include "base/tsan_internal.h"
#include "runtime/executor_internal.h"

namespace ckflow::internal {
namespace {

// Enough for every thread of a busy step loop; more idle states only hold
// memory.
constexpr size_t kMaxPooledStates = 16;

std::string NodeLabel(const Node& node) { return node.name() + " (" + node.type() + ")"; }

}  // namespace

// What one run needs besides the plan: the tensors and the countdowns. Sized
// by the plan and reused across runs of it.
struct RunState {
  explicit RunState(const ExecutionPlan& plan)
      : slots(plan.num_slots_),
        pending(new std::atomic<int32_t>[plan.nodes_.size()]),
        consumers_left(new std::atomic<int32_t>[plan.num_slots_]) {
    inputs.reserve(plan.input_slots_.size());
    for (int32_t slot : plan.input_slots_) inputs.push_back(&slots[slot]);
  }

  std::vector<Tensor> slots;
  std::vector<const Tensor*> inputs;                // inputs[k] points at slots[input_slots_[k]]
  std::unique_ptr<std::atomic<int32_t>[]> pending;  // per node
  std::unique_ptr<std::atomic<int32_t>[]> consumers_left;  // per slot
};

// ------------------------------------------------------------------ Build

StatusOr<std::unique_ptr<ExecutionPlan>> ExecutionPlan::Build(std::vector<Output> feeds,
                                                              const std::vector<Output>& fetches,
                                                              const std::vector<Output>& targets,
                                                              const KernelLookup& kernel_for) {
  auto plan = std::unique_ptr<ExecutionPlan>(new ExecutionPlan());
  std::map<std::pair<const Node*, int>, int32_t> fed;  // output -> feed slot
  for (size_t i = 0; i < feeds.size(); ++i) {
    fed.emplace(std::make_pair(feeds[i].node(), feeds[i].index()), static_cast<int32_t>(i));
  }
  auto feed_slot = [&fed](const Output& out) {
    auto it = fed.find(std::make_pair(out.node(), out.index()));
    return it == fed.end() ? -1 : it->second;
  };

  // Prune: everything the fetches and targets reach, stopping at feeds.
  std::unordered_map<const Node*, int32_t> index;
  std::vector<const Node*> order;
  std::vector<const Node*> stack;
  auto visit = [&](const Node* n) {
    if (index.emplace(n, -1).second) stack.push_back(n);
  };
  for (const Output& f : fetches) {
    if (feed_slot(f) < 0) visit(f.node());
  }
  for (const Output& t : targets) visit(t.node());
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    order.push_back(n);
    for (const Output& in : n->inputs()) {
      if (feed_slot(in) < 0) visit(in.node());
    }
    for (const Node* dep : n->control_inputs()) visit(dep);
  }
  // Ids are a topological order (a node's inputs exist before it), so roots
  // come first and runs are reproducible.
  std::sort(order.begin(), order.end(),
            [](const Node* a, const Node* b) { return a->id() < b->id(); });

  const auto num_feeds = static_cast<int32_t>(feeds.size());
  int32_t next_slot = num_feeds;
  plan->nodes_.resize(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    index[order[i]] = static_cast<int32_t>(i);
    PlanNode& pn = plan->nodes_[i];
    pn.node = order[i];
    CKFLOW_ASSIGN_OR_RETURN(pn.kernel, kernel_for(*order[i]));
    pn.first_output_slot = next_slot;
    pn.num_outputs = order[i]->num_outputs();
    next_slot += pn.num_outputs;
  }
  plan->num_slots_ = next_slot;
  auto slot_of = [&](const Output& out) {
    int32_t f = feed_slot(out);
    return f >= 0 ? f : plan->nodes_[index.at(out.node())].first_output_slot + out.index();
  };

  std::vector<bool> fetched(next_slot, false);
  for (const Output& f : fetches) {
    plan->fetch_slots_.push_back(slot_of(f));
    fetched[plan->fetch_slots_.back()] = true;
  }

  plan->slot_consumers_.assign(next_slot, 0);
  std::vector<std::vector<int32_t>> successors(order.size());
  std::vector<int32_t> scratch;
  for (size_t i = 0; i < order.size(); ++i) {
    PlanNode& pn = plan->nodes_[i];
    const Node* n = pn.node;

    pn.inputs_begin = static_cast<int32_t>(plan->input_slots_.size());
    pn.num_inputs = n->num_inputs();
    scratch.clear();
    for (const Output& in : n->inputs()) {
      int32_t slot = slot_of(in);
      plan->input_slots_.push_back(slot);
      if (slot >= num_feeds && !fetched[slot]) scratch.push_back(slot);
    }
    std::sort(scratch.begin(), scratch.end());
    scratch.erase(std::unique(scratch.begin(), scratch.end()), scratch.end());
    pn.releases_begin = static_cast<int32_t>(plan->releases_.size());
    pn.num_releases = static_cast<int32_t>(scratch.size());
    for (int32_t slot : scratch) {
      plan->releases_.push_back(slot);
      ++plan->slot_consumers_[slot];
    }

    scratch.clear();
    for (const Output& in : n->inputs()) {
      if (feed_slot(in) < 0) scratch.push_back(index.at(in.node()));
    }
    for (const Node* dep : n->control_inputs()) scratch.push_back(index.at(dep));
    std::sort(scratch.begin(), scratch.end());
    scratch.erase(std::unique(scratch.begin(), scratch.end()), scratch.end());
    pn.num_predecessors = static_cast<int32_t>(scratch.size());
    for (int32_t pred : scratch) successors[pred].push_back(static_cast<int32_t>(i));
    if (pn.num_predecessors == 0) plan->roots_.push_back(static_cast<int32_t>(i));
  }
  for (size_t i = 0; i < order.size(); ++i) {
    PlanNode& pn = plan->nodes_[i];
    pn.successors_begin = static_cast<int32_t>(plan->successors_.size());
    pn.num_successors = static_cast<int32_t>(successors[i].size());
    plan->successors_.insert(plan->successors_.end(), successors[i].begin(), successors[i].end());
  }
  plan->feeds_ = std::move(feeds);
  return plan;
}

ExecutionPlan::~ExecutionPlan() = default;

std::unique_ptr<RunState> ExecutionPlan::AcquireState() const {
  {
    std::lock_guard<std::mutex> lock(pool_mu_);
    if (!pool_.empty()) {
      std::unique_ptr<RunState> state = std::move(pool_.back());
      pool_.pop_back();
      return state;
    }
  }
  return std::make_unique<RunState>(*this);
}

void ExecutionPlan::ReleaseState(std::unique_ptr<RunState> state) const {
  std::lock_guard<std::mutex> lock(pool_mu_);
  if (pool_.size() < kMaxPooledStates) pool_.push_back(std::move(state));
}

// ---------------------------------------------------------------- Execute

class Executor;

// The oneTBB task for one ready node. Its move constructor records where it
// ends up (inside oneTBB's task object), so the spawner can state the
// spawn-before-run edge on that address for TSan once the task is built.
class NodeTask {
 public:
  NodeTask(Executor* executor, int32_t id, const void** built_at)
      : executor_(executor), id_(id), built_at_(built_at) {}
  NodeTask(NodeTask&& other) noexcept
      : executor_(other.executor_), id_(other.id_), built_at_(other.built_at_) {
    *built_at_ = this;
  }
  NodeTask(const NodeTask&) = delete;
  NodeTask& operator=(const NodeTask&) = delete;
  NodeTask& operator=(NodeTask&&) = delete;

  inline void operator()() const;

 private:
  Executor* executor_;
  int32_t id_;
  const void** built_at_;  // the spawner's; valid only while it spawns
};

// Runs one plan once over one RunState. Lives on Run's stack; its tasks end
// before Run returns.
class Executor {
 public:
  Executor(const ExecutionPlan& plan, RunState& state, ResourceMgr& resources,
           FileSystem* file_system, tbb::task_group& group)
      : plan_(plan),
        state_(state),
        resources_(resources),
        file_system_(file_system),
        group_(group) {}

  // Runs `id`, then keeps running one successor it made ready in this same
  // task and spawns the others. Never throws.
  void RunFrom(int32_t id) {
    for (;;) {
      if (failed_.load(std::memory_order_relaxed)) return;
      const PlanNode& pn = plan_.nodes_[id];
      if (Status s = RunNode(pn); !s.ok()) {
        Fail(std::move(s));
        return;
      }
      ReleaseInputs(pn);
      int32_t next = -1;
      const int32_t* succ = plan_.successors_.data() + pn.successors_begin;
      for (int32_t k = 0; k < pn.num_successors; ++k) {
        // acq_rel: the last producer's decrement publishes every producer's
        // outputs to whoever runs the successor.
        if (state_.pending[succ[k]].fetch_sub(1, std::memory_order_acq_rel) != 1) continue;
        if (next < 0) {
          next = succ[k];
        } else {
          Spawn(succ[k]);
        }
      }
      if (next < 0) return;
      id = next;
    }
  }

  void Spawn(int32_t id) {
    try {
      const void* built_at = nullptr;
      tbb::task_handle task = group_.defer(NodeTask(this, id, &built_at));
      TsanRelease(built_at);
      group_.run(std::move(task));
    } catch (const std::bad_alloc&) {
      Fail(ResourceExhaustedError(NodeLabel(*plan_.nodes_[id].node),
                                  ": out of memory scheduling the node"));
    }
  }

  void Fail(Status error) {
    std::lock_guard<std::mutex> lock(mu_);
    if (error_.ok()) error_ = std::move(error);
    failed_.store(true, std::memory_order_relaxed);
  }

  Status TakeError() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::move(error_);
  }

  // A spawned task's body, and its end-before-wait-returns edge for TSan.
  void RunTask(int32_t id) {
    RunFrom(id);
    TsanRelease(this);
  }
  // Called once task_group::wait has returned.
  void Joined() { TsanAcquire(this); }

 private:
  Status RunNode(const PlanNode& pn) {
    std::span<Tensor> outputs(state_.slots.data() + pn.first_output_slot, pn.num_outputs);
    KernelContext ctx(
        *pn.node,
        std::span<const Tensor* const>(state_.inputs.data() + pn.inputs_begin, pn.num_inputs),
        outputs, resources_, file_system_);
    Status s;
    // The kernel boundary: whatever a kernel throws becomes a Status.
    try {
      s = (*pn.kernel)(ctx);
    } catch (const std::bad_alloc&) {
      s = ResourceExhaustedError("out of memory");
    } catch (const std::exception& e) {
      s = InternalError("kernel threw: ", e.what());
    } catch (...) {
      s = InternalError("kernel threw a non-standard exception");
    }
    if (!s.ok()) return s.WithContext(NodeLabel(*pn.node));
    return CheckOutputs(*pn.node, outputs);
  }

  // A kernel that breaks its op's contract is a bug in ckflow or in a user's
  // op; catch it here rather than in a consumer far away.
  static Status CheckOutputs(const Node& node, std::span<const Tensor> outputs) {
    for (size_t i = 0; i < outputs.size(); ++i) {
      const Tensor& t = outputs[i];
      const int out = static_cast<int>(i);
      if (!t.IsValid()) {
        return InternalError(NodeLabel(node), ": kernel did not set output ", i);
      }
      if (t.dtype() != node.output_type(out)) {
        return InternalError(NodeLabel(node), ": kernel produced ", DataTypeName(t.dtype()),
                             " for output ", i, ", declared ", DataTypeName(node.output_type(out)));
      }
      if (!ShapeAdmits(node.output_shape(out), t.shape())) {
        return InternalError(NodeLabel(node), ": kernel produced shape ", t.shape().ToString(),
                             " for output ", i, ", inferred ", node.output_shape(out).ToString());
      }
    }
    return OkStatus();
  }

  // Drops tensors no later node of this run reads.
  void ReleaseInputs(const PlanNode& pn) {
    const int32_t* slots = plan_.releases_.data() + pn.releases_begin;
    for (int32_t k = 0; k < pn.num_releases; ++k) {
      const int32_t slot = slots[k];
      if (plan_.slot_consumers_[slot] == 1 ||
          state_.consumers_left[slot].fetch_sub(1, std::memory_order_acq_rel) == 1) {
        state_.slots[slot] = Tensor();
      }
    }
  }

  const ExecutionPlan& plan_;
  RunState& state_;
  ResourceMgr& resources_;
  FileSystem* const file_system_;
  tbb::task_group& group_;
  std::atomic<bool> failed_{false};
  std::mutex mu_;
  Status error_;  // guarded by mu_; the first error
};

void NodeTask::operator()() const {
  TsanAcquire(this);
  executor_->RunTask(id_);
}

Status ExecutionPlan::Run(std::span<const Feed> feeds, ResourceMgr& resources,
                          std::vector<Tensor>* fetched, FileSystem* file_system) const {
  CKFLOW_CHECK(feeds.size() == feeds_.size());
  std::unique_ptr<RunState> state = AcquireState();
  for (size_t i = 0; i < nodes_.size(); ++i) {
    state->pending[i].store(nodes_[i].num_predecessors, std::memory_order_relaxed);
  }
  for (int32_t s = 0; s < num_slots_; ++s) {
    if (slot_consumers_[s] > 1) {
      state->consumers_left[s].store(slot_consumers_[s], std::memory_order_relaxed);
    }
  }
  for (size_t i = 0; i < feeds.size(); ++i) state->slots[i] = feeds[i].value;

  Status status;
  {
    tbb::task_group group;
    Executor executor(*this, *state, resources, file_system, group);
    // Spawn the other roots before running the first on this thread, so a
    // first root that waits for a sibling (a rendezvous) cannot starve it.
    for (size_t r = 1; r < roots_.size(); ++r) executor.Spawn(roots_[r]);
    if (!roots_.empty()) executor.RunFrom(roots_[0]);
    try {
      group.wait();
    } catch (const std::bad_alloc&) {
      executor.Fail(ResourceExhaustedError("out of memory while running the graph"));
    } catch (const std::exception& e) {
      executor.Fail(InternalError("scheduler failed: ", e.what()));
    }
    executor.Joined();
    status = executor.TakeError();
  }
  if (status.ok()) {
    fetched->clear();
    fetched->reserve(fetch_slots_.size());
    for (int32_t slot : fetch_slots_) fetched->push_back(state->slots[slot]);
  }
  for (Tensor& t : state->slots) t = Tensor();
  ReleaseState(std::move(state));
  return status;
}

}  // namespace ckflow::internal
