#include "ops/window_internal.h"

#include <string>
#include <vector>

#include "ops/ops_internal.h"

namespace ckflow::internal {
namespace {

// Appended piece by piece: GCC 12 warns (-Wrestrict, wrongly) about the
// inlined copies of "\"" + std::string(s) + "\"".
std::string Quoted(std::string_view s) {
  std::string quoted;
  quoted.reserve(s.size() + 2);
  quoted.append(1, '"').append(s).append(1, '"');
  return quoted;
}

// A 4-element list attribute (strides, ksize, dilations) for NHWC:
// positive, and 1 on the batch and depth dimensions. `fallback` is used when
// the attribute is absent (nullptr: the attribute is required).
StatusOr<std::vector<int64_t>> NhwcList(const AttrMap& attrs, std::string_view name,
                                        const std::vector<int64_t>* fallback,
                                        std::string_view batch_depth_rule) {
  const std::vector<int64_t>* list = attrs.GetIf<std::vector<int64_t>>(name);
  if (list == nullptr) {
    if (attrs.Has(name)) return InvalidArgumentError(name, " must be a list of ints");
    if (fallback == nullptr) return InvalidArgumentError("missing attribute '", name, "'");
    list = fallback;
  }
  if (list->size() != 4) {
    return InvalidArgumentError(name, " is ", IntList(*list), ", but must have 4 values (NHWC)");
  }
  for (int64_t v : *list) {
    if (v <= 0) return InvalidArgumentError(name, " is ", IntList(*list), ", but must be positive");
  }
  if ((*list)[0] != 1 || (*list)[3] != 1) {
    return InvalidArgumentError(name, " is ", IntList(*list), ", but ", batch_depth_rule);
  }
  return *list;
}

Status CheckDataFormat(const AttrMap& attrs) {
  const std::string format = attrs.GetOr<std::string>("data_format", "NHWC");
  if (format != "NHWC") {
    return InvalidArgumentError("data_format is ", Quoted(format), ", but only NHWC is supported");
  }
  return OkStatus();
}

StatusOr<Padding> ParsePadding(const AttrMap& attrs, bool allow_explicit) {
  CKFLOW_ASSIGN_OR_RETURN(std::string padding, attrs.Get<std::string>("padding"));
  if (padding == "SAME") return Padding::kSame;
  if (padding == "VALID") return Padding::kValid;
  if (padding == "EXPLICIT" && allow_explicit) return Padding::kExplicit;
  return InvalidArgumentError("padding is ", Quoted(padding), ", but must be ",
                              allow_explicit ? "SAME, VALID or EXPLICIT" : "SAME or VALID");
}

constexpr char kStridesRule[] = "strides on the batch and depth dimensions must be 1";

}  // namespace

std::string IntList(const std::vector<int64_t>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ",";
    out += std::to_string(values[i]);
  }
  return out + "]";
}

std::string DescribeShape(std::string_view arg, const PartialShape& shape, std::string_view name) {
  std::string out = std::string(arg) + " is " + shape.ToString();
  return name.empty() ? out : out + " (" + std::string(name) + ")";
}

StatusOr<PartialShape> ShapeOfSizesInput(const InferenceContext& c, int i, std::string_view arg) {
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, i, arg, kIndexTypes));
  CKFLOW_RETURN_IF_ERROR(CheckRank(c, i, arg, 1, 1));
  CKFLOW_ASSIGN_OR_RETURN(PartialShape shape, ShapeFromShapeInput(c, i, arg));
  if (!shape.known_rank()) return PartialShape({-1, -1, -1, -1});
  if (shape.rank() != 4) {
    return InvalidArgumentError(DescribeShape(arg, shape, InputName(c, i)),
                                ", but must describe a shape of rank 4");
  }
  return shape;
}

StatusOr<WindowAttrs> ParseConvAttrs(const AttrMap& attrs) {
  WindowAttrs w;
  CKFLOW_ASSIGN_OR_RETURN(std::vector<int64_t> strides,
                          NhwcList(attrs, "strides", nullptr, kStridesRule));
  const std::vector<int64_t> ones = {1, 1, 1, 1};
  CKFLOW_ASSIGN_OR_RETURN(
      std::vector<int64_t> dilations,
      NhwcList(attrs, "dilations", &ones, "dilations on the batch and depth dimensions must be 1"));
  CKFLOW_ASSIGN_OR_RETURN(w.padding, ParsePadding(attrs, /*allow_explicit=*/true));
  CKFLOW_RETURN_IF_ERROR(CheckDataFormat(attrs));
  const std::vector<int64_t> pads = attrs.GetOr<std::vector<int64_t>>("explicit_paddings", {});
  if (w.padding == Padding::kExplicit) {
    if (pads.size() != 8) {
      return InvalidArgumentError("explicit_paddings is ", IntList(pads), " (", pads.size(),
                                  " values), but must have 8 (before and after each NHWC "
                                  "dimension) with padding EXPLICIT");
    }
    for (int64_t p : pads) {
      if (p < 0) {
        return InvalidArgumentError("explicit_paddings is ", IntList(pads),
                                    ", but must not be negative");
      }
    }
    if (pads[0] != 0 || pads[1] != 0 || pads[6] != 0 || pads[7] != 0) {
      return InvalidArgumentError("explicit_paddings is ", IntList(pads),
                                  ", but padding the batch and depth dimensions is not supported");
    }
    w.pad_top = pads[2];
    w.pad_bottom = pads[3];
    w.pad_left = pads[4];
    w.pad_right = pads[5];
  } else if (!pads.empty()) {
    return InvalidArgumentError("explicit_paddings is ", IntList(pads),
                                ", but must be empty unless padding is EXPLICIT");
  }
  w.stride_h = strides[1];
  w.stride_w = strides[2];
  w.dilation_h = dilations[1];
  w.dilation_w = dilations[2];
  return w;
}

StatusOr<WindowAttrs> ParsePoolAttrs(const AttrMap& attrs) {
  WindowAttrs w;
  CKFLOW_ASSIGN_OR_RETURN(
      std::vector<int64_t> ksize,
      NhwcList(attrs, "ksize", nullptr,
               "pooling over the batch and depth dimensions is not supported (must be 1)"));
  CKFLOW_ASSIGN_OR_RETURN(std::vector<int64_t> strides,
                          NhwcList(attrs, "strides", nullptr, kStridesRule));
  CKFLOW_ASSIGN_OR_RETURN(w.padding, ParsePadding(attrs, /*allow_explicit=*/false));
  CKFLOW_RETURN_IF_ERROR(CheckDataFormat(attrs));
  w.window_h = ksize[1];
  w.window_w = ksize[2];
  w.stride_h = strides[1];
  w.stride_w = strides[2];
  return w;
}

StatusOr<WindowedDim> ComputeWindowedDim(int64_t in, int64_t window, int64_t dilation,
                                         int64_t stride, Padding padding, int64_t pad_before,
                                         int64_t pad_after, std::string_view what) {
  int64_t span = 0;
  if (__builtin_mul_overflow(window - 1, dilation, &span) || span == INT64_MAX) {
    return InvalidArgumentError("the window's ", window, " ", what, " with dilation ", dilation,
                                " span more elements than an int64 counts");
  }
  span += 1;
  WindowedDim d;
  auto too_large = [&](int64_t padded) {
    const std::string taps = dilation > 1 ? " (" + std::to_string(window) + " taps dilated by " +
                                                std::to_string(dilation) + ")"
                                          : "";
    return InvalidArgumentError(
        "the window spans ", span, " ", what, taps, ", more than the input's ", padded,
        padding == Padding::kValid ? " with padding VALID" : " with explicit padding");
  };
  switch (padding) {
    case Padding::kValid:
      if (span > in) return too_large(in);
      d.out = (in - span) / stride + 1;
      return d;
    case Padding::kSame: {
      d.out = in == 0 ? 0 : (in - 1) / stride + 1;
      // (out - 1) * stride <= in - 1, so neither term overflows.
      const int64_t covered = d.out == 0 ? 0 : (d.out - 1) * stride;
      const int64_t needed = std::max<int64_t>(0, span - (in - covered));
      d.pad_before = needed / 2;
      return d;
    }
    case Padding::kExplicit: {
      int64_t padded = 0;
      if (__builtin_add_overflow(in, pad_before, &padded) ||
          __builtin_add_overflow(padded, pad_after, &padded)) {
        return InvalidArgumentError("the padded input's ", what, " overflow an int64: ", in, " + ",
                                    pad_before, " + ", pad_after);
      }
      if (span > padded) return too_large(padded);
      d.out = (padded - span) / stride + 1;
      d.pad_before = pad_before;
      return d;
    }
  }
  return d;
}

StatusOr<WindowGeometry> ComputeGeometry(const TensorShape& input, int64_t window_h,
                                         int64_t window_w, const WindowAttrs& attrs) {
  WindowGeometry g;
  g.batch = input.dim(0);
  g.in_h = input.dim(1);
  g.in_w = input.dim(2);
  g.depth = input.dim(3);
  g.window_h = window_h;
  g.window_w = window_w;
  g.stride_h = attrs.stride_h;
  g.stride_w = attrs.stride_w;
  g.dilation_h = attrs.dilation_h;
  g.dilation_w = attrs.dilation_w;
  CKFLOW_ASSIGN_OR_RETURN(
      WindowedDim rows, ComputeWindowedDim(g.in_h, window_h, g.dilation_h, g.stride_h,
                                           attrs.padding, attrs.pad_top, attrs.pad_bottom, "rows"));
  CKFLOW_ASSIGN_OR_RETURN(
      WindowedDim cols,
      ComputeWindowedDim(g.in_w, window_w, g.dilation_w, g.stride_w, attrs.padding, attrs.pad_left,
                         attrs.pad_right, "columns"));
  g.out_h = rows.out;
  g.out_w = cols.out;
  g.pad_top = rows.pad_before;
  g.pad_left = cols.pad_before;
  return g;
}

StatusOr<PartialShape> WindowedOutputShape(const PartialShape& input, int64_t window_h,
                                           int64_t window_w, int64_t out_depth,
                                           const WindowAttrs& attrs) {
  if (!input.known_rank()) return PartialShape({-1, -1, -1, out_depth});
  auto dim = [&](int i, int64_t window, int64_t dilation, int64_t stride, int64_t before,
                 int64_t after, std::string_view what) -> StatusOr<int64_t> {
    if (input.dim(i) < 0 || window < 0) return -1;
    CKFLOW_ASSIGN_OR_RETURN(
        WindowedDim d, ComputeWindowedDim(input.dim(i), window, dilation, stride, attrs.padding,
                                          before, after, what));
    return d.out;
  };
  CKFLOW_ASSIGN_OR_RETURN(int64_t out_h, dim(1, window_h, attrs.dilation_h, attrs.stride_h,
                                             attrs.pad_top, attrs.pad_bottom, "rows"));
  CKFLOW_ASSIGN_OR_RETURN(int64_t out_w, dim(2, window_w, attrs.dilation_w, attrs.stride_w,
                                             attrs.pad_left, attrs.pad_right, "columns"));
  return PartialShape({input.dim(0), out_h, out_w, out_depth});
}

}  // namespace ckflow::internal
