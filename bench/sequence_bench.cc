// The sequence models' costs, each beside a baseline measured in the same
// run, for bench/report.py (bench/sequence_peers.py times the same work in
// TensorFlow and PyTorch):
//
//   BM_TransformerTrainStep/threads:N  one training step of the character
//                               transformer (examples/char_transformer_model.h:
//                               batch 32 x 128 bytes, d_model 128, 2 blocks,
//                               Adam), the session's inter- and intra-op
//                               threads both N. Counter: tokens_per_s
//   BM_BatchMatMul/threads:N    the attention scores, BatchMatMulV2 of
//                               [32,4,128,32] by the same transposed
//   BM_BatchMatMulAsGemm/threads:N  one MatMul of the same FLOPs
//   BM_AttentionLayer/threads:N the causal MultiHeadAttention layer's
//                               forward pass on [32,128,128]
//   BM_AttentionAsGemm/threads:N    one MatMul of the same FLOPs
//                               (Counter of the four: gflops)
//   BM_SparseAdagrad/threads:N  ResourceSparseApplyAdagrad on a table of
//                               2^20 x 128 floats, 16,384 distinct rows a step
//   BM_SparseAdagradHandLoop    the same update in a plain loop
//                               (Counter of both: rows_per_s)
//   BM_PartitionedTableSave     the recommender's table (2^21 x 128 floats,
//                               1 GiB, in 8 parts) by Checkpoint::Write
//   BM_PartitionedTableRawWrite raw pwrite of the same bytes, 2 threads
//   BM_PartitionedTableRestore/parts:P  its checkpoint restored into P parts
//                               (Restore + InitializeOrRestore, CRCs checked)
//   BM_PartitionedTableRawRead  raw pread + CRC32C of the same bytes
//                               (bytes_per_second for the four)
//
// CKFLOW_BENCH_DIR: where checkpoints are written (default: a temp dir).
// CKFLOW_BENCH_TABLE_ROWS: the table's rows (default 2^21; ctest uses fewer).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "examples/char_transformer_model.h"
#include "ops/array_ops.h"
#include "ops/initializers.h"
#include "ops/losses.h"
#include "ops/math_ops.h"
#include "ops/optimizers.h"
#include "ops/partitioned_variables.h"
#include "ops/sequence_layers.h"
#include "ops/training_ops.h"
#include "ops/variables.h"
#include "runtime/session.h"
#include "workloads/model_program.h"
#include "workloads/raw_io.h"
#include "workloads/scratch_dir.h"

namespace ckflow {
namespace {

using Clock = std::chrono::steady_clock;

void Check(const Status& s) {
  if (!s.ok()) {
    std::fprintf(stderr, "sequence_bench: %s\n", s.ToString().c_str());
    std::abort();
  }
}

template <typename T>
T Value(StatusOr<T> v) {
  Check(v.status());
  return std::move(v).value();
}

std::unique_ptr<Session> NewSession(const Scope& root, int threads) {
  return Value(Session::Create(root.graph(), {.inter_op_parallelism_threads = threads,
                                              .intra_op_parallelism_threads = threads}));
}

void ThreadCases(benchmark::internal::Benchmark* b) {
  b->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
}

Tensor RandomFloats(const TensorShape& shape, uint32_t seed) {
  Tensor t(DT_FLOAT, shape);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0, 1);
  for (float& v : t.flat<float>()) v = normal(rng);
  return t;
}

// ------------------------------------------------------------- transformer

void BM_TransformerTrainStep(benchmark::State& state) {
  constexpr int64_t kBatch = 32, kContext = 128;
  Scope root = Scope::NewRootScope();
  root.graph().set_seed(1);
  Output ids = ops::Placeholder(root, DT_INT32, {.shape = {-1, kContext}});
  Output labels = ops::Placeholder(root, DT_INT32, {.shape = {-1}});
  examples::CharTransformer model(examples::TransformerConfig{.context = kContext, .blocks = 2});
  Output logits = model(root, ids, /*training=*/true);
  Output loss = losses::SparseSoftmaxCrossEntropyWithLogits(
      root, labels, ops::Reshape(root, logits, Tensor::FromVector<int64_t>({-1, 256})));
  Output train_op = Adam::Make({.learning_rate = 1e-3f})->Minimize(root, loss);
  Output init = GlobalVariablesInitializer(root);
  Check(root.status());
  auto session = NewSession(root, static_cast<int>(state.range(0)));
  Check(session->Run({}, {}, {init}).status());
  Tensor batch_ids(DT_INT32, TensorShape({kBatch, kContext}));
  Tensor batch_labels(DT_INT32, TensorShape({kBatch * kContext}));
  std::mt19937 rng(0);
  for (int32_t& v : batch_ids.flat<int32_t>()) v = static_cast<int32_t>(rng() % 256);
  for (int32_t& v : batch_labels.flat<int32_t>()) v = static_cast<int32_t>(rng() % 256);
  const std::vector<Feed> feeds = {{ids, batch_ids}, {labels, batch_labels}};
  for (int i = 0; i < 3; ++i) Check(session->Run(feeds, {loss}, {train_op}).status());
  for (auto _ : state) benchmark::DoNotOptimize(session->Run(feeds, {loss}, {train_op}));
  state.counters["tokens_per_s"] = benchmark::Counter(
      static_cast<double>(state.iterations() * kBatch * kContext), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_TransformerTrainStep)->Apply(ThreadCases);

// Runs `out` from constant inputs, counting `flops` per run.
void TimeOutput(benchmark::State& state, const Scope& root, const Output& out, double flops) {
  Check(root.status());
  auto session = NewSession(root, static_cast<int>(state.range(0)));
  for (int i = 0; i < 3; ++i) Check(session->Run({}, {out}).status());
  for (auto _ : state) benchmark::DoNotOptimize(session->Run({}, {out}));
  state.counters["gflops"] = benchmark::Counter(
      flops * static_cast<double>(state.iterations()) * 1e-9, benchmark::Counter::kIsRate);
}

// q [32, 4, 128, 32] times k [32, 4, 128, 32] transposed: the scores.
constexpr int64_t kB = 32, kH = 4, kT = 128, kDh = 32, kD = 128;
constexpr double kScoresFlops = 2.0 * kB * kH * kT * kT * kDh;

void BM_BatchMatMul(benchmark::State& state) {
  Scope root = Scope::NewRootScope();
  Output q = ops::Const(root, RandomFloats({kB, kH, kT, kDh}, 1));
  Output k = ops::Const(root, RandomFloats({kB, kH, kT, kDh}, 2));
  TimeOutput(state, root, ops::BatchMatMul(root, q, k, {.adj_y = true}), kScoresFlops);
}
BENCHMARK(BM_BatchMatMul)->Apply(ThreadCases);

// The same FLOPs as one GEMM: [B*H*T, Dh] x [Dh, T].
void BM_BatchMatMulAsGemm(benchmark::State& state) {
  Scope root = Scope::NewRootScope();
  Output a = ops::Const(root, RandomFloats({kB * kH * kT, kDh}, 1));
  Output b = ops::Const(root, RandomFloats({kDh, kT}, 2));
  TimeOutput(state, root, ops::MatMul(root, a, b), kScoresFlops);
}
BENCHMARK(BM_BatchMatMulAsGemm)->Apply(ThreadCases);

// Four projections of [B*T, D] by [D, D] and two batched products.
constexpr double kAttentionFlops = 4 * 2.0 * kB * kT * kD * kD + 2 * kScoresFlops;

void BM_AttentionLayer(benchmark::State& state) {
  Scope root = Scope::NewRootScope();
  root.graph().set_seed(1);
  Output x = ops::Const(root, RandomFloats({kB, kT, kD}, 3));
  auto attention = MultiHeadAttention::Make(kH, kDh, {.use_causal_mask = true});
  Output y = (*attention)(root, x, /*training=*/false);
  Output init = GlobalVariablesInitializer(root);
  Check(root.status());
  auto session = NewSession(root, static_cast<int>(state.range(0)));
  Check(session->Run({}, {}, {init}).status());
  for (int i = 0; i < 3; ++i) Check(session->Run({}, {y}).status());
  for (auto _ : state) benchmark::DoNotOptimize(session->Run({}, {y}));
  state.counters["gflops"] =
      benchmark::Counter(kAttentionFlops * static_cast<double>(state.iterations()) * 1e-9,
                         benchmark::Counter::kIsRate);
}
BENCHMARK(BM_AttentionLayer)->Apply(ThreadCases);

// The same FLOPs as one GEMM: [B*T, D] x [D, N], N = FLOPs / (2 B T D).
void BM_AttentionAsGemm(benchmark::State& state) {
  constexpr auto kN = static_cast<int64_t>(kAttentionFlops / (2.0 * kB * kT * kD));
  Scope root = Scope::NewRootScope();
  Output a = ops::Const(root, RandomFloats({kB * kT, kD}, 1));
  Output b = ops::Const(root, RandomFloats({kD, kN}, 2));
  TimeOutput(state, root, ops::MatMul(root, a, b), 2.0 * kB * kT * kD * kN);
}
BENCHMARK(BM_AttentionAsGemm)->Apply(ThreadCases);

// ---------------------------------------------------------- sparse updates

constexpr int64_t kTableRows = int64_t{1} << 20, kRowsPerStep = 16384;
constexpr float kLearningRate = 0.01f;

// kRowsPerStep distinct rows of the table, in random order.
std::vector<int64_t> DistinctRows() {
  std::vector<int64_t> all(kTableRows);
  std::iota(all.begin(), all.end(), 0);
  std::mt19937_64 rng(1);
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(kRowsPerStep);
  return all;
}

void BM_SparseAdagrad(benchmark::State& state) {
  Scope root = Scope::NewRootScope();
  auto table =
      Variable::Create(root, "table", DT_FLOAT, {kTableRows, kD}, initializers::Constant(0.01));
  auto accum = Variable::Create(root, "accum", DT_FLOAT, {kTableRows, kD},
                                initializers::Constant(0.1), {.trainable = false});
  Output grad = ops::Const(root, RandomFloats({kRowsPerStep, kD}, 4));
  Output indices = ops::Const(root, Tensor::FromVector(DistinctRows()));
  Output update =
      ops::ResourceSparseApplyAdagrad(root, table->handle(), accum->handle(),
                                      ops::Const<float>(root, kLearningRate), grad, indices);
  Output init = GlobalVariablesInitializer(root);
  Check(root.status());
  auto session = NewSession(root, static_cast<int>(state.range(0)));
  Check(session->Run({}, {}, {init}).status());
  for (int i = 0; i < 3; ++i) Check(session->Run({}, {}, {update}).status());
  for (auto _ : state) Check(session->Run({}, {}, {update}).status());
  state.counters["rows_per_s"] = benchmark::Counter(
      static_cast<double>(state.iterations() * kRowsPerStep), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_SparseAdagrad)->Apply(ThreadCases);

// The same update, written out: accum += g^2; var -= lr * g / sqrt(accum).
void BM_SparseAdagradHandLoop(benchmark::State& state) {
  std::vector<float> table(kTableRows * kD, 0.01f), accum(kTableRows * kD, 0.1f);
  const Tensor grad = RandomFloats({kRowsPerStep, kD}, 4);
  const std::span<const float> g = grad.flat<float>();
  const std::vector<int64_t> rows = DistinctRows();
  auto step = [&] {
    for (int64_t i = 0; i < kRowsPerStep; ++i) {
      float* v = table.data() + rows[i] * kD;
      float* a = accum.data() + rows[i] * kD;
      const float* gi = g.data() + i * kD;
      for (int64_t j = 0; j < kD; ++j) {
        a[j] += gi[j] * gi[j];
        v[j] -= kLearningRate * gi[j] / std::sqrt(a[j]);
      }
    }
  };
  for (int i = 0; i < 3; ++i) step();
  for (auto _ : state) {
    step();
    benchmark::ClobberMemory();
  }
  state.counters["rows_per_s"] = benchmark::Counter(
      static_cast<double>(state.iterations() * kRowsPerStep), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_SparseAdagradHandLoop)->UseRealTime()->Unit(benchmark::kMillisecond);

// ------------------------------------------------ the partitioned table

int64_t TableRows() {
  const char* env = std::getenv("CKFLOW_BENCH_TABLE_ROWS");
  return env != nullptr ? std::atoll(env) : int64_t{1} << 21;
}

// A graph holding the table in `parts` parts, and its checkpoint.
struct TableProgram {
  explicit TableProgram(int parts) {
    table = PartitionedVariable::Create(root, "embedding", DT_FLOAT, {TableRows(), kD},
                                        initializers::Constant(0.25), {.num_shards = parts});
    checkpoint.emplace(root, Checkpoint::Dependencies{{"embedding", table}});
    Check(root.status());
    session = NewSession(root, 0);
  }
  int64_t bytes() const { return TableRows() * kD * 4; }
  Scope root = Scope::NewRootScope();
  std::shared_ptr<PartitionedVariable> table;
  std::optional<Checkpoint> checkpoint;
  std::unique_ptr<Session> session;
};

void BM_PartitionedTableSave(benchmark::State& state) {
  const workloads::ScratchDir dir("sequence_bench");
  TableProgram p(8);
  Check(p.session->Run({}, {}, {p.table->initializer()}).status());
  for (auto _ : state) {
    const auto t0 = Clock::now();
    Check(p.checkpoint->Write(dir.path() + "/ckpt", *p.session).status());
    state.SetIterationTime(workloads::SecondsSince(t0));
  }
  state.SetBytesProcessed(state.iterations() * p.bytes());
}
BENCHMARK(BM_PartitionedTableSave)->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_PartitionedTableRawWrite(benchmark::State& state) {
  const workloads::ScratchDir dir("sequence_bench");
  const int64_t bytes = TableRows() * kD * 4;
  std::vector<std::vector<char>> buffers(8, std::vector<char>(bytes / 8, 1));
  for (auto _ : state) {
    const double seconds = workloads::RawWrite(dir.path() + "/raw", buffers, 2, false, 2);
    if (seconds < 0) {
      state.SkipWithError("raw write failed");
      return;
    }
    state.SetIterationTime(seconds);
  }
  state.SetBytesProcessed(state.iterations() * bytes);
}
BENCHMARK(BM_PartitionedTableRawWrite)->UseManualTime()->Unit(benchmark::kMillisecond);

// The 8-part table's checkpoint, written once per process; its directory
// goes at exit (in /dev/shm it would otherwise hold 1 GiB of memory).
const std::string& SavedTable() {
  static const workloads::ScratchDir dir("sequence_bench");
  static const std::string path = [] {
    TableProgram p(8);
    Check(p.session->Run({}, {}, {p.table->initializer()}).status());
    return Value(p.checkpoint->Save(dir.path() + "/ckpt", *p.session));
  }();
  return path;
}

void BM_PartitionedTableRestore(benchmark::State& state) {
  const std::string& path = SavedTable();
  TableProgram p(static_cast<int>(state.range(0)));
  Check(p.session->Run({}, {}, {p.table->initializer()}).status());
  for (auto _ : state) {
    const auto t0 = Clock::now();
    LoadStatus status = Value(p.checkpoint->Restore(path));
    Check(status.InitializeOrRestore(*p.session));
    state.SetIterationTime(workloads::SecondsSince(t0));
  }
  state.SetBytesProcessed(state.iterations() * p.bytes());
}
BENCHMARK(BM_PartitionedTableRestore)
    ->ArgName("parts")
    ->Arg(8)
    ->Arg(3)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

void BM_PartitionedTableRawRead(benchmark::State& state) {
  const workloads::ValueLayout layout = Value(workloads::LayoutOf(SavedTable()));
  std::vector<std::vector<char>> buffers;
  int64_t bytes = 0;
  for (const workloads::Piece& piece : layout.pieces) {
    buffers.emplace_back(piece.size, 1);
    bytes += piece.size;
  }
  uint32_t sink = 0;
  for (auto _ : state) {
    const double seconds =
        workloads::RawReadCrc(layout.data_files, layout.pieces, buffers, 2, &sink);
    if (seconds < 0) {
      state.SkipWithError("raw read failed");
      return;
    }
    state.SetIterationTime(seconds);
  }
  benchmark::DoNotOptimize(sink);
  state.SetBytesProcessed(state.iterations() * bytes);
}
BENCHMARK(BM_PartitionedTableRawRead)->UseManualTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace ckflow

BENCHMARK_MAIN();
