// The collective steps of a group save (group.h), around what each member
// writes: before anything is written, every member agrees that its save can
// go ahead and on the save's number and timestamp (AgreeOnSave); after each
// member's part is ready, the parts are written, gathered, merged and
// committed by member 0, and agreed on again (FinishGroupWrite). What each
// member writes (its values, files and save ops) is the Saver's.
//
// Thread safety: as group.h (one thread at a time per group); an async
// save runs FinishGroupWrite on its writer's thread.

#ifndef CKFLOW_CHECKPOINT_GROUP_SAVE_INTERNAL_H_
#define CKFLOW_CHECKPOINT_GROUP_SAVE_INTERNAL_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/file_system.h"
#include "base/status.h"
#include "checkpoint/group.h"
#include "graph/graph.h"
#include "runtime/session.h"

namespace ckflow::internal {

// Collective, before a group save writes anything: every member has
// `local` OK (a pending save's error, the counter's increment) and the same
// save number `n`, and member 0 has removed the debris of dead saves, which
// includes other members' parts. Returns member 0's `now`, so every
// member's bookkeeping stamps the save alike. Without a group, `now` (or
// `local`'s error).
StatusOr<double> AgreeOnSave(const GroupOptions& options, const Status& local, int64_t n,
                             double now);

// One member's share of a group save, ready to run.
struct GroupWrite {
  Status prepared;  // why the feeds are not ready, if they are not
  std::vector<Feed> feeds;
  std::vector<Output> targets;  // empty: this member owns nothing
  std::string prefix;
  std::string part;                // "<prefix>_temp/part-<rank>-of-<size>"
  std::vector<std::string> files;  // the part's data files' prefixes (none, one or more)
  bool durable = false;
  std::function<Status()> on_written;
};

// The collective rest of a member's save: write the part, agree, and on
// member 0 merge every member's files into `write.prefix` and run
// `on_written` before the second agreement; the other members run it after
// (bookkeeping only). Every member returns the same status; an error leaves
// no part behind (member 0 removes them) and the previous checkpoint the
// latest.
Status FinishGroupWrite(Session& session, FileSystem* fs, const GroupOptions& options,
                        const GroupWrite& write);

}  // namespace ckflow::internal

#endif  // CKFLOW_CHECKPOINT_GROUP_SAVE_INTERNAL_H_
