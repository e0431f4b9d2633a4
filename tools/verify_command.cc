// ckflow verify: read every tensor, check every checksum and bound.

#include <chrono>
#include <cstdio>
#include <iostream>
#include <vector>

#include "base/parallel.h"
#include "bundle/bundle_format.h"
#include "tools/commands.h"

namespace ckflow::tools {
namespace {

int RunVerify(const std::string& path) {
  const auto start = std::chrono::steady_clock::now();
  StatusOr<std::unique_ptr<BundleReader>> opened = OpenCheckpoint(path);
  if (!opened.ok()) {
    ReportError("verify", opened.status());
    return IsDataLoss(opened.status()) || IsInvalidArgument(opened.status()) ? kExitBad
                                                                             : kExitError;
  }
  const BundleReader& reader = **opened;
  const std::vector<BundleEntry>& entries = reader.entries();
  std::vector<Status> results(entries.size());
  // Entries are independent; each large one is also read in parallel chunks.
  ParallelFor(static_cast<int64_t>(entries.size()), 100000, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      if (!entries[i].is_sliced()) results[i] = reader.Verify(entries[i]);
    }
  });
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  uint64_t bytes = 0;
  int bad = 0, sliced = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    bytes += static_cast<uint64_t>(entries[i].size);
    if (entries[i].is_sliced()) ++sliced;
    if (results[i].ok()) continue;
    if (++bad <= 10) std::cerr << "ckflow verify: " << results[i] << "\n";
  }
  if (bad > 0) {
    std::cout << "FAILED: " << bad << " of " << entries.size()
              << " tensors are bad; the first is named above\n";
    return kExitBad;
  }
  std::cout << "OK: " << entries.size() << (entries.size() == 1 ? " tensor, " : " tensors, ")
            << bytes << " bytes (" << HumanBytes(bytes) << ") in " << reader.num_shards()
            << (reader.num_shards() == 1 ? " shard" : " shards")
            << "; every checksum and bound checks out";
  if (sliced) std::cout << " (" << sliced << " partitioned entries hold no data)";
  char rate[96];
  std::snprintf(rate, sizeof(rate), "\nread in %.3f s, %.2f GB/s\n", seconds,
                seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0.0);
  std::cout << rate;
  return 0;
}

}  // namespace

Command AddVerifyCommand(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  CLI::App* sub = app.add_subcommand(
      "verify", "Read every tensor and check every checksum and bound; exit 1 if any is bad");
  sub->add_option("path", *path, "checkpoint prefix, .index file or directory")->required();
  return {sub, [path] { return RunVerify(*path); }};
}

}  // namespace ckflow::tools
