#include "ops/ops_internal.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <utility>

#include "base/parallel.h"
#include "ops/standard_ops.h"

namespace ckflow::internal {

// ------------------------------------------------------------ registration

namespace {

std::string ArgList(const std::vector<std::string>& args) {
  std::string out;
  for (size_t i = 0; i < args.size(); ++i) out += (i ? ", " : "") + args[i];
  return out;
}

}  // namespace

Status RegisterOp(OpRegistry& registry, OpSpec spec) {
  ShapeFn shape_fn = [inputs = spec.inputs, variadic = spec.variadic,
                      inner = std::move(spec.shape_fn)](InferenceContext& c) -> Status {
    size_t n = c.input_types.size();
    if (variadic ? n == 0 : n != inputs.size()) {
      std::string want =
          variadic ? "at least 1 input"
                   : std::to_string(inputs.size()) + (inputs.size() == 1 ? " input" : " inputs");
      return InvalidArgumentError("expects ", want, " (", ArgList(inputs), "), got ", n);
    }
    return inner(c);
  };
  // The kernel runs as the op wrote it: the input count was checked above
  // when the node was built, and the executor and the eager context hand a
  // kernel exactly its node's inputs, each a feed the session checked or an
  // output checked against its declaration. A wrapper re-checking them ran
  // on every node of every step (for a save of 20,000 variables, 40,000
  // nodes and a visit to every producer).
  return registry.Register(OpDef{.type = std::move(spec.type),
                                 .stateful = spec.stateful,
                                 .shape_fn = std::move(shape_fn),
                                 .kernel_factory = std::move(spec.kernel_factory)});
}

Node* BuildNode(const Scope& scope, std::string_view type, const std::vector<ops::Input>& inputs,
                AttrMap attrs) {
  if (!scope.ok()) return nullptr;
  std::vector<Output> outputs;
  outputs.reserve(inputs.size());
  for (const ops::Input& in : inputs) outputs.push_back(in.ToOutput(scope));
  return scope.AddNode(StandardOp(type), std::move(outputs), std::move(attrs));
}

// --------------------------------------------------------- shape functions

std::string DataTypeList(std::span<const DataType> types) {
  std::string out;
  for (size_t i = 0; i < types.size(); ++i) {
    if (i) out += ", ";
    out += DataTypeName(types[i]);
  }
  return out;
}

std::string InputName(const InferenceContext& c, int i) {
  if (i < static_cast<int>(c.input_names.size())) return c.input_names[i];
  return "input " + std::to_string(i);
}

Status CheckSameDtype(const InferenceContext& c, int i, std::string_view arg_i, int j,
                      std::string_view arg_j) {
  if (c.input_types[i] == c.input_types[j]) return OkStatus();
  return InvalidArgumentError("dtype mismatch: ", arg_i, " is ", DataTypeName(c.input_types[i]),
                              " (", InputName(c, i), "), ", arg_j, " is ",
                              DataTypeName(c.input_types[j]), " (", InputName(c, j), ")");
}

Status CheckDtype(const InferenceContext& c, int i, std::string_view arg,
                  std::span<const DataType> allowed) {
  if (std::find(allowed.begin(), allowed.end(), c.input_types[i]) != allowed.end()) {
    return OkStatus();
  }
  return InvalidArgumentError(arg, " is ", DataTypeName(c.input_types[i]), " (", InputName(c, i),
                              "), but must be ", allowed.size() == 1 ? "" : "one of ",
                              DataTypeList(allowed));
}

Status CheckRank(const InferenceContext& c, int i, std::string_view arg, int min_rank,
                 int max_rank) {
  const PartialShape& s = c.input_shapes[i];
  if (!s.known_rank() || (s.rank() >= min_rank && s.rank() <= max_rank)) return OkStatus();
  std::string want = min_rank == max_rank ? "rank " + std::to_string(min_rank)
                     : max_rank == std::numeric_limits<int>::max()
                         ? "rank >= " + std::to_string(min_rank)
                         : "rank " + std::to_string(min_rank) + " to " + std::to_string(max_rank);
  return InvalidArgumentError(arg, " is ", s.ToString(), " (", InputName(c, i), "), but must have ",
                              want);
}

std::optional<PartialShape> BroadcastPartialShapes(const PartialShape& a, const PartialShape& b) {
  if (!a.known_rank() || !b.known_rank()) return PartialShape::Unknown();
  int rank = std::max(a.rank(), b.rank());
  std::vector<int64_t> dims(rank);
  for (int d = 0; d < rank; ++d) {
    int ia = d - (rank - a.rank());
    int ib = d - (rank - b.rank());
    int64_t da = ia >= 0 ? a.dim(ia) : 1;
    int64_t db = ib >= 0 ? b.dim(ib) : 1;
    if (da == 1) {
      dims[d] = db;
    } else if (db == 1) {
      dims[d] = da;
    } else if (da < 0) {
      dims[d] = db;  // ? against n > 1: the ? must be 1 or n; either way n
    } else if (db < 0 || da == db) {
      dims[d] = da;
    } else {
      return std::nullopt;
    }
  }
  return PartialShape(std::move(dims));
}

StatusOr<PartialShape> BroadcastInputShapes(const InferenceContext& c, int i,
                                            std::string_view arg_i, int j, std::string_view arg_j) {
  std::optional<PartialShape> s = BroadcastPartialShapes(c.input_shapes[i], c.input_shapes[j]);
  if (s) return *s;
  return InvalidArgumentError("incompatible shapes for broadcasting: ", arg_i, " is ",
                              c.input_shapes[i].ToString(), " (", InputName(c, i), "), ", arg_j,
                              " is ", c.input_shapes[j].ToString(), " (", InputName(c, j), ")");
}

StatusOr<std::optional<std::vector<int64_t>>> ConstantInts(const InferenceContext& c, int i,
                                                           std::string_view arg) {
  const Tensor* t = i < static_cast<int>(c.input_constants.size()) ? c.input_constants[i] : nullptr;
  if (t == nullptr) return std::optional<std::vector<int64_t>>();
  StatusOr<std::vector<int64_t>> ints = IntsFromTensor(*t, arg);
  if (!ints.ok()) return ints.status().WithContext(InputName(c, i));
  return std::optional<std::vector<int64_t>>(*std::move(ints));
}

StatusOr<PartialShape> ShapeFromShapeInput(const InferenceContext& c, int i, std::string_view arg) {
  CKFLOW_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> dims, ConstantInts(c, i, arg));
  if (dims) {
    for (size_t d = 0; d < dims->size(); ++d) {
      if ((*dims)[d] < 0) {
        return InvalidArgumentError(arg, " (", InputName(c, i), ") has negative dimension ",
                                    (*dims)[d], " at index ", d);
      }
    }
    return PartialShape(*std::move(dims));
  }
  if (i < static_cast<int>(c.input_shape_values.size()) && c.input_shape_values[i]) {
    return *c.input_shape_values[i];
  }
  const PartialShape& s = c.input_shapes[i];
  if (s.rank() == 1 && s.dim(0) >= 0) {
    return PartialShape(std::vector<int64_t>(s.dim(0), -1));
  }
  return PartialShape::Unknown();
}

ShapeFn BinaryShapeFn(std::string x, std::string y, std::vector<DataType> types, bool bool_output,
                      bool broadcasts) {
  return [x = std::move(x), y = std::move(y), types = std::move(types), bool_output,
          broadcasts](InferenceContext& c) -> Status {
    CKFLOW_RETURN_IF_ERROR(CheckSameDtype(c, 0, x, 1, y));
    CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 0, x, types));
    PartialShape shape;
    if (broadcasts) {
      CKFLOW_ASSIGN_OR_RETURN(shape, BroadcastInputShapes(c, 0, x, 1, y));
    } else if (c.input_shapes[0].IsCompatibleWith(c.input_shapes[1])) {
      CKFLOW_ASSIGN_OR_RETURN(shape, c.input_shapes[0].Merge(c.input_shapes[1]));
    } else {
      return InvalidArgumentError("shapes must be equal: ", x, " is ", c.input_shapes[0].ToString(),
                                  " (", InputName(c, 0), "), ", y, " is ",
                                  c.input_shapes[1].ToString(), " (", InputName(c, 1), ")");
    }
    c.AddOutput(bool_output ? DT_BOOL : c.input_types[0], std::move(shape));
    return OkStatus();
  };
}

ShapeFn UnaryShapeFn(std::string x, std::vector<DataType> types) {
  return [x = std::move(x), types = std::move(types)](InferenceContext& c) -> Status {
    CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 0, x, types));
    c.AddOutput(c.input_types[0], c.input_shapes[0]);
    return OkStatus();
  };
}

// ------------------------------------------------------------ run time

StatusOr<std::vector<int64_t>> IntsFromTensor(const Tensor& t, std::string_view arg) {
  if (t.shape().rank() > 1) {
    return InvalidArgumentError(arg, " must be a scalar or vector, got shape ",
                                t.shape().ToString());
  }
  std::vector<int64_t> out;
  out.reserve(t.NumElements());
  if (t.dtype() == DT_INT32) {
    for (int32_t v : t.flat<int32_t>()) out.push_back(v);
  } else if (t.dtype() == DT_INT64) {
    for (int64_t v : t.flat<int64_t>()) out.push_back(v);
  } else {
    return InvalidArgumentError(arg, " must be int32 or int64, got ", DataTypeName(t.dtype()));
  }
  return out;
}

StatusOr<TensorShape> ShapeFromTensor(const Tensor& t, std::string_view arg) {
  if (t.shape().rank() != 1) {
    return InvalidArgumentError(arg, " must be a vector, got shape ", t.shape().ToString());
  }
  CKFLOW_ASSIGN_OR_RETURN(std::vector<int64_t> dims, IntsFromTensor(t, arg));
  StatusOr<TensorShape> shape = TensorShape::Make(dims);
  if (!shape.ok()) return shape.status().WithContext(arg);
  return shape;
}

StatusOr<int> NormalizeAxis(int64_t axis, int rank, std::string_view what) {
  if (axis < -rank || axis >= rank) {
    return InvalidArgumentError(what, " ", axis, " is out of range for rank ", rank,
                                " (must be in [", -rank, ", ", rank, "))");
  }
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

std::string IndexString(const TensorShape& shape, int64_t i) {
  std::vector<int64_t> index(shape.rank());
  for (int d = shape.rank() - 1; d >= 0; --d) {
    index[d] = i % shape.dim(d);
    i /= shape.dim(d);
  }
  return DimsString(index);
}

std::vector<int64_t> FlatIndices(const Tensor& t) {
  std::vector<int64_t> out(t.NumElements());
  if (t.dtype() == DT_INT32) {
    std::span<const int32_t> v = t.flat<int32_t>();
    std::copy(v.begin(), v.end(), out.begin());
  } else {
    std::span<const int64_t> v = t.flat<int64_t>();
    std::copy(v.begin(), v.end(), out.begin());
  }
  return out;
}

StatusOr<std::vector<int64_t>> CheckedIndices(const Tensor& indices, std::string_view arg,
                                              int64_t bound) {
  std::vector<int64_t> flat = FlatIndices(indices);
  for (size_t i = 0; i < flat.size(); ++i) {
    if (flat[i] < 0 || flat[i] >= bound) {
      return InvalidArgumentError(arg, IndexString(indices.shape(), static_cast<int64_t>(i)), " = ",
                                  flat[i], " is not in [0, ", bound, ")");
    }
  }
  return flat;
}

StatusOr<TensorShape> BroadcastTensorShapes(const TensorShape& x, std::string_view x_arg,
                                            const TensorShape& y, std::string_view y_arg) {
  if (x == y) return x;
  std::optional<PartialShape> s = BroadcastPartialShapes(x, y);
  if (!s) {
    return InvalidArgumentError("incompatible shapes for broadcasting: ", x_arg, " is ",
                                x.ToString(), ", ", y_arg, " is ", y.ToString());
  }
  return s->ToTensorShape();
}

void ParallelForBlocksImpl(int64_t n, int64_t cost_per_element,
                           const std::function<void(int64_t, int64_t)>& fn) {
  int64_t blocks = (n + kElementBlock - 1) / kElementBlock;
  ParallelFor(blocks, cost_per_element * kElementBlock,
              [&](int64_t b, int64_t e) { fn(b * kElementBlock, std::min(n, e * kElementBlock)); });
}

BroadcastPlan::BroadcastPlan(std::span<const TensorShape* const> inputs, const TensorShape& out)
    : num_inputs_(static_cast<int>(inputs.size())), inner_broadcast_(inputs.size(), false) {
  const int rank = out.rank();
  struct Group {
    int64_t size;
    std::vector<bool> broadcast;
    std::vector<int64_t> strides;
  };
  std::vector<Group> groups;
  // Row-major strides of each input, aligned to the output's dimensions.
  std::vector<std::vector<int64_t>> strides(num_inputs_, std::vector<int64_t>(rank, 0));
  std::vector<std::vector<int64_t>> dims(num_inputs_, std::vector<int64_t>(rank, 1));
  for (int k = 0; k < num_inputs_; ++k) {
    const TensorShape& s = *inputs[k];
    int64_t stride = 1;
    for (int d = rank - 1; d >= 0; --d) {
      int sd = d - (rank - s.rank());
      dims[k][d] = sd >= 0 ? s.dim(sd) : 1;
      strides[k][d] = stride;
      stride *= dims[k][d];
    }
  }
  for (int d = 0; d < rank; ++d) {
    if (out.dim(d) == 1) continue;
    std::vector<bool> broadcast(num_inputs_);
    for (int k = 0; k < num_inputs_; ++k) broadcast[k] = dims[k][d] == 1;
    if (groups.empty() || groups.back().broadcast != broadcast) {
      groups.push_back({1, broadcast, std::vector<int64_t>(num_inputs_, 0)});
    }
    Group& g = groups.back();
    g.size *= out.dim(d);
    // Merged dimensions are contiguous in every non-broadcast input, so the
    // group steps by its innermost dimension's stride.
    for (int k = 0; k < num_inputs_; ++k) g.strides[k] = broadcast[k] ? 0 : strides[k][d];
  }
  if (groups.empty()) return;  // a single element
  inner_ = groups.back().size;
  inner_broadcast_ = groups.back().broadcast;
  groups.pop_back();
  for (const Group& g : groups) {
    rows_ *= g.size;
    outer_sizes_.push_back(g.size);
    outer_strides_.insert(outer_strides_.end(), g.strides.begin(), g.strides.end());
  }
}

void BroadcastPlan::RowOffsets(int64_t row, std::span<int64_t> offsets) const {
  std::fill(offsets.begin(), offsets.end(), 0);
  for (int g = static_cast<int>(outer_sizes_.size()) - 1; g >= 0; --g) {
    int64_t index = row % outer_sizes_[g];
    row /= outer_sizes_[g];
    for (int k = 0; k < num_inputs_; ++k) offsets[k] += index * outer_strides_[g * num_inputs_ + k];
  }
}

}  // namespace ckflow::internal
