// Group saves (distributed/) measured:
//
//   group_bench merge [--min-keys N] [--max-keys N]
//       MergeBundles of P parts holding K keys in all (P = 2 .. 64, K = 1k ..
//       1M, 4-byte values), beside its baseline in the same run: opening
//       and checking the same parts' indexes (BundleReader::Open), the
//       reading half of a merge. Then K = 10k at 4 B and at 16 KiB per key:
//       the merge moves data files by rename, so its cost must not grow
//       with the bytes.
//
//   mpirun -np R group_bench save [--mib 1024] [--count 64]
//       A model of `count` float variables, `mib` MiB in all, saved by the R
//       ranks as one group (each writes its part, rank 0 merges) and
//       restored by them (each reads its own), beside the baseline measured
//       in the same run: rank 0 alone saving and restoring the same model as
//       a plain single-process checkpoint.
//
// Times are the best of 3 runs; ratios are to the baseline. With --json PATH
// the figures are also written to PATH as one JSON object (by rank 0 under
// MPI), which bench/report.py reads.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "bundle/bundle_reader.h"
#include "bundle/bundle_writer.h"
#include "bundle/merge.h"
#include "checkpoint/checkpoint.h"
#include "distributed/worker_group.h"
#include "ops/array_ops.h"
#include "ops/variables.h"
#include "workloads/json_writer.h"
#include "workloads/model_program.h"

namespace ckflow {
namespace {

double Seconds(const std::function<void()>& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void Check(const Status& s, const char* what) {
  if (s.ok()) return;
  std::fprintf(stderr, "group_bench: %s: %s\n", what, s.ToString().c_str());
  std::exit(1);
}

std::string TempDir() {
  std::string dir = (std::filesystem::temp_directory_path() / "ckflow_group_bench_XXXXXX").string();
  if (mkdtemp(dir.data()) == nullptr) std::exit(1);
  return dir;
}

// P parts of K keys in all, key i in part i % P, `bytes` per value.
std::vector<std::string> WriteParts(const std::string& dir, int parts, int64_t keys,
                                    int64_t bytes) {
  std::vector<std::string> prefixes;
  Tensor value = *Tensor::Allocate(DT_FLOAT, TensorShape({bytes / 4}));
  std::fill_n(static_cast<char*>(value.raw_data()), value.TotalBytes(), 1);
  for (int p = 0; p < parts; ++p) {
    char name[64];
    std::snprintf(name, sizeof(name), "/ckpt_temp/part-%05d-of-%05d", p, parts);
    prefixes.push_back(dir + name);
    auto writer = BundleWriter::Create(prefixes.back());
    Check(writer.status(), "creating a part");
    for (int64_t k = p; k < keys; k += parts) {
      char key[64];
      std::snprintf(key, sizeof(key), "model/v%08lld/.ATTRIBUTES/VARIABLE_VALUE",
                    static_cast<long long>(k));
      Check((*writer)->Add(key, value), "adding a value");
    }
    Check((*writer)->Finish(), "finishing a part");
  }
  return prefixes;
}

using workloads::JsonArray;
using workloads::JsonObject;

void MergeRow(int parts, int64_t keys, int64_t bytes, JsonArray& rows) {
  double best_merge = 1e30, best_read = 1e30;
  for (int run = 0; run < 3; ++run) {
    const std::string dir = TempDir();
    std::vector<std::string> prefixes = WriteParts(dir, parts, keys, bytes);
    best_read = std::min(best_read, Seconds([&] {
                           for (const std::string& p : prefixes) {
                             Check(BundleReader::Open(p).status(), "reading a part");
                           }
                         }));
    best_merge = std::min(
        best_merge, Seconds([&] { Check(MergeBundles(prefixes, dir + "/ckpt"), "merging"); }));
    std::filesystem::remove_all(dir);
  }
  std::printf("%6d %9lld %8lld %10.1f %10.1f %8.2f %8.3f\n", parts, static_cast<long long>(keys),
              static_cast<long long>(bytes), best_merge * 1e3, best_read * 1e3,
              best_merge / best_read, best_merge * 1e6 / static_cast<double>(keys));
  std::fflush(stdout);
  rows.Add(JsonObject()
               .Set("parts", parts)
               .Set("keys", keys)
               .Set("bytes_per_key", bytes)
               .Set("merge_s", best_merge)
               .Set("read_s", best_read));
}

void WriteJson(const JsonObject& json, const std::string& path) {
  if (path.empty() || json.WriteTo(path)) return;
  std::fprintf(stderr, "group_bench: cannot write %s\n", path.c_str());
  std::exit(1);
}

void Merge(int64_t min_keys, int64_t max_keys, const std::string& json) {
  std::printf("%6s %9s %8s %10s %10s %8s %8s\n", "parts", "keys", "B/key", "merge ms", "read ms",
              "ratio", "us/key");
  JsonArray rows;
  for (int64_t keys = min_keys; keys <= max_keys; keys *= 10) {
    for (int parts : {2, 8, 64}) MergeRow(parts, keys, 4, rows);
  }
  for (int64_t bytes : {int64_t{4}, int64_t{16384}}) MergeRow(8, 10000, bytes, rows);
  WriteJson(JsonObject().Set("mode", "merge").Set("runs", 3).Set("rows", rows), json);
}

// Saves and restores `count` variables of `mib` MiB in all; returns the
// best (save, restore) seconds. With a group, collectively.
std::pair<double, double> SaveRestore(CheckpointGroup* group, const std::string& dir, int count,
                                      int64_t mib) {
  const int64_t elements = mib * (int64_t{1} << 20) / 4 / count;
  double best_save = 1e30, best_restore = 1e30;
  for (int run = 0; run < 3; ++run) {
    auto save = workloads::ModelProgram::Synthetic(count, elements, 1.f, /*initialize=*/true);
    Check(save.status(), "building the model");
    CheckpointOptions options;
    options.group.group = group;
    Checkpoint checkpoint((*save)->scope, {{"model", (*save)->model}}, options);
    const std::string prefix = dir + "/run" + std::to_string(run);
    best_save = std::min(best_save, Seconds([&] {
                           Check(checkpoint.Write(prefix, *(*save)->session).status(), "saving");
                         }));
    auto load = workloads::ModelProgram::Synthetic(count, elements, 2.f, /*initialize=*/false);
    Check(load.status(), "building the model");
    Checkpoint restore((*load)->scope, {{"model", (*load)->model}}, options);
    best_restore = std::min(best_restore, Seconds([&] {
                              auto status = restore.Restore(prefix);
                              Check(status.status(), "restoring");
                              Check(status->InitializeOrRestore(*(*load)->session), "restoring");
                            }));
  }
  return {best_save, best_restore};
}

void Save(int64_t mib, int count, const std::string& json) {
  auto workers = WorkerGroup::World();
  Check(workers.status(), "MPI");
  WorkerGroup& group = **workers;
  std::string dir = group.rank() == 0 ? TempDir() : "";
  dir = (*group.AllGather(dir, kDefaultGroupTimeout))[0];
  std::pair<double, double> alone{0, 0};
  if (group.rank() == 0) alone = SaveRestore(nullptr, dir + "/alone", count, mib);
  Check(group.Barrier(), "barrier");
  std::pair<double, double> together = SaveRestore(&group, dir + "/group", count, mib);
  if (group.rank() == 0) {
    const double gib = static_cast<double>(mib) / 1024;
    std::printf(
        "ranks %d, %lld MiB in %d variables: save %.3f s (%.2f GiB/s, %.2fx one process), "
        "restore %.3f s (%.2f GiB/s, %.2fx one process)\n",
        group.size(), static_cast<long long>(mib), count, together.first, gib / together.first,
        alone.first / together.first, together.second, gib / together.second,
        alone.second / together.second);
    std::filesystem::remove_all(dir);
    WriteJson(JsonObject()
                  .Set("mode", "save")
                  .Set("runs", 3)
                  .Set("ranks", group.size())
                  .Set("mib", mib)
                  .Set("count", count)
                  .Set("save_s", together.first)
                  .Set("restore_s", together.second)
                  .Set("alone_save_s", alone.first)
                  .Set("alone_restore_s", alone.second),
              json);
  }
}

}  // namespace
}  // namespace ckflow

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  int64_t mib = 1024, min_keys = 1000, max_keys = 1000000;
  int count = 64;
  std::string json;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--mib") mib = std::atoll(argv[i + 1]);
    if (flag == "--count") count = std::atoi(argv[i + 1]);
    if (flag == "--min-keys") min_keys = std::max<int64_t>(1, std::atoll(argv[i + 1]));
    if (flag == "--max-keys") max_keys = std::atoll(argv[i + 1]);
    if (flag == "--json") json = argv[i + 1];
  }
  if (mode == "merge") {
    ckflow::Merge(min_keys, max_keys, json);
  } else if (mode == "save") {
    ckflow::Save(mib, count, json);
  } else {
    std::fprintf(
        stderr,
        "usage: group_bench merge [--min-keys N] [--max-keys N] [--json PATH] | save [--mib M] "
        "[--count C] [--json PATH]\n");
    return 2;
  }
  return 0;
}
