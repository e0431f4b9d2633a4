// DatasetIterator: batches of an in-memory or indexable data set whose
// position a checkpoint saves, as a tf.data iterator's is.
//
//   // tf.data.Dataset.from_tensor_slices((xs, ys))
//   //        .shuffle(n, seed=7, reshuffle_each_iteration=True).batch(64).repeat()
//   auto it = DatasetIterator::FromTensorSlices(
//       root, "train_data", {xs, ys}, {.batch_size = 64, .shuffle = true, .seed = 7});
//   Checkpoint checkpoint(root, {{"model", model}, {"data", it}});
//   ...
//   CKFLOW_ASSIGN_OR_RETURN(std::vector<Tensor> batch, it->Next(session->resources()));
//
// The iterator is a Trackable whose one attribute is ITERATOR_STATE (key
// "<path>/.ATTRIBUTES/ITERATOR_STATE"), the name TensorFlow gives an
// iterator's saved state. The state is the whole position of the
// iterator, six int64s:
//
//   [0] kStateFormat    "ckit" and a version: anything else is not our state
//   [1] seed            of the shuffle (its bits as int64)
//   [2] epoch           0, 1, ...: the shuffle order of the epoch in use
//   [3] position        elements of that epoch already handed out
//   [4] num_elements    of the source, checked against it on restore
//   [5] shuffle         1 if the order is shuffled, 0 if it is 0..n-1
//
// The order of epoch e is ShuffledIndices(n, seed, e) (data/shuffle.h), so
// (seed, epoch, position) determine every batch to come: a restored run
// sees exactly the batches the uninterrupted run would have.
//
// Where the state lives: in a non-trainable int64[6] variable, in the
// ResourceMgr of the session (or eager context) that Next is given. Next
// reads and advances it under the variable's lock, so a save (which reads
// the variable in the session, or at the call in eager mode) holds the
// position of the batches handed out so far, whatever thread saves, and a
// restore (explicit, or deferred until the iterator is tracked) takes
// effect at the next Next with no step of the program's. Initialize it
// with the other variables (InitializeOrRestore, or initializer()).
//
// Batches do not span epochs: the last batch of an epoch has the remaining
// n % batch_size elements, or is skipped with drop_remainder, as
// tf.data's batch() after shuffle(). With num_epochs >= 0, Next returns
// OutOfRange after that many epochs (tf.data's end of sequence); -1 repeats
// forever.
//
// Thread safety: Next may be called from several threads; each batch goes
// to exactly one caller. Creation is graph building (single-threaded).

#ifndef CKFLOW_OPS_DATASET_ITERATOR_H_
#define CKFLOW_OPS_DATASET_ITERATOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "base/resource.h"
#include "base/status.h"
#include "base/tensor.h"
#include "graph/graph.h"
#include "graph/trackable.h"

namespace ckflow {

class Variable;

struct DatasetIteratorOptions {
  int64_t batch_size = 1;
  // A new order of the whole data set every epoch (tf.data's shuffle with a
  // buffer of the whole data set and reshuffle_each_iteration=True).
  bool shuffle = false;
  uint64_t seed = 0;
  bool drop_remainder = false;
  int64_t num_epochs = -1;  // -1: forever
};

class DatasetIterator : public Trackable {
 public:
  // "ckit" and format version 1: the first int64 of ITERATOR_STATE.
  static constexpr int64_t kStateFormat = 0x636b697400000001;
  static constexpr int64_t kStateSize = 6;

  // An iterator over the indices 0..num_elements-1 of an indexable source
  // (NextIndices). Its state variable is named `name` (made unique) in
  // `scope`. InvalidArgument for num_elements < 0, batch_size < 1 or
  // num_epochs < -1; errors of `scope` are returned.
  static StatusOr<std::shared_ptr<DatasetIterator>> Create(const Scope& scope,
                                                           const std::string& name,
                                                           int64_t num_elements,
                                                           DatasetIteratorOptions options);
  // An iterator over the rows of `components` (each a tensor whose first
  // dimension is the number of elements), whose Next returns batches of
  // them. InvalidArgument as Create, and for no component, a scalar
  // component, or components of different first dimensions.
  static StatusOr<std::shared_ptr<DatasetIterator>> FromTensorSlices(
      const Scope& scope, const std::string& name, std::vector<Tensor> components,
      DatasetIteratorOptions options);

  // The indices of the next batch, in the state held by `resources` (a
  // Session's resources(), an eager context's), which advances past them.
  // OutOfRange at the end of the last epoch (and at once for an empty
  // source, or one smaller than a batch with drop_remainder).
  // FailedPrecondition if the state was neither initialized nor restored;
  // DataLoss for a state that is not one (format, epoch, position), and
  // InvalidArgument for one saved over another number of elements or
  // shuffle setting, each naming the iterator and ITERATOR_STATE.
  StatusOr<std::vector<int64_t>> NextIndices(ResourceMgr& resources);
  // The next batch of each component (REQUIRES: made by FromTensorSlices;
  // else FailedPrecondition). Errors as NextIndices.
  StatusOr<std::vector<Tensor>> Next(ResourceMgr& resources);

  // The position the state in `resources` describes, without advancing it
  // (for messages and tests). Errors as NextIndices.
  struct Position {
    int64_t epoch = 0;
    int64_t position = 0;  // elements of the epoch handed out
  };
  StatusOr<Position> Tell(ResourceMgr& resources) const;

  const std::string& name() const { return name_; }
  int64_t num_elements() const { return num_elements_; }
  const DatasetIteratorOptions& options() const { return options_; }
  // The state variable (not a child in the object graph: its value is
  // this object's ITERATOR_STATE).
  const std::shared_ptr<Variable>& state() const { return state_; }

  std::vector<SaveableAttribute> Attributes() const override;
  Output initializer() const override;
  std::string TypeName() const override { return "DatasetIterator"; }

 private:
  DatasetIterator() = default;
  struct State {
    uint64_t seed = 0;
    int64_t epoch = 0;
    int64_t position = 0;
  };
  // The state held in `values` (kStateSize int64s), checked.
  StatusOr<State> Decode(const Tensor& values) const;
  // The element at `position` of epoch `epoch`'s order.
  void OrderOf(const State& state, int64_t begin, int64_t count, std::vector<int64_t>& out) const
      CKFLOW_EXCLUDES(mu_);

  std::string name_;
  int64_t num_elements_ = 0;
  DatasetIteratorOptions options_;
  std::vector<Tensor> components_;
  std::shared_ptr<Variable> state_;

  // The order of one epoch, kept while the epoch lasts (n indices).
  mutable Mutex mu_;
  mutable int64_t cached_epoch_ CKFLOW_GUARDED_BY(mu_) = -1;
  mutable uint64_t cached_seed_ CKFLOW_GUARDED_BY(mu_) = 0;
  mutable std::vector<int64_t> cached_order_ CKFLOW_GUARDED_BY(mu_);
};

}  // namespace ckflow

#endif  // CKFLOW_OPS_DATASET_ITERATOR_H_
