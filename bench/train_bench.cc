// One training step of an MLP (784-256-256-10, ReLU, softmax cross-entropy,
// batch 128, Adam) through the Session, against the same math written
// directly with Eigen in this binary: forward pass, backward pass by hand,
// Adam's update of the six parameters.
//
//   BM_TrainStep/threads:N   the session step under tbb::global_control(N)
//                            (0: no limit), timed interleaved with the
//                            Eigen step given the same threads: with more
//                            than one, each of its GEMMs is split into one
//                            block of rows (or columns) per thread on oneTBB,
//                            as a user parallelizing it by hand would.
//                            Counters:
//     eigen_ms        the Eigen step
//     speed_vs_eigen  Eigen time / session time (targets: >= 0.95 on one
//                     thread, >= 1.0 on all)
//     cpu_per_wall    the process's CPU time over the wall time of the
//                     session steps alone (one thread: should be ~1)
//   BM_TorchStep/threads:N   (built when libtorch is found) the same model,
//                            batch and Adam in C++ libtorch with
//                            at::set_num_threads(N), timed interleaved with
//                            the session step under the same limit:
//     torch_ms        the libtorch step
//     speed_vs_torch  libtorch time / session time (target: >= 1.0)
//   BM_EagerTrainStep/threads:N   the same step executing eagerly, timed
//                            interleaved with the session step:
//     graph_ms        the session step
//     eager_vs_graph  eager time / session time (target: <= 1.5)
//     cpu_per_wall    as above, of the eager steps
#include <benchmark/benchmark.h>
#include <tbb/global_control.h>
#include <tbb/parallel_for.h>
#include <time.h>

#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#ifdef CKFLOW_BENCH_TORCH
#include <ATen/Parallel.h>
#include <torch/torch.h>
#endif

#include "base/parallel.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_management.h"
#include "ops/array_ops.h"
#include "ops/layers.h"
#include "ops/losses.h"
#include "ops/nn_ops.h"
#include "ops/optimizers.h"
#include "ops/variables.h"
#include "runtime/session.h"
#include "workloads/scratch_dir.h"

namespace ckflow {
namespace {

constexpr int kBatch = 128, kInput = 784, kHidden = 256, kClasses = 10;

void Check(const Status& s) {
  if (!s.ok()) {
    std::fprintf(stderr, "train_bench: %s\n", s.ToString().c_str());
    std::abort();
  }
}

using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using RowVector = Eigen::Matrix<float, 1, Eigen::Dynamic>;

// A batch of random inputs and one-hot labels.
struct Batch {
  Tensor x{DT_FLOAT, TensorShape({kBatch, kInput})};
  Tensor y{DT_FLOAT, TensorShape({kBatch, kClasses})};
  Batch() {
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(0, 1);
    for (float& v : x.flat<float>()) v = u(rng);
    for (float& v : y.flat<float>()) v = 0;
    for (int i = 0; i < kBatch; ++i) y.flat<float>()[i * kClasses + i % kClasses] = 1;
  }
};

// out = lhs * rhs, split into `threads` blocks of rows (or of columns when
// wider than tall) on oneTBB: how a user would parallelize Eigen's GEMM by
// hand without Eigen's own thread pool.
template <typename Out, typename Lhs, typename Rhs>
void Gemm(int threads, Out&& out, const Lhs& lhs, const Rhs& rhs) {
  if (threads <= 1) {
    out.noalias() = lhs * rhs;
    return;
  }
  const bool by_rows = out.rows() >= out.cols();
  const Eigen::Index len = by_rows ? out.rows() : out.cols();
  const Eigen::Index block = (len + threads - 1) / threads;
  tbb::parallel_for(Eigen::Index{0}, len, block, [&](Eigen::Index start) {
    const Eigen::Index size = std::min(block, len - start);
    if (by_rows) {
      out.middleRows(start, size).noalias() = lhs.middleRows(start, size) * rhs;
    } else {
      out.middleCols(start, size).noalias() = lhs * rhs.middleCols(start, size);
    }
  });
}

// The MLP step by hand, as a user without ckflow would write it.
class EigenMlp {
 public:
  explicit EigenMlp(int threads) : threads_(threads) {
    std::mt19937 rng(3);
    const int sizes[4] = {kInput, kHidden, kHidden, kClasses};
    for (int l = 0; l < 3; ++l) {
      const float limit = std::sqrt(6.0f / static_cast<float>(sizes[l] + sizes[l + 1]));
      std::uniform_real_distribution<float> u(-limit, limit);
      Layer& layer = layers_[l];
      layer.w = Matrix::NullaryExpr(sizes[l], sizes[l + 1], [&] { return u(rng); });
      layer.b = RowVector::Zero(sizes[l + 1]);
      layer.mw = layer.vw = Matrix::Zero(sizes[l], sizes[l + 1]);
      layer.mb = layer.vb = RowVector::Zero(sizes[l + 1]);
    }
  }

  float Step(const Eigen::Ref<const Matrix>& x, const Eigen::Ref<const Matrix>& y) {
    // Forward.
    h1_.resize(x.rows(), kHidden);
    h2_.resize(x.rows(), kHidden);
    logits_.resize(x.rows(), kClasses);
    d_h2_.resize(x.rows(), kHidden);
    d_h1_.resize(x.rows(), kHidden);
    Gemm(threads_, h1_, x, layers_[0].w);
    h1_ = (h1_.rowwise() + layers_[0].b).cwiseMax(0.0f);
    Gemm(threads_, h2_, h1_, layers_[1].w);
    h2_ = (h2_.rowwise() + layers_[1].b).cwiseMax(0.0f);
    Gemm(threads_, logits_, h2_, layers_[2].w);
    logits_.rowwise() += layers_[2].b;
    // Softmax cross-entropy and its gradient (softmax - labels) / batch.
    Eigen::VectorXf max = logits_.rowwise().maxCoeff();
    probs_ = (logits_.colwise() - max).array().exp().matrix();
    Eigen::VectorXf sum = probs_.rowwise().sum();
    const float loss =
        -(y.array() * ((logits_.colwise() - max).array().colwise() - sum.array().log())).sum() /
        kBatch;
    probs_.array().colwise() /= sum.array();
    d_logits_ = (probs_ - y) / static_cast<float>(kBatch);
    // Backward.
    for (int l = 0; l < 3; ++l) layers_[l].gw.resize(layers_[l].w.rows(), layers_[l].w.cols());
    Gemm(threads_, layers_[2].gw, h2_.transpose(), d_logits_);
    layers_[2].gb = d_logits_.colwise().sum();
    Gemm(threads_, d_h2_, d_logits_, layers_[2].w.transpose());
    d_h2_ = (h2_.array() > 0).select(d_h2_, 0.0f);
    Gemm(threads_, layers_[1].gw, h1_.transpose(), d_h2_);
    layers_[1].gb = d_h2_.colwise().sum();
    Gemm(threads_, d_h1_, d_h2_, layers_[1].w.transpose());
    d_h1_ = (h1_.array() > 0).select(d_h1_, 0.0f);
    Gemm(threads_, layers_[0].gw, x.transpose(), d_h1_);
    layers_[0].gb = d_h1_.colwise().sum();
    // Adam.
    const float lr_t = kLearningRate * std::sqrt(1 - beta2_power_) / (1 - beta1_power_);
    for (Layer& l : layers_) {
      Adam(l.w, l.mw, l.vw, l.gw, lr_t);
      Adam(l.b, l.mb, l.vb, l.gb, lr_t);
    }
    beta1_power_ *= kBeta1;
    beta2_power_ *= kBeta2;
    return loss;
  }

 private:
  static constexpr float kLearningRate = 0.001f, kBeta1 = 0.9f, kBeta2 = 0.999f, kEpsilon = 1e-8f;

  template <typename M>
  static void Adam(M& w, M& m, M& v, const M& g, float lr_t) {
    m.array() += (g.array() - m.array()) * (1 - kBeta1);
    v.array() += (g.array().square() - v.array()) * (1 - kBeta2);
    w.array() -= m.array() * lr_t / (v.array().sqrt() + kEpsilon);
  }

  struct Layer {
    Matrix w, mw, vw, gw;
    RowVector b, mb, vb, gb;
  };
  const int threads_;
  Layer layers_[3];
  Matrix h1_, h2_, logits_, probs_, d_logits_, d_h2_, d_h1_;
  float beta1_power_ = kBeta1, beta2_power_ = kBeta2;
};

// A model trained through ckflow: a Sequential of Dense layers (ReLU between
// them), a loss, Adam, one session step. Its optimizer and layers are what a
// Checkpoint of it tracks.
struct ModelSpec {
  int batch, input;
  std::vector<int> units;  // per layer; the last has no activation
  bool softmax;            // softmax cross-entropy, else mean squared error
};
// The MLP of BM_TrainStep, and the Regress example's shape (README.md):
// 4 inputs, Dense(10, relu), Dense(1), mean squared error.
const ModelSpec kMlp{kBatch, kInput, {kHidden, kHidden, kClasses}, /*softmax=*/true};
const ModelSpec kRegress{32, 4, {10, 1}, /*softmax=*/false};

class SessionModel {
 public:
  explicit SessionModel(const ModelSpec& spec) {
    root_.graph().set_seed(3);
    const int outputs = spec.units.back();
    x_ = ops::Placeholder(root_, DT_FLOAT, {.shape = {spec.batch, spec.input}});
    y_ = ops::Placeholder(root_, DT_FLOAT, {.shape = {spec.batch, outputs}});
    std::vector<std::shared_ptr<Layer>> layers;
    for (size_t l = 0; l < spec.units.size(); ++l) {
      const bool last = l + 1 == spec.units.size();
      layers.push_back(last ? Dense::Make(spec.units[l])
                            : Dense::Make(spec.units[l], {.activation = ops::Relu}));
    }
    model_ = Sequential::Make(std::move(layers));
    Output prediction = (*model_)(root_, x_);
    loss_ = spec.softmax ? losses::SoftmaxCrossEntropyWithLogits(root_, y_, prediction)
                         : losses::MeanSquaredError(root_, y_, prediction);
    optimizer_ = Adam::Make();
    train_ = optimizer_->Minimize(root_, loss_);
    Output init = GlobalVariablesInitializer(root_);
    Check(root_.status());
    StatusOr<std::unique_ptr<Session>> session = Session::Create(root_.graph());
    Check(session.status());
    session_ = std::move(session).value();
    Check(session_->Run({}, {}, {init}).status());
  }

  float Step(const Tensor& x, const Tensor& y) {
    StatusOr<std::vector<Tensor>> out = session_->Run({{x_, x}, {y_, y}}, {loss_}, {train_});
    Check(out.status());
    return out->front().scalar<float>();
  }

  const Scope& scope() const { return root_; }
  Session& session() { return *session_; }
  Checkpoint::Dependencies dependencies() const {
    return {{"model", model_}, {"optimizer", optimizer_}};
  }

 private:
  Scope root_ = Scope::NewRootScope();
  Output x_, y_, loss_, train_;
  std::shared_ptr<Sequential> model_;
  std::shared_ptr<Adam> optimizer_;
  std::unique_ptr<Session> session_;
};

// The MLP executing eagerly (graph/eager.h): every op built and run as it is
// called, gradients through a GradientTape.
class EagerMlp {
 public:
  EagerMlp() {
    scope_.graph().set_seed(3);
    mlp_ =
        Sequential::Make({Dense::Make(kHidden, {.activation = ops::Relu}),
                          Dense::Make(kHidden, {.activation = ops::Relu}), Dense::Make(kClasses)});
    adam_ = Adam::Make();
  }

  float Step(const Batch& batch) {
    Output loss;
    adam_->Minimize(scope_, [&] {
      loss = losses::SoftmaxCrossEntropyWithLogits(scope_, ops::Const(scope_, batch.y),
                                                   (*mlp_)(scope_, ops::Const(scope_, batch.x)));
      return loss;
    });
    Check(scope_.status());
    return loss.value().scalar<float>();
  }

 private:
  Scope scope_ = Scope::NewEagerScope();
  std::shared_ptr<Sequential> mlp_;
  std::shared_ptr<Adam> adam_;
};

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

double ProcessCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// The threads a benchmark's arg gives (0: as many as oneTBB has), under a
// global_control that holds while `limit` lives.
int ApplyThreads(benchmark::State& state, std::optional<tbb::global_control>& limit) {
  if (state.range(0) > 0) {
    limit.emplace(tbb::global_control::max_allowed_parallelism, state.range(0));
  }
  return MaxParallelism();
}

// Times `measured` (the iteration's time) and `baseline` alternately, so
// both see the same machine state; returns their mean seconds per step
// and the process's CPU time per measured step.
struct PairTimes {
  double measured = 0, baseline = 0, measured_cpu = 0;
};
template <typename Measured, typename Baseline>
PairTimes TimePair(benchmark::State& state, Measured measured, Baseline baseline) {
  PairTimes t;
  for (auto _ : state) {
    const double c0 = ProcessCpuSeconds();
    auto t0 = std::chrono::steady_clock::now();
    measured();
    auto t1 = std::chrono::steady_clock::now();
    const double c1 = ProcessCpuSeconds();
    baseline();
    auto t2 = std::chrono::steady_clock::now();
    state.SetIterationTime(Seconds(t1 - t0));
    t.measured += Seconds(t1 - t0);
    t.baseline += Seconds(t2 - t1);
    t.measured_cpu += c1 - c0;
  }
  const auto n = static_cast<double>(state.iterations());
  t.measured /= n;
  t.baseline /= n;
  t.measured_cpu /= n;
  state.counters["cpu_per_wall"] = t.measured_cpu / t.measured;
  state.SetItemsProcessed(state.iterations() * kBatch);
  return t;
}

// The cases of a step benchmark: one thread, then no limit; timed by
// SetIterationTime.
void ThreadCases(benchmark::internal::Benchmark* b) {
  b->ArgName("threads")->Arg(1)->Arg(0)->UseManualTime()->Unit(benchmark::kMillisecond);
}

void BM_TrainStep(benchmark::State& state) {
  std::optional<tbb::global_control> limit;
  const int threads = ApplyThreads(state, limit);
  Batch batch;
  SessionModel session_mlp(kMlp);
  EigenMlp eigen_mlp(threads);
  Eigen::Map<const Matrix> x(batch.x.flat<float>().data(), kBatch, kInput);
  Eigen::Map<const Matrix> y(batch.y.flat<float>().data(), kBatch, kClasses);
  const PairTimes t = TimePair(
      state, [&] { benchmark::DoNotOptimize(session_mlp.Step(batch.x, batch.y)); },
      [&] { benchmark::DoNotOptimize(eigen_mlp.Step(x, y)); });
  state.counters["eigen_ms"] = t.baseline * 1e3;
  state.counters["speed_vs_eigen"] = t.baseline / t.measured;
}
BENCHMARK(BM_TrainStep)->Apply(ThreadCases);

void BM_EagerTrainStep(benchmark::State& state) {
  std::optional<tbb::global_control> limit;
  ApplyThreads(state, limit);
  Batch batch;
  SessionModel session_mlp(kMlp);
  EagerMlp eager_mlp;
  eager_mlp.Step(batch);  // builds the layers and slots
  const PairTimes t = TimePair(
      state, [&] { benchmark::DoNotOptimize(eager_mlp.Step(batch)); },
      [&] { benchmark::DoNotOptimize(session_mlp.Step(batch.x, batch.y)); });
  state.counters["graph_ms"] = t.baseline * 1e3;
  state.counters["eager_vs_graph"] = t.measured / t.baseline;
}
BENCHMARK(BM_EagerTrainStep)->Apply(ThreadCases);

#ifdef CKFLOW_BENCH_TORCH
// The same MLP in C++ libtorch: Linear layers as addmm, ReLU, cross-entropy
// over the labels' classes (the mean, as the session's loss), Adam.
class TorchMlp {
 public:
  explicit TorchMlp(const Batch& batch) {
    torch::manual_seed(3);
    const int sizes[4] = {kInput, kHidden, kHidden, kClasses};
    for (int l = 0; l < 3; ++l) {
      const double limit = std::sqrt(6.0 / (sizes[l] + sizes[l + 1]));
      w_[l] = torch::empty({sizes[l], sizes[l + 1]}).uniform_(-limit, limit).requires_grad_();
      b_[l] = torch::zeros({sizes[l + 1]}).requires_grad_();
    }
    optimizer_ = std::make_unique<torch::optim::Adam>(
        std::vector<torch::Tensor>{w_[0], b_[0], w_[1], b_[1], w_[2], b_[2]},
        torch::optim::AdamOptions(0.001).eps(1e-8));
    x_ = torch::from_blob(const_cast<float*>(batch.x.flat<float>().data()), {kBatch, kInput});
    labels_ = torch::from_blob(const_cast<float*>(batch.y.flat<float>().data()), {kBatch, kClasses})
                  .argmax(1);
  }

  float Step() {
    optimizer_->zero_grad();
    torch::Tensor h = torch::relu(torch::addmm(b_[0], x_, w_[0]));
    h = torch::relu(torch::addmm(b_[1], h, w_[1]));
    torch::Tensor loss = torch::cross_entropy_loss(torch::addmm(b_[2], h, w_[2]), labels_);
    loss.backward();
    optimizer_->step();
    return loss.item<float>();
  }

 private:
  torch::Tensor w_[3], b_[3], x_, labels_;
  std::unique_ptr<torch::optim::Adam> optimizer_;
};

// libtorch's BLAS (OpenBLAS on Debian) keeps its own threads; limit them as
// at::set_num_threads limits OpenMP's, when the library offers it.
extern "C" void openblas_set_num_threads(int) __attribute__((weak));

void BM_TorchStep(benchmark::State& state) {
  std::optional<tbb::global_control> limit;
  const int threads = ApplyThreads(state, limit);
  at::set_num_threads(threads);
  if (openblas_set_num_threads != nullptr) openblas_set_num_threads(threads);
  Batch batch;
  SessionModel session_mlp(kMlp);
  TorchMlp torch_mlp(batch);
  const PairTimes t = TimePair(
      state, [&] { benchmark::DoNotOptimize(session_mlp.Step(batch.x, batch.y)); },
      [&] { benchmark::DoNotOptimize(torch_mlp.Step()); });
  state.counters["torch_ms"] = t.baseline * 1e3;
  state.counters["speed_vs_torch"] = t.baseline / t.measured;
}
BENCHMARK(BM_TorchStep)->Apply(ThreadCases);
#endif

// ---------------------------------------------------- saves inside the loop

// Steps per loop: CKFLOW_BENCH_LOOP_STEPS, else `fallback` (the ctest smoke
// run sets a few).
int LoopSteps(int fallback) {
  const char* env = std::getenv("CKFLOW_BENCH_LOOP_STEPS");
  return env != nullptr && std::atoi(env) > 0 ? std::atoi(env) : fallback;
}

double Percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const auto i = static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

// Random inputs and targets for `spec` (one-hot labels for softmax).
std::pair<Tensor, Tensor> BatchFor(const ModelSpec& spec) {
  const int outputs = spec.units.back();
  Tensor x(DT_FLOAT, TensorShape({spec.batch, spec.input}));
  Tensor y(DT_FLOAT, TensorShape({spec.batch, outputs}));
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(0, 1);
  for (float& v : x.flat<float>()) v = u(rng);
  for (float& v : y.flat<float>()) v = spec.softmax ? 0 : u(rng);
  if (spec.softmax) {
    for (int i = 0; i < spec.batch; ++i) y.flat<float>()[i * outputs + i % outputs] = 1;
  }
  return {std::move(x), std::move(y)};
}

// BM_TrainLoop/model:M/async:A/every:K: the model (0: the MLP, 1: Regress)
// trained for N steps with a CheckpointManager save (max_to_keep 3, into a
// new directory under CKFLOW_BENCH_DIR or /tmp) after every K-th step, sync
// or async, beside the same loop of N steps without saves, the two loops in
// alternating order from run to run. A step's time includes the save made
// after it (for an async save, the stall until Save returns; its
// background write competes with the next steps). Counters: p50_ms, p99_ms
// of the step with saves; base_p50_ms, base_p99_ms without; p50_overhead
// (p50 / base_p50 - 1; target for async, K = 100: <= 0.02) and p99_ratio
// (p99 / base_p99; target <= 1.5).
void BM_TrainLoop(benchmark::State& state) {
  const ModelSpec& spec = state.range(0) == 0 ? kMlp : kRegress;
  const bool async = state.range(1) != 0;
  const int every = static_cast<int>(state.range(2));
  const int steps = LoopSteps(state.range(0) == 0 ? 500 : 2000);
  const workloads::ScratchDir scratch("ckflow-loop");
  if (scratch.path().empty()) {
    state.SkipWithError("cannot create a directory for the checkpoints");
    return;
  }
  const std::string& dir = scratch.path();
  SessionModel model(spec);
  const std::pair<Tensor, Tensor> batch = BatchFor(spec);
  const Tensor& x = batch.first;
  const Tensor& y = batch.second;
  Checkpoint checkpoint(model.scope(), model.dependencies());
  // When each save started and, for async saves, when its write ended: the
  // write must end within `every` steps, or the next Save waits for it.
  std::mutex saves_mu;
  std::deque<std::chrono::steady_clock::time_point> save_starts;  // writes not yet done
  std::vector<double> stalls, writes;
  std::function<void(const std::string&, const Status&)> on_done = [&](const std::string&,
                                                                       const Status&) {
    std::lock_guard<std::mutex> lock(saves_mu);
    if (save_starts.empty()) return;  // the warm-up save
    writes.push_back(Seconds(std::chrono::steady_clock::now() - save_starts.front()));
    save_starts.pop_front();
  };
  StatusOr<std::unique_ptr<CheckpointManager>> manager = CheckpointManager::Create(
      checkpoint, dir,
      {.max_to_keep = 3, .save_options = {.async = async, .on_done = async ? on_done : nullptr}});
  Check(manager.status());
  // Warm: the first save builds the save ops and (async) the snapshot buffers.
  for (int i = 0; i < 10; ++i) model.Step(x, y);
  Check((*manager)->Save(model.session()).status());
  Check(checkpoint.Sync());
  static int run = 0;
  std::vector<double> with, without;
  for (auto _ : state) {
    auto loop = [&](bool save, std::vector<double>* times) {
      for (int step = 1; step <= steps; ++step) {
        const auto start = std::chrono::steady_clock::now();
        benchmark::DoNotOptimize(model.Step(x, y));
        if (save && step % every == 0) {
          const auto save_start = std::chrono::steady_clock::now();
          if (async) {
            std::lock_guard<std::mutex> lock(saves_mu);
            save_starts.push_back(save_start);
          }
          Check((*manager)->Save(model.session()).status());
          stalls.push_back(Seconds(std::chrono::steady_clock::now() - save_start));
        }
        times->push_back(Seconds(std::chrono::steady_clock::now() - start));
      }
      Check(checkpoint.Sync());
    };
    if (run++ % 2 == 0) {
      loop(false, &without);
      loop(true, &with);
    } else {
      loop(true, &with);
      loop(false, &without);
    }
  }
  Check(checkpoint.Sync());
  state.counters["p50_ms"] = Percentile(with, 0.5) * 1e3;
  state.counters["p99_ms"] = Percentile(with, 0.99) * 1e3;
  state.counters["base_p50_ms"] = Percentile(without, 0.5) * 1e3;
  state.counters["base_p99_ms"] = Percentile(without, 0.99) * 1e3;
  state.counters["p50_overhead"] = Percentile(with, 0.5) / Percentile(without, 0.5) - 1;
  state.counters["p99_ratio"] = Percentile(with, 0.99) / Percentile(without, 0.99);
  // The Save call (for async: the wait for the previous write, and the
  // snapshot), and an async save's whole write, against the time between
  // two saves.
  if (!stalls.empty()) state.counters["save_p50_ms"] = Percentile(stalls, 0.5) * 1e3;
  std::lock_guard<std::mutex> lock(saves_mu);
  if (!writes.empty()) state.counters["write_p50_ms"] = Percentile(writes, 0.5) * 1e3;
  state.counters["between_saves_ms"] = every * Percentile(without, 0.5) * 1e3;
}
BENCHMARK(BM_TrainLoop)
    ->ArgNames({"model", "async", "every"})
    ->ArgsProduct({{0, 1}, {0, 1}, {10, 100}})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace ckflow

BENCHMARK_MAIN();
