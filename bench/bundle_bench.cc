// Reading and writing a checkpoint bundle against raw pread/pwrite of the
// same bytes, in the same run.
//
// The bundle: 64 float32 tensors, CKFLOW_BENCH_BUNDLE_MIB in all (default
// 1024: 16 MiB each). Files go to CKFLOW_BENCH_DIR, by default /dev/shm
// (tmpfs) if it exists, else the temp dir: this measures the CPU side of
// checkpoint I/O (copies, CRC32C, index, renames), not a disk, whose
// writeback would otherwise set both the raw and the bundle write rate.
//
//   BM_RawPread       2 threads pread each tensor's bytes into preallocated,
//                     touched buffers (one pread per tensor)
//   BM_BundleRead     BundleReader::ReadInto into the same kind of buffers:
//                     pread straight into the destination in 1 MiB chunks on
//                     the oneTBB pool, each chunk CRC'd while in cache
//   BM_RawPwrite      2 threads pwrite the tensors into a new file
//   BM_BundleWrite    BundleWriter: CRC + pwrite in chunks, index, renames
//   BM_Crc32c         one core's CRC32C rate, for scale
//
// Counters: GB/s, and for the bundle runs vs_raw = GB/s / raw GB/s (of the
// baseline run just before; 1.0 = as fast as raw I/O).

#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/bundle_format.h"
#include "checkpoint/bundle_reader.h"
#include "checkpoint/bundle_writer.h"
#include "checkpoint/crc32c.h"

namespace ckflow {
namespace {

constexpr int kTensors = 64;

struct Fixture {
  std::string dir;
  std::string prefix;
  std::vector<Tensor> tensors;  // what is written
  std::vector<Tensor> dests;    // where reads go (preallocated, touched)
  std::vector<BundleEntry> entries;
  uint64_t bytes = 0;

  Fixture() {
    const char* env = std::getenv("CKFLOW_BENCH_BUNDLE_MIB");
    const int64_t mib = env ? std::atoll(env) : 1024;
    const int64_t floats = std::max<int64_t>(1, (mib << 20) / kTensors / 4);
    std::filesystem::path base = std::filesystem::temp_directory_path();
    if (const char* d = std::getenv("CKFLOW_BENCH_DIR")) {
      base = d;
    } else if (std::filesystem::is_directory("/dev/shm")) {
      base = "/dev/shm";
    }
    dir = (base / ("ckflow_bundle_bench_" + std::to_string(::getpid()))).string();
    std::filesystem::create_directories(dir);
    prefix = dir + "/ckpt";
    for (int i = 0; i < kTensors; ++i) {
      Tensor t(DT_FLOAT, TensorShape({floats}));
      auto v = t.flat<float>();
      for (int64_t j = 0; j < floats; ++j) v[j] = static_cast<float>(i * 31 + j);
      tensors.push_back(t);
      Tensor d(DT_FLOAT, TensorShape({floats}));
      std::memset(d.raw_data(), 0, d.TotalBytes());
      dests.push_back(d);
      bytes += t.TotalBytes();
    }
    std::unique_ptr<BundleWriter> writer = BundleWriter::Create(prefix).value();
    for (int i = 0; i < kTensors; ++i) {
      if (!writer->Add("layer_" + std::to_string(i) + "/kernel", tensors[i]).ok()) std::abort();
    }
    if (!writer->Finish().ok()) std::abort();
    entries = BundleReader::Open(prefix).value()->entries();
  }
  ~Fixture() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

Fixture& GetFixture() {
  static Fixture fixture;
  return fixture;
}

double raw_read_gbps = 0, raw_write_gbps = 0;

// Runs fn(i) for the tensors i of two threads (alternating).
template <typename Fn>
void TwoThreads(Fn fn) {
  std::thread other([&] {
    for (int i = 1; i < kTensors; i += 2) fn(i);
  });
  for (int i = 0; i < kTensors; i += 2) fn(i);
  other.join();
}

// Times the benchmark loop itself, so the bundle runs can report their rate
// relative to the raw baseline measured just before.
class RateReporter {
 public:
  RateReporter(benchmark::State& state, uint64_t bytes, double* baseline_gbps, bool is_baseline)
      : state_(state),
        bytes_(bytes),
        baseline_(baseline_gbps),
        is_baseline_(is_baseline),
        start_(std::chrono::steady_clock::now()) {}
  ~RateReporter() {
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const double total = static_cast<double>(state_.iterations()) * static_cast<double>(bytes_);
    state_.SetBytesProcessed(static_cast<int64_t>(total));
    const double gbps = seconds > 0 ? total / seconds / 1e9 : 0;
    state_.counters["GB/s"] = gbps;
    if (is_baseline_) {
      *baseline_ = gbps;
    } else if (*baseline_ > 0) {
      state_.counters["vs_raw"] = gbps / *baseline_;
    }
  }

 private:
  benchmark::State& state_;
  const uint64_t bytes_;
  double* const baseline_;
  const bool is_baseline_;
  const std::chrono::steady_clock::time_point start_;
};

void BM_RawPread(benchmark::State& state) {
  Fixture& f = GetFixture();
  RateReporter rate(state, f.bytes, &raw_read_gbps, /*is_baseline=*/true);
  const int fd = ::open(DataFilename(f.prefix, 0, 1).c_str(), O_RDONLY);
  for (auto _ : state) {
    TwoThreads([&](int i) {
      const BundleEntry& e = f.entries[i];
      char* dst = static_cast<char*>(f.dests[i].raw_data());
      for (int64_t done = 0; done < e.size;) {
        ssize_t n = ::pread(fd, dst + done, static_cast<size_t>(e.size - done), e.offset + done);
        if (n <= 0) std::abort();
        done += n;
      }
    });
    benchmark::ClobberMemory();
  }
  ::close(fd);
}

void BM_BundleRead(benchmark::State& state) {
  Fixture& f = GetFixture();
  std::unique_ptr<BundleReader> reader = BundleReader::Open(f.prefix).value();
  RateReporter rate(state, f.bytes, &raw_read_gbps, /*is_baseline=*/false);
  for (auto _ : state) {
    for (int i = 0; i < kTensors; ++i) {
      Status s = reader->ReadInto(f.entries[i], &f.dests[i]);
      if (!s.ok()) state.SkipWithError(s.ToString().c_str());
    }
    benchmark::ClobberMemory();
  }
}

void BM_RawPwrite(benchmark::State& state) {
  Fixture& f = GetFixture();
  const std::string path = f.dir + "/raw.data";
  RateReporter rate(state, f.bytes, &raw_write_gbps, /*is_baseline=*/true);
  for (auto _ : state) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    TwoThreads([&](int i) {
      const BundleEntry& e = f.entries[i];
      const char* src = static_cast<const char*>(f.tensors[i].raw_data());
      for (int64_t done = 0; done < e.size;) {
        ssize_t n = ::pwrite(fd, src + done, static_cast<size_t>(e.size - done), e.offset + done);
        if (n <= 0) std::abort();
        done += n;
      }
    });
    ::close(fd);
  }
}

void BM_BundleWrite(benchmark::State& state) {
  Fixture& f = GetFixture();
  const std::string prefix = f.dir + "/written";
  RateReporter rate(state, f.bytes, &raw_write_gbps, /*is_baseline=*/false);
  for (auto _ : state) {
    std::unique_ptr<BundleWriter> writer = BundleWriter::Create(prefix).value();
    for (int i = 0; i < kTensors; ++i) {
      Status s = writer->Add(f.entries[i].key, f.tensors[i]);
      if (!s.ok()) state.SkipWithError(s.ToString().c_str());
    }
    Status s = writer->Finish();
    if (!s.ok()) state.SkipWithError(s.ToString().c_str());
  }
}

void BM_Crc32c(benchmark::State& state) {
  Fixture& f = GetFixture();
  const Tensor& t = f.tensors[0];
  for (auto _ : state) {
    benchmark::DoNotOptimize(crc32c::Value(t.raw_data(), t.TotalBytes()));
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * t.TotalBytes()));
}

BENCHMARK(BM_RawPread)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_BundleRead)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_RawPwrite)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_BundleWrite)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Crc32c)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
}  // namespace ckflow

BENCHMARK_MAIN();
