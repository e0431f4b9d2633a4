// MatMul: Eigen's GEMM on maps of the tensors, split over oneTBB.
//
// Eigen's GEMM is single-threaded here (no OpenMP, and Eigen's own thread
// pool would be a second scheduler), so the kernel splits the output into
// blocks of rows (or of columns when it is wider than tall) and runs one
// GEMM per block on the session's oneTBB workers. Block sizes depend only on
// the matrix sizes, never on the thread count, so every element is computed
// by the same code path with the same blocking, and results are identical
// however many threads run.

#include <Eigen/Core>
#include <algorithm>
#include <string>

#include "base/parallel.h"
#include "base/tensor_eigen_internal.h"
#include "ops/math_ops.h"
#include "ops/ops_internal.h"
#include "ops/standard_ops.h"

namespace ckflow {
namespace internal {
namespace {

// Rows (or columns) per block: about this many at least, because each block's
// GEMM packs the whole other operand again; with 128 rows that costs a few
// percent of the block's multiply-adds (with 32 it cost a third)...
constexpr int64_t kMinBlock = 128;
// ...and enough for about this many multiply-adds per block (~0.1 ms on
// one core): a training step's 128 x 256 x 256 products still split in two.
constexpr int64_t kBlockWork = int64_t{1} << 21;

std::string Describe(std::string_view arg, const PartialShape& shape, bool transposed,
                     std::string_view name) {
  std::string out = std::string(arg) + " is " + shape.ToString() + " (" + std::string(name);
  return out + (transposed ? ", transposed)" : ")");
}

Status MatMulShapeFn(InferenceContext& c) {
  CKFLOW_RETURN_IF_ERROR(CheckSameDtype(c, 0, "a", 1, "b"));
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 0, "a", kFloatTypes));
  CKFLOW_RETURN_IF_ERROR(CheckRank(c, 0, "a", 2, 2));
  CKFLOW_RETURN_IF_ERROR(CheckRank(c, 1, "b", 2, 2));
  const bool ta = c.attrs->GetOr<bool>("transpose_a", false);
  const bool tb = c.attrs->GetOr<bool>("transpose_b", false);
  const PartialShape& a = c.input_shapes[0];
  const PartialShape& b = c.input_shapes[1];
  const int64_t m = a.known_rank() ? a.dim(ta ? 1 : 0) : -1;
  const int64_t ka = a.known_rank() ? a.dim(ta ? 0 : 1) : -1;
  const int64_t kb = b.known_rank() ? b.dim(tb ? 1 : 0) : -1;
  const int64_t n = b.known_rank() ? b.dim(tb ? 0 : 1) : -1;
  if (ka >= 0 && kb >= 0 && ka != kb) {
    return InvalidArgumentError("inner dimensions differ: ", Describe("a", a, ta, InputName(c, 0)),
                                ", ", Describe("b", b, tb, InputName(c, 1)));
  }
  c.AddOutput(c.input_types[0], PartialShape({m, n}));
  return OkStatus();
}

template <typename T>
Status MatMulCompute(KernelContext& ctx, bool ta, bool tb) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (a.shape().rank() != 2 || b.shape().rank() != 2) {
    return InvalidArgumentError("a and b must have rank 2: a is ", a.shape().ToString(), ", b is ",
                                b.shape().ToString());
  }
  const int64_t m = a.shape().dim(ta ? 1 : 0);
  const int64_t k = a.shape().dim(ta ? 0 : 1);
  const int64_t n = b.shape().dim(tb ? 0 : 1);
  if (k != b.shape().dim(tb ? 1 : 0)) {
    return InvalidArgumentError("inner dimensions differ: a is ", a.shape().ToString(),
                                ta ? " (transposed)" : "", ", b is ", b.shape().ToString(),
                                tb ? " (transposed)" : "");
  }
  CKFLOW_ASSIGN_OR_RETURN(Tensor * out,
                          ctx.AllocateOutput(0, DataTypeOf<T>(), TensorShape({m, n})));
  if (m == 0 || n == 0) return OkStatus();
  MatrixMap<T> c = AsMatrix<T>(*out);
  if (k == 0) {
    c.setZero();
    return OkStatus();
  }
  ConstMatrixMap<T> am = AsMatrix<T>(a);
  ConstMatrixMap<T> bm = AsMatrix<T>(b);
  const bool by_rows = m >= n;
  const int64_t len = by_rows ? m : n;
  const int64_t other = by_rows ? n : m;  // k * other is one input's size: no overflow
  const int64_t max_block = std::max(kMinBlock, (kBlockWork + k * other - 1) / (k * other));
  // By shape alone, never by the threads at hand: Eigen's blocking of a
  // GEMM depends on its size, so the same blocks give the same bits on any
  // number of threads.
  const int64_t blocks = (len + max_block - 1) / max_block;
  // Blocks of equal size, so that two threads get equal halves.
  const int64_t block = (len + blocks - 1) / blocks;
  auto run = [&](const auto& lhs, const auto& rhs) {
    ParallelRange(blocks, block * k * other, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const int64_t start = i * block;
        const int64_t size = std::min(block, len - start);
        if (by_rows) {
          c.middleRows(start, size).noalias() = lhs.middleRows(start, size) * rhs;
        } else {
          c.middleCols(start, size).noalias() = lhs * rhs.middleCols(start, size);
        }
      }
    });
  };
  if (!ta && !tb) {
    run(am, bm);
  } else if (ta && !tb) {
    run(am.transpose(), bm);
  } else if (!ta && tb) {
    run(am, bm.transpose());
  } else {
    run(am.transpose(), bm.transpose());
  }
  return OkStatus();
}

StatusOr<Kernel> MatMulKernel(const Node& node) {
  const bool ta = node.attrs().GetOr<bool>("transpose_a", false);
  const bool tb = node.attrs().GetOr<bool>("transpose_b", false);
  return DispatchFloat(node.output_type(0), [ta, tb](auto tag) -> StatusOr<Kernel> {
    using T = typename decltype(tag)::type;
    return Kernel([ta, tb](KernelContext& ctx) { return MatMulCompute<T>(ctx, ta, tb); });
  });
}

}  // namespace
}  // namespace internal

Status RegisterMatMulOps(OpRegistry& r) {
  return internal::RegisterOp(r, {.type = "MatMul",
                                  .inputs = {"a", "b"},
                                  .shape_fn = internal::MatMulShapeFn,
                                  .kernel_factory = internal::MatMulKernel});
}

namespace ops {

Output MatMul(const Scope& scope, Input a, Input b, const MatMulAttrs& attrs) {
  AttrMap a_map;
  a_map.Set("transpose_a", attrs.transpose_a);
  a_map.Set("transpose_b", attrs.transpose_b);
  return internal::BuildOp(scope, "MatMul", {a, b}, std::move(a_map));
}

}  // namespace ops
}  // namespace ckflow
