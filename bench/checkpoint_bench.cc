// Restore and save through the whole user path, each beside its raw
// baseline measured in the same iteration on the same files:
//
//   Restore       Restore + InitializeOrRestore into a session's existing
//                 variables (warm cache, every CRC verified) vs pread into
//                 touched buffers + CRC32C on as many threads.
//   RestoreSmall  many 1 KiB variables, including object matching and
//                 restore-op creation in a fresh graph: us per variable, vs
//                 pread + CRC32C of each value into a new buffer; warm, and
//                 cold (CPU caches evicted before each, so no count restores
//                 out of what its previous iteration left cached).
//   Save          Checkpoint::Write vs pwrite of the same bytes; durable:
//                 both fsync.
//   RestoreOnCreate  an eager program's restore-on-create of the small
//                 variables (created by their owner after Restore, the
//                 initializer skipped) vs the graph program creating and
//                 restoring the same; both timed whole.
//   RestoreCast   a bfloat16 checkpoint restored into float32 variables
//                 (RestoreOptions::cast) vs the float32 checkpoint of the
//                 same variables.
//   SaveAsync     the stall of Write({.async = true}) vs a synchronous
//                 Write with the same durability, and its snapshot vs
//                 memcpy of the same bytes.
//   DeepModel     a program's first save and first restore of the small
//                 variables spread over many modules (layers of 10) vs the
//                 same variables in one module.
//   SaveIncremental  fine-tuning: a frozen base and a trainable head, the
//                 head changed before each CheckpointManager save (5 kept).
//                 SaveOptions::incremental (the base's files linked) vs the
//                 raw write of the head's bytes into a new file with the
//                 oldest of 5 removed, and vs a full save of the same
//                 model; bytes written per save, and the disk 5 kept
//                 checkpoints use.
//
// Arguments are MiB/count/threads. CKFLOW_BENCH_MIB (default 1024),
// CKFLOW_BENCH_COUNT (64) and CKFLOW_BENCH_SMALL (20000) set the default
// case; CKFLOW_BENCH_SCALING=1 adds 256 MiB and 4 GiB, 2k and 200k small
// variables, and 1 thread beside 2. Counters: GB/s of ckflow and of the
// baseline, and ratio = baseline time / ckflow time (> 1: ckflow faster).

#include <benchmark/benchmark.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <tbb/global_control.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <set>
#include <vector>

#include "base/cast.h"
#include "bundle/bundle_format.h"
#include "bundle/bundle_reader.h"
#include "bundle/bundle_writer.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_management.h"
#include "ops/array_ops.h"
#include "ops/initializers.h"
#include "workloads/model_program.h"
#include "workloads/raw_io.h"

namespace ckflow {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using workloads::Piece;
using workloads::SecondsSince;

int64_t EnvInt(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoll(v) : fallback;
}

// A failure to build the synthetic model is a bug in the bench.
std::unique_ptr<workloads::ModelProgram> Model(int64_t count, int64_t elements, bool initialize,
                                               int64_t layers = 1) {
  StatusOr<std::unique_ptr<workloads::ModelProgram>> m =
      workloads::ModelProgram::Synthetic(count, elements, 0.0f, initialize, layers);
  CKFLOW_CHECK(m.ok());
  return std::move(m).value();
}

std::string BenchDir() {
  static const std::string dir = [] {
    fs::path d = fs::temp_directory_path() / ("ckflow_bench_" + std::to_string(::getpid()));
    fs::create_directories(d);
    return d.string();
  }();
  return dir;
}

// Removes a checkpoint's files (or a raw baseline's), so the next write of
// `prefix` creates new files as the raw baseline does (a CheckpointManager
// writes new names; a rename over an old file would make ext4 flush it
// early).
void RemoveCheckpoint(const std::string& prefix) {
  std::error_code ec;
  fs::remove(prefix, ec);
  const std::string stem = fs::path(prefix).filename().string() + ".";
  for (const auto& e : fs::directory_iterator(fs::path(prefix).parent_path(), ec)) {
    if (e.path().filename().string().rfind(stem, 0) == 0) fs::remove(e.path(), ec);
  }
}

int64_t MinorFaults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

void ReportRatio(benchmark::State& state, double bytes, double ckflow_s, double raw_s,
                 const std::string& baseline) {
  state.counters["GB/s"] = bytes / ckflow_s / 1e9;
  state.counters[baseline + "_GB/s"] = bytes / raw_s / 1e9;
  state.counters["ratio"] = raw_s / ckflow_s;
}

// args: MiB, variables, threads.
void BM_Restore(benchmark::State& state) {
  const int64_t bytes = state.range(0) << 20;
  const int64_t count = state.range(1);
  const int threads = static_cast<int>(state.range(2));
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, threads);
  const int64_t elements = bytes / count / 4;
  std::string path;
  {
    auto writer = Model(count, elements, true);
    path = writer->checkpoint->Write(BenchDir() + "/restore", *writer->session).value();
  }
  const workloads::ValueLayout layout = workloads::LayoutOf(path).value();
  const std::vector<Piece>& pieces = layout.pieces;
  const std::vector<std::string>& data = layout.data_files;
  std::vector<std::vector<char>> buffers;
  for (const Piece& piece : pieces) {
    buffers.emplace_back(piece.size, 1);  // touched, as the variables' buffers are
  }
  auto p = Model(count, elements, true);
  uint32_t sink = 0;
  auto restore = [&]() -> double {
    auto start = Clock::now();
    LoadStatus status = p->checkpoint->Restore(path).value();
    Status s = status.InitializeOrRestore(*p->session);
    if (!s.ok()) state.SkipWithError(s.ToString().c_str());
    return SecondsSince(start);
  };
  // The first pass of a process into its buffers is reported apart, not
  // averaged into the timed iterations: on a 2-vCPU Firecracker VM the
  // kernel's first copy into pages the process has
  // already written runs at 0.7 GB/s, raw pread and ckflow alike, and
  // 9-18 GB/s from the second on, so a mean over a few iterations would measure
  // how many there were.
  const double raw_first = workloads::RawReadCrc(data, pieces, buffers, threads, &sink);
  if (raw_first < 0) {
    state.SkipWithError(("raw baseline: cannot read the data files of " + path).c_str());
    return;
  }
  const double first = restore();
  double ckflow_s = 0, raw_s = 0;
  for (auto _ : state) {
    const double raw = workloads::RawReadCrc(data, pieces, buffers, threads, &sink);
    if (raw < 0) {
      state.SkipWithError(("raw baseline: cannot read the data files of " + path).c_str());
      break;
    }
    raw_s += raw;
    const double t = restore();
    ckflow_s += t;
    state.SetIterationTime(t);
  }
  benchmark::DoNotOptimize(sink);
  const double total = static_cast<double>(bytes) * state.iterations();
  ReportRatio(state, total, ckflow_s, raw_s, "raw_pread_crc");
  state.counters["first_GB/s"] = static_cast<double>(bytes) / first / 1e9;
  state.counters["raw_first_GB/s"] = static_cast<double>(bytes) / raw_first / 1e9;
  state.SetBytesProcessed(static_cast<int64_t>(total));
}

// The checkpoint at `from` written again at `to` with its float32 values
// stored as `dtype` (converted by CastElements), everything else as is: the
// same program's checkpoint, as a bfloat16 export of it would be.
std::string StoredAs(const std::string& from, const std::string& to, DataType dtype) {
  std::unique_ptr<BundleReader> reader = BundleReader::Open(from).value();
  std::unique_ptr<BundleWriter> writer = BundleWriter::Create(to).value();
  for (const BundleEntry& e : reader->entries()) {
    Tensor value = reader->Lookup(e.key).value();
    if (value.dtype() == DT_FLOAT && e.key.find("VARIABLE_VALUE") != std::string::npos) {
      Tensor narrow(dtype, value.shape());
      CastElements(DT_FLOAT, value.raw_data(), dtype, narrow.raw_data(), value.NumElements());
      value = std::move(narrow);
    }
    CKFLOW_CHECK(writer->Add(e.key, value).ok());
  }
  CKFLOW_CHECK(writer->Finish().ok());
  return to;
}

// args: MiB (of float32 values), variables, threads. RestoreOptions::cast's
// cost: a bfloat16 checkpoint restored into float32 variables (kWidening,
// converted as read) against the same variables restored from the float32
// checkpoint, alternating in each iteration; both warm, every CRC checked.
// ratio = same-dtype time / converting time (> 1: the conversion is faster,
// as it reads half the bytes).
void BM_RestoreCast(benchmark::State& state) {
  const int64_t bytes = state.range(0) << 20;
  const int64_t count = state.range(1);
  const int threads = static_cast<int>(state.range(2));
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, threads);
  const int64_t elements = bytes / count / 4;
  std::string same;
  {
    auto writer = Model(count, elements, true);
    same = writer->checkpoint->Write(BenchDir() + "/cast_f32", *writer->session).value();
  }
  const std::string narrow = StoredAs(same, BenchDir() + "/cast_bf16", DT_BFLOAT16);
  auto p = Model(count, elements, true);
  auto restore = [&](const std::string& path, RestoreOptions options) -> double {
    auto start = Clock::now();
    LoadStatus status = p->checkpoint->Restore(path, options).value();
    Status s = status.InitializeOrRestore(*p->session);
    if (!s.ok()) state.SkipWithError(s.ToString().c_str());
    return SecondsSince(start);
  };
  // Untimed first passes: the first copy into a process's pages is slow
  // (see BM_Restore).
  restore(same, {});
  restore(narrow, {.cast = CastRule::kWidening});
  double cast_s = 0, same_s = 0;
  for (auto _ : state) {
    same_s += restore(same, {});
    const double t = restore(narrow, {.cast = CastRule::kWidening});
    cast_s += t;
    state.SetIterationTime(t);
  }
  const double total = static_cast<double>(bytes) * state.iterations();
  ReportRatio(state, total, cast_s, same_s, "same_dtype");
  state.SetBytesProcessed(static_cast<int64_t>(total));
}

// Reads through a buffer several times the last-level cache, so what a
// benchmark touched in its previous iteration is back in DRAM. Without it a
// restore of 2,000 variables finds its whole working set (graph, index,
// variables, file pages) still cached from the iteration before, which the
// first restore of a process never does, while 200,000 never fit: the
// per-variable figures across counts would not compare like with like.
class CacheEvictor {
 public:
  CacheEvictor() {
    // Capped: a VM may report a last-level cache no single CPU has (508
    // MiB, from CPUID, on a 2-vCPU EPYC VM), and each
    // eviction would then read gigabytes.
    const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    const size_t l3_bytes = l3 > 0 ? static_cast<size_t>(l3) : 0;
    const size_t bytes = std::clamp<size_t>(4 * l3_bytes, size_t{64} << 20, size_t{256} << 20);
    lines_.resize(bytes / sizeof(Line));
    for (size_t i = 0; i < lines_.size(); ++i) lines_[i].word[0] = i;
  }

  // Reading, not writing: written lines would leave the restore that
  // follows paying for their write-back.
  void Evict() {
    uint64_t sum = 0;
    for (const Line& line : lines_) sum += line.word[0];
    benchmark::DoNotOptimize(sum);
  }

 private:
  struct alignas(64) Line {
    uint64_t word[8];
  };
  std::vector<Line> lines_;
};

// args: variables (1 KiB each), threads, cold. Each iteration restores into
// a fresh graph, so object matching and restore-op creation are in the time;
// building the user's own graph and session is not. cold = 1 evicts the CPU
// caches (untimed) before the raw baseline and before the restore alike.
void BM_RestoreSmall(benchmark::State& state) {
  const int64_t count = state.range(0);
  const int threads = static_cast<int>(state.range(1));
  std::unique_ptr<CacheEvictor> evictor;
  if (state.range(2) != 0) evictor = std::make_unique<CacheEvictor>();
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, threads);
  std::string path;
  {
    auto writer = Model(count, 256, true);
    path = writer->checkpoint->Write(BenchDir() + "/small", *writer->session).value();
  }
  const workloads::ValueLayout layout = workloads::LayoutOf(path).value();
  const std::vector<Piece>& pieces = layout.pieces;
  const std::vector<std::string>& data = layout.data_files;
  double total_s = 0, match_s = 0, index_s = 0, raw_s = 0;
  uint32_t sink = 0;
  int64_t faults = 0;
  for (auto _ : state) {
    {
      // The machine's own cost per variable at this count: each value read
      // on its own into a new buffer and checksummed, nothing else.
      std::vector<std::unique_ptr<char[]>> fresh;
      if (evictor) evictor->Evict();
      const double raw = workloads::RawReadCrcFresh(data, pieces, threads, &sink, &fresh);
      if (raw < 0) {
        state.SkipWithError(("raw baseline: cannot read the data files of " + path).c_str());
        break;
      }
      raw_s += raw;
    }
    {
      // For scale: parsing the index alone (Restore does this once).
      auto start = Clock::now();
      CKFLOW_CHECK(BundleReader::Open(path).ok());
      index_s += SecondsSince(start);
    }
    state.PauseTiming();
    auto p = Model(count, 256, false);
    if (evictor) evictor->Evict();
    state.ResumeTiming();
    const int64_t faults_before = MinorFaults();
    auto start = Clock::now();
    LoadStatus status = p->checkpoint->Restore(path).value();
    match_s += SecondsSince(start);
    Status s = status.InitializeOrRestore(*p->session);
    double t = SecondsSince(start);
    faults += MinorFaults() - faults_before;
    if (!s.ok()) state.SkipWithError(s.ToString().c_str());
    total_s += t;
    state.SetIterationTime(t);
    state.PauseTiming();
    p.reset();
    state.ResumeTiming();
  }
  benchmark::DoNotOptimize(sink);
  state.counters["us_per_variable"] = total_s / state.iterations() / count * 1e6;
  state.counters["raw_pread_crc_fresh_us_per_variable"] = raw_s / state.iterations() / count * 1e6;
  state.counters["ratio"] = raw_s / total_s;
  // Of which: Restore (index, object matching, restore-op creation).
  state.counters["match_us_per_variable"] = match_s / state.iterations() / count * 1e6;
  state.counters["index_us_per_variable"] = index_s / state.iterations() / count * 1e6;
  // First touches of new memory (each a kernel page fault). Near zero here
  // at every count, since malloc reuses what the last iteration freed: the
  // growth of us_per_variable with the count is cache misses, not faults.
  state.counters["page_faults_per_variable"] =
      static_cast<double>(faults) / static_cast<double>(state.iterations() * count);
}

// args: variables (1 KiB each), layers. A deep model: the variables spread
// over `layers` modules, against the same variables as one module's
// children, each program built anew (untimed) for its first save and,
// into another new program, its first restore. So the object walk, the
// save plan and ops, matching and restore-op creation are all in the time,
// as in a program's first save and first restore. The two shapes take
// turns; counters: each one's µs per variable, and deep / flat (1: the
// layering costs nothing).
void BM_DeepModel(benchmark::State& state) {
  const int64_t count = state.range(0);
  const int64_t layers = state.range(1);
  double save_s[2] = {0, 0}, restore_s[2] = {0, 0};  // [flat, deep]
  int64_t iteration = 0;
  for (auto _ : state) {
    double deep_s = 0;
    for (int64_t turn = 0; turn < 2; ++turn) {
      const int deep = static_cast<int>((turn + iteration) % 2);
      const std::string prefix = BenchDir() + (deep ? "/deep" : "/flat");
      RemoveCheckpoint(prefix);
      auto writer = Model(count, 256, true, deep ? layers : 1);
      auto start = Clock::now();
      StatusOr<std::string> path = writer->checkpoint->Write(prefix, *writer->session);
      const double saved = SecondsSince(start);
      writer.reset();
      auto reader = Model(count, 256, false, deep ? layers : 1);
      start = Clock::now();
      StatusOr<LoadStatus> status =
          path.ok() ? reader->checkpoint->Restore(*path) : StatusOr<LoadStatus>(path.status());
      Status s = status.ok() ? status->InitializeOrRestore(*reader->session) : status.status();
      const double restored = SecondsSince(start);
      if (s.ok()) s = status->AssertConsumed();
      if (!s.ok()) {
        state.SkipWithError(s.ToString().c_str());
        return;
      }
      save_s[deep] += saved;
      restore_s[deep] += restored;
      if (deep) deep_s = saved + restored;
    }
    state.SetIterationTime(deep_s);
    ++iteration;
  }
  const double per_variable = 1e6 / static_cast<double>(state.iterations() * count);
  state.counters["deep_save_us_per_variable"] = save_s[1] * per_variable;
  state.counters["flat_save_us_per_variable"] = save_s[0] * per_variable;
  state.counters["deep_vs_flat_save"] = save_s[1] / save_s[0];
  state.counters["deep_restore_us_per_variable"] = restore_s[1] * per_variable;
  state.counters["flat_restore_us_per_variable"] = restore_s[0] * per_variable;
  state.counters["deep_vs_flat_restore"] = restore_s[1] / restore_s[0];
}

// args: variables (1 KiB each). Restore-on-create in an eager program:
// Restore before anything exists, then each variable created by its owner
// (Variable::CreateTracked, as a layer's weights and an optimizer's slots
// are: its value read as it appears, through the one reader Restore opened,
// and its initializer never run), against the graph program in the same
// iteration: create the same variables, Restore, InitializeOrRestore. Both
// timed whole, variable creation included. Beside them, the eager program
// that creates each variable first and tracks it after (TensorFlow's
// `module.v = tf.Variable(...)`: initialized, then restored).
// Counter eager_vs_graph: eager time / graph time (target: <= 2).
void BM_RestoreOnCreate(benchmark::State& state) {
  const int64_t count = state.range(0);
  std::string path;
  {
    auto writer = Model(count, 256, true);
    path = writer->checkpoint->Write(BenchDir() + "/on_create", *writer->session).value();
  }
  std::vector<std::string> names;
  for (int64_t i = 0; i < count; ++i) {
    names.emplace_back("v");  // not "v" + to_string: GCC 12 warns falsely (-Wrestrict)
    names.back() += std::to_string(i);
  }
  // One eager program: Restore, then `create(scope, module, name)` for each.
  auto eager = [&](const auto& create) {
    const auto start = Clock::now();
    Scope scope = Scope::NewEagerScope();
    auto model = std::make_shared<workloads::Module>();
    Checkpoint checkpoint(scope, {{"model", model}});
    LoadStatus status = checkpoint.Restore(path).value();
    for (const std::string& name : names) create(scope, *model, name);
    Status s = status.AssertConsumed();
    if (!s.ok()) state.SkipWithError(s.ToString().c_str());
    const double t = SecondsSince(start);
    state.PauseTiming();  // the scope's teardown is not timed
    return t;
  };
  Tensor zeros(DT_FLOAT, TensorShape({256}));
  std::memset(zeros.raw_data(), 0, 256 * sizeof(float));
  double eager_s = 0, graph_s = 0, assigned_s = 0;
  for (auto _ : state) {
    auto start = Clock::now();
    {
      auto p = Model(count, 256, false);
      LoadStatus status = p->checkpoint->Restore(path).value();
      Status s = status.InitializeOrRestore(*p->session);
      if (!s.ok()) state.SkipWithError(s.ToString().c_str());
      graph_s += SecondsSince(start);
      state.PauseTiming();
    }
    state.ResumeTiming();
    const double t =
        eager([](const Scope& scope, workloads::Module& model, const std::string& name) {
          Variable::CreateTracked(model, scope, name, DT_FLOAT, TensorShape({256}),
                                  initializers::Zeros());
        });
    eager_s += t;
    state.SetIterationTime(t);
    state.ResumeTiming();
    assigned_s += eager([&](const Scope& scope, workloads::Module& model, const std::string& name) {
      model.Track(name, Variable::Create(scope, name, ops::Const(scope, zeros)));
    });
    state.ResumeTiming();
  }
  const auto n = static_cast<double>(state.iterations() * count);
  state.counters["eager_us_per_variable"] = eager_s / n * 1e6;
  state.counters["graph_us_per_variable"] = graph_s / n * 1e6;
  state.counters["eager_vs_graph"] = eager_s / graph_s;
  // Created, then tracked: the initializer runs before the restore.
  state.counters["created_then_tracked_us_per_variable"] = assigned_s / n * 1e6;
}

// args: MiB, variables, threads, durable.
void BM_Save(benchmark::State& state) {
  const int64_t bytes = state.range(0) << 20;
  const int64_t count = state.range(1);
  const int threads = static_cast<int>(state.range(2));
  const bool durable = state.range(3) != 0;
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, threads);
  auto p = Model(count, bytes / count / 4, true);
  std::vector<std::vector<char>> buffers(count, std::vector<char>(bytes / count, 1));
  double ckflow_s = 0, raw_s = 0, raw_one_file_s = 0;
  for (auto _ : state) {
    // Each write starts with no dirty pages left by the one before, or
    // writeback throttling would charge one side for the other's bytes.
    // The baseline writes a file per thread, as ckflow does by default
    // (Linux lets one writer at a time into a file), and one file.
    const std::string raw = BenchDir() + "/raw";
    state.PauseTiming();
    ::sync();
    state.ResumeTiming();
    raw_s += workloads::RawWrite(raw, buffers, threads, durable, threads);
    state.PauseTiming();
    RemoveCheckpoint(raw);
    ::sync();
    raw_one_file_s += workloads::RawWrite(raw, buffers, threads, durable, 1);
    RemoveCheckpoint(raw);
    state.ResumeTiming();
    const std::string prefix = BenchDir() + "/save";
    state.PauseTiming();
    RemoveCheckpoint(prefix);
    ::sync();
    state.ResumeTiming();
    auto start = Clock::now();
    StatusOr<std::string> saved = p->checkpoint->Write(prefix, *p->session, {.durable = durable});
    double t = SecondsSince(start);
    if (!saved.ok()) state.SkipWithError(saved.status().ToString().c_str());
    ckflow_s += t;
    state.SetIterationTime(t);
  }
  const double total = static_cast<double>(bytes) * state.iterations();
  // Against the faster layout: one file can win when a disk is the limit.
  ReportRatio(state, total, ckflow_s, std::min(raw_s, raw_one_file_s),
              durable ? "raw_pwrite_fsync" : "raw_pwrite");
  state.counters["raw_file_per_thread_GB/s"] = total / raw_s / 1e9;
  state.counters["raw_one_file_GB/s"] = total / raw_one_file_s / 1e9;
  state.SetBytesProcessed(static_cast<int64_t>(total));
}

// args: MiB, variables, threads, durable. The training-loop stall of an
// async save (Write returning after the snapshot) against a synchronous
// save of the same model with the same durability in the same iteration,
// and the snapshot's speed against a plain memcpy of the same bytes into
// touched buffers. durable:1 is the case async saving is for: the fsyncs
// then run in the background too.
void BM_SaveAsync(benchmark::State& state) {
  const int64_t bytes = state.range(0) << 20;
  const int64_t count = state.range(1);
  const int threads = static_cast<int>(state.range(2));
  const bool durable = state.range(3) != 0;
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, threads);
  auto p = Model(count, bytes / count / 4, true);
  std::vector<std::vector<char>> from(count, std::vector<char>(bytes / count, 1));
  std::vector<std::vector<char>> to(count, std::vector<char>(bytes / count, 2));
  // The first async save allocates the snapshot buffers; the loop measures
  // the steady state, where they are reused.
  CKFLOW_CHECK(
      p->checkpoint
          ->Write(BenchDir() + "/async-warmup", *p->session, {.durable = durable, .async = true})
          .ok());
  CKFLOW_CHECK(p->checkpoint->Sync().ok());
  double stall_s = 0, sync_s = 0, memcpy_s = 0;
  for (auto _ : state) {
    auto start = Clock::now();
    workloads::OnThreads(threads, from.size(), [&](size_t k) {
      std::memcpy(to[k].data(), from[k].data(), from[k].size());
    });
    memcpy_s += SecondsSince(start);
    const std::string prefix = BenchDir() + "/async";
    RemoveCheckpoint(prefix);
    RemoveCheckpoint(prefix + "s");
    ::sync();
    start = Clock::now();
    CKFLOW_CHECK(p->checkpoint->Write(prefix + "s", *p->session, {.durable = durable}).ok());
    sync_s += SecondsSince(start);
    ::sync();
    start = Clock::now();
    StatusOr<std::string> saved =
        p->checkpoint->Write(prefix, *p->session, {.durable = durable, .async = true});
    const double stall = SecondsSince(start);
    if (!saved.ok()) state.SkipWithError(saved.status().ToString().c_str());
    stall_s += stall;
    state.SetIterationTime(stall);
    Status synced = p->checkpoint->Sync();
    if (!synced.ok()) state.SkipWithError(synced.ToString().c_str());
  }
  const double total = static_cast<double>(bytes) * state.iterations();
  state.counters["stall_vs_sync_save"] = stall_s / sync_s;
  state.counters["snapshot_GB/s"] = total / stall_s / 1e9;
  state.counters["memcpy_GB/s"] = total / memcpy_s / 1e9;
  state.counters["snapshot_vs_memcpy"] = memcpy_s / stall_s;
}

// Counts the bytes written through it: what a save puts on the disk.
class CountingFileSystem final : public FileSystemWrapper {
 public:
  CountingFileSystem() : FileSystemWrapper(FileSystem::Default()) {}
  int64_t written() const { return written_.load(); }

  StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    CKFLOW_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, target()->NewWritableFile(path));
    return std::unique_ptr<WritableFile>(new Counted(std::move(file), &written_));
  }

 private:
  class Counted final : public WritableFile {
   public:
    Counted(std::unique_ptr<WritableFile> file, std::atomic<int64_t>* written)
        : file_(std::move(file)), written_(written) {}
    Status WriteAt(uint64_t offset, std::string_view data) override {
      *written_ += static_cast<int64_t>(data.size());
      return file_->WriteAt(offset, data);
    }
    Status Sync() override { return file_->Sync(); }
    void StartWriteback(uint64_t offset, size_t n) override { file_->StartWriteback(offset, n); }
    Status Close() override { return file_->Close(); }
    const std::string& path() const override { return file_->path(); }

   private:
    std::unique_ptr<WritableFile> file_;
    std::atomic<int64_t>* written_;
  };
  std::atomic<int64_t> written_{0};
};

// Bytes of disk the files in `dir` take, each file counted once however
// many names (hard links) it has.
int64_t DiskUsed(const std::string& dir) {
  std::set<std::pair<dev_t, ino_t>> seen;
  int64_t bytes = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    struct stat st;
    if (::stat(e.path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (seen.emplace(st.st_dev, st.st_ino).second) bytes += int64_t{st.st_blocks} * 512;
  }
  return bytes;
}

// args: base MiB, head MiB, threads, durable. Fine-tuning: a frozen base
// of 16 MiB variables and a head of 16 MiB variables that the loop changes
// before each save (the training steps between saves cost the save
// nothing, so the bench runs none), saved by a CheckpointManager keeping 5
// with SaveOptions::incremental. The baseline, in each iteration: the same
// file work done raw, a new file of the head's bytes written (pwrite, with
// fsync if durable) and, as the manager's retention deletes the oldest
// kept checkpoint, the oldest of 5 kept raw files removed; the write alone
// is reported too. Then, apart (its 1 GiB writes would slow whatever comes
// next), a manager over the same model saving in full.
// ratio = raw time / incremental save time (target >= 1/1.5).
void BM_SaveIncremental(benchmark::State& state) {
  constexpr int64_t kVariableMiB = 16;
  constexpr int kKeep = 5;
  const int64_t base_count = state.range(0) / kVariableMiB;
  const int64_t head_count = std::max<int64_t>(1, state.range(1) / kVariableMiB);
  const int threads = static_cast<int>(state.range(2));
  const bool durable = state.range(3) != 0;
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, threads);
  const int64_t elements = (kVariableMiB << 20) / 4;
  auto p = Model(base_count + head_count, elements, true);
  // The head: the last variables, each + 1 per step.
  std::vector<Output> step;
  Output ones = ops::Fill(p->scope, ops::Const(p->scope, std::vector<int64_t>{elements}, {1}),
                          ops::Const(p->scope, 1.0f));
  for (int64_t i = base_count; i < base_count + head_count; ++i) {
    step.push_back(p->vars[i]->AssignAdd(p->scope, ones));
  }
  CountingFileSystem counting;
  Checkpoint incremental_root(p->scope, {{"model", p->model}}, {.file_system = &counting});
  Checkpoint full_root(p->scope, {{"model", p->model}}, {.file_system = &counting});
  const std::string inc_dir = BenchDir() + "/incremental";
  const std::string full_dir = BenchDir() + "/full";
  const std::string raw_dir = BenchDir() + "/raw_rotation";
  for (const std::string& d : {inc_dir, full_dir, raw_dir}) fs::remove_all(d);
  fs::create_directories(raw_dir);
  auto inc = CheckpointManager::Create(
                 incremental_root, inc_dir,
                 {.max_to_keep = kKeep, .save_options = {.durable = durable, .incremental = true}})
                 .value();
  auto full = CheckpointManager::Create(
                  full_root, full_dir, {.max_to_keep = kKeep, .save_options = {.durable = durable}})
                  .value();
  auto train = [&] { CKFLOW_CHECK(p->session->Run({}, {}, step).ok()); };
  // The full manager's first save makes its save counter and writes its
  // first checkpoint: before the rest, as a program's objects are made
  // before it trains.
  CKFLOW_CHECK(full->Save(*p->session).ok());
  // Then the steady state: the first save is full, the second regroups
  // (full too), and deleting the two (1 GiB of files of their own, ~0.2 s
  // of unlink on ext4) falls on the saves that push them out of the kept.
  for (int warmup = 0; warmup < kKeep + 2; ++warmup) {
    train();
    CKFLOW_CHECK(inc->Save(*p->session).ok());
  }
  std::vector<std::vector<char>> head(head_count, std::vector<char>(kVariableMiB << 20, 1));
  std::vector<std::string> raw_kept;
  int raw_count = 0;
  auto raw_rotation = [&]() -> std::pair<double, double> {
    const std::string path = raw_dir + "/" + std::to_string(raw_count++);
    auto start = Clock::now();
    const double write = workloads::RawWrite(path, head, threads, durable, 1);
    raw_kept.push_back(path);
    if (raw_kept.size() > kKeep) {
      RemoveCheckpoint(raw_kept.front());
      raw_kept.erase(raw_kept.begin());
    }
    return {SecondsSince(start), write};
  };
  for (int k = 0; k < kKeep; ++k) raw_rotation();
  double inc_s = 0, raw_s = 0, raw_write_s = 0;
  int64_t inc_bytes = 0;
  for (auto _ : state) {
    train();
    ::sync();
    const auto [rotation, write] = raw_rotation();
    raw_s += rotation;
    raw_write_s += write;
    ::sync();
    const int64_t before = counting.written();
    auto start = Clock::now();
    StatusOr<std::string> saved = inc->Save(*p->session);
    const double t = SecondsSince(start);
    if (!saved.ok()) state.SkipWithError(saved.status().ToString().c_str());
    inc_s += t;
    inc_bytes += counting.written() - before;
    state.SetIterationTime(t);
  }
  const int64_t inc_disk = DiskUsed(inc_dir);
  // The full saves, as many, once the incremental ones are done.
  double full_s = 0;
  int64_t full_bytes = 0;
  for (int64_t i = 0; i < state.iterations(); ++i) {
    train();
    ::sync();
    const int64_t before = counting.written();
    auto start = Clock::now();
    CKFLOW_CHECK(full->Save(*p->session).ok());
    full_s += SecondsSince(start);
    full_bytes += counting.written() - before;
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["incremental_ms"] = inc_s / n * 1e3;
  state.counters["full_ms"] = full_s / n * 1e3;
  state.counters["raw_ms"] = raw_s / n * 1e3;
  state.counters["raw_write_ms"] = raw_write_s / n * 1e3;
  state.counters["ratio"] = raw_s / inc_s;
  state.counters["vs_raw_write"] = raw_write_s / inc_s;
  state.counters["vs_full"] = full_s / inc_s;
  state.counters["written_MiB_per_save"] = static_cast<double>(inc_bytes) / n / (1 << 20);
  state.counters["full_written_MiB_per_save"] = static_cast<double>(full_bytes) / n / (1 << 20);
  state.counters["disk_5_kept_MiB"] = static_cast<double>(inc_disk) / (1 << 20);
  state.counters["full_disk_5_kept_MiB"] = static_cast<double>(DiskUsed(full_dir)) / (1 << 20);
  for (const std::string& d : {inc_dir, full_dir, raw_dir}) fs::remove_all(d);
}

void Register() {
  const int64_t mib = EnvInt("CKFLOW_BENCH_MIB", 1024);
  const int64_t count = EnvInt("CKFLOW_BENCH_COUNT", 64);
  const int64_t small = EnvInt("CKFLOW_BENCH_SMALL", 20000);
  const bool scaling = EnvInt("CKFLOW_BENCH_SCALING", 0) != 0;
  std::vector<int64_t> sizes = {mib};
  std::vector<int64_t> smalls = {small};
  std::vector<int64_t> threads = {2};
  if (scaling) {
    sizes = {256, 1024, 4096};
    smalls = {2000, 20000, 200000};
    threads = {1, 2};
  }
  auto* restore = benchmark::RegisterBenchmark("Restore", BM_Restore);
  auto* save = benchmark::RegisterBenchmark("Save", BM_Save);
  for (int64_t t : threads) {
    for (int64_t size : sizes) {
      restore->Args({size, count, t});
      save->Args({size, count, t, 0});
      save->Args({size, count, t, 1});
    }
  }
  restore->ArgNames({"MiB", "vars", "threads"})->UseManualTime()->Unit(benchmark::kMillisecond);
  auto* restore_cast = benchmark::RegisterBenchmark("RestoreCast", BM_RestoreCast);
  for (int64_t size : sizes) restore_cast->Args({size, count, 2});
  restore_cast->ArgNames({"MiB", "vars", "threads"})
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
  save->ArgNames({"MiB", "vars", "threads", "durable"})
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
  auto* save_async = benchmark::RegisterBenchmark("SaveAsync", BM_SaveAsync);
  for (int64_t t : threads) {
    for (int64_t size : sizes) {
      save_async->Args({size, count, t, 0});
      save_async->Args({size, count, t, 1});
    }
  }
  save_async->ArgNames({"MiB", "vars", "threads", "durable"})
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
  auto* restore_small = benchmark::RegisterBenchmark("RestoreSmall", BM_RestoreSmall);
  for (int64_t t : threads) {
    for (int64_t n : smalls) {
      restore_small->Args({n, t, 0});
      restore_small->Args({n, t, 1});
    }
  }
  restore_small->ArgNames({"vars", "threads", "cold"})
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
  // 5 iterations: the kept checkpoints are the measured saves'.
  auto* incremental = benchmark::RegisterBenchmark("SaveIncremental", BM_SaveIncremental);
  for (int64_t size : sizes) {
    incremental->Args({size, 16, 2, 0});
    incremental->Args({size, 16, 2, 1});
  }
  incremental->ArgNames({"MiB", "head_MiB", "threads", "durable"})
      ->UseManualTime()
      ->Iterations(5)
      ->Unit(benchmark::kMillisecond);
  // 2,000 layers of 10 at the default count: a deep network's shape.
  auto* deep = benchmark::RegisterBenchmark("DeepModel", BM_DeepModel);
  for (int64_t n : smalls) deep->Args({n, std::max<int64_t>(1, n / 10)});
  deep->ArgNames({"vars", "layers"})->UseManualTime()->Unit(benchmark::kMillisecond);
  auto* on_create = benchmark::RegisterBenchmark("RestoreOnCreate", BM_RestoreOnCreate);
  for (int64_t n : smalls) on_create->Args({n});
  on_create->ArgNames({"vars"})->UseManualTime()->Unit(benchmark::kMillisecond);
}

}  // namespace
}  // namespace ckflow

int main(int argc, char** argv) {
  ckflow::Register();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  std::filesystem::remove_all(ckflow::BenchDir());
  return 0;
}
