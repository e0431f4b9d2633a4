// MatMul and BatchMatMulV2: Eigen's GEMM on maps of the tensors, split over
// oneTBB.
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
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/parallel.h"
#include "base/tensor_eigen_internal.h"
#include "ops/fused_epilogue_internal.h"
#include "ops/math_ops.h"
#include "ops/ops_internal.h"
#include "ops/standard_ops.h"

namespace ckflow {
namespace internal {
namespace {

// Rows (or columns) per block: at least 128, because each block's GEMM packs
// the whole other operand again; with 128 rows that costs a few percent of
// the block's multiply-adds (with 32 it cost a third). And 256 where the
// matrix still splits in two so: a transformer's [4096, 128] x [128, 512]
// products made its training step 2-5% faster than 128-row blocks did...
constexpr int64_t kMinBlock = 128;
constexpr int64_t kWideBlock = 256;
// ...and enough for about this many multiply-adds per block (~0.1 ms on
// one core): a training step's 128 x 256 x 256 products still split in two.
constexpr int64_t kBlockWork = int64_t{1} << 21;

// The rows (or columns) of each of the equal blocks a GEMM of `len` rows
// (or columns) of `k` x `other` work each is cut into. By shape alone,
// never by the threads at hand: Eigen's blocking of a GEMM depends on its
// size, so the same blocks give the same bits on any number of threads.
int64_t BlockLength(int64_t len, int64_t k, int64_t other) {
  const int64_t least = std::clamp((len + 1) / 2, kMinBlock, kWideBlock);
  // k * other is one input's size: no overflow.
  const int64_t max_block = std::max(least, (kBlockWork + k * other - 1) / (k * other));
  const int64_t blocks = (len + max_block - 1) / max_block;
  // Blocks of equal size, so that two threads get equal halves.
  return (len + blocks - 1) / blocks;
}

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

// With `spec` (_FusedMatMul), the epilogue is applied to each block once
// its GEMM is done, while the block is in cache.
template <typename T>
Status MatMulCompute(KernelContext& ctx, bool ta, bool tb, const EpilogueSpec* spec = nullptr) {
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
  std::optional<Epilogue<T>> epilogue;
  if (spec != nullptr) {
    CKFLOW_ASSIGN_OR_RETURN(epilogue, Epilogue<T>::Make(*spec, ctx, n));
  }
  CKFLOW_ASSIGN_OR_RETURN(Tensor * out,
                          ctx.AllocateOutput(0, DataTypeOf<T>(), TensorShape({m, n})));
  if (m == 0 || n == 0) return OkStatus();
  MatrixMap<T> c = AsMatrix<T>(*out);
  if (k == 0) {
    c.setZero();
    if (epilogue) epilogue->ApplyToRows(c.data(), 0, m);
    return OkStatus();
  }
  ConstMatrixMap<T> am = AsMatrix<T>(a);
  ConstMatrixMap<T> bm = AsMatrix<T>(b);
  const bool by_rows = m >= n;
  const int64_t len = by_rows ? m : n;
  const int64_t other = by_rows ? n : m;
  const int64_t block = BlockLength(len, k, other);
  const int64_t blocks = (len + block - 1) / block;
  auto run = [&](const auto& lhs, const auto& rhs) {
    ParallelRange(blocks, block * k * other, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const int64_t start = i * block;
        const int64_t size = std::min(block, len - start);
        if (by_rows) {
          c.middleRows(start, size).noalias() = lhs.middleRows(start, size) * rhs;
          if (epilogue) epilogue->ApplyToRows(c.data(), start, start + size);
        } else {
          c.middleCols(start, size).noalias() = lhs * rhs.middleCols(start, size);
          if (epilogue) epilogue->ApplyToColumns(c.data(), m, start, size);
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

// _FusedMatMul (a, b, bias): a MatMul and the ops after it that the
// session's remapper folded in.
StatusOr<Kernel> FusedMatMulKernel(const Node& node) {
  const bool ta = node.attrs().GetOr<bool>("transpose_a", false);
  const bool tb = node.attrs().GetOr<bool>("transpose_b", false);
  CKFLOW_ASSIGN_OR_RETURN(EpilogueSpec spec,
                          ParseEpilogueSpec(node.attrs(), /*convolution=*/false));
  return DispatchFloat(node.output_type(0), [ta, tb, spec](auto tag) -> StatusOr<Kernel> {
    using T = typename decltype(tag)::type;
    return Kernel(
        [ta, tb, spec](KernelContext& ctx) { return MatMulCompute<T>(ctx, ta, tb, &spec); });
  });
}

Status FusedMatMulShapeFn(InferenceContext& c) {
  CKFLOW_ASSIGN_OR_RETURN(EpilogueSpec spec, ParseEpilogueSpec(*c.attrs, /*convolution=*/false));
  CKFLOW_RETURN_IF_ERROR(CheckSameDtype(c, 0, "a", 2, "bias"));
  return MatMulShapeFn(c);
}

// ------------------------------------------------------------ BatchMatMulV2
//
// Each output matrix is one GEMM of an x matrix and a y matrix, the batch
// dimensions broadcasting as NumPy's. The work is cut as MatMul cuts it,
// per matrix, into (batch, block of rows or columns) tasks whose extent
// depends only on the shapes, so the bits do not depend on the threads.

// The shape of the batch dimensions of a rank >= 2 shape (all but the last
// two), or unknown.
PartialShape BatchDims(const PartialShape& s) {
  if (!s.known_rank()) return PartialShape::Unknown();
  return PartialShape(std::vector<int64_t>(s.dims().begin(), s.dims().end() - 2));
}

Status BatchMatMulShapeFn(InferenceContext& c) {
  CKFLOW_RETURN_IF_ERROR(CheckSameDtype(c, 0, "x", 1, "y"));
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 0, "x", kFloatTypes));
  CKFLOW_RETURN_IF_ERROR(CheckRank(c, 0, "x", 2, std::numeric_limits<int>::max()));
  CKFLOW_RETURN_IF_ERROR(CheckRank(c, 1, "y", 2, std::numeric_limits<int>::max()));
  const bool ax = c.attrs->GetOr<bool>("adj_x", false);
  const bool ay = c.attrs->GetOr<bool>("adj_y", false);
  const PartialShape& x = c.input_shapes[0];
  const PartialShape& y = c.input_shapes[1];
  auto dim = [](const PartialShape& s, int from_end) {
    return s.known_rank() ? s.dim(s.rank() - from_end) : -1;
  };
  const int64_t m = dim(x, ax ? 1 : 2);
  const int64_t kx = dim(x, ax ? 2 : 1);
  const int64_t ky = dim(y, ay ? 1 : 2);
  const int64_t n = dim(y, ay ? 2 : 1);
  if (kx >= 0 && ky >= 0 && kx != ky) {
    return InvalidArgumentError("inner dimensions differ: ", Describe("x", x, ax, InputName(c, 0)),
                                ", ", Describe("y", y, ay, InputName(c, 1)));
  }
  std::optional<PartialShape> batch = BroadcastPartialShapes(BatchDims(x), BatchDims(y));
  if (!batch) {
    return InvalidArgumentError("batch dimensions do not broadcast: x is ", x.ToString(), " (",
                                InputName(c, 0), "), y is ", y.ToString(), " (", InputName(c, 1),
                                ")");
  }
  if (!batch->known_rank()) {
    c.AddOutput(c.input_types[0], PartialShape::Unknown());
    return OkStatus();
  }
  std::vector<int64_t> dims = batch->dim_sizes();
  dims.push_back(m);
  dims.push_back(n);
  c.AddOutput(c.input_types[0], PartialShape(std::move(dims)));
  return OkStatus();
}

template <typename T>
using UnalignedMatrixMap = Eigen::Map<RowMajorMatrix<T>>;
template <typename T>
using ConstUnalignedMatrixMap = Eigen::Map<const RowMajorMatrix<T>>;

// For each output matrix, the index of the x (or y) matrix it reads, given
// the batch dimensions of that input and of the output (NumPy broadcasting:
// the input's dimensions align right; a size-1 one repeats).
std::vector<int64_t> BatchSources(std::span<const int64_t> in, std::span<const int64_t> out) {
  int64_t count = 1;
  for (int64_t d : out) count *= d;
  std::vector<int64_t> sources(count, 0);
  const int shift = static_cast<int>(out.size() - in.size());
  // Input strides per output dimension; 0 where the input broadcasts.
  std::vector<int64_t> strides(out.size(), 0);
  int64_t stride = 1;
  for (int d = static_cast<int>(in.size()) - 1; d >= 0; --d) {
    if (in[d] != 1) strides[d + shift] = stride;
    stride *= in[d];
  }
  std::vector<int64_t> index(out.size(), 0);
  int64_t source = 0;
  for (int64_t b = 0; b < count; ++b) {
    sources[b] = source;
    for (int d = static_cast<int>(out.size()) - 1; d >= 0; --d) {
      source += strides[d];
      if (++index[d] < out[d]) break;
      source -= strides[d] * out[d];
      index[d] = 0;
    }
  }
  return sources;
}

template <typename T>
Status BatchMatMulCompute(KernelContext& ctx, bool ax, bool ay) {
  const Tensor& x = ctx.input(0);
  const Tensor& y = ctx.input(1);
  const int rx = x.shape().rank(), ry = y.shape().rank();
  if (rx < 2 || ry < 2) {
    return InvalidArgumentError("x and y must have rank >= 2: x is ", x.shape().ToString(),
                                ", y is ", y.shape().ToString());
  }
  const int64_t m = x.shape().dim(rx - (ax ? 1 : 2));
  const int64_t k = x.shape().dim(rx - (ax ? 2 : 1));
  const int64_t n = y.shape().dim(ry - (ay ? 2 : 1));
  if (k != y.shape().dim(ry - (ay ? 1 : 2))) {
    return InvalidArgumentError("inner dimensions differ: x is ", x.shape().ToString(),
                                ax ? " (adjoint)" : "", ", y is ", y.shape().ToString(),
                                ay ? " (adjoint)" : "");
  }
  const std::vector<int64_t> xb(x.shape().dims().begin(), x.shape().dims().end() - 2);
  const std::vector<int64_t> yb(y.shape().dims().begin(), y.shape().dims().end() - 2);
  std::optional<PartialShape> broadcast =
      BroadcastPartialShapes(PartialShape(xb), PartialShape(yb));
  if (!broadcast) {
    return InvalidArgumentError("batch dimensions do not broadcast: x is ", x.shape().ToString(),
                                ", y is ", y.shape().ToString());
  }
  const TensorShape batch = broadcast->ToTensorShape();
  std::vector<int64_t> out_dims(batch.dims().begin(), batch.dims().end());
  out_dims.push_back(m);
  out_dims.push_back(n);
  CKFLOW_ASSIGN_OR_RETURN(Tensor * out,
                          ctx.AllocateOutput(0, DataTypeOf<T>(), TensorShape(out_dims)));
  if (out->NumElements() == 0) return OkStatus();
  T* c = out->flat<T>().data();
  if (k == 0) {
    std::fill_n(c, out->NumElements(), T(0));
    return OkStatus();
  }
  const std::vector<int64_t> x_of = BatchSources(xb, batch.dims());
  const std::vector<int64_t> y_of = BatchSources(yb, batch.dims());
  const int64_t batches = static_cast<int64_t>(x_of.size());
  const T* xd = x.flat<T>().data();
  const T* yd = y.flat<T>().data();
  // One matrix's blocks, as MatMul's kernel cuts them.
  const bool by_rows = m >= n;
  const int64_t len = by_rows ? m : n;
  const int64_t other = by_rows ? n : m;
  const int64_t block = BlockLength(len, k, other);
  const int64_t blocks = (len + block - 1) / block;
  auto multiply = [&](int64_t b, int64_t start, int64_t size) {
    ConstUnalignedMatrixMap<T> xm(xd + x_of[b] * m * k, ax ? k : m, ax ? m : k);
    ConstUnalignedMatrixMap<T> ym(yd + y_of[b] * k * n, ay ? n : k, ay ? k : n);
    UnalignedMatrixMap<T> cm(c + b * m * n, m, n);
    auto run = [&](const auto& lhs, const auto& rhs) {
      if (by_rows) {
        cm.middleRows(start, size).noalias() = lhs.middleRows(start, size) * rhs;
      } else {
        cm.middleCols(start, size).noalias() = lhs * rhs.middleCols(start, size);
      }
    };
    if (!ax && !ay) {
      run(xm, ym);
    } else if (ax && !ay) {
      run(xm.transpose(), ym);
    } else if (!ax && ay) {
      run(xm, ym.transpose());
    } else {
      run(xm.transpose(), ym.transpose());
    }
  };
  ParallelRange(batches * blocks, block * k * other, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / blocks;
      const int64_t start = (task % blocks) * block;
      multiply(b, start, std::min(block, len - start));
    }
  });
  return OkStatus();
}

StatusOr<Kernel> BatchMatMulKernel(const Node& node) {
  const bool ax = node.attrs().GetOr<bool>("adj_x", false);
  const bool ay = node.attrs().GetOr<bool>("adj_y", false);
  return DispatchFloat(node.output_type(0), [ax, ay](auto tag) -> StatusOr<Kernel> {
    using T = typename decltype(tag)::type;
    return Kernel([ax, ay](KernelContext& ctx) { return BatchMatMulCompute<T>(ctx, ax, ay); });
  });
}

}  // namespace
}  // namespace internal

Status RegisterMatMulOps(OpRegistry& r) {
  CKFLOW_RETURN_IF_ERROR(internal::RegisterOp(r, {.type = "MatMul",
                                                  .inputs = {"a", "b"},
                                                  .shape_fn = internal::MatMulShapeFn,
                                                  .kernel_factory = internal::MatMulKernel}));
  CKFLOW_RETURN_IF_ERROR(internal::RegisterOp(r, {.type = "_FusedMatMul",
                                                  .inputs = {"a", "b", "bias"},
                                                  .shape_fn = internal::FusedMatMulShapeFn,
                                                  .kernel_factory = internal::FusedMatMulKernel}));
  return internal::RegisterOp(r, {.type = "BatchMatMulV2",
                                  .inputs = {"x", "y"},
                                  .shape_fn = internal::BatchMatMulShapeFn,
                                  .kernel_factory = internal::BatchMatMulKernel});
}

namespace ops {

Output MatMul(const Scope& scope, Input a, Input b, const MatMulAttrs& attrs) {
  AttrMap a_map;
  a_map.Set("transpose_a", attrs.transpose_a);
  a_map.Set("transpose_b", attrs.transpose_b);
  return internal::BuildOp(scope, "MatMul", {a, b}, std::move(a_map));
}

Output BatchMatMul(const Scope& scope, Input x, Input y, const BatchMatMulAttrs& attrs) {
  AttrMap a_map;
  a_map.Set("adj_x", attrs.adj_x);
  a_map.Set("adj_y", attrs.adj_y);
  return internal::BuildOp(scope, "BatchMatMulV2", {x, y}, std::move(a_map));
}

}  // namespace ops
}  // namespace ckflow
