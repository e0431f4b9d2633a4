// The first restore of a fresh process (issue 25, section 2): what a user
// waits for when a program starts, builds its graph and restores into
// variables it has just allocated, whose pages have never been touched.
//
//   fresh_restore [--repeat R] [--dir D] [--cases large,small] [--torch] [--tf]
//                 [--python PYTHON] [--cold [--drop-caches PATH]] [--json PATH]
//
// The driver writes the checkpoints once (1 GiB as 64 x 16 MiB, and
// 20,000 x 1 KiB float32 variables), then for each repetition and case
// runs each contender once, a new process each time, on a warm page cache
// (the case's files read just before) or, with --cold, on a cold one (the
// page cache dropped just before: root, /proc/sys/vm/drop_caches; where that
// is not permitted it says why and exits 3):
//
//   ckflow   builds the synthetic model's graph (workloads/model_program.h,
//            variables not initialized), then times Checkpoint::Restore +
//            LoadStatus::InitializeOrRestore (every CRC checked) and runs
//            one step (reads the last variable and checks its value)
//   raw N    (warm) maps fresh anonymous memory (mmap) and preads every value
//            of the same data files into it + CRC32C, on N = 1 and 2
//            threads: the fresh-memory ceiling
//   seq N, direct N
//            (--cold) the cold ceilings: the same data files read in order
//            in 8 MiB blocks into fresh memory + CRC32C on N = 1 and 2
//            threads, through the page cache or with O_DIRECT
//            (workloads/cold_cache.h)
//   ckflow_warm, tf_graph_warm
//            (--cold) the same as ckflow and tf_graph on a warm cache, in
//            the same run, for the ratio of cold to warm
//   tf_graph (--tf) TensorFlow graph mode restores ckflow's files:
//            checkpoint.restore + run_restore_ops (fresh_restore_peers.py)
//   torch    (--torch) torch.load of the same tensors saved with torch.save;
//            with --cold instead torch.load(mmap=True) + copy_ into new
//            tensors (torch_mmap) and torch.distributed.checkpoint.load
//            (dcp). Only the load is timed (after import).
//
// PYTHON runs the peers: /usr/bin/python3 unless --python names another (the
// bench venv's, for the TensorFlow and PyTorch of bench/requirements.txt).
// Each child prints "seconds <s>" and "peak_rss <bytes>"
// (workloads/fresh_process.h); the driver prints medians, GB/s of variable
// payload, and ckflow's ratios to the others, and with --json PATH writes
// the same medians to PATH (bench/report.py). --cold writes under /var/tmp
// unless --dir names a directory, which must not be in memory (tmpfs).

#include <stdlib.h>
#include <sys/mman.h>
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
#include "workloads/cold_cache.h"
#include "workloads/fresh_process.h"
#include "workloads/json_writer.h"
#include "workloads/memory.h"
#include "workloads/model_program.h"
#include "workloads/raw_io.h"

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

[[noreturn]] void Fail(const std::string& what, int code = 1) {
  std::cerr << "fresh_restore: " << what << "\n";
  std::exit(code);
}

void Check(const Status& s) {
  if (!s.ok()) Fail(s.ToString());
}

std::string Prefix(const std::string& dir, const Case& c) { return dir + "/" + c.name; }

// ------------------------------------------------------------- children

int ChildCkflow(const std::string& dir, const Case& c) {
  StatusOr<workloads::TimedRestore> timed =
      workloads::TimeRestoreIntoNewModel(Prefix(dir, c), c.count, c.elements);
  Check(timed.status());
  workloads::PrintChildResult(timed->seconds, timed->page_faults);
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
  workloads::PrintChildResult(workloads::SecondsSince(start));
  return sink == 1 ? 1 : 0;  // keeps the checksums alive
}

// seq1, seq2, direct1, direct2: a cold ceiling.
int ChildSequential(const std::string& dir, const Case& c, const workloads::SequentialRead& how) {
  StatusOr<workloads::ValueLayout> layout = workloads::LayoutOf(Prefix(dir, c));
  Check(layout.status());
  uint32_t sink = 0;
  StatusOr<double> seconds = workloads::SequentialReadCrc(layout->data_files, how, &sink);
  // The driver leaves the row empty when O_DIRECT is refused.
  if (IsUnimplemented(seconds.status())) Fail(seconds.status().ToString(), 3);
  Check(seconds.status());
  workloads::PrintChildResult(*seconds);
  return sink == 1 ? 1 : 0;
}

// ------------------------------------------------------------- driver

// One row of the table: `child` run on a warm or a cold page cache.
struct Contender {
  std::string name;   // in the table and the JSON
  std::string child;  // --child of this binary, or an action of fresh_restore_peers.py
  bool warm;
  bool python;
};

struct Options {
  int repeat = 3;
  std::string dir, cases = "large,small", json;
  std::string python;  // empty: no Python peers
  bool tf = false, torch = false, cold = false;
  std::string drop_caches = workloads::kDropCachesPath;
};

std::vector<Contender> ContendersOf(const Options& o) {
  std::vector<Contender> out = {{"ckflow", "ckflow", !o.cold, false}};
  if (!o.cold) {
    out.push_back({"raw1", "raw1", true, false});
    out.push_back({"raw2", "raw2", true, false});
    if (o.tf) out.push_back({"tf_graph", "tf_graph", true, true});
    if (o.torch) out.push_back({"torch", "torch_load", true, true});
    return out;
  }
  for (const char* name : {"seq1", "seq2", "direct1", "direct2"}) {
    out.push_back({name, name, false, false});
  }
  out.push_back({"ckflow_warm", "ckflow", true, false});
  if (o.tf) {
    out.push_back({"tf_graph", "tf_graph", false, true});
    out.push_back({"tf_graph_warm", "tf_graph", true, true});
  }
  if (o.torch) {
    out.push_back({"torch_mmap", "torch_mmap", false, true});
    out.push_back({"dcp", "dcp_load", false, true});
  }
  return out;
}

void WriteCheckpoints(const std::string& dir, const Case& c, const Options& o) {
  if (!fs::exists(Prefix(dir, c) + ".index")) {
    StatusOr<std::unique_ptr<workloads::ModelProgram>> m =
        workloads::ModelProgram::Synthetic(c.count, c.elements, 0.0f, /*initialize=*/true);
    Check(m.status());
    Check((*m)->checkpoint->Write(Prefix(dir, c), *(*m)->session).status());
  }
  if (o.torch && !fs::exists(Prefix(dir, c) + ".pt")) {
    Check(workloads::RunChild({o.python, CKFLOW_FRESH_RESTORE_PEERS, "torch_save", Prefix(dir, c),
                               std::to_string(c.count), std::to_string(c.elements)})
              .status());
  }
}

// Reads the case's files (the checkpoint, and torch's .pt) once, so a child
// reads them from a warm page cache.
void WarmPageCache(const std::string& dir, const Case& c) {
  std::vector<char> buf(1 << 20);
  for (const auto& e : fs::directory_iterator(dir)) {
    if (!e.is_regular_file() || e.path().filename().string().rfind(c.name + ".", 0) != 0) {
      continue;
    }
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

int Driver(const std::string& self, Options o) {
  bool owned = false;
  if (o.cold) {
    // Checked before anything is written.
    const std::string memory = o.dir.empty() ? "" : workloads::InMemoryFileSystem(o.dir);
    if (!memory.empty()) {
      Fail("--cold --dir " + o.dir + " is on " + memory +
               ", whose files are always in memory; give a directory on a disk",
           2);
    }
    if (Status drop = workloads::CheckCanDropPageCache(o.drop_caches); !drop.ok()) {
      Fail("--cold: not measured: " + std::string(drop.message()), 3);
    }
  }
  if (o.dir.empty()) {
    std::string pattern =
        ((o.cold ? fs::path("/var/tmp") : fs::temp_directory_path()) / "ckflow-fresh-XXXXXX")
            .string();
    if (::mkdtemp(pattern.data()) == nullptr) Fail("cannot create a temporary directory");
    o.dir = pattern;
    owned = true;
  }
  std::vector<const Case*> chosen;
  for (const Case& c : kCases) {
    if (o.cases.find(c.name) != std::string::npos) chosen.push_back(&c);
  }
  for (const Case* c : chosen) WriteCheckpoints(o.dir, *c, o);
  const std::vector<Contender> contenders = ContendersOf(o);
  // (case, contender) -> each repetition's result.
  std::map<std::pair<std::string, std::string>, std::vector<workloads::ChildResult>> results;
  std::string direct_note;
  for (int r = 0; r < o.repeat; ++r) {
    for (const Case* c : chosen) {
      // Rotate the order so no contender always runs right after another.
      for (size_t k = 0; k < contenders.size(); ++k) {
        const Contender& who = contenders[(k + r) % contenders.size()];
        std::vector<std::string> args;
        if (who.python) {
          args = {o.python,          CKFLOW_FRESH_RESTORE_PEERS, who.child,
                  Prefix(o.dir, *c), std::to_string(c->count),   std::to_string(c->elements)};
        } else {
          args = {self, "--child", who.child, "--case", c->name, "--dir", o.dir};
        }
        if (who.warm) {
          WarmPageCache(o.dir, *c);
        } else {
          Check(workloads::DropPageCache(o.drop_caches));
        }
        StatusOr<workloads::ChildResult> result = workloads::RunChild(args);
        if (!result.ok() && who.child.rfind("direct", 0) == 0) {
          direct_note = std::string(result.status().message());  // O_DIRECT refused
          continue;
        }
        Check(result.status());
        results[{c->name, who.name}].push_back(*result);
      }
    }
  }
  std::printf("fresh_restore: median of %d, a new process per run, %s page cache, in %s\n",
              o.repeat, o.cold ? "cold (dropped before each run; *_warm: warm)" : "warm",
              o.dir.c_str());
  if (!direct_note.empty()) std::printf("O_DIRECT not run: %s\n", direct_note.c_str());
  workloads::JsonArray json_cases;
  for (const Case* c : chosen) {
    workloads::JsonObject json_case;
    json_case.Set("name", c->name).Set("count", c->count).Set("bytes", c->bytes());
    std::printf("%s: %lld x %lld float32 = %.1f MiB\n", c->name.c_str(),
                static_cast<long long>(c->count), static_cast<long long>(c->elements),
                static_cast<double>(c->bytes()) / (1 << 20));
    const double ckflow = Median([&] {
      std::vector<double> s;
      for (const workloads::ChildResult& r : results[{c->name, "ckflow"}]) s.push_back(r.seconds);
      return s;
    }());
    for (const Contender& who : contenders) {
      std::vector<double> seconds, rss, faults;
      for (const workloads::ChildResult& r : results[{c->name, who.name}]) {
        seconds.push_back(r.seconds);
        rss.push_back(static_cast<double>(r.peak_rss));
        if (r.page_faults >= 0) faults.push_back(static_cast<double>(r.page_faults));
      }
      if (seconds.empty()) continue;
      const double s = Median(seconds);
      std::printf("  %-13s %8.4f s  %7.3f GB/s  peak RSS %7.1f MiB  ckflow speed / this = %.2fx\n",
                  who.name.c_str(), s, static_cast<double>(c->bytes()) / s / 1e9,
                  Median(rss) / (1 << 20), s / ckflow);
      workloads::JsonObject json_who;
      json_who.Set("seconds", s).Set("peak_rss_bytes", Median(rss));
      // What the timed part first touched: its page faults, in bytes.
      if (!faults.empty()) {
        json_who.Set("first_touched_bytes", Median(faults) * static_cast<double>(::getpagesize()));
      }
      json_case.Set(who.name, json_who);
    }
    json_cases.Add(json_case);
  }
  if (owned) fs::remove_all(o.dir);
  if (!o.json.empty()) {
    workloads::JsonObject json;
    json.Set("repeat", o.repeat).Set("python", o.python).Set("cold", o.cold);
    if (!direct_note.empty()) json.Set("direct_note", direct_note);
    json.Set("cases", json_cases);
    if (!json.WriteTo(o.json)) Fail("cannot write " + o.json);
  }
  return 0;
}

int Main(int argc, char** argv) {
  Options o;
  std::string child, case_name, python = "/usr/bin/python3";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Fail(a + " needs a value", 2);
      return argv[++i];
    };
    if (a == "--repeat") {
      o.repeat = std::max(1, std::atoi(value().c_str()));
    } else if (a == "--dir") {
      o.dir = value();
    } else if (a == "--cases") {
      o.cases = value();
    } else if (a == "--torch") {
      o.torch = true;
    } else if (a == "--tf") {
      o.tf = true;
    } else if (a == "--cold") {
      o.cold = true;
    } else if (a == "--drop-caches") {
      o.drop_caches = value();
    } else if (a == "--python") {
      python = value();
    } else if (a == "--json") {
      o.json = value();
    } else if (a == "--child") {
      child = value();
    } else if (a == "--case") {
      case_name = value();
    } else {
      Fail("unknown argument " + a, 2);
    }
  }
  if (child.empty()) {
    if (o.torch || o.tf) o.python = python;
    return Driver(workloads::SelfPath(), o);
  }
  const Case* c = FindCase(case_name);
  if (c == nullptr) Fail("unknown case " + case_name);
  if (child == "ckflow") return ChildCkflow(o.dir, *c);
  if (child == "raw1") return ChildRaw(o.dir, *c, 1);
  if (child == "raw2") return ChildRaw(o.dir, *c, 2);
  for (int threads : {1, 2}) {
    if (child == "seq" + std::to_string(threads)) {
      return ChildSequential(o.dir, *c, {.threads = threads});
    }
    if (child == "direct" + std::to_string(threads)) {
      return ChildSequential(o.dir, *c, {.threads = threads, .direct = true});
    }
  }
  Fail("unknown child " + child);
}

}  // namespace
}  // namespace ckflow

int main(int argc, char** argv) { return ckflow::Main(argc, argv); }
