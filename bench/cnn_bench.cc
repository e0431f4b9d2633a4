// The Fashion-MNIST example's CNN (examples/fashion_mnist_model.h) through
// the Session: what the example's loop costs, for bench/report.py beside the
// same model in TensorFlow and PyTorch (bench/cnn_peers.py).
//
//   BM_CnnTrainStep/threads:N   one training step (batch 64: both
//                               BatchNormalization updates, Dropout, Adam)
//                               with the session's inter- and intra-op
//                               threads both N, the step alone timed (the
//                               batch is made before). Counter:
//     images_per_s
//   BM_CnnInference/threads:N   the inference path on a batch of 256.
//   BM_CnnBuildGraph            building the example's graph: the model's
//                               training call, Minimize (gradients, Adam's
//                               slots), the inference call and the
//                               initializer, then Session::Create. Counters:
//     nodes           the graph's node count
//   BM_CnnCheckpoint/restore:R  the example's checkpoint (model, moving
//                               statistics, Adam's slots and powers, step)
//                               written synchronously with Checkpoint::Write
//                               (R = 0) or restored into a new graph built
//                               the same way with InitializeOrRestore (R = 1;
//                               building is outside the timing). Counters:
//     us_per_variable, variables
//
// CKFLOW_BENCH_DIR: where checkpoints are written (default: a temp dir).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "examples/fashion_mnist_model.h"
#include "ops/array_ops.h"
#include "ops/losses.h"
#include "ops/math_ops.h"
#include "ops/optimizers.h"
#include "ops/variables.h"
#include "runtime/session.h"
#include "workloads/scratch_dir.h"

namespace ckflow {
namespace {

void Check(const Status& s) {
  if (!s.ok()) {
    std::fprintf(stderr, "cnn_bench: %s\n", s.ToString().c_str());
    std::abort();
  }
}

template <typename T>
T Value(StatusOr<T> v) {
  Check(v.status());
  return std::move(v).value();
}

// Random images in [0, 1] (as the example's / 255 gives) and labels.
struct Batch {
  Tensor images;
  Tensor labels;
  explicit Batch(int64_t n)
      : images(DT_FLOAT, TensorShape({n, 28, 28, 1})), labels(DT_INT32, TensorShape({n})) {
    std::mt19937 rng(7);
    std::uniform_int_distribution<int> pixel(0, 255), label(0, 9);
    for (float& v : images.flat<float>()) v = static_cast<float>(pixel(rng)) / 255.0f;
    for (int32_t& v : labels.flat<int32_t>()) v = label(rng);
  }
};

// The example's graph: training step, inference path, Adam, global step.
struct CnnProgram {
  Scope root = Scope::NewRootScope();
  std::shared_ptr<Sequential> model = examples::FashionMnistModel();
  std::shared_ptr<Adam> optimizer = Adam::Make({.learning_rate = 1e-3f});
  std::shared_ptr<Variable> step;
  Output images, labels, loss, train_op, predictions, init;

  CnnProgram() {
    root.graph().set_seed(1);
    images = ops::Placeholder(root, DT_FLOAT, {.shape = {-1, 28, 28, 1}});
    labels = ops::Placeholder(root, DT_INT32, {.shape = {-1}});
    step =
        Variable::Create(root, "global_step", ops::Const<int64_t>(root, 0), {.trainable = false});
  }
  // Builds the ops after `checkpoint` (if any) was made, as the example does.
  void Build() {
    loss = losses::SparseSoftmaxCrossEntropyWithLogits(root, labels, (*model)(root, images, true));
    train_op = optimizer->Minimize(root, loss, {}, step);
    predictions =
        ops::ArgMax(root, (*model)(root, images, false), ops::Const<int32_t>(root, 1), DT_INT32);
    init = GlobalVariablesInitializer(root);
    Check(root.status());
  }
  std::unique_ptr<Session> NewSession(int threads) {
    return Value(Session::Create(root.graph(), {.inter_op_parallelism_threads = threads,
                                                .intra_op_parallelism_threads = threads}));
  }
};

void ThreadCases(benchmark::internal::Benchmark* b) {
  b->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
}

void BM_CnnTrainStep(benchmark::State& state) {
  CnnProgram p;
  p.Build();
  auto session = p.NewSession(static_cast<int>(state.range(0)));
  Check(session->Run({}, {}, {p.init}).status());
  const Batch batch(64);
  const std::vector<Feed> feeds = {{p.images, batch.images}, {p.labels, batch.labels}};
  for (int i = 0; i < 3; ++i) Check(session->Run(feeds, {p.loss}, {p.train_op}).status());
  for (auto _ : state) {
    benchmark::DoNotOptimize(session->Run(feeds, {p.loss}, {p.train_op}));
  }
  state.counters["images_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations() * 64), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_CnnTrainStep)->Apply(ThreadCases);

void BM_CnnInference(benchmark::State& state) {
  CnnProgram p;
  p.Build();
  auto session = p.NewSession(static_cast<int>(state.range(0)));
  Check(session->Run({}, {}, {p.init}).status());
  const Batch batch(256);
  const std::vector<Feed> feeds = {{p.images, batch.images}};
  for (int i = 0; i < 3; ++i) Check(session->Run(feeds, {p.predictions}).status());
  for (auto _ : state) benchmark::DoNotOptimize(session->Run(feeds, {p.predictions}));
  state.counters["images_per_s"] = benchmark::Counter(static_cast<double>(state.iterations() * 256),
                                                      benchmark::Counter::kIsRate);
}
BENCHMARK(BM_CnnInference)->Apply(ThreadCases);

void BM_CnnBuildGraph(benchmark::State& state) {
  int nodes = 0;
  for (auto _ : state) {
    CnnProgram p;
    p.Build();
    auto session = p.NewSession(1);
    nodes = p.root.graph().num_nodes();
    benchmark::DoNotOptimize(session);
  }
  state.counters["nodes"] = nodes;
}
BENCHMARK(BM_CnnBuildGraph)->Unit(benchmark::kMillisecond);

void BM_CnnCheckpoint(benchmark::State& state) {
  const bool restore = state.range(0) == 1;
  const workloads::ScratchDir dir("cnn_bench");
  if (dir.path().empty()) {
    state.SkipWithError("cannot create a directory for the checkpoints");
    return;
  }
  const std::string prefix = dir.path() + "/ckpt";
  CnnProgram trained;
  Checkpoint checkpoint(
      trained.root,
      {{"optimizer", trained.optimizer}, {"model", trained.model}, {"step", trained.step}});
  trained.Build();
  auto session = trained.NewSession(0);
  Check(session->Run({}, {}, {trained.init}).status());
  const Batch batch(64);
  Check(session
            ->Run({{trained.images, batch.images}, {trained.labels, batch.labels}}, {},
                  {trained.train_op})
            .status());  // Adam's slots hold values
  // Saved once (not written) so that the checkpoint holds save_counter: the
  // restoring Checkpoint creates one, and AssertConsumed wants it bound.
  const std::string written = Value(checkpoint.Save(prefix, *session));
  const auto variables = static_cast<double>(GlobalVariables(trained.root.graph()).size());
  using Clock = std::chrono::steady_clock;
  double seconds = 0;
  for (auto _ : state) {
    double iteration = 0;
    if (!restore) {
      const auto t0 = Clock::now();
      Check(checkpoint.Write(prefix, *session).status());
      iteration = std::chrono::duration<double>(Clock::now() - t0).count();
    } else {
      // Restore (reading the object graph, deferring what is not built),
      // then building the graph untimed, then running the restore ops.
      CnnProgram fresh;
      Checkpoint other(
          fresh.root,
          {{"optimizer", fresh.optimizer}, {"model", fresh.model}, {"step", fresh.step}});
      auto t0 = Clock::now();
      LoadStatus status = Value(other.Restore(written));
      iteration = std::chrono::duration<double>(Clock::now() - t0).count();
      fresh.Build();
      auto fresh_session = fresh.NewSession(0);
      t0 = Clock::now();
      Check(status.InitializeOrRestore(*fresh_session));
      Check(status.AssertConsumed());
      iteration += std::chrono::duration<double>(Clock::now() - t0).count();
    }
    state.SetIterationTime(iteration);
    seconds += iteration;
  }
  state.counters["variables"] = variables;
  state.counters["us_per_variable"] =
      seconds / static_cast<double>(state.iterations()) / variables * 1e6;
}
BENCHMARK(BM_CnnCheckpoint)
    ->ArgName("restore")
    ->Arg(0)
    ->Arg(1)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace ckflow

BENCHMARK_MAIN();
