#include "checkpoint/group.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "checkpoint/group_internal.h"

namespace ckflow {
namespace {

// Length-prefixed strings, so any bytes (keys may hold NUL) survive.
std::string Encode(const std::vector<std::string>& strings) {
  std::string out;
  for (const std::string& s : strings) {
    const uint64_t n = s.size();
    out.append(reinterpret_cast<const char*>(&n), sizeof(n));
    out += s;
  }
  return out;
}

StatusOr<std::vector<std::string>> Decode(std::string_view in) {
  std::vector<std::string> strings;
  while (!in.empty()) {
    uint64_t n = 0;
    if (in.size() < sizeof(n)) return InternalError("group message truncated");
    std::memcpy(&n, in.data(), sizeof(n));
    in.remove_prefix(sizeof(n));
    if (in.size() < n) return InternalError("group message truncated");
    strings.emplace_back(in.substr(0, n));
    in.remove_prefix(n);
  }
  return strings;
}

// Greedy, largest first, onto `load` (bytes per rank so far).
std::vector<int> BalanceOnto(const std::vector<PlacementItem>& items, std::vector<int64_t>& load) {
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return items[a].bytes > items[b].bytes; });
  std::vector<int> ranks(items.size(), 0);
  for (size_t i : order) {
    const int r = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    ranks[i] = r;
    load[r] += std::max<int64_t>(items[i].bytes, 1);  // values of no size still spread
  }
  return ranks;
}

}  // namespace

Status CheckpointGroup::StartMax(std::vector<int64_t> mine, GroupTimeout timeout) {
  if (pending_max_) return FailedPreconditionError("CheckpointGroup::StartMax: one is pending");
  std::string bytes(mine.size() * sizeof(int64_t), '\0');
  std::memcpy(bytes.data(), mine.data(), bytes.size());
  StatusOr<std::vector<std::string>> all = AllGather(bytes, timeout);
  if (!all.ok()) {
    pending_max_ = all.status();
    return OkStatus();  // FinishMax returns the error, as a background one would
  }
  for (size_t r = 0; r < all->size(); ++r) {
    const std::string& theirs = (*all)[r];
    if (theirs.size() != bytes.size()) {
      pending_max_ = InvalidArgumentError("CheckpointGroup::StartMax: rank ", r, " gave ",
                                          theirs.size() / sizeof(int64_t), " values, rank ", rank(),
                                          " ", mine.size());
      return OkStatus();
    }
    for (size_t i = 0; i < mine.size(); ++i) {
      int64_t v = 0;
      std::memcpy(&v, theirs.data() + i * sizeof(int64_t), sizeof(v));
      mine[i] = std::max(mine[i], v);
    }
  }
  pending_max_ = std::move(mine);
  return OkStatus();
}

StatusOr<std::vector<int64_t>> CheckpointGroup::FinishMax(GroupTimeout) {
  if (!pending_max_) return FailedPreconditionError("CheckpointGroup::FinishMax: none is pending");
  StatusOr<std::vector<int64_t>> result = std::move(*pending_max_);
  pending_max_.reset();
  return result;
}

Status AgreeOnStatus(CheckpointGroup& group, const Status& mine, GroupTimeout timeout) {
  return internal::GatherIfAllOk(group, mine, {}, timeout).status();
}

std::vector<int> BalancedByBytes(const std::vector<PlacementItem>& items, int ranks) {
  std::vector<int64_t> load(std::max(ranks, 1), 0);
  return BalanceOnto(items, load);
}

namespace internal {

std::string_view PlacementName(std::string_view key) {
  for (std::string_view marker : {"/.OPTIMIZER_SLOT/", "/.ATTRIBUTES/"}) {
    const size_t at = key.find(marker);
    if (at != std::string_view::npos) return key.substr(0, at);
  }
  return key;
}

StatusOr<std::vector<int>> Owners::Place(
    const std::vector<std::pair<std::string, int64_t>>& values) {
  const int size = options_.group->size();
  if (load_.empty()) load_.assign(size, 0);
  // The variables not placed before, with their slots' bytes, by name.
  std::map<std::string, int64_t, std::less<>> fresh;
  for (const auto& [key, bytes] : values) {
    const std::string_view name = PlacementName(key);
    if (key == kSaveCounterKey || rank_of_.count(name)) continue;
    fresh[std::string(name)] += bytes;
  }
  if (!fresh.empty()) {
    std::vector<PlacementItem> items;
    items.reserve(fresh.size());
    for (const auto& [name, bytes] : fresh) items.push_back({name, bytes});
    const std::vector<int> ranks =
        options_.placement ? options_.placement(items, size) : BalanceOnto(items, load_);
    if (ranks.size() != items.size()) {
      return InvalidArgumentError("checkpoint group: the placement gave ", ranks.size(),
                                  " ranks for ", items.size(), " variables");
    }
    for (size_t i = 0; i < items.size(); ++i) {
      if (ranks[i] < 0 || ranks[i] >= size) {
        return InvalidArgumentError("checkpoint group: the placement put '", items[i].name,
                                    "' on rank ", ranks[i], " of a group of ", size);
      }
      rank_of_.emplace(items[i].name, ranks[i]);
    }
  }
  std::vector<int> owners;
  owners.reserve(values.size());
  for (const auto& [key, bytes] : values) {
    owners.push_back(key == kSaveCounterKey ? 0 : rank_of_.find(PlacementName(key))->second);
  }
  return owners;
}

StatusOr<std::vector<std::vector<std::string>>> GatherIfAllOk(CheckpointGroup& group,
                                                              const Status& mine,
                                                              const std::vector<std::string>& lines,
                                                              GroupTimeout timeout) {
  std::vector<std::string> message{mine.ok() ? std::string()
                                             : std::to_string(static_cast<int>(mine.code())) + ":" +
                                                   std::string(mine.message())};
  message.insert(message.end(), lines.begin(), lines.end());
  CKFLOW_ASSIGN_OR_RETURN(std::vector<std::string> all, group.AllGather(Encode(message), timeout));
  std::vector<std::vector<std::string>> gathered;
  gathered.reserve(all.size());
  for (size_t r = 0; r < all.size(); ++r) {
    CKFLOW_ASSIGN_OR_RETURN(std::vector<std::string> theirs, Decode(all[r]));
    if (theirs.empty()) return InternalError("group message from rank ", r, " is empty");
    const std::string& error = theirs[0];
    if (!error.empty()) {
      const size_t colon = error.find(':');
      const int code = std::atoi(error.substr(0, colon).c_str());
      return Status(static_cast<StatusCode>(code), "rank " + std::to_string(r) + " of " +
                                                       std::to_string(all.size()) + ": " +
                                                       error.substr(colon + 1));
    }
    theirs.erase(theirs.begin());
    gathered.push_back(std::move(theirs));
  }
  return gathered;
}

StatusOr<std::vector<std::string>> LinesOnEveryMember(CheckpointGroup& group,
                                                      const std::vector<std::string>& lines,
                                                      GroupTimeout timeout) {
  CKFLOW_ASSIGN_OR_RETURN(std::vector<std::string> all, group.AllGather(Encode(lines), timeout));
  std::vector<std::set<std::string>> others;
  for (size_t r = 1; r < all.size(); ++r) {
    CKFLOW_ASSIGN_OR_RETURN(std::vector<std::string> theirs, Decode(all[r]));
    others.emplace_back(theirs.begin(), theirs.end());
  }
  CKFLOW_ASSIGN_OR_RETURN(std::vector<std::string> common, Decode(all[0]));
  std::erase_if(common, [&](const std::string& line) {
    return std::any_of(others.begin(), others.end(),
                       [&](const std::set<std::string>& s) { return !s.count(line); });
  });
  return common;
}

}  // namespace internal
}  // namespace ckflow
