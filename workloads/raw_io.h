// The raw ceilings checkpoint speed is measured against: the same bytes, in
// the same pieces, moved with plain pread/pwrite on a fixed number of threads
// and nothing else (no format, no graph, no session). Shared by
// bench/checkpoint_bench.cc and `ckflow bench`, so both report ratios to the
// same baseline. Not installed: a measuring tool of this project's.

#ifndef CKFLOW_WORKLOADS_RAW_IO_H_
#define CKFLOW_WORKLOADS_RAW_IO_H_

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bundle/crc32c.h"

namespace ckflow::workloads {

struct Piece {
  int64_t offset;
  int64_t size;
  int file = 0;  // which of the data files (a checkpoint's shard id)
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

// Reads each piece of its file among `paths` into dest(i) and CRC32Cs it.
// Returns seconds, or -1 on an I/O error. The checksum sum goes to *sink so
// the work cannot be elided.
template <typename Dest>
double ReadCrcInto(const std::vector<std::string>& paths, const std::vector<Piece>& pieces,
                   int threads, uint32_t* sink, const Dest& dest) {
  std::vector<int> fds;
  auto close_all = [&] {
    for (int fd : fds) ::close(fd);
  };
  for (const std::string& path : paths) {
    fds.push_back(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fds.back() < 0) {
      fds.pop_back();
      close_all();
      return -1;
    }
  }
  std::atomic<bool> failed{false};
  std::atomic<uint32_t> sum{0};
  auto start = std::chrono::steady_clock::now();
  OnThreads(threads, pieces.size(), [&](size_t i) {
    const Piece& piece = pieces[i];
    if (piece.file < 0 || piece.file >= static_cast<int>(fds.size())) {
      failed = true;
      return;
    }
    char* dst = dest(i);
    int64_t done = 0;
    while (done < piece.size) {
      ssize_t n = ::pread(fds[piece.file], dst + done, piece.size - done, piece.offset + done);
      if (n <= 0) {
        failed = true;
        return;
      }
      done += n;
    }
    sum += crc32c::Value(dst, piece.size);
  });
  double seconds = SecondsSince(start);
  close_all();
  *sink += sum.load();
  return failed ? -1 : seconds;
}

// Into buffers[i], already touched as a variable's buffer is.
inline double RawReadCrc(const std::vector<std::string>& paths, const std::vector<Piece>& pieces,
                         std::vector<std::vector<char>>& buffers, int threads, uint32_t* sink) {
  return ReadCrcInto(paths, pieces, threads, sink, [&](size_t i) { return buffers[i].data(); });
}

// Into a buffer allocated for each piece as it is read, as a fresh
// session's variables are; they are left in *fresh for the caller to free
// outside the timing.
inline double RawReadCrcFresh(const std::vector<std::string>& paths,
                              const std::vector<Piece>& pieces, int threads, uint32_t* sink,
                              std::vector<std::unique_ptr<char[]>>* fresh) {
  fresh->resize(pieces.size());
  return ReadCrcInto(paths, pieces, threads, sink, [&](size_t i) {
    (*fresh)[i] = std::make_unique_for_overwrite<char[]>(static_cast<size_t>(pieces[i].size));
    return (*fresh)[i].get();
  });
}

// Writes buffers back to back into `files` new files, `path` with ".0",
// ".1", ... appended when there is more than one, on `threads` threads, then
// (durable) fsyncs them. Consecutive buffers share a file, split so the files
// come out equal in count. With one file the threads take buffers in turn;
// with several each thread writes whole files, as writers of separate shards
// do. Returns seconds (including the opens), or -1 on an I/O error. The
// files are left for the caller to remove (RawWritePaths names them).
inline std::vector<std::string> RawWritePaths(const std::string& path, int files) {
  if (files <= 1) return {path};
  std::vector<std::string> paths;
  for (int f = 0; f < files; ++f) paths.push_back(path + "." + std::to_string(f));
  return paths;
}

inline double RawWrite(const std::string& path, const std::vector<std::vector<char>>& buffers,
                       int threads, bool durable, int files = 1) {
  files = std::max(1, std::min<int>(files, static_cast<int>(buffers.size())));
  const std::vector<std::string> paths = RawWritePaths(path, files);
  auto start = std::chrono::steady_clock::now();
  std::vector<int> fds;
  for (const std::string& p : paths) {
    fds.push_back(::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  }
  // Buffer i goes into file first_of[f] <= i < first_of[f + 1] at offsets[i].
  std::vector<size_t> first_of(files + 1);
  for (int f = 0; f <= files; ++f) first_of[f] = buffers.size() * f / files;
  std::vector<int64_t> offsets(buffers.size(), 0);
  for (int f = 0; f < files; ++f) {
    for (size_t i = first_of[f] + 1; i < first_of[f + 1]; ++i) {
      offsets[i] = offsets[i - 1] + static_cast<int64_t>(buffers[i - 1].size());
    }
  }
  std::atomic<bool> failed{false};
  auto write = [&](int f, size_t i) {
    if (fds[f] < 0) {
      failed = true;
      return;
    }
    int64_t done = 0;
    const int64_t size = static_cast<int64_t>(buffers[i].size());
    while (done < size) {
      ssize_t n = ::pwrite(fds[f], buffers[i].data() + done, size - done, offsets[i] + done);
      if (n <= 0) {
        failed = true;
        return;
      }
      done += n;
    }
  };
  if (files == 1) {
    OnThreads(threads, buffers.size(), [&](size_t i) { write(0, i); });
  } else {
    OnThreads(threads, files, [&](size_t f) {
      for (size_t i = first_of[f]; i < first_of[f + 1]; ++i) write(static_cast<int>(f), i);
    });
  }
  OnThreads(threads, files, [&](size_t f) {
    if (fds[f] >= 0 && durable && ::fsync(fds[f]) != 0) failed = true;
  });
  for (int fd : fds) {
    if (fd >= 0) ::close(fd);
  }
  return failed ? -1 : SecondsSince(start);
}

}  // namespace ckflow::workloads

#endif  // CKFLOW_WORKLOADS_RAW_IO_H_
