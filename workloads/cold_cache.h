// Measuring reads from a cold page cache: dropping the kernel's cached pages
// before a run, telling a file system held in memory (where nothing is ever
// read from a device) from a disk, and the cold-read ceilings a restore is
// compared with: every byte of the data files read in order, in large
// blocks, into fresh memory, + CRC32C. Shared by `ckflow bench restore
// --cold` and bench/fresh_restore.cc --cold. Not installed: a measuring tool
// of this project's (it writes /proc, which the library never does).
//
// Thread safety: the functions share no state; a drop affects the whole
// machine, so concurrent measurements disturb each other.

#ifndef CKFLOW_WORKLOADS_COLD_CACHE_H_
#define CKFLOW_WORKLOADS_COLD_CACHE_H_

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "base/status.h"
#include "bundle/crc32c.h"
#include "workloads/raw_io.h"

namespace ckflow::workloads {

// Writing "1" here drops the clean pages of the page cache (root only).
inline constexpr char kDropCachesPath[] = "/proc/sys/vm/drop_caches";

// The name of the in-memory file system `dir` lies on ("tmpfs", "ramfs"),
// or "" when it is on something that reads from a device (or cannot be
// told).
inline std::string InMemoryFileSystem(const std::string& dir) {
  struct statfs fs;
  if (::statfs(dir.c_str(), &fs) != 0) return "";
  constexpr long kTmpfsMagic = 0x01021994;
  constexpr long kRamfsMagic = 0x858458f6;
  if (static_cast<long>(fs.f_type) == kTmpfsMagic) return "tmpfs";
  if (static_cast<long>(fs.f_type) == kRamfsMagic) return "ramfs";
  return "";
}

// OK if `drop_path` (kDropCachesPath, or another file a test names) can be
// opened for writing; else PermissionDenied (or the open's error) saying
// why, without dropping anything.
inline Status CheckCanDropPageCache(const std::string& drop_path) {
  const int fd = ::open(drop_path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd >= 0) {
    ::close(fd);
    return OkStatus();
  }
  const int err = errno;
  const std::string why =
      std::string("cannot drop the page cache: cannot open ") + drop_path +
      " for writing: " + std::strerror(err) +
      (drop_path == kDropCachesPath && (err == EACCES || err == EPERM || err == EROFS)
           ? " (dropping it needs root, outside a container that mounts "
             "/proc/sys read-only)"
           : "");
  return err == EACCES || err == EPERM || err == EROFS ? PermissionDeniedError(why)
                                                       : FailedPreconditionError(why);
}

// Writes dirty pages back (sync) and drops every clean cached page, so the
// next read of any file comes from its device.
inline Status DropPageCache(const std::string& drop_path) {
  ::sync();
  CKFLOW_RETURN_IF_ERROR(CheckCanDropPageCache(drop_path));
  const int fd = ::open(drop_path.c_str(), O_WRONLY | O_CLOEXEC);
  const bool ok = fd >= 0 && ::write(fd, "1", 1) == 1;
  const int err = errno;
  if (fd >= 0) ::close(fd);
  if (!ok) {
    return PermissionDeniedError("cannot drop the page cache: writing ", drop_path, ": ",
                                 std::strerror(err));
  }
  return OkStatus();
}

// One cold-read ceiling: how the files are read.
struct SequentialRead {
  int threads = 1;
  bool direct = false;               // O_DIRECT: no page cache, no readahead
  int64_t block = int64_t{8} << 20;  // bytes per pread (a multiple of 4 KiB)

  // "pread 8 MiB blocks + CRC32C, 2 threads" (", O_DIRECT").
  std::string Describe() const {
    return "pread " + std::to_string(block >> 20) + " MiB blocks" + (direct ? " O_DIRECT" : "") +
           " + CRC32C, " + std::to_string(threads) + (threads == 1 ? " thread" : " threads");
  }
};

// Reads every byte of `paths` in order, `how.block` bytes at a time, the
// blocks dealt to `how.threads` threads in turn, into one fresh anonymous
// mapping as large as the files (as a restore fills memory it has just
// allocated), each block CRC32C'd after its read. Returns the seconds from
// before the mapping to after the last checksum; the checksums go to *sink.
// Unimplemented when `how.direct` and the file system refuses O_DIRECT.
inline StatusOr<double> SequentialReadCrc(const std::vector<std::string>& paths,
                                          const SequentialRead& how, uint32_t* sink) {
  constexpr int64_t kAlign = 4096;  // O_DIRECT's buffer, offset and length alignment
  struct Block {
    int file;
    int64_t offset, size;
    int64_t at;  // in the mapping
  };
  std::vector<int> fds;
  auto close_all = [&] {
    for (int fd : fds) ::close(fd);
  };
  std::vector<Block> blocks;
  int64_t total = 0;
  for (const std::string& path : paths) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (how.direct ? O_DIRECT : 0));
    if (fd < 0) {
      const int err = errno;
      close_all();
      if (how.direct && err == EINVAL) {
        return UnimplementedError(path, ": the file system does not support O_DIRECT");
      }
      return InternalError("cannot open ", path, ": ", std::strerror(err));
    }
    fds.push_back(fd);
    struct stat st;
    if (::fstat(fd, &st) != 0) {
      close_all();
      return InternalError("cannot stat ", path, ": ", std::strerror(errno));
    }
    for (int64_t offset = 0; offset < st.st_size; offset += how.block) {
      blocks.push_back({static_cast<int>(fds.size()) - 1, offset,
                        std::min<int64_t>(how.block, st.st_size - offset), total + offset});
    }
    total += (st.st_size + kAlign - 1) / kAlign * kAlign;
  }
  std::atomic<bool> failed{false};
  std::atomic<uint32_t> sum{0};
  const auto start = std::chrono::steady_clock::now();
  void* region = total > 0 ? ::mmap(nullptr, static_cast<size_t>(total), PROT_READ | PROT_WRITE,
                                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                           : nullptr;
  if (region == MAP_FAILED) {
    close_all();
    return ResourceExhaustedError("cannot map ", total, " bytes");
  }
  char* base = static_cast<char*>(region);
  OnThreads(how.threads, blocks.size(), [&](size_t i) {
    const Block& b = blocks[i];
    // O_DIRECT reads whole aligned blocks; the last one ends short at the
    // end of the file.
    const int64_t want = how.direct ? (b.size + kAlign - 1) / kAlign * kAlign : b.size;
    int64_t done = 0;
    while (done < b.size) {
      const ssize_t n = ::pread(fds[b.file], base + b.at + done, want - done, b.offset + done);
      if (n <= 0) {
        failed = true;
        return;
      }
      done += n;
    }
    sum += crc32c::Value(base + b.at, static_cast<size_t>(b.size));
  });
  const double seconds = SecondsSince(start);
  if (region != nullptr) ::munmap(region, static_cast<size_t>(total));
  close_all();
  *sink += sum.load();
  if (failed) return InternalError("a pread of the data files failed");
  return seconds;
}

}  // namespace ckflow::workloads

#endif  // CKFLOW_WORKLOADS_COLD_CACHE_H_
