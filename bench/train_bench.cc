// One training step of an MLP (784-256-256-10, ReLU, softmax cross-entropy,
// batch 128, Adam) through the Session, against the same math written
// directly with Eigen in this binary: forward pass, backward pass by hand,
// Adam's update of the six parameters.
//
//   BM_TrainStep/threads:N   the session step under tbb::global_control(N)
//                            (0: no limit), timed interleaved with the
//                            Eigen step (always one thread, as Eigen runs
//                            here). Counters:
//     eigen_ms        the Eigen step
//     speed_vs_eigen  Eigen time / session time (target: >= 0.8)
//   BM_EagerTrainStep/threads:N   the same step executing eagerly, timed
//                            interleaved with the session step:
//     graph_ms        the session step
//     eager_vs_graph  eager time / session time (target: <= 1.5)
#include <benchmark/benchmark.h>
#include <tbb/global_control.h>

#include <Eigen/Core>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <random>
#include <utility>
#include <vector>

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

// The MLP step by hand, as a user without ckflow would write it.
class EigenMlp {
 public:
  EigenMlp() {
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
    h1_.noalias() = x * layers_[0].w;
    h1_ = (h1_.rowwise() + layers_[0].b).cwiseMax(0.0f);
    h2_.noalias() = h1_ * layers_[1].w;
    h2_ = (h2_.rowwise() + layers_[1].b).cwiseMax(0.0f);
    logits_.noalias() = h2_ * layers_[2].w;
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
    layers_[2].gw.noalias() = h2_.transpose() * d_logits_;
    layers_[2].gb = d_logits_.colwise().sum();
    d_h2_.noalias() = d_logits_ * layers_[2].w.transpose();
    d_h2_ = (h2_.array() > 0).select(d_h2_, 0.0f);
    layers_[1].gw.noalias() = h1_.transpose() * d_h2_;
    layers_[1].gb = d_h2_.colwise().sum();
    d_h1_.noalias() = d_h2_ * layers_[1].w.transpose();
    d_h1_ = (h1_.array() > 0).select(d_h1_, 0.0f);
    layers_[0].gw.noalias() = x.transpose() * d_h1_;
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

// The same model executing eagerly (graph/eager.h): every op built and run
// as it is called, gradients through a GradientTape.
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

// Runs `measured` and then `baseline` in each iteration, so both see the same
// machine state; the iteration's time is `measured`'s. Returns the total
// seconds of each.
template <typename Measured, typename Baseline>
std::pair<double, double> TimeInterleaved(benchmark::State& state, const Measured& measured,
                                          const Baseline& baseline) {
  double measured_total = 0, baseline_total = 0;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(measured());
    auto t1 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(baseline());
    auto t2 = std::chrono::steady_clock::now();
    state.SetIterationTime(Seconds(t1 - t0));
    measured_total += Seconds(t1 - t0);
    baseline_total += Seconds(t2 - t1);
  }
  return {measured_total, baseline_total};
}

void BM_TrainStep(benchmark::State& state) {
  std::optional<tbb::global_control> limit;
  if (state.range(0) > 0) {
    limit.emplace(tbb::global_control::max_allowed_parallelism, state.range(0));
  }
  Batch batch;
  SessionMlp session_mlp;
  EigenMlp eigen_mlp;
  Eigen::Map<const Matrix> x(batch.x.flat<float>().data(), kBatch, kInput);
  Eigen::Map<const Matrix> y(batch.y.flat<float>().data(), kBatch, kClasses);
  const auto [session_total, eigen_total] = TimeInterleaved(
      state, [&] { return session_mlp.Step(batch); }, [&] { return eigen_mlp.Step(x, y); });
  const auto n = static_cast<double>(state.iterations());
  state.counters["eigen_ms"] = eigen_total / n * 1e3;
  state.counters["speed_vs_eigen"] = eigen_total / session_total;
  state.SetItemsProcessed(state.iterations() * kBatch);
}
BENCHMARK(BM_TrainStep)
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(0)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// The eager step, timed interleaved with the session step. Counter
// eager_vs_graph: eager time / session time (target: <= 1.5).
void BM_EagerTrainStep(benchmark::State& state) {
  std::optional<tbb::global_control> limit;
  if (state.range(0) > 0) {
    limit.emplace(tbb::global_control::max_allowed_parallelism, state.range(0));
  }
  Batch batch;
  SessionMlp session_mlp;
  EagerMlp eager_mlp;
  eager_mlp.Step(batch);  // builds the layers and slots
  const auto [eager_total, session_total] = TimeInterleaved(
      state, [&] { return eager_mlp.Step(batch); }, [&] { return session_mlp.Step(batch); });
  const auto n = static_cast<double>(state.iterations());
  state.counters["graph_ms"] = session_total / n * 1e3;
  state.counters["eager_vs_graph"] = eager_total / session_total;
  state.SetItemsProcessed(state.iterations() * kBatch);
}
BENCHMARK(BM_EagerTrainStep)
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(0)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace ckflow

BENCHMARK_MAIN();
