// PartitionedVariable: one logical variable kept as several variables, its
// parts, split along one axis (TensorFlow 1's get_variable(...,
// partitioner=fixed_size_partitioner(n, axis)) and PartitionedVariable).
//
//   auto emb = PartitionedVariable::Create(scope, "emb", DT_FLOAT, {1000, 64},
//                                          GlorotUniform(), {.num_shards = 4});
//   // emb->parts()[i] is the Variable "emb/part_<i>", rows offset(i) onward
//
// Checkpoints save the parts as TensorFlow does: under the one key of the
// whole variable ("emb" for a NameBasedSaver, the object's path for a
// Checkpoint), each part a slice of it (SaveSliceInfo), so the checkpoint
// restores into any other partitioning of the variable, or into a plain
// variable of the full shape, and a plain variable's checkpoint restores
// into the parts.
//
// Parts as fixed_size_partitioner makes them: n parts along `axis`, the
// first (size % n) one longer. As in TensorFlow, the initializer builds
// each part's value at the part's shape.
//
// EmbeddingLookup spans the parts of a table partitioned along axis 0 as
// TensorFlow 2's tf.nn.embedding_lookup does ("div": id i lives in the part
// whose rows cover i, at row i - offset), so a table restored into another
// number of parts looks up the same rows. The gradient reaches each part as
// its own rows (IndexedSlices), so an optimizer updates only those.
//
// Thread safety: as Variable (graph building is single-threaded).

#ifndef CKFLOW_OPS_PARTITIONED_VARIABLES_H_
#define CKFLOW_OPS_PARTITIONED_VARIABLES_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/trackable.h"
#include "ops/variables.h"

namespace ckflow {

struct PartitionOptions {
  int num_shards = 1;  // fixed_size_partitioner's num_shards
  int axis = 0;
};

class PartitionedVariable : public Trackable {
 public:
  // The parts of a `dtype` variable of `shape` named `name` in `scope` (made
  // unique as a variable's name is), each a Variable "<name>/part_<i>" with
  // `options` and its SaveSliceInfo; more shards than the axis has indices
  // make one part per index, as fixed_size_partitioner does. Null, with the
  // error sticky in the scope (InvalidArgument naming the variable), if
  // `shape` has no `axis`, num_shards is below 1, the axis is empty, or a
  // part fails to build.
  static std::shared_ptr<PartitionedVariable> Create(const Scope& scope, const std::string& name,
                                                     DataType dtype, const TensorShape& shape,
                                                     const Initializer& initializer,
                                                     PartitionOptions partition,
                                                     VariableOptions options = {});

  // The whole variable's name, the key it is saved under by name.
  const std::string& name() const { return name_; }
  DataType dtype() const { return dtype_; }
  const TensorShape& shape() const { return shape_; }  // the whole variable's
  int axis() const { return axis_; }
  int num_parts() const { return static_cast<int>(parts_.size()); }
  const std::vector<std::shared_ptr<Variable>>& parts() const { return parts_; }
  // Where part i starts along axis().
  int64_t offset(int i) const { return offsets_[i]; }

  // Runs every part's initializer; invalid in an eager scope (the parts were
  // assigned on creation).
  Output initializer() const override { return initializer_; }
  // One VARIABLE_VALUE per part, each with its slice of the whole.
  std::vector<SaveableAttribute> Attributes() const override;
  std::string TypeName() const override;

  // The whole made of `parts` (each with the SaveSliceInfo of its place in
  // it, as `like`'s parts), whose initializer is `initializer`: how an
  // optimizer presents the slots of a partitioned variable to a checkpoint.
  // Null if the parts do not match `like`'s in number, dtype or shape.
  static std::shared_ptr<PartitionedVariable> FromParts(
      const PartitionedVariable& like, std::string name,
      std::vector<std::shared_ptr<Variable>> parts, Output initializer);

 private:
  PartitionedVariable() = default;

  std::string name_;
  DataType dtype_ = DT_INVALID;
  TensorShape shape_;
  int axis_ = 0;
  std::vector<std::shared_ptr<Variable>> parts_;
  std::vector<int64_t> offsets_;
  Output initializer_;
};

// The rows of `table` (partitioned along axis 0) at `ids` (int32/int64, any
// shape): ids' shape + the rows' shape, as ResourceGather on the whole
// would give. DynamicPartition sends each id to its part, one
// ResourceGather per part reads the rows, DynamicStitch puts them back in
// order: the ops TensorFlow's embedding_lookup builds. An id outside the
// table fails the run with InvalidArgument naming the part it would fall in
// (the last part for too large an id, the first for a negative one).
// InvalidArgument (sticky) if the table is partitioned along another axis.
Output EmbeddingLookup(const Scope& scope, const PartitionedVariable& table, Output ids);

}  // namespace ckflow

#endif  // CKFLOW_OPS_PARTITIONED_VARIABLES_H_
