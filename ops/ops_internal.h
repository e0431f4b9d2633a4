// What the standard ops share: registration with arity and dtype guards,
// shape-function helpers whose messages name the inputs at fault, dtype
// dispatch, and the broadcasting plan of the elementwise kernels.
//
// Messages name inputs as "<arg> is <dtype or shape> (<tensor>)", e.g.
// "x is float32 (a:0)", "a is [2,3] (x:0)"; the graph prefixes the node
// ("add (Add): ...") at build time and the session at run time.
//
// Thread safety: pure functions and immutable values.

#ifndef CKFLOW_OPS_OPS_INTERNAL_H_
#define CKFLOW_OPS_OPS_INTERNAL_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "base/parallel.h"
#include "base/status.h"
#include "base/tensor.h"
#include "graph/graph.h"
#include "graph/op_def.h"
#include "ops/input.h"

namespace ckflow::internal {

// ------------------------------------------------------------ registration

inline constexpr DataType kFloatTypes[] = {DT_FLOAT, DT_DOUBLE};
inline constexpr DataType kNumericTypes[] = {DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64};
inline constexpr DataType kIndexTypes[] = {DT_INT32, DT_INT64};
// Everything Cast converts between.
inline constexpr DataType kCastTypes[] = {DT_FLOAT, DT_DOUBLE,   DT_INT32,  DT_INT64,  DT_INT8,
                                          DT_INT16, DT_UINT8,    DT_UINT16, DT_UINT32, DT_UINT64,
                                          DT_BOOL,  DT_BFLOAT16, DT_HALF};

struct OpSpec {
  std::string type;
  // Argument names, for the arity check and for messages.
  std::vector<std::string> inputs;
  bool variadic = false;  // one or more inputs, all named inputs[0] (AddN)
  bool stateful = false;
  ShapeFn shape_fn;
  KernelFactory kernel_factory;
};

// Registers `spec` with two guards around it: its shape function only sees
// the declared number of inputs, and its kernels only see inputs of the
// dtypes the node was built with (anything else is a bug upstream, reported
// as Internal rather than crashing in a typed access).
Status RegisterOp(OpRegistry& registry, OpSpec spec);

// Builds a node of the standard op `type` through `scope` from `inputs`
// (literals become Consts first). nullptr on error, sticky in the scope.
Node* BuildNode(const Scope& scope, std::string_view type, const std::vector<ops::Input>& inputs,
                AttrMap attrs = {});
// The same, returning output 0 (invalid on error).
inline Output BuildOp(const Scope& scope, std::string_view type,
                      const std::vector<ops::Input>& inputs, AttrMap attrs = {}) {
  return Output(BuildNode(scope, type, inputs, std::move(attrs)));
}

// --------------------------------------------------------- shape functions

// "float32, float64, int32".
std::string DataTypeList(std::span<const DataType> types);
// The name of input i ("scope/x:0").
std::string InputName(const InferenceContext& c, int i);

// InvalidArgument "dtype mismatch: x is float32 (a:0), y is int32 (b:0)".
Status CheckSameDtype(const InferenceContext& c, int i, std::string_view arg_i, int j,
                      std::string_view arg_j);
// InvalidArgument "x is bool (a:0), but must be one of float32, float64".
Status CheckDtype(const InferenceContext& c, int i, std::string_view arg,
                  std::span<const DataType> allowed);
// InvalidArgument "a is [2,3,4] (x:0), but must have rank 2" (a rank range
// reads "rank 1 to 2", an open one "rank >= 1"). Unknown ranks pass.
Status CheckRank(const InferenceContext& c, int i, std::string_view arg, int min_rank,
                 int max_rank);

// NumPy broadcasting of two partial shapes; unknown dimensions stay unknown
// unless the other side pins them. nullopt if incompatible.
std::optional<PartialShape> BroadcastPartialShapes(const PartialShape& a, const PartialShape& b);
// The same for inputs i and j, with an InvalidArgument naming both:
// "incompatible shapes for broadcasting: x is [2,3] (a:0), y is [4] (b:0)".
StatusOr<PartialShape> BroadcastInputShapes(const InferenceContext& c, int i,
                                            std::string_view arg_i, int j, std::string_view arg_j);

// The integers of input i (int32/int64, scalar or vector) if it is a Const;
// nullopt if it is not constant. InvalidArgument if it is of another rank.
StatusOr<std::optional<std::vector<int64_t>>> ConstantInts(const InferenceContext& c, int i,
                                                           std::string_view arg);
// The static shape described by a shape-vector input: its values if it is a
// Const (InvalidArgument on a negative one), else a shape of the input's
// length with unknown dimensions, else unknown.
StatusOr<PartialShape> ShapeFromShapeInput(const InferenceContext& c, int i, std::string_view arg);

// A shape function for elementwise binary ops: equal dtypes from `types`,
// NumPy broadcasting (or merged equal shapes if !broadcasts); the output is
// bool if `bool_output`, else the inputs' dtype.
ShapeFn BinaryShapeFn(std::string x, std::string y, std::vector<DataType> types, bool bool_output,
                      bool broadcasts);
// Elementwise unary ops: output = input's dtype (from `types`) and shape.
ShapeFn UnaryShapeFn(std::string x, std::vector<DataType> types);

// ------------------------------------------------------------ run time

// The integers of an int32/int64 scalar or vector tensor.
StatusOr<std::vector<int64_t>> IntsFromTensor(const Tensor& t, std::string_view arg);
// A shape from an int32/int64 vector tensor; InvalidArgument on a negative
// dimension or an element count that overflows.
StatusOr<TensorShape> ShapeFromTensor(const Tensor& t, std::string_view arg);
// axis in [-rank, rank) → [0, rank); InvalidArgument naming `what` otherwise.
StatusOr<int> NormalizeAxis(int64_t axis, int rank, std::string_view what);
// NumPy broadcasting; InvalidArgument "incompatible shapes for broadcasting:
// x is [2,3], y is [4]".
StatusOr<TensorShape> BroadcastTensorShapes(const TensorShape& x, std::string_view x_arg,
                                            const TensorShape& y, std::string_view y_arg);

// "[1,2]": the multi-index of flat position i in `shape`, as TensorFlow
// names a bad index.
std::string IndexString(const TensorShape& shape, int64_t i);
// The elements of an int32/int64 tensor of any rank, as int64.
std::vector<int64_t> FlatIndices(const Tensor& t);
// The indices as int64, or InvalidArgument naming the first one outside
// [0, bound): "indices[1,2] = 12 is not in [0, 10)". Every index is checked
// before a kernel writes anything, so a bad one leaves variables untouched
// and fails the same way on every thread count.
StatusOr<std::vector<int64_t>> CheckedIndices(const Tensor& indices, std::string_view arg,
                                              int64_t bound);

// Below this much work (elements x cycles per element) a loop runs inline,
// without building a std::function or asking the scheduler: for tiny ops
// that is most of their cost.
inline constexpr int64_t kInlineWork = 40000;

inline bool RunsInline(int64_t n, int64_t cost_per_element) {
  return n < kInlineWork / std::max<int64_t>(cost_per_element, 1);
}

// ParallelFor (base/parallel.h), inline for small loops.
template <typename Fn>
void ParallelRange(int64_t n, int64_t cost_per_element, Fn&& fn) {
  if (n <= 0) return;
  if (RunsInline(n, cost_per_element)) return fn(int64_t{0}, n);
  ParallelFor(n, cost_per_element, fn);
}

// Elements per block of ParallelForBlocks: 64 bytes of doubles or more, so
// that every block but the last starts and ends on a vector boundary.
inline constexpr int64_t kElementBlock = 16;
void ParallelForBlocksImpl(int64_t n, int64_t cost_per_element,
                           const std::function<void(int64_t, int64_t)>& fn);
// ParallelRange over [0, n) whose ranges start and end on multiples of
// kElementBlock (except the end n). Vectorized Eigen loops then take the
// same packet/scalar path for every element however the work is split, so
// the results are bit-identical for every thread count.
template <typename Fn>
void ParallelForBlocks(int64_t n, int64_t cost_per_element, Fn&& fn) {
  if (n <= 0) return;
  if (RunsInline(n, cost_per_element)) return fn(int64_t{0}, n);
  ParallelForBlocksImpl(n, cost_per_element, fn);
}

// How a broadcasting elementwise op walks its inputs. The output, with its
// size-1 dimensions dropped and neighbouring dimensions merged where each
// input is broadcast in both or in neither, is a sequence of rows of inner()
// elements; input k's part of row r starts at RowOffsets(r)[k] and advances
// by 1 per element, or by 0 if inner_broadcast(k) (one value repeated).
class BroadcastPlan {
 public:
  // REQUIRES: `out` is the broadcast of the input shapes.
  BroadcastPlan(std::span<const TensorShape* const> inputs, const TensorShape& out);

  int64_t rows() const { return rows_; }
  int64_t inner() const { return inner_; }
  bool inner_broadcast(int k) const { return inner_broadcast_[k]; }
  // Fills offsets[k] for each input k.
  void RowOffsets(int64_t row, std::span<int64_t> offsets) const;

 private:
  int num_inputs_;
  int64_t rows_ = 1;
  int64_t inner_ = 1;
  std::vector<bool> inner_broadcast_;
  std::vector<int64_t> outer_sizes_;    // outermost first
  std::vector<int64_t> outer_strides_;  // [group * num_inputs_ + k]
};

// ---------------------------------------------------------------- dispatch

template <typename T>
struct TypeTag {
  using type = T;
};

// Calls fn(TypeTag<T>{}) for the C++ type of `dtype`; returns fn's result,
// or an InvalidArgument (converted to fn's return type) for other dtypes.
template <typename Fn>
auto DispatchFloat(DataType dtype, Fn&& fn) -> decltype(fn(TypeTag<float>{})) {
  switch (dtype) {
    case DT_FLOAT:
      return fn(TypeTag<float>{});
    case DT_DOUBLE:
      return fn(TypeTag<double>{});
    default:
      return InvalidArgumentError("unsupported dtype ", DataTypeName(dtype));
  }
}

template <typename Fn>
auto DispatchIndex(DataType dtype, Fn&& fn) -> decltype(fn(TypeTag<int32_t>{})) {
  switch (dtype) {
    case DT_INT32:
      return fn(TypeTag<int32_t>{});
    case DT_INT64:
      return fn(TypeTag<int64_t>{});
    default:
      return InvalidArgumentError("unsupported dtype ", DataTypeName(dtype));
  }
}

// DispatchIndex's types, then DispatchFloat's.
template <typename Fn>
auto DispatchNumeric(DataType dtype, Fn&& fn) -> decltype(fn(TypeTag<float>{})) {
  if (dtype == DT_INT32 || dtype == DT_INT64) return DispatchIndex(dtype, fn);
  return DispatchFloat(dtype, fn);
}

// Every type of kCastTypes.
template <typename Fn>
auto DispatchCastable(DataType dtype, Fn&& fn) -> decltype(fn(TypeTag<float>{})) {
  switch (dtype) {
    case DT_FLOAT:
      return fn(TypeTag<float>{});
    case DT_DOUBLE:
      return fn(TypeTag<double>{});
    case DT_INT32:
      return fn(TypeTag<int32_t>{});
    case DT_INT64:
      return fn(TypeTag<int64_t>{});
    case DT_INT8:
      return fn(TypeTag<int8_t>{});
    case DT_INT16:
      return fn(TypeTag<int16_t>{});
    case DT_UINT8:
      return fn(TypeTag<uint8_t>{});
    case DT_UINT16:
      return fn(TypeTag<uint16_t>{});
    case DT_UINT32:
      return fn(TypeTag<uint32_t>{});
    case DT_UINT64:
      return fn(TypeTag<uint64_t>{});
    case DT_BOOL:
      return fn(TypeTag<bool>{});
    case DT_BFLOAT16:
      return fn(TypeTag<bfloat16>{});
    case DT_HALF:
      return fn(TypeTag<float16>{});
    default:
      return InvalidArgumentError("unsupported dtype ", DataTypeName(dtype));
  }
}

// A scalar tensor of `dtype` (one of kCastTypes) holding `value`, converted
// as Cast converts; complex64 and complex128 hold (value, 0).
StatusOr<Tensor> ScalarOfType(DataType dtype, double value);

// "[4,-1]": integers as a list, for messages about shapes as given.
std::string DimsString(const std::vector<int64_t>& dims);

// Sets every element of `out` to the scalar `value` (same dtype; any
// fixed-size type or string).
Status FillWith(Tensor& out, const Tensor& value);

// Reductions shared by the reduction ops, BiasAddGrad and SumToShapeOf.
enum class Reduction { kSum, kMean, kMax, kMin, kProd };
// Reduces `in` (float, double, int32 or int64) over the dimensions with
// reduce[d] set; `out` must hold the kept dimensions' element count, in
// order. An empty reduction gives the identity (Mean of nothing is NaN for
// floats, 0 for integers).
Status ReduceTensor(Reduction reduction, const Tensor& in, const std::vector<bool>& reduce,
                    Tensor& out);

// Add's kernel (x + y, broadcasting) for ops that share it (BiasAdd);
// x_arg and y_arg name the inputs in messages and must be string literals.
StatusOr<Kernel> AddKernel(DataType dtype, std::string_view x_arg, std::string_view y_arg);

}  // namespace ckflow::internal

#endif  // CKFLOW_OPS_OPS_INTERNAL_H_
