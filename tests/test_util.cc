#include "tests/test_util.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <vector>

namespace ckflow::testing {
namespace fs = std::filesystem;

std::string SourceDir() {
  if (const char* env = std::getenv("CKFLOW_SOURCE_DIR")) return env;
  return CKFLOW_SOURCE_DIR;
}

std::string TestDataDir() { return SourceDir() + "/tests/testdata"; }

namespace {
struct TempDirs {
  std::mutex mu;
  std::vector<fs::path> dirs;
  ~TempDirs() {
    if (std::getenv("CKFLOW_KEEP_TEST_DIRS")) return;
    std::error_code ec;
    for (const fs::path& d : dirs) fs::remove_all(d, ec);
  }
};
TempDirs& Dirs() {
  static TempDirs dirs;
  return dirs;
}
}  // namespace

std::string NewTempDir(const std::string& tag) {
  std::random_device rd;
  fs::path base = fs::temp_directory_path();
  for (;;) {
    fs::path p = base / ("ckflow_" + tag + "_" + std::to_string(rd()));
    std::error_code ec;
    if (fs::create_directory(p, ec)) {
      std::lock_guard<std::mutex> lock(Dirs().mu);
      Dirs().dirs.push_back(p);
      return p.string();
    }
  }
}

int RunCommand(const std::string& command, std::string* output) {
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return -1;
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  int rc = pclose(pipe);
  if (output) *output = std::move(out);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

std::string ReadFileOrDie(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ADD_FAILURE() << "cannot read " << path;
    return "";
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool SameTensor(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || !(a.shape() == b.shape())) return false;
  if (a.dtype() == DT_STRING) {
    auto x = a.flat<std::string>();
    auto y = b.flat<std::string>();
    return std::equal(x.begin(), x.end(), y.begin());
  }
  return std::memcmp(a.raw_data(), b.raw_data(), a.TotalBytes()) == 0;
}

}  // namespace ckflow::testing
