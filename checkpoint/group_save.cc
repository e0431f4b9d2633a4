#include <cstdlib>

#include "bundle/merge.h"
#include "checkpoint/group_internal.h"
#include "checkpoint/group_save_internal.h"
#include "checkpoint/save_files_internal.h"

namespace ckflow::internal {

StatusOr<double> AgreeOnSave(const GroupOptions& options, const Status& local, int64_t n,
                             double now) {
  CheckpointGroup* group = options.group;
  if (group == nullptr) {
    CKFLOW_RETURN_IF_ERROR(local);
    return now;
  }
  CKFLOW_RETURN_IF_ERROR(AgreeOnStatus(*group, local, options.timeout));
  CKFLOW_ASSIGN_OR_RETURN(
      std::vector<std::string> all,
      group->AllGather(std::to_string(n) + " " + std::to_string(now), options.timeout));
  for (size_t r = 1; r < all.size(); ++r) {
    if (all[r].substr(0, all[r].find(' ')) != all[0].substr(0, all[0].find(' '))) {
      return FailedPreconditionError("checkpoint group: rank 0 saves number ",
                                     all[0].substr(0, all[0].find(' ')), ", rank ", r, " number ",
                                     all[r].substr(0, all[r].find(' ')),
                                     " (every member must restore the same checkpoint, or none)");
    }
  }
  return std::strtod(all[0].c_str() + all[0].find(' ') + 1, nullptr);
}

Status FinishGroupWrite(Session& session, FileSystem* fs, const GroupOptions& options,
                        const GroupWrite& write) {
  CheckpointGroup& group = *options.group;
  const bool merges = group.rank() == 0;
  Status wrote = write.prepared;
  if (wrote.ok() && !write.targets.empty()) {
    wrote = session.Run(write.feeds, {}, write.targets, {.file_system = fs}).status();
  }
  if (!wrote.ok()) wrote = wrote.WithContext("writing '" + write.part + "'");
  const CheckpointNaming naming{std::string(Basename(write.prefix)), /*numbered=*/false};
  StatusOr<std::vector<std::vector<std::string>>> files =
      GatherIfAllOk(group, wrote, write.files, options.timeout);
  if (!files.ok()) {
    // Past the barrier every part is written or abandoned: the parts go,
    // and the previous checkpoint was never touched.
    if (merges) RemoveSaveDebris(fs, Dirname(write.prefix), naming).status().IgnoreError();
    return files.status().WithContext("saving checkpoint '" + write.prefix + "'");
  }
  Status committed;
  if (merges) {
    std::vector<std::string> parts;
    for (const std::vector<std::string>& theirs : *files) {
      parts.insert(parts.end(), theirs.begin(), theirs.end());
    }
    committed = MergeBundles(parts, write.prefix,
                             {.fs = fs, .delete_old_dirs = true, .sync = write.durable});
    if (!committed.ok()) {
      RemoveSaveDebris(fs, Dirname(write.prefix), naming).status().IgnoreError();
      committed = committed.WithContext("merging the parts");
    } else if (write.on_written) {
      committed = write.on_written();
    }
  }
  Status agreed = AgreeOnStatus(group, committed, options.timeout);
  if (agreed.ok() && !merges && write.on_written) agreed = write.on_written();
  return agreed.ok() ? agreed : agreed.WithContext("saving checkpoint '" + write.prefix + "'");
}

}  // namespace ckflow::internal
