// What MaxPool and AvgPool share with the fused convolution, which pools
// each block of its output while the block is in cache (_FusedConv2D with
// a MaxPool in its fused_ops, ops/conv_ops.cc). Internal to ops/.
//
// Thread safety: pure functions.

#ifndef CKFLOW_OPS_POOLING_INTERNAL_H_
#define CKFLOW_OPS_POOLING_INTERNAL_H_

#include <Eigen/Core>
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

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
// their count.
template <typename T, bool kMax>
void PoolRows(const WindowGeometry& g, const T* rows, int64_t first_row, int64_t oh0, int64_t oh1,
              T* out) {
  using Vec = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
  using ConstVec = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;
  const int64_t depth = g.depth;
  for (int64_t oh = oh0; oh < oh1; ++oh) {
    const auto [h0, h1] = WindowRange(oh, g.stride_h, g.pad_top, g.window_h, g.in_h);
    for (int64_t ow = 0; ow < g.out_w; ++ow) {
      const auto [w0, w1] = WindowRange(ow, g.stride_w, g.pad_left, g.window_w, g.in_w);
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

}  // namespace ckflow::internal

#endif  // CKFLOW_OPS_POOLING_INTERNAL_H_
