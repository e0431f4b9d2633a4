// Normalization ops: FusedBatchNormV3 and FusedBatchNormGradV3 (channels
// last), their builders, and Keras' moving-average update.
//
// x is viewed as [rows, channels], rows = N*H*W. Per-channel sums run in
// double over blocks of rows (ChannelSums), each from partial sums of a few
// rows in the tensor's dtype (InGroups); everything elementwise runs in the
// tensor's own dtype, in TensorFlow's order of operations.

#include "ops/normalization_ops.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "ops/array_ops.h"
#include "ops/cwise_internal.h"
#include "ops/fused_epilogue_internal.h"
#include "ops/math_ops.h"
#include "ops/pooling_internal.h"
#include "ops/standard_ops.h"
#include "ops/variables.h"
#include "ops/window_internal.h"

namespace ckflow {
namespace internal {
namespace {

constexpr const char* kForwardArgs[] = {"x", "scale", "offset", "mean", "variance"};
constexpr const char* kGradArgs[] = {
    "y_backprop", "x", "scale", "reserve_space_1", "reserve_space_2", "reserve_space_3"};

struct BatchNormAttrs {
  float epsilon;
  float exponential_avg_factor;
  bool is_training;
  // Training with a factor of 1 never reads the mean and variance inputs.
  bool ReadsMeanAndVariance() const { return !is_training || exponential_avg_factor != 1.0f; }
};

StatusOr<BatchNormAttrs> ParseAttrs(const AttrMap& attrs) {
  BatchNormAttrs a{.epsilon = attrs.GetOr<float>("epsilon", 1e-4f),
                   .exponential_avg_factor = attrs.GetOr<float>("exponential_avg_factor", 1.0f),
                   .is_training = attrs.GetOr<bool>("is_training", true)};
  if (!std::isfinite(a.epsilon) || a.epsilon < 0) {
    return InvalidArgumentError("attribute epsilon is ", a.epsilon,
                                ", but must be finite and >= 0");
  }
  if (!std::isfinite(a.exponential_avg_factor)) {
    return InvalidArgumentError("attribute exponential_avg_factor is ", a.exponential_avg_factor,
                                ", but must be finite");
  }
  const std::string format = attrs.GetOr<std::string>("data_format", "NHWC");
  if (format != "NHWC") {
    return InvalidArgumentError("attribute data_format is '", format,
                                "', but only 'NHWC' (channels last) is supported");
  }
  return a;
}

// ------------------------------------------------------------ shape functions

// Checks the dtypes of inputs [0, n) (all the same float type), input
// `data` of rank 4, and inputs `vectors` of rank 1 whose length is the
// channel count (the last dimension of `data`). Returns the channel count
// (-1 if unknown).
StatusOr<int64_t> CheckBatchNormInputs(const InferenceContext& c, std::span<const char* const> args,
                                       int data, const std::vector<int>& vectors) {
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 0, args[0], kFloatTypes));
  for (size_t i = 1; i < args.size(); ++i) {
    CKFLOW_RETURN_IF_ERROR(CheckSameDtype(c, 0, args[0], static_cast<int>(i), args[i]));
  }
  CKFLOW_RETURN_IF_ERROR(CheckRank(c, data, args[data], 4, 4));
  const PartialShape& x = c.input_shapes[data];
  int64_t channels = x.known_rank() ? x.dim(3) : -1;
  int pinned_by = data;  // the input that fixed `channels`
  for (int i : vectors) {
    CKFLOW_RETURN_IF_ERROR(CheckRank(c, i, args[i], 1, 1));
    const PartialShape& v = c.input_shapes[i];
    if (!v.known_rank() || v.dim(0) < 0) continue;
    if (channels < 0) {
      channels = v.dim(0);
      pinned_by = i;
    } else if (v.dim(0) != channels) {
      return InvalidArgumentError("channel counts differ: ", args[pinned_by], " is ",
                                  c.input_shapes[pinned_by].ToString(), " (",
                                  InputName(c, pinned_by), "), ", args[i], " is ", v.ToString(),
                                  " (", InputName(c, i), ")");
    }
  }
  return channels;
}

// x with its channel dimension pinned to `channels` where known.
PartialShape WithChannels(const PartialShape& x, int64_t channels) {
  if (!x.known_rank()) return PartialShape({-1, -1, -1, channels});
  std::vector<int64_t> dims = x.dim_sizes();
  dims[3] = channels;
  return PartialShape(std::move(dims));
}

Status FusedBatchNormShapeFn(InferenceContext& c) {
  CKFLOW_ASSIGN_OR_RETURN(BatchNormAttrs attrs, ParseAttrs(*c.attrs));
  std::vector<int> vectors = {1, 2};
  if (attrs.ReadsMeanAndVariance()) vectors.insert(vectors.end(), {3, 4});
  CKFLOW_ASSIGN_OR_RETURN(int64_t channels, CheckBatchNormInputs(c, kForwardArgs, 0, vectors));
  for (int i : {3, 4}) CKFLOW_RETURN_IF_ERROR(CheckRank(c, i, kForwardArgs[i], 1, 1));
  const DataType dtype = c.input_types[0];
  c.AddOutput(dtype, WithChannels(c.input_shapes[0], channels));
  for (int i = 0; i < 4; ++i) c.AddOutput(dtype, PartialShape({channels}));
  c.AddOutput(dtype, PartialShape({0}));
  return OkStatus();
}

Status FusedBatchNormGradShapeFn(InferenceContext& c) {
  CKFLOW_RETURN_IF_ERROR(ParseAttrs(*c.attrs).status());
  CKFLOW_ASSIGN_OR_RETURN(int64_t channels, CheckBatchNormInputs(c, kGradArgs, 1, {2, 3, 4}));
  CKFLOW_RETURN_IF_ERROR(CheckRank(c, 0, kGradArgs[0], 4, 4));
  StatusOr<PartialShape> x = WithChannels(c.input_shapes[1], channels).Merge(c.input_shapes[0]);
  if (!x.ok()) {
    return InvalidArgumentError("shapes must be equal: y_backprop is ",
                                c.input_shapes[0].ToString(), " (", InputName(c, 0), "), x is ",
                                c.input_shapes[1].ToString(), " (", InputName(c, 1), ")");
  }
  const DataType dtype = c.input_types[0];
  c.AddOutput(dtype, *x);
  c.AddOutput(dtype, PartialShape({channels}));
  c.AddOutput(dtype, PartialShape({channels}));
  c.AddOutput(dtype, PartialShape({0}));
  c.AddOutput(dtype, PartialShape({0}));
  return OkStatus();
}

// _FusedBatchNormGradFromTaps: (grad, orig_output, taps, x, scale,
// reserve_space_1, reserve_space_2, reserve_space_3); FusedBatchNormGradV3's
// outputs. Made only by the remapper, from ops that passed their own checks.
constexpr const char* kFromTapsArgs[] = {
    "grad",           "orig_output", "taps", "x", "scale", "reserve_space_1", "reserve_space_2",
    "reserve_space_3"};

Status FusedBatchNormGradFromTapsShapeFn(InferenceContext& c) {
  CKFLOW_RETURN_IF_ERROR(ParseAttrs(*c.attrs).status());
  CKFLOW_RETURN_IF_ERROR(ParsePoolAttrs(*c.attrs).status());
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 3, "x", kFloatTypes));
  for (int i : {0, 1, 4, 5, 6, 7}) {
    CKFLOW_RETURN_IF_ERROR(CheckSameDtype(c, 3, "x", i, kFromTapsArgs[i]));
  }
  constexpr DataType kTapTypes[] = {DT_UINT8};
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 2, "taps", kTapTypes));
  CKFLOW_RETURN_IF_ERROR(CheckRank(c, 3, "x", 4, 4));
  const PartialShape& x = c.input_shapes[3];
  const int64_t channels = x.known_rank() ? x.dim(3) : -1;
  const DataType dtype = c.input_types[3];
  c.AddOutput(dtype, x.known_rank() ? x : PartialShape({-1, -1, -1, -1}));
  c.AddOutput(dtype, PartialShape({channels}));
  c.AddOutput(dtype, PartialShape({channels}));
  c.AddOutput(dtype, PartialShape({0}));
  c.AddOutput(dtype, PartialShape({0}));
  return OkStatus();
}

// ----------------------------------------------------------------- kernels

// InvalidArgument unless `t` (input `arg`) is a vector of `channels`
// elements, the channels of `x`.
Status CheckChannelVector(const Tensor& t, std::string_view arg, int64_t channels,
                          const TensorShape& x) {
  if (t.shape() == TensorShape({channels})) return OkStatus();
  return InvalidArgumentError(arg, " must be a vector of ", channels, " elements (the channels of ",
                              x.ToString(), "), got ", t.shape().ToString());
}

// Rows per block of ChannelSums: ~kBlockElements elements, at most
// kMaxBlocks blocks, and at least 4 rows a block so that the partial sums
// never outgrow the input.
constexpr int64_t kBlockElements = 16384;
constexpr int64_t kMaxBlocks = 256;

int64_t RowsPerBlock(int64_t rows, int64_t channels) {
  const int64_t elements = rows * std::max<int64_t>(channels, 1);
  int64_t blocks = std::max<int64_t>(1, elements / kBlockElements);
  blocks = std::min({blocks, kMaxBlocks, std::max<int64_t>(1, rows / 4)});
  return (rows + blocks - 1) / blocks;
}

// Per-channel sums over the rows of row-major [rows, channels] data, in an
// order fixed by the shape alone: the rows are cut into blocks
// (RowsPerBlock), each block sums its rows in order into its own partial
// sums, and the partials are added in block order. `accumulate(begin, end,
// sums)` adds rows [begin, end) into sums[k * channels + c], k < num_sums.
template <typename Fn>
std::vector<double> ChannelSums(int64_t rows, int64_t channels, int num_sums, Fn&& accumulate) {
  const int64_t width = num_sums * channels;
  std::vector<double> sums(width, 0.0);
  if (rows == 0 || channels == 0) return sums;
  const int64_t rows_per_block = RowsPerBlock(rows, channels);
  const int64_t blocks = (rows + rows_per_block - 1) / rows_per_block;
  std::vector<double> partial(blocks * width, 0.0);
  ParallelRange(blocks, rows_per_block * width, [&](int64_t b, int64_t e) {
    for (int64_t block = b; block < e; ++block) {
      accumulate(block * rows_per_block, std::min(rows, (block + 1) * rows_per_block),
                 partial.data() + block * width);
    }
  });
  ArrayMap<double> total(sums.data(), width);
  for (int64_t block = 0; block < blocks; ++block) {
    total += ConstArrayMap<double>(partial.data() + block * width, width);
  }
  return sums;
}

// Adds rows [b, e) into two per-channel sums s[0, channels) and
// s[channels, 2 * channels). add(r, c, first, second) adds the terms of row
// r, channels [c, c + n), into partial sums in T: first and second are
// Eigen arrays of n = first.size() elements, fixed when compiling, and
// Lanes(p, first) maps n elements at p. The partial sums go into the double
// ones every kGroupRows rows. Converting every term to double cost as much
// as reading it, and a group's few terms in T lose nothing a float input
// has not already lost. A vector's worth of channels at a time keeps the
// partial sums in registers: summing whole rows into an array in memory
// made each row wait for the store of the one before.
template <typename T, typename Fn>
void InGroups(int64_t b, int64_t e, int64_t channels, double* s, Fn&& add) {
  constexpr int64_t kGroupRows = 8;
  constexpr int64_t kLanes = 64 / sizeof(T);
  const auto group = [&]<int kWidth>(int64_t r0, int64_t r1, int64_t c) {
    Eigen::Array<T, kWidth, 1> first = Eigen::Array<T, kWidth, 1>::Zero();
    Eigen::Array<T, kWidth, 1> second = Eigen::Array<T, kWidth, 1>::Zero();
    for (int64_t r = r0; r < r1; ++r) add(r, c, first, second);
    ArrayMap<double>(s + c, kWidth) += first.template cast<double>();
    ArrayMap<double>(s + channels + c, kWidth) += second.template cast<double>();
  };
  for (int64_t r0 = b; r0 < e; r0 += kGroupRows) {
    const int64_t r1 = std::min(e, r0 + kGroupRows);
    int64_t c = 0;
    for (; c + kLanes <= channels; c += kLanes) group.template operator()<kLanes>(r0, r1, c);
    for (; c < channels; ++c) group.template operator()<1>(r0, r1, c);
  }
}

// n elements at p, n the size of the fixed-size array `like`.
template <typename A>
Eigen::Map<const A> Lanes(const typename A::Scalar* p, const A& /*like*/) {
  return Eigen::Map<const A>(p);
}

// Runs fn(begin, end) over row ranges of [rows, channels] data in parallel.
template <typename Fn>
void ForRows(int64_t rows, int64_t channels, int64_t cost_per_element, Fn&& fn) {
  ParallelRange(rows, std::max<int64_t>(channels, 1) * cost_per_element, fn);
}

template <typename T>
void FillNaN(Tensor* t) {
  std::fill_n(t->flat<T>().data(), t->NumElements(), std::numeric_limits<T>::quiet_NaN());
}

template <typename T>
void CopyVector(const Tensor& from, Tensor* to) {
  std::copy_n(from.flat<T>().data(), to->NumElements(), to->flat<T>().data());
}

template <typename T>
Status FusedBatchNormCompute(KernelContext& ctx, const BatchNormAttrs& attrs) {
  const Tensor& x = ctx.input(0);
  if (x.shape().rank() != 4) {
    return InvalidArgumentError("x must have rank 4 (NHWC), got ", x.shape().ToString());
  }
  const int64_t channels = x.shape().dim(3);
  const bool reads_moments = attrs.ReadsMeanAndVariance();
  for (int i = 1; i < (reads_moments ? 5 : 3); ++i) {
    CKFLOW_RETURN_IF_ERROR(CheckChannelVector(ctx.input(i), kForwardArgs[i], channels, x.shape()));
  }
  for (int i = 3; i < 5 && !reads_moments; ++i) {
    if (ctx.input(i).shape().rank() != 1) {
      return InvalidArgumentError(kForwardArgs[i], " must be a vector, got ",
                                  ctx.input(i).shape().ToString());
    }
  }
  const TensorShape vector({channels});
  // y is written in the last pass, row by row from the same rows of x.
  CKFLOW_ASSIGN_OR_RETURN(Tensor * y, ctx.ForwardInputOrAllocateOutput(0, 0, x.dtype(), x.shape()));
  Tensor* out[5];
  for (int i = 1; i < 5; ++i) {
    CKFLOW_ASSIGN_OR_RETURN(out[i], ctx.AllocateOutput(i, x.dtype(), vector));
  }
  CKFLOW_RETURN_IF_ERROR(ctx.AllocateOutput(5, x.dtype(), TensorShape({0})).status());
  const int64_t rows = channels == 0 ? 0 : x.NumElements() / channels;
  if (rows == 0) {
    for (int i = 1; i < 5; ++i) FillNaN<T>(out[i]);
    return OkStatus();
  }
  const T* xp = x.flat<T>().data();
  const auto row = [&](const T* p, int64_t r) {
    return ConstArrayMap<T>(p + r * channels, channels);
  };

  Tensor mean_t, variance_t;  // what y is normalized with
  if (attrs.is_training) {
    // One pass for both moments, the sums of d = x - shift and of d^2 with
    // each channel's first value as its shift: a pass over x is most of the
    // op's time, and the shift keeps the variance's difference of sums
    // from cancelling away digits when a channel's mean is far from 0 (a
    // constant channel gives exactly 0).
    const Eigen::Array<T, Eigen::Dynamic, 1> shift = row(xp, 0);
    std::vector<double> sums = ChannelSums(rows, channels, 2, [&](int64_t b, int64_t e, double* s) {
      InGroups<T>(b, e, channels, s, [&](int64_t r, int64_t c, auto& sum, auto& squares) {
        const auto d = Lanes(xp + r * channels + c, sum) - Lanes(shift.data() + c, sum);
        sum += d;
        squares += d.square();
      });
    });
    const double n = static_cast<double>(rows);
    const ConstArrayMap<double> sum(sums.data(), channels);
    const Eigen::ArrayXd mean = shift.template cast<double>() + sum / n;
    const Eigen::ArrayXd variance =
        ((ConstArrayMap<double>(sums.data() + channels, channels) - sum.square() / n) / n).max(0.0);
    ArrayMap<T>(out[3]->flat<T>().data(), channels) = mean.cast<T>();
    ArrayMap<T>(out[4]->flat<T>().data(), channels) = variance.cast<T>();
    // Bessel's correction, rounded as TensorFlow's: n / (n - 1) in T.
    const T adjust = static_cast<T>(rows) / static_cast<T>(rows > 1 ? rows - 1 : 1);
    ArrayMap<T> batch_mean(out[1]->flat<T>().data(), channels);
    ArrayMap<T> batch_variance(out[2]->flat<T>().data(), channels);
    const ConstArrayMap<T> saved_mean(out[3]->flat<T>().data(), channels);
    const ConstArrayMap<T> saved_variance(out[4]->flat<T>().data(), channels);
    if (attrs.exponential_avg_factor == 1.0f) {
      batch_mean = saved_mean;
      batch_variance = saved_variance * adjust;
    } else {
      const T factor = static_cast<T>(attrs.exponential_avg_factor);
      const T one_minus_factor = T(1) - factor;
      const ConstArrayMap<T> old_mean(ctx.input(3).flat<T>().data(), channels);
      const ConstArrayMap<T> old_variance(ctx.input(4).flat<T>().data(), channels);
      batch_variance = one_minus_factor * old_variance + (factor * adjust) * saved_variance;
      batch_mean = one_minus_factor * old_mean + factor * saved_mean;
    }
    mean_t = *out[3];
    variance_t = *out[4];
  } else {
    mean_t = ctx.input(3);
    variance_t = ctx.input(4);
    // batch_mean and reserve_space_1 are the mean; the others the variance.
    for (int i = 1; i < 5; ++i) CopyVector<T>(ctx.input(i % 2 == 1 ? 3 : 4), out[i]);
  }
  const ConstArrayMap<T> mean(mean_t.flat<T>().data(), channels);
  const ConstArrayMap<T> variance(variance_t.flat<T>().data(), channels);
  const ConstArrayMap<T> scale(ctx.input(1).flat<T>().data(), channels);
  const ConstArrayMap<T> offset(ctx.input(2).flat<T>().data(), channels);
  const Eigen::Array<T, Eigen::Dynamic, 1> scaling =
      BatchNormScaling(variance, scale, attrs.epsilon);
  T* yp = y->flat<T>().data();
  using Vector = Eigen::Array<T, Eigen::Dynamic, 1>;
  const Vector mean_run = Tiled<T>(mean), scaling_run = Tiled<T>(scaling),
               offset_run = Tiled<T>(offset);
  ForRows(rows, channels, 3, [&](int64_t b, int64_t e) {
    ForRuns(b, e, channels, [&](int64_t at, int64_t length) {
      ArrayMap<T>(yp + at, length) =
          BatchNormOf(ConstArrayMap<T>(xp + at, length), mean_run.head(length),
                      scaling_run.head(length), offset_run.head(length));
    });
  });
  return OkStatus();
}

// FusedBatchNormGradV3's work once dx (output 0) is allocated, with x,
// scale and reserve_space_1..3 at ctx.input(first) on and y_backprop read
// from `dyp` or, if `made` is not null, made by it into dx block by block
// as the sums read them (the block is still in cache for the sums), and
// overwritten in place by the last pass. Either way the rows and their
// order are the same, and so are the bits.
template <typename T>
Status BatchNormGradFrom(KernelContext& ctx, const BatchNormAttrs& attrs, int first, const T* dyp,
                         const TapGradientRows<T>* made, Tensor* dx) {
  const Tensor& x = ctx.input(first);
  const int64_t channels = x.shape().dim(3);
  for (int i = 2; i < 5; ++i) {
    CKFLOW_RETURN_IF_ERROR(
        CheckChannelVector(ctx.input(first + i - 1), kGradArgs[i], channels, x.shape()));
  }
  const TensorShape vector({channels});
  CKFLOW_ASSIGN_OR_RETURN(Tensor * dscale, ctx.AllocateOutput(1, x.dtype(), vector));
  CKFLOW_ASSIGN_OR_RETURN(Tensor * doffset, ctx.AllocateOutput(2, x.dtype(), vector));
  for (int i = 3; i < 5; ++i) {
    CKFLOW_RETURN_IF_ERROR(ctx.AllocateOutput(i, x.dtype(), TensorShape({0})).status());
  }
  const int64_t rows = channels == 0 ? 0 : x.NumElements() / channels;
  const T* xp = x.flat<T>().data();
  const ConstArrayMap<T> scale(ctx.input(first + 1).flat<T>().data(), channels);
  const ConstArrayMap<T> mean(ctx.input(first + 2).flat<T>().data(), channels);
  const ConstArrayMap<T> variance(ctx.input(first + 3).flat<T>().data(), channels);
  // sums[0, C): sum(dy); sums[C, 2C): sum(dy * (x - mean)).
  std::vector<double> sums = ChannelSums(rows, channels, 2, [&](int64_t b, int64_t e, double* s) {
    const T* g = nullptr;
    if (made != nullptr) {
      made->Fill(b, e, dx->flat<T>().data() + b * channels);
      g = dx->flat<T>().data() + b * channels;
    } else {
      g = dyp + b * channels;
    }
    InGroups<T>(b, e, channels, s, [&](int64_t r, int64_t c, auto& sum_dy, auto& sum_dy_xc) {
      const auto dy = Lanes(g + (r - b) * channels + c, sum_dy);
      sum_dy += dy;
      sum_dy_xc += dy * (Lanes(xp + r * channels + c, sum_dy) - Lanes(mean.data() + c, sum_dy));
    });
  });
  const ConstArrayMap<double> sum_dy(sums.data(), channels);
  const ConstArrayMap<double> sum_dy_xc(sums.data() + channels, channels);
  const Eigen::Array<T, Eigen::Dynamic, 1> inv_std =
      (variance + static_cast<T>(attrs.epsilon)).sqrt().inverse();
  ArrayMap<T>(doffset->flat<T>().data(), channels) = sum_dy.cast<T>();
  ArrayMap<T>(dscale->flat<T>().data(), channels) =
      (sum_dy_xc * inv_std.template cast<double>()).template cast<T>();
  if (rows == 0) return OkStatus();
  T* dxp = dx->flat<T>().data();
  // dx from y_backprop elementwise, in place when made: fn(at, length)
  // writes dx[at, at + length) from dy[at, at + length).
  const T* dy = made != nullptr ? dxp : dyp;
  const auto for_rows = [&](int64_t cost_per_element, auto&& fn) {
    ForRows(rows, channels, cost_per_element,
            [&](int64_t b, int64_t e) { ForRuns(b, e, channels, fn); });
  };
  const Eigen::Array<T, Eigen::Dynamic, 1> coef1 = scale * inv_std;
  using Vector = Eigen::Array<T, Eigen::Dynamic, 1>;
  if (!attrs.is_training) {
    // The mean and variance were constants of the forward pass.
    const Vector coef1_run = Tiled<T>(coef1);
    for_rows(1, [&](int64_t at, int64_t length) {
      ArrayMap<T>(dxp + at, length) = ConstArrayMap<T>(dy + at, length) * coef1_run.head(length);
    });
    return OkStatus();
  }
  // x_backprop = scale * rsqrt(v + eps) * [dy - mean(dy) - (x - m) * mean(dy * (x - m)) / (v +
  // eps)]
  const double n = static_cast<double>(rows);
  const Vector dy_mean = (sum_dy / n).cast<T>();
  const Vector coef2 = inv_std.square() * (sum_dy_xc / n).template cast<T>();
  const Vector coef1_run = Tiled<T>(coef1), dy_mean_run = Tiled<T>(dy_mean),
               mean_run = Tiled<T>(mean), coef2_run = Tiled<T>(coef2);
  for_rows(4, [&](int64_t at, int64_t length) {
    ArrayMap<T>(dxp + at, length) =
        coef1_run.head(length) *
        (ConstArrayMap<T>(dy + at, length) - dy_mean_run.head(length) -
         (ConstArrayMap<T>(xp + at, length) - mean_run.head(length)) * coef2_run.head(length));
  });
  return OkStatus();
}

template <typename T>
Status FusedBatchNormGradCompute(KernelContext& ctx, const BatchNormAttrs& attrs) {
  const Tensor& dy = ctx.input(0);
  const Tensor& x = ctx.input(1);
  if (x.shape().rank() != 4) {
    return InvalidArgumentError("x must have rank 4 (NHWC), got ", x.shape().ToString());
  }
  if (dy.shape() != x.shape()) {
    return InvalidArgumentError("shapes must be equal: y_backprop is ", dy.shape().ToString(),
                                ", x is ", x.shape().ToString());
  }
  // dx is written in the last pass, row by row from the same rows of dy.
  CKFLOW_ASSIGN_OR_RETURN(Tensor * dx,
                          ctx.ForwardInputOrAllocateOutput(0, 0, x.dtype(), x.shape()));
  return BatchNormGradFrom<T>(ctx, attrs, 1, dy.flat<T>().data(), nullptr, dx);
}

// _FusedBatchNormGradFromTaps: FusedBatchNormGradV3 whose y_backprop is the
// gradient _MaxPoolGradWithTaps (ReLU folded in or not) would send through
// a pooling of disjoint windows, made from that op's inputs (grad,
// orig_output, taps) as the passes need its rows (TapGradientRows).
template <typename T>
Status FusedBatchNormGradFromTapsCompute(KernelContext& ctx, const BatchNormAttrs& attrs,
                                         const WindowAttrs& pool, bool relu) {
  const Tensor& x = ctx.input(3);
  CKFLOW_ASSIGN_OR_RETURN(PoolShapes s, ResolvePool(x.shape(), "x", pool));
  if (!DisjointWindows(s.g)) {
    return InvalidArgumentError("the pooling windows of x ", x.shape().ToString(),
                                " overlap; the fused gradient needs disjoint ones");
  }
  const char* pooled_args[] = {"grad", "orig_output", "taps"};
  for (int i = 0; i < 3; ++i) {
    CKFLOW_RETURN_IF_ERROR(CheckPooled(ctx.input(i), pooled_args[i], s, x.shape()));
  }
  CKFLOW_ASSIGN_OR_RETURN(Tensor * dx, ctx.AllocateOutput(0, x.dtype(), x.shape()));
  const TapGradientRows<T> made(s.g, ctx.input(2).flat<uint8_t>().data(),
                                ctx.input(0).flat<T>().data(), ctx.input(1).flat<T>().data(), relu);
  return BatchNormGradFrom<T>(ctx, attrs, 3, nullptr, &made, dx);
}

StatusOr<Kernel> FusedBatchNormGradFromTapsKernel(const Node& node) {
  CKFLOW_ASSIGN_OR_RETURN(BatchNormAttrs attrs, ParseAttrs(node.attrs()));
  CKFLOW_ASSIGN_OR_RETURN(WindowAttrs pool, ParsePoolAttrs(node.attrs()));
  const bool relu = node.attrs().GetOr<bool>("relu", false);
  return DispatchFloat(node.output_type(0), [=](auto tag) -> StatusOr<Kernel> {
    using T = typename decltype(tag)::type;
    return Kernel([=](KernelContext& ctx) {
      return FusedBatchNormGradFromTapsCompute<T>(ctx, attrs, pool, relu);
    });
  });
}

template <bool kGrad>
StatusOr<Kernel> BatchNormKernel(const Node& node) {
  CKFLOW_ASSIGN_OR_RETURN(BatchNormAttrs attrs, ParseAttrs(node.attrs()));
  return DispatchFloat(node.output_type(0), [attrs](auto tag) -> StatusOr<Kernel> {
    using T = typename decltype(tag)::type;
    return Kernel([attrs](KernelContext& ctx) {
      return kGrad ? FusedBatchNormGradCompute<T>(ctx, attrs)
                   : FusedBatchNormCompute<T>(ctx, attrs);
    });
  });
}

AttrMap BatchNormAttrMap(const ops::FusedBatchNormAttrs& attrs, bool forward) {
  AttrMap a;
  a.Set("epsilon", attrs.epsilon);
  if (forward) a.Set("exponential_avg_factor", attrs.exponential_avg_factor);
  a.Set("data_format", attrs.data_format);
  a.Set("is_training", attrs.is_training);
  return a;
}

// ------------------------------------------------------------- LayerNorm

// Each row of x's last axis normalized to mean 0 and variance 1: what
// tf_keras' LayerNormalization asks of FusedBatchNormV3 (x as NCHW [1,
// rows, features, 1], scale 1, offset 0), without the reshapes.

StatusOr<float> LayerNormEpsilon(const AttrMap& attrs) {
  const float epsilon = attrs.GetOr<float>("epsilon", 1e-3f);
  if (!std::isfinite(epsilon) || epsilon < 0) {
    return InvalidArgumentError("attribute epsilon is ", epsilon, ", but must be finite and >= 0");
  }
  return epsilon;
}

Status LayerNormShapeFn(InferenceContext& c) {
  CKFLOW_RETURN_IF_ERROR(LayerNormEpsilon(*c.attrs).status());
  const int n = static_cast<int>(c.input_types.size());
  const char* args[] = {"y_backprop", "x"};
  for (int i = 0; i < n; ++i) {
    const char* arg = n == 1 ? "x" : args[i];
    CKFLOW_RETURN_IF_ERROR(CheckDtype(c, i, arg, kFloatTypes));
    CKFLOW_RETURN_IF_ERROR(CheckRank(c, i, arg, 1, std::numeric_limits<int>::max()));
  }
  PartialShape shape = c.input_shapes[0];
  if (n == 2) {
    CKFLOW_RETURN_IF_ERROR(CheckSameDtype(c, 0, args[0], 1, args[1]));
    StatusOr<PartialShape> merged = shape.Merge(c.input_shapes[1]);
    if (!merged.ok()) {
      return InvalidArgumentError("shapes must be equal: y_backprop is ", shape.ToString(), " (",
                                  InputName(c, 0), "), x is ", c.input_shapes[1].ToString(), " (",
                                  InputName(c, 1), ")");
    }
    shape = *std::move(merged);
  }
  c.AddOutput(c.input_types[0], std::move(shape));
  return OkStatus();
}

// A row's mean and 1 / sqrt(variance + epsilon), in T as TensorFlow's
// kernel computes them, the biased variance from a second pass over the
// row (in cache by then). Sums of T run vectorized; double would not.
template <typename T>
struct RowMoments {
  T mean;
  T inv_std;
  RowMoments(const T* x, int64_t n, float epsilon) {
    ConstArrayMap<T> row(x, n);
    mean = row.sum() / static_cast<T>(n);
    const T variance = (row - mean).square().sum() / static_cast<T>(n);
    inv_std = T(1) / std::sqrt(variance + static_cast<T>(epsilon));
  }
};

template <typename T, bool kGrad>
Status LayerNormCompute(KernelContext& ctx, float epsilon) {
  const Tensor& x = ctx.input(kGrad ? 1 : 0);
  if (x.shape().rank() < 1) return InvalidArgumentError("x must have rank >= 1, got a scalar");
  if (kGrad && ctx.input(0).shape() != x.shape()) {
    return InvalidArgumentError("shapes must be equal: y_backprop is ",
                                ctx.input(0).shape().ToString(), ", x is ", x.shape().ToString());
  }
  const int64_t n = x.shape().dim(x.shape().rank() - 1);
  CKFLOW_ASSIGN_OR_RETURN(Tensor * out,
                          ctx.ForwardInputOrAllocateOutput(0, 0, x.dtype(), x.shape()));
  if (x.NumElements() == 0) return OkStatus();
  const T* xd = x.flat<T>().data();
  const T* dyd = kGrad ? ctx.input(0).flat<T>().data() : nullptr;
  T* o = out->flat<T>().data();
  ParallelRange(x.NumElements() / n, n * 8, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const RowMoments<T> m(xd + r * n, n, epsilon);
      const auto normalized = (ConstArrayMap<T>(xd + r * n, n) - m.mean) * m.inv_std;
      ArrayMap<T> row(o + r * n, n);
      if constexpr (!kGrad) {
        row = normalized;
      } else {
        // d/dx of (x - mean) * inv_std over the row: inv_std * (dy -
        // mean(dy) - y * mean(dy * y)), y the normalized row.
        ConstArrayMap<T> dy(dyd + r * n, n);
        const T dy_mean = dy.sum() / static_cast<T>(n);
        const T dyy_mean = (dy * normalized).sum() / static_cast<T>(n);
        row = m.inv_std * ((dy - dy_mean) - normalized * dyy_mean);
      }
    }
  });
  return OkStatus();
}

template <bool kGrad>
StatusOr<Kernel> LayerNormKernel(const Node& node) {
  CKFLOW_ASSIGN_OR_RETURN(const float epsilon, LayerNormEpsilon(node.attrs()));
  return DispatchFloat(node.output_type(0), [epsilon](auto tag) -> StatusOr<Kernel> {
    using T = typename decltype(tag)::type;
    return Kernel(
        [epsilon](KernelContext& ctx) { return LayerNormCompute<T, kGrad>(ctx, epsilon); });
  });
}

}  // namespace
}  // namespace internal

Status RegisterNormalizationOps(OpRegistry& r) {
  using namespace internal;  // NOLINT: the kernels above
  CKFLOW_RETURN_IF_ERROR(
      RegisterOp(r, {.type = "FusedBatchNormV3",
                     .inputs = {std::begin(kForwardArgs), std::end(kForwardArgs)},
                     .shape_fn = FusedBatchNormShapeFn,
                     .kernel_factory = BatchNormKernel<false>}));
  CKFLOW_RETURN_IF_ERROR(RegisterOp(r, {.type = "FusedBatchNormGradV3",
                                        .inputs = {std::begin(kGradArgs), std::end(kGradArgs)},
                                        .shape_fn = FusedBatchNormGradShapeFn,
                                        .kernel_factory = BatchNormKernel<true>}));
  // The session's remapper runs a FusedBatchNormGradV3 of a max pooling's
  // gradient as this (above); not for graphs to build.
  CKFLOW_RETURN_IF_ERROR(
      RegisterOp(r, {.type = "_FusedBatchNormGradFromTaps",
                     .inputs = {std::begin(kFromTapsArgs), std::end(kFromTapsArgs)},
                     .shape_fn = FusedBatchNormGradFromTapsShapeFn,
                     .kernel_factory = FusedBatchNormGradFromTapsKernel}));
  CKFLOW_RETURN_IF_ERROR(RegisterOp(r, {.type = "LayerNorm",
                                        .inputs = {"x"},
                                        .shape_fn = LayerNormShapeFn,
                                        .kernel_factory = LayerNormKernel<false>}));
  CKFLOW_RETURN_IF_ERROR(RegisterOp(r, {.type = "LayerNormGrad",
                                        .inputs = {"y_backprop", "x"},
                                        .shape_fn = LayerNormShapeFn,
                                        .kernel_factory = LayerNormKernel<true>}));
  return OkStatus();
}

// ---------------------------------------------------------------- builders

namespace ops {

FusedBatchNormOutputs FusedBatchNorm(const Scope& scope, Input x, Input scale, Input offset,
                                     Input mean, Input variance, const FusedBatchNormAttrs& attrs) {
  if (!scope.ok()) return {};
  Output x_out = x.ToOutput(scope);
  Output scale_out = scale.ToOutput(scope);
  if (!x_out.valid() || !scale_out.valid()) return {};
  // Nodes other than the op itself: never under the scope's op name.
  const Scope helpers = scope.NewSubScope("");
  Output input = x_out;
  const bool dense = x_out.shape().rank() == 2;
  int64_t channels = -1;
  if (dense) {
    // [N, C] as [N, 1, 1, C]: the channel count must be known to reshape.
    channels = x_out.shape().dim(1);
    if (channels < 0 && scale_out.shape().rank() == 1) channels = scale_out.shape().dim(0);
    if (channels < 0) {
      scope.UpdateStatus(InvalidArgumentError(
          "FusedBatchNorm: x is ", x_out.shape().ToString(), " (", x_out.name(), ") and scale is ",
          scale_out.shape().ToString(), " (", scale_out.name(),
          "): a rank-2 x needs its channel count known when the graph is built"));
      return {};
    }
    input = Reshape(helpers, x_out, Const<int64_t>(helpers, {-1, 1, 1, channels}));
  }
  Node* node =
      internal::BuildNode(scope, "FusedBatchNormV3", {input, scale_out, offset, mean, variance},
                          internal::BatchNormAttrMap(attrs, true));
  if (node == nullptr) return {};
  FusedBatchNormOutputs out{Output(node, 0), Output(node, 1), Output(node, 2),
                            Output(node, 3), Output(node, 4), Output(node, 5)};
  if (dense) out.y = Reshape(helpers, out.y, Const<int64_t>(helpers, {-1, channels}));
  return out;
}

FusedBatchNormGradOutputs FusedBatchNormGrad(const Scope& scope, Input y_backprop, Input x,
                                             Input scale, Input reserve_space_1,
                                             Input reserve_space_2, Input reserve_space_3,
                                             const FusedBatchNormAttrs& attrs) {
  Node* node =
      internal::BuildNode(scope, "FusedBatchNormGradV3",
                          {y_backprop, x, scale, reserve_space_1, reserve_space_2, reserve_space_3},
                          internal::BatchNormAttrMap(attrs, false));
  if (node == nullptr) return {};
  return {Output(node, 0), Output(node, 1), Output(node, 2)};
}

Output LayerNorm(const Scope& scope, Input x, float epsilon) {
  AttrMap attrs;
  attrs.Set("epsilon", epsilon);
  return internal::BuildOp(scope, "LayerNorm", {x}, std::move(attrs));
}

Output LayerNormGrad(const Scope& scope, Input y_backprop, Input x, float epsilon) {
  AttrMap attrs;
  attrs.Set("epsilon", epsilon);
  return internal::BuildOp(scope, "LayerNormGrad", {y_backprop, x}, std::move(attrs));
}

Output AssignMovingAverage(const Scope& scope, const Variable& variable, Input value,
                           double momentum) {
  if (!scope.ok()) return Output();
  Scope s = scope.NewSubScope("AssignMovingAvg");
  StatusOr<Tensor> decay = internal::ScalarOfType(variable.dtype(), 1.0 - momentum);
  if (!decay.ok()) {
    scope.UpdateStatus(decay.status().WithContext("AssignMovingAverage"));
    return Output();
  }
  Output v = value.ToOutput(s);
  if (v.valid() && v.dtype() != variable.dtype()) v = Cast(s, v, variable.dtype());
  Output delta = Mul(s, Sub(s, variable.Read(s), v), *decay);
  return variable.AssignSub(s, delta);
}

}  // namespace ops
}  // namespace ckflow
