// The first restore of a fresh process (issue 25, section 2): what a user
// waits for when a program starts, builds its graph and restores into
// variables it has just allocated, whose pages have never been touched.
//
//   fresh_restore [--repeat R] [--dir D] [--cases large,small] [--torch]
//                 [--python PYTHON] [--json PATH]
//
// The driver writes the checkpoints once (1 GiB as 64 x 16 MiB, and
// 20,000 x 1 KiB float32 variables), reads each file once so the page cache
// is warm, then for each repetition and case execs itself once per
// contender, a new process each time:
//
//   ckflow   builds the synthetic model's graph (workloads/model_program.h,
//            variables not initialized), then times Checkpoint::Restore +
//            LoadStatus::InitializeOrRestore (every CRC checked) and runs
//            one step (reads the last variable and checks its value)
//   raw N    maps fresh anonymous memory (mmap) and preads every value of
//            the same data files into it + CRC32C, on N = 1 and 2 threads:
//            the fresh-memory ceiling
//   torch    (--torch) PYTHON -c 'torch.load(...)' of the same tensors
//            saved with torch.save; only the load is timed (after import).
//            PYTHON is /usr/bin/python3 unless --python names another (the
//            bench venv's, for the PyTorch of bench/requirements.txt)
//
// Each child prints "seconds <s>" and "peak_rss <bytes>"; the driver prints
// medians, GB/s of variable payload, and ckflow's ratios to the others,
// and with --json PATH writes the same medians to PATH (bench/report.py).
// The environment reaches the children unchanged.

#include <spawn.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "workloads/json_writer.h"
#include "workloads/memory.h"
#include "workloads/model_program.h"
#include "workloads/raw_io.h"

extern char** environ;

namespace ckflow {
namespace {

namespace fs = std::filesystem;

struct Case {
  std::string name;
  int64_t count;
  int64_t elements;  // float32 per variable
  int64_t bytes() const { return count * elements * 4; }
};

const Case kCases[] = {{"large", 64, 4 << 20}, {"small", 20000, 256}};

const Case* FindCase(const std::string& name) {
  for (const Case& c : kCases) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

[[noreturn]] void Fail(const std::string& what) {
  std::cerr << "fresh_restore: " << what << "\n";
  std::exit(1);
}

void Check(const Status& s) {
  if (!s.ok()) Fail(s.ToString());
}

std::string Prefix(const std::string& dir, const Case& c) { return dir + "/" + c.name; }

void PrintChild(double seconds) {
  std::printf("seconds %.6f\npeak_rss %lld\n", seconds,
              static_cast<long long>(workloads::ReadMemoryUse().peak));
}

// ------------------------------------------------------------- children

int ChildCkflow(const std::string& dir, const Case& c) {
  StatusOr<std::unique_ptr<workloads::ModelProgram>> m =
      workloads::ModelProgram::Synthetic(c.count, c.elements, -1.0f, /*initialize=*/false);
  Check(m.status());
  workloads::ModelProgram& p = **m;
  const auto start = std::chrono::steady_clock::now();
  StatusOr<LoadStatus> status = p.checkpoint->Restore(Prefix(dir, c));
  Check(status.status());
  Check(status->InitializeOrRestore(*p.session));
  const double seconds = workloads::SecondsSince(start);
  // The step: the last variable holds what the writer gave it.
  StatusOr<std::vector<Tensor>> got = p.session->Run({}, {p.vars.back()->value()});
  Check(got.status());
  if ((*got)[0].flat<float>()[0] != static_cast<float>(c.count - 1)) {
    Fail("the restored value is wrong");
  }
  PrintChild(seconds);
  return 0;
}

int ChildRaw(const std::string& dir, const Case& c, int threads) {
  StatusOr<workloads::ValueLayout> layout = workloads::LayoutOf(Prefix(dir, c));
  Check(layout.status());
  const std::vector<workloads::Piece>& pieces = layout->pieces;
  // Values back to back, each at a 64-byte boundary, as ckflow's buffers.
  std::vector<int64_t> at(pieces.size());
  int64_t total = 0;
  for (size_t i = 0; i < pieces.size(); ++i) {
    at[i] = total;
    total += (pieces[i].size + 63) / 64 * 64;
  }
  const auto start = std::chrono::steady_clock::now();
  void* region = ::mmap(nullptr, static_cast<size_t>(total), PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (region == MAP_FAILED) Fail("mmap failed");
  char* base = static_cast<char*>(region);
  uint32_t sink = 0;
  const double s = workloads::ReadCrcInto(layout->data_files, pieces, threads, &sink,
                                          [&](size_t i) { return base + at[i]; });
  if (s < 0) Fail("pread failed");
  PrintChild(workloads::SecondsSince(start));
  return sink == 1 ? 1 : 0;  // keeps the checksums alive
}

// ------------------------------------------------------------- driver

struct Result {
  double seconds = -1;
  int64_t peak_rss = -1;
};

Result Run(const std::vector<std::string>& args) {
  int out[2];
  if (::pipe(out) != 0) Fail("pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ) != 0) {
    Fail("cannot run " + args[0]);
  }
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::read(out[0], buf, sizeof(buf))) > 0;) text.append(buf, n);
  ::close(out[0]);
  int wstatus = 0;
  ::waitpid(pid, &wstatus, 0);
  if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) Fail(args[0] + " " + args[1] + " failed");
  Result r;
  double s = 0;
  long long rss = 0;
  const char* seconds = std::strstr(text.c_str(), "seconds ");
  const char* peak = std::strstr(text.c_str(), "peak_rss ");
  if (seconds == nullptr || std::sscanf(seconds, "seconds %lf", &s) != 1) {
    Fail("no time from " + args[0] + ": " + text);
  }
  r.seconds = s;
  if (peak != nullptr && std::sscanf(peak, "peak_rss %lld", &rss) == 1) r.peak_rss = rss;
  return r;
}

void WriteCheckpoints(const std::string& dir, const Case& c, const std::string& python) {
  if (!fs::exists(Prefix(dir, c) + ".index")) {
    StatusOr<std::unique_ptr<workloads::ModelProgram>> m =
        workloads::ModelProgram::Synthetic(c.count, c.elements, 0.0f, /*initialize=*/true);
    Check(m.status());
    Check((*m)->checkpoint->Write(Prefix(dir, c), *(*m)->session).status());
  }
  if (!python.empty() && !fs::exists(Prefix(dir, c) + ".pt")) {
    const std::string script = "import torch\ntorch.save({'v%d' % i: torch.full((" +
                               std::to_string(c.elements) + ",), float(i)) for i in range(" +
                               std::to_string(c.count) + ")}, '" + Prefix(dir, c) + ".pt')\n";
    Run({python, "-c", script + "print('seconds 0')"});
  }
}

// Reads every file of the directory once, so the children read from a warm
// page cache.
void WarmPageCache(const std::string& dir) {
  std::vector<char> buf(1 << 20);
  for (const auto& e : fs::directory_iterator(dir)) {
    std::ifstream in(e.path(), std::ios::binary);
    while (in.read(buf.data(), static_cast<std::streamsize>(buf.size())) || in.gcount() > 0) {
    }
  }
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// `python` is empty when torch.load is not a contender.
int Driver(const std::string& self, int repeat, std::string dir, const std::string& cases,
           const std::string& python, const std::string& json_path) {
  const bool torch = !python.empty();
  bool owned = false;
  if (dir.empty()) {
    std::string pattern = (fs::temp_directory_path() / "ckflow-fresh-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) Fail("cannot create a temporary directory");
    dir = pattern;
    owned = true;
  }
  std::vector<const Case*> chosen;
  for (const Case& c : kCases) {
    if (cases.find(c.name) != std::string::npos) chosen.push_back(&c);
  }
  for (const Case* c : chosen) WriteCheckpoints(dir, *c, python);
  WarmPageCache(dir);
  std::vector<std::string> contenders = {"ckflow", "raw1", "raw2"};
  if (torch) contenders.push_back("torch");
  // (case, contender) -> each repetition's result.
  std::map<std::pair<std::string, std::string>, std::vector<Result>> results;
  for (int r = 0; r < repeat; ++r) {
    for (const Case* c : chosen) {
      // Rotate the order so no contender always runs right after another.
      for (size_t k = 0; k < contenders.size(); ++k) {
        const std::string& who = contenders[(k + r) % contenders.size()];
        std::vector<std::string> args;
        if (who == "torch") {
          args = {python, "-c",
                  "import time, torch, resource\n"
                  "t = time.perf_counter()\n"
                  "d = torch.load('" +
                      Prefix(dir, *c) +
                      ".pt')\n"
                      "s = time.perf_counter() - t\n"
                      "print('seconds %.6f' % s)\n"
                      "print('peak_rss %d' % (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss "
                      "* 1024))\n"};
        } else {
          args = {self, "--child", who, "--case", c->name, "--dir", dir};
        }
        results[{c->name, who}].push_back(Run(args));
      }
    }
  }
  std::printf("fresh_restore: median of %d, a new process per run, warm page cache, in %s\n",
              repeat, dir.c_str());
  workloads::JsonArray json_cases;
  for (const Case* c : chosen) {
    workloads::JsonObject json_case;
    json_case.Set("name", c->name).Set("count", c->count).Set("bytes", c->bytes());
    std::printf("%s: %lld x %lld float32 = %.1f MiB\n", c->name.c_str(),
                static_cast<long long>(c->count), static_cast<long long>(c->elements),
                static_cast<double>(c->bytes()) / (1 << 20));
    double ckflow = 0;
    for (const std::string& who : contenders) {
      std::vector<double> seconds, rss;
      for (const Result& r : results[{c->name, who}]) {
        seconds.push_back(r.seconds);
        rss.push_back(static_cast<double>(r.peak_rss));
      }
      const double s = Median(seconds);
      if (who == "ckflow") ckflow = s;
      std::printf("  %-7s %8.4f s  %7.3f GB/s  peak RSS %7.1f MiB  ckflow speed / this = %.2fx\n",
                  who.c_str(), s, static_cast<double>(c->bytes()) / s / 1e9,
                  Median(rss) / (1 << 20), s / ckflow);
      json_case.Set(who,
                    workloads::JsonObject().Set("seconds", s).Set("peak_rss_bytes", Median(rss)));
    }
    json_cases.Add(json_case);
  }
  if (owned) fs::remove_all(dir);
  if (!json_path.empty()) {
    workloads::JsonObject json;
    json.Set("repeat", repeat).Set("python", python).Set("cases", json_cases);
    if (!json.WriteTo(json_path)) Fail("cannot write " + json_path);
  }
  return 0;
}

int Main(int argc, char** argv) {
  int repeat = 3;
  std::string dir, child, case_name, cases = "large,small", json;
  std::string python = "/usr/bin/python3";
  bool torch = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Fail(a + " needs a value");
      return argv[++i];
    };
    if (a == "--repeat") {
      repeat = std::max(1, std::atoi(value().c_str()));
    } else if (a == "--dir") {
      dir = value();
    } else if (a == "--cases") {
      cases = value();
    } else if (a == "--torch") {
      torch = true;
    } else if (a == "--python") {
      python = value();
    } else if (a == "--json") {
      json = value();
    } else if (a == "--child") {
      child = value();
    } else if (a == "--case") {
      case_name = value();
    } else {
      Fail("unknown argument " + a);
    }
  }
  if (child.empty()) {
    return Driver(fs::read_symlink("/proc/self/exe").string(), repeat, dir, cases,
                  torch ? python : "", json);
  }
  const Case* c = FindCase(case_name);
  if (c == nullptr) Fail("unknown case " + case_name);
  if (child == "ckflow") return ChildCkflow(dir, *c);
  if (child == "raw1") return ChildRaw(dir, *c, 1);
  if (child == "raw2") return ChildRaw(dir, *c, 2);
  Fail("unknown child " + child);
}

}  // namespace
}  // namespace ckflow

int main(int argc, char** argv) { return ckflow::Main(argc, argv); }
