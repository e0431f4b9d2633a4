#include <algorithm>

#include "base/parallel.h"
#include "checkpoint/object_graph_internal.h"
#include "checkpoint/restore_planner_internal.h"
#include "ops/array_ops.h"
#include "ops/checkpoint_ops.h"
#include "ops/checkpoint_ops_internal.h"

namespace ckflow::internal {
namespace {

// Restore ops are split so the session can run them in parallel: each group
// holds at most this many values or bytes (large tensors are also read in
// parallel chunks inside one op).
constexpr size_t kMaxValuesPerRestoreOp = 512;
constexpr int64_t kMaxBytesPerRestoreOp = int64_t{64} << 20;

int64_t ApproxBytes(const SaveableAttribute& a) {
  if (!a.shape.IsFullyDefined()) return 0;
  int64_t n = static_cast<int64_t>(DataTypeSize(a.dtype));
  for (int64_t d : a.shape.dims()) {
    if (d == 0) return 0;
    // Anything over the group limit counts the same; this avoids overflow.
    n = n > kMaxBytesPerRestoreOp / d ? kMaxBytesPerRestoreOp + 1 : n * d;
  }
  return n;
}

// The same items restored under another cast rule need another op.
std::string Signature(const std::vector<RestoreItem>& items, size_t begin, size_t end,
                      CastRule cast) {
  std::string sig(1, static_cast<char>(cast));
  for (size_t i = begin; i < end; ++i) {
    const int id = items[i].attribute.handle.node()->id();
    sig.append(items[i].key);
    sig.push_back('\0');
    sig.append(reinterpret_cast<const char*>(&id), sizeof(id));
  }
  return sig;
}

}  // namespace

RestorePlanner::RestorePlanner(const Scope& scope, std::weak_ptr<Graph> graph, FileSystem* fs,
                               const GroupOptions& group, Owners& owners)
    : scope_(scope), graph_(std::move(graph)), fs_(fs), group_(group), owners_(owners) {}

Status RestorePlanner::CheckGraphAlive() const {
  if (!graph_.expired()) return OkStatus();
  return FailedPreconditionError(
      "checkpoint: the graph this checkpoint's objects were restored into has been destroyed");
}

Output RestorePlanner::restore_prefix() {
  if (!restore_prefix_.valid() && CheckGraphAlive().ok()) {
    restore_prefix_ = ops::Placeholder(scope_.WithoutExecution().WithOpName("restore_prefix"),
                                       DT_STRING, {.shape = PartialShape::Scalar()});
  }
  return restore_prefix_;
}

StatusOr<std::vector<Output>> RestorePlanner::RestoreOps(std::vector<RestoreItem> items,
                                                         const std::string& save_path,
                                                         const BundleReader* reader,
                                                         CastRule cast) {
  CKFLOW_RETURN_IF_ERROR(CheckGraphAlive());
  // A group member restores only what it owns, also on creation.
  if (group_.group != nullptr && group_.restore_owned_only) {
    std::vector<std::pair<std::string, int64_t>> sized;
    sized.reserve(items.size());
    for (const RestoreItem& item : items) {
      sized.emplace_back(item.key, DeclaredBytes(item.attribute));
    }
    CKFLOW_ASSIGN_OR_RETURN(std::vector<int> owners, owners_.Place(sized));
    const int rank = group_.group->rank();
    size_t kept = 0;
    for (size_t i = 0; i < items.size(); ++i) {
      if (owners[i] != rank && items[i].key != kSaveCounterKey) continue;
      if (kept != i) items[kept] = std::move(items[i]);
      ++kept;
    }
    items.resize(kept);
  }
  if (scope_.eager()) return RestoreNow(std::move(items), save_path, reader, cast);
  struct Group {
    size_t begin, end;
    std::string signature;
    Output op;  // cached, or built below
    StatusOr<ops::VariableDeclarations> variables = ops::VariableDeclarations{};
  };
  std::vector<Group> groups;
  for (size_t begin = 0, end = 0; begin < items.size(); begin = end) {
    int64_t bytes = 0;
    while (end < items.size() && end - begin < kMaxValuesPerRestoreOp &&
           (end == begin || bytes + ApproxBytes(items[end].attribute) <= kMaxBytesPerRestoreOp)) {
      bytes += ApproxBytes(items[end].attribute);
      ++end;
    }
    groups.push_back(Group{begin, end});
  }
  // Each group's signature and, for a new op, its variables' declarations
  // read off their handle nodes: both touch every handle node, cold in
  // cache, and only read the graph and the cache of ops (nothing is added
  // to either until below). So they run for all groups in parallel, one
  // group's nodes read twice while they are still in cache.
  ParallelFor(static_cast<int64_t>(groups.size()), 100000, [&](int64_t first, int64_t last) {
    for (int64_t b = first; b < last; ++b) {
      Group& g = groups[b];
      g.signature = Signature(items, g.begin, g.end, cast);
      if (auto it = restore_ops_.find(g.signature); it != restore_ops_.end()) {
        g.op = it->second;
        continue;
      }
      std::vector<Output> handles;
      handles.reserve(g.end - g.begin);
      for (size_t i = g.begin; i < g.end; ++i) handles.push_back(items[i].attribute.handle);
      g.variables = ops::DeclarationsOf(handles);
    }
  });
  const Output prefix = restore_prefix();
  for (Group& g : groups) {
    if (g.op.valid()) continue;  // cached
    if (!g.variables.ok()) return g.variables.status().WithContext("building restore ops");
    std::vector<std::string> keys;
    std::vector<int64_t> positions;
    std::vector<std::string> slices;
    keys.reserve(g.end - g.begin);
    positions.reserve(g.end - g.begin);
    slices.reserve(g.end - g.begin);
    for (size_t i = g.begin; i < g.end; ++i) {
      keys.push_back(std::move(items[i].key));
      positions.push_back(items[i].position);
      slices.push_back(std::move(items[i].attribute.slice_spec));
    }
    g.op = ops::RestoreVariables(scope_.WithDevice(""), prefix, std::move(keys),
                                 *std::move(g.variables), std::move(positions), std::move(slices),
                                 cast);
    if (!g.op.valid()) return scope_.status().WithContext("building restore ops");
    restore_ops_.emplace(std::move(g.signature), g.op);
  }
  std::vector<Output> result;
  result.reserve(groups.size());
  for (const Group& g : groups) result.push_back(g.op);
  return result;
}

StatusOr<std::vector<Output>> RestorePlanner::RestoreNow(std::vector<RestoreItem> items,
                                                         const std::string& save_path,
                                                         const BundleReader* reader,
                                                         CastRule cast) {
  // Restore-on-create: the values go straight into the variables now.
  // Nothing is built or cached: a later restore reads again.
  if (items.empty()) return std::vector<Output>();  // a group member's share
  std::unique_ptr<BundleReader> opened;
  if (reader == nullptr) {
    CKFLOW_ASSIGN_OR_RETURN(opened, BundleReader::Open(save_path, {.fs = fs_}));
    reader = opened.get();
  }
  std::vector<Output> handles;
  std::vector<std::string> keys;
  std::vector<int64_t> positions;
  std::vector<std::string> slices;  // a part of a partitioned variable
  handles.reserve(items.size());
  keys.reserve(items.size());
  positions.reserve(items.size());
  slices.reserve(items.size());
  for (RestoreItem& item : items) {
    handles.push_back(item.attribute.handle);
    keys.push_back(std::move(item.key));
    positions.push_back(item.position);
    slices.push_back(std::move(item.attribute.slice_spec));
  }
  CKFLOW_RETURN_IF_ERROR(
      internal::RestoreVariablesNow(*reader, handles, keys, positions, slices, cast)
          .WithContext("restoring on creation from '" + save_path + "'"));
  return std::vector<Output>();
}

}  // namespace ckflow::internal
