// Comparisons (bool results) and Select; split from math_ops.cc so the two
// build in parallel.

#include <array>
#include <optional>
#include <string>

#include "ops/cwise_internal.h"
#include "ops/math_ops.h"
#include "ops/standard_ops.h"

namespace ckflow {
namespace internal {
namespace {

// Comparisons.
struct CompareTraits : CwiseTraits {
  static constexpr bool kIntegers = true, kBoolOutput = true;
};
struct EqualFn : CompareTraits {
  template <typename A, typename B>
  static auto Eval(const A& a, const B& b) {
    return a == b;
  }
};
struct NotEqualFn : CompareTraits {
  template <typename A, typename B>
  static auto Eval(const A& a, const B& b) {
    return a != b;
  }
};
struct LessFn : CompareTraits {
  template <typename A, typename B>
  static auto Eval(const A& a, const B& b) {
    return a < b;
  }
};
struct LessEqualFn : CompareTraits {
  template <typename A, typename B>
  static auto Eval(const A& a, const B& b) {
    return a <= b;
  }
};
struct GreaterFn : CompareTraits {
  template <typename A, typename B>
  static auto Eval(const A& a, const B& b) {
    return a > b;
  }
};
struct GreaterEqualFn : CompareTraits {
  template <typename A, typename B>
  static auto Eval(const A& a, const B& b) {
    return a >= b;
  }
};

// ------------------------------------------------------------------ Select

constexpr DataType kBoolType[] = {DT_BOOL};
constexpr DataType kSelectTypes[] = {DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64, DT_BOOL};

Status SelectShapeFn(InferenceContext& c) {
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 0, "condition", kBoolType));
  CKFLOW_RETURN_IF_ERROR(CheckSameDtype(c, 1, "t", 2, "e"));
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 1, "t", kSelectTypes));
  CKFLOW_ASSIGN_OR_RETURN(PartialShape te, BroadcastInputShapes(c, 1, "t", 2, "e"));
  std::optional<PartialShape> shape = BroadcastPartialShapes(c.input_shapes[0], te);
  if (!shape) {
    return InvalidArgumentError("incompatible shapes for broadcasting: condition is ",
                                c.input_shapes[0].ToString(), " (", InputName(c, 0),
                                "), t and e are ", te.ToString());
  }
  c.AddOutput(c.input_types[1], *shape);
  return OkStatus();
}

// out[i] = cond[i] ? t[i] : e[i] over one row, each input advancing by 1
// or, broadcast, by 0 (kC, kT, kE) so the compiler knows which. A mask on
// the bits rather than a branch: the condition of a dropout mask is random,
// and a branch on it was mispredicted every other element. The condition
// is read as bytes: any byte but 0 is true, whatever a restored or fed
// tensor holds.
template <typename Bits, bool kC, bool kT, bool kE>
void SelectRow(const unsigned char* c, const Bits* t, const Bits* e, int64_t n, Bits* out) {
  for (int64_t i = 0; i < n; ++i) {
    const Bits take = -static_cast<Bits>(c[kC ? i : 0] != 0);
    out[i] = (t[kT ? i : 0] & take) | (e[kE ? i : 0] & ~take);
  }
}

template <typename Bits>
using SelectRowFn = void (*)(const unsigned char*, const Bits*, const Bits*, int64_t, Bits*);

template <typename Bits>
SelectRowFn<Bits> SelectRowFor(bool c, bool t, bool e) {
  static constexpr SelectRowFn<Bits> kRows[] = {
      SelectRow<Bits, false, false, false>, SelectRow<Bits, false, false, true>,
      SelectRow<Bits, false, true, false>,  SelectRow<Bits, false, true, true>,
      SelectRow<Bits, true, false, false>,  SelectRow<Bits, true, false, true>,
      SelectRow<Bits, true, true, false>,   SelectRow<Bits, true, true, true>};
  return kRows[(c ? 4 : 0) + (t ? 2 : 0) + (e ? 1 : 0)];
}

// Select moves element bits, so one instantiation per element size serves
// every dtype.
template <typename Bits>
Status SelectCompute(KernelContext& ctx) {
  const Tensor& cond = ctx.input(0);
  const Tensor& t = ctx.input(1);
  const Tensor& e = ctx.input(2);
  CKFLOW_ASSIGN_OR_RETURN(TensorShape te, BroadcastTensorShapes(t.shape(), "t", e.shape(), "e"));
  CKFLOW_ASSIGN_OR_RETURN(TensorShape shape,
                          BroadcastTensorShapes(cond.shape(), "condition", te, "t and e"));
  CKFLOW_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, t.dtype(), shape));
  if (out->NumElements() == 0) return OkStatus();
  const auto* cp = static_cast<const unsigned char*>(cond.raw_data());
  const Bits* tp = static_cast<const Bits*>(t.raw_data());
  const Bits* ep = static_cast<const Bits*>(e.raw_data());
  Bits* op = static_cast<Bits*>(out->raw_data());
  const TensorShape* shapes[] = {&cond.shape(), &t.shape(), &e.shape()};
  BroadcastPlan plan(shapes, shape);
  const int64_t inner = plan.inner();
  const SelectRowFn<Bits> select_row = SelectRowFor<Bits>(
      !plan.inner_broadcast(0), !plan.inner_broadcast(1), !plan.inner_broadcast(2));
  ParallelRange(plan.rows(), inner, [&](int64_t b, int64_t end) {
    std::array<int64_t, 3> off;
    for (int64_t row = b; row < end; ++row) {
      plan.RowOffsets(row, off);
      select_row(cp + off[0], tp + off[1], ep + off[2], inner, op + row * inner);
    }
  });
  return OkStatus();
}

StatusOr<Kernel> SelectKernel(const Node& node) {
  switch (DataTypeSize(node.output_type(0))) {
    case 1:
      return Kernel(SelectCompute<uint8_t>);
    case 4:
      return Kernel(SelectCompute<uint32_t>);
    case 8:
      return Kernel(SelectCompute<uint64_t>);
    default:
      return InvalidArgumentError("unsupported dtype ", DataTypeName(node.output_type(0)));
  }
}

}  // namespace
}  // namespace internal

Status RegisterComparisonOps(OpRegistry& r) {
  using namespace internal;  // NOLINT: the Fn structs above
  CKFLOW_RETURN_IF_ERROR(RegisterBinary<EqualFn>(r, "Equal"));
  CKFLOW_RETURN_IF_ERROR(RegisterBinary<NotEqualFn>(r, "NotEqual"));
  CKFLOW_RETURN_IF_ERROR(RegisterBinary<LessFn>(r, "Less"));
  CKFLOW_RETURN_IF_ERROR(RegisterBinary<LessEqualFn>(r, "LessEqual"));
  CKFLOW_RETURN_IF_ERROR(RegisterBinary<GreaterFn>(r, "Greater"));
  CKFLOW_RETURN_IF_ERROR(RegisterBinary<GreaterEqualFn>(r, "GreaterEqual"));
  CKFLOW_RETURN_IF_ERROR(RegisterOp(r, {.type = "SelectV2",
                                        .inputs = {"condition", "t", "e"},
                                        .shape_fn = SelectShapeFn,
                                        .kernel_factory = SelectKernel}));
  return OkStatus();
}

namespace ops {

#define CKFLOW_COMPARISON_BUILDER(Name)               \
  Output Name(const Scope& scope, Input x, Input y) { \
    return internal::BuildOp(scope, #Name, {x, y});   \
  }
CKFLOW_COMPARISON_BUILDER(Equal)
CKFLOW_COMPARISON_BUILDER(NotEqual)
CKFLOW_COMPARISON_BUILDER(Less)
CKFLOW_COMPARISON_BUILDER(LessEqual)
CKFLOW_COMPARISON_BUILDER(Greater)
CKFLOW_COMPARISON_BUILDER(GreaterEqual)
#undef CKFLOW_COMPARISON_BUILDER

Output Select(const Scope& scope, Input condition, Input t, Input e) {
  return internal::BuildOp(scope, "SelectV2", {condition, t, e});
}

}  // namespace ops
}  // namespace ckflow
