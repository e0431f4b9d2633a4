// ckflow fsck: the health of a checkpoint directory (checkpoint_health.h):
// the state file, every checkpoint it lists and every index in the
// directory, and what dead saves left behind; --repair makes the state file
// name only whole checkpoints and removes the leftovers.
//
//   $ ckflow fsck train/
//   checkpoint  state  bytes   verdict
//   ckpt-3      listed 4.1 kB  ok
//   ckpt-4      latest 4.1 kB  DAMAGED  DataLoss: train/ckpt-4.data-00000-of-00001: truncated ...
//   state file: its newest ... ; leftovers: ckpt-5_temp (2.0 kB)
//   DAMAGED: 1 of 2 checkpoints; `ckflow fsck --repair train/` makes ckpt-3 the latest

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>

#include "checkpoint/checkpoint_health.h"
#include "tools/commands.h"

namespace ckflow::tools {
namespace {

struct FsckOptions {
  std::string dir;
  bool checksums = false;
  bool repair = false;
};

void PrintTable(const CheckpointDirectoryHealth& health) {
  size_t width = 10;
  for (const CheckpointHealth& c : health.checkpoints) {
    width = std::max(width, std::string(Basename(c.path)).size());
  }
  char line[512];
  std::snprintf(line, sizeof(line), "%-*s  %-8s  %10s  %s\n", static_cast<int>(width), "checkpoint",
                "state", "bytes", "verdict");
  std::cout << line;
  for (const CheckpointHealth& c : health.checkpoints) {
    const char* listed = c.latest ? "latest" : c.listed ? "listed" : "unlisted";
    std::snprintf(line, sizeof(line), "%-*s  %-8s  %10s  ", static_cast<int>(width),
                  std::string(Basename(c.path)).c_str(), listed, HumanBytes(c.bytes).c_str());
    std::cout << line << (c.status.ok() ? std::string("ok") : "DAMAGED  " + c.status.ToString())
              << "\n";
  }
  if (!health.has_state_file) std::cout << "state file: none\n";
  for (const std::string& problem : health.state_problems) {
    std::cout << "state file: " << problem << "\n";
  }
  for (const std::string& name : health.debris)
    std::cout << "leftover of a dead save: " << name << "\n";
}

int RunFsck(const FsckOptions& o) {
  CheckpointDirectoryOptions options;
  options.verify = o.checksums ? CheckpointVerify::kChecksums : CheckpointVerify::kFiles;
  StatusOr<CheckpointDirectoryHealth> health = CheckCheckpointDirectory(o.dir, options);
  if (!health.ok()) return ReportError("fsck", health.status());
  PrintTable(*health);
  int damaged = 0;
  for (const CheckpointHealth& c : health->checkpoints) damaged += !c.status.ok();
  if (health->clean()) {
    std::cout << "OK: " << health->checkpoints.size() << " checkpoint"
              << (health->checkpoints.size() == 1 ? "" : "s") << ", all whole"
              << (o.checksums ? " (every checksum read)" : "") << "\n";
    return 0;
  }
  std::cout << "NOT CLEAN: " << damaged << " of " << health->checkpoints.size()
            << " checkpoints damaged, " << health->state_problems.size()
            << " state-file problem(s), " << health->debris.size() << " leftover(s) ("
            << HumanBytes(health->debris_bytes) << ")\n";
  const bool listed_damaged =
      std::any_of(health->checkpoints.begin(), health->checkpoints.end(),
                  [](const CheckpointHealth& c) { return c.listed && !c.status.ok(); });
  const bool repairable =
      listed_damaged || !health->state_problems.empty() || !health->debris.empty();
  if (!repairable) {
    std::cout << "nothing to repair: the state file names no damaged checkpoint, and fsck never "
                 "deletes one; remove or replace it yourself\n";
    return kExitBad;
  }
  if (!o.repair) {
    std::cout << "run `ckflow fsck --repair " << o.dir
              << "` to list only whole checkpoints and remove the leftovers (no checkpoint is "
                 "ever deleted)\n";
    return kExitBad;
  }
  StatusOr<CheckpointRepair> repair = RepairCheckpointDirectory(*health, options);
  if (!repair.ok()) return ReportError("fsck --repair", repair.status());
  if (repair->state_rewritten)
    std::cout << "repaired: the state file lists only whole checkpoints\n";
  if (repair->state_removed)
    std::cout << "repaired: removed the state file (no whole checkpoint)\n";
  if (repair->debris_files > 0) {
    std::cout << "repaired: removed " << repair->debris_files << " leftover file(s) ("
              << HumanBytes(repair->debris_bytes) << ")\n";
  }
  // The verdict is the directory's after the repair: damaged checkpoints
  // stay (and are reported), but nothing names them.
  StatusOr<CheckpointDirectoryHealth> after = CheckCheckpointDirectory(o.dir, options);
  if (!after.ok()) return ReportError("fsck", after.status());
  return after->state_problems.empty() && after->debris.empty() ? 0 : kExitBad;
}

}  // namespace

Command AddFsckCommand(CLI::App& app) {
  auto options = std::make_shared<FsckOptions>();
  CLI::App* sub = app.add_subcommand(
      "fsck",
      "Check a checkpoint directory: the state file, every checkpoint, leftovers of dead saves; "
      "exit 1 if anything is damaged");
  sub->add_option("dir", options->dir, "checkpoint directory")->required();
  sub->add_flag("--checksums", options->checksums,
                "also read every tensor and check its CRC32C (default: index and file sizes)");
  sub->add_flag("--repair", options->repair,
                "rewrite the state file to list only whole checkpoints (the newest whole one "
                "latest) and remove leftovers of dead saves; never deletes a checkpoint");
  return {sub, [options] { return RunFsck(*options); }};
}

}  // namespace ckflow::tools
