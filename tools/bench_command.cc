// ckflow bench restore|save: checkpoint throughput through the whole user
// path on a synthetic model, beside the raw pread/pwrite ceiling
// (workloads/raw_io.h) measured in the same run on the same bytes.
//
//   restore  Checkpoint::Restore + LoadStatus::InitializeOrRestore into a
//            session's existing variables (warm cache, every CRC checked)
//            vs pread of the same value pieces into touched buffers + CRC32C.
//   restore --cold
//            the same restore from a cold page cache: the checkpoint is
//            written to a disk (not tmpfs; default a new directory under
//            /var/tmp), and before each run the page cache is dropped
//            (root: /proc/sys/vm/drop_caches). ckflow restores into a new
//            program's new variables in a new process (this binary again,
//            with --child-prefix), as after a restart; the baselines read
//            the same data files in order in large blocks into fresh
//            memory + CRC32C, on 1 and 2 threads, with and without O_DIRECT
//            (workloads/cold_cache.h), and "raw" is the fastest of them.
//            Where the cache cannot be dropped it says why and exits 3.
//   --optimizer adam
//            the model is trained by Adam: each variable has slots m and v,
//            variables of the checkpoint like the model's own (three times
//            the values; per-variable figures count the slots).
//   save     Checkpoint::Write vs pwrite of the same bytes (--durable: both
//            fsync). --async times Write({.async = true}) until it returns
//            (the training loop's stall) and also prints it as a fraction
//            of the same save made synchronously in the same run.
//
// Each of the R runs measures both, alternating which goes first; the median
// of each is reported. The last lines of stdout read (tests/tools/cli_test.cc
// parses them):
//
//   ckflow    1.234 GB/s  0.870 s  Restore + InitializeOrRestore
//   raw       1.418 GB/s  0.757 s  pread + CRC32C, 2 threads
//   ckflow/raw = 0.87x  (> 1: ckflow is faster)
//
// and a warm restore also splits its time between its two calls:
//
//   phase   Restore: 0.0118 s, 0.590 us per variable, 1234 page faults
//   phase   InitializeOrRestore: 0.0112 s, 0.560 us per variable, 0 page faults
//
// GB/s is 1e9 bytes of variable values per second. With --json PATH the
// same figures (seconds, rates, memory) are also written to PATH as one JSON
// object, which bench/report.py reads.

#include <stdlib.h>
#include <tbb/global_control.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/parallel.h"
#include "bundle/bundle_format.h"
#include "bundle/bundle_reader.h"
#include "checkpoint/checkpoint.h"
#include "runtime/session.h"
#include "tools/commands.h"
#include "workloads/cold_cache.h"
#include "workloads/fresh_process.h"
#include "workloads/json_writer.h"
#include "workloads/memory.h"
#include "workloads/model_program.h"
#include "workloads/raw_io.h"

namespace ckflow::tools {
namespace {

namespace fs = std::filesystem;

enum class Mode { kRestore, kSave };

struct BenchOptions {
  std::string size = "1GiB";
  int64_t count = 64;
  std::string dir;  // empty: a fresh temporary directory, removed at the end
  int threads = 0;  // 0: oneTBB's default (every core)
  int raw_threads = 2;
  int repeat = 3;
  bool durable = false;
  bool async = false;
  int files = 0;         // SaveOptions::files_per_device
  int memory_saves = 0;  // extra saves after the timed runs, memory watched
  std::string json;      // also write the results here (empty: only print them)
  bool cold = false;     // restore only: from a cold page cache, in a new process
  std::string drop_caches = workloads::kDropCachesPath;  // what --cold writes "1" to
  std::string child_prefix;        // internal: be --cold's restoring child, from this checkpoint
  std::string optimizer = "none";  // the model's slots: none, or adam's m and v
};

using workloads::JsonObject;

// "1GiB", "256MiB", "64KiB", "1GB", "1000" -> bytes. Units are exact
// (KiB = 1024, KB = 1000) and case-insensitive; a bare number is bytes.
StatusOr<int64_t> ParseSize(const std::string& text) {
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0 || digits > 18) {
    return InvalidArgumentError("--size '", text, "': expected a whole number of bytes ",
                                "with an optional unit (1GiB, 256MiB, 64KiB, 1GB, 1000)");
  }
  std::string unit;
  for (char c : text.substr(digits)) unit += static_cast<char>(std::toupper(c));
  struct Unit {
    const char* name;
    int64_t bytes;
  };
  static constexpr Unit kUnits[] = {
      {"", 1},
      {"B", 1},
      {"KB", 1000},
      {"MB", 1000 * 1000},
      {"GB", 1000 * 1000 * 1000},
      {"TB", int64_t{1000} * 1000 * 1000 * 1000},
      {"KIB", int64_t{1} << 10},
      {"MIB", int64_t{1} << 20},
      {"GIB", int64_t{1} << 30},
      {"TIB", int64_t{1} << 40},
  };
  const Unit* found = nullptr;
  for (const Unit& u : kUnits) {
    if (unit == u.name) found = &u;
  }
  if (found == nullptr) {
    return InvalidArgumentError("--size '", text, "': unknown unit '", text.substr(digits),
                                "' (use B, KB, MB, GB, TB, KiB, MiB, GiB or TiB)");
  }
  const int64_t number = std::stoll(text.substr(0, digits));
  if (number == 0) return InvalidArgumentError("--size '", text, "': must be more than 0 bytes");
  if (number > std::numeric_limits<int64_t>::max() / found->bytes) {
    return InvalidArgumentError("--size '", text, "': too large");
  }
  return number * found->bytes;
}

// The checked shape of the benchmark: `count` variables of `bytes / count`.
// What a run moves. With an optimizer, its slots are variables of the
// checkpoint like the model's own, each the size of its variable: bytes
// and count include them.
struct Plan {
  int64_t bytes = 0;        // every variable's values
  int64_t count = 0;        // variables, slots included
  int64_t model_count = 0;  // the model's variables (--count)
  int64_t elements = 0;     // float32 elements per variable
  workloads::SyntheticOptimizer optimizer = workloads::SyntheticOptimizer::kNone;
};

StatusOr<Plan> MakePlan(const BenchOptions& options) {
  if (options.count < 1) {
    return InvalidArgumentError("--count must be at least 1, got ", options.count);
  }
  if (options.repeat < 1) {
    return InvalidArgumentError("--repeat must be at least 1, got ", options.repeat);
  }
  if (options.threads < 0) {
    return InvalidArgumentError("--threads must be 0 (all cores) or more, got ", options.threads);
  }
  if (options.raw_threads < 1) {
    return InvalidArgumentError("--raw-threads must be at least 1, got ", options.raw_threads);
  }
  if (options.files < 0) {
    return InvalidArgumentError("--files must be 0 (one per thread) or more, got ", options.files);
  }
  CKFLOW_ASSIGN_OR_RETURN(const workloads::SyntheticOptimizer optimizer,
                          workloads::OptimizerNamed(options.optimizer));
  CKFLOW_ASSIGN_OR_RETURN(int64_t bytes, ParseSize(options.size));
  const int64_t granule = options.count * static_cast<int64_t>(sizeof(float));
  if (bytes % granule != 0) {
    return InvalidArgumentError("--size ", options.size, " (", bytes,
                                " bytes) does not split into --count ", options.count,
                                " float32 variables: it must be a multiple of ", granule, " bytes");
  }
  const int64_t per_variable = workloads::VariablesPerModelVariable(optimizer);
  return Plan{.bytes = bytes * per_variable,
              .count = options.count * per_variable,
              .model_count = options.count,
              .elements = bytes / granule,
              .optimizer = optimizer};
}

// The directory the benchmark writes into; removes what it made when
// destroyed (the whole directory if it made the directory).
class WorkDir {
 public:
  // With `requested` empty, a new directory under `base` (empty: the
  // system's temporary directory).
  static StatusOr<std::unique_ptr<WorkDir>> Create(const std::string& requested,
                                                   fs::path base = {}) {
    if (requested.empty()) {
      std::error_code ec;
      if (base.empty()) base = fs::temp_directory_path(ec);
      if (ec) base = "/tmp";
      std::string pattern = (base / "ckflow-bench-XXXXXX").string();
      if (::mkdtemp(pattern.data()) == nullptr) {
        return InternalError("cannot create a temporary directory under ", base.string(), ": ",
                             std::strerror(errno));
      }
      return std::unique_ptr<WorkDir>(new WorkDir(pattern, /*owned=*/true));
    }
    std::error_code ec;
    if (!fs::is_directory(requested, ec)) {
      return InvalidArgumentError("--dir ", requested, ": not a directory");
    }
    // Fail before building a model of many GB, not after.
    const std::string probe = requested + "/.ckflow-bench-probe-" + std::to_string(::getpid());
    std::FILE* f = std::fopen(probe.c_str(), "w");
    if (f == nullptr) {
      return InvalidArgumentError("--dir ", requested, ": cannot write: ", std::strerror(errno));
    }
    std::fclose(f);
    fs::remove(probe, ec);
    return std::unique_ptr<WorkDir>(new WorkDir(requested, /*owned=*/false));
  }

  ~WorkDir() {
    std::error_code ec;
    if (owned_) {
      fs::remove_all(path_, ec);
      return;
    }
    for (const std::string& prefix : prefixes_) RemoveFiles(prefix);
  }

  // A path in the directory, removed (with every file it prefixes) at the end.
  std::string NewPath(const std::string& name) {
    prefixes_.push_back(path_ + "/" + name);
    return prefixes_.back();
  }

  // Removes `prefix` and every file whose name starts with "<prefix>." (a
  // checkpoint's index, data and temporary files).
  static void RemoveFiles(const std::string& prefix) {
    std::error_code ec;
    const fs::path p(prefix);
    const std::string stem = p.filename().string();
    fs::remove(p, ec);
    for (const auto& e : fs::directory_iterator(p.parent_path(), ec)) {
      const std::string name = e.path().filename().string();
      if (name.rfind(stem + ".", 0) == 0) fs::remove(e.path(), ec);
    }
  }

  const std::string& path() const { return path_; }

 private:
  WorkDir(std::string path, bool owned) : path_(std::move(path)), owned_(owned) {}

  const std::string path_;
  const bool owned_;
  std::vector<std::string> prefixes_;
};

using workloads::ModelProgram;

// The synthetic model of `plan`, variable i holding `fill + i`.
StatusOr<std::unique_ptr<ModelProgram>> NewModel(const Plan& plan, float fill) {
  return ModelProgram::Synthetic(plan.model_count, plan.elements, fill, /*initialize=*/true, 1,
                                 plan.optimizer);
}

// A progress bar on stderr, drawn only when stderr is a terminal so that
// logs and pipes stay clean.
class Progress {
 public:
  Progress(std::string label, int total)
      : label_(std::move(label)), total_(total), tty_(::isatty(STDERR_FILENO) == 1) {
    Draw(0);
  }
  ~Progress() {
    if (tty_) std::cerr << "\r\033[K" << std::flush;
  }
  void Draw(int done) const {
    if (!tty_) return;
    constexpr int kWidth = 30;
    const int filled = total_ > 0 ? done * kWidth / total_ : kWidth;
    std::cerr << "\r[" << std::string(filled, '#') << std::string(kWidth - filled, ' ') << "] "
              << done << "/" << total_ << " " << label_ << std::flush;
  }

 private:
  const std::string label_;
  const int total_;
  const bool tty_;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Runs both sides of run `run`, alternating which goes first so neither
// always inherits the other's dirty pages or cold caches.
template <typename Raw, typename Ckflow>
Status RunBoth(int run, const Raw& raw, const Ckflow& ckflow) {
  if (run % 2 == 0) {
    CKFLOW_RETURN_IF_ERROR(raw());
    return ckflow();
  }
  CKFLOW_RETURN_IF_ERROR(ckflow());
  return raw();
}

void PrintResult(const Plan& plan, double ckflow_s, const std::string& ckflow_what, double raw_s,
                 const std::string& raw_what, JsonObject& json) {
  json.Set("ckflow_s", ckflow_s)
      .Set("ckflow_what", ckflow_what)
      .Set("raw_s", raw_s)
      .Set("raw_what", raw_what)
      .Set("ckflow_GB/s", static_cast<double>(plan.bytes) / ckflow_s / 1e9)
      .Set("raw_GB/s", static_cast<double>(plan.bytes) / raw_s / 1e9)
      .Set("ratio", raw_s / ckflow_s);
  const double bytes = static_cast<double>(plan.bytes);
  char line[256];
  std::snprintf(line, sizeof(line), "ckflow  %8.3f GB/s  %8.4f s  %s\n", bytes / ckflow_s / 1e9,
                ckflow_s, ckflow_what.c_str());
  std::cout << line;
  std::snprintf(line, sizeof(line), "raw     %8.3f GB/s  %8.4f s  %s\n", bytes / raw_s / 1e9, raw_s,
                raw_what.c_str());
  std::cout << line;
  // Throughput ratio, so that > 1 reads as "faster than raw".
  std::snprintf(line, sizeof(line), "ckflow/raw = %.2fx  (> 1: ckflow is faster)\n",
                raw_s / ckflow_s);
  std::cout << line;
  // Many small variables cost by their number, not their bytes.
  if (plan.count >= 1000) {
    const double count = static_cast<double>(plan.count);
    std::snprintf(line, sizeof(line), "per variable: ckflow %.3f us, raw %.3f us\n",
                  ckflow_s / count * 1e6, raw_s / count * 1e6);
    std::cout << line;
  }
}

// "phase   Restore: 0.0118 s, 0.590 us per variable, 1234 page faults":
// where a warm restore's time goes, each figure the median of its runs (so
// the phases need not add up to the median of the whole). Page faults are
// first touches of new memory, e.g. records too large for the allocator to
// reuse; "page faults unknown" where getrusage failed.
void PrintPhase(const Plan& plan, const std::string& what, const std::string& key,
                const std::vector<double>& seconds, const std::vector<double>& faults,
                JsonObject& json) {
  const double s = Median(seconds);
  const double f = faults.size() == seconds.size() ? Median(faults) : NAN;
  json.Set(key + "_s", s).Set(key + "_page_faults", f);
  char line[200];
  std::snprintf(line, sizeof(line), "phase   %s: %.4f s, %.3f us per variable, ", what.c_str(), s,
                s / static_cast<double>(plan.count) * 1e6);
  std::cout << line;
  if (std::isnan(f)) {
    std::cout << "page faults unknown\n";
  } else {
    std::snprintf(line, sizeof(line), "%.0f page faults\n", f);
    std::cout << line;
  }
}

double Mib(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

// "memory  Write: peak RSS +3.2 MiB over the resident set before it (...)".
void PrintMemory(const std::string& what, int64_t peak_added, const Plan& plan, JsonObject& json,
                 const std::string& key) {
  json.Set(key, peak_added >= 0 ? static_cast<double>(peak_added) : NAN);
  char line[240];
  if (peak_added < 0) {
    std::snprintf(line, sizeof(line), "memory  %s: peak RSS unknown (no /proc/self/clear_refs)\n",
                  what.c_str());
  } else {
    std::snprintf(line, sizeof(line),
                  "memory  %s: peak RSS %+.1f MiB over the resident set before it (the "
                  "variables: %.1f MiB)\n",
                  what.c_str(), Mib(peak_added), Mib(plan.bytes));
  }
  std::cout << line;
}

// "1 file", "2 files".
std::string Count(int64_t n, const std::string& noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

// "16 MiB" when exact in a binary unit (sizes are usually given so), else
// "1.0 MB".
std::string SizeText(int64_t bytes) {
  static constexpr const char* kUnits[] = {"GiB", "MiB", "KiB"};
  for (int i = 0; i < 3; ++i) {
    const int64_t unit = int64_t{1} << (10 * (3 - i));
    if (bytes >= unit && bytes % unit == 0) return std::to_string(bytes / unit) + " " + kUnits[i];
  }
  return HumanBytes(static_cast<uint64_t>(bytes));
}

std::string Describe(const Plan& plan, const BenchOptions& options, const std::string& dir) {
  std::string s = std::to_string(plan.count) + " x " + SizeText(plan.bytes / plan.count) +
                  " float32 variables" +
                  (plan.optimizer == workloads::SyntheticOptimizer::kAdam
                       ? " (" + std::to_string(plan.model_count) + " and Adam's m and v of each)"
                       : std::string()) +
                  " = " + SizeText(plan.bytes) + " (" + std::to_string(plan.bytes) +
                  " bytes), median of " + std::to_string(options.repeat) +
                  (options.repeat == 1 ? " run" : " runs") + ", ckflow on " +
                  std::to_string(MaxParallelism()) +
                  (MaxParallelism() == 1 ? " thread, in " : " threads, in ") + dir;
  return s;
}

// Every element of variable `i` holds `expected`: proves the restore moved
// the values (the reader's variables start at other values).
Status CheckRestored(ModelProgram& p, int64_t i, float expected) {
  CKFLOW_ASSIGN_OR_RETURN(std::vector<Tensor> got, p.session->Run({}, {p.vars[i]->value()}));
  for (float v : got[0].flat<float>()) {
    if (v != expected) {
      return InternalError("variable ", p.vars[i]->name(), " holds ", v,
                           " after the restore, expected ", expected);
    }
  }
  return OkStatus();
}

// Writes the checkpoint a restore benchmark reads, at `prefix`, and returns
// where its values lie. The writer goes away before any timing so that two
// models are never resident.
StatusOr<workloads::ValueLayout> WriteCheckpoint(const Plan& plan, const BenchOptions& options,
                                                 const std::string& prefix) {
  CKFLOW_ASSIGN_OR_RETURN(std::unique_ptr<ModelProgram> writer, NewModel(plan, 0.0f));
  StatusOr<std::string> written =
      writer->checkpoint->Write(prefix, *writer->session, {.files_per_device = options.files});
  if (!written.ok()) return written.status();
  writer.reset();
  return workloads::LayoutOf(prefix);
}

Status RunRestore(const Plan& plan, const BenchOptions& options, WorkDir& dir, JsonObject& json) {
  Progress progress("restore", options.repeat + 1);
  const std::string prefix = dir.NewPath("ckpt");
  CKFLOW_ASSIGN_OR_RETURN(const workloads::ValueLayout layout,
                          WriteCheckpoint(plan, options, prefix));
  const std::vector<workloads::Piece>& pieces = layout.pieces;
  const std::vector<std::string>& data_files = layout.data_files;
  std::vector<std::vector<char>> buffers;
  for (const workloads::Piece& piece : pieces) {
    buffers.emplace_back(piece.size, 1);  // touched, as the variables' buffers are
  }

  CKFLOW_ASSIGN_OR_RETURN(std::unique_ptr<ModelProgram> p, NewModel(plan, -1.0f));
  progress.Draw(1);
  std::vector<double> ckflow_s, raw_s;
  // The two calls apart: Restore matches objects and plans the restore
  // ops, InitializeOrRestore runs them (the reads).
  std::vector<double> restore_s, initialize_s, restore_faults, initialize_faults;
  int64_t peak_added = -1;
  uint32_t sink = 0;
  for (int run = 0; run < options.repeat; ++run) {
    auto raw_run = [&]() -> Status {
      const double s =
          workloads::RawReadCrc(data_files, pieces, buffers, options.raw_threads, &sink);
      if (s < 0) return InternalError(prefix, ": raw pread of its data files failed");
      raw_s.push_back(s);
      return OkStatus();
    };
    auto ckflow_run = [&]() -> Status {
      const workloads::PeakRssProbe probe;
      const int64_t faults_before = workloads::MinorPageFaults();
      const auto start = std::chrono::steady_clock::now();
      CKFLOW_ASSIGN_OR_RETURN(LoadStatus status, p->checkpoint->Restore(prefix));
      const double restored = workloads::SecondsSince(start);
      const int64_t faults_restored = workloads::MinorPageFaults();
      CKFLOW_RETURN_IF_ERROR(status.InitializeOrRestore(*p->session));
      const double total = workloads::SecondsSince(start);
      const int64_t faults_after = workloads::MinorPageFaults();
      ckflow_s.push_back(total);
      restore_s.push_back(restored);
      initialize_s.push_back(total - restored);
      if (faults_before >= 0 && faults_restored >= 0 && faults_after >= 0) {
        restore_faults.push_back(static_cast<double>(faults_restored - faults_before));
        initialize_faults.push_back(static_cast<double>(faults_after - faults_restored));
      }
      peak_added = std::max(peak_added, probe.added());
      return run == 0 ? status.AssertConsumed() : OkStatus();
    };
    CKFLOW_RETURN_IF_ERROR(RunBoth(run, raw_run, ckflow_run));
    progress.Draw(run + 2);
  }
  CKFLOW_RETURN_IF_ERROR(
      CheckRestored(*p, plan.model_count - 1, static_cast<float>(plan.model_count - 1)));
  std::cout << "ckflow bench restore: " << Describe(plan, options, dir.path()) << "\n";
  PrintResult(
      plan, Median(ckflow_s),
      "Restore + InitializeOrRestore, " + Count(static_cast<int64_t>(data_files.size()), "file"),
      Median(raw_s), "pread + CRC32C, " + Count(options.raw_threads, "thread"), json);
  PrintPhase(plan, "Restore", "restore_phase", restore_s, restore_faults, json);
  PrintPhase(plan, "InitializeOrRestore", "initialize_phase", initialize_s, initialize_faults,
             json);
  PrintMemory("Restore + InitializeOrRestore", peak_added, plan, json, "peak_rss_added_bytes");
  return OkStatus();
}

// --cold's child: a new program restores `prefix` into new variables.
int RunRestoreChild(const Plan& plan, const BenchOptions& options) {
  StatusOr<workloads::TimedRestore> timed = workloads::TimeRestoreIntoNewModel(
      options.child_prefix, plan.model_count, plan.elements, plan.optimizer);
  if (!timed.ok()) return ReportError("bench restore --child-prefix", timed.status());
  workloads::PrintChildResult(timed->seconds, timed->page_faults);
  return 0;
}

// The cold ceilings, in the order they are printed; the fastest is "raw".
std::vector<workloads::SequentialRead> ColdBaselines() {
  return {{.threads = 1},
          {.threads = 2},
          {.threads = 1, .direct = true},
          {.threads = 2, .direct = true}};
}

Status RunColdRestore(const Plan& plan, const BenchOptions& options, WorkDir& dir,
                      JsonObject& json) {
  const std::vector<workloads::SequentialRead> baselines = ColdBaselines();
  Progress progress("cold restore", options.repeat + 1);
  const std::string prefix = dir.NewPath("ckpt");
  CKFLOW_ASSIGN_OR_RETURN(const workloads::ValueLayout layout,
                          WriteCheckpoint(plan, options, prefix));
  progress.Draw(1);
  std::vector<std::string> child = {
      workloads::SelfPath(),
      "bench",
      "restore",
      "--size",
      std::to_string(plan.model_count * plan.elements * static_cast<int64_t>(sizeof(float))),
      "--count",
      std::to_string(plan.model_count),
      "--optimizer",
      options.optimizer,
      "--threads",
      std::to_string(options.threads),
      "--child-prefix",
      prefix};
  // Contender 0 is ckflow, k > 0 baselines[k - 1].
  const size_t contenders = baselines.size() + 1;
  std::vector<std::vector<double>> seconds(contenders);
  std::vector<double> peak_rss, first_touched;
  std::string direct_note;
  uint32_t sink = 0;
  for (int run = 0; run < options.repeat; ++run) {
    // The order rotates so no contender always follows the same other.
    for (size_t k = 0; k < contenders; ++k) {
      const size_t who = (k + run) % contenders;
      CKFLOW_RETURN_IF_ERROR(workloads::DropPageCache(options.drop_caches));
      if (who == 0) {
        CKFLOW_ASSIGN_OR_RETURN(workloads::ChildResult r, workloads::RunChild(child));
        seconds[0].push_back(r.seconds);
        peak_rss.push_back(static_cast<double>(r.peak_rss));
        if (r.page_faults >= 0) {
          first_touched.push_back(static_cast<double>(r.page_faults) * ::getpagesize());
        }
        continue;
      }
      StatusOr<double> s =
          workloads::SequentialReadCrc(layout.data_files, baselines[who - 1], &sink);
      if (IsUnimplemented(s.status())) {
        direct_note = s.status().message();  // O_DIRECT refused: that row stays empty
        continue;
      }
      if (!s.ok()) return s.status();
      seconds[who].push_back(*s);
    }
    progress.Draw(run + 2);
  }
  std::cout << "ckflow bench restore: " << Describe(plan, options, dir.path())
            << ", cold page cache (dropped before every run)\n";
  size_t best = 0;
  workloads::JsonArray json_baselines;
  for (size_t k = 1; k < contenders; ++k) {
    const workloads::SequentialRead& how = baselines[k - 1];
    if (seconds[k].empty()) continue;
    const double s = Median(seconds[k]);
    if (best == 0 || s < Median(seconds[best])) best = k;
    json_baselines.Add(JsonObject()
                           .Set("what", how.Describe())
                           .Set("threads", how.threads)
                           .Set("direct", how.direct)
                           .Set("seconds", s)
                           .Set("GB/s", static_cast<double>(plan.bytes) / s / 1e9));
    char line[200];
    std::snprintf(line, sizeof(line), "baseline %8.3f GB/s  %8.4f s  %s\n",
                  static_cast<double>(plan.bytes) / s / 1e9, s, how.Describe().c_str());
    std::cout << line;
  }
  if (!direct_note.empty()) std::cout << "baseline O_DIRECT not run: " << direct_note << "\n";
  if (best == 0) return InternalError("no cold baseline ran");
  json.Set("baselines", json_baselines);
  if (!direct_note.empty()) json.Set("direct_note", direct_note);
  PrintResult(plan, Median(seconds[0]),
              "Restore + InitializeOrRestore in a new process, " +
                  Count(static_cast<int64_t>(layout.data_files.size()), "file"),
              Median(seconds[best]), baselines[best - 1].Describe() + ", the fastest baseline",
              json);
  json.Set("ckflow_peak_rss_bytes", Median(peak_rss));
  char line[200];
  std::snprintf(line, sizeof(line),
                "memory  the restoring process: peak RSS %.1f MiB (the variables: %.1f MiB)\n",
                Mib(static_cast<int64_t>(Median(peak_rss))), Mib(plan.bytes));
  std::cout << line;
  // A new process pays a page fault for each page it writes first: the
  // values' own, and the restore's bookkeeping.
  if (!first_touched.empty()) {
    json.Set("ckflow_first_touched_bytes", Median(first_touched));
    std::snprintf(line, sizeof(line),
                  "memory  the restore's page faults: %.1f MiB first touched (the variables: "
                  "%.1f MiB)\n",
                  Mib(static_cast<int64_t>(Median(first_touched))), Mib(plan.bytes));
    std::cout << line;
  }
  return OkStatus();
}

Status RunSave(const Plan& plan, const BenchOptions& options, WorkDir& dir, JsonObject& json) {
  Progress progress("save", options.repeat + 1);
  CKFLOW_ASSIGN_OR_RETURN(std::unique_ptr<ModelProgram> p, NewModel(plan, 0.0f));
  std::vector<std::vector<char>> buffers(plan.count, std::vector<char>(plan.bytes / plan.count, 1));
  const std::string raw_path = dir.NewPath("raw");
  const std::string prefix = dir.NewPath("ckpt");
  const SaveOptions sync_options{.durable = options.durable, .files_per_device = options.files};
  const SaveOptions async_options{
      .durable = options.durable, .async = true, .files_per_device = options.files};
  if (options.async) {
    // The first async save allocates the snapshot buffers; the runs measure
    // the steady state of a training loop, which reuses them.
    StatusOr<std::string> warmup = p->checkpoint->Write(prefix, *p->session, async_options);
    if (!warmup.ok()) return warmup.status();
    CKFLOW_RETURN_IF_ERROR(p->checkpoint->Sync());
    WorkDir::RemoveFiles(prefix);
  }
  progress.Draw(1);
  // The raw baseline writes each thread's share into its own file, as
  // ckflow's data files are (Linux lets one writer at a time into a file),
  // and everything into one file; the faster is the ceiling ckflow is
  // compared with (one file can win when a disk, not the copy, is the limit).
  const int raw_files = options.raw_threads;
  std::vector<double> ckflow_s, raw_s, raw_one_file_s, sync_s;
  int data_files = 0;
  // Writes `prefix` and returns the seconds until Write returned; an async
  // save is then waited for, untimed, before its files are removed.
  int64_t peak_sync = -1, peak_async = -1;
  auto write = [&](const SaveOptions& save_options) -> StatusOr<double> {
    WorkDir::RemoveFiles(prefix);
    const workloads::PeakRssProbe probe;
    const auto start = std::chrono::steady_clock::now();
    StatusOr<std::string> written = p->checkpoint->Write(prefix, *p->session, save_options);
    const double seconds = workloads::SecondsSince(start);
    if (!written.ok()) return written.status();
    CKFLOW_RETURN_IF_ERROR(p->checkpoint->Sync());
    int64_t& peak = save_options.async ? peak_async : peak_sync;
    peak = std::max(peak, probe.added());
    if (data_files == 0) {
      CKFLOW_ASSIGN_OR_RETURN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix));
      data_files = reader->num_shards();
    }
    WorkDir::RemoveFiles(prefix);
    return seconds;
  };
  for (int run = 0; run < options.repeat; ++run) {
    // Both write new files and remove them untimed, so neither side's
    // writeback of dirty pages lands in the other's timing.
    auto raw_write = [&](int files, std::vector<double>* seconds) -> Status {
      const double s =
          workloads::RawWrite(raw_path, buffers, options.raw_threads, options.durable, files);
      WorkDir::RemoveFiles(raw_path);
      if (s < 0) return InternalError(raw_path, ": raw pwrite failed");
      seconds->push_back(s);
      return OkStatus();
    };
    auto raw_run = [&]() -> Status {
      CKFLOW_RETURN_IF_ERROR(raw_write(raw_files, &raw_s));
      return raw_files > 1 ? raw_write(1, &raw_one_file_s) : OkStatus();
    };
    auto ckflow_run = [&]() -> Status {
      if (options.async) {
        CKFLOW_ASSIGN_OR_RETURN(double synchronous, write(sync_options));
        sync_s.push_back(synchronous);
      }
      CKFLOW_ASSIGN_OR_RETURN(double seconds, write(options.async ? async_options : sync_options));
      ckflow_s.push_back(seconds);
      return OkStatus();
    };
    CKFLOW_RETURN_IF_ERROR(RunBoth(run, raw_run, ckflow_run));
    progress.Draw(run + 2);
  }
  std::cout << "ckflow bench save: " << Describe(plan, options, dir.path())
            << (options.durable ? ", durable" : "") << (options.async ? ", async" : "") << "\n";
  const std::string raw_what = std::string(options.durable ? "pwrite + fsync, " : "pwrite, ") +
                               Count(options.raw_threads, "thread") + ", ";
  const std::string what = std::string(options.async ? "Write async, until it returns" : "Write") +
                           (options.durable ? ", durable" : "") + ", " + Count(data_files, "file");
  double raw = Median(raw_s);
  std::string raw_layout = Count(raw_files, "file");
  double other = raw_one_file_s.empty() ? 0 : Median(raw_one_file_s);
  std::string other_layout = Count(1, "file");
  if (other > 0 && other < raw) {
    std::swap(raw, other);
    std::swap(raw_layout, other_layout);
  }
  PrintResult(plan, Median(ckflow_s), what, raw, raw_what + raw_layout, json);
  json.Set("data_files", data_files);
  if (other > 0) {
    json.Set("raw_slower_layout_s", other);
    char line[200];
    std::snprintf(line, sizeof(line), "raw, slower layout: %.3f GB/s  %.4f s  %s\n",
                  static_cast<double>(plan.bytes) / other / 1e9, other,
                  (raw_what + other_layout).c_str());
    std::cout << line;
  }
  if (options.async) {
    char line[160];
    std::snprintf(line, sizeof(line),
                  "stall / synchronous Write = %.3f  (the synchronous Write took %.4f s)\n",
                  Median(ckflow_s) / Median(sync_s), Median(sync_s));
    std::cout << line;
    json.Set("sync_s", Median(sync_s)).Set("stall_vs_sync", Median(ckflow_s) / Median(sync_s));
  }
  if (peak_sync >= 0 || !options.async) {
    PrintMemory("Write", peak_sync, plan, json, "peak_rss_added_bytes");
  }
  if (options.async) {
    PrintMemory("Write async, until its files are written", peak_async, plan, json,
                "async_peak_rss_added_bytes");
  }
  if (options.memory_saves > 0) {
    // A training loop's saves, one after another: the resident set must stay
    // flat (an async save's snapshot buffers are reused, not reallocated).
    const SaveOptions& save_options = options.async ? async_options : sync_options;
    const workloads::PeakRssProbe probe;
    int64_t after_first = 0;
    for (int i = 0; i < options.memory_saves; ++i) {
      WorkDir::RemoveFiles(prefix);
      StatusOr<std::string> written = p->checkpoint->Write(prefix, *p->session, save_options);
      if (!written.ok()) return written.status();
      CKFLOW_RETURN_IF_ERROR(p->checkpoint->Sync());
      if (i == 0) after_first = workloads::ReadMemoryUse().rss;
    }
    WorkDir::RemoveFiles(prefix);
    const int64_t after_last = workloads::ReadMemoryUse().rss;
    char line[240];
    std::snprintf(line, sizeof(line),
                  "memory  %d %s saves: resident %.1f MiB after the first, %.1f MiB after the "
                  "last (%+.1f MiB); peak %+.1f MiB over the resident set before them\n",
                  options.memory_saves, options.async ? "async" : "sync", Mib(after_first),
                  Mib(after_last), Mib(after_last - after_first), Mib(probe.added()));
    std::cout << line;
    json.Set("memory_saves", options.memory_saves)
        .Set("memory_saves_rss_after_first_bytes", after_first)
        .Set("memory_saves_rss_after_last_bytes", after_last)
        .Set("memory_saves_peak_added_bytes", probe.added());
  }
  return OkStatus();
}

int RunBench(Mode mode, const BenchOptions& options) {
  const char* command = mode == Mode::kRestore ? "bench restore" : "bench save";
  StatusOr<Plan> plan = MakePlan(options);
  if (!plan.ok()) return ReportError(command, plan.status());
  std::optional<tbb::global_control> limit;
  if (options.threads > 0) {
    limit.emplace(tbb::global_control::max_allowed_parallelism, options.threads);
  }
  if (!options.child_prefix.empty()) return RunRestoreChild(*plan, options);
  if (options.cold) {
    // A directory in memory is never read from a device: refused before
    // anything is written.
    const std::string memory =
        options.dir.empty() ? "" : workloads::InMemoryFileSystem(options.dir);
    if (!memory.empty()) {
      return ReportError(command,
                         InvalidArgumentError("--cold --dir ", options.dir, " is on ", memory,
                                              ", whose files are always in memory: nothing would "
                                              "be read from a disk. Give a directory on a disk "
                                              "(the default is a new one under /var/tmp)"));
    }
    if (Status drop = workloads::CheckCanDropPageCache(options.drop_caches); !drop.ok()) {
      std::cerr << "ckflow " << command << " --cold: not measured: " << drop.message() << "\n";
      return kExitNotPermitted;
    }
  }
  StatusOr<std::unique_ptr<WorkDir>> dir =
      WorkDir::Create(options.dir, options.cold ? fs::path("/var/tmp") : fs::path());
  if (!dir.ok()) return ReportError(command, dir.status());
  if (options.cold && !workloads::InMemoryFileSystem((*dir)->path()).empty()) {
    return ReportError(command,
                       InvalidArgumentError("--cold: ", (*dir)->path(),
                                            " is in memory (tmpfs); give --dir on a disk"));
  }
  JsonObject json;
  json.Set("command", command)
      .Set("bytes", plan->bytes)
      .Set("count", plan->count)
      .Set("model_count", plan->model_count)
      .Set("optimizer", workloads::OptimizerName(plan->optimizer))
      .Set("repeat", options.repeat)
      .Set("threads", static_cast<int64_t>(MaxParallelism()))
      .Set("raw_threads", options.raw_threads)
      .Set("durable", options.durable)
      .Set("async", options.async)
      .Set("cold", options.cold)
      .Set("dir", (*dir)->path());
  const Status status = mode == Mode::kSave ? RunSave(*plan, options, **dir, json)
                        : options.cold      ? RunColdRestore(*plan, options, **dir, json)
                                            : RunRestore(*plan, options, **dir, json);
  if (!status.ok()) return ReportError(command, status);
  if (!options.json.empty() && !json.WriteTo(options.json)) {
    return ReportError(command, InvalidArgumentError("--json ", options.json,
                                                     ": cannot write: ", std::strerror(errno)));
  }
  return 0;
}

void AddBenchOptions(CLI::App* sub, BenchOptions& options, bool save) {
  sub->add_option("--size", options.size,
                  "bytes of the model's variable values in all: 1GiB, 256MiB, 64KiB, 1GB, 1000 "
                  "(an optimizer's slots add their own)")
      ->capture_default_str();
  sub->add_option("--count", options.count, "number of float32 variables")->capture_default_str();
  sub->add_option("--optimizer", options.optimizer,
                  "the model's optimizer: none, or adam (its slots m and v for every variable, "
                  "as a checkpoint of training holds)")
      ->capture_default_str();
  sub->add_option("--dir", options.dir,
                  "directory to write in (default: a new temporary directory, removed after)");
  sub->add_option("--threads", options.threads, "oneTBB threads for ckflow (default 0: every core)")
      ->capture_default_str();
  sub->add_option("--raw-threads", options.raw_threads, "threads of the raw baseline")
      ->capture_default_str();
  sub->add_option("--repeat", options.repeat, "runs; the median is reported")
      ->capture_default_str();
  sub->add_option("--files", options.files,
                  std::string(save ? "data files to save into" : "data files of the checkpoint") +
                      " (SaveOptions::files_per_device; 0: one per thread for 32 MiB a file "
                      "or more)")
      ->capture_default_str();
  sub->add_option("--json", options.json,
                  "also write the results to this file as one JSON object (bench/report.py)");
  if (!save) {
    sub->add_flag("--cold", options.cold,
                  "from a cold page cache: the checkpoint on a disk (not tmpfs), the cache "
                  "dropped before every run (needs root; exit 3 where not permitted), ckflow "
                  "restoring in a new process, beside sequential reads of the same files "
                  "(1 and 2 threads, with and without O_DIRECT)");
    sub->add_option("--drop-caches", options.drop_caches,
                    "with --cold: the file \"1\" is written to, to drop the page cache")
        ->capture_default_str();
    // Internal: how --cold runs ckflow in a new process.
    sub->add_option("--child-prefix", options.child_prefix)->group("");
  }
  if (save) {
    sub->add_flag("--durable", options.durable, "fsync what is written (ckflow and raw)");

    sub->add_flag("--async", options.async,
                  "time an async Write until it returns (the loop's stall), beside a synchronous "
                  "one");
    sub->add_option("--memory-saves", options.memory_saves,
                    "after the timed runs, save this many times more (async with --async) and "
                    "print the resident set after the first and the last")
        ->capture_default_str();
  }
}

}  // namespace

Command AddBenchCommand(CLI::App& app) {
  auto options = std::make_shared<BenchOptions>();
  CLI::App* sub = app.add_subcommand(
      "bench", "Time checkpoint restore or save of a synthetic model beside raw pread/pwrite");
  sub->require_subcommand(1);
  CLI::App* restore = sub->add_subcommand(
      "restore", "Restore + InitializeOrRestore vs pread + CRC32C of the same bytes");
  CLI::App* save = sub->add_subcommand("save", "Checkpoint::Write vs pwrite of the same bytes");
  AddBenchOptions(restore, *options, /*save=*/false);
  AddBenchOptions(save, *options, /*save=*/true);
  return {sub, [options, restore] {
            return RunBench(restore->parsed() ? Mode::kRestore : Mode::kSave, *options);
          }};
}

}  // namespace ckflow::tools
