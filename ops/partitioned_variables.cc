#include "ops/partitioned_variables.h"

#include <algorithm>
#include <utility>

#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "ops/variable_ops.h"

namespace ckflow {

std::shared_ptr<PartitionedVariable> PartitionedVariable::Create(
    const Scope& scope, const std::string& name, DataType dtype, const TensorShape& shape,
    const Initializer& initializer, PartitionOptions partition, VariableOptions options) {
  if (!scope.ok()) return nullptr;
  const int axis = partition.axis;
  if (axis < 0 || axis >= shape.rank()) {
    scope.UpdateStatus(InvalidArgumentError("partitioned variable '", name, "' of shape ",
                                            shape.ToString(), " has no axis ", axis));
    return nullptr;
  }
  if (partition.num_shards < 1 || shape.dim(axis) < 1) {
    scope.UpdateStatus(InvalidArgumentError("partitioned variable '", name, "': cannot split ",
                                            shape.dim(axis), " along axis ", axis, " into ",
                                            partition.num_shards, " part(s)"));
    return nullptr;
  }
  // fixed_size_partitioner asks for at most one part per index of the axis.
  const int n = static_cast<int>(std::min<int64_t>(partition.num_shards, shape.dim(axis)));
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

std::shared_ptr<PartitionedVariable> PartitionedVariable::FromParts(
    const PartitionedVariable& like, std::string name, std::vector<std::shared_ptr<Variable>> parts,
    Output initializer) {
  if (parts.size() != like.parts_.size()) return nullptr;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i] == nullptr || parts[i]->dtype() != like.dtype_ ||
        parts[i]->shape() != like.parts_[i]->shape()) {
      return nullptr;
    }
  }
  auto whole = std::shared_ptr<PartitionedVariable>(new PartitionedVariable());
  whole->name_ = std::move(name);
  whole->dtype_ = like.dtype_;
  whole->shape_ = like.shape_;
  whole->axis_ = like.axis_;
  whole->parts_ = std::move(parts);
  whole->offsets_ = like.offsets_;
  whole->initializer_ = std::move(initializer);
  return whole;
}

Output EmbeddingLookup(const Scope& scope, const PartitionedVariable& table, Output ids) {
  if (!scope.ok()) return Output();
  if (table.axis() != 0 || table.shape().rank() < 1) {
    scope.UpdateStatus(InvalidArgumentError("EmbeddingLookup needs a table partitioned along axis ",
                                            "0; '", table.name(), "' is partitioned along axis ",
                                            table.axis()));
    return Output();
  }
  Scope s = scope.NewSubScope("embedding_lookup");
  const auto& parts = table.parts();
  auto gather = [&](size_t p, Output local) {
    return ops::ResourceGather(s, parts[p]->handle(), local, table.dtype(), parts[p]->shape());
  };
  if (parts.size() == 1) return gather(0, ids);
  const int num_parts = table.num_parts();
  const DataType id_type = ids.dtype();
  Output flat = ops::Reshape(s, ids, Tensor::FromVector<int64_t>({-1}));
  // The part of an id: how many parts after the first start at or before it.
  std::vector<Output> past;
  std::vector<int64_t> offsets;
  for (int p = 0; p < num_parts; ++p) {
    offsets.push_back(table.offset(p));
    if (p == 0) continue;
    Output start = ops::Cast(s, ops::Const<int64_t>(s, table.offset(p)), id_type);
    past.push_back(ops::Cast(s, ops::GreaterEqual(s, flat, start), DT_INT32));
  }
  Output part = past.size() == 1 ? past[0] : ops::AddN(s, past);
  Output starts = ops::Cast(s, ops::Const(s, Tensor::FromVector<int64_t>(offsets)), id_type);
  Output local = ops::Sub(s, flat, ops::Gather(s, starts, part));
  std::vector<Output> local_ids = ops::DynamicPartition(s, local, part, num_parts);
  Output count = ops::Reshape(s, ops::Shape(s, flat), Tensor::FromVector<int64_t>({}));
  Output positions = ops::Range(s, ops::Const<int32_t>(s, 0), count, ops::Const<int32_t>(s, 1));
  std::vector<Output> where = ops::DynamicPartition(s, positions, part, num_parts);
  std::vector<Output> rows;
  for (int p = 0; p < num_parts && s.ok(); ++p) rows.push_back(gather(p, local_ids[p]));
  if (!s.ok()) return Output();
  Output merged = ops::DynamicStitch(s, where, rows);
  const std::vector<int64_t>& dims = table.shape().dim_sizes();
  Output row_shape = ops::Const(
      s, Tensor::FromVector<int64_t>(std::vector<int64_t>(dims.begin() + 1, dims.end())));
  return ops::Reshape(s, merged, ops::Concat(s, {ops::Shape(s, ids, DT_INT64), row_shape}, 0));
}

}  // namespace ckflow
