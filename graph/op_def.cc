#include "graph/op_def.h"

#include <algorithm>

namespace ckflow {

void PartialShape::Assign(std::span<const int64_t> dims) {
  rank_ = static_cast<int>(dims.size());
  if (rank_ <= kInlineRank) {
    std::copy(dims.begin(), dims.end(), inline_);
  } else {
    heap_.assign(dims.begin(), dims.end());
  }
}

bool PartialShape::IsFullyDefined() const {
  if (!known_rank()) return false;
  for (int64_t d : dims()) {
    if (d < 0) return false;
  }
  return true;
}

TensorShape PartialShape::ToTensorShape() const {
  CKFLOW_CHECK(IsFullyDefined());
  return TensorShape(dims());
}

bool PartialShape::IsCompatibleWith(const TensorShape& shape) const {
  return IsCompatibleWith(PartialShape(shape));  // inline up to kInlineRank: no allocation
}

bool PartialShape::IsCompatibleWith(const PartialShape& other) const {
  if (!known_rank() || !other.known_rank()) return true;
  if (rank_ != other.rank_) return false;
  for (int i = 0; i < rank_; ++i) {
    if (dim(i) >= 0 && other.dim(i) >= 0 && dim(i) != other.dim(i)) return false;
  }
  return true;
}

StatusOr<PartialShape> PartialShape::Merge(const PartialShape& other) const {
  if (!IsCompatibleWith(other)) {
    return InvalidArgumentError("shapes ", ToString(), " and ", other.ToString(),
                                " are incompatible");
  }
  if (!known_rank()) return other;
  if (!other.known_rank()) return *this;
  std::vector<int64_t> dims = dim_sizes();
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0) dims[i] = other.dim(static_cast<int>(i));
  }
  return PartialShape(dims);
}

std::string PartialShape::ToString() const {
  if (!known_rank()) return "<unknown>";
  std::string out = "[";
  for (int i = 0; i < rank_; ++i) {
    if (i) out += ",";
    out += dim(i) < 0 ? "?" : std::to_string(dim(i));
  }
  return out + "]";
}

Status OpRegistry::Register(OpDef def) {
  if (def.type.empty()) return InvalidArgumentError("op type must not be empty");
  if (!def.shape_fn) return InvalidArgumentError("op '", def.type, "' has no shape function");
  if (defs_.count(def.type)) return AlreadyExistsError("op '", def.type, "' is already registered");
  std::string type = def.type;
  defs_.emplace(std::move(type), std::make_unique<OpDef>(std::move(def)));
  return OkStatus();
}

const OpDef* OpRegistry::Find(std::string_view type) const {
  auto it = defs_.find(type);
  return it == defs_.end() ? nullptr : it->second.get();
}

std::vector<std::string> OpRegistry::ListTypes() const {
  std::vector<std::string> types;
  for (const auto& [type, def] : defs_) types.push_back(type);
  return types;
}

StatusOr<Tensor*> KernelContext::ForwardInputOrAllocateOutput(int input, int output, DataType dtype,
                                                              const TensorShape& shape) {
  if (input < 64 && (forwardable_ >> input & 1) != 0) {
    const Tensor& in = *inputs_[input];
    if (in.dtype() == dtype && in.NumElements() == shape.num_elements() && dtype != DT_STRING &&
        dtype != DT_RESOURCE && dtype != DT_VARIANT) {
      CKFLOW_ASSIGN_OR_RETURN(outputs_[output], in.Reshaped(shape));
      return &outputs_[output];
    }
  }
  return AllocateOutput(output, dtype, shape);
}

}  // namespace ckflow
