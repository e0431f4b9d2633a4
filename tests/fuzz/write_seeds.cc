// Writes the fuzz targets' seed corpora: write_seeds TESTDATA_DIR OUT_DIR
// makes OUT_DIR/checkpoint and OUT_DIR/state (one file per seed) from the
// golden checkpoints in TESTDATA_DIR (tests/testdata) and ckflow's own.

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/fuzz/checkpoint_checks.h"

namespace {

namespace fs = std::filesystem;

int Write(const ckflow::StatusOr<std::vector<ckflow::fuzz::Seed>>& seeds, const fs::path& dir) {
  if (!seeds.ok()) {
    std::fprintf(stderr, "write_seeds: %s\n", seeds.status().ToString().c_str());
    return 1;
  }
  fs::create_directories(dir);
  for (const ckflow::fuzz::Seed& seed : *seeds) {
    std::ofstream out(dir / seed.name, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(seed.bytes.data()),
              static_cast<std::streamsize>(seed.bytes.size()));
    if (!out) {
      std::fprintf(stderr, "write_seeds: cannot write %s\n", (dir / seed.name).c_str());
      return 1;
    }
  }
  std::printf("%zu seeds in %s\n", seeds->size(), dir.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: write_seeds TESTDATA_DIR OUT_DIR\n");
    return 2;
  }
  const fs::path out = argv[2];
  const fs::path scratch = out / "scratch";
  fs::create_directories(scratch);
  int rc = Write(ckflow::fuzz::CheckpointSeeds(argv[1], scratch.string()), out / "checkpoint");
  if (rc == 0) rc = Write(ckflow::fuzz::StateSeeds(argv[1], scratch.string()), out / "state");
  fs::remove_all(scratch);
  return rc;
}
