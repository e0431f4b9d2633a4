// What the saver and the statuses share about groups (group.h): which
// member owns a value, and collectives over lists of strings.

#ifndef CKFLOW_CHECKPOINT_GROUP_INTERNAL_H_
#define CKFLOW_CHECKPOINT_GROUP_INTERNAL_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "checkpoint/group.h"

namespace ckflow::internal {

// The key save_counter is saved under: written by member 0 (with the object
// graph), read by every member, since each numbers the saves.
inline constexpr std::string_view kSaveCounterKey = "save_counter/.ATTRIBUTES/VARIABLE_VALUE";

// The variable a value belongs to, for placement: the object path of
// "<path>/.ATTRIBUTES/..." and of a slot's "<path>/.OPTIMIZER_SLOT/...", so
// slots go where their variable goes. ('.' in names is escaped as "..", so
// these markers cannot come from a name.)
std::string_view PlacementName(std::string_view key);

// Places values (key, bytes) on the group's members, remembering each
// variable's rank, so a slot that appears after its variable (restore is
// deferred until Minimize makes it) goes to the same member. The default
// placement carries each member's bytes from call to call.
class Owners {
 public:
  explicit Owners(const GroupOptions& options) : options_(options) {}
  // The rank of each value; InvalidArgument if the placement answers a rank
  // outside the group, or too few ranks.
  StatusOr<std::vector<int>> Place(const std::vector<std::pair<std::string, int64_t>>& values);

 private:
  const GroupOptions& options_;
  std::map<std::string, int, std::less<>> rank_of_;
  std::vector<int64_t> load_;
};

// Collective: every member's `lines`, in rank order, if `mine` is OK on
// every member; else AgreeOnStatus's error.
StatusOr<std::vector<std::vector<std::string>>> GatherIfAllOk(CheckpointGroup& group,
                                                              const Status& mine,
                                                              const std::vector<std::string>& lines,
                                                              GroupTimeout timeout);

// Collective: the lines present in every member's `lines` (as a value
// restored on one member counts as restored), in the order of member 0's.
StatusOr<std::vector<std::string>> LinesOnEveryMember(CheckpointGroup& group,
                                                      const std::vector<std::string>& lines,
                                                      GroupTimeout timeout);

}  // namespace ckflow::internal

#endif  // CKFLOW_CHECKPOINT_GROUP_INTERNAL_H_
