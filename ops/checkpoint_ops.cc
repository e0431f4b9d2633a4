#include "ops/checkpoint_ops.h"

#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>

#include "checkpoint/bundle_format.h"
#include "checkpoint/bundle_reader.h"
#include "checkpoint/bundle_writer.h"
#include "checkpoint/merge.h"
#include "ops/standard_ops.h"
#include "ops/variable_resource_internal.h"

namespace ckflow {
namespace {

// ------------------------------------------------------------ reader cache

// The readers a session's restore ops used, by prefix: holding them keeps
// each checkpoint's parsed index alive for the next restore from it.
class BundleReaderCache : public ResourceBase {
 public:
  StatusOr<std::shared_ptr<const BundleReader>> Get(const std::string& prefix) {
    CKFLOW_ASSIGN_OR_RETURN(std::shared_ptr<const BundleReader> reader,
                            BundleReader::OpenShared(prefix));
    std::lock_guard<std::mutex> lock(mu_);
    if (readers_.size() >= kMaxReaders && !readers_.count(prefix)) readers_.clear();
    readers_[prefix] = reader;
    return reader;
  }

 private:
  static constexpr size_t kMaxReaders = 8;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<const BundleReader>> readers_;  // guarded by mu_
};

StatusOr<std::shared_ptr<const BundleReader>> ReaderFor(KernelContext& ctx,
                                                        const std::string& prefix) {
  CKFLOW_ASSIGN_OR_RETURN(
      std::shared_ptr<BundleReaderCache> cache,
      ctx.resources().LookupOrCreate<BundleReaderCache>(
          "ckflow/bundle_reader_cache", [] { return std::make_shared<BundleReaderCache>(); }));
  return cache->Get(prefix);
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

StatusOr<Kernel> SaveV2Kernel(const Node& node) {
  const bool sync = node.attrs().GetOr<bool>("sync", false);
  return Kernel([sync](KernelContext& ctx) -> Status {
    CKFLOW_ASSIGN_OR_RETURN(std::string prefix, ScalarString(ctx.input(0), "prefix"));
    const int64_t n = ctx.num_inputs() - 3;
    CKFLOW_ASSIGN_OR_RETURN(auto names, StringVector(ctx.input(1), "tensor_names", n));
    CKFLOW_ASSIGN_OR_RETURN(auto slices, StringVector(ctx.input(2), "shape_and_slices", n));
    BundleWriter::Options options;
    options.sync = sync;
    CKFLOW_ASSIGN_OR_RETURN(std::unique_ptr<BundleWriter> writer,
                            BundleWriter::Create(prefix, options));
    for (int64_t i = 0; i < n; ++i) {
      if (!slices[i].empty()) {
        return UnimplementedError("saving a slice ('", slices[i], "') of '", names[i],
                                  "': partitioned variables are not supported");
      }
      CKFLOW_RETURN_IF_ERROR(writer->Add(names[i], ctx.input(static_cast<int>(i) + 3)));
    }
    return writer->Finish();
  });
}

// ------------------------------------------------------------ RestoreV2

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
    CKFLOW_ASSIGN_OR_RETURN(std::shared_ptr<const BundleReader> reader, ReaderFor(ctx, prefix));
    for (int64_t i = 0; i < n; ++i) {
      if (!slices[i].empty()) {
        return UnimplementedError("restoring a slice of '", names[i], "' is not supported");
      }
      const BundleEntry* entry = reader->FindEntry(names[i]);
      if (entry == nullptr) {
        return NotFoundError("key '", names[i], "' not found in checkpoint '", prefix, "'");
      }
      if (entry->dtype != dtypes[i]) {
        return InvalidArgumentError("key '", names[i], "' in checkpoint '", prefix, "' is ",
                                    StoredDataTypeName(entry->dtype), ", expected ",
                                    DataTypeName(dtypes[i]));
      }
      CKFLOW_ASSIGN_OR_RETURN(Tensor * out,
                              ctx.AllocateOutput(static_cast<int>(i), dtypes[i], entry->shape));
      CKFLOW_RETURN_IF_ERROR(reader->ReadInto(*entry, out));
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
  const bool delete_old_dirs = node.attrs().GetOr<bool>("delete_old_dirs", true);
  return Kernel([delete_old_dirs](KernelContext& ctx) -> Status {
    CKFLOW_ASSIGN_OR_RETURN(auto inputs, StringVector(ctx.input(0), "checkpoint_prefixes"));
    CKFLOW_ASSIGN_OR_RETURN(std::string destination,
                            ScalarString(ctx.input(1), "destination_prefix"));
    std::vector<std::string> prefixes(inputs.begin(), inputs.end());
    CKFLOW_RETURN_IF_ERROR(MergeBundles(prefixes, destination));
    if (delete_old_dirs) {
      // TensorFlow removes each input's directory when it differs from the
      // destination's, ignoring errors (it only succeeds when empty).
      namespace fs = std::filesystem;
      const fs::path dest_dir = fs::path(destination).parent_path();
      for (const std::string& p : prefixes) {
        fs::path dir = fs::path(p).parent_path();
        std::error_code ec;
        if (dir != dest_dir) fs::remove(dir, ec);
      }
    }
    return OkStatus();
  });
}

// ------------------------------------------------------------ RestoreVariables

Status RestoreVariablesShape(InferenceContext& c) {
  CKFLOW_RETURN_IF_ERROR(CheckStringInput(c, 0, "prefix", 0));
  CKFLOW_ASSIGN_OR_RETURN(std::vector<std::string> keys,
                          c.attrs->Get<std::vector<std::string>>("keys"));
  if (keys.size() + 1 != c.input_types.size()) {
    return InvalidArgumentError(keys.size(), " keys for ", c.input_types.size() - 1, " handles");
  }
  for (size_t i = 1; i < c.input_types.size(); ++i) {
    if (c.input_types[i] != DT_RESOURCE) {
      return InvalidArgumentError("input ", i, " (for key '", keys[i - 1],
                                  "') must be a variable handle, got ",
                                  DataTypeName(c.input_types[i]));
    }
  }
  return OkStatus();
}

// Entries up to this size are read in batches (one read for many
// neighbours, then a copy that stays in cache); larger ones go straight
// into the variable's buffer in parallel chunks.
constexpr int64_t kBatchEntryBytes = int64_t{64} << 10;

struct RestoreTarget {
  const BundleEntry* entry;
  std::shared_ptr<internal::VariableResource> variable;
};

// Finds `key` and checks it fits the variable behind `handle`.
StatusOr<RestoreTarget> LookupTarget(const BundleReader& reader, const std::string& key,
                                     const Tensor& handle) {
  CKFLOW_ASSIGN_OR_RETURN(std::shared_ptr<internal::VariableResource> var,
                          internal::VariableFromHandle(handle, key));
  const BundleEntry* entry = reader.FindEntry(key);
  if (entry == nullptr) {
    return NotFoundError("key '", key, "' not found in checkpoint '", reader.prefix(),
                         "' (restoring variable '", var->name(), "')");
  }
  if (entry->dtype != var->dtype()) {
    return InvalidArgumentError("key '", key, "' in checkpoint '", reader.prefix(), "' is ",
                                StoredDataTypeName(entry->dtype), " but variable '", var->name(),
                                "' is ", DataTypeName(var->dtype()));
  }
  CKFLOW_RETURN_IF_ERROR(
      var->CheckAssignable(var->dtype(), entry->shape).WithContext("restoring key '" + key + "'"));
  return RestoreTarget{entry, std::move(var)};
}

// Reads one checkpointed tensor into the variable's own buffer.
Status RestoreLarge(const BundleReader& reader, const RestoreTarget& target) {
  internal::VariableResource& var = *target.variable;
  std::lock_guard<std::mutex> lock(var.mu());
  CKFLOW_ASSIGN_OR_RETURN(Tensor * dest, var.PrepareToOverwriteLocked(target.entry->shape));
  Status read = reader.ReadInto(*target.entry, dest);
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
    std::lock_guard<std::mutex> lock(var.mu());
    CKFLOW_ASSIGN_OR_RETURN(Tensor * dest, var.PrepareToOverwriteLocked(targets[i].entry->shape));
    std::memcpy(dest->raw_data(), bytes.data(), bytes.size());
    var.set_initialized_locked(true);
    return OkStatus();
  });
}

StatusOr<Kernel> RestoreVariablesKernel(const Node& node) {
  CKFLOW_ASSIGN_OR_RETURN(std::vector<std::string> keys,
                          node.attrs().Get<std::vector<std::string>>("keys"));
  return Kernel([keys](KernelContext& ctx) -> Status {
    CKFLOW_ASSIGN_OR_RETURN(std::string prefix, ScalarString(ctx.input(0), "prefix"));
    CKFLOW_ASSIGN_OR_RETURN(std::shared_ptr<const BundleReader> reader, ReaderFor(ctx, prefix));
    std::vector<RestoreTarget> small;
    for (size_t i = 0; i < keys.size(); ++i) {
      CKFLOW_ASSIGN_OR_RETURN(RestoreTarget target,
                              LookupTarget(*reader, keys[i], ctx.input(static_cast<int>(i) + 1)));
      if (target.entry->dtype != DT_STRING && target.entry->size <= kBatchEntryBytes) {
        small.push_back(std::move(target));
      } else {
        CKFLOW_RETURN_IF_ERROR(RestoreLarge(*reader, target));
      }
    }
    return RestoreSmall(*reader, small);
  });
}

}  // namespace

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
  return registry.Register({.type = "RestoreVariables",
                            .stateful = true,
                            .shape_fn = RestoreVariablesShape,
                            .kernel_factory = RestoreVariablesKernel});
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
                          bool delete_old_dirs) {
  AttrMap attrs;
  attrs.Set("delete_old_dirs", delete_old_dirs);
  return scope.AddNode(StandardOp("MergeV2Checkpoints"), {checkpoint_prefixes, destination_prefix},
                       std::move(attrs));
}

Output RestoreVariables(const Scope& scope, Output prefix, const std::vector<std::string>& keys,
                        const std::vector<Output>& handles) {
  std::vector<Output> inputs = {prefix};
  inputs.insert(inputs.end(), handles.begin(), handles.end());
  AttrMap attrs;
  attrs.Set("keys", keys);
  return scope.AddNode(StandardOp("RestoreVariables"), std::move(inputs), std::move(attrs));
}

}  // namespace ops
}  // namespace ckflow
