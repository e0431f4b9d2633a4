#include "ops/partitioned_variables.h"

#include <utility>

namespace ckflow {

std::shared_ptr<PartitionedVariable> PartitionedVariable::Create(
    const Scope& scope, const std::string& name, DataType dtype, const TensorShape& shape,
    const Initializer& initializer, PartitionOptions partition, VariableOptions options) {
  if (!scope.ok()) return nullptr;
  const int axis = partition.axis;
  const int n = partition.num_shards;
  if (axis < 0 || axis >= shape.rank()) {
    scope.UpdateStatus(InvalidArgumentError("partitioned variable '", name, "' of shape ",
                                            shape.ToString(), " has no axis ", axis));
    return nullptr;
  }
  if (n < 1 || n > shape.dim(axis)) {
    scope.UpdateStatus(InvalidArgumentError("partitioned variable '", name, "': cannot split ",
                                            shape.dim(axis), " along axis ", axis, " into ", n,
                                            " part(s)"));
    return nullptr;
  }
  Scope outer = scope.NewSubScope(name);
  auto variable = std::shared_ptr<PartitionedVariable>(new PartitionedVariable());
  variable->name_ = outer.name_prefix();
  variable->dtype_ = dtype;
  variable->shape_ = shape;
  variable->axis_ = axis;
  int64_t offset = 0;
  for (int i = 0; i < n; ++i) {
    std::vector<int64_t> dims = shape.dim_sizes();
    dims[axis] = shape.dim(axis) / n + (i < shape.dim(axis) % n ? 1 : 0);
    std::vector<int64_t> offsets(shape.rank(), 0);
    offsets[axis] = offset;
    VariableOptions part_options = options;
    part_options.save_slice_info =
        SaveSliceInfo{variable->name_, shape.dim_sizes(), std::move(offsets), dims};
    std::shared_ptr<Variable> part =
        Variable::Create(outer, "part_" + std::to_string(i), dtype, TensorShape(dims), initializer,
                         std::move(part_options));
    if (part == nullptr) return nullptr;
    variable->parts_.push_back(std::move(part));
    variable->offsets_.push_back(offset);
    offset += dims[axis];
  }
  // Eager parts were assigned as they were created and have no initializer
  // (as an eager Variable): nothing to group.
  if (!scope.eager()) {
    variable->initializer_ =
        VariablesInitializer(outer.WithOpName("Initializer"), variable->parts_);
  }
  if (!scope.ok()) return nullptr;
  return variable;
}

std::vector<SaveableAttribute> PartitionedVariable::Attributes() const {
  std::vector<SaveableAttribute> attributes;
  attributes.reserve(parts_.size());
  for (const auto& part : parts_) {
    std::vector<SaveableAttribute> one = part->Attributes();
    attributes.push_back(std::move(one.at(0)));
  }
  return attributes;
}

std::string PartitionedVariable::TypeName() const {
  return "PartitionedVariable " + std::string(DataTypeName(dtype_)) + shape_.ToString() + " in " +
         std::to_string(parts_.size()) + " parts";
}

}  // namespace ckflow
