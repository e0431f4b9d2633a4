// What a fused product op (_FusedConv2D, _FusedMatMul) applies to its
// output: TensorFlow's remapper ops, which the session substitutes for a
// Conv2D or MatMul followed by BiasAdd, then (convolutions) an inference
// FusedBatchNormV3, then Relu or Relu6, then (convolutions) a MaxPool
// (runtime/remapper_internal.h).
//
// The point is memory traffic, not arithmetic: each of those ops is one
// more pass over a tensor that no longer fits in cache (a batch of the
// Fashion-MNIST CNN's first convolution is 22 MB), while the fused op
// applies them to each block of output rows right after the GEMM wrote it.
// Every step is the very expression of the op it replaces, shared with that
// op's kernel, so a fused run gives the same bits as the separate ops.

#ifndef CKFLOW_OPS_FUSED_EPILOGUE_INTERNAL_H_
#define CKFLOW_OPS_FUSED_EPILOGUE_INTERNAL_H_

#include <Eigen/Core>
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/tensor.h"
#include "graph/op_def.h"
#include "ops/cwise_internal.h"
#include "ops/window_internal.h"

namespace ckflow::internal {

// ------------------------------------------------- the separate ops' math

// Elementwise passes over [rows, channels] go in runs of this many elements
// (whole rows): with per-channel vectors tiled to a run's length, a layer
// of 32 channels still makes long vector loops, not one short loop per
// row. Each element is computed by the same operations either way.
inline constexpr int64_t kRunElements = 1024;

inline int64_t RowsPerRun(int64_t channels) {
  return std::max<int64_t>(1, kRunElements / std::max<int64_t>(channels, 1));
}

// fn(at, length) over the elements of rows [b, e): runs of RowsPerRun rows,
// then the rows left one by one. A Tiled vector's head(length) fits either.
template <typename Fn>
void ForRuns(int64_t b, int64_t e, int64_t channels, Fn&& fn) {
  const int64_t run = RowsPerRun(channels);
  int64_t r = b;
  for (; r + run <= e; r += run) fn(r * channels, run * channels);
  for (; r < e; ++r) fn(r * channels, channels);
}

template <typename T>
Eigen::Array<T, Eigen::Dynamic, 1> Tiled(const Eigen::Array<T, Eigen::Dynamic, 1>& v) {
  return v.replicate(RowsPerRun(v.size()), 1);
}

template <typename A>
auto ReluOf(const A& a) {
  return a.max(typename A::Scalar(0));
}
template <typename A>
auto Relu6Of(const A& a) {
  using S = typename A::Scalar;
  return a.max(S(0)).min(S(6));
}

// FusedBatchNormV3's factor per channel: scale / sqrt(variance + epsilon),
// in T as TensorFlow computes it.
template <typename V, typename S>
Eigen::Array<typename V::Scalar, Eigen::Dynamic, 1> BatchNormScaling(const V& variance,
                                                                     const S& scale,
                                                                     float epsilon) {
  using T = typename V::Scalar;
  return (variance + static_cast<T>(epsilon)).sqrt().inverse() * scale;
}

// y = (x - mean) * scaling + offset: the normalization itself.
template <typename X, typename V>
auto BatchNormOf(const X& x, const V& mean, const V& scaling, const V& offset) {
  return (x - mean) * scaling + offset;
}

// ------------------------------------------------------------- the epilogue

enum class Activation { kNone, kRelu, kRelu6 };

// The fused ops' attributes: fused_ops (in order: "BiasAdd", then
// optionally "FusedBatchNorm", then optionally "Relu" or "Relu6", then
// optionally "MaxPool"), epsilon, the MaxPool's pool_ksize, pool_strides
// and pool_padding, and fused_nodes, the names of the nodes they stand for
// (for messages).
struct EpilogueSpec {
  bool batch_norm = false;
  Activation activation = Activation::kNone;
  float epsilon = 1e-3f;
  // A MaxPool of the result, which the convolution applies itself (the
  // Epilogue class does not).
  bool max_pool = false;
  WindowAttrs pool;
  std::vector<std::string> nodes;  // [product, BiasAdd, (batch norm), (activation), (pool)]
  // The number of inputs after the product's two: bias, then scale,
  // offset, mean and variance with a batch norm.
  int num_args() const { return batch_norm ? 5 : 1; }
};

// InvalidArgument naming the attribute unless fused_ops is one of the
// sequences above (`convolution`: the product may carry a batch norm and a
// MaxPool) and fused_nodes names one node per fused op plus the product.
StatusOr<EpilogueSpec> ParseEpilogueSpec(const AttrMap& attrs, bool convolution);

// The epilogue of one run of a fused op, for `channels` output channels.
template <typename T>
class Epilogue {
 public:
  using Vector = Eigen::Array<T, Eigen::Dynamic, 1>;

  // Checks the args (inputs 2, 3, ... of `ctx`) are vectors of `channels`,
  // with errors naming the node each came from, and keeps them tiled.
  static StatusOr<Epilogue> Make(const EpilogueSpec& spec, const KernelContext& ctx,
                                 int64_t channels) {
    Epilogue e;
    e.activation_ = spec.activation;
    e.channels_ = channels;
    for (int i = 0; i < spec.num_args(); ++i) {
      const TensorShape& shape = ctx.input(2 + i).shape();
      if (shape.rank() != 1 || shape.dim(0) != channels) {
        static constexpr const char* kArgs[] = {"bias", "scale", "offset", "mean", "variance"};
        const std::string& node = spec.nodes[i == 0 ? 1 : 2];
        return InvalidArgumentError(node, ": ", kArgs[i], " is ", shape.ToString(),
                                    ", but must be a vector of the ", channels, " output channels");
      }
    }
    auto vec = [&](int i) { return ConstArrayMap<T>(ctx.input(2 + i).flat<T>().data(), channels); };
    e.bias_ = Tiled<T>(vec(0));
    if (spec.batch_norm) {
      e.batch_norm_ = true;
      e.mean_ = Tiled<T>(vec(3));
      e.scaling_ = Tiled<T>(Vector(BatchNormScaling(vec(4), vec(1), spec.epsilon)));
      e.offset_ = Tiled<T>(vec(2));
    }
    return e;
  }

  // Applies the epilogue to rows [b, e) of a dense [rows, channels] output.
  void ApplyToRows(T* out, int64_t b, int64_t e) const {
    ForRuns(b, e, channels_, [&](int64_t at, int64_t length) { Apply(out + at, length, 0); });
  }

  // Applies it to columns [c0, c0 + width) of rows [0, rows) of a
  // row-major [rows, channels] output.
  void ApplyToColumns(T* out, int64_t rows, int64_t c0, int64_t width) const {
    for (int64_t r = 0; r < rows; ++r) Apply(out + r * channels_ + c0, width, c0);
  }

 private:
  // `length` elements from channel `c0` on, in place: each step as its own
  // op computes it (BiasAdd: value + bias; FusedBatchNormV3: BatchNormOf;
  // Relu: ReluOf).
  void Apply(T* p, int64_t length, int64_t c0) const {
    ArrayMap<T> y(p, length);
    y = y + bias_.segment(c0, length);
    if (batch_norm_) {
      y = BatchNormOf(y, mean_.segment(c0, length), scaling_.segment(c0, length),
                      offset_.segment(c0, length));
    }
    if (activation_ == Activation::kRelu) y = ReluOf(y);
    if (activation_ == Activation::kRelu6) y = Relu6Of(y);
  }

  Activation activation_ = Activation::kNone;
  int64_t channels_ = 0;
  bool batch_norm_ = false;
  Vector bias_, mean_, scaling_, offset_;
};

}  // namespace ckflow::internal

#endif  // CKFLOW_OPS_FUSED_EPILOGUE_INTERNAL_H_
