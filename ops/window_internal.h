// What the windowed op families (conv_ops.cc, pooling_ops.cc) share: their
// attributes (strides, padding, dilations, ksize), TensorFlow's output-size
// and padding rules, and the geometry of one op on one input. Internal to
// ops/.
//
// TensorFlow's rules, per spatial dimension, for an input of `in` elements,
// a window of `k` taps `d` apart (so it spans (k - 1) * d + 1 elements) and
// a stride `s`:
//   VALID     out = ceil((in - span + 1) / s), no padding; a span larger than
//             the input is an error.
//   SAME      out = ceil(in / s); the padding needed to reach that,
//             max(0, (out - 1) * s + span - in), is split with the smaller
//             half before (pad_before = total / 2) and the rest after.
//   EXPLICIT  out = (in + before + after - span) / s + 1, from the
//             explicit_paddings attribute.
// Messages name the attribute and its value ("strides is [1,0,1,1], but
// ..."); the graph prefixes the node at build time, the session at run time.
//
// Thread safety: pure functions and values.

#ifndef CKFLOW_OPS_WINDOW_INTERNAL_H_
#define CKFLOW_OPS_WINDOW_INTERNAL_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"
#include "base/tensor.h"
#include "graph/op_def.h"

namespace ckflow::internal {

enum class Padding { kSame, kValid, kExplicit };

// The attributes of a 2-D windowed op on NHWC tensors.
struct WindowAttrs {
  int64_t stride_h = 1, stride_w = 1;
  int64_t dilation_h = 1, dilation_w = 1;
  Padding padding = Padding::kValid;
  // EXPLICIT only: explicit_paddings[2:6].
  int64_t pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  // Pooling only: ksize[1:3]. A convolution's window is its filter's.
  int64_t window_h = 1, window_w = 1;
};

// A convolution's attributes: strides, padding (SAME, VALID or EXPLICIT),
// explicit_paddings, dilations (default 1) and data_format (NHWC only).
// InvalidArgument naming the attribute and its value.
StatusOr<WindowAttrs> ParseConvAttrs(const AttrMap& attrs);
// A pooling op's: ksize, strides, padding (SAME or VALID) and data_format.
StatusOr<WindowAttrs> ParsePoolAttrs(const AttrMap& attrs);

// Output size and padding along one spatial dimension.
struct WindowedDim {
  int64_t out = 0;
  int64_t pad_before = 0;
};
// TensorFlow's rules above. `what` names the dimension in messages ("rows",
// "columns"). InvalidArgument if the window spans more than a VALID (or
// explicitly padded) input.
StatusOr<WindowedDim> ComputeWindowedDim(int64_t in, int64_t window, int64_t dilation,
                                         int64_t stride, Padding padding, int64_t pad_before,
                                         int64_t pad_after, std::string_view what);

// One windowed op on one NHWC input: input [batch, in_h, in_w, depth]
// seen through a window_h x window_w window, giving [batch, out_h, out_w,
// ...]. Tap (kh, kw) of output (oh, ow) reads input row
// oh * stride_h - pad_top + kh * dilation_h (and the same for columns);
// rows and columns outside the input read zeros (convolution) or nothing
// (pooling).
struct WindowGeometry {
  int64_t batch = 0, in_h = 0, in_w = 0, depth = 0;
  int64_t window_h = 1, window_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t out_h = 0, out_w = 0;
  int64_t pad_top = 0, pad_left = 0;
};
// REQUIRES: input has rank 4.
StatusOr<WindowGeometry> ComputeGeometry(const TensorShape& input, int64_t window_h,
                                         int64_t window_w, const WindowAttrs& attrs);

// The output shape [batch, out_h, out_w, out_depth] of a windowed op on a
// partially known NHWC input (unknown dimensions give unknown ones); an
// unknown window size (-1) gives unknown spatial dimensions. The same
// errors as ComputeWindowedDim for the dimensions that are known.
StatusOr<PartialShape> WindowedOutputShape(const PartialShape& input, int64_t window_h,
                                           int64_t window_w, int64_t out_depth,
                                           const WindowAttrs& attrs);

// "[1,2,2,1]".
std::string IntList(const std::vector<int64_t>& values);

// "<arg> is <shape> (<name>)", or without the parenthesis for an empty name.
std::string DescribeShape(std::string_view arg, const PartialShape& shape, std::string_view name);

// The shape a sizes input of a windowed op describes (input_sizes,
// filter_sizes, orig_input_shape: an int32/int64 vector of 4): its values
// if it is a Const, else [?,?,?,?].
StatusOr<PartialShape> ShapeOfSizesInput(const InferenceContext& c, int i, std::string_view arg);

}  // namespace ckflow::internal

#endif  // CKFLOW_OPS_WINDOW_INTERNAL_H_
