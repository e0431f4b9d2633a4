// Soak: many save/restore cycles through a CheckpointManager(max_to_keep = 3),
// synchronous or async, printing memory, open file descriptors and the
// directory's file count at the start and the end. Fails (exit 1) if the
// descriptors or the files grew: both must be exactly flat. Memory is printed,
// not judged (the allocator keeps what it likes).
//
//   checkpoint_soak [--cycles 10000] [--mode sync|async] [--dir D] [--json PATH]
//
// --json PATH also writes the figures to PATH as one JSON object
// (bench/report.py).

#include <dirent.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_management.h"
#include "ops/array_ops.h"
#include "ops/variables.h"
#include "runtime/session.h"
#include "workloads/json_writer.h"

using namespace ckflow;

namespace {

class Module : public Trackable {
 public:
  std::string TypeName() const override { return "Module"; }
};

int Count(const std::string& dir) {
  int n = 0;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* e = ::readdir(d))
      n += std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, "..");
    ::closedir(d);
  }
  return n;
}

long RssKiB() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return -1;
}

struct Sample {
  long rss_kib;
  int fds;
  int files;
};

Sample Take(const std::string& dir) { return {RssKiB(), Count("/proc/self/fd") - 1, Count(dir)}; }

int Fail(const Status& s) {
  std::fprintf(stderr, "checkpoint_soak: %s\n", s.ToString().c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t cycles = 10000;
  std::string mode = "sync";
  std::string dir, json;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--cycles")) cycles = std::atoll(argv[i + 1]);
    if (!std::strcmp(argv[i], "--mode")) mode = argv[i + 1];
    if (!std::strcmp(argv[i], "--dir")) dir = argv[i + 1];
    if (!std::strcmp(argv[i], "--json")) json = argv[i + 1];
  }
  if (dir.empty()) {
    char tmpl[] = "/tmp/ckflow_soak_XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) return 2;
    dir = tmpl;
  }
  Scope scope = Scope::NewRootScope();
  auto model = std::make_shared<Module>();
  std::vector<std::shared_ptr<Variable>> vars;
  for (int i = 0; i < 4; ++i) {
    const std::string name = "v" + std::to_string(i);
    Tensor init(DT_FLOAT, TensorShape({1000 * (i + 1)}));
    for (float& x : init.flat<float>()) x = static_cast<float>(i);
    vars.push_back(model->Track(name, Variable::Create(scope, name, ops::Const(scope, init))));
  }
  Checkpoint checkpoint(scope, {{"model", model}});
  StatusOr<std::unique_ptr<Session>> session = Session::Create(scope.graph());
  if (!session.ok()) return Fail(session.status());
  StatusOr<LoadStatus> init = checkpoint.Restore(std::nullopt);
  if (!init.ok()) return Fail(init.status());
  if (Status s = init->InitializeOrRestore(**session); !s.ok()) return Fail(s);
  CheckpointManager::Options options;
  options.max_to_keep = 3;
  options.save_options.async = mode == "async";
  StatusOr<std::unique_ptr<CheckpointManager>> manager =
      CheckpointManager::Create(checkpoint, dir, options);
  if (!manager.ok()) return Fail(manager.status());

  // Warm up to the steady state (max_to_keep checkpoints on disk).
  Sample start{};
  for (int64_t c = 0; c < cycles + 5; ++c) {
    if (c == 5) {
      if (Status s = checkpoint.Sync(); !s.ok()) return Fail(s);
      start = Take(dir);
    }
    StatusOr<std::string> saved = (*manager)->Save(**session);
    if (!saved.ok()) return Fail(saved.status());
    if (Status s = checkpoint.Sync(); !s.ok()) return Fail(s);
    StatusOr<LoadStatus> restored = checkpoint.Restore(*saved);
    if (!restored.ok()) return Fail(restored.status());
    if (Status s = restored->RunRestoreOps(**session); !s.ok()) return Fail(s);
  }
  if (Status s = checkpoint.Sync(); !s.ok()) return Fail(s);
  const Sample end = Take(dir);
  std::printf("checkpoint_soak %s, %lld save+restore cycles, max_to_keep 3\n", mode.c_str(),
              static_cast<long long>(cycles));
  std::printf("  start: rss %ld KiB, fds %d, files %d\n", start.rss_kib, start.fds, start.files);
  std::printf("  end:   rss %ld KiB, fds %d, files %d\n", end.rss_kib, end.fds, end.files);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  const bool flat = end.fds <= start.fds && end.files <= start.files;
  if (!json.empty()) {
    auto sample = [](const Sample& s) {
      return workloads::JsonObject()
          .Set("rss_kib", static_cast<int64_t>(s.rss_kib))
          .Set("fds", s.fds)
          .Set("files", s.files);
    };
    const bool written = workloads::JsonObject()
                             .Set("mode", mode)
                             .Set("cycles", cycles)
                             .Set("max_to_keep", 3)
                             .Set("start", sample(start))
                             .Set("end", sample(end))
                             .Set("flat", flat)
                             .WriteTo(json);
    if (!written) {
      std::fprintf(stderr, "checkpoint_soak: cannot write %s\n", json.c_str());
      return 2;
    }
  }
  if (!flat) {
    std::printf("  FAILED: file descriptors or files grew\n");
    return 1;
  }
  return 0;
}
