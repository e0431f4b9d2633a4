#include "tests/observed_file_system.h"

#include <algorithm>
#include <utility>

namespace ckflow::testing {

class ObservedFileSystem::File final : public RandomAccessFile {
 public:
  File(std::unique_ptr<RandomAccessFile> file, std::string path, ObservedFileSystem* fs)
      : file_(std::move(file)), path_(std::move(path)), fs_(fs) {}

  Status ReadAt(uint64_t offset, size_t n, char* dst) const override {
    Record([n](Observed& o) {
      ++o.reads;
      o.bytes_read += static_cast<int64_t>(n);
      o.largest_read = std::max(o.largest_read, static_cast<int64_t>(n));
    });
    return file_->ReadAt(offset, n, dst);
  }
  uint64_t size() const override { return file_->size(); }
  const std::string& path() const override { return file_->path(); }
  void AdviseSequential() const override {
    Record([](Observed& o) { ++o.advised_sequential; });
    file_->AdviseSequential();
  }
  void Prefetch(uint64_t offset, uint64_t n) const override {
    Record([&](Observed& o) {
      if (offset == 0) {
        o.prefetched += n;
      } else {
        ++o.prefetches_not_from_start;
      }
    });
    file_->Prefetch(offset, n);
  }

 private:
  template <typename F>
  void Record(F&& update) const {
    std::lock_guard<std::mutex> lock(fs_->mu_);
    update(fs_->observed_[path_]);
  }

  std::unique_ptr<RandomAccessFile> file_;
  const std::string path_;  // as opened
  ObservedFileSystem* fs_;
};

StatusOr<std::unique_ptr<RandomAccessFile>> ObservedFileSystem::NewRandomAccessFile(
    const std::string& path) {
  CKFLOW_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file,
                          target()->NewRandomAccessFile(path));
  return std::unique_ptr<RandomAccessFile>(new File(std::move(file), path, this));
}

ObservedFileSystem::Observed ObservedFileSystem::of(const std::string& path) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = observed_.find(path);
  return it == observed_.end() ? Observed() : it->second;
}

ObservedFileSystem::Observed ObservedFileSystem::DataFiles() const {
  std::lock_guard<std::mutex> lock(mu_);
  Observed sum;
  for (const auto& [path, o] : observed_) {
    if (path.find(".data-") == std::string::npos) continue;
    sum.reads += o.reads;
    sum.bytes_read += o.bytes_read;
    sum.largest_read = std::max(sum.largest_read, o.largest_read);
    sum.advised_sequential += o.advised_sequential;
    sum.prefetched += o.prefetched;
    sum.prefetches_not_from_start += o.prefetches_not_from_start;
  }
  return sum;
}

void ObservedFileSystem::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  observed_.clear();
}

}  // namespace ckflow::testing
