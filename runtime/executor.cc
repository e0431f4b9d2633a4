#include <tbb/task_group.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <map>
#include <new>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "base/denormal_internal.h"
#include "base/parallel.h"
#include "base/parallel_internal.h"
#include "base/tsan_internal.h"
#include "runtime/executor_internal.h"
#include "runtime/remapper_internal.h"

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
                                                              const KernelLookup& kernel_for,
                                                              const OpRegistry* remap_with) {
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

  // Remapping: each fused chain's last node gives way to its fused node
  // (which takes its place in the order, after all the chain's inputs) and
  // the chain's other nodes leave the plan.
  std::vector<std::pair<const Node*, const Node*>> replaced;  // last, fused
  std::unordered_set<const Node*> fused_set;
  if (remap_with != nullptr) {
    std::set<std::pair<const Node*, int>> fetched_outputs;
    for (const Output& f : fetches) fetched_outputs.emplace(f.node(), f.index());
    std::vector<Fusion> fusions = FindFusions(
        order, [&](const Output& out) { return feed_slot(out) >= 0; },
        [&](const Node* node, int output) {
          return fetched_outputs.count({node, output}) > 0;
        },
        targets, *remap_with);
    std::unordered_map<const Node*, const Node*> fused_for;
    for (Fusion& f : fusions) {
      for (const Node* n : f.absorbed) fused_for.emplace(n, nullptr);
      fused_for[f.last] = f.fused.node();
      replaced.emplace_back(f.last, f.fused.node());
      fused_set.insert(f.fused.node());
      plan->fused_nodes_.push_back(std::move(f.fused));
    }
    if (!fusions.empty()) {
      std::vector<const Node*> kept;
      for (const Node* n : order) {
        auto it = fused_for.find(n);
        if (it == fused_for.end()) {
          kept.push_back(n);
        } else if (it->second != nullptr) {
          kept.push_back(it->second);
        }
      }
      order = std::move(kept);
    }
  }

  const auto num_feeds = static_cast<int32_t>(feeds.size());
  int32_t next_slot = num_feeds;
  plan->nodes_.resize(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    index[order[i]] = static_cast<int32_t>(i);
    PlanNode& pn = plan->nodes_[i];
    pn.node = order[i];
    if (fused_set.count(order[i])) {
      // A fused node: its kernel is the plan's own (the session's kernels
      // are the graph's nodes', one per node id).
      CKFLOW_ASSIGN_OR_RETURN(Kernel kernel,
                              remap_with->Find(order[i]->type())->kernel_factory(*order[i]));
      plan->fused_kernels_.push_back(std::make_unique<Kernel>(std::move(kernel)));
      pn.kernel = plan->fused_kernels_.back().get();
    } else {
      CKFLOW_ASSIGN_OR_RETURN(pn.kernel, kernel_for(*order[i]));
    }
    pn.first_output_slot = next_slot;
    pn.num_outputs = order[i]->num_outputs();
    next_slot += pn.num_outputs;
  }
  // Whatever read a chain's last node reads its fused node.
  for (const auto& [last, fused] : replaced) index[last] = index.at(fused);
  plan->num_slots_ = next_slot;
  plan->cost_ns_ = std::make_unique<std::atomic<int64_t>[]>(order.size());
  for (size_t i = 0; i < order.size(); ++i) plan->cost_ns_[i].store(-1, std::memory_order_relaxed);
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
  std::vector<bool> read(next_slot, false);
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
      read[slot] = true;
      // A Const's output is the tensor its node holds: dropping the run's
      // reference frees nothing, and counting it down would make every
      // consumer write one shared line (a learning rate read by a thousand
      // updates on all threads).
      const bool held_by_node = feed_slot(in) < 0 && in.node()->type() == "Const";
      if (slot >= num_feeds && !fetched[slot] && !held_by_node) scratch.push_back(slot);
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
  plan->slot_specs_.resize(next_slot);
  for (size_t i = 0; i < order.size(); ++i) {
    PlanNode& pn = plan->nodes_[i];
    pn.drops_begin = static_cast<int32_t>(plan->drops_.size());
    for (int32_t k = 0; k < pn.num_outputs; ++k) {
      const int32_t slot = pn.first_output_slot + k;
      if (!read[slot] && !fetched[slot]) plan->drops_.push_back(slot);
      SlotSpec& spec = plan->slot_specs_[slot];
      spec.dtype = pn.node->output_type(k);
      const PartialShape& shape = pn.node->output_shape(k);
      if (shape.known_rank()) {
        spec.rank = shape.rank();
        spec.dims_begin = static_cast<int32_t>(plan->declared_dims_.size());
        for (int d = 0; d < shape.rank(); ++d) plan->declared_dims_.push_back(shape.dim(d));
      }
    }
    pn.num_drops = static_cast<int32_t>(plan->drops_.size()) - pn.drops_begin;
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
    MutexLock lock(&pool_mu_);
    if (!pool_.empty()) {
      std::unique_ptr<RunState> state = std::move(pool_.back());
      pool_.pop_back();
      return state;
    }
  }
  return std::make_unique<RunState>(*this);
}

void ExecutionPlan::ReleaseState(std::unique_ptr<RunState> state) const {
  MutexLock lock(&pool_mu_);
  if (pool_.size() < kMaxPooledStates) pool_.push_back(std::move(state));
}

// ---------------------------------------------------------------- Execute

namespace {

// A node that took less than this on its last timed run is cheap: it runs on
// the thread that made it ready rather than in a task of its own (a spawn
// and a steal cost about as much as the node).
constexpr int64_t kCheapNs = 4000;
// Ready lists longer than this are split into tasks that each take a part
// (lazily, by halves), so a node with a thousand cheap successors costs a
// few dozen spawns, not a thousand, and the parts still spread over threads.
constexpr int32_t kSplitAbove = 32;
// Every this many runs of a plan times every node again, so a node that got
// more expensive (a bigger feed) gets a task of its own again.
constexpr uint32_t kRetimeEvery = 64;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Nodes a thread has made ready and runs itself, last in first out (a
// consumer right after its producer, while the tensor is in cache). Fixed
// size, so a task allocates nothing; what does not fit gets a task.
class ReadyStack {
 public:
  bool empty() const { return size_ == 0; }
  bool full() const { return size_ == kCapacity; }
  void push(int32_t id) { ids_[size_++] = id; }
  int32_t pop() { return ids_[--size_]; }

 private:
  static constexpr int kCapacity = 2 * kSplitAbove;
  int32_t ids_[kCapacity];
  int size_ = 0;
};

}  // namespace

class Executor;

// The oneTBB task for a ready node, or for a part of a node's successor list
// (or of the roots) to check and run. Its move constructor records where it
// ends up (inside oneTBB's task object), so the spawner can state the
// spawn-before-run edge on that address for TSan once the task is built.
class NodeTask {
 public:
  NodeTask(Executor* executor, const int32_t* ids, int32_t count, bool decrement,
           const void** built_at)
      : executor_(executor), ids_(ids), count_(count), decrement_(decrement), built_at_(built_at) {}
  NodeTask(NodeTask&& other) noexcept
      : executor_(other.executor_),
        ids_(other.ids_),
        count_(other.count_),
        decrement_(other.decrement_),
        built_at_(other.built_at_) {
    *built_at_ = this;
  }
  NodeTask(const NodeTask&) = delete;
  NodeTask& operator=(const NodeTask&) = delete;
  NodeTask& operator=(NodeTask&&) = delete;

  inline void operator()() const;

 private:
  Executor* executor_;
  const int32_t* ids_;     // into the plan's successors_ or roots_
  int32_t count_;          // if ids_ is null, count_ is the one ready node
  bool decrement_;         // ids_ are successors still to count down
  const void** built_at_;  // the spawner's; valid only while it spawns
};

// Runs one plan once over one RunState. Lives on Run's stack; its tasks end
// before Run returns.
//
// Scheduling, after TensorFlow's executor: a finished node counts down its
// successors; the cheap ones that become ready (by the plan's measured
// costs) run on this thread, the expensive ones each get a task, except one
// kept for this thread when no cheap node is waiting. Long successor lists
// are split into tasks of kSplitAbove or fewer.
class Executor {
 public:
  Executor(const ExecutionPlan& plan, RunState& state, ResourceMgr& resources,
           FileSystem* file_system, const BundleReader* bundle_reader, tbb::task_group* group,
           bool time_all, int intra_op_threads)
      : plan_(plan),
        state_(state),
        resources_(resources),
        file_system_(file_system),
        bundle_reader_(bundle_reader),
        group_(group),
        time_all_(time_all),
        intra_op_threads_(intra_op_threads) {}

  // Every node, one after another on this thread, in id order (a
  // topological order): no counting down and no tasks.
  void RunSerially() {
    for (const PlanNode& pn : plan_.nodes_) {
      if (Status s = RunNode(pn); !s.ok()) {
        Fail(std::move(s));
        return;
      }
      ReleaseAfterRun(pn);
    }
  }

  // Runs the roots (and what they make ready) here and in tasks.
  void RunRoots() {
    ReadyStack ready;
    Schedule(plan_.roots_.data(), static_cast<int32_t>(plan_.roots_.size()),
             /*decrement=*/false, ready);
    Drain(ready);
  }

  // A task's body, and its end-before-wait-returns edge for TSan.
  void RunTask(const int32_t* ids, int32_t count, bool decrement) {
    ReadyStack ready;
    if (ids == nullptr) {
      ready.push(count);
    } else {
      Schedule(ids, count, decrement, ready);
    }
    Drain(ready);
    TsanRelease(this);
  }
  // Called once task_group::wait has returned.
  void Joined() { TsanAcquire(this); }

  void Fail(Status error) CKFLOW_EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    if (error_.ok()) error_ = std::move(error);
    failed_.store(true, std::memory_order_relaxed);
  }

  Status TakeError() CKFLOW_EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    return std::move(error_);
  }

 private:
  bool Cheap(int32_t id) const {
    const int64_t cost = plan_.cost_ns_[id].load(std::memory_order_relaxed);
    return cost >= 0 && cost < kCheapNs;
  }

  // Runs the nodes on `ready` and whatever they make ready that stays on
  // this thread. Never throws.
  void Drain(ReadyStack& ready) {
    while (!ready.empty()) {
      if (failed_.load(std::memory_order_relaxed)) return;
      const int32_t id = ready.pop();
      const PlanNode& pn = plan_.nodes_[id];
      const bool timed = time_all_ || !Cheap(id);
      const int64_t start = timed ? NowNs() : 0;
      if (Status s = RunNode(pn); !s.ok()) {
        Fail(std::move(s));
        return;
      }
      if (timed) Learn(id, NowNs() - start);
      ReleaseAfterRun(pn);
      Schedule(plan_.successors_.data() + pn.successors_begin, pn.num_successors,
               /*decrement=*/true, ready);
    }
  }

  // A node's cost estimate drops at once to a faster run and rises by an
  // eighth of the difference to a slower one, so one run slowed by a busy
  // machine does not take a cheap node off its producer's thread for long.
  void Learn(int32_t id, int64_t ns) const {
    std::atomic<int64_t>& cost = plan_.cost_ns_[id];
    const int64_t old = cost.load(std::memory_order_relaxed);
    cost.store(old < 0 || ns < old ? ns : old + (ns - old) / 8, std::memory_order_relaxed);
  }

  // Of `ids` (a finished node's successors, counted down here, or roots),
  // puts the ready cheap nodes on `ready` and gives the expensive ones
  // tasks, keeping one for this thread if nothing else is waiting.
  void Schedule(const int32_t* ids, int32_t count, bool decrement, ReadyStack& ready) {
    while (count > kSplitAbove) {
      const int32_t half = count / 2;
      Spawn(ids + half, count - half, decrement);
      count = half;
    }
    int32_t kept = -1;
    for (int32_t k = 0; k < count; ++k) {
      const int32_t id = ids[k];
      // acq_rel: the last producer's decrement publishes every producer's
      // outputs to whoever runs the successor.
      if (decrement && state_.pending[id].fetch_sub(1, std::memory_order_acq_rel) != 1) continue;
      if (Cheap(id) && !ready.full()) {
        ready.push(id);
        continue;
      }
      if (kept >= 0) Spawn(nullptr, kept, false);
      kept = id;
    }
    if (kept < 0) return;
    if (ready.empty()) {
      ready.push(kept);
    } else {
      Spawn(nullptr, kept, false);
    }
  }

  void Spawn(const int32_t* ids, int32_t count, bool decrement) {
    try {
      const void* built_at = nullptr;
      tbb::task_handle task = group_->defer(NodeTask(this, ids, count, decrement, &built_at));
      TsanRelease(built_at);
      group_->run(std::move(task));
    } catch (const std::bad_alloc&) {
      Fail(ResourceExhaustedError(
          ids == nullptr ? NodeLabel(*plan_.nodes_[count].node) + ": " : std::string(),
          "out of memory scheduling a node"));
    }
  }

  Status RunNode(const PlanNode& pn) {
    std::span<Tensor> outputs(state_.slots.data() + pn.first_output_slot, pn.num_outputs);
    KernelContext ctx(
        *pn.node,
        std::span<const Tensor* const>(state_.inputs.data() + pn.inputs_begin, pn.num_inputs),
        outputs, resources_, file_system_, bundle_reader_,
        pn.num_releases > 0 ? Forwardable(pn) : 0);
    Status s;
    const int outer_limit = intra_op_threads_ == 0 ? 0 : SetIntraOpThreads(intra_op_threads_);
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
    if (intra_op_threads_ != 0) SetIntraOpThreads(outer_limit);
    if (!s.ok()) return s.WithContext(NodeLabel(*pn.node));
    for (int32_t k = 0; k < pn.num_outputs; ++k) {
      if (!Declared(plan_.slot_specs_[pn.first_output_slot + k], outputs[k])) {
        return DescribeBadOutputs(*pn.node, outputs);
      }
    }
    return OkStatus();
  }

  // The inputs of `pn` whose buffers its kernel may take for an output
  // (KernelContext::ForwardInputOrAllocateOutput): a slot this node ends the
  // use of, that no other consumer still has to read (the last release
  // count, acquired, orders their reads before our writes), read through
  // one input only, and whose buffer only the slot holds: not a feed the
  // caller keeps, a variable's value, or a tensor another slot shares.
  uint64_t Forwardable(const PlanNode& pn) const {
    uint64_t mask = 0;
    const int32_t* releases = plan_.releases_.data() + pn.releases_begin;
    const int32_t* input_slots = plan_.input_slots_.data() + pn.inputs_begin;
    for (int32_t k = 0; k < pn.num_releases; ++k) {
      const int32_t slot = releases[k];
      if (plan_.slot_consumers_[slot] != 1 &&
          state_.consumers_left[slot].load(std::memory_order_acquire) != 1) {
        continue;
      }
      if (!state_.slots[slot].RefCountIsOne()) continue;
      int found = -1;
      for (int32_t i = 0; i < pn.num_inputs; ++i) {
        if (input_slots[i] != slot) continue;
        found = found == -1 ? i : -2;
      }
      if (found >= 0 && found < 64) mask |= uint64_t{1} << found;
    }
#ifndef CKFLOW_TSAN
    // A buffer another slot shared was let go on another thread after that
    // slot's readers finished: use_count's relaxed load saw the release, and
    // this fence orders those reads before the kernel's writes. (TSan does
    // not model fences; there the release count above is the only edge.)
    if (mask != 0) std::atomic_thread_fence(std::memory_order_acquire);
#endif
    return mask;
  }

  bool Declared(const SlotSpec& spec, const Tensor& t) const {
    if (!t.IsValid() || t.dtype() != spec.dtype) return false;
    return spec.rank < 0 ||
           DimsAdmit(std::span<const int64_t>(plan_.declared_dims_.data() + spec.dims_begin,
                                              static_cast<size_t>(spec.rank)),
                     t.shape());
  }

  // A kernel that breaks its op's contract is a bug in ckflow or in a user's
  // op; catch it here rather than in a consumer far away.
  static Status DescribeBadOutputs(const Node& node, std::span<const Tensor> outputs) {
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
    return InternalError(NodeLabel(node), ": kernel outputs do not match the plan's declarations");
  }

  // Drops tensors no later node of this run reads: the node's inputs whose
  // last reader it was, and its outputs nothing reads.
  void ReleaseAfterRun(const PlanNode& pn) {
    const int32_t* drops = plan_.drops_.data() + pn.drops_begin;
    for (int32_t k = 0; k < pn.num_drops; ++k) state_.slots[drops[k]] = Tensor();
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
  const BundleReader* const bundle_reader_;
  tbb::task_group* const group_;  // null when running serially
  const bool time_all_;           // this run times every node
  const int intra_op_threads_;    // for kernels' ParallelFor; 0: no limit
  std::atomic<bool> failed_{false};
  Mutex mu_;
  Status error_ CKFLOW_GUARDED_BY(mu_);  // the first
};

void NodeTask::operator()() const {
  TsanAcquire(this);
  // Kernels flush subnormals to zero, as TensorFlow runs them; set once
  // per task, not per node, since each change of mode writes MXCSR.
  const ScopedDenormals denormals(true);
  executor_->RunTask(ids_, count_, decrement_);
}

Status ExecutionPlan::Run(std::span<const Feed> feeds, ResourceMgr& resources,
                          std::vector<Tensor>* fetched, FileSystem* file_system, bool serial,
                          int intra_op_threads, const BundleReader* bundle_reader) const {
  CKFLOW_CHECK(feeds.size() == feeds_.size());
  std::unique_ptr<RunState> state = AcquireState();
  for (int32_t s = 0; s < num_slots_; ++s) {
    if (slot_consumers_[s] > 1) {
      state->consumers_left[s].store(slot_consumers_[s], std::memory_order_relaxed);
    }
  }
  for (size_t i = 0; i < feeds.size(); ++i) state->slots[i] = feeds[i].value;

  // One thread gains nothing from tasks: run the nodes in order.
  serial = serial || MaxParallelism() <= 1;
  // This thread's kernels flush subnormals to zero (NodeTask sets the same
  // on the threads that take tasks).
  const ScopedDenormals denormals(true);
  Status status;
  if (serial) {
    Executor executor(*this, *state, resources, file_system, bundle_reader, nullptr, false,
                      intra_op_threads);
    executor.RunSerially();
    status = executor.TakeError();
  } else {
    for (size_t i = 0; i < nodes_.size(); ++i) {
      state->pending[i].store(nodes_[i].num_predecessors, std::memory_order_relaxed);
    }
    const bool time_all = runs_.fetch_add(1, std::memory_order_relaxed) % kRetimeEvery == 0;
    tbb::task_group group;
    Executor executor(*this, *state, resources, file_system, bundle_reader, &group, time_all,
                      intra_op_threads);
    executor.RunRoots();
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
