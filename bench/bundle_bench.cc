// Reading and writing a checkpoint bundle against raw pread/pwrite of the
// same bytes, in the same run.
//
// The bundle: 64 float32 tensors, CKFLOW_BENCH_BUNDLE_MIB in all (default
// 1024: 16 MiB each). Files go to CKFLOW_BENCH_DIR, by default /dev/shm
// (tmpfs) if it exists, else the temp dir: this measures the CPU side of
// checkpoint I/O (copies, CRC32C, index, renames), not a disk, whose
// writeback would otherwise set both the raw and the bundle write rate.
//
//   BM_Read    raw: 2 threads pread each tensor's bytes (one pread per
//              tensor) into preallocated, touched buffers;
//              bundle: BundleReader::ReadInto into the same buffers: pread
//              straight into the destination in 1 MiB chunks on the oneTBB
//              pool, each chunk CRC'd while in cache, CRCs combined
//   BM_Write   raw: 2 threads pwrite the tensors into a new file;
//              bundle: BundleWriter (chunked CRC + pwrite, index, renames)
//   BM_Crc32c  one core's CRC32C rate, for scale
//
// Each iteration runs both sides, alternating which goes first. Counters:
// GB/s (bundle), raw_GB/s, vs_raw = raw time / bundle time (1.0: as fast as
// raw I/O).

#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bundle/bundle_format.h"
#include "bundle/bundle_reader.h"
#include "bundle/bundle_writer.h"
#include "bundle/crc32c.h"

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

// Runs fn(i) for the tensors i of two threads (alternating).
template <typename Fn>
void TwoThreads(Fn fn) {
  std::thread other([&] {
    for (int i = 1; i < kTensors; i += 2) fn(i);
  });
  for (int i = 0; i < kTensors; i += 2) fn(i);
  other.join();
}

double Seconds(const std::function<void()>& fn) {
  const auto start = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Each iteration times the raw baseline and the bundle code on the same
// bytes, alternating which goes first, so a noisy neighbour slows both
// alike. The iteration time reported is the bundle code's.
void RunPaired(benchmark::State& state, const std::function<void()>& raw,
               const std::function<void()>& bundle) {
  const double bytes = static_cast<double>(GetFixture().bytes);
  double raw_seconds = 0, bundle_seconds = 0;
  bool raw_first = true;
  for (auto _ : state) {
    double b;
    if (raw_first) {
      raw_seconds += Seconds(raw);
      b = Seconds(bundle);
    } else {
      b = Seconds(bundle);
      raw_seconds += Seconds(raw);
    }
    raw_first = !raw_first;
    bundle_seconds += b;
    state.SetIterationTime(b);
  }
  const double n = static_cast<double>(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(n * bytes));
  state.counters["GB/s"] = n * bytes / bundle_seconds / 1e9;
  state.counters["raw_GB/s"] = n * bytes / raw_seconds / 1e9;
  state.counters["vs_raw"] = raw_seconds / bundle_seconds;
}

void BM_Read(benchmark::State& state) {
  Fixture& f = GetFixture();
  const int fd = ::open(DataFilename(f.prefix, 0, 1).c_str(), O_RDONLY);
  std::unique_ptr<BundleReader> reader = BundleReader::Open(f.prefix).value();
  auto raw = [&] {
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
  };
  auto bundle = [&] {
    for (int i = 0; i < kTensors; ++i) {
      if (!reader->ReadInto(f.entries[i], &f.dests[i]).ok()) std::abort();
    }
    benchmark::ClobberMemory();
  };
  RunPaired(state, raw, bundle);
  ::close(fd);
}

void BM_Write(benchmark::State& state) {
  Fixture& f = GetFixture();
  const std::string raw_path = f.dir + "/raw.data";
  const std::string prefix = f.dir + "/written";
  auto raw = [&] {
    const int fd = ::open(raw_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
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
  };
  auto bundle = [&] {
    std::unique_ptr<BundleWriter> writer = BundleWriter::Create(prefix).value();
    for (int i = 0; i < kTensors; ++i) {
      if (!writer->Add(f.entries[i].key, f.tensors[i]).ok()) std::abort();
    }
    if (!writer->Finish().ok()) std::abort();
  };
  RunPaired(state, raw, bundle);
}

void BM_Crc32c(benchmark::State& state) {
  Fixture& f = GetFixture();
  const Tensor& t = f.tensors[0];
  for (auto _ : state) {
    benchmark::DoNotOptimize(crc32c::Value(t.raw_data(), t.TotalBytes()));
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * t.TotalBytes()));
}

BENCHMARK(BM_Read)->Unit(benchmark::kMillisecond)->UseManualTime();
BENCHMARK(BM_Write)->Unit(benchmark::kMillisecond)->UseManualTime();
BENCHMARK(BM_Crc32c)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
}  // namespace ckflow

BENCHMARK_MAIN();
