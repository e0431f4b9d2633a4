#include "ops/dataset_iterator.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <utility>

#include "data/shuffle.h"
#include "ops/array_ops.h"
#include "ops/variable_resource_internal.h"
#include "ops/variables.h"

namespace ckflow {

namespace {

Status CheckOptions(const std::string& name, int64_t num_elements,
                    const DatasetIteratorOptions& options) {
  if (num_elements < 0) {
    return InvalidArgumentError("iterator '", name, "': num_elements is ", num_elements);
  }
  if (options.batch_size < 1) {
    return InvalidArgumentError("iterator '", name, "': batch_size is ", options.batch_size,
                                ", must be at least 1");
  }
  if (options.num_epochs < -1) {
    return InvalidArgumentError("iterator '", name, "': num_epochs is ", options.num_epochs,
                                ", must be -1 (forever) or more");
  }
  return OkStatus();
}

std::string Hex(int64_t v) {
  char text[19];
  std::snprintf(text, sizeof(text), "0x%016llx", static_cast<unsigned long long>(v));
  return text;
}

// The state variable's value in `resources`, created (uninitialized) if a
// session has not run its handle yet, as the handle op would create it.
StatusOr<std::shared_ptr<internal::VariableResource>> StateIn(ResourceMgr& resources,
                                                              const Variable& state) {
  return internal::LookupOrCreateVariable(resources, state.name(), DT_INT64, state.shape());
}

// Rows `indices` of `source` (first dimension: elements), stacked.
Tensor GatherRows(const Tensor& source, const std::vector<int64_t>& indices) {
  std::vector<int64_t> dims = source.shape().dim_sizes();
  const int64_t rows = dims[0];
  dims[0] = static_cast<int64_t>(indices.size());
  Tensor out(source.dtype(), TensorShape(dims));
  const int64_t row_elements = rows == 0 ? 0 : source.NumElements() / rows;
  if (source.dtype() == DT_STRING) {
    std::span<const std::string> in = source.flat<std::string>();
    std::span<std::string> to = out.flat<std::string>();
    for (size_t i = 0; i < indices.size(); ++i) {
      std::copy_n(in.begin() + indices[i] * row_elements, row_elements,
                  to.begin() + static_cast<int64_t>(i) * row_elements);
    }
    return out;
  }
  const size_t row_bytes = static_cast<size_t>(row_elements) * DataTypeSize(source.dtype());
  const char* in = static_cast<const char*>(source.raw_data());
  char* to = static_cast<char*>(out.raw_data());
  for (size_t i = 0; i < indices.size(); ++i) {
    std::memcpy(to + i * row_bytes, in + static_cast<size_t>(indices[i]) * row_bytes, row_bytes);
  }
  return out;
}

}  // namespace

StatusOr<std::shared_ptr<DatasetIterator>> DatasetIterator::Create(const Scope& scope,
                                                                   const std::string& name,
                                                                   int64_t num_elements,
                                                                   DatasetIteratorOptions options) {
  CKFLOW_RETURN_IF_ERROR(scope.status());
  CKFLOW_RETURN_IF_ERROR(CheckOptions(name, num_elements, options));
  std::shared_ptr<DatasetIterator> it(new DatasetIterator());
  it->name_ = name;
  it->num_elements_ = num_elements;
  it->options_ = options;
  const std::vector<int64_t> initial = {kStateFormat,
                                        static_cast<int64_t>(options.seed),
                                        /*epoch=*/0,
                                        /*position=*/0,
                                        num_elements,
                                        options.shuffle ? 1 : 0};
  it->state_ = Variable::Create(scope, name, ops::Const<int64_t>(scope, initial, {kStateSize}),
                                {.trainable = false});
  if (it->state_ == nullptr) return scope.status();
  return it;
}

StatusOr<std::shared_ptr<DatasetIterator>> DatasetIterator::FromTensorSlices(
    const Scope& scope, const std::string& name, std::vector<Tensor> components,
    DatasetIteratorOptions options) {
  if (components.empty()) {
    return InvalidArgumentError("iterator '", name, "': no components to slice");
  }
  for (size_t i = 0; i < components.size(); ++i) {
    const Tensor& c = components[i];
    if (!c.IsValid() || c.shape().rank() == 0 ||
        (c.dtype() != DT_STRING && DataTypeSize(c.dtype()) == 0)) {
      return InvalidArgumentError("iterator '", name, "': component ", i, " is ",
                                  DataTypeName(c.dtype()), c.shape().ToString(),
                                  "; slices need a tensor of rank 1 or more of a fixed-size "
                                  "dtype or strings");
    }
    if (c.shape().dim(0) != components[0].shape().dim(0)) {
      return InvalidArgumentError("iterator '", name, "': component ", i, " has ", c.shape().dim(0),
                                  " elements but component 0 has ", components[0].shape().dim(0));
    }
  }
  CKFLOW_ASSIGN_OR_RETURN(std::shared_ptr<DatasetIterator> it,
                          Create(scope, name, components[0].shape().dim(0), options));
  it->components_ = std::move(components);
  return it;
}

StatusOr<DatasetIterator::State> DatasetIterator::Decode(const Tensor& values) const {
  auto problem = [&](auto&&... what) {
    return internal::StrCat("iterator '", name_, "': ITERATOR_STATE (variable '", state_->name(),
                            "') ", what...);
  };
  if (values.dtype() != DT_INT64 || values.NumElements() != kStateSize) {
    return DataLossError(problem("is ", DataTypeName(values.dtype()), values.shape().ToString(),
                                 ", not int64[", kStateSize, "]"));
  }
  std::span<const int64_t> v = values.flat<int64_t>();
  if (v[0] != kStateFormat) {
    return DataLossError(problem("is not a ckflow iterator state: it starts with ", Hex(v[0]),
                                 " where format ", Hex(kStateFormat), " is expected"));
  }
  State s{.seed = static_cast<uint64_t>(v[1]), .epoch = v[2], .position = v[3]};
  if (v[4] != num_elements_) {
    return InvalidArgumentError(
        problem("was saved over ", v[4], " elements; this iterator's source has ", num_elements_));
  }
  if (v[5] != (options_.shuffle ? 1 : 0)) {
    return InvalidArgumentError(problem("was saved by an iterator with shuffle ",
                                        v[5] != 0 ? "on" : "off", "; this one has it ",
                                        options_.shuffle ? "on" : "off"));
  }
  if (s.epoch < 0 || s.position < 0 || s.position > num_elements_) {
    return DataLossError(problem("holds epoch ", s.epoch, " position ", s.position,
                                 ", outside an epoch of ", num_elements_, " elements"));
  }
  return s;
}

void DatasetIterator::OrderOf(const State& state, int64_t begin, int64_t count,
                              std::vector<int64_t>& out) const {
  out.resize(static_cast<size_t>(count));
  if (!options_.shuffle) {
    std::iota(out.begin(), out.end(), begin);
    return;
  }
  MutexLock lock(&mu_);
  if (cached_epoch_ != state.epoch || cached_seed_ != state.seed) {
    cached_order_ = ShuffledIndices(num_elements_, state.seed, state.epoch);
    cached_epoch_ = state.epoch;
    cached_seed_ = state.seed;
  }
  std::copy_n(cached_order_.begin() + begin, count, out.begin());
}

StatusOr<std::vector<int64_t>> DatasetIterator::NextIndices(ResourceMgr& resources) {
  CKFLOW_ASSIGN_OR_RETURN(std::shared_ptr<internal::VariableResource> variable,
                          StateIn(resources, *state_));
  MutexLock lock(&variable->mu());
  CKFLOW_ASSIGN_OR_RETURN(const Tensor* value, variable->PeekLocked());
  CKFLOW_ASSIGN_OR_RETURN(State s, Decode(*value));
  const int64_t n = num_elements_;
  const int64_t batch = options_.batch_size;
  // An epoch with nothing left to hand out is over. (Normalized here, not
  // when its last batch went out: a state saved then still says which
  // epoch ended, so num_epochs is checked against the right one.)
  if (s.position == n || (options_.drop_remainder && n - s.position < batch)) {
    ++s.epoch;
    s.position = 0;
  }
  if (n == 0 || (options_.drop_remainder && n < batch)) {
    return OutOfRangeError("iterator '", name_, "': end of sequence: ", n,
                           " elements make no batch of ", batch);
  }
  if (options_.num_epochs >= 0 && s.epoch >= options_.num_epochs) {
    return OutOfRangeError("iterator '", name_, "': end of sequence after ", options_.num_epochs,
                           " epochs");
  }
  const int64_t count = std::min(batch, n - s.position);
  std::vector<int64_t> indices;
  OrderOf(s, s.position, count, indices);
  s.position += count;

  CKFLOW_ASSIGN_OR_RETURN(Tensor * out, variable->PrepareToOverwriteLocked(value->shape()));
  std::span<int64_t> v = out->flat<int64_t>();
  v[0] = kStateFormat;
  v[1] = static_cast<int64_t>(s.seed);
  v[2] = s.epoch;
  v[3] = s.position;
  v[4] = n;
  v[5] = options_.shuffle ? 1 : 0;
  variable->set_initialized_locked(true);
  return indices;
}

StatusOr<std::vector<Tensor>> DatasetIterator::Next(ResourceMgr& resources) {
  if (components_.empty()) {
    return FailedPreconditionError("iterator '", name_,
                                   "' has no tensors to slice (made by Create): use NextIndices");
  }
  CKFLOW_ASSIGN_OR_RETURN(std::vector<int64_t> indices, NextIndices(resources));
  std::vector<Tensor> batch;
  batch.reserve(components_.size());
  for (const Tensor& c : components_) batch.push_back(GatherRows(c, indices));
  return batch;
}

StatusOr<DatasetIterator::Position> DatasetIterator::Tell(ResourceMgr& resources) const {
  CKFLOW_ASSIGN_OR_RETURN(std::shared_ptr<internal::VariableResource> variable,
                          StateIn(resources, *state_));
  MutexLock lock(&variable->mu());
  CKFLOW_ASSIGN_OR_RETURN(const Tensor* value, variable->PeekLocked());
  CKFLOW_ASSIGN_OR_RETURN(State s, Decode(*value));
  return Position{.epoch = s.epoch, .position = s.position};
}

std::vector<SaveableAttribute> DatasetIterator::Attributes() const {
  std::vector<SaveableAttribute> attributes = state_->Attributes();
  attributes[0].name = "ITERATOR_STATE";
  return attributes;
}

Output DatasetIterator::initializer() const { return state_->initializer(); }

}  // namespace ckflow
