// Convolutions: Conv2D and DepthwiseConv2dNative with their backprop ops.
//
// Conv2D is im2col + Eigen's GEMM. The output pixels (m = (n * out_h + oh)
// * out_w + ow) are cut into blocks fixed by the shapes alone: several
// whole images per block when an image is small, else a few output rows of
// one image. A block's patch matrix (one row per output pixel: the
// window_h x window_w x depth input values it sees, in the filter's order)
// is built in a buffer of the worker's and multiplied by the filter, a
// [window_h * window_w * depth, out_depth] matrix as stored. Only one block
// of patches per worker exists at a time.
//
// The backward passes keep the blocks:
//  - BackpropInput multiplies a block of the output gradient by the
//    filter's transpose and scatters the patch gradients into the input
//    gradient (col2im). Blocks of the same image overlap in the input rows
//    they touch, so those run in two phases, even blocks then odd ones;
//    blocks are at least as tall as the window, so no two blocks of a
//    phase touch the same row, and each input element adds its parts in
//    the same order whatever the threads.
//  - BackpropFilter sums patches^T * out_backprop over blocks: the blocks
//    are dealt into a fixed number of groups (contiguous runs), each summed
//    by one worker into its own partial, and the partials are added in
//    group order.
// A 1x1 convolution with stride 1 and no padding needs no patches: the
// input is already the patch matrix, and every pass is a plain GEMM.
//
// Depthwise convolutions do too little work per element for a GEMM: they
// are direct loops over output rows (forward), input rows (the input
// gradient, gathered so every element is owned by one worker) and groups
// of rows with partials (the filter gradient), vectorized over channels.
//
// So every kernel's blocks, and the order in which any element is summed,
// depend on the shapes only: the results are bit-identical on any number
// of threads.

#include "ops/conv_ops.h"

#include <Eigen/Core>
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ops/fused_epilogue_internal.h"
#include "ops/ops_internal.h"
#include "ops/pooling_internal.h"
#include "ops/standard_ops.h"
#include "ops/window_internal.h"

namespace ckflow {
namespace internal {
namespace {

template <typename T>
using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename T>
using MatMap = Eigen::Map<Matrix<T>>;
template <typename T>
using ConstMatMap = Eigen::Map<const Matrix<T>>;
template <typename T>
using Vec = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <typename T>
using ConstVec = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

enum class ConvKind { kConv2D, kDepthwise };

// ------------------------------------------------------------ shapes

// The output shape of convolving `input` with `filter` (rank 4 or unknown),
// each described for messages ("input is [1,5,5,3] (x:0)").
StatusOr<PartialShape> ConvOutputShape(ConvKind kind, const PartialShape& input,
                                       const std::string& input_desc, const PartialShape& filter,
                                       const std::string& filter_desc, const WindowAttrs& attrs) {
  const bool f = filter.known_rank();
  const int64_t depth = input.known_rank() ? input.dim(3) : -1;
  const int64_t filter_depth = f ? filter.dim(2) : -1;
  if (depth >= 0 && filter_depth >= 0 && depth != filter_depth) {
    return InvalidArgumentError("filter's in_channels must equal input's depth: ", input_desc, ", ",
                                filter_desc);
  }
  if (f && (filter.dim(0) == 0 || filter.dim(1) == 0)) {
    return InvalidArgumentError(filter_desc, ", but its rows and columns must be positive");
  }
  int64_t out_depth = f ? filter.dim(3) : -1;
  if (kind == ConvKind::kDepthwise) {
    const int64_t channels = depth >= 0 ? depth : filter_depth;
    out_depth = channels >= 0 && out_depth >= 0 ? channels * out_depth : -1;
  }
  StatusOr<PartialShape> out =
      WindowedOutputShape(input, f ? filter.dim(0) : -1, f ? filter.dim(1) : -1, out_depth, attrs);
  if (!out.ok()) {
    return InvalidArgumentError(out.status().message(), ": ", input_desc, ", ", filter_desc);
  }
  return out;
}

Status CheckFloatPair(const InferenceContext& c, int i, std::string_view arg_i, int j,
                      std::string_view arg_j) {
  CKFLOW_RETURN_IF_ERROR(CheckSameDtype(c, i, arg_i, j, arg_j));
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, i, arg_i, kFloatTypes));
  CKFLOW_RETURN_IF_ERROR(CheckRank(c, i, arg_i, 4, 4));
  return CheckRank(c, j, arg_j, 4, 4);
}

// Conv2D, DepthwiseConv2dNative: (input, filter).
Status ConvShapeFn(InferenceContext& c, ConvKind kind) {
  CKFLOW_ASSIGN_OR_RETURN(WindowAttrs attrs, ParseConvAttrs(*c.attrs));
  CKFLOW_RETURN_IF_ERROR(CheckFloatPair(c, 0, "input", 1, "filter"));
  CKFLOW_ASSIGN_OR_RETURN(
      PartialShape out,
      ConvOutputShape(kind, c.input_shapes[0],
                      DescribeShape("input", c.input_shapes[0], InputName(c, 0)), c.input_shapes[1],
                      DescribeShape("filter", c.input_shapes[1], InputName(c, 1)), attrs));
  c.AddOutput(c.input_types[0], std::move(out));
  return OkStatus();
}

// The backprop ops: (input_sizes, filter, out_backprop) when `of_input`,
// else (input, filter_sizes, out_backprop). The output has the shape the
// sizes input describes.
Status ConvBackpropShapeFn(InferenceContext& c, ConvKind kind, bool of_input) {
  CKFLOW_ASSIGN_OR_RETURN(WindowAttrs attrs, ParseConvAttrs(*c.attrs));
  const int tensor = of_input ? 1 : 0;
  const int sizes = of_input ? 0 : 1;
  const char* tensor_arg = of_input ? "filter" : "input";
  const char* sizes_arg = of_input ? "input_sizes" : "filter_sizes";
  CKFLOW_RETURN_IF_ERROR(CheckFloatPair(c, tensor, tensor_arg, 2, "out_backprop"));
  CKFLOW_ASSIGN_OR_RETURN(PartialShape described, ShapeOfSizesInput(c, sizes, sizes_arg));
  const std::string described_desc = DescribeShape(sizes_arg, described, InputName(c, sizes));
  const std::string tensor_desc =
      DescribeShape(tensor_arg, c.input_shapes[tensor], InputName(c, tensor));
  const PartialShape& input = of_input ? described : c.input_shapes[0];
  const PartialShape& filter = of_input ? c.input_shapes[1] : described;
  CKFLOW_ASSIGN_OR_RETURN(PartialShape out,
                          ConvOutputShape(kind, input, of_input ? described_desc : tensor_desc,
                                          filter, of_input ? tensor_desc : described_desc, attrs));
  const PartialShape& backprop = c.input_shapes[2];
  if (!backprop.IsCompatibleWith(out)) {
    return InvalidArgumentError(DescribeShape("out_backprop", backprop, InputName(c, 2)),
                                ", but the convolution's output is ", out.ToString(), ": ",
                                of_input ? described_desc : tensor_desc, ", ",
                                of_input ? tensor_desc : described_desc);
  }
  c.AddOutput(c.input_types[tensor], described);
  return OkStatus();
}

// The run-time counterpart of ConvOutputShape, on complete shapes.
struct ConvShapes {
  WindowGeometry g;
  int64_t out_depth = 0;   // Conv2D's filter out_depth; depthwise: depth * multiplier
  int64_t multiplier = 1;  // depthwise only
  TensorShape output;
};

StatusOr<ConvShapes> ResolveConv(ConvKind kind, const TensorShape& input, const TensorShape& filter,
                                 const WindowAttrs& attrs) {
  for (const auto& [arg, shape] : {std::pair{"input", &input}, std::pair{"filter", &filter}}) {
    if (shape->rank() != 4) {
      return InvalidArgumentError(arg, " is ", shape->ToString(), ", but must have rank 4");
    }
  }
  CKFLOW_ASSIGN_OR_RETURN(PartialShape out,
                          ConvOutputShape(kind, input, DescribeShape("input", input, ""), filter,
                                          DescribeShape("filter", filter, ""), attrs));
  ConvShapes s;
  CKFLOW_ASSIGN_OR_RETURN(s.g, ComputeGeometry(input, filter.dim(0), filter.dim(1), attrs));
  s.out_depth = out.dim(3);
  s.multiplier = filter.dim(3);
  CKFLOW_ASSIGN_OR_RETURN(s.output, TensorShape::Make(out.dims()));
  return s;
}

Status CheckBackpropShape(const Tensor& backprop, const ConvShapes& s, const TensorShape& input,
                          const TensorShape& filter) {
  if (backprop.shape() == s.output) return OkStatus();
  return InvalidArgumentError("out_backprop is ", backprop.shape().ToString(),
                              ", but the convolution's output is ", s.output.ToString(),
                              ": input is ", input.ToString(), ", filter is ", filter.ToString());
}

// ------------------------------------------------------------ blocks

// Bytes of one block's patch matrix: with the filter and the block's output
// it stays in a core's L2 (1 MiB here) while the GEMM runs. Measured with
// bench/conv_bench (res56, res28, cnn2 shapes, one thread): with blocks of
// 64 KiB to 1 MiB the three passes all ran at 1.03-1.11x the speed of
// MatMul on the same multiply-adds on average, no size apart from the
// others beyond the noise of a shared machine; 256 KiB is the middle.
constexpr int64_t kPatchBytes = 256 << 10;
// At most this many partial filter gradients (BackpropFilter's groups)...
constexpr int64_t kMaxGroups = 16;
// ...holding at most this many bytes together.
constexpr int64_t kPartialBytes = 32 << 20;

// The blocks of output pixels described in the file comment.
class ConvBlocks {
 public:
  // `row_bytes`: one output pixel's patch; `min_rows`: the fewest output
  // rows in a block that is part of an image; `row_multiple`: what the
  // rows of such a block are a multiple of (but the image's last).
  ConvBlocks(const WindowGeometry& g, int64_t row_bytes, int64_t min_rows, int64_t row_multiple = 1)
      : out_h_(g.out_h), out_w_(g.out_w), pixels_(g.out_h * g.out_w), batch_(g.batch) {
    const int64_t target = std::max<int64_t>(1, kPatchBytes / std::max<int64_t>(row_bytes, 1));
    if (pixels_ <= target) {
      images_ = std::min(batch_, std::max<int64_t>(1, target / std::max<int64_t>(pixels_, 1)));
      count_ = (batch_ + images_ - 1) / images_;
      max_pixels_ = images_ * pixels_;
    } else {
      rows_ = std::clamp(target / out_w_, std::min(min_rows, out_h_), out_h_);
      rows_ = std::min(out_h_, std::max(row_multiple, rows_ / row_multiple * row_multiple));
      per_image_ = (out_h_ + rows_ - 1) / rows_;
      count_ = batch_ * per_image_;
      max_pixels_ = rows_ * out_w_;
    }
  }

  int64_t count() const { return count_; }
  int64_t max_pixels() const { return max_pixels_; }
  // True if blocks are parts of images (and so may overlap in the input).
  bool partial_images() const { return images_ == 0; }
  int64_t per_image() const { return per_image_; }
  // Whether each window of `pool`, a pooling of the output, lies in one
  // block.
  bool HoldWholeWindows(const WindowGeometry& pool) const {
    return images_ > 0 ||
           (pool.window_h <= pool.stride_h && pool.pad_top == 0 && rows_ % pool.stride_h == 0);
  }

  // The output pixels [begin, end) of block b.
  std::pair<int64_t, int64_t> Pixels(int64_t b) const {
    if (images_ > 0) {
      const int64_t n0 = b * images_;
      return {n0 * pixels_, std::min(batch_, n0 + images_) * pixels_};
    }
    const int64_t n = b / per_image_;
    const int64_t oh0 = (b % per_image_) * rows_;
    const int64_t oh1 = std::min(out_h_, oh0 + rows_);
    return {n * pixels_ + oh0 * out_w_, n * pixels_ + oh1 * out_w_};
  }

 private:
  int64_t out_h_, out_w_, pixels_, batch_;
  int64_t images_ = 0;  // whole images per block, 0 for parts of images
  int64_t rows_ = 0;    // output rows per block of a part of an image
  int64_t per_image_ = 1;
  int64_t count_ = 0;
  int64_t max_pixels_ = 0;
};

bool IsPointwise(const WindowGeometry& g) {
  return g.window_h == 1 && g.window_w == 1 && g.stride_h == 1 && g.stride_w == 1 &&
         g.pad_top == 0 && g.pad_left == 0 && g.out_h == g.in_h && g.out_w == g.in_w;
}

// Calls fn(pixel, n, ih0, iw0) for output pixels [m0, m1): the image and the
// input row and column of the window's first tap.
template <typename Fn>
void ForEachPixel(const WindowGeometry& g, int64_t m0, int64_t m1, Fn&& fn) {
  int64_t ow = m0 % g.out_w;
  int64_t oh = (m0 / g.out_w) % g.out_h;
  int64_t n = m0 / (g.out_w * g.out_h);
  for (int64_t m = m0; m < m1; ++m) {
    fn(m, n, oh * g.stride_h - g.pad_top, ow * g.stride_w - g.pad_left);
    if (++ow == g.out_w) {
      ow = 0;
      if (++oh == g.out_h) {
        oh = 0;
        ++n;
      }
    }
  }
}

// Im2Col's copies. A row of a few channels (a 1-channel image's window row
// is 3 floats) is copied by a loop the compiler unrolls, not by memmove,
// whose call cost more than the copy: a third of a 1-channel convolution's
// time. The bound keeps GCC from turning the loop back into that call.
template <typename T>
void CopyRow(const T* src, int64_t n, T* dst) {
  if (n > 16) {
    std::copy_n(src, n, dst);
    return;
  }
  for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
}

template <typename T>
void FillRow(int64_t n, T* dst) {
  if (n > 16) {
    std::fill_n(dst, n, T(0));
    return;
  }
  for (int64_t i = 0; i < n; ++i) dst[i] = T(0);
}

// The patch rows of output pixels [m0, m1) into `patches`, zeros where the
// window hangs over the input's edge. kTapRow, if not 0, is window_w * depth
// (a 3-wide window over a 1- or 3-channel image, the first layer of an image
// network), so that copying a window row is kTapRow moves and not a loop:
// the loop's bookkeeping was most of Im2Col's time on 1-channel images.
template <typename T, int64_t kTapRow = 0>
void Im2Col(const WindowGeometry& g, const T* in, int64_t m0, int64_t m1, T* patches) {
  const int64_t c = g.depth;
  const int64_t tap_row = kTapRow != 0 ? kTapRow : g.window_w * c;
  ForEachPixel(g, m0, m1, [&](int64_t, int64_t n, int64_t ih0, int64_t iw0) {
    const T* image = in + n * g.in_h * g.in_w * c;
    const bool inside_w = g.dilation_w == 1 && iw0 >= 0 && iw0 + g.window_w <= g.in_w;
    for (int64_t kh = 0; kh < g.window_h; ++kh, patches += tap_row) {
      const int64_t ih = ih0 + kh * g.dilation_h;
      if (ih < 0 || ih >= g.in_h) {
        FillRow(tap_row, patches);
        continue;
      }
      const T* src = image + ih * g.in_w * c;
      if (inside_w) {
        if constexpr (kTapRow != 0) {
          const T* row = src + iw0 * c;
          for (int64_t i = 0; i < kTapRow; ++i) patches[i] = row[i];
        } else {
          CopyRow(src + iw0 * c, tap_row, patches);
        }
        continue;
      }
      for (int64_t kw = 0; kw < g.window_w; ++kw) {
        const int64_t iw = iw0 + kw * g.dilation_w;
        if (iw < 0 || iw >= g.in_w) {
          FillRow(c, patches + kw * c);
        } else {
          CopyRow(src + iw * c, c, patches + kw * c);
        }
      }
    }
  });
}

// One task's source of patch rows: Im2Col into a buffer of its own, except
// for a pointwise convolution, whose patch rows are the input's rows.
template <typename T>
class PatchRows {
 public:
  PatchRows(const WindowGeometry& g, const T* in, int64_t max_pixels)
      : g_(g),
        in_(in),
        k_(g.window_h * g.window_w * g.depth),
        // Written before read: no zero fill.
        buffer_(IsPointwise(g) ? nullptr : std::make_unique_for_overwrite<T[]>(max_pixels * k_)) {}

  // The [m1 - m0, k] patch rows of output pixels [m0, m1).
  const T* Rows(int64_t m0, int64_t m1) {
    if (buffer_ == nullptr) return in_ + m0 * k_;
    switch (g_.window_w * g_.depth) {
      case 3:
        Im2Col<T, 3>(g_, in_, m0, m1, buffer_.get());
        break;
      case 9:
        Im2Col<T, 9>(g_, in_, m0, m1, buffer_.get());
        break;
      default:
        Im2Col(g_, in_, m0, m1, buffer_.get());
    }
    return buffer_.get();
  }

 private:
  const WindowGeometry& g_;
  const T* in_;
  int64_t k_;
  std::unique_ptr<T[]> buffer_;
};

// Adds the patch gradients of output pixels [m0, m1) into the input
// gradient `din`, pixel by pixel, tap by tap (the inverse of Im2Col).
template <typename T>
void Col2ImAdd(const WindowGeometry& g, const T* patches, int64_t m0, int64_t m1, T* din) {
  const int64_t c = g.depth;
  const int64_t tap_row = g.window_w * c;
  ForEachPixel(g, m0, m1, [&](int64_t, int64_t n, int64_t ih0, int64_t iw0) {
    T* image = din + n * g.in_h * g.in_w * c;
    const bool inside_w = g.dilation_w == 1 && iw0 >= 0 && iw0 + g.window_w <= g.in_w;
    for (int64_t kh = 0; kh < g.window_h; ++kh, patches += tap_row) {
      const int64_t ih = ih0 + kh * g.dilation_h;
      if (ih < 0 || ih >= g.in_h) continue;
      T* dst = image + ih * g.in_w * c;
      if (inside_w) {
        Vec<T>(dst + iw0 * c, tap_row) += ConstVec<T>(patches, tap_row);
        continue;
      }
      for (int64_t kw = 0; kw < g.window_w; ++kw) {
        const int64_t iw = iw0 + kw * g.dilation_w;
        if (iw >= 0 && iw < g.in_w) Vec<T>(dst + iw * c, c) += ConstVec<T>(patches + kw * c, c);
      }
    }
  });
}

// ------------------------------------------------------- direct kernels

// A 3x3 window over 1 or 3 channels (the first layer of an image network)
// has patches of 9 or 27 values: too short a K for a GEMM, whose packing
// and the im2col feeding it cost more than the multiply-adds (bench/
// conv_bench's cnn1 ran at 0.48x MatMul forward and 0.44x for the filter
// gradient). These passes read each pixel's patch straight from the image
// and keep their sums in registers: the forward a run of output channels
// per pixel, the filter gradient every tap's run of channels.
bool IsDirect(const WindowGeometry& g) {
  return g.window_h == 3 && g.window_w == 3 && (g.depth == 1 || g.depth == 3);
}

// Output channels per register run: two 512-bit vectors' worth.
template <typename T>
constexpr int64_t kRunLanes = 128 / sizeof(T);

// Whether the 3x3 window whose first tap is (ih0, iw0) lies inside the
// image.
bool WindowInside(const WindowGeometry& g, int64_t ih0, int64_t iw0) {
  return ih0 >= 0 && iw0 >= 0 && ih0 + 2 * g.dilation_h < g.in_h && iw0 + 2 * g.dilation_w < g.in_w;
}

// The patch of the window whose first tap is (ih0, iw0) of `image`, in the
// filter's order, zeros where it hangs over the edge.
template <typename T, int kDepth>
[[gnu::always_inline]] inline void GatherPatch(const WindowGeometry& g, const T* image, int64_t ih0,
                                               int64_t iw0, T* patch) {
  const bool inside = WindowInside(g, ih0, iw0);
  for (int kh = 0; kh < 3; ++kh) {
    const int64_t ih = ih0 + kh * g.dilation_h;
    for (int kw = 0; kw < 3; ++kw) {
      const int64_t iw = iw0 + kw * g.dilation_w;
      const bool in = inside || (ih >= 0 && ih < g.in_h && iw >= 0 && iw < g.in_w);
      const int64_t at = in ? (ih * g.in_w + iw) * kDepth : 0;
      for (int c = 0; c < kDepth; ++c)
        patch[(kh * 3 + kw) * kDepth + c] = in ? image[at + c] : T(0);
    }
  }
}

// The output rows of pixels [m0, m1) into `out` (row m0 first): per pixel,
// its patch times the [9 * kDepth, out_depth] filter, the taps summed in
// order. Four pixels at a time: one pixel's sums are a chain of dependent
// multiply-adds, which alone would wait on each other's latency. A pixel
// whose window lies inside the image reads its taps where they are;
// a group with one that hangs over the edge gathers its patches first.
template <typename T, int kDepth>
void DirectConvForward(const WindowGeometry& g, int64_t out_depth, const T* in, const T* filter,
                       int64_t m0, int64_t m1, T* out) {
  constexpr int kTaps = 9 * kDepth;
  constexpr int kPixels = 4;
  constexpr int64_t kLanes = kRunLanes<T>;
  using Run = Eigen::Array<T, kLanes, 1>;
  using ConstRun = Eigen::Map<const Run>;
  // Where tap t is from a pixel's first tap, in the image or in a patch.
  int64_t in_image[kTaps], in_patch[kTaps];
  for (int kh = 0; kh < 3; ++kh) {
    for (int kw = 0; kw < 3; ++kw) {
      for (int c = 0; c < kDepth; ++c) {
        const int t = (kh * 3 + kw) * kDepth + c;
        in_image[t] = (kh * g.dilation_h * g.in_w + kw * g.dilation_w) * kDepth + c;
        in_patch[t] = t;
      }
    }
  }
  alignas(64) T patches[kPixels][kTaps] = {};
  const T* first_tap[kPixels];
  int64_t pixel[kPixels][3];  // n, ih0, iw0 of each pixel of the group
  int count = 0;
  bool inside = true;
  T* o = out;  // the group's first output row
  auto flush = [&] {
    const int64_t* at = in_image;
    if (!inside) {
      for (int p = 0; p < count; ++p) {
        GatherPatch<T, kDepth>(g, in + pixel[p][0] * g.in_h * g.in_w * kDepth, pixel[p][1],
                               pixel[p][2], patches[p]);
        first_tap[p] = patches[p];
      }
      at = in_patch;
    }
    for (int p = count; p < kPixels; ++p) first_tap[p] = first_tap[0];
    int64_t c0 = 0;
    for (; c0 + kLanes <= out_depth; c0 += kLanes) {
      Run acc[kPixels];
      const ConstRun f0(filter + c0);
      for (int p = 0; p < kPixels; ++p) acc[p] = first_tap[p][at[0]] * f0;
      for (int t = 1; t < kTaps; ++t) {
        const Run f = ConstRun(filter + t * out_depth + c0);
        for (int p = 0; p < kPixels; ++p) acc[p] += first_tap[p][at[t]] * f;
      }
      for (int p = 0; p < count; ++p) Eigen::Map<Run>(o + p * out_depth + c0) = acc[p];
    }
    if (c0 < out_depth) {
      const int64_t rest = out_depth - c0;
      for (int p = 0; p < count; ++p) {
        Vec<T> acc(o + p * out_depth + c0, rest);
        acc = first_tap[p][at[0]] * ConstVec<T>(filter + c0, rest);
        for (int t = 1; t < kTaps; ++t) {
          acc += first_tap[p][at[t]] * ConstVec<T>(filter + t * out_depth + c0, rest);
        }
      }
    }
    o += count * out_depth;
    count = 0;
    inside = true;
  };
  ForEachPixel(g, m0, m1, [&](int64_t, int64_t n, int64_t ih0, int64_t iw0) {
    if (WindowInside(g, ih0, iw0)) {
      first_tap[count] = in + ((n * g.in_h + ih0) * g.in_w + iw0) * kDepth;
    } else {
      inside = false;
    }
    pixel[count][0] = n;
    pixel[count][1] = ih0;
    pixel[count][2] = iw0;
    if (++count == kPixels) flush();
  });
  if (count > 0) flush();
}

// The filter gradient of pixels [m0, m1) into `sums`, [9 * kDepth,
// out_depth]: each tap's sum over the pixels in order.
template <typename T, int kDepth>
void DirectFilterGradient(const WindowGeometry& g, int64_t out_depth, const T* in, const T* dout,
                          int64_t m0, int64_t m1, T* sums) {
  constexpr int kTaps = 9 * kDepth;
  // 9 taps keep two vectors each in registers, 27 one.
  constexpr int64_t kLanes = kDepth == 1 ? kRunLanes<T> : kRunLanes<T> / 2;
  using Run = Eigen::Array<T, kLanes, 1>;
  alignas(64) T patch[kTaps];
  for (int64_t c0 = 0; c0 < out_depth; c0 += kLanes) {
    const int64_t width = std::min(kLanes, out_depth - c0);
    if (width < kLanes) {  // the last channels: sums in memory
      for (int t = 0; t < kTaps; ++t) Vec<T>(sums + t * out_depth + c0, width).setZero();
      ForEachPixel(g, m0, m1, [&](int64_t m, int64_t n, int64_t ih0, int64_t iw0) {
        GatherPatch<T, kDepth>(g, in + n * g.in_h * g.in_w * kDepth, ih0, iw0, patch);
        const ConstVec<T> d(dout + m * out_depth + c0, width);
        for (int t = 0; t < kTaps; ++t) Vec<T>(sums + t * out_depth + c0, width) += patch[t] * d;
      });
      continue;
    }
    Run acc[kTaps];
    for (Run& a : acc) a.setZero();
    ForEachPixel(g, m0, m1, [&](int64_t m, int64_t n, int64_t ih0, int64_t iw0) {
      GatherPatch<T, kDepth>(g, in + n * g.in_h * g.in_w * kDepth, ih0, iw0, patch);
      const Run d = Eigen::Map<const Run>(dout + m * out_depth + c0);
      for (int t = 0; t < kTaps; ++t) acc[t] += patch[t] * d;
    });
    for (int t = 0; t < kTaps; ++t) Eigen::Map<Run>(sums + t * out_depth + c0) = acc[t];
  }
}

// The fewest output rows per block for which blocks b and b + 2 of an image
// touch disjoint input rows: (rows + 1) * stride > span - 1... i.e. the
// window of the next block's first row starts past this block's last.
int64_t NonOverlappingRows(const WindowGeometry& g) {
  const int64_t span = (g.window_h - 1) * g.dilation_h + 1;
  if (span - 1 - g.stride_h < 0) return 1;
  return (span - 1 - g.stride_h) / g.stride_h + 1;
}

// ------------------------------------------------------------ Conv2D

// Pools `conv`, the output of the convolution's output pixels [m0, m1) (a
// block of whole images, or rows of one image that hold whole pooling
// windows), into the pooled output `out`.
template <typename T>
void MaxPoolBlock(const WindowGeometry& pool, const T* conv, int64_t m0, int64_t m1, T* out) {
  const int64_t pixels = pool.in_h * pool.in_w;
  const int64_t image_in = pixels * pool.depth;
  const int64_t image_out = pool.out_h * pool.out_w * pool.depth;
  const int64_t n = m0 / pixels;
  if (m0 % pixels == 0 && m1 % pixels == 0) {
    for (int64_t i = n; i < m1 / pixels; ++i) {
      PoolRows<T, true>(pool, conv + (i - n) * image_in, 0, 0, pool.out_h, out + i * image_out);
    }
    return;
  }
  // Rows [oh0, oh1) of image n, oh0 a multiple of the stride, so the
  // windows of pooled rows [p0, p1) lie within them (ConvBlocks).
  const int64_t oh0 = (m0 % pixels) / pool.in_w;
  const int64_t oh1 = oh0 + (m1 - m0) / pool.in_w;
  const int64_t p0 = oh0 / pool.stride_h;
  const int64_t p1 = std::min(pool.out_h, (oh1 + pool.stride_h - 1) / pool.stride_h);
  PoolRows<T, true>(pool, conv, oh0, p0, p1, out + n * image_out + p0 * pool.out_w * pool.depth);
}

// out[rows, 0:kWidth] = a[rows, k] * b[k, 0:kWidth], all row-major (b's and
// out's rows ldb and ldo floats apart): tiles of rows summed in registers
// (kTile rows x kWidth columns, 24 512-bit accumulators), each over the k
// terms in order. A row's sums depend on that row alone, not on its place
// in a block.
template <int64_t kWidth>
void ProductTiles(const float* a, int64_t rows, int64_t k, const float* b, int64_t ldb, float* out,
                  int64_t ldo) {
  constexpr int kTile = kWidth == 32 ? 12 : 6;
  using Run = Eigen::Array<float, kWidth, 1>;
  using ConstRun = Eigen::Map<const Run>;
  int64_t r0 = 0;
  for (; r0 + kTile <= rows; r0 += kTile) {
    Run acc[kTile];
    for (int j = 0; j < kTile; ++j) acc[j] = Run::Zero();
    const float* p = a + r0 * k;
    for (int64_t t = 0; t < k; ++t) {
      const Run f = ConstRun(b + t * ldb);
      for (int j = 0; j < kTile; ++j) acc[j] += p[j * k + t] * f;
    }
    for (int j = 0; j < kTile; ++j) Eigen::Map<Run>(out + (r0 + j) * ldo) = acc[j];
  }
  for (; r0 < rows; ++r0) {  // the last rows, one at a time
    Run acc = Run::Zero();
    for (int64_t t = 0; t < k; ++t) acc += a[r0 * k + t] * ConstRun(b + t * ldb);
    Eigen::Map<Run>(out + r0 * ldo) = acc;
  }
}

// Whether a product with n float columns goes by register tiles
// (TiledProduct, FilterGradientTiles): n a multiple of 32.
template <typename T>
bool Tileable(int64_t n) {
  return std::is_same_v<T, float> && n > 0 && n % 32 == 0;
}

// out[rows, n] = a[rows, k] * b[k, n] (row-major, n a multiple of 32) in
// ProductTiles of 64 columns, and 32 for the rest: where Eigen's GEMM packed
// both operands on every block of a convolution and zeroed the output
// first (1.17x Eigen's GEMM on the CNN's second convolution).
void TiledProduct(const float* a, int64_t rows, int64_t k, const float* b, int64_t n, float* out) {
  int64_t c = 0;
  for (; c + 64 <= n; c += 64) ProductTiles<64>(a, rows, k, b + c, n, out + c, n);
  if (c < n) ProductTiles<32>(a, rows, k, b + c, n, out + c, n);
}

// `epilogue` (null: none) is applied to each block once its GEMM is done,
// while the block is in cache (_FusedConv2D). With `pool` (null: none), the
// pooling of the convolution's output, `out` is the pooled output, and
// each block is max-pooled right after its epilogue, so that the
// convolution's own output only ever exists one block at a time, in cache.
template <typename T>
void Conv2DForward(const WindowGeometry& g, int64_t out_depth, const T* in, const T* filter, T* out,
                   const Epilogue<T>* epilogue = nullptr, const WindowGeometry* pool = nullptr) {
  const int64_t k = g.window_h * g.window_w * g.depth;
  // A block's patches and its output both stay in cache: a layer with few
  // input channels (the first, k = 9) has more output than patches per
  // pixel, and blocks sized by the patches alone left the zeroed output to
  // be read back from memory by the GEMM. A block that is part of an image
  // has an even number of rows, so that a 2x2 pooling's windows lie in one
  // block: the fused pooling must use the very blocks of a convolution on
  // its own, since the GEMM's bits depend on a row's place in its block.
  const ConvBlocks blocks(g, (k + out_depth) * static_cast<int64_t>(sizeof(T)), 1,
                          /*row_multiple=*/2);
  const bool pool_blocks = pool != nullptr && blocks.HoldWholeWindows(*pool);
  // Else (windows across blocks) the whole output is made, then pooled.
  std::unique_ptr<T[]> unpooled;
  if (pool != nullptr && !pool_blocks) {
    unpooled = std::make_unique_for_overwrite<T[]>(g.batch * g.out_h * g.out_w * out_depth);
  }
  T* conv_out = unpooled ? unpooled.get() : out;
  const ConstMatMap<T> f(filter, k, out_depth);
  const bool direct = IsDirect(g);
  const bool tiles = Tileable<T>(out_depth);
  ParallelRange(
      blocks.count(), 2 * blocks.max_pixels() * k * out_depth, [&](int64_t b0, int64_t b1) {
        std::optional<PatchRows<T>> patches;
        if (!direct) patches.emplace(g, in, blocks.max_pixels());
        const auto block_out =
            std::make_unique_for_overwrite<T[]>(pool_blocks ? blocks.max_pixels() * out_depth : 0);
        for (int64_t b = b0; b < b1; ++b) {
          const auto [m0, m1] = blocks.Pixels(b);
          T* block = pool_blocks ? block_out.get() : conv_out + m0 * out_depth;
          if (g.depth == 1 && direct) {
            DirectConvForward<T, 1>(g, out_depth, in, filter, m0, m1, block);
          } else if (direct) {
            DirectConvForward<T, 3>(g, out_depth, in, filter, m0, m1, block);
          } else if (tiles) {
            if constexpr (std::is_same_v<T, float>) {
              TiledProduct(patches->Rows(m0, m1), m1 - m0, k, filter, out_depth, block);
            }
          } else {
            MatMap<T>(block, m1 - m0, out_depth).noalias() =
                ConstMatMap<T>(patches->Rows(m0, m1), m1 - m0, k) * f;
          }
          if (epilogue != nullptr) epilogue->ApplyToRows(block, 0, m1 - m0);
          if (pool_blocks) MaxPoolBlock(*pool, block, m0, m1, out);
        }
      });
  if (unpooled) {
    const int64_t pixels = g.out_h * g.out_w;
    ParallelRange(g.batch, pixels * out_depth, [&](int64_t n0, int64_t n1) {
      MaxPoolBlock(*pool, conv_out + n0 * pixels * out_depth, n0 * pixels, n1 * pixels, out);
    });
  }
}

template <typename T>
void Conv2DInputGradient(const WindowGeometry& g, int64_t out_depth, const T* filter, const T* dout,
                         T* din) {
  const int64_t k = g.window_h * g.window_w * g.depth;
  const ConstMatMap<T> f(filter, k, out_depth);
  // The filter transposed, [out_depth, k], for TiledProduct.
  std::vector<T> transposed(Tileable<T>(k) ? k * out_depth : 0);
  if (!transposed.empty()) MatMap<T>(transposed.data(), out_depth, k) = f.transpose();
  // patches[rows, k] = dout[m0:m1, out_depth] * filter^T.
  const auto product = [&](int64_t m0, int64_t m1, T* patches) {
    if constexpr (std::is_same_v<T, float>) {
      if (!transposed.empty()) {
        TiledProduct(dout + m0 * out_depth, m1 - m0, out_depth, transposed.data(), k, patches);
        return;
      }
    }
    MatMap<T>(patches, m1 - m0, k).noalias() =
        ConstMatMap<T>(dout + m0 * out_depth, m1 - m0, out_depth) * f.transpose();
  };
  if (IsPointwise(g)) {
    const ConvBlocks blocks(g, k * static_cast<int64_t>(sizeof(T)), 1);
    ParallelRange(blocks.count(), 2 * blocks.max_pixels() * k * out_depth,
                  [&](int64_t b0, int64_t b1) {
                    for (int64_t b = b0; b < b1; ++b) {
                      const auto [m0, m1] = blocks.Pixels(b);
                      product(m0, m1, din + m0 * k);
                    }
                  });
    return;
  }
  const int64_t din_size = g.batch * g.in_h * g.in_w * g.depth;
  ParallelForBlocks(din_size, 1, [&](int64_t b, int64_t e) { std::fill(din + b, din + e, T(0)); });
  const ConvBlocks blocks(g, k * static_cast<int64_t>(sizeof(T)), NonOverlappingRows(g));
  const int64_t cost = 2 * blocks.max_pixels() * k * out_depth;
  auto run = [&](int64_t b0, int64_t b1, auto&& block_of) {
    const auto patches = std::make_unique_for_overwrite<T[]>(blocks.max_pixels() * k);
    for (int64_t i = b0; i < b1; ++i) {
      const auto [m0, m1] = blocks.Pixels(block_of(i));
      product(m0, m1, patches.get());
      Col2ImAdd(g, patches.get(), m0, m1, din);
    }
  };
  if (!blocks.partial_images()) {
    ParallelRange(blocks.count(), cost,
                  [&](int64_t b0, int64_t b1) { run(b0, b1, [](int64_t b) { return b; }); });
    return;
  }
  // Even blocks of each image, then odd ones.
  const int64_t per_image = blocks.per_image();
  for (int64_t phase = 0; phase < 2; ++phase) {
    const int64_t in_phase = (per_image - phase + 1) / 2;  // per image
    if (in_phase == 0) continue;
    ParallelRange(g.batch * in_phase, cost, [&](int64_t b0, int64_t b1) {
      run(b0, b1,
          [&](int64_t i) { return (i / in_phase) * per_image + 2 * (i % in_phase) + phase; });
    });
  }
}

// Sums `parts` partial results of `size` elements each (part p at
// partials + p * size) into out, in part order for every element.
template <typename T>
void SumPartials(const T* partials, int64_t parts, int64_t size, T* out) {
  ParallelForBlocks(size, parts, [&](int64_t b, int64_t e) {
    Vec<T> o(out + b, e - b);
    o = ConstVec<T>(partials + b, e - b);
    for (int64_t p = 1; p < parts; ++p) o += ConstVec<T>(partials + p * size + b, e - b);
  });
}

// How many partials a reduction over `units` (blocks, rows) of work keeps,
// each of `size` elements of T.
template <typename T>
int64_t GroupCount(int64_t units, int64_t size) {
  const int64_t by_memory = kPartialBytes / std::max<int64_t>(1, size * sizeof(T));
  return std::max<int64_t>(1, std::min({units, kMaxGroups, by_memory}));
}

// sums[t, :] (+)= sum over rows r, in order, of patches[r, t] * dout[r, :]
// for a [rows, k] block of patches and kOut (32 or 64) float output
// channels (dout's and sums' rows `ld` floats apart, so that wider layers
// go kOut channels at a time): what the GEMM computes, but with tiles of
// taps whose runs of channels stay in registers over the whole block.
// Eigen's GEMM packs both operands on every call, and with a block's few
// hundred rows as its depth (the filter gradient of the CNN example's
// second convolution: 288 taps, 64 channels, 121 rows a block) the packing
// cost about as much as the multiply-adds (cnn2's filter gradient ran at
// 0.94x MatMul and 0.73x TensorFlow's oneDNN).
template <int64_t kOut>
void FilterGradientTiles(const float* patches, int64_t rows, int64_t k, const float* dout,
                         int64_t ld, bool assign, float* sums) {
  constexpr int kTile = kOut == 32 ? 12 : 6;  // 24 512-bit accumulators
  using Run = Eigen::Array<float, kOut, 1>;
  using ConstRun = Eigen::Map<const Run>;
  int64_t t0 = 0;
  for (; t0 + kTile <= k; t0 += kTile) {
    Run acc[kTile];
    for (int j = 0; j < kTile; ++j) {
      acc[j] = assign ? Run::Zero() : Run(ConstRun(sums + (t0 + j) * ld));
    }
    for (int64_t r = 0; r < rows; ++r) {
      const Run d = ConstRun(dout + r * ld);
      const float* p = patches + r * k + t0;
      for (int j = 0; j < kTile; ++j) acc[j] += p[j] * d;
    }
    for (int j = 0; j < kTile; ++j) Eigen::Map<Run>(sums + (t0 + j) * ld) = acc[j];
  }
  for (; t0 < k; ++t0) {  // the last taps, one at a time
    Run acc = assign ? Run::Zero() : Run(ConstRun(sums + t0 * ld));
    for (int64_t r = 0; r < rows; ++r) acc += patches[r * k + t0] * ConstRun(dout + r * ld);
    Eigen::Map<Run>(sums + t0 * ld) = acc;
  }
}

template <typename T>
void Conv2DFilterGradient(const WindowGeometry& g, int64_t out_depth, const T* in, const T* dout,
                          T* dfilter) {
  const int64_t k = g.window_h * g.window_w * g.depth;
  const ConvBlocks blocks(g, k * static_cast<int64_t>(sizeof(T)), 1);
  const int64_t size = k * out_depth;
  const int64_t groups = GroupCount<T>(blocks.count(), size);
  std::vector<T> partials(groups > 1 ? groups * size : 0);
  const int64_t group_cost = 2 * blocks.max_pixels() * size * blocks.count() / groups;
  const bool direct = IsDirect(g);
  ParallelRange(groups, group_cost, [&](int64_t g0, int64_t g1) {
    std::optional<PatchRows<T>> patches;
    if (!direct) patches.emplace(g, in, blocks.max_pixels());
    for (int64_t group = g0; group < g1; ++group) {
      T* sums = groups > 1 ? partials.data() + group * size : dfilter;
      MatMap<T> acc(sums, k, out_depth);
      const int64_t first = group * blocks.count() / groups;
      const int64_t last = (group + 1) * blocks.count() / groups;
      if (direct) {  // the group's pixels, in order
        const int64_t m0 = blocks.Pixels(first).first;
        const int64_t m1 = blocks.Pixels(last - 1).second;
        if (g.depth == 1) {
          DirectFilterGradient<T, 1>(g, out_depth, in, dout, m0, m1, sums);
        } else {
          DirectFilterGradient<T, 3>(g, out_depth, in, dout, m0, m1, sums);
        }
        continue;
      }
      for (int64_t b = first; b < last; ++b) {
        const auto [m0, m1] = blocks.Pixels(b);
        const T* lhs = patches->Rows(m0, m1);
        if constexpr (std::is_same_v<T, float>) {
          if (Tileable<T>(out_depth)) {
            int64_t c = 0;
            for (; c + 64 <= out_depth; c += 64) {
              FilterGradientTiles<64>(lhs, m1 - m0, k, dout + m0 * out_depth + c, out_depth,
                                      b == first, sums + c);
            }
            if (c < out_depth) {
              FilterGradientTiles<32>(lhs, m1 - m0, k, dout + m0 * out_depth + c, out_depth,
                                      b == first, sums + c);
            }
            continue;
          }
        }
        const auto product = ConstMatMap<T>(lhs, m1 - m0, k).transpose() *
                             ConstMatMap<T>(dout + m0 * out_depth, m1 - m0, out_depth);
        if (b == first) {
          acc.noalias() = product;
        } else {
          acc.noalias() += product;
        }
      }
    }
  });
  if (groups > 1) SumPartials(partials.data(), groups, size, dfilter);
}

// ------------------------------------------------------------ depthwise

// acc[c * mult + m] += x[c] * f[c * mult + m].
template <typename T>
void MultiplyAdd(const T* x, const T* f, int64_t depth, int64_t mult, T* acc) {
  if (mult == 1) {
    Vec<T>(acc, depth) += ConstVec<T>(x, depth) * ConstVec<T>(f, depth);
    return;
  }
  for (int64_t c = 0; c < depth; ++c) {
    Vec<T>(acc + c * mult, mult) += x[c] * ConstVec<T>(f + c * mult, mult);
  }
}

template <typename T>
void DepthwiseForward(const WindowGeometry& g, int64_t mult, const T* in, const T* filter, T* out) {
  const int64_t depth = g.depth;
  const int64_t out_depth = depth * mult;
  const int64_t cost = g.out_w * g.window_h * g.window_w * out_depth * 2;
  ParallelRange(g.batch * g.out_h, cost, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t n = r / g.out_h;
      const int64_t oh = r % g.out_h;
      const T* image = in + n * g.in_h * g.in_w * depth;
      for (int64_t ow = 0; ow < g.out_w; ++ow) {
        T* acc = out + (r * g.out_w + ow) * out_depth;
        std::fill_n(acc, out_depth, T(0));
        for (int64_t kh = 0; kh < g.window_h; ++kh) {
          const int64_t ih = oh * g.stride_h - g.pad_top + kh * g.dilation_h;
          if (ih < 0 || ih >= g.in_h) continue;
          for (int64_t kw = 0; kw < g.window_w; ++kw) {
            const int64_t iw = ow * g.stride_w - g.pad_left + kw * g.dilation_w;
            if (iw < 0 || iw >= g.in_w) continue;
            MultiplyAdd(image + (ih * g.in_w + iw) * depth,
                        filter + (kh * g.window_w + kw) * out_depth, depth, mult, acc);
          }
        }
      }
    }
  });
}

// The output position that tap k of a window reads input position i from,
// or -1 if none does.
int64_t OutputOfTap(int64_t i, int64_t k, int64_t pad, int64_t stride, int64_t dilation,
                    int64_t out_size) {
  const int64_t t = i + pad - k * dilation;
  if (t < 0 || t % stride != 0 || t / stride >= out_size) return -1;
  return t / stride;
}

template <typename T>
void DepthwiseInputGradient(const WindowGeometry& g, int64_t mult, const T* filter, const T* dout,
                            T* din) {
  const int64_t depth = g.depth;
  const int64_t out_depth = depth * mult;
  const int64_t cost = g.in_w * g.window_h * g.window_w * out_depth * 2;
  ParallelRange(g.batch * g.in_h, cost, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t n = r / g.in_h;
      const int64_t ih = r % g.in_h;
      for (int64_t iw = 0; iw < g.in_w; ++iw) {
        T* acc = din + (r * g.in_w + iw) * depth;
        std::fill_n(acc, depth, T(0));
        for (int64_t kh = 0; kh < g.window_h; ++kh) {
          const int64_t oh = OutputOfTap(ih, kh, g.pad_top, g.stride_h, g.dilation_h, g.out_h);
          if (oh < 0) continue;
          for (int64_t kw = 0; kw < g.window_w; ++kw) {
            const int64_t ow = OutputOfTap(iw, kw, g.pad_left, g.stride_w, g.dilation_w, g.out_w);
            if (ow < 0) continue;
            const T* d = dout + ((n * g.out_h + oh) * g.out_w + ow) * out_depth;
            const T* f = filter + (kh * g.window_w + kw) * out_depth;
            if (mult == 1) {
              Vec<T>(acc, depth) += ConstVec<T>(d, depth) * ConstVec<T>(f, depth);
            } else {
              for (int64_t c = 0; c < depth; ++c) {
                acc[c] += (ConstVec<T>(d + c * mult, mult) * ConstVec<T>(f + c * mult, mult)).sum();
              }
            }
          }
        }
      }
    }
  });
}

template <typename T>
void DepthwiseFilterGradient(const WindowGeometry& g, int64_t mult, const T* in, const T* dout,
                             T* dfilter) {
  const int64_t depth = g.depth;
  const int64_t out_depth = depth * mult;
  const int64_t size = g.window_h * g.window_w * out_depth;
  const int64_t rows = g.batch * g.out_h;
  const int64_t groups = GroupCount<T>(rows, size);
  std::vector<T> partials(groups * size);
  const int64_t group_cost = 2 * size * g.out_w * rows / groups;
  ParallelRange(groups, group_cost, [&](int64_t g0, int64_t g1) {
    for (int64_t group = g0; group < g1; ++group) {
      T* acc = partials.data() + group * size;
      std::fill_n(acc, size, T(0));
      for (int64_t r = group * rows / groups; r < (group + 1) * rows / groups; ++r) {
        const int64_t n = r / g.out_h;
        const int64_t oh = r % g.out_h;
        const T* image = in + n * g.in_h * g.in_w * depth;
        for (int64_t ow = 0; ow < g.out_w; ++ow) {
          const T* d = dout + (r * g.out_w + ow) * out_depth;
          for (int64_t kh = 0; kh < g.window_h; ++kh) {
            const int64_t ih = oh * g.stride_h - g.pad_top + kh * g.dilation_h;
            if (ih < 0 || ih >= g.in_h) continue;
            for (int64_t kw = 0; kw < g.window_w; ++kw) {
              const int64_t iw = ow * g.stride_w - g.pad_left + kw * g.dilation_w;
              if (iw < 0 || iw >= g.in_w) continue;
              // dfilter[kh, kw, c, m] += x[c] * dout[c * mult + m]
              MultiplyAdd(image + (ih * g.in_w + iw) * depth, d, depth, mult,
                          acc + (kh * g.window_w + kw) * out_depth);
            }
          }
        }
      }
    }
  });
  SumPartials(partials.data(), groups, size, dfilter);
}

// ------------------------------------------------------------ kernels

enum class Pass { kForward, kInput, kFilter };

// One pass of a convolution: the forward op (input, filter), BackpropInput
// (input_sizes, filter, out_backprop) or BackpropFilter (input,
// filter_sizes, out_backprop).
template <typename T>
Status ConvPassCompute(KernelContext& ctx, ConvKind kind, Pass pass, const WindowAttrs& attrs) {
  TensorShape input = ctx.input(0).shape();
  TensorShape filter = ctx.input(1).shape();
  if (pass == Pass::kInput) {
    CKFLOW_ASSIGN_OR_RETURN(input, ShapeFromTensor(ctx.input(0), "input_sizes"));
  } else if (pass == Pass::kFilter) {
    CKFLOW_ASSIGN_OR_RETURN(filter, ShapeFromTensor(ctx.input(1), "filter_sizes"));
  }
  CKFLOW_ASSIGN_OR_RETURN(ConvShapes s, ResolveConv(kind, input, filter, attrs));
  if (pass != Pass::kForward) {
    CKFLOW_RETURN_IF_ERROR(CheckBackpropShape(ctx.input(2), s, input, filter));
  }
  // The two tensors multiplied, and the product's shape.
  const Tensor& a = ctx.input(pass == Pass::kInput ? 1 : 0);
  const Tensor& b = ctx.input(pass == Pass::kForward ? 1 : 2);
  const TensorShape& shape = pass == Pass::kForward ? s.output
                             : pass == Pass::kInput ? input
                                                    : filter;
  CKFLOW_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, a.dtype(), shape));
  if (out->NumElements() == 0) return OkStatus();
  T* o = out->flat<T>().data();
  if (a.NumElements() == 0 || b.NumElements() == 0) {  // sums of nothing
    std::fill_n(o, out->NumElements(), T(0));
    return OkStatus();
  }
  const T* pa = a.flat<T>().data();
  const T* pb = b.flat<T>().data();
  const bool conv = kind == ConvKind::kConv2D;
  if (pass == Pass::kForward && conv) Conv2DForward(s.g, s.out_depth, pa, pb, o);
  if (pass == Pass::kForward && !conv) DepthwiseForward(s.g, s.multiplier, pa, pb, o);
  if (pass == Pass::kInput && conv) Conv2DInputGradient(s.g, s.out_depth, pa, pb, o);
  if (pass == Pass::kInput && !conv) DepthwiseInputGradient(s.g, s.multiplier, pa, pb, o);
  if (pass == Pass::kFilter && conv) Conv2DFilterGradient(s.g, s.out_depth, pa, pb, o);
  if (pass == Pass::kFilter && !conv) DepthwiseFilterGradient(s.g, s.multiplier, pa, pb, o);
  return OkStatus();
}

template <ConvKind kKind, Pass kPass>
StatusOr<Kernel> ConvKernel(const Node& node) {
  CKFLOW_ASSIGN_OR_RETURN(WindowAttrs attrs, ParseConvAttrs(node.attrs()));
  return DispatchFloat(node.output_type(0), [attrs](auto tag) -> StatusOr<Kernel> {
    using T = typename decltype(tag)::type;
    return Kernel(
        [attrs](KernelContext& ctx) { return ConvPassCompute<T>(ctx, kKind, kPass, attrs); });
  });
}

// _FusedConv2D (input, filter, bias[, scale, offset, mean, variance]): a
// Conv2D and the ops after it that the session's remapper folded in.
template <typename T>
Status FusedConv2DCompute(KernelContext& ctx, const WindowAttrs& attrs, const EpilogueSpec& spec) {
  CKFLOW_ASSIGN_OR_RETURN(ConvShapes s, ResolveConv(ConvKind::kConv2D, ctx.input(0).shape(),
                                                    ctx.input(1).shape(), attrs));
  CKFLOW_ASSIGN_OR_RETURN(Epilogue<T> epilogue, Epilogue<T>::Make(spec, ctx, s.out_depth));
  std::optional<PoolShapes> pool;
  if (spec.max_pool) {
    StatusOr<PoolShapes> resolved = ResolvePool(s.output, "input", spec.pool);
    if (!resolved.ok()) {
      return InvalidArgumentError(spec.nodes.back(), ": ", resolved.status().message());
    }
    pool = *std::move(resolved);
  }
  const TensorShape& shape = pool ? pool->output : s.output;
  CKFLOW_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, ctx.input(0).dtype(), shape));
  if (out->NumElements() == 0) return OkStatus();
  T* o = out->flat<T>().data();
  const Tensor& in = ctx.input(0);
  const Tensor& filter = ctx.input(1);
  if (in.NumElements() == 0 || filter.NumElements() == 0) {  // sums of nothing
    const int64_t size = s.output.num_elements();
    std::vector<T> unpooled(pool ? size : 0);
    T* conv = pool ? unpooled.data() : o;
    std::fill_n(conv, size, T(0));
    epilogue.ApplyToRows(conv, 0, size / s.out_depth);
    if (pool) MaxPoolBlock(pool->g, conv, 0, size / s.out_depth, o);
    return OkStatus();
  }
  Conv2DForward(s.g, s.out_depth, in.flat<T>().data(), filter.flat<T>().data(), o, &epilogue,
                pool ? &pool->g : nullptr);
  return OkStatus();
}

StatusOr<Kernel> FusedConv2DKernel(const Node& node) {
  CKFLOW_ASSIGN_OR_RETURN(WindowAttrs attrs, ParseConvAttrs(node.attrs()));
  CKFLOW_ASSIGN_OR_RETURN(EpilogueSpec spec, ParseEpilogueSpec(node.attrs(), /*convolution=*/true));
  return DispatchFloat(node.output_type(0), [attrs, spec](auto tag) -> StatusOr<Kernel> {
    using T = typename decltype(tag)::type;
    return Kernel(
        [attrs, spec](KernelContext& ctx) { return FusedConv2DCompute<T>(ctx, attrs, spec); });
  });
}

Status FusedConv2DShapeFn(InferenceContext& c) {
  CKFLOW_ASSIGN_OR_RETURN(EpilogueSpec spec, ParseEpilogueSpec(*c.attrs, /*convolution=*/true));
  const size_t want = 2 + static_cast<size_t>(spec.num_args());
  if (c.input_types.size() != want) {
    return InvalidArgumentError("expects ", want, " inputs for its fused_ops, got ",
                                c.input_types.size());
  }
  for (size_t i = 2; i < want; ++i) {
    CKFLOW_RETURN_IF_ERROR(CheckSameDtype(c, 0, "input", static_cast<int>(i), "args"));
  }
  CKFLOW_RETURN_IF_ERROR(ConvShapeFn(c, ConvKind::kConv2D));
  if (!spec.max_pool) return OkStatus();
  PartialShape& conv = c.output_shapes.back();
  CKFLOW_ASSIGN_OR_RETURN(
      conv, PoolOutputShape(conv, spec.nodes.back() + "'s input is " + conv.ToString(), spec.pool));
  return OkStatus();
}

template <ConvKind kKind>
Status RegisterConvKind(OpRegistry& r, const std::string& type) {
  CKFLOW_RETURN_IF_ERROR(
      RegisterOp(r, {.type = type,
                     .inputs = {"input", "filter"},
                     .shape_fn = [](InferenceContext& c) { return ConvShapeFn(c, kKind); },
                     .kernel_factory = ConvKernel<kKind, Pass::kForward>}));
  CKFLOW_RETURN_IF_ERROR(RegisterOp(
      r, {.type = type + "BackpropInput",
          .inputs = {"input_sizes", "filter", "out_backprop"},
          .shape_fn = [](InferenceContext& c) { return ConvBackpropShapeFn(c, kKind, true); },
          .kernel_factory = ConvKernel<kKind, Pass::kInput>}));
  return RegisterOp(
      r, {.type = type + "BackpropFilter",
          .inputs = {"input", "filter_sizes", "out_backprop"},
          .shape_fn = [](InferenceContext& c) { return ConvBackpropShapeFn(c, kKind, false); },
          .kernel_factory = ConvKernel<kKind, Pass::kFilter>});
}

}  // namespace
}  // namespace internal

Status RegisterConvOps(OpRegistry& r) {
  using internal::ConvKind;
  CKFLOW_RETURN_IF_ERROR(internal::RegisterConvKind<ConvKind::kConv2D>(r, "Conv2D"));
  CKFLOW_RETURN_IF_ERROR(internal::RegisterOp(r, {.type = "_FusedConv2D",
                                                  .inputs = {"input"},
                                                  .variadic = true,
                                                  .shape_fn = internal::FusedConv2DShapeFn,
                                                  .kernel_factory = internal::FusedConv2DKernel}));
  return internal::RegisterConvKind<ConvKind::kDepthwise>(r, "DepthwiseConv2dNative");
}

// ---------------------------------------------------------------- builders

namespace ops {
namespace {

AttrMap ConvAttrMap(const Conv2DAttrs& attrs) {
  AttrMap m;
  m.Set("strides", attrs.strides);
  m.Set("padding", attrs.padding);
  m.Set("explicit_paddings", attrs.explicit_paddings);
  m.Set("dilations", attrs.dilations);
  m.Set("data_format", attrs.data_format);
  return m;
}

}  // namespace

Output Conv2D(const Scope& scope, Input input, Input filter, const Conv2DAttrs& attrs) {
  return internal::BuildOp(scope, "Conv2D", {input, filter}, ConvAttrMap(attrs));
}
Output Conv2DBackpropInput(const Scope& scope, Input input_sizes, Input filter, Input out_backprop,
                           const Conv2DAttrs& attrs) {
  return internal::BuildOp(scope, "Conv2DBackpropInput", {input_sizes, filter, out_backprop},
                           ConvAttrMap(attrs));
}
Output Conv2DBackpropFilter(const Scope& scope, Input input, Input filter_sizes, Input out_backprop,
                            const Conv2DAttrs& attrs) {
  return internal::BuildOp(scope, "Conv2DBackpropFilter", {input, filter_sizes, out_backprop},
                           ConvAttrMap(attrs));
}

Output DepthwiseConv2dNative(const Scope& scope, Input input, Input filter,
                             const Conv2DAttrs& attrs) {
  return internal::BuildOp(scope, "DepthwiseConv2dNative", {input, filter}, ConvAttrMap(attrs));
}
Output DepthwiseConv2dNativeBackpropInput(const Scope& scope, Input input_sizes, Input filter,
                                          Input out_backprop, const Conv2DAttrs& attrs) {
  return internal::BuildOp(scope, "DepthwiseConv2dNativeBackpropInput",
                           {input_sizes, filter, out_backprop}, ConvAttrMap(attrs));
}
Output DepthwiseConv2dNativeBackpropFilter(const Scope& scope, Input input, Input filter_sizes,
                                           Input out_backprop, const Conv2DAttrs& attrs) {
  return internal::BuildOp(scope, "DepthwiseConv2dNativeBackpropFilter",
                           {input, filter_sizes, out_backprop}, ConvAttrMap(attrs));
}

}  // namespace ops
}  // namespace ckflow
