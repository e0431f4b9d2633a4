// save_child: the process the reliability tests kill. Saves SteppedModel
// checkpoints into a directory through a CheckpointManager, and with
// --kill-step sends itself SIGKILL before (or, with --kill-after, after)
// that step of the file layer: a crash at a known point of the save
// protocol. Prints "saved N" once save N is committed (for an async save,
// once Sync returned OK) and "steps K" (file-layer steps used) at the end.
//
//   save_child DIR MODE FIRST LAST [--kill-step K] [--kill-after] [--max-to-keep M]

#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_management.h"
#include "tests/checkpoint/recording_file_system.h"
#include "tests/checkpoint/stepped_model.h"

using namespace ckflow;

namespace {

int Fail(const Status& s) {
  std::fprintf(stderr, "save_child: %s\n", s.ToString().c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: save_child DIR MODE FIRST LAST [options]\n");
    return 2;
  }
  const std::string dir = argv[1];
  const std::string mode = argv[2];
  const int64_t first = std::atoll(argv[3]);
  const int64_t last = std::atoll(argv[4]);
  int kill_step = 0;
  bool kill_after = false;
  int max_to_keep = 2;
  for (int i = 5; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--kill-step") && i + 1 < argc) {
      kill_step = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--kill-after")) {
      kill_after = true;
    } else if (!std::strcmp(argv[i], "--max-to-keep") && i + 1 < argc) {
      max_to_keep = std::atoi(argv[++i]);
    }
  }
  StatusOr<SaveOptions> save_options = testing::SaveModeOptions(mode);
  if (!save_options.ok()) return Fail(save_options.status());

  testing::RecordingFileSystem fs;
  fs.SetHook([&](const testing::FsEvent& e, bool after) {
    if (e.step == kill_step && after == kill_after) {
      std::fprintf(stdout, "killed at %s%s\n", e.ToString().c_str(), after ? " (after)" : "");
      std::fflush(stdout);
      ::kill(::getpid(), SIGKILL);
    }
  });
  StatusOr<std::unique_ptr<testing::SteppedModel>> model =
      testing::SteppedModel::Create({.file_system = &fs});
  if (!model.ok()) return Fail(model.status());
  CheckpointManager::Options options;
  options.max_to_keep = max_to_keep;
  options.save_options = *save_options;
  StatusOr<std::unique_ptr<CheckpointManager>> manager =
      CheckpointManager::Create((*model)->checkpoint(), dir, options);
  if (!manager.ok()) return Fail(manager.status());
  for (int64_t step = first; step <= last; ++step) {
    if (Status s = (*model)->SetStep(step); !s.ok()) return Fail(s);
    StatusOr<std::string> saved = (*manager)->Save((*model)->session(), step);
    if (!saved.ok()) return Fail(saved.status());
    if (Status s = (*model)->checkpoint().Sync(); !s.ok()) return Fail(s);
    std::fprintf(stdout, "saved %lld\n", static_cast<long long>(step));
    std::fflush(stdout);
  }
  std::fprintf(stdout, "steps %d\n", fs.steps());
  return 0;
}
