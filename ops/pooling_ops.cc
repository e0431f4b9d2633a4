// Pooling: MaxPool, AvgPool and their gradient ops.
//
// The forward kernels split the output rows over workers and reduce each
// window in row-major order, vectorized over channels. The gradients are
// written so that every input-gradient element is owned by one worker and
// sums its parts in TensorFlow's order (output pixels in row-major order):
//  - MaxPoolGrad splits images and blocks of channels; for each output
//    pixel it finds again the first maximum of the window (TensorFlow's
//    scan: the first element, then any strictly greater one) and adds the
//    gradient there.
//  - AvgPoolGrad gathers, for each input pixel, grad / window count from
//    the output pixels whose windows hold it, with TensorFlow's factor
//    1 / count.
// So the results are bit-identical on any number of threads.

#include "ops/pooling_ops.h"

#include <Eigen/Core>
#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ops/ops_internal.h"
#include "ops/pooling_internal.h"
#include "ops/standard_ops.h"
#include "ops/window_internal.h"

namespace ckflow {
namespace internal {

StatusOr<PartialShape> PoolOutputShape(const PartialShape& input, const std::string& input_desc,
                                       const WindowAttrs& attrs) {
  StatusOr<PartialShape> out = WindowedOutputShape(input, attrs.window_h, attrs.window_w,
                                                   input.known_rank() ? input.dim(3) : -1, attrs);
  if (!out.ok()) return InvalidArgumentError(out.status().message(), ": ", input_desc);
  return out;
}

StatusOr<PoolShapes> ResolvePool(const TensorShape& input, std::string_view arg,
                                 const WindowAttrs& attrs) {
  if (input.rank() != 4) {
    return InvalidArgumentError(arg, " is ", input.ToString(), ", but must have rank 4");
  }
  StatusOr<WindowGeometry> g = ComputeGeometry(input, attrs.window_h, attrs.window_w, attrs);
  if (!g.ok()) {
    return InvalidArgumentError(g.status().message(), ": ", arg, " is ", input.ToString());
  }
  return PoolShapes{*g, TensorShape({g->batch, g->out_h, g->out_w, g->depth})};
}

Status CheckPooled(const Tensor& t, std::string_view arg, const PoolShapes& s,
                   const TensorShape& input) {
  if (t.shape() == s.output) return OkStatus();
  return InvalidArgumentError(arg, " is ", t.shape().ToString(), ", but the pooling's output is ",
                              s.output.ToString(), ": the input is ", input.ToString());
}

bool DisjointWindows(const WindowGeometry& g) {
  return g.stride_h >= g.window_h && g.stride_w >= g.window_w && g.pad_top >= 0 && g.pad_left >= 0;
}

namespace {

template <typename T>
using Vec = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <typename T>
using ConstVec = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

// Channels per task of MaxPoolGrad.
constexpr int64_t kChannelBlock = 64;
// The most taps a window of _MaxPoolWithTaps may have: a tap's number is a
// uint8.
constexpr int64_t kMaxTaps = 256;

// ------------------------------------------------------------ shapes

// MaxPool, AvgPool: (input).
Status PoolShapeFn(InferenceContext& c, std::string_view arg) {
  CKFLOW_ASSIGN_OR_RETURN(WindowAttrs attrs, ParsePoolAttrs(*c.attrs));
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 0, arg, kFloatTypes));
  CKFLOW_RETURN_IF_ERROR(CheckRank(c, 0, arg, 4, 4));
  CKFLOW_ASSIGN_OR_RETURN(
      PartialShape out,
      PoolOutputShape(c.input_shapes[0], DescribeShape(arg, c.input_shapes[0], InputName(c, 0)),
                      attrs));
  c.AddOutput(c.input_types[0], std::move(out));
  return OkStatus();
}

// Checks that input i, a gradient or output of the pooling, fits `out`.
Status CheckPooledShape(const InferenceContext& c, int i, std::string_view arg,
                        const PartialShape& out, const std::string& input_desc) {
  if (c.input_shapes[i].IsCompatibleWith(out)) return OkStatus();
  return InvalidArgumentError(DescribeShape(arg, c.input_shapes[i], InputName(c, i)),
                              ", but the pooling's output is ", out.ToString(), ": ", input_desc);
}

// MaxPoolGrad: (orig_input, orig_output, grad).
Status MaxPoolGradShapeFn(InferenceContext& c) {
  CKFLOW_ASSIGN_OR_RETURN(WindowAttrs attrs, ParsePoolAttrs(*c.attrs));
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 0, "orig_input", kFloatTypes));
  CKFLOW_RETURN_IF_ERROR(CheckSameDtype(c, 0, "orig_input", 1, "orig_output"));
  CKFLOW_RETURN_IF_ERROR(CheckSameDtype(c, 0, "orig_input", 2, "grad"));
  for (int i = 0; i < 3; ++i) {
    CKFLOW_RETURN_IF_ERROR(
        CheckRank(c, i, std::array{"orig_input", "orig_output", "grad"}[i], 4, 4));
  }
  const std::string input_desc = DescribeShape("orig_input", c.input_shapes[0], InputName(c, 0));
  CKFLOW_ASSIGN_OR_RETURN(PartialShape out, PoolOutputShape(c.input_shapes[0], input_desc, attrs));
  CKFLOW_RETURN_IF_ERROR(CheckPooledShape(c, 1, "orig_output", out, input_desc));
  CKFLOW_RETURN_IF_ERROR(CheckPooledShape(c, 2, "grad", out, input_desc));
  c.AddOutput(c.input_types[0],
              c.input_shapes[0].known_rank() ? c.input_shapes[0] : PartialShape({-1, -1, -1, -1}));
  return OkStatus();
}

// _MaxPoolWithTaps: (input) -> (output, taps).
Status MaxPoolWithTapsShapeFn(InferenceContext& c) {
  CKFLOW_RETURN_IF_ERROR(PoolShapeFn(c, "input"));
  CKFLOW_ASSIGN_OR_RETURN(WindowAttrs attrs, ParsePoolAttrs(*c.attrs));
  if (attrs.window_h * attrs.window_w > kMaxTaps) {
    return InvalidArgumentError("a window of ", attrs.window_h, "x", attrs.window_w,
                                " has more than ", kMaxTaps, " taps");
  }
  c.AddOutput(DT_UINT8, c.output_shapes[0]);
  return OkStatus();
}

// _MaxPoolGradWithTaps: (orig_input, orig_output, grad, taps).
Status MaxPoolGradWithTapsShapeFn(InferenceContext& c) {
  CKFLOW_RETURN_IF_ERROR(MaxPoolGradShapeFn(c));
  constexpr DataType kTapTypes[] = {DT_UINT8};
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 3, "taps", kTapTypes));
  return CheckRank(c, 3, "taps", 4, 4);
}

// AvgPoolGrad: (orig_input_shape, grad).
Status AvgPoolGradShapeFn(InferenceContext& c) {
  CKFLOW_ASSIGN_OR_RETURN(WindowAttrs attrs, ParsePoolAttrs(*c.attrs));
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 1, "grad", kFloatTypes));
  CKFLOW_RETURN_IF_ERROR(CheckRank(c, 1, "grad", 4, 4));
  CKFLOW_ASSIGN_OR_RETURN(PartialShape input, ShapeOfSizesInput(c, 0, "orig_input_shape"));
  const std::string input_desc = DescribeShape("orig_input_shape", input, InputName(c, 0));
  CKFLOW_ASSIGN_OR_RETURN(PartialShape out, PoolOutputShape(input, input_desc, attrs));
  CKFLOW_RETURN_IF_ERROR(CheckPooledShape(c, 1, "grad", out, input_desc));
  c.AddOutput(c.input_types[1], std::move(input));
  return OkStatus();
}

// ------------------------------------------------------------ kernels

template <typename T, bool kMax>
Status PoolCompute(KernelContext& ctx, const WindowAttrs& attrs) {
  const Tensor& input = ctx.input(0);
  CKFLOW_ASSIGN_OR_RETURN(PoolShapes s,
                          ResolvePool(input.shape(), kMax ? "input" : "value", attrs));
  CKFLOW_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, input.dtype(), s.output));
  if (out->NumElements() == 0) return OkStatus();
  const WindowGeometry& g = s.g;
  const int64_t depth = g.depth;
  const T* in = input.flat<T>().data();
  T* o = out->flat<T>().data();
  const int64_t cost =
      g.out_w * std::min(g.window_h, g.in_h) * std::min(g.window_w, g.in_w) * depth;
  ParallelRange(g.batch * g.out_h, cost, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t n = r / g.out_h;
      const int64_t oh = r % g.out_h;
      PoolRows<T, kMax>(g, in + n * g.in_h * g.in_w * depth, 0, oh, oh + 1,
                        o + r * g.out_w * depth);
    }
  });
  return OkStatus();
}

// One tap's share of MaxPoolGrad: where the tap holds the window's maximum
// (kFirst: where nothing in the window is larger), d gets `left` and rest
// keeps nothing; elsewhere rest keeps `left`. The choice is a mask on the
// bits: GCC leaves a select of floats as a branch, and so scalar.
template <bool kFirst, bool kAssign, typename T>
void TakeWhere(const T* __restrict v, const T* __restrict best, const T* left, int64_t width,
               T* __restrict d, T* rest) {
  using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  for (int64_t c = 0; c < width; ++c) {
    const Bits take = -static_cast<Bits>(kFirst ? !(v[c] < best[c]) : v[c] == best[c]);
    const Bits l = std::bit_cast<Bits>(left[c]);
    // Assigned, + 0 still turns a -0 gradient into +0, as the sum would.
    if constexpr (kAssign) {
      d[c] = std::bit_cast<T>(l & take) + T(0);
    } else {
      d[c] += std::bit_cast<T>(l & take);
    }
    rest[c] = std::bit_cast<T>(l & ~take);
  }
}

// Whether input row (or column) x is under a window when windows do not
// overlap (stride >= window): only the window of x's stride can cover it.
bool UnderDisjointWindow(int64_t x, int64_t stride, int64_t pad, int64_t window, int64_t out) {
  const int64_t q = x + pad;
  const int64_t o = q / stride;
  return o < out && q - o * stride < window;
}

// Zeroes one image's block of `width` channels of a pooling's input
// gradient where the windows write nothing: everywhere if they overlap
// (they add into it), else (kDisjoint) only the pixels under no window.
template <bool kDisjoint, typename T>
void ZeroUncovered(const WindowGeometry& g, int64_t width, T* dimage) {
  if (!kDisjoint) {
    for (int64_t p = 0; p < g.in_h * g.in_w; ++p) std::fill_n(dimage + p * g.depth, width, T(0));
    return;
  }
  // The uncovered columns once, not a division per pixel (which cost as
  // much as the whole gradient of a 2x2 pooling that covers everything).
  int64_t uncovered[64];
  int64_t count = 0;
  bool listed = true;
  for (int64_t w = 0; w < g.in_w && listed; ++w) {
    if (UnderDisjointWindow(w, g.stride_w, g.pad_left, g.window_w, g.out_w)) continue;
    listed = count < 64;
    if (listed) uncovered[count++] = w;
  }
  for (int64_t h = 0; h < g.in_h; ++h) {
    T* row = dimage + h * g.in_w * g.depth;
    const bool covered = UnderDisjointWindow(h, g.stride_h, g.pad_top, g.window_h, g.out_h);
    if (covered && listed) {
      for (int64_t i = 0; i < count; ++i) std::fill_n(row + uncovered[i] * g.depth, width, T(0));
      continue;
    }
    for (int64_t w = 0; w < g.in_w; ++w) {
      if (covered && UnderDisjointWindow(w, g.stride_w, g.pad_left, g.window_w, g.out_w)) continue;
      std::fill_n(row + w * g.depth, width, T(0));
    }
  }
}

// MaxPoolGrad of one image's block of `width` channels: each output
// pixel's gradient goes to its window's first maximum, channel by channel.
// Scattering to an argmax does not vectorize, so each window is read twice:
// once for its maximum (TensorFlow's scan: the first tap, then any strictly
// greater one), then tap by tap in the same order, each tap taking what is
// left of the gradient where it equals the maximum. The first tap takes it
// where nothing was larger, which also covers a NaN first tap (the scan
// keeps it). A tap that does not take adds +0, which changes no sum: the
// block starts at +0 and so never holds -0.
template <bool kDisjoint, typename T>
void MaxPoolGradBlock(const WindowGeometry& g, const T* image, const T* grad, int64_t width,
                      T* dimage) {
  const int64_t depth = g.depth;
  alignas(64) T best[kChannelBlock];
  alignas(64) T rest[kChannelBlock];
  // Windows that do not overlap (2x2 stride 2, the usual) write each pixel
  // under them once, so only the pixels under none are zeroed first (the
  // zeroing was half of this kernel's time in the CNN example's step).
  ZeroUncovered<kDisjoint>(g, width, dimage);
  for (int64_t oh = 0; oh < g.out_h; ++oh) {
    const auto [h0, h1] = WindowRange(oh, g.stride_h, g.pad_top, g.window_h, g.in_h);
    for (int64_t ow = 0; ow < g.out_w; ++ow) {
      const auto [w0, w1] = WindowRange(ow, g.stride_w, g.pad_left, g.window_w, g.in_w);
      if (h0 >= h1 || w0 >= w1) continue;  // no input under the window
      const int64_t first = h0 * g.in_w + w0;
      const T* v0 = image + first * depth;
      std::copy_n(v0, width, best);
      for (int64_t h = h0; h < h1; ++h) {
        for (int64_t w = (h == h0 ? w0 + 1 : w0); w < w1; ++w) {
          const T* v = image + (h * g.in_w + w) * depth;
          for (int64_t c = 0; c < width; ++c) best[c] = best[c] < v[c] ? v[c] : best[c];
        }
      }
      const T* gr = grad + (oh * g.out_w + ow) * depth;
      T* d0 = dimage + first * depth;
      TakeWhere<true, kDisjoint>(v0, best, gr, width, d0, rest);
      for (int64_t h = h0; h < h1; ++h) {
        for (int64_t w = (h == h0 ? w0 + 1 : w0); w < w1; ++w) {
          const T* v = image + (h * g.in_w + w) * depth;
          TakeWhere<false, kDisjoint>(v, best, rest, width, dimage + (h * g.in_w + w) * depth,
                                      rest);
        }
      }
    }
  }
}

template <typename T>
Status MaxPoolGradCompute(KernelContext& ctx, const WindowAttrs& attrs) {
  const Tensor& input = ctx.input(0);
  CKFLOW_ASSIGN_OR_RETURN(PoolShapes s, ResolvePool(input.shape(), "orig_input", attrs));
  CKFLOW_RETURN_IF_ERROR(CheckPooled(ctx.input(1), "orig_output", s, input.shape()));
  CKFLOW_RETURN_IF_ERROR(CheckPooled(ctx.input(2), "grad", s, input.shape()));
  CKFLOW_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, input.dtype(), input.shape()));
  if (out->NumElements() == 0) return OkStatus();
  const WindowGeometry& g = s.g;
  const int64_t depth = g.depth;
  const T* in = input.flat<T>().data();
  const T* grad = ctx.input(2).flat<T>().data();
  T* din = out->flat<T>().data();
  const int64_t blocks = (depth + kChannelBlock - 1) / kChannelBlock;
  const int64_t cost = (g.in_h * g.in_w + 2 * g.out_h * g.out_w * std::min(g.window_h, g.in_h) *
                                              std::min(g.window_w, g.in_w)) *
                       std::min(depth, kChannelBlock);
  const bool disjoint = DisjointWindows(g);
  // Each task zeroes and fills its own part of the gradient, which then
  // stays in cache between the two.
  ParallelRange(g.batch * blocks, cost, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t n = t / blocks;
      const int64_t c0 = (t % blocks) * kChannelBlock;
      const int64_t offset = n * g.in_h * g.in_w * depth + c0;
      const T* grad_block = grad + n * g.out_h * g.out_w * depth + c0;
      const int64_t width = std::min(kChannelBlock, depth - c0);
      if (disjoint) {
        MaxPoolGradBlock<true, T>(g, in + offset, grad_block, width, din + offset);
      } else {
        MaxPoolGradBlock<false, T>(g, in + offset, grad_block, width, din + offset);
      }
    }
  });
  return OkStatus();
}

// ------------------------------------------------- pooling with its taps
//
// A MaxPool whose gradient runs in the same session step is run by the
// session's remapper (runtime/remapper.cc) as _MaxPoolWithTaps, which also
// records, for every output element, the tap of its window that held the
// maximum (row-major in the unclipped window, as uint8). Its MaxPoolGrad
// becomes _MaxPoolGradWithTaps, which sends each gradient straight to that
// tap instead of reading the input again to find each window's maximum:
// by the backward pass the input is long out of cache, and reading it was
// most of MaxPoolGrad's time. A ReluGrad through the pooling's input (the
// pooled activation's gradient, as Keras' Conv2D -> ReLU -> MaxPooling2D
// makes it) folds in too: a tap that took a gradient holds its window's
// maximum, so the ReLU passes it exactly where the pooled output is > 0.
// The taps are those of MaxPool's and MaxPoolGrad's scan (the first tap,
// then any strictly greater one), so every result has the bits of the
// separate ops.

// Output row `oh` of one image (`image`), with the tap of each maximum:
// MaxPool's row, then the taps where the window equals it, last tap first
// so that the first such tap is the one left; the first tap also where the
// maximum is not larger (a NaN first tap, which the scan keeps). The
// loops keep no state but the row itself, so they vectorize: one scan
// carrying the best value and its tap in local arrays spilled both on
// every window.
// kDepth, if not 0, is the depth known when compiling (32 or 64
// channels: whole vectors, without a remainder loop per tap).
template <typename T, int64_t kDepth>
void MaxPoolRowWithTaps(const WindowGeometry& g, const T* image, int64_t oh, T* out,
                        uint8_t* taps) {
  PoolRows<T, true>(g, image, 0, oh, oh + 1, out);
  const int64_t depth = kDepth != 0 ? kDepth : g.depth;
  const int64_t start_h = oh * g.stride_h - g.pad_top;
  const auto [h0, h1] = WindowRange(oh, g.stride_h, g.pad_top, g.window_h, g.in_h);
  for (int64_t ow = 0; ow < g.out_w; ++ow) {
    const int64_t start_w = ow * g.stride_w - g.pad_left;
    const auto [w0, w1] = WindowRange(ow, g.stride_w, g.pad_left, g.window_w, g.in_w);
    if (h0 >= h1 || w0 >= w1) continue;
    const T* __restrict max = out + ow * depth;
    uint8_t* __restrict k = taps + ow * depth;
    for (int64_t h = h1 - 1; h >= h0; --h) {
      for (int64_t w = w1 - 1; w >= w0; --w) {
        const auto t = static_cast<uint8_t>((h - start_h) * g.window_w + (w - start_w));
        const T* __restrict v = image + (h * g.in_w + w) * depth;
        if (h == h0 && w == w0 && (h1 - h0) * (w1 - w0) == 1) {
          std::fill_n(k, depth, t);
        } else if (h == h0 && w == w0) {
          for (int64_t c = 0; c < depth; ++c) k[c] = !(v[c] < max[c]) ? t : k[c];
        } else if (h == h1 - 1 && w == w1 - 1) {
          for (int64_t c = 0; c < depth; ++c) k[c] = v[c] == max[c] ? t : uint8_t{0};
        } else {
          for (int64_t c = 0; c < depth; ++c) k[c] = v[c] == max[c] ? t : k[c];
        }
      }
    }
  }
}

template <typename T>
Status MaxPoolWithTapsCompute(KernelContext& ctx, const WindowAttrs& attrs) {
  const Tensor& input = ctx.input(0);
  CKFLOW_ASSIGN_OR_RETURN(PoolShapes s, ResolvePool(input.shape(), "input", attrs));
  CKFLOW_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, input.dtype(), s.output));
  CKFLOW_ASSIGN_OR_RETURN(Tensor * taps, ctx.AllocateOutput(1, DT_UINT8, s.output));
  if (out->NumElements() == 0) return OkStatus();
  const WindowGeometry& g = s.g;
  const int64_t depth = g.depth;
  const T* in = input.flat<T>().data();
  T* o = out->flat<T>().data();
  uint8_t* k = taps->flat<uint8_t>().data();
  const int64_t cost =
      g.out_w * std::min(g.window_h, g.in_h) * std::min(g.window_w, g.in_w) * depth * 2;
  ParallelRange(g.batch * g.out_h, cost, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* image = in + (r / g.out_h) * g.in_h * g.in_w * depth;
      const int64_t at = r * g.out_w * depth;
      if (depth == 32) {
        MaxPoolRowWithTaps<T, 32>(g, image, r % g.out_h, o + at, k + at);
      } else if (depth == 64) {
        MaxPoolRowWithTaps<T, 64>(g, image, r % g.out_h, o + at, k + at);
      } else {
        MaxPoolRowWithTaps<T, 0>(g, image, r % g.out_h, o + at, k + at);
      }
    }
  });
  return OkStatus();
}

// _MaxPoolGradWithTaps of one image's block of `width` channels. `pooled`
// (the forward's output) is read only with kRelu. Windows that do not
// overlap write each pixel under them once (TapGradient); overlapping ones
// add into a zeroed block in the order of the output pixels, as
// MaxPoolGrad does. kWidth: TapGradient's.
template <bool kDisjoint, bool kRelu, int64_t kWidth, typename T>
void MaxPoolGradWithTapsBlock(const WindowGeometry& g, const uint8_t* taps, const T* grad,
                              const T* pooled, int64_t any_width, T* dimage) {
  const int64_t depth = g.depth;
  const int64_t width = kWidth != 0 ? kWidth : any_width;
  ZeroUncovered<kDisjoint>(g, width, dimage);
  for (int64_t oh = 0; oh < g.out_h; ++oh) {
    const int64_t start_h = oh * g.stride_h - g.pad_top;
    const auto [h0, h1] = WindowRange(oh, g.stride_h, g.pad_top, g.window_h, g.in_h);
    for (int64_t ow = 0; ow < g.out_w; ++ow) {
      const int64_t start_w = ow * g.stride_w - g.pad_left;
      const auto [w0, w1] = WindowRange(ow, g.stride_w, g.pad_left, g.window_w, g.in_w);
      const int64_t at = (oh * g.out_w + ow) * depth;
      const T* __restrict gr = grad + at;
      const T* __restrict max = pooled + at;
      const uint8_t* __restrict k = taps + at;
      if constexpr (kDisjoint) {
        // Read straight from the inputs, tap after tap (they stay in L1):
        // staging the taps in a local array cost a failed store forward
        // per window, most of the kernel's time.
        for (int64_t h = h0; h < h1; ++h) {
          for (int64_t w = w0; w < w1; ++w) {
            TapGradient<kRelu, kWidth>(k, gr, max, (h - start_h) * g.window_w + (w - start_w),
                                       width, dimage + (h * g.in_w + w) * depth);
          }
        }
      } else {
        for (int64_t c = 0; c < width; ++c) {
          const int64_t h = start_h + k[c] / g.window_w;
          const int64_t w = start_w + k[c] % g.window_w;
          // The taps come from _MaxPoolWithTaps; one outside the window
          // (never made) would have nowhere to go.
          if ((kRelu && !(max[c] > T(0))) || h < h0 || h >= h1 || w < w0 || w >= w1) continue;
          dimage[(h * g.in_w + w) * depth + c] += gr[c];
        }
      }
    }
  }
}

template <typename T>
Status MaxPoolGradWithTapsCompute(KernelContext& ctx, const WindowAttrs& attrs, bool relu) {
  const Tensor& input = ctx.input(0);
  CKFLOW_ASSIGN_OR_RETURN(PoolShapes s, ResolvePool(input.shape(), "orig_input", attrs));
  CKFLOW_RETURN_IF_ERROR(CheckPooled(ctx.input(1), "orig_output", s, input.shape()));
  CKFLOW_RETURN_IF_ERROR(CheckPooled(ctx.input(2), "grad", s, input.shape()));
  CKFLOW_RETURN_IF_ERROR(CheckPooled(ctx.input(3), "taps", s, input.shape()));
  CKFLOW_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, input.dtype(), input.shape()));
  if (out->NumElements() == 0) return OkStatus();
  const WindowGeometry& g = s.g;
  const int64_t depth = g.depth;
  const T* pooled = ctx.input(1).flat<T>().data();
  const T* grad = ctx.input(2).flat<T>().data();
  const uint8_t* taps = ctx.input(3).flat<uint8_t>().data();
  T* din = out->flat<T>().data();
  const int64_t blocks = (depth + kChannelBlock - 1) / kChannelBlock;
  const int64_t cost = (g.in_h * g.in_w + 2 * g.out_h * g.out_w) * std::min(depth, kChannelBlock);
  const bool disjoint = DisjointWindows(g);
  auto block = [&]<bool kDisjoint, bool kRelu>(int64_t t) {
    const int64_t n = t / blocks;
    const int64_t c0 = (t % blocks) * kChannelBlock;
    const int64_t pooled_at = n * g.out_h * g.out_w * depth + c0;
    const int64_t width = std::min(kChannelBlock, depth - c0);
    const auto run = [&]<int64_t kWidth>() {
      MaxPoolGradWithTapsBlock<kDisjoint, kRelu, kWidth, T>(g, taps + pooled_at, grad + pooled_at,
                                                            pooled + pooled_at, width,
                                                            din + n * g.in_h * g.in_w * depth + c0);
    };
    if (kDisjoint && width == 64) {
      run.template operator()<64>();
    } else if (kDisjoint && width == 32) {
      run.template operator()<32>();
    } else {
      run.template operator()<0>();
    }
  };
  ParallelRange(g.batch * blocks, cost, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      if (disjoint) {
        relu ? block.template operator()<true, true>(t) : block.template operator()<true, false>(t);
      } else {
        relu ? block.template operator()<false, true>(t)
             : block.template operator()<false, false>(t);
      }
    }
  });
  return OkStatus();
}

template <typename T>
Status AvgPoolGradCompute(KernelContext& ctx, const WindowAttrs& attrs) {
  CKFLOW_ASSIGN_OR_RETURN(TensorShape input, ShapeFromTensor(ctx.input(0), "orig_input_shape"));
  CKFLOW_ASSIGN_OR_RETURN(PoolShapes s, ResolvePool(input, "orig_input_shape", attrs));
  const Tensor& grad = ctx.input(1);
  CKFLOW_RETURN_IF_ERROR(CheckPooled(grad, "grad", s, input));
  CKFLOW_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, grad.dtype(), input));
  if (out->NumElements() == 0) return OkStatus();
  const WindowGeometry& g = s.g;
  const int64_t depth = g.depth;
  // TensorFlow's factor per output pixel, 1 / (rows * columns in its
  // window), as T(1.0 / count).
  std::vector<int64_t> rows(g.out_h), cols(g.out_w);
  for (int64_t oh = 0; oh < g.out_h; ++oh) {
    const auto [h0, h1] = WindowRange(oh, g.stride_h, g.pad_top, g.window_h, g.in_h);
    rows[oh] = h1 - h0;
  }
  for (int64_t ow = 0; ow < g.out_w; ++ow) {
    const auto [w0, w1] = WindowRange(ow, g.stride_w, g.pad_left, g.window_w, g.in_w);
    cols[ow] = w1 - w0;
  }
  // The output rows (or columns) whose windows hold input row i.
  auto outputs_of = [](int64_t i, int64_t stride, int64_t pad, int64_t window, int64_t size) {
    const int64_t last = (i + pad) / stride;  // i + pad >= 0 and start <= i
    const int64_t t = i + pad - window + 1;   // start + window > i
    const int64_t first = t <= 0 ? 0 : (t + stride - 1) / stride;
    return std::pair<int64_t, int64_t>{first, std::min(size, last + 1)};
  };
  const T* gr = grad.flat<T>().data();
  T* din = out->flat<T>().data();
  const int64_t cost = g.in_w * depth * std::max<int64_t>(1, g.window_h / g.stride_h) *
                       std::max<int64_t>(1, g.window_w / g.stride_w);
  ParallelRange(g.batch * g.in_h, cost, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t n = r / g.in_h;
      const auto [oh0, oh1] = outputs_of(r % g.in_h, g.stride_h, g.pad_top, g.window_h, g.out_h);
      for (int64_t iw = 0; iw < g.in_w; ++iw) {
        const auto [ow0, ow1] = outputs_of(iw, g.stride_w, g.pad_left, g.window_w, g.out_w);
        Vec<T> acc(din + (r * g.in_w + iw) * depth, depth);
        acc.setZero();
        for (int64_t oh = oh0; oh < oh1; ++oh) {
          for (int64_t ow = ow0; ow < ow1; ++ow) {
            const T coeff = static_cast<T>(1.0 / static_cast<double>(rows[oh] * cols[ow]));
            acc += ConstVec<T>(gr + ((n * g.out_h + oh) * g.out_w + ow) * depth, depth) * coeff;
          }
        }
      }
    }
  });
  return OkStatus();
}

template <Status (*kCompute)(KernelContext&, const WindowAttrs&)>
Kernel WithAttrs(const WindowAttrs& attrs) {
  return [attrs](KernelContext& ctx) { return kCompute(ctx, attrs); };
}

enum class PoolOp { kMaxPool, kMaxPoolGrad, kAvgPool, kAvgPoolGrad };

template <PoolOp kOp>
StatusOr<Kernel> PoolKernel(const Node& node) {
  CKFLOW_ASSIGN_OR_RETURN(WindowAttrs attrs, ParsePoolAttrs(node.attrs()));
  return DispatchFloat(node.output_type(0), [&attrs](auto tag) -> StatusOr<Kernel> {
    using T = typename decltype(tag)::type;
    if constexpr (kOp == PoolOp::kMaxPool) return WithAttrs<PoolCompute<T, true>>(attrs);
    if constexpr (kOp == PoolOp::kAvgPool) return WithAttrs<PoolCompute<T, false>>(attrs);
    if constexpr (kOp == PoolOp::kMaxPoolGrad) return WithAttrs<MaxPoolGradCompute<T>>(attrs);
    if constexpr (kOp == PoolOp::kAvgPoolGrad) return WithAttrs<AvgPoolGradCompute<T>>(attrs);
  });
}

StatusOr<Kernel> MaxPoolWithTapsKernel(const Node& node) {
  CKFLOW_ASSIGN_OR_RETURN(WindowAttrs attrs, ParsePoolAttrs(node.attrs()));
  return DispatchFloat(node.output_type(0), [&attrs](auto tag) -> StatusOr<Kernel> {
    using T = typename decltype(tag)::type;
    return WithAttrs<MaxPoolWithTapsCompute<T>>(attrs);
  });
}

StatusOr<Kernel> MaxPoolGradWithTapsKernel(const Node& node) {
  CKFLOW_ASSIGN_OR_RETURN(WindowAttrs attrs, ParsePoolAttrs(node.attrs()));
  const bool relu = node.attrs().GetOr<bool>("relu", false);
  return DispatchFloat(node.output_type(0), [&attrs, relu](auto tag) -> StatusOr<Kernel> {
    using T = typename decltype(tag)::type;
    return Kernel([attrs, relu](KernelContext& ctx) {
      return MaxPoolGradWithTapsCompute<T>(ctx, attrs, relu);
    });
  });
}

}  // namespace
}  // namespace internal

Status RegisterPoolingOps(OpRegistry& r) {
  using namespace internal;  // NOLINT: the kernels above
  CKFLOW_RETURN_IF_ERROR(
      RegisterOp(r, {.type = "MaxPool",
                     .inputs = {"input"},
                     .shape_fn = [](InferenceContext& c) { return PoolShapeFn(c, "input"); },
                     .kernel_factory = PoolKernel<PoolOp::kMaxPool>}));
  CKFLOW_RETURN_IF_ERROR(RegisterOp(r, {.type = "MaxPoolGrad",
                                        .inputs = {"orig_input", "orig_output", "grad"},
                                        .shape_fn = MaxPoolGradShapeFn,
                                        .kernel_factory = PoolKernel<PoolOp::kMaxPoolGrad>}));
  // The session's remapper runs a MaxPool and its gradient as these
  // (above); not for graphs to build.
  CKFLOW_RETURN_IF_ERROR(RegisterOp(r, {.type = "_MaxPoolWithTaps",
                                        .inputs = {"input"},
                                        .shape_fn = MaxPoolWithTapsShapeFn,
                                        .kernel_factory = MaxPoolWithTapsKernel}));
  CKFLOW_RETURN_IF_ERROR(RegisterOp(r, {.type = "_MaxPoolGradWithTaps",
                                        .inputs = {"orig_input", "orig_output", "grad", "taps"},
                                        .shape_fn = MaxPoolGradWithTapsShapeFn,
                                        .kernel_factory = MaxPoolGradWithTapsKernel}));
  CKFLOW_RETURN_IF_ERROR(
      RegisterOp(r, {.type = "AvgPool",
                     .inputs = {"value"},
                     .shape_fn = [](InferenceContext& c) { return PoolShapeFn(c, "value"); },
                     .kernel_factory = PoolKernel<PoolOp::kAvgPool>}));
  return RegisterOp(r, {.type = "AvgPoolGrad",
                        .inputs = {"orig_input_shape", "grad"},
                        .shape_fn = AvgPoolGradShapeFn,
                        .kernel_factory = PoolKernel<PoolOp::kAvgPoolGrad>});
}

// ---------------------------------------------------------------- builders

namespace ops {
namespace {

AttrMap PoolAttrMap(const PoolAttrs& attrs) {
  AttrMap m;
  m.Set("ksize", attrs.ksize);
  m.Set("strides", attrs.strides);
  m.Set("padding", attrs.padding);
  m.Set("data_format", attrs.data_format);
  return m;
}

}  // namespace

Output MaxPool(const Scope& scope, Input input, const PoolAttrs& attrs) {
  return internal::BuildOp(scope, "MaxPool", {input}, PoolAttrMap(attrs));
}
Output MaxPoolGrad(const Scope& scope, Input orig_input, Input orig_output, Input grad,
                   const PoolAttrs& attrs) {
  return internal::BuildOp(scope, "MaxPoolGrad", {orig_input, orig_output, grad},
                           PoolAttrMap(attrs));
}
Output AvgPool(const Scope& scope, Input value, const PoolAttrs& attrs) {
  return internal::BuildOp(scope, "AvgPool", {value}, PoolAttrMap(attrs));
}
Output AvgPoolGrad(const Scope& scope, Input orig_input_shape, Input grad, const PoolAttrs& attrs) {
  return internal::BuildOp(scope, "AvgPoolGrad", {orig_input_shape, grad}, PoolAttrMap(attrs));
}

}  // namespace ops
}  // namespace ckflow
