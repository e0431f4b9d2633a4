// Session overhead: the same kernels run through Session::Run and called
// directly in a loop, in one binary and one run.
//
//   BM_SessionChain       1,000 tiny Adds, each on the previous one's output
//   BM_SessionIndependent 1,000 tiny Adds on constants, joined by a NoOp
//   BM_SessionMatMul      one 1024x1024 float32 MatMul
//   BM_SessionAdam        Adam's update of 1,000 variables of 1 KiB (the
//                         update ops Minimize builds: ApplyGradients with
//                         the gradients as constants)
//
// Each session benchmark times its own step and, interleaved with it, the
// baseline: the same Kernel objects (made by the nodes' OpDef kernel
// factories) called in node order with hand-made KernelContexts. Counters:
//   direct_us         the baseline's time per step
//   x_direct          session time / direct time (target: <= 3 for the chain)
//   overhead_ns/node  (session - direct) / nodes run
// BM_SessionMatMul also times the bare Eigen product a user would write
// (Eigen's GEMM, one thread) and reports speeds: speed_vs_eigen = eigen time
// / session time (target: >= 0.9), speed_vs_direct likewise for its own
// kernel; threads:1 limits oneTBB to one thread for a like-for-like figure.
// BM_SessionAdam's baseline is the same Adam written by hand with Eigen over
// the same 1,000 arrays, on as many threads (a tbb::parallel_for over the
// variables); it reports session_ns/var, hand_ns/var and x_hand = session
// time / hand time.
#include <benchmark/benchmark.h>
#include <tbb/global_control.h>
#include <tbb/parallel_for.h>

#include <Eigen/Core>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/tensor_eigen_internal.h"
#include "graph/graph.h"
#include "ops/array_ops.h"
#include "ops/initializers.h"
#include "ops/math_ops.h"
#include "ops/optimizers.h"
#include "ops/variables.h"
#include "runtime/session.h"

namespace ckflow {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

void Check(const Status& s) {
  if (!s.ok()) {
    std::fprintf(stderr, "session_bench: %s\n", s.ToString().c_str());
    std::abort();
  }
}

Tensor Filled(const TensorShape& shape, float seed) {
  Tensor t(DT_FLOAT, shape);
  auto f = t.flat<float>();
  for (size_t i = 0; i < f.size(); ++i) f[i] = seed + static_cast<float>(i % 97) * 0.01f;
  return t;
}

// Every node of a graph run in id order (a topological order) by its own
// Kernel, each node's outputs dropped after their last consumer as a
// hand-written loop would (`x = Add(x, one)`), except `kept`: a session with
// no scheduling, no pruning and no checks.
class DirectLoop {
 public:
  DirectLoop(const Graph& graph, Output kept = {})
      : outputs_(graph.num_nodes()), inputs_(graph.num_nodes()), dead_after_(graph.num_nodes()) {
    std::vector<int> last_use(graph.num_nodes(), -1);
    for (int id = 0; id < graph.num_nodes(); ++id) {
      const Node* node = graph.node(id);
      nodes_.push_back(node);
      StatusOr<Kernel> kernel = node->op_def().kernel_factory(*node);
      Check(kernel.status());
      kernels_.push_back(*std::move(kernel));
      outputs_[id].resize(node->num_outputs());
      for (const Output& in : node->inputs()) {
        inputs_[id].push_back(&outputs_[in.node()->id()][in.index()]);
        last_use[in.node()->id()] = id;
      }
    }
    for (int id = 0; id < graph.num_nodes(); ++id) {
      if (last_use[id] >= 0 && id != (kept.valid() ? kept.node()->id() : -1)) {
        dead_after_[last_use[id]].push_back(id);
      }
    }
  }

  void Run() {
    for (size_t id = 0; id < nodes_.size(); ++id) {
      KernelContext ctx(*nodes_[id], inputs_[id], outputs_[id], resources_);
      Check(kernels_[id](ctx));
      for (int dead : dead_after_[id]) {
        for (Tensor& t : outputs_[dead]) t = Tensor();
      }
    }
  }

  const Tensor& output(Output out) const { return outputs_[out.node()->id()][out.index()]; }

 private:
  std::vector<const Node*> nodes_;
  std::vector<Kernel> kernels_;
  std::vector<std::vector<Tensor>> outputs_;
  std::vector<std::vector<const Tensor*>> inputs_;
  std::vector<std::vector<int>> dead_after_;  // nodes whose outputs die after this one
  ResourceMgr resources_;
};

// Runs `session_step` and each baseline once per iteration, interleaved so
// that a noisy neighbour slows all of them alike. The session's time is the
// benchmark's (manual) iteration time. Returns the mean seconds per step of
// the session, then of each baseline.
std::vector<double> TimeInterleaved(benchmark::State& state,
                                    const std::function<void()>& session_step,
                                    const std::vector<std::function<void()>>& baselines) {
  std::vector<double> totals(1 + baselines.size(), 0.0);
  for (auto _ : state) {
    Clock::time_point t0 = Clock::now();
    session_step();
    Clock::time_point t1 = Clock::now();
    state.SetIterationTime(Seconds(t0, t1));
    totals[0] += Seconds(t0, t1);
    for (size_t i = 0; i < baselines.size(); ++i) {
      Clock::time_point b0 = Clock::now();
      baselines[i]();
      totals[i + 1] += Seconds(b0, Clock::now());
    }
  }
  for (double& t : totals) t /= static_cast<double>(state.iterations());
  return totals;
}

// The counters of a tiny-op benchmark: session against the direct loop.
void ReportOverhead(benchmark::State& state, const std::vector<double>& times, int nodes) {
  state.counters["direct_us"] = times[1] * 1e6;
  state.counters["x_direct"] = times[0] / times[1];
  state.counters["overhead_ns/node"] = (times[0] - times[1]) / nodes * 1e9;
}

// One step that fetches `out`.
std::function<void()> FetchStep(Session& session, Output out) {
  return [&session, out] {
    StatusOr<std::vector<Tensor>> fetched = session.Run({}, {out});
    Check(fetched.status());
    benchmark::DoNotOptimize(fetched->front().raw_data());
  };
}

constexpr int kTinyOps = 1000;

void BM_SessionChain(benchmark::State& state) {
  Scope root = Scope::NewRootScope();
  Output one = ops::Const(root, Tensor::FromVector<float>({1, 2, 3, 4}));
  Output x = one;
  for (int i = 0; i < kTinyOps; ++i) x = ops::Add(root, x, one);
  Check(root.status());
  std::unique_ptr<Session> session = *Session::Create(root.graph());
  DirectLoop direct(root.graph(), x);
  std::vector<double> times =
      TimeInterleaved(state, FetchStep(*session, x), {[&] {
                        direct.Run();
                        benchmark::DoNotOptimize(direct.output(x).raw_data());
                      }});
  ReportOverhead(state, times, kTinyOps + 1);
}
BENCHMARK(BM_SessionChain)->UseManualTime()->Unit(benchmark::kMicrosecond);

void BM_SessionIndependent(benchmark::State& state) {
  Scope root = Scope::NewRootScope();
  Output a = ops::Const(root, Tensor::FromVector<float>({1, 2, 3, 4}));
  Output b = ops::Const(root, Tensor::FromVector<float>({5, 6, 7, 8}));
  std::vector<Output> adds;
  for (int i = 0; i < kTinyOps; ++i) adds.push_back(ops::Add(root, a, b));
  Output done = ops::NoOp(root.WithControlDependencies(adds));
  Check(root.status());
  std::unique_ptr<Session> session = *Session::Create(root.graph());
  DirectLoop direct(root.graph());
  std::vector<double> times = TimeInterleaved(
      state, [&] { Check(session->Run({}, {}, {done}).status()); }, {[&] { direct.Run(); }});
  ReportOverhead(state, times, kTinyOps + 3);
}
BENCHMARK(BM_SessionIndependent)->UseManualTime()->Unit(benchmark::kMicrosecond);

constexpr int kMatMulSize = 1024;

// Arg: the most threads oneTBB may use (0: all), so the one-thread figures
// compare the same amount of hardware.
void BM_SessionMatMul(benchmark::State& state) {
  std::optional<tbb::global_control> limit;
  if (state.range(0) > 0) {
    limit.emplace(tbb::global_control::max_allowed_parallelism, state.range(0));
  }
  const TensorShape shape({kMatMulSize, kMatMulSize});
  Scope root = Scope::NewRootScope();
  Output a = ops::Const(root, Filled(shape, 0.5f));
  Output b = ops::Const(root, Filled(shape, -0.25f));
  Output c = ops::MatMul(root, a, b);
  Check(root.status());
  std::unique_ptr<Session> session = *Session::Create(root.graph());
  DirectLoop direct(root.graph(), c);
  const Tensor ta = Filled(shape, 0.5f);
  const Tensor tb = Filled(shape, -0.25f);
  Tensor tc(DT_FLOAT, shape);
  std::vector<double> times =
      TimeInterleaved(state, FetchStep(*session, c),
                      {[&] {
                         direct.Run();
                         benchmark::DoNotOptimize(direct.output(c).raw_data());
                       },
                       [&] {
                         // The product a user would write without ckflow.
                         internal::AsMatrix<float>(tc).noalias() =
                             internal::AsMatrix<float>(ta) * internal::AsMatrix<float>(tb);
                         benchmark::DoNotOptimize(tc.raw_data());
                       }});
  state.counters["direct_ms"] = times[1] * 1e3;
  state.counters["eigen_ms"] = times[2] * 1e3;
  // Speed relative to the baselines (time ratio inverted): >= 0.9 is the
  // target against Eigen.
  state.counters["speed_vs_direct"] = times[1] / times[0];
  state.counters["speed_vs_eigen"] = times[2] / times[0];
  state.SetItemsProcessed(state.iterations() * 2LL * kMatMulSize * kMatMulSize * kMatMulSize);
}
BENCHMARK(BM_SessionMatMul)
    ->ArgName("threads")
    ->Arg(0)
    ->Arg(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

constexpr int kAdamVariables = 1000;
constexpr int kAdamElements = 256;  // 1 KiB of float32

// Adam as a user would write it for many small arrays: TensorFlow's update
// (m, v, then the variable, with the bias-corrected step size).
class HandAdam {
 public:
  HandAdam() : vars_(kAdamVariables), m_(kAdamVariables), v_(kAdamVariables) {
    for (int i = 0; i < kAdamVariables; ++i) {
      vars_[i] = Eigen::ArrayXf::Constant(kAdamElements, 0.5f);
      m_[i] = v_[i] = Eigen::ArrayXf::Zero(kAdamElements);
    }
  }

  void Step(const Eigen::ArrayXf& grad) {
    const float lr_t = kLearningRate * std::sqrt(1 - beta2_power_) / (1 - beta1_power_);
    tbb::parallel_for(0, kAdamVariables, [&](int i) {
      m_[i] += (grad - m_[i]) * (1 - kBeta1);
      v_[i] += (grad.square() - v_[i]) * (1 - kBeta2);
      vars_[i] -= m_[i] * lr_t / (v_[i].sqrt() + kEpsilon);
    });
    beta1_power_ *= kBeta1;
    beta2_power_ *= kBeta2;
  }
  const float* data() const { return vars_.back().data(); }

 private:
  static constexpr float kLearningRate = 0.001f, kBeta1 = 0.9f, kBeta2 = 0.999f, kEpsilon = 1e-8f;
  std::vector<Eigen::ArrayXf> vars_, m_, v_;
  float beta1_power_ = kBeta1, beta2_power_ = kBeta2;
};

// Arg: the most threads oneTBB may use (0: all).
void BM_SessionAdam(benchmark::State& state) {
  std::optional<tbb::global_control> limit;
  if (state.range(0) > 0) {
    limit.emplace(tbb::global_control::max_allowed_parallelism, state.range(0));
  }
  Scope root = Scope::NewRootScope();
  const TensorShape shape({kAdamElements});
  Output grad = ops::Const(root, Filled(shape, 0.01f));
  std::vector<GradAndVar> grads;
  for (int i = 0; i < kAdamVariables; ++i) {
    grads.push_back({grad, Variable::Create(root, "v" + std::to_string(i), DT_FLOAT, shape,
                                            initializers::Constant(0.5))});
  }
  Output train = Adam::Make()->ApplyGradients(root, grads);
  Output init = GlobalVariablesInitializer(root);
  Check(root.status());
  std::unique_ptr<Session> session = *Session::Create(root.graph());
  Check(session->Run({}, {}, {init}).status());
  HandAdam hand;
  Eigen::ArrayXf hand_grad(kAdamElements);
  for (int i = 0; i < kAdamElements; ++i) hand_grad[i] = 0.01f + static_cast<float>(i % 97) * 0.01f;
  std::vector<double> times =
      TimeInterleaved(state, [&] { Check(session->Run({}, {}, {train}).status()); }, {[&] {
                        hand.Step(hand_grad);
                        benchmark::DoNotOptimize(hand.data());
                      }});
  state.counters["session_ns/var"] = times[0] / kAdamVariables * 1e9;
  state.counters["hand_ns/var"] = times[1] / kAdamVariables * 1e9;
  state.counters["x_hand"] = times[0] / times[1];
}
BENCHMARK(BM_SessionAdam)
    ->ArgName("threads")
    ->Arg(0)
    ->Arg(1)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace ckflow

BENCHMARK_MAIN();
