#include "ops/checkpoint_ops.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <optional>

#include "base/mutex.h"
#include "bundle/bundle_format.h"
#include "bundle/bundle_reader.h"
#include "bundle/bundle_writer.h"
#include "bundle/merge.h"
#include "bundle/tensor_slice.h"
#include "ops/checkpoint_ops_internal.h"
#include "ops/standard_ops.h"
#include "ops/variable_resource_internal.h"

namespace ckflow {
namespace {

// Every disk effect of these kernels goes through the run's file layer.
FileSystem* FileSystemOf(const KernelContext& ctx) {
  return ctx.file_system() ? ctx.file_system() : FileSystem::Default();
}

// ------------------------------------------------------------ reader

// The reader a restore kernel reads `prefix` through: the run's
// (RunOptions::bundle_reader) if it is of `prefix`, whose index the restore
// parsed once for all its ops, else one opened for this run into *opened,
// as TensorFlow's kernels open theirs.
StatusOr<const BundleReader*> ReaderFor(const KernelContext& ctx, const std::string& prefix,
                                        std::unique_ptr<BundleReader>* opened) {
  const BundleReader* given = ctx.bundle_reader();
  if (given != nullptr && given->prefix() == prefix) return given;
  CKFLOW_ASSIGN_OR_RETURN(*opened, BundleReader::Open(prefix, {.fs = FileSystemOf(ctx)}));
  return opened->get();
}

// ------------------------------------------------------------ argument checks

StatusOr<std::string> ScalarString(const Tensor& t, std::string_view what) {
  if (t.dtype() != DT_STRING || t.NumElements() != 1) {
    return InvalidArgumentError(what, " must be a string scalar, got ", DataTypeName(t.dtype()),
                                t.shape().ToString());
  }
  return t.flat<std::string>()[0];
}

StatusOr<std::span<const std::string>> StringVector(const Tensor& t, std::string_view what,
                                                    int64_t expected = -1) {
  if (t.dtype() != DT_STRING || t.shape().rank() != 1) {
    return InvalidArgumentError(what, " must be a string vector, got ", DataTypeName(t.dtype()),
                                t.shape().ToString());
  }
  if (expected >= 0 && t.NumElements() != expected) {
    return InvalidArgumentError(what, " has ", t.NumElements(), " elements, expected ", expected);
  }
  return t.flat<std::string>();
}

Status CheckStringInput(const InferenceContext& c, int i, std::string_view what, int rank) {
  if (c.input_types[i] != DT_STRING) {
    return InvalidArgumentError(what, " must be string, got ", DataTypeName(c.input_types[i]));
  }
  if (c.input_shapes[i].known_rank() && c.input_shapes[i].rank() != rank) {
    return InvalidArgumentError(what, " must have rank ", rank, ", got ",
                                c.input_shapes[i].ToString());
  }
  return OkStatus();
}

// ------------------------------------------------------------ SaveV2

Status SaveV2Shape(InferenceContext& c) {
  if (c.input_types.size() < 3) return InvalidArgumentError("SaveV2 needs prefix, names, slices");
  CKFLOW_RETURN_IF_ERROR(CheckStringInput(c, 0, "prefix", 0));
  CKFLOW_RETURN_IF_ERROR(CheckStringInput(c, 1, "tensor_names", 1));
  CKFLOW_RETURN_IF_ERROR(CheckStringInput(c, 2, "shape_and_slices", 1));
  for (size_t i = 3; i < c.input_types.size(); ++i) {
    if (c.input_types[i] == DT_RESOURCE) {
      return InvalidArgumentError("tensor ", i - 3, " is a resource handle, which cannot be saved");
    }
  }
  return OkStatus();
}

// The writer of a save kernel's bundle at `prefix`.
StatusOr<std::unique_ptr<BundleWriter>> OpenWriter(KernelContext& ctx, const std::string& prefix,
                                                   bool sync) {
  BundleWriter::Options options;
  options.fs = FileSystemOf(ctx);
  options.sync = sync;
  return BundleWriter::Create(prefix, options);
}

// Adds `value` under `key`, or as the part `shape_and_slice` of it.
Status AddTo(BundleWriter& writer, const std::string& key, const std::string& shape_and_slice,
             const Tensor& value) {
  if (shape_and_slice.empty()) return writer.Add(key, value);
  StatusOr<ShapeAndSlice> spec = ParseShapeAndSlice(shape_and_slice);
  if (!spec.ok()) return spec.status().WithContext("saving '" + key + "'");
  return writer.AddSlice(key, spec->full_shape, spec->slice, value);
}

StatusOr<Kernel> SaveV2Kernel(const Node& node) {
  const bool sync = node.attrs().GetOr<bool>("sync", false);
  return Kernel([sync](KernelContext& ctx) -> Status {
    CKFLOW_ASSIGN_OR_RETURN(std::string prefix, ScalarString(ctx.input(0), "prefix"));
    const int64_t n = ctx.num_inputs() - 3;
    CKFLOW_ASSIGN_OR_RETURN(auto names, StringVector(ctx.input(1), "tensor_names", n));
    CKFLOW_ASSIGN_OR_RETURN(auto slices, StringVector(ctx.input(2), "shape_and_slices", n));
    CKFLOW_ASSIGN_OR_RETURN(std::unique_ptr<BundleWriter> writer, OpenWriter(ctx, prefix, sync));
    for (int64_t i = 0; i < n; ++i) {
      CKFLOW_RETURN_IF_ERROR(
          AddTo(*writer, names[i], slices[i], ctx.input(static_cast<int>(i) + 3)));
    }
    return writer->Finish();
  });
}

// ------------------------------------------------------------ RestoreV2

// The slice `shape_and_slice` asks of `entry`; InvalidArgument, as
// TensorFlow's RestoreV2, if its full shape is not the one stored.
StatusOr<TensorSlice> SliceToRestore(const BundleEntry& entry, const std::string& shape_and_slice,
                                     const std::string& prefix) {
  StatusOr<ShapeAndSlice> spec = ParseShapeAndSlice(shape_and_slice);
  if (!spec.ok()) return spec.status().WithContext("restoring '" + entry.key + "'");
  if (!(spec->full_shape == entry.shape)) {
    return InvalidArgumentError("key '", entry.key, "': shape ", spec->full_shape.ToString(),
                                " in shape_and_slice '", shape_and_slice,
                                "' does not match the shape stored in checkpoint '", prefix,
                                "': ", entry.shape.ToString());
  }
  return std::move(spec->slice);
}

Status RestoreV2Shape(InferenceContext& c) {
  CKFLOW_RETURN_IF_ERROR(CheckStringInput(c, 0, "prefix", 0));
  CKFLOW_RETURN_IF_ERROR(CheckStringInput(c, 1, "tensor_names", 1));
  CKFLOW_RETURN_IF_ERROR(CheckStringInput(c, 2, "shape_and_slices", 1));
  CKFLOW_ASSIGN_OR_RETURN(std::vector<DataType> dtypes,
                          c.attrs->Get<std::vector<DataType>>("dtypes"));
  for (DataType d : dtypes) c.AddOutput(d, PartialShape::Unknown());
  return OkStatus();
}

StatusOr<Kernel> RestoreV2Kernel(const Node& node) {
  CKFLOW_ASSIGN_OR_RETURN(std::vector<DataType> dtypes,
                          node.attrs().Get<std::vector<DataType>>("dtypes"));
  return Kernel([dtypes](KernelContext& ctx) -> Status {
    CKFLOW_ASSIGN_OR_RETURN(std::string prefix, ScalarString(ctx.input(0), "prefix"));
    const int64_t n = static_cast<int64_t>(dtypes.size());
    CKFLOW_ASSIGN_OR_RETURN(auto names, StringVector(ctx.input(1), "tensor_names", n));
    CKFLOW_ASSIGN_OR_RETURN(auto slices, StringVector(ctx.input(2), "shape_and_slices", n));
    std::unique_ptr<BundleReader> opened;
    CKFLOW_ASSIGN_OR_RETURN(const BundleReader* reader, ReaderFor(ctx, prefix, &opened));
    for (int64_t i = 0; i < n; ++i) {
      const BundleEntry* entry = reader->FindEntry(names[i]);
      if (entry == nullptr) {
        return NotFoundError("key '", names[i], "' not found in checkpoint '", prefix, "'");
      }
      if (entry->dtype != dtypes[i]) {
        return InvalidArgumentError("key '", names[i], "' in checkpoint '", prefix, "' is ",
                                    StoredDataTypeName(entry->dtype), ", expected ",
                                    DataTypeName(dtypes[i]));
      }
      if (slices[i].empty()) {
        CKFLOW_ASSIGN_OR_RETURN(Tensor * out,
                                ctx.AllocateOutput(static_cast<int>(i), dtypes[i], entry->shape));
        CKFLOW_RETURN_IF_ERROR(reader->ReadInto(*entry, out));
        continue;
      }
      CKFLOW_ASSIGN_OR_RETURN(TensorSlice slice, SliceToRestore(*entry, slices[i], prefix));
      CKFLOW_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(static_cast<int>(i), dtypes[i],
                                                               slice.ShapeIn(entry->shape)));
      CKFLOW_RETURN_IF_ERROR(reader->ReadSliceInto(entry->key, slice, out));
    }
    return OkStatus();
  });
}

// ------------------------------------------------------------ MergeV2Checkpoints

Status MergeShape(InferenceContext& c) {
  CKFLOW_RETURN_IF_ERROR(CheckStringInput(c, 0, "checkpoint_prefixes", 1));
  return CheckStringInput(c, 1, "destination_prefix", 0);
}

StatusOr<Kernel> MergeKernel(const Node& node) {
  MergeOptions options;
  options.delete_old_dirs = node.attrs().GetOr<bool>("delete_old_dirs", true);
  options.sync = node.attrs().GetOr<bool>("sync", false);
  return Kernel([options](KernelContext& ctx) -> Status {
    CKFLOW_ASSIGN_OR_RETURN(auto inputs, StringVector(ctx.input(0), "checkpoint_prefixes"));
    CKFLOW_ASSIGN_OR_RETURN(std::string destination,
                            ScalarString(ctx.input(1), "destination_prefix"));
    std::vector<std::string> prefixes(inputs.begin(), inputs.end());
    MergeOptions run_options = options;
    run_options.fs = FileSystemOf(ctx);
    return MergeBundles(prefixes, destination, run_options);
  });
}

// ------------------------------------------------------------ RestoreVariables

// A RestoreVariables or SaveVariables node's lists, one entry per variable,
// read in place (no copy) and checked to agree in length.
struct VariableLists {
  const std::vector<std::string>* keys;
  const std::vector<std::string>* names;
  const std::vector<DataType>* dtypes;
  const std::vector<PartialShape>* shapes;
  const std::vector<int64_t>* positions;  // optional: null if absent
  // Optional: per key, "" or the shape_and_slice of the variable's part.
  const std::vector<std::string>* slices;
};

StatusOr<VariableLists> ListsOf(const AttrMap& attrs) {
  VariableLists l{attrs.GetIf<std::vector<std::string>>("keys"),
                  attrs.GetIf<std::vector<std::string>>("shared_names"),
                  attrs.GetIf<std::vector<DataType>>("dtypes"),
                  attrs.GetIf<std::vector<PartialShape>>("shapes"),
                  attrs.GetIf<std::vector<int64_t>>("positions"),
                  attrs.GetIf<std::vector<std::string>>("slices")};
  if (!l.keys || !l.names || !l.dtypes || !l.shapes) {
    return InvalidArgumentError(
        "needs list attributes keys, shared_names (strings), dtypes and shapes");
  }
  if (l.names->size() != l.keys->size() || l.dtypes->size() != l.keys->size() ||
      l.shapes->size() != l.keys->size()) {
    return InvalidArgumentError(l.keys->size(), " keys for ", l.names->size(), " variables, ",
                                l.dtypes->size(), " dtypes and ", l.shapes->size(), " shapes");
  }
  if (l.positions != nullptr && l.positions->size() != l.keys->size()) {
    return InvalidArgumentError(l.keys->size(), " keys for ", l.positions->size(), " positions");
  }
  if (l.slices != nullptr && l.slices->size() != l.keys->size()) {
    return InvalidArgumentError(l.keys->size(), " keys for ", l.slices->size(), " slices");
  }
  return l;
}

// A RestoreVariables node's "cast" attribute: absent is kNone.
StatusOr<CastRule> CastOf(const AttrMap& attrs) {
  const auto* name = attrs.GetIf<std::string>("cast");
  if (name == nullptr) return CastRule::kNone;
  for (CastRule rule : {CastRule::kNone, CastRule::kWidening, CastRule::kAny}) {
    if (*name == CastRuleName(rule)) return rule;
  }
  return InvalidArgumentError("attribute cast is '", *name,
                              "', not one of 'none', 'widening' or 'any'");
}

Status RestoreVariablesShape(InferenceContext& c) {
  if (c.input_types.size() != 1) {
    return InvalidArgumentError("takes only the prefix, got ", c.input_types.size(), " inputs");
  }
  CKFLOW_RETURN_IF_ERROR(CheckStringInput(c, 0, "prefix", 0));
  CKFLOW_RETURN_IF_ERROR(CastOf(*c.attrs).status());
  return ListsOf(*c.attrs).status();
}

// Entries up to this size are read in batches (one read for many
// neighbours, then a copy that stays in cache); larger ones go straight
// into the variable's buffer in parallel chunks.
constexpr int64_t kBatchEntryBytes = int64_t{64} << 10;

// The variable by plain pointer: the op's list (or the eager caller) holds
// it for the whole restore. A shared_ptr copy per variable was a locked
// increment and decrement, the first on a control block cold in cache.
struct RestoreTarget {
  const BundleEntry* entry;
  internal::VariableResource* variable;
  std::optional<TensorSlice> slice;  // the variable is this part of the entry
  TensorShape shape;                 // the variable's: the entry's or the slice's
};

// Finds `key` (first at `position`, if known) and checks it, or its part
// `shape_and_slice` if not empty, fits `var` (its dtype, or one `cast`
// converts to it).
StatusOr<RestoreTarget> LookupTarget(const BundleReader& reader, const std::string& key,
                                     int64_t position, const std::string& shape_and_slice,
                                     internal::VariableResource* var, CastRule cast) {
  const BundleEntry* entry = reader.FindEntry(key, position);
  if (entry == nullptr) {
    return NotFoundError("key '", key, "' not found in checkpoint '", reader.prefix(),
                         "' (restoring variable '", var->name(), "')");
  }
  if (std::string why = CastRefusal(static_cast<DataType>(entry->dtype), var->dtype(), cast);
      !why.empty()) {
    return InvalidArgumentError("key '", key, "' in checkpoint '", reader.prefix(), "' is ",
                                StoredDataTypeName(entry->dtype), " but variable '", var->name(),
                                "' is ", DataTypeName(var->dtype()), ": ", why);
  }
  RestoreTarget target{entry, var, std::nullopt, entry->shape};
  if (!shape_and_slice.empty()) {
    CKFLOW_ASSIGN_OR_RETURN(target.slice, SliceToRestore(*entry, shape_and_slice, reader.prefix()));
    target.shape = target.slice->ShapeIn(entry->shape);
  }
  // The context only on failure: it is a string built per variable.
  if (Status s = target.variable->CheckAssignable(target.variable->dtype(), target.shape);
      !s.ok()) {
    return s.WithContext("restoring key '" + key + "'");
  }
  return target;
}

// Reads one checkpointed tensor into the variable's own buffer.
Status RestoreLarge(const BundleReader& reader, const RestoreTarget& target) {
  internal::VariableResource& var = *target.variable;
  MutexLock lock(&var.mu());
  CKFLOW_ASSIGN_OR_RETURN(Tensor * dest, var.PrepareToOverwriteLocked(target.shape));
  Status read =
      target.entry->dtype != var.dtype()
          ? reader.ReadCastInto(*target.entry, target.slice ? &*target.slice : nullptr, dest)
      : target.slice ? reader.ReadSliceInto(*target.entry, *target.slice, dest)
                     : reader.ReadInto(*target.entry, dest);
  // A half-read value must never be read as if it were whole.
  var.set_initialized_locked(read.ok());
  return read;
}

Status RestoreSmall(const BundleReader& reader, const std::vector<RestoreTarget>& targets) {
  std::vector<const BundleEntry*> entries;
  entries.reserve(targets.size());
  for (const RestoreTarget& t : targets) entries.push_back(t.entry);
  return reader.ReadBatch(entries, [&](size_t i, std::string_view bytes) -> Status {
    internal::VariableResource& var = *targets[i].variable;
    MutexLock lock(&var.mu());
    const BundleEntry& entry = *targets[i].entry;
    CKFLOW_ASSIGN_OR_RETURN(Tensor * dest, var.PrepareToOverwriteLocked(entry.shape));
    if (entry.dtype == var.dtype()) {
      std::memcpy(dest->raw_data(), bytes.data(), bytes.size());
    } else {
      CastElements(static_cast<DataType>(entry.dtype), bytes.data(), var.dtype(), dest->raw_data(),
                   dest->NumElements());
    }
    var.set_initialized_locked(true);
    return OkStatus();
  });
}

// Reads the `n` targets `target(i)` returns into their variables: small
// whole values batched, the rest one by one.
Status RestoreTargets(const BundleReader& reader, size_t n,
                      const std::function<StatusOr<RestoreTarget>(size_t)>& target_of) {
  std::vector<RestoreTarget> small;
  small.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    CKFLOW_ASSIGN_OR_RETURN(RestoreTarget target, target_of(i));
    if (target.entry->dtype != DT_STRING && !target.entry->is_sliced() && !target.slice &&
        target.entry->size <= kBatchEntryBytes) {
      small.push_back(std::move(target));
    } else {
      CKFLOW_RETURN_IF_ERROR(RestoreLarge(reader, target));
    }
  }
  return RestoreSmall(reader, small);
}

// The variables one RestoreVariables op writes (or a SaveVariables op
// reads), resolved by name in the session's resources the first time it
// runs there (creating them, as their VarHandleOps would) and reused by
// later runs: the op carries no handle inputs, so a session restoring or
// saving thousands of variables runs a few ops, not a handle op (and a read)
// per variable.
//
// The lists are the node's own attributes, not copies: the graph outlives
// the session that holds this kernel, and a restore of many variables would
// otherwise copy every key and name once more when its plan is built.
class NamedVariables {
 public:
  using Variables = std::vector<std::shared_ptr<internal::VariableResource>>;
  NamedVariables(const std::vector<std::string>& keys, const std::vector<std::string>& names,
                 const std::vector<DataType>& dtypes, const std::vector<PartialShape>& shapes,
                 const std::vector<int64_t>* positions, const std::vector<std::string>* slices)
      : keys_(keys),
        names_(names),
        dtypes_(dtypes),
        shapes_(shapes),
        positions_(positions),
        slices_(slices) {}

  const std::vector<std::string>& keys() const { return keys_; }
  // The shape_and_slice of the part variable i is, or "".
  const std::string& slice(size_t i) const {
    static const std::string kWhole;
    return slices_ ? (*slices_)[i] : kWhole;
  }
  // Where keys[i] was in the checkpoint the op was built for; -1 if unknown.
  int64_t position(size_t i) const { return positions_ ? (*positions_)[i] : -1; }

  // Shared, not copied: a copy of thousands of shared_ptrs costs two atomic
  // operations on each variable's count.
  StatusOr<std::shared_ptr<const Variables>> Get(ResourceMgr& resources) CKFLOW_EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    if (resources_ != &resources) {
      CKFLOW_ASSIGN_OR_RETURN(Variables variables, internal::LookupOrCreateVariables(
                                                       resources, names_, dtypes_, shapes_));
      variables_ = std::make_shared<const Variables>(std::move(variables));
      resources_ = &resources;
    }
    return variables_;
  }

 private:
  const std::vector<std::string>& keys_;
  const std::vector<std::string>& names_;
  const std::vector<DataType>& dtypes_;
  const std::vector<PartialShape>& shapes_;
  const std::vector<int64_t>* const positions_;
  const std::vector<std::string>* const slices_;
  Mutex mu_;
  const ResourceMgr* resources_ CKFLOW_GUARDED_BY(mu_) = nullptr;
  std::shared_ptr<const Variables> variables_ CKFLOW_GUARDED_BY(mu_);
};

StatusOr<Kernel> RestoreVariablesKernel(const Node& node) {
  CKFLOW_ASSIGN_OR_RETURN(VariableLists lists, ListsOf(node.attrs()));
  CKFLOW_ASSIGN_OR_RETURN(CastRule cast, CastOf(node.attrs()));
  auto targets = std::make_shared<NamedVariables>(*lists.keys, *lists.names, *lists.dtypes,
                                                  *lists.shapes, lists.positions, lists.slices);
  return Kernel([targets, cast](KernelContext& ctx) -> Status {
    CKFLOW_ASSIGN_OR_RETURN(std::string prefix, ScalarString(ctx.input(0), "prefix"));
    std::unique_ptr<BundleReader> opened;
    CKFLOW_ASSIGN_OR_RETURN(const BundleReader* reader, ReaderFor(ctx, prefix, &opened));
    CKFLOW_ASSIGN_OR_RETURN(std::shared_ptr<const NamedVariables::Variables> variables,
                            targets->Get(ctx.resources()));
    const std::vector<std::string>& keys = targets->keys();
    return RestoreTargets(*reader, keys.size(), [&](size_t i) {
      // Many small variables lie all over the heap: ask for one a few ahead
      // (its dtype and shape, checked here, and its lock, taken for the
      // copy) while this one is checked.
      constexpr size_t kAhead = 4;
      if (i + kAhead < keys.size()) {
        const char* ahead = reinterpret_cast<const char*>((*variables)[i + kAhead].get());
        __builtin_prefetch(ahead);
        __builtin_prefetch(ahead + 64);
      }
      return LookupTarget(*reader, keys[i], targets->position(i), targets->slice(i),
                          (*variables)[i].get(), cast);
    });
  });
}

// ------------------------------------------------------------ SaveVariables

Status SaveVariablesShape(InferenceContext& c) {
  if (c.input_types.empty()) return InvalidArgumentError("needs the prefix");
  CKFLOW_RETURN_IF_ERROR(CheckStringInput(c, 0, "prefix", 0));
  CKFLOW_RETURN_IF_ERROR(ListsOf(*c.attrs).status());
  const auto* tensor_names = c.attrs->GetIf<std::vector<std::string>>("tensor_names");
  const size_t tensors = c.input_types.size() - 1;
  if ((tensor_names ? tensor_names->size() : 0) != tensors) {
    return InvalidArgumentError(tensors, " tensors for ", tensor_names ? tensor_names->size() : 0,
                                " tensor_names");
  }
  for (size_t i = 1; i < c.input_types.size(); ++i) {
    if (c.input_types[i] == DT_RESOURCE) {
      return InvalidArgumentError("tensor ", i - 1, " is a resource handle, which cannot be saved");
    }
  }
  return OkStatus();
}

StatusOr<Kernel> SaveVariablesKernel(const Node& node) {
  CKFLOW_ASSIGN_OR_RETURN(VariableLists lists, ListsOf(node.attrs()));
  const auto* named = node.attrs().GetIf<std::vector<std::string>>("tensor_names");
  std::vector<std::string> tensor_names = named ? *named : std::vector<std::string>();
  auto variables = std::make_shared<NamedVariables>(*lists.keys, *lists.names, *lists.dtypes,
                                                    *lists.shapes, nullptr, lists.slices);
  const bool sync = node.attrs().GetOr<bool>("sync", false);
  return Kernel([variables, tensor_names = std::move(tensor_names),
                 sync](KernelContext& ctx) -> Status {
    CKFLOW_ASSIGN_OR_RETURN(std::string prefix, ScalarString(ctx.input(0), "prefix"));
    CKFLOW_ASSIGN_OR_RETURN(std::shared_ptr<const NamedVariables::Variables> resources,
                            variables->Get(ctx.resources()));
    CKFLOW_ASSIGN_OR_RETURN(std::unique_ptr<BundleWriter> writer, OpenWriter(ctx, prefix, sync));
    const std::vector<std::string>& keys = variables->keys();
    // Both lists come sorted from the saver, and the writer takes keys
    // fastest in order: the tensors go in between the variables where they
    // sort (any order is still written correctly).
    size_t t = 0;
    for (size_t i = 0; i <= keys.size(); ++i) {
      for (; t < tensor_names.size() && (i == keys.size() || tensor_names[t] < keys[i]); ++t) {
        CKFLOW_RETURN_IF_ERROR(
            AddTo(*writer, tensor_names[t], std::string(), ctx.input(static_cast<int>(t) + 1)));
      }
      if (i == keys.size()) break;
      // Many small variables lie all over the heap: ask for the lock (and
      // the value beside it) of one a few ahead while this one is written.
      constexpr size_t kAhead = 4;
      if (i + kAhead < keys.size()) __builtin_prefetch(&(*resources)[i + kAhead]->mu());
      // A small value is written while its variable is locked (a copy into
      // the writer's buffer); a large one is shared (no copy) and written
      // unlocked, so an update meanwhile copies it rather than wait.
      constexpr size_t kWrittenLocked = size_t{64} << 10;
      Tensor shared;
      {
        internal::VariableResource& variable = *(*resources)[i];
        MutexLock lock(&variable.mu());
        StatusOr<const Tensor*> value = variable.PeekLocked();
        if (!value.ok()) return value.status().WithContext("saving '" + keys[i] + "'");
        if ((*value)->TotalBytes() > kWrittenLocked) {
          shared = **value;
        } else {
          CKFLOW_RETURN_IF_ERROR(AddTo(*writer, keys[i], variables->slice(i), **value));
        }
      }
      if (shared.IsValid()) {
        CKFLOW_RETURN_IF_ERROR(AddTo(*writer, keys[i], variables->slice(i), shared));
      }
    }
    return writer->Finish();
  });
}

}  // namespace

namespace internal {

Status RestoreVariablesNow(const BundleReader& reader, const std::vector<Output>& handles,
                           const std::vector<std::string>& keys,
                           const std::vector<int64_t>& positions,
                           const std::vector<std::string>& slices, CastRule cast) {
  // Holds every variable until its value is in (a target points at it).
  std::vector<std::shared_ptr<VariableResource>> held;
  held.reserve(handles.size());
  return RestoreTargets(reader, handles.size(), [&](size_t i) -> StatusOr<RestoreTarget> {
    // The eager handle node's value points at the variable: no lookup by
    // name in the resources.
    const Node* node = handles[i].node();
    if (node == nullptr || node->type() != "VarHandleOp" || !node->has_values()) {
      return InvalidArgumentError("restoring key '", keys[i], "': handle ", i, " (",
                                  node ? handles[i].name() : std::string("invalid"),
                                  ") is not an executed VarHandleOp");
    }
    CKFLOW_ASSIGN_OR_RETURN(std::shared_ptr<VariableResource> handle_variable,
                            VariableFromHandle(handles[i].value(), "restore target"));
    VariableResource* variable = held.emplace_back(std::move(handle_variable)).get();
    // The caller checked the entry at positions[i] against the variable
    // when it matched it: only another entry (or a part) is checked here.
    const std::vector<BundleEntry>& entries = reader.entries();
    const int64_t at = positions[i];
    if (slices[i].empty() && at >= 0 && static_cast<size_t>(at) < entries.size() &&
        entries[at].key == keys[i]) {
      return RestoreTarget{&entries[at], variable, std::nullopt, entries[at].shape};
    }
    return LookupTarget(reader, keys[i], at, slices[i], variable, cast);
  });
}

}  // namespace internal

Status RegisterCheckpointOps(OpRegistry& registry) {
  CKFLOW_RETURN_IF_ERROR(registry.Register({.type = "SaveV2",
                                            .stateful = true,
                                            .shape_fn = SaveV2Shape,
                                            .kernel_factory = SaveV2Kernel}));
  CKFLOW_RETURN_IF_ERROR(registry.Register({.type = "RestoreV2",
                                            .stateful = true,
                                            .shape_fn = RestoreV2Shape,
                                            .kernel_factory = RestoreV2Kernel}));
  CKFLOW_RETURN_IF_ERROR(registry.Register({.type = "MergeV2Checkpoints",
                                            .stateful = true,
                                            .shape_fn = MergeShape,
                                            .kernel_factory = MergeKernel}));
  CKFLOW_RETURN_IF_ERROR(registry.Register({.type = "RestoreVariables",
                                            .stateful = true,
                                            .shape_fn = RestoreVariablesShape,
                                            .kernel_factory = RestoreVariablesKernel}));
  return registry.Register({.type = "SaveVariables",
                            .stateful = true,
                            .shape_fn = SaveVariablesShape,
                            .kernel_factory = SaveVariablesKernel});
}

namespace ops {

Output SaveV2(const Scope& scope, Output prefix, Output tensor_names, Output shape_and_slices,
              const std::vector<Output>& tensors, bool sync) {
  std::vector<Output> inputs = {prefix, tensor_names, shape_and_slices};
  inputs.insert(inputs.end(), tensors.begin(), tensors.end());
  AttrMap attrs;
  attrs.Set("sync", sync);
  return scope.AddNode(StandardOp("SaveV2"), std::move(inputs), std::move(attrs));
}

std::vector<Output> RestoreV2(const Scope& scope, Output prefix, Output tensor_names,
                              Output shape_and_slices, const std::vector<DataType>& dtypes) {
  AttrMap attrs;
  attrs.Set("dtypes", dtypes);
  Node* node = scope.AddNode(StandardOp("RestoreV2"), {prefix, tensor_names, shape_and_slices},
                             std::move(attrs));
  std::vector<Output> outputs;
  for (size_t i = 0; i < dtypes.size(); ++i) {
    outputs.push_back(node ? Output(node, static_cast<int>(i)) : Output());
  }
  return outputs;
}

Output MergeV2Checkpoints(const Scope& scope, Output checkpoint_prefixes, Output destination_prefix,
                          bool delete_old_dirs, bool sync) {
  AttrMap attrs;
  attrs.Set("delete_old_dirs", delete_old_dirs);
  if (sync) attrs.Set("sync", true);
  return scope.AddNode(StandardOp("MergeV2Checkpoints"), {checkpoint_prefixes, destination_prefix},
                       std::move(attrs));
}

StatusOr<VariableDeclarations> DeclarationsOf(const std::vector<Output>& handles) {
  VariableDeclarations d;
  d.shared_names.reserve(handles.size());
  d.dtypes.reserve(handles.size());
  d.shapes.reserve(handles.size());
  for (size_t i = 0; i < handles.size(); ++i) {
    const Node* node = handles[i].node();
    const AttrMap* attrs =
        node != nullptr && node->type() == "VarHandleOp" ? &node->attrs() : nullptr;
    const auto* name = attrs ? attrs->GetIf<std::string>("shared_name") : nullptr;
    const auto* dtype = attrs ? attrs->GetIf<DataType>("dtype") : nullptr;
    const auto* shape = attrs ? attrs->GetIf<PartialShape>("shape") : nullptr;
    if (!name || !dtype || !shape) {
      return InvalidArgumentError("RestoreVariables: handle ", i, " (",
                                  node ? handles[i].name() : std::string("invalid"),
                                  ") is not a VarHandleOp output");
    }
    d.shared_names.push_back(*name);
    d.dtypes.push_back(*dtype);
    d.shapes.push_back(*shape);
  }
  return d;
}

namespace {

// The lists ListsOf reads: slices only if a variable is a part.
AttrMap VariableListAttrs(std::vector<std::string> keys, VariableDeclarations variables,
                          std::vector<std::string> slices) {
  AttrMap attrs;
  if (std::any_of(slices.begin(), slices.end(), [](const std::string& s) { return !s.empty(); })) {
    attrs.Set("slices", std::move(slices));
  }
  attrs.Set("keys", std::move(keys));
  attrs.Set("shared_names", std::move(variables.shared_names));
  attrs.Set("dtypes", std::move(variables.dtypes));
  attrs.Set("shapes", std::move(variables.shapes));
  return attrs;
}

}  // namespace

Output RestoreVariables(const Scope& scope, Output prefix, std::vector<std::string> keys,
                        VariableDeclarations variables, std::vector<int64_t> positions,
                        std::vector<std::string> slices, CastRule cast) {
  AttrMap attrs = VariableListAttrs(std::move(keys), std::move(variables), std::move(slices));
  if (!positions.empty()) attrs.Set("positions", std::move(positions));
  if (cast != CastRule::kNone) attrs.Set("cast", std::string(CastRuleName(cast)));
  return scope.AddNode(StandardOp("RestoreVariables"), {prefix}, std::move(attrs));
}

Output SaveVariables(const Scope& scope, Output prefix, std::vector<std::string> keys,
                     VariableDeclarations variables, std::vector<std::string> slices,
                     std::vector<std::string> tensor_names, const std::vector<Output>& tensors,
                     bool sync) {
  AttrMap attrs = VariableListAttrs(std::move(keys), std::move(variables), std::move(slices));
  if (!tensor_names.empty()) attrs.Set("tensor_names", std::move(tensor_names));
  if (sync) attrs.Set("sync", true);
  std::vector<Output> inputs = {prefix};
  inputs.insert(inputs.end(), tensors.begin(), tensors.end());
  return scope.AddNode(StandardOp("SaveVariables"), std::move(inputs), std::move(attrs));
}

Output RestoreVariables(const Scope& scope, Output prefix, std::vector<std::string> keys,
                        const std::vector<Output>& handles) {
  if (!scope.ok()) return Output();
  if (keys.size() != handles.size()) {
    scope.UpdateStatus(InvalidArgumentError("RestoreVariables: ", keys.size(), " keys for ",
                                            handles.size(), " handles"));
    return Output();
  }
  StatusOr<VariableDeclarations> variables = DeclarationsOf(handles);
  if (!variables.ok()) {
    scope.UpdateStatus(variables.status());
    return Output();
  }
  return RestoreVariables(scope, prefix, std::move(keys), *std::move(variables));
}

}  // namespace ops
}  // namespace ckflow
