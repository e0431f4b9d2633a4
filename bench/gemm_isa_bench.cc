// The six GEMMs of one MLP training step (784-256-256-10, batch 128: three
// forward, three weight gradients), one thread, with Eigen as ckflow's
// kernels call it. CMake builds this file twice: gemm_isa_bench with the
// project's -march (CKFLOW_ARCH) and gemm_isa_bench_baseline with the
// compiler's default x86-64 (SSE2), so running both shows what the
// instruction set is worth (bench/README.md, "Instruction set"). Separate
// executables, because one Eigen template compiled for two instruction sets
// in one program would break the one-definition rule.

#include <benchmark/benchmark.h>

#include <Eigen/Core>

namespace {

using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// m x k times k x n.
void BM_Gemm(benchmark::State& state) {
  const Eigen::Index m = state.range(0), k = state.range(1), n = state.range(2);
  const Matrix a = Matrix::Random(m, k), b = Matrix::Random(k, n);
  Matrix c(m, n);
  for (auto _ : state) {
    c.noalias() = a * b;
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(m * k * n),
                                                 benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
}
BENCHMARK(BM_Gemm)
    ->ArgNames({"m", "k", "n"})
    ->Args({128, 784, 256})
    ->Args({128, 256, 256})
    ->Args({128, 256, 10})
    ->Args({784, 128, 256})
    ->Args({256, 128, 256})
    ->Args({256, 128, 10})
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
