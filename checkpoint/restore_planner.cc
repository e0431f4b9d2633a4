#include <algorithm>
#include <functional>
#include <string_view>

#include "base/parallel.h"
#include "checkpoint/object_graph_internal.h"
#include "checkpoint/restore_planner_internal.h"
#include "ops/array_ops.h"
#include "ops/checkpoint_ops.h"
#include "ops/checkpoint_ops_internal.h"

namespace ckflow::internal {
namespace {

// The bytes a restore op takes at most (kMaxValuesPerRestoreOp).
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

// A digest of the (key, variable) pairs of items [begin, end) and the cast
// rule: the variable by its shared name where the attribute gives it (a
// graph's variables have distinct ones), else by its handle's node. It
// finds a cached op; RestoreOpRestores then confirms it (a digest is not unique), so
// the cache keeps 8 bytes per op, not a copy of every key and name.
uint64_t Digest(const std::vector<RestoreItem>& items, size_t begin, size_t end, CastRule cast) {
  // Each string's hash is mixed in after the ones before it, so no two
  // lists (or orders) mix alike but by chance.
  uint64_t digest = static_cast<uint64_t>(cast) + 1;
  auto mix = [&digest](uint64_t value) {
    digest = (digest ^ value) * 0x9e3779b97f4a7c15u;
    digest ^= digest >> 29;
  };
  const std::hash<std::string_view> hash;
  for (size_t i = begin; i < end; ++i) {
    const SaveableAttribute& a = items[i].attribute;
    mix(hash(items[i].key));
    mix(a.shared_name.empty() ? static_cast<uint64_t>(a.handle.node()->id()) : hash(a.shared_name));
  }
  return digest;
}

// The variables of items [begin, end) as their attributes declare them,
// read off their handles' nodes only where an attribute has no shared_name.
// Takes the shared names and shapes out of the items.
StatusOr<ops::VariableDeclarations> TakeDeclarations(std::vector<RestoreItem>& items, size_t begin,
                                                     size_t end) {
  ops::VariableDeclarations d;
  d.shared_names.reserve(end - begin);
  d.dtypes.reserve(end - begin);
  d.shapes.reserve(end - begin);
  std::vector<Output> unnamed;
  std::vector<size_t> unnamed_at;
  for (size_t i = begin; i < end; ++i) {
    SaveableAttribute& a = items[i].attribute;
    if (a.shared_name.empty()) {
      unnamed.push_back(a.handle);
      unnamed_at.push_back(i - begin);
    }
    d.shared_names.push_back(std::move(a.shared_name));
    d.dtypes.push_back(a.dtype);
    d.shapes.push_back(std::move(a.shape));
  }
  if (unnamed.empty()) return d;
  CKFLOW_ASSIGN_OR_RETURN(ops::VariableDeclarations read, ops::DeclarationsOf(unnamed));
  for (size_t k = 0; k < unnamed.size(); ++k) {
    d.shared_names[unnamed_at[k]] = std::move(read.shared_names[k]);
    d.dtypes[unnamed_at[k]] = read.dtypes[k];
    d.shapes[unnamed_at[k]] = std::move(read.shapes[k]);
  }
  return d;
}

}  // namespace

bool RestoreOpRestores(const Output& op, const std::vector<RestoreItem>& items, size_t begin,
                       size_t end, CastRule cast) {
  const AttrMap& attrs = op.node()->attrs();
  const auto* keys = attrs.GetIf<std::vector<std::string>>("keys");
  const auto* names = attrs.GetIf<std::vector<std::string>>("shared_names");
  const auto* cast_name = attrs.GetIf<std::string>("cast");
  if (keys == nullptr || names == nullptr || keys->size() != end - begin ||
      (cast_name != nullptr ? *cast_name : CastRuleName(CastRule::kNone)) != CastRuleName(cast)) {
    return false;
  }
  for (size_t i = begin; i < end; ++i) {
    // The op's strings lie all over the heap: ask for them a few ahead.
    constexpr size_t kAhead = 4;
    if (i + kAhead < end) {
      __builtin_prefetch((*keys)[i + kAhead - begin].data());
      __builtin_prefetch((*names)[i + kAhead - begin].data());
    }
    const SaveableAttribute& a = items[i].attribute;
    const std::string* name = &a.shared_name;
    if (name->empty()) {
      name = a.handle.node()->attrs().GetIf<std::string>("shared_name");
      if (name == nullptr) return false;
    }
    if ((*keys)[i - begin] != items[i].key || (*names)[i - begin] != *name) return false;
  }
  return true;
}

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
    uint64_t digest = 0;
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
  // Each group's cached op or, for a new op, its variables' declarations:
  // both touch every handle node, cold in cache, and only read the graph
  // and the cache of ops (nothing is added to either until below). So they
  // run for all groups in parallel.
  ParallelFor(static_cast<int64_t>(groups.size()), 100000, [&](int64_t first, int64_t last) {
    for (int64_t b = first; b < last; ++b) {
      Group& g = groups[b];
      g.digest = Digest(items, g.begin, g.end, cast);
      if (auto it = restore_ops_.find(g.digest);
          it != restore_ops_.end() && RestoreOpRestores(it->second, items, g.begin, g.end, cast)) {
        g.op = it->second;
        continue;
      }
      g.variables = TakeDeclarations(items, g.begin, g.end);
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
    restore_ops_.insert_or_assign(g.digest, g.op);  // another list of the same digest goes
    ++built_;
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
