// The raw ceilings checkpoint speed is measured against: the same bytes, in
// the same pieces, moved with plain pread/pwrite on a fixed number of threads
// and nothing else (no format, no graph, no session). Shared by
// bench/checkpoint_bench.cc and `ckflow bench`, so both report ratios to the
// same baseline.

#ifndef CKFLOW_BENCH_RAW_IO_H_
#define CKFLOW_BENCH_RAW_IO_H_

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/crc32c.h"

namespace ckflow::bench {

struct Piece {
  int64_t offset;
  int64_t size;
};

inline double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Runs work(i) for i in [0, n) on `threads` threads, pieces dealt round-robin.
template <typename F>
void OnThreads(int threads, size_t n, const F& work) {
  std::vector<std::thread> others;
  auto run = [&](int t) {
    for (size_t i = t; i < n; i += threads) work(i);
  };
  for (int t = 1; t < threads; ++t) others.emplace_back(run, t);
  run(0);
  for (auto& t : others) t.join();
}

// Reads each piece of `path` into dest(i) and CRC32Cs it. Returns seconds,
// or -1 on an I/O error. The checksum sum goes to *sink so the work cannot
// be elided.
template <typename Dest>
double ReadCrcInto(const std::string& path, const std::vector<Piece>& pieces, int threads,
                   uint32_t* sink, const Dest& dest) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  std::atomic<bool> failed{false};
  std::atomic<uint32_t> sum{0};
  auto start = std::chrono::steady_clock::now();
  OnThreads(threads, pieces.size(), [&](size_t i) {
    char* dst = dest(i);
    int64_t done = 0;
    while (done < pieces[i].size) {
      ssize_t n = ::pread(fd, dst + done, pieces[i].size - done, pieces[i].offset + done);
      if (n <= 0) {
        failed = true;
        return;
      }
      done += n;
    }
    sum += crc32c::Value(dst, pieces[i].size);
  });
  double seconds = SecondsSince(start);
  ::close(fd);
  *sink += sum.load();
  return failed ? -1 : seconds;
}

// Into buffers[i], already touched as a variable's buffer is.
inline double RawReadCrc(const std::string& path, const std::vector<Piece>& pieces,
                         std::vector<std::vector<char>>& buffers, int threads, uint32_t* sink) {
  return ReadCrcInto(path, pieces, threads, sink, [&](size_t i) { return buffers[i].data(); });
}

// Into a buffer allocated for each piece as it is read, as a fresh
// session's variables are; they are left in *fresh for the caller to free
// outside the timing.
inline double RawReadCrcFresh(const std::string& path, const std::vector<Piece>& pieces,
                              int threads, uint32_t* sink,
                              std::vector<std::unique_ptr<char[]>>* fresh) {
  fresh->resize(pieces.size());
  return ReadCrcInto(path, pieces, threads, sink, [&](size_t i) {
    (*fresh)[i] = std::make_unique_for_overwrite<char[]>(static_cast<size_t>(pieces[i].size));
    return (*fresh)[i].get();
  });
}

// Writes buffers back to back into a new file at `path` on `threads`
// threads, then (durable) fsyncs it. Returns seconds (including the
// open), or -1 on an I/O error. The file is left for the caller to remove.
inline double RawWrite(const std::string& path, const std::vector<std::vector<char>>& buffers,
                       int threads, bool durable) {
  auto start = std::chrono::steady_clock::now();
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return -1;
  std::vector<int64_t> offsets(buffers.size() + 1, 0);
  for (size_t i = 0; i < buffers.size(); ++i) offsets[i + 1] = offsets[i] + buffers[i].size();
  std::atomic<bool> failed{false};
  OnThreads(threads, buffers.size(), [&](size_t i) {
    int64_t done = 0;
    const int64_t size = static_cast<int64_t>(buffers[i].size());
    while (done < size) {
      ssize_t n = ::pwrite(fd, buffers[i].data() + done, size - done, offsets[i] + done);
      if (n <= 0) {
        failed = true;
        return;
      }
      done += n;
    }
  });
  if (durable && ::fsync(fd) != 0) failed = true;
  ::close(fd);
  return failed ? -1 : SecondsSince(start);
}

}  // namespace ckflow::bench

#endif  // CKFLOW_BENCH_RAW_IO_H_
