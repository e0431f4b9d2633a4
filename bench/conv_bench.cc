// Conv2D's three passes against their ceiling, the GEMM of the same
// multiply-adds, on the same threads, through the same Session.
//
//   BM_Conv2D/<shape>/<pass>/threads:N
//     shape: ResNet-like layers at batch 32 (res56: 56x56x64 3x3 -> 64,
//            res28: 28x28x128 3x3 -> 128, res7: 7x7x512 1x1 -> 512, all
//            SAME) and the Fashion-MNIST CNN's two convolutions at batch 64
//            (cnn1: 28x28x1 3x3 -> 32, cnn2: 13x13x32 3x3 -> 64, VALID)
//     pass:  forward (Conv2D), input (Conv2DBackpropInput), filter
//            (Conv2DBackpropFilter)
//     N:     a tbb::global_control limit (1 or 2)
//
// Each iteration runs the convolution's node and, interleaved with it, the
// baseline: a MatMul node of [batch * out_rows * out_cols, rows * cols *
// in_depth] x [rows * cols * in_depth, out_depth], the multiply-adds of the
// convolution as one GEMM with no patches to build. Counters:
//   GFLOPs      2 * multiply-adds / the convolution's time
//   gemm_GFLOPs the same for the GEMM
//   x_gemm      gemm time / convolution time (1 = the ceiling)
// bench/conv_peers.py times TensorFlow's and PyTorch's convolutions on the
// same shapes. CKFLOW_CONV_BENCH_BATCH=N replaces every batch size by N (the
// ctest smoke run: the CNN shapes at batch 1).
#include <benchmark/benchmark.h>
#include <tbb/global_control.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "ops/array_ops.h"
#include "ops/conv_ops.h"
#include "ops/math_ops.h"
#include "runtime/session.h"

namespace ckflow {
namespace {

struct Shape {
  const char* name;
  int64_t batch, rows, cols, depth, window, out_depth;
  const char* padding;
};

constexpr Shape kShapes[] = {
    {"res56", 32, 56, 56, 64, 3, 64, "SAME"}, {"res28", 32, 28, 28, 128, 3, 128, "SAME"},
    {"res7", 32, 7, 7, 512, 1, 512, "SAME"},  {"cnn1", 64, 28, 28, 1, 3, 32, "VALID"},
    {"cnn2", 64, 13, 13, 32, 3, 64, "VALID"},
};
constexpr const char* kPasses[] = {"forward", "input", "filter"};

void Check(const Status& s) {
  if (!s.ok()) {
    std::fprintf(stderr, "conv_bench: %s\n", s.ToString().c_str());
    std::abort();
  }
}

Tensor Random(const std::vector<int64_t>& dims, std::mt19937& rng) {
  Tensor t(DT_FLOAT, TensorShape(dims));
  std::uniform_real_distribution<float> dist(-1, 1);
  for (float& v : t.flat<float>()) v = dist(rng);
  return t;
}

// One node fed from placeholders, run again and again.
class OneOp {
 public:
  OneOp(Scope root, Output out, std::vector<Feed> feeds)
      : root_(std::move(root)), out_(out), feeds_(std::move(feeds)) {
    Check(root_.status());
    auto session = Session::Create(root_.graph());
    Check(session.status());
    session_ = std::move(session).value();
  }
  void Run() {
    auto result = session_->Run(feeds_, {out_});
    Check(result.status());
    benchmark::DoNotOptimize(result);
  }

 private:
  Scope root_;
  Output out_;
  std::vector<Feed> feeds_;
  std::unique_ptr<Session> session_;
};

std::unique_ptr<OneOp> MakeConv(const Shape& s, int pass, int64_t out_rows, int64_t out_cols) {
  std::mt19937 rng(1);
  const std::vector<int64_t> input = {s.batch, s.rows, s.cols, s.depth};
  const std::vector<int64_t> filter = {s.window, s.window, s.depth, s.out_depth};
  const std::vector<int64_t> out = {s.batch, out_rows, out_cols, s.out_depth};
  const ops::Conv2DAttrs attrs = {.strides = {1, 1, 1, 1}, .padding = s.padding};
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_FLOAT, {.shape = PartialShape(input)});
  Output f = ops::Placeholder(root, DT_FLOAT, {.shape = PartialShape(filter)});
  Output dy = ops::Placeholder(root, DT_FLOAT, {.shape = PartialShape(out)});
  auto sizes = [&](const std::vector<int64_t>& v) { return ops::Const<int64_t>(root, v, {4}); };
  Output y;
  std::vector<Feed> feeds;
  if (pass == 0) {
    y = ops::Conv2D(root, x, f, attrs);
    feeds = {{x, Random(input, rng)}, {f, Random(filter, rng)}};
  } else if (pass == 1) {
    y = ops::Conv2DBackpropInput(root, sizes(input), f, dy, attrs);
    feeds = {{f, Random(filter, rng)}, {dy, Random(out, rng)}};
  } else {
    y = ops::Conv2DBackpropFilter(root, x, sizes(filter), dy, attrs);
    feeds = {{x, Random(input, rng)}, {dy, Random(out, rng)}};
  }
  return std::make_unique<OneOp>(std::move(root), y, std::move(feeds));
}

std::unique_ptr<OneOp> MakeGemm(int64_t m, int64_t k, int64_t n) {
  std::mt19937 rng(2);
  Scope root = Scope::NewRootScope();
  Output a = ops::Placeholder(root, DT_FLOAT, {.shape = {m, k}});
  Output b = ops::Placeholder(root, DT_FLOAT, {.shape = {k, n}});
  Output c = ops::MatMul(root, a, b);
  return std::make_unique<OneOp>(
      std::move(root), c, std::vector<Feed>{{a, Random({m, k}, rng)}, {b, Random({k, n}, rng)}});
}

// The batch to run `s` with: its own, or CKFLOW_CONV_BENCH_BATCH's.
int64_t BatchOf(const Shape& s) {
  const char* batch = std::getenv("CKFLOW_CONV_BENCH_BATCH");
  return batch != nullptr ? std::atoll(batch) : s.batch;
}

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

void BM_Conv2D(benchmark::State& state, Shape s, int pass) {
  s.batch = BatchOf(s);
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, state.range(0));
  const bool same = std::string(s.padding) == "SAME";
  const int64_t out_rows = same ? s.rows : s.rows - s.window + 1;
  const int64_t out_cols = same ? s.cols : s.cols - s.window + 1;
  const int64_t m = s.batch * out_rows * out_cols;
  const int64_t k = s.window * s.window * s.depth;
  auto conv = MakeConv(s, pass, out_rows, out_cols);
  auto gemm = MakeGemm(m, k, s.out_depth);
  double conv_s = 0, gemm_s = 0;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    conv->Run();
    auto t1 = std::chrono::steady_clock::now();
    gemm->Run();
    auto t2 = std::chrono::steady_clock::now();
    state.SetIterationTime(Seconds(t1 - t0));
    conv_s += Seconds(t1 - t0);
    gemm_s += Seconds(t2 - t1);
  }
  const double flops = 2.0 * static_cast<double>(m * k * s.out_depth);
  const auto n = static_cast<double>(state.iterations());
  state.counters["GFLOPs"] = flops * n / conv_s * 1e-9;
  state.counters["gemm_GFLOPs"] = flops * n / gemm_s * 1e-9;
  state.counters["x_gemm"] = gemm_s / conv_s;
}

int RegisterAll() {
  for (const Shape& s : kShapes) {
    for (int pass = 0; pass < 3; ++pass) {
      const std::string name = std::string("BM_Conv2D/") + s.name + "/" + kPasses[pass];
      benchmark::RegisterBenchmark(name.c_str(), BM_Conv2D, s, pass)
          ->ArgName("threads")
          ->Arg(1)
          ->Arg(2)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
  return 0;
}

const int registered = RegisterAll();

}  // namespace
}  // namespace ckflow

BENCHMARK_MAIN();
