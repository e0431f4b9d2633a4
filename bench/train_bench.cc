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
#include <benchmark/benchmark.h>
#include <tbb/global_control.h>
#include <tbb/parallel_for.h>
#include <time.h>

#include <Eigen/Core>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#ifdef CKFLOW_BENCH_TORCH
#include <ATen/Parallel.h>
#include <torch/torch.h>
#endif

#include "base/parallel.h"
#include "ops/array_ops.h"
#include "ops/layers.h"
#include "ops/losses.h"
#include "ops/nn_ops.h"
#include "ops/optimizers.h"
#include "ops/variables.h"
#include "runtime/session.h"

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

// The same model through ckflow: layers, loss, Adam, one session step.
class SessionMlp {
 public:
  SessionMlp() {
    root_.graph().set_seed(3);
    x_ = ops::Placeholder(root_, DT_FLOAT, {.shape = {kBatch, kInput}});
    y_ = ops::Placeholder(root_, DT_FLOAT, {.shape = {kBatch, kClasses}});
    auto mlp =
        Sequential::Make({Dense::Make(kHidden, {.activation = ops::Relu}),
                          Dense::Make(kHidden, {.activation = ops::Relu}), Dense::Make(kClasses)});
    loss_ = losses::SoftmaxCrossEntropyWithLogits(root_, y_, (*mlp)(root_, x_));
    train_ = Adam::Make()->Minimize(root_, loss_);
    Output init = GlobalVariablesInitializer(root_);
    Check(root_.status());
    StatusOr<std::unique_ptr<Session>> session = Session::Create(root_.graph());
    Check(session.status());
    session_ = std::move(session).value();
    Check(session_->Run({}, {}, {init}).status());
  }

  float Step(const Batch& batch) {
    StatusOr<std::vector<Tensor>> out =
        session_->Run({{x_, batch.x}, {y_, batch.y}}, {loss_}, {train_});
    Check(out.status());
    return out->front().scalar<float>();
  }

 private:
  Scope root_ = Scope::NewRootScope();
  Output x_, y_, loss_, train_;
  std::unique_ptr<Session> session_;
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

// Times `session_step` and `baseline` alternately; returns their mean
// seconds per step and the process's CPU time per session step.
struct PairTimes {
  double session = 0, baseline = 0, session_cpu = 0;
};
template <typename SessionStep, typename Baseline>
PairTimes TimePair(benchmark::State& state, SessionStep session_step, Baseline baseline) {
  PairTimes t;
  for (auto _ : state) {
    const double c0 = ProcessCpuSeconds();
    auto t0 = std::chrono::steady_clock::now();
    session_step();
    auto t1 = std::chrono::steady_clock::now();
    const double c1 = ProcessCpuSeconds();
    baseline();
    auto t2 = std::chrono::steady_clock::now();
    state.SetIterationTime(Seconds(t1 - t0));
    t.session += Seconds(t1 - t0);
    t.baseline += Seconds(t2 - t1);
    t.session_cpu += c1 - c0;
  }
  const auto n = static_cast<double>(state.iterations());
  t.session /= n;
  t.baseline /= n;
  t.session_cpu /= n;
  state.counters["cpu_per_wall"] = t.session_cpu / t.session;
  state.SetItemsProcessed(state.iterations() * kBatch);
  return t;
}

void BM_TrainStep(benchmark::State& state) {
  std::optional<tbb::global_control> limit;
  const int threads = ApplyThreads(state, limit);
  Batch batch;
  SessionMlp session_mlp;
  EigenMlp eigen_mlp(threads);
  Eigen::Map<const Matrix> x(batch.x.flat<float>().data(), kBatch, kInput);
  Eigen::Map<const Matrix> y(batch.y.flat<float>().data(), kBatch, kClasses);
  const PairTimes t = TimePair(
      state, [&] { benchmark::DoNotOptimize(session_mlp.Step(batch)); },
      [&] { benchmark::DoNotOptimize(eigen_mlp.Step(x, y)); });
  state.counters["eigen_ms"] = t.baseline * 1e3;
  state.counters["speed_vs_eigen"] = t.baseline / t.session;
}
BENCHMARK(BM_TrainStep)
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(0)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

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
  SessionMlp session_mlp;
  TorchMlp torch_mlp(batch);
  const PairTimes t = TimePair(
      state, [&] { benchmark::DoNotOptimize(session_mlp.Step(batch)); },
      [&] { benchmark::DoNotOptimize(torch_mlp.Step()); });
  state.counters["torch_ms"] = t.baseline * 1e3;
  state.counters["speed_vs_torch"] = t.baseline / t.session;
}
BENCHMARK(BM_TorchStep)
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(0)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
#endif

}  // namespace
}  // namespace ckflow

BENCHMARK_MAIN();
