// What MaxPool and AvgPool share with the fused convolution, which pools
// each block of its output while the block is in cache (_FusedConv2D with
// a MaxPool in its fused_ops, ops/conv_ops.cc). Internal to ops/.
//
// Thread safety: pure functions.

#ifndef CKFLOW_OPS_POOLING_INTERNAL_H_
#define CKFLOW_OPS_POOLING_INTERNAL_H_

#include <Eigen/Core>
#include <algorithm>
#include <bit>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/status.h"
#include "base/tensor.h"
#include "graph/op_def.h"
#include "ops/window_internal.h"

namespace ckflow::internal {

// The run-time geometry of pooling `input`, and its output shape.
struct PoolShapes {
  WindowGeometry g;
  TensorShape output;
};

// InvalidArgument naming `arg` unless `input` has rank 4 and the window
// fits it.
StatusOr<PoolShapes> ResolvePool(const TensorShape& input, std::string_view arg,
                                 const WindowAttrs& attrs);

// InvalidArgument naming `arg` unless `t` (a gradient, output or taps of
// the pooling of `input`) has the pooled shape.
Status CheckPooled(const Tensor& t, std::string_view arg, const PoolShapes& s,
                   const TensorShape& input);

// Whether no two windows share an input pixel (stride >= window, no
// padding before): each pixel then gets at most one window's gradient.
bool DisjointWindows(const WindowGeometry& g);

// The pooled shape of `input` (described as `input_desc` in messages).
StatusOr<PartialShape> PoolOutputShape(const PartialShape& input, const std::string& input_desc,
                                       const WindowAttrs& attrs);

// The input rows [begin, end) the window of output row `o` covers.
inline std::pair<int64_t, int64_t> WindowRange(int64_t o, int64_t stride, int64_t pad,
                                               int64_t window, int64_t in) {
  const int64_t start = o * stride - pad;
  return {std::max<int64_t>(0, start), std::min(in, start + window)};
}

// Output rows [oh0, oh1) of one image, to `out` (row oh0's first element),
// from `rows`, input row `first_row` of the same image and the rows after
// it that the windows read. Max (kMax) keeps the first tap, then takes a
// tap where it is larger (Eigen's max, which keeps the first operand when
// either is NaN); average sums the taps in row-major order and divides by
// their count. A depth of 32 or 64 channels is known when compiling
// (kDepth): each vector of channels then goes through its window in a
// register, where a row in memory made each tap wait for the store of the
// one before.
template <typename T, bool kMax, int64_t kDepth = 0>
void PoolRows(const WindowGeometry& g, const T* rows, int64_t first_row, int64_t oh0, int64_t oh1,
              T* out) {
  if constexpr (kDepth == 0) {
    if (g.depth == 32) return PoolRows<T, kMax, 32>(g, rows, first_row, oh0, oh1, out);
    if (g.depth == 64) return PoolRows<T, kMax, 64>(g, rows, first_row, oh0, oh1, out);
  }
  using Vec = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
  using ConstVec = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;
  const int64_t depth = g.depth;
  for (int64_t oh = oh0; oh < oh1; ++oh) {
    const auto [h0, h1] = WindowRange(oh, g.stride_h, g.pad_top, g.window_h, g.in_h);
    for (int64_t ow = 0; ow < g.out_w; ++ow) {
      const auto [w0, w1] = WindowRange(ow, g.stride_w, g.pad_left, g.window_w, g.in_w);
      if constexpr (kDepth != 0) {
        constexpr int64_t kLanes = 64 / sizeof(T);
        static_assert(kDepth % kLanes == 0);
        using Lanes = Eigen::Array<T, kLanes, 1>;
        if (h0 >= h1 || w0 >= w1) continue;
        for (int64_t c = 0; c < kDepth; c += kLanes) {
          const auto at = [&](int64_t h, int64_t w) {
            return Eigen::Map<const Lanes>(rows + ((h - first_row) * g.in_w + w) * kDepth + c);
          };
          Lanes acc = at(h0, w0);
          for (int64_t h = h0; h < h1; ++h) {
            for (int64_t w = h == h0 ? w0 + 1 : w0; w < w1; ++w) {
              if constexpr (kMax) {
                acc = acc.max(at(h, w));
              } else {
                acc += at(h, w);
              }
            }
          }
          if constexpr (!kMax) acc /= static_cast<T>((h1 - h0) * (w1 - w0));
          Eigen::Map<Lanes>(out + ((oh - oh0) * g.out_w + ow) * kDepth + c) = acc;
        }
        continue;
      }
      Vec acc(out + ((oh - oh0) * g.out_w + ow) * depth, depth);
      bool first = true;
      for (int64_t h = h0; h < h1; ++h) {
        for (int64_t w = w0; w < w1; ++w) {
          ConstVec v(rows + ((h - first_row) * g.in_w + w) * depth, depth);
          if (first) {
            acc = v;
            first = false;
          } else if constexpr (kMax) {
            acc = acc.max(v);
          } else {
            acc += v;
          }
        }
      }
      if constexpr (!kMax) acc /= static_cast<T>((h1 - h0) * (w1 - w0));
    }
  }
}

// The gradient _MaxPoolGradWithTaps gives `width` channels of one input
// pixel, which is tap `t` of a window that does not overlap another: the
// window's gradient `grad` where `taps` took that tap (and, with kRelu,
// where the pooled maximum `max` is > 0, the ReLU before the pooling
// letting it through), +0 elsewhere (+ 0 turns a -0 gradient into +0, as
// MaxPoolGrad's sum from +0 does). kWidth, if not 0, is `width` known when
// compiling: a layer's 32 or 64 channels then take a few whole vectors,
// without the loop's checks for a remainder, which cost more than the
// tap's work.
template <bool kRelu, int64_t kWidth, typename T>
inline void TapGradient(const uint8_t* __restrict taps, const T* __restrict grad,
                        const T* __restrict max, int64_t t, int64_t any_width, T* __restrict out) {
  using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  const int64_t width = kWidth != 0 ? kWidth : any_width;
  const auto tap_bits = static_cast<Bits>(t);
  for (int64_t c = 0; c < width; ++c) {
    // Masks, not &&: a branch per channel does not vectorize.
    const Bits tap = -static_cast<Bits>(static_cast<Bits>(taps[c]) == tap_bits);
    const Bits pass = kRelu ? -static_cast<Bits>(max[c] > T(0)) : ~Bits{0};
    out[c] = std::bit_cast<T>(std::bit_cast<Bits>(grad[c]) & tap & pass) + T(0);
  }
}

// The rows of _MaxPoolGradWithTaps's output ([batch * in_h * in_w, depth],
// the gradient of the pooling's input) where the windows do not overlap,
// made on demand from the pooled gradient and the taps. A
// FusedBatchNormGradV3 that reads that gradient runs as
// _FusedBatchNormGradFromTaps (ops/normalization_ops.cc), which makes the
// rows it needs in cache rather than have the full-size gradient written
// to memory and read back twice. The rows have the bits of the op's.
template <typename T>
class TapGradientRows {
 public:
  // REQUIRES: DisjointWindows(g); taps, grad and pooled have the pooled
  // shape and outlive this.
  TapGradientRows(const WindowGeometry& g, const uint8_t* taps, const T* grad, const T* pooled,
                  bool relu)
      : g_(g), taps_(taps), grad_(grad), pooled_(pooled), relu_(relu) {
    // Each input row's (column's) window, or -1 if none covers it, and its
    // offset in the window: no division per pixel.
    Index(g.in_h, g.stride_h, g.pad_top, g.window_h, g.out_h, g.window_w, window_of_h_, tap_of_h_);
    Index(g.in_w, g.stride_w, g.pad_left, g.window_w, g.out_w, 1, window_of_w_, tap_of_w_);
  }

  // Rows [begin, end) to out[0, (end - begin) * depth).
  void Fill(int64_t begin, int64_t end, T* out) const {
    if (g_.depth == 32) return Fill<32>(begin, end, out);
    if (g_.depth == 64) return Fill<64>(begin, end, out);
    Fill<0>(begin, end, out);
  }

 private:
  static void Index(int64_t in, int64_t stride, int64_t pad, int64_t window, int64_t out,
                    int64_t tap_step, std::vector<int64_t>& window_of,
                    std::vector<int64_t>& tap_of) {
    window_of.assign(in, -1);
    tap_of.assign(in, 0);
    for (int64_t i = 0; i < in; ++i) {
      const int64_t o = (i + pad) / stride;
      const int64_t offset = i + pad - o * stride;
      if (o < out && offset < window) {
        window_of[i] = o;
        tap_of[i] = offset * tap_step;
      }
    }
  }

  template <int64_t kWidth>
  void Fill(int64_t begin, int64_t end, T* out) const {
    const int64_t depth = g_.depth;
    int64_t w = begin % g_.in_w;
    int64_t h = begin / g_.in_w % g_.in_h;
    int64_t n = begin / (g_.in_w * g_.in_h);
    for (int64_t r = begin; r < end; ++r, out += depth) {
      const int64_t oh = window_of_h_[h], ow = window_of_w_[w];
      if (oh < 0 || ow < 0) {
        std::fill_n(out, depth, T(0));
      } else {
        const int64_t at = ((n * g_.out_h + oh) * g_.out_w + ow) * depth;
        const int64_t t = tap_of_h_[h] + tap_of_w_[w];
        if (relu_) {
          TapGradient<true, kWidth>(taps_ + at, grad_ + at, pooled_ + at, t, depth, out);
        } else {
          TapGradient<false, kWidth>(taps_ + at, grad_ + at, pooled_ + at, t, depth, out);
        }
      }
      if (++w == g_.in_w) {
        w = 0;
        if (++h == g_.in_h) {
          h = 0;
          ++n;
        }
      }
    }
  }

  WindowGeometry g_;
  const uint8_t* taps_;
  const T* grad_;
  const T* pooled_;
  bool relu_;
  std::vector<int64_t> window_of_h_, tap_of_h_, window_of_w_, tap_of_w_;
};

}  // namespace ckflow::internal

#endif  // CKFLOW_OPS_POOLING_INTERNAL_H_
