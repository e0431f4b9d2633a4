// The ckflow CLI on the golden checkpoints TensorFlow wrote (tests/testdata/),
// against golden outputs under tests/tools/golden/ (reviewed renderings of
// those files). CKFLOW_UPDATE_GOLDENS=1 rewrites them instead of comparing.

#include <gtest/gtest.h>
#include <sys/vfs.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "bundle/checkpoint_state.h"
#include "tests/bundle/bundle_test_util.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

struct CliCase {
  std::string golden;  // file under golden/
  std::string args;    // "$T" stands for tests/testdata
  int exit_code;
};

void PrintTo(const CliCase& c, std::ostream* os) { *os << "ckflow " << c.args; }

// Replaces every `from` in `s` by `to`.
std::string ReplaceAll(std::string s, const std::string& from, const std::string& to) {
  for (size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size()) {
    s.replace(pos, from.size(), to);
  }
  return s;
}

// Output without what depends on the machine: the checkout's location and
// verify's timing line.
std::string Normalize(const std::string& output) {
  std::istringstream in(ReplaceAll(output, testing::TestDataDir(), "$T"));
  std::string line, out;
  while (std::getline(in, line)) {
    if (line.rfind("read in ", 0) == 0) continue;
    out += line + "\n";
  }
  return out;
}

class CliTest : public ::testing::TestWithParam<CliCase> {};

TEST_P(CliTest, MatchesGolden) {
  const CliCase& c = GetParam();
  std::string output;
  const int rc = testing::RunCommand(
      std::string(CKFLOW_CLI) + " " + ReplaceAll(c.args, "$T", testing::TestDataDir()) + " 2>&1",
      &output);
  EXPECT_EQ(rc, c.exit_code) << output;
  const std::string golden_path = testing::SourceDir() + "/tests/tools/golden/" + c.golden;
  if (std::getenv("CKFLOW_UPDATE_GOLDENS")) {
    testing::WriteFileOrDie(golden_path, Normalize(output));
    return;
  }
  EXPECT_EQ(Normalize(output), testing::ReadFileOrDie(golden_path)) << golden_path;
}

const CliCase kCases[] = {
    {"tf1_saver_small.inspect.txt", "inspect $T/tf1_saver_small/model --values", 0},
    {"tf1_saver_small.inspect.json", "inspect $T/tf1_saver_small/model.index --json --values", 0},
    {"tf1_saver_small.tree.txt", "tree $T/tf1_saver_small", 2},
    {"tf1_saver_sharded.inspect.txt", "inspect $T/tf1_saver_sharded", 0},
    {"tf1_saver_sharded.inspect.json", "inspect $T/tf1_saver_sharded --json", 0},
    {"tf1_saver_sharded.verify.txt", "verify $T/tf1_saver_sharded", 0},
    {"tf1_partitioned.inspect.txt", "inspect $T/tf1_partitioned --values", 0},
    {"every_dtype.inspect.txt", "inspect $T/every_dtype/ckpt --values", 0},
    {"string_tensors.inspect.txt", "inspect $T/string_tensors/foo --values", 0},
    {"string_tensors.inspect.json", "inspect $T/string_tensors/foo --json --values", 0},
    {"cyclic_module.tree.txt", "tree $T/cyclic_module/ckpt", 0},
    {"cyclic_module.tree.json", "tree $T/cyclic_module/ckpt --json", 0},
    {"cyclic_module.dot", "dot $T/cyclic_module/ckpt", 0},
    {"saved_model_variables.inspect.txt", "inspect $T/saved_model_variables/variables --values", 0},
    {"saved_model_variables.tree.txt", "tree $T/saved_model_variables/variables", 0},
    {"eager_optimizer_slots.inspect.txt", "inspect $T/eager_optimizer_slots --values", 0},
    {"eager_optimizer_slots.tree.txt", "tree $T/eager_optimizer_slots", 0},
    {"eager_optimizer_slots.verify.txt", "verify $T/eager_optimizer_slots", 0},
    {"graph_checkpoint.tree.txt", "tree $T/graph_checkpoint", 0},
    {"keras_save_weights.tree.txt", "tree $T/keras_save_weights", 0},
    {"two_shards.inspect.txt", "inspect $T/two_shards/ckpt --values", 0},
    {"two_shards.tree.txt", "tree $T/two_shards/ckpt", 0},
    {"sliced_values.inspect.txt", "inspect $T/sliced_values/ckpt", 0},
    {"sliced_values.verify.txt", "verify $T/sliced_values/ckpt", 0},
    {"uninitialized_variable.tree.txt", "tree $T/uninitialized_variable/ckpt", 0},
    {"uninitialized_variable.dot", "dot $T/uninitialized_variable/ckpt", 0},
    {"diff.cyclic_vs_two_shards.txt", "diff $T/cyclic_module/ckpt $T/two_shards/ckpt", 1},
    {"diff.manager_checkpoints.txt",
     "diff $T/checkpoint_manager/ckpt-2 $T/checkpoint_manager/ckpt-3", 1},
    {"diff.same.txt", "diff $T/eager_optimizer_slots $T/eager_optimizer_slots/ckpt-1.index", 0},
    {"missing.inspect.txt", "inspect $T/no_such_checkpoint", 2},
};

INSTANTIATE_TEST_SUITE_P(TestData, CliTest, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<CliCase>& p) {
                           std::string name;
                           for (char ch : p.param.golden) name += std::isalnum(ch) ? ch : '_';
                           return name;
                         });

TEST(Cli, JsonGoldensAreValidJson) {
  const std::string dir = testing::SourceDir() + "/tests/tools/golden";
  int checked = 0;
  for (const std::string& name : testing::ListDir(dir)) {
    if (!name.ends_with(".json")) continue;
    std::string output;
    EXPECT_EQ(testing::RunCommand("python3 -m json.tool '" + dir + "/" + name + "' >/dev/null 2>&1",
                                  &output),
              0)
        << name;
    ++checked;
  }
  EXPECT_GE(checked, 4);
}

// A checkpoint that changed: verify names the bad key and fails; diff
// reports the value difference.
TEST(Cli, VerifyAndDiffCatchAChangedTensor) {
  const std::string dir = testing::NewTempDir("cli");
  CKFLOW_ASSERT_OK(testing::WriteBundle(dir + "/a", {{"w", Tensor::FromVector<float>({1, 2, 3})},
                                                     {"n", Tensor::Scalar(int64_t{5})}}));
  CKFLOW_ASSERT_OK(testing::WriteBundle(dir + "/b", {{"w", Tensor::FromVector<float>({1, 2.5f, 3})},
                                                     {"n", Tensor::Scalar(int64_t{5})}}));
  std::string output;
  EXPECT_EQ(
      testing::RunCommand(std::string(CKFLOW_CLI) + " diff " + dir + "/a " + dir + "/b", &output),
      1);
  EXPECT_EQ(output,
            "! w  float32[3]  1 of 3 values differ, max abs difference 0.5\n"
            "0 only in A, 0 only in B, 0 with another dtype or shape, 1 with other values, "
            "1 identical\n");
  std::string data = testing::ReadFileOrDie(dir + "/a.data-00000-of-00001");
  data[13] ^= 1;  // in "n" (bytes 12..19)
  testing::WriteFileOrDie(dir + "/a.data-00000-of-00001", data);
  EXPECT_EQ(testing::RunCommand(std::string(CKFLOW_CLI) + " verify " + dir + "/a 2>&1", &output),
            1);
  EXPECT_NE(output.find("key 'n'"), std::string::npos) << output;
  EXPECT_NE(output.find("checksum mismatch"), std::string::npos) << output;
  EXPECT_NE(output.find("FAILED: 1 of 2 tensors"), std::string::npos) << output;
}

// fsck: a clean directory exits 0; one whose newest checkpoint lost the
// end of its data file, with a dead save's leftovers, exits 1 naming both;
// --repair lists only the whole ones and removes the leftovers, deleting no
// checkpoint.
TEST(Cli, FsckReportsAndRepairsADamagedDirectory) {
  const std::string dir = testing::NewTempDir("fsck");
  for (int n = 1; n <= 3; ++n) {
    CKFLOW_ASSERT_OK(
        testing::WriteBundle(dir + "/ckpt-" + std::to_string(n),
                             {{"w", Tensor::FromVector<float>({1, 2, 3, static_cast<float>(n)})}}));
  }
  CKFLOW_ASSERT_OK(
      UpdateCheckpointState(dir, "ckpt-3", {.all_model_checkpoint_paths = {"ckpt-1", "ckpt-2"}}));
  const std::string fsck = std::string(CKFLOW_CLI) + " fsck ";
  std::string output;
  EXPECT_EQ(testing::RunCommand(fsck + "--checksums " + dir + " 2>&1", &output), 0) << output;
  EXPECT_NE(output.find("OK: 3 checkpoints, all whole"), std::string::npos) << output;

  const std::string data = dir + "/ckpt-3.data-00000-of-00001";
  testing::WriteFileOrDie(data, testing::ReadFileOrDie(data).substr(0, 5));
  testing::WriteFileOrDie(dir + "/ckpt-4.index.tempstate77", "x");
  EXPECT_EQ(testing::RunCommand(fsck + dir + " 2>&1", &output), 1) << output;
  EXPECT_NE(output.find("ckpt-3      latest"), std::string::npos) << output;
  EXPECT_NE(output.find("DAMAGED  DataLoss"), std::string::npos) << output;
  EXPECT_NE(output.find("truncated"), std::string::npos) << output;
  EXPECT_NE(output.find("leftover of a dead save: ckpt-4.index.tempstate77"), std::string::npos)
      << output;
  EXPECT_NE(output.find("NOT CLEAN: 1 of 3 checkpoints damaged"), std::string::npos) << output;

  EXPECT_EQ(testing::RunCommand(fsck + "--repair " + dir + " 2>&1", &output), 0) << output;
  EXPECT_NE(output.find("repaired: the state file lists only whole checkpoints"), std::string::npos)
      << output;
  EXPECT_NE(output.find("repaired: removed 1 leftover file(s)"), std::string::npos) << output;
  StatusOr<std::optional<CheckpointStateData>> state = ReadCheckpointState(dir);
  ASSERT_TRUE(state.ok() && state->has_value()) << state.status();
  EXPECT_EQ((*state)->model_checkpoint_path, "ckpt-2");
  EXPECT_EQ((*state)->all_model_checkpoint_paths, (std::vector<std::string>{"ckpt-1", "ckpt-2"}));
  EXPECT_TRUE(testing::ReadFileOrDie(dir + "/ckpt-3.index").size() > 0);  // kept
  // The damaged checkpoint is still reported, now unlisted.
  EXPECT_EQ(testing::RunCommand(fsck + dir + " 2>&1", &output), 1) << output;
  EXPECT_NE(output.find("ckpt-3      unlisted"), std::string::npos) << output;
  EXPECT_NE(output.find("nothing to repair"), std::string::npos) << output;
  EXPECT_EQ(testing::RunCommand(fsck + dir + "/nope 2>&1", &output), 2) << output;
}

// A flipped bit passes the file checks; --checksums reads every value and
// names the key whose CRC fails.
TEST(Cli, FsckChecksumsFindAFlippedBit) {
  const std::string dir = testing::NewTempDir("fsck");
  CKFLOW_ASSERT_OK(testing::WriteBundle(dir + "/ckpt-1", {{"w", Tensor::FromVector<float>({1, 2})},
                                                          {"n", Tensor::Scalar(int64_t{5})}}));
  CKFLOW_ASSERT_OK(UpdateCheckpointState(dir, "ckpt-1"));
  const std::string data = dir + "/ckpt-1.data-00000-of-00001";
  std::string bytes = testing::ReadFileOrDie(data);
  bytes[1] ^= 1;  // in "w", written first (bytes 0..7)
  testing::WriteFileOrDie(data, bytes);
  const std::string fsck = std::string(CKFLOW_CLI) + " fsck ";
  std::string output;
  EXPECT_EQ(testing::RunCommand(fsck + dir + " 2>&1", &output), 0) << output;
  EXPECT_EQ(testing::RunCommand(fsck + "--checksums " + dir + " 2>&1", &output), 1) << output;
  EXPECT_NE(output.find("ckpt-1      latest"), std::string::npos) << output;
  EXPECT_NE(output.find("checksum mismatch for key 'w'"), std::string::npos) << output;
}

// What `ckflow bench` prints: the two rates and
// their ratio; NaN where a line is missing.
struct BenchRates {
  double ckflow = NAN;
  double raw = NAN;
  double ratio = NAN;
  double stall = NAN;  // --async: the stall as a fraction of a synchronous Write
};

BenchRates ParseBenchOutput(const std::string& output) {
  BenchRates r;
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    double v = 0;
    if (std::sscanf(line.c_str(), "ckflow %lf GB/s", &v) == 1) r.ckflow = v;
    if (std::sscanf(line.c_str(), "raw %lf GB/s", &v) == 1) r.raw = v;
    if (std::sscanf(line.c_str(), "ckflow/raw = %lfx", &v) == 1) r.ratio = v;
    if (std::sscanf(line.c_str(), "stall / synchronous Write = %lf", &v) == 1) r.stall = v;
  }
  return r;
}

// Rates are only checked to be there and positive: how fast this machine
// is, is not under test.
class CliBenchTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CliBenchTest, PrintsRatesAndRatioAndCleansUp) {
  const std::string dir = testing::NewTempDir("bench");
  std::string output;
  ASSERT_EQ(testing::RunCommand(std::string(CKFLOW_CLI) + " bench " + GetParam() +
                                    " --size 4MiB --count 4 --repeat 1 --dir " + dir + " 2>&1",
                                &output),
            0)
      << output;
  const BenchRates r = ParseBenchOutput(output);
  EXPECT_GT(r.ckflow, 0) << output;
  EXPECT_GT(r.raw, 0) << output;
  EXPECT_GT(r.ratio, 0) << output;
  // Only async saves are compared with a synchronous one.
  const bool async = GetParam().find("--async") != std::string::npos;
  EXPECT_EQ(std::isnan(r.stall), !async) << output;
  if (async) {
    EXPECT_GT(r.stall, 0) << output;
    EXPECT_NE(output.find("Write async, until it returns"), std::string::npos) << output;
  }
  if (GetParam() == "save --files 3") {
    EXPECT_NE(output.find("Write, 3 files"), std::string::npos) << output;
  }
  if (GetParam() == "restore --files 4") {
    EXPECT_NE(output.find("Restore + InitializeOrRestore, 4 files"), std::string::npos) << output;
  }
  // Adam's slots are variables of the checkpoint as the model's are.
  if (GetParam().find("--optimizer adam") != std::string::npos) {
    EXPECT_NE(output.find("12 x 1 MiB float32 variables (4 and Adam's m and v of each) = 12 MiB"),
              std::string::npos)
        << output;
  }
  EXPECT_EQ(testing::ListDir(dir), std::vector<std::string>{}) << "left behind in " << dir;
}

INSTANTIATE_TEST_SUITE_P(Modes, CliBenchTest,
                         ::testing::Values("restore", "save", "save --durable",
                                           "restore --threads 1", "save --async",
                                           "save --durable --async", "save --files 3",
                                           "restore --files 4", "restore --optimizer adam",
                                           "save --optimizer adam"),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           std::string name;
                           for (char ch : p.param) name += std::isalnum(ch) ? ch : '_';
                           return name;
                         });

// The number after "key": in `json`, NaN if the key is missing.
double JsonNumber(const std::string& json, const std::string& key) {
  const size_t at = json.find("\"" + key + "\": ");
  return at == std::string::npos ? NAN : std::strtod(json.c_str() + at + key.size() + 4, nullptr);
}

// Runs `ckflow bench ARGS` with --dir and --json in new directories: what
// it printed, and in *json what it wrote (empty if it failed). It leaves
// nothing behind in its --dir.
std::string RunBenchWithJson(const std::string& args, std::string* json) {
  const std::string dir = testing::NewTempDir("bench");
  const std::string json_path = testing::NewTempDir("bench_json") + "/bench.json";
  std::string output;
  json->clear();
  if (testing::RunCommand(std::string(CKFLOW_CLI) + " bench " + args + " --dir " + dir +
                              " --json " + json_path + " 2>&1",
                          &output) == 0) {
    *json = testing::ReadFileOrDie(json_path);
  }
  EXPECT_EQ(testing::ListDir(dir), std::vector<std::string>{}) << "left behind in " << dir;
  return output;
}

// --json writes what the lines say, for bench/report.py.
TEST(CliBench, WritesTheFiguresItPrintsAsJson) {
  std::string json;
  const std::string output =
      RunBenchWithJson("save --async --size 4MiB --count 4 --repeat 1", &json);
  ASSERT_FALSE(json.empty()) << output;
  const BenchRates r = ParseBenchOutput(output);
  EXPECT_NE(json.find("\"command\": \"bench save\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"async\": true"), std::string::npos) << json;
  EXPECT_EQ(JsonNumber(json, "bytes"), 4 << 20) << json;
  EXPECT_EQ(JsonNumber(json, "count"), 4) << json;
  // The lines print two or three decimals.
  EXPECT_NEAR(JsonNumber(json, "ratio"), r.ratio, 0.006) << json << output;
  EXPECT_NEAR(JsonNumber(json, "ckflow_GB/s"), r.ckflow, 0.0006) << json << output;
  EXPECT_NEAR(JsonNumber(json, "stall_vs_sync"), r.stall, 0.0006) << json << output;
}

// A warm restore's time split between its two calls: the line says it and
// the JSON has it, and with one run the two add up to the whole.
TEST(CliBench, RestoreSplitsItsTimeBetweenRestoreAndInitializeOrRestore) {
  std::string json;
  const std::string output = RunBenchWithJson("restore --size 64KiB --count 16 --repeat 1", &json);
  ASSERT_FALSE(json.empty()) << output;
  // "phase   Restore: 0.0010 s, 64.663 us per variable, 85 page faults"
  std::map<std::string, std::array<double, 3>> phases;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    char name[32];
    std::array<double, 3> f;
    if (std::sscanf(line.c_str(), "phase %31[A-Za-z]: %lf s, %lf us per variable, %lf page faults",
                    name, &f[0], &f[1], &f[2]) == 4) {
      phases[name] = f;
    }
  }
  ASSERT_EQ(phases.size(), 2u) << output;
  for (const auto& [name, key] : {std::pair{"Restore", "restore_phase"},
                                  std::pair{"InitializeOrRestore", "initialize_phase"}}) {
    const auto& [seconds, us, faults] = phases[name];
    const double json_s = JsonNumber(json, std::string(key) + "_s");
    EXPECT_GT(json_s, 0) << json;
    EXPECT_NEAR(seconds, json_s, 0.00006) << name << "\n" << output << json;
    EXPECT_NEAR(us, json_s / 16 * 1e6, 0.0006) << name << "\n" << output << json;
    EXPECT_GE(faults, 0) << name << "\n" << output;
    EXPECT_EQ(JsonNumber(json, std::string(key) + "_page_faults"), faults) << json << output;
  }
  const double whole = JsonNumber(json, "ckflow_s");
  EXPECT_NEAR(JsonNumber(json, "restore_phase_s") + JsonNumber(json, "initialize_phase_s"), whole,
              whole * 1e-8)
      << json;
}

// With --optimizer adam every variable has two slots: the JSON counts
// them among the variables, beside the model's own count.
TEST(CliBench, CountsAnOptimizersSlotsAmongTheVariables) {
  std::string json;
  const std::string output =
      RunBenchWithJson("restore --optimizer adam --size 64KiB --count 16 --repeat 1", &json);
  ASSERT_FALSE(json.empty()) << output;
  EXPECT_NE(json.find("\"optimizer\": \"adam\""), std::string::npos) << json;
  EXPECT_EQ(JsonNumber(json, "count"), 48) << json;
  EXPECT_EQ(JsonNumber(json, "model_count"), 16) << json;
  EXPECT_EQ(JsonNumber(json, "bytes"), 3 * (64 << 10)) << json;
  EXPECT_NE(output.find("48 x 4 KiB float32 variables (16 and Adam's m and v of each)"),
            std::string::npos)
      << output;
}

struct BadBenchArgs {
  std::string args;
  std::string flag;  // the message names it
};

void PrintTo(const BadBenchArgs& c, std::ostream* os) { *os << "ckflow bench " << c.args; }

class CliBenchBadArgsTest : public ::testing::TestWithParam<BadBenchArgs> {};

TEST_P(CliBenchBadArgsTest, ExitsTwoNamingTheFlag) {
  std::string output;
  EXPECT_EQ(
      testing::RunCommand(std::string(CKFLOW_CLI) + " bench " + GetParam().args + " 2>&1", &output),
      2)
      << output;
  EXPECT_NE(output.find(GetParam().flag), std::string::npos) << output;
  EXPECT_TRUE(std::isnan(ParseBenchOutput(output).ckflow)) << "ran anyway:\n" << output;
}

const BadBenchArgs kBadBenchArgs[] = {
    {"restore --size 3 --count 4", "--size 3"},  // not a multiple of 4 x 4 bytes
    {"restore --size 4MiB --count 0", "--count"},
    {"save --size 1XB", "--size '1XB'"},
    {"save --size GiB", "--size 'GiB'"},
    {"restore --size 4MiB --repeat 0", "--repeat"},
    {"save --size 4MiB --dir /no/such/dir", "--dir /no/such/dir"},
    {"restore --size 4MiB --count x", "--count"},  // CLI11's own message
    {"restore --size 4MiB --async", "--async"},    // async applies to saves only
    {"save --size 4MiB --files -1", "--files"},
    {"save --size 4MiB --cold", "--cold"},  // a cold cache applies to restores only
    {"restore --size 4MiB --optimizer sgd", "--optimizer 'sgd'"},
};

INSTANTIATE_TEST_SUITE_P(Cases, CliBenchBadArgsTest, ::testing::ValuesIn(kBadBenchArgs));

// Whether `dir` lies on tmpfs, where a cold read cannot be measured.
bool OnTmpfs(const std::string& dir) {
  struct statfs fs;
  return ::statfs(dir.c_str(), &fs) == 0 && static_cast<long>(fs.f_type) == 0x01021994;
}

// `bench restore --cold --size 4MiB --count 4 --dir DIR` + `more`, its
// output (stdout and stderr) in *output; returns the exit code.
int RunColdBench(const std::string& dir, const std::string& more, std::string* output) {
  return testing::RunCommand(std::string(CKFLOW_CLI) +
                                 " bench restore --cold --size 4MiB --count 4 --repeat 1 --dir " +
                                 dir + " " + more + " 2>&1",
                             output);
}

// Where the page cache cannot be dropped (here: a file that cannot be
// opened stands for /proc/sys/vm/drop_caches without root), nothing is
// measured or written, and the exit code is 3, not an error's 2.
TEST(CliBenchCold, ExitsThreeSayingWhyWhenTheCacheCannotBeDropped) {
  const std::string dir = testing::NewTempDir("bench_cold");
  const std::string drop = dir + "/no/such/drop_caches";
  std::string output;
  EXPECT_EQ(RunColdBench(dir, "--drop-caches " + drop, &output), 3) << output;
  EXPECT_NE(output.find("cannot drop the page cache"), std::string::npos) << output;
  EXPECT_NE(output.find(drop), std::string::npos) << output;
  EXPECT_TRUE(std::isnan(ParseBenchOutput(output).ckflow)) << "ran anyway:\n" << output;
  EXPECT_EQ(testing::ListDir(dir), std::vector<std::string>{}) << "written in " << dir;
}

TEST(CliBenchCold, RefusesADirectoryInMemory) {
  if (!OnTmpfs("/dev/shm")) GTEST_SKIP() << "/dev/shm is not tmpfs here";
  std::string output;
  EXPECT_EQ(RunColdBench("/dev/shm", "", &output), 2) << output;
  EXPECT_NE(output.find("--dir /dev/shm is on tmpfs"), std::string::npos) << output;
  EXPECT_TRUE(std::isnan(ParseBenchOutput(output).ckflow)) << "ran anyway:\n" << output;
}

// The whole cold path (a restoring child process, every baseline, the
// JSON) with a plain file standing in for /proc/sys/vm/drop_caches, so it
// runs without root and drops nothing: the figures are warm ones, which is
// not under test. With --optimizer adam the child builds the same model,
// slots included, and must take every value of the checkpoint.
struct ColdCase {
  std::string more;      // further arguments
  int64_t values_bytes;  // of the checkpoint: 4 MiB, or 12 with Adam's slots
};

void PrintTo(const ColdCase& c, std::ostream* os) { *os << "'" << c.more << "'"; }

class CliBenchColdTest : public ::testing::TestWithParam<ColdCase> {};

TEST_P(CliBenchColdTest, RestoresInANewProcessBesideEveryBaseline) {
  const std::string dir = testing::NewTempDir("bench_cold");
  if (OnTmpfs(dir)) GTEST_SKIP() << dir << " is on tmpfs";
  const std::string drop = testing::NewTempDir("bench_cold_drop") + "/drop_caches";
  testing::WriteFileOrDie(drop, "");
  const std::string json_path = testing::NewTempDir("bench_cold_json") + "/cold.json";
  std::string output;
  ASSERT_EQ(RunColdBench(dir, GetParam().more + " --drop-caches " + drop + " --json " + json_path,
                         &output),
            0)
      << output;
  const BenchRates r = ParseBenchOutput(output);
  EXPECT_GT(r.ckflow, 0) << output;
  EXPECT_GT(r.raw, 0) << output;
  EXPECT_NE(output.find("Restore + InitializeOrRestore in a new process"), std::string::npos)
      << output;
  for (const char* baseline :
       {"pread 8 MiB blocks + CRC32C, 1 thread", "pread 8 MiB blocks + CRC32C, 2 threads"}) {
    EXPECT_NE(output.find(baseline), std::string::npos) << output;
  }
  // O_DIRECT runs, or a line says why not.
  EXPECT_TRUE(output.find("O_DIRECT + CRC32C, 2 threads") != std::string::npos ||
              output.find("O_DIRECT not run") != std::string::npos)
      << output;
  EXPECT_EQ(testing::ReadFileOrDie(drop), "1");  // a drop was asked for
  const std::string json = testing::ReadFileOrDie(json_path);
  EXPECT_NE(json.find("\"cold\": true"), std::string::npos) << json;
  EXPECT_NE(json.find("\"baselines\": [{"), std::string::npos) << json;
  EXPECT_NEAR(JsonNumber(json, "ratio"), r.ratio, 0.006) << json << output;
  // The child counted its page faults: it wrote every value into memory it
  // had never touched, so at least the checkpoint's values.
  EXPECT_NE(output.find("MiB first touched"), std::string::npos) << output;
  EXPECT_GE(JsonNumber(json, "ckflow_first_touched_bytes"), GetParam().values_bytes) << json;
  EXPECT_EQ(testing::ListDir(dir), std::vector<std::string>{}) << "left behind in " << dir;
}

INSTANTIATE_TEST_SUITE_P(Models, CliBenchColdTest,
                         ::testing::Values(ColdCase{"", 4 << 20},
                                           ColdCase{"--optimizer adam", 12 << 20}));

}  // namespace
}  // namespace ckflow
