#include "tests/bundle/bundle_test_util.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "bundle/bundle_writer.h"
#include "tests/test_util.h"

namespace ckflow::testing {

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

void WriteFileOrDie(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
  if (!out) ADD_FAILURE() << "cannot write " << path;
}

Status WriteBundle(const std::string& prefix, const NamedTensors& tensors, FileSystem* fs) {
  BundleWriter::Options options;
  options.fs = fs;
  CKFLOW_ASSIGN_OR_RETURN(std::unique_ptr<BundleWriter> writer,
                          BundleWriter::Create(prefix, options));
  for (const auto& [key, tensor] : tensors) CKFLOW_RETURN_IF_ERROR(writer->Add(key, tensor));
  return writer->Finish();
}

Status FaultyFileSystem::Tick(const std::string& what) {
  if (++count_ != fail_at_) return OkStatus();
  failed_ = true;
  return ResourceExhaustedError(what, ": No space left on device (injected)");
}

namespace {

class FaultyWritableFile final : public WritableFile {
 public:
  FaultyWritableFile(std::unique_ptr<WritableFile> base, FaultyFileSystem* fs)
      : base_(std::move(base)), fs_(fs) {}
  Status WriteAt(uint64_t offset, std::string_view data) override {
    CKFLOW_RETURN_IF_ERROR(fs_->Tick(base_->path()));
    return base_->WriteAt(offset, data);
  }
  Status Sync() override {
    CKFLOW_RETURN_IF_ERROR(fs_->Tick(base_->path()));
    return base_->Sync();
  }
  Status Close() override {
    if (closed_) return OkStatus();
    closed_ = true;
    Status injected = fs_->Tick(base_->path());
    Status s = base_->Close();
    return injected.ok() ? s : injected;
  }
  const std::string& path() const override { return base_->path(); }

 private:
  std::unique_ptr<WritableFile> base_;
  FaultyFileSystem* fs_;
  bool closed_ = false;
};

}  // namespace

StatusOr<std::unique_ptr<WritableFile>> FaultyFileSystem::NewWritableFile(const std::string& path) {
  CKFLOW_RETURN_IF_ERROR(Tick(path));
  CKFLOW_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, target()->NewWritableFile(path));
  return std::unique_ptr<WritableFile>(new FaultyWritableFile(std::move(file), this));
}

Status FaultyFileSystem::RenameFile(const std::string& from, const std::string& to) {
  CKFLOW_RETURN_IF_ERROR(Tick(from));
  return target()->RenameFile(from, to);
}

Status FaultyFileSystem::CreateDirs(const std::string& path) {
  CKFLOW_RETURN_IF_ERROR(Tick(path));
  return target()->CreateDirs(path);
}

Tensor Grid(int64_t rows, int64_t cols, int64_t row0, int64_t col0) {
  Tensor t(DT_FLOAT, TensorShape({rows, cols}));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      t.flat<float>()[r * cols + c] = static_cast<float>((row0 + r) * 100 + (col0 + c));
    }
  }
  return t;
}

std::vector<std::pair<int64_t, int64_t>> FixedSizeParts(int64_t size, int n) {
  std::vector<std::pair<int64_t, int64_t>> parts;
  int64_t offset = 0;
  for (int i = 0; i < n; ++i) {
    const int64_t length = size / n + (i < size % n ? 1 : 0);
    parts.emplace_back(offset, length);
    offset += length;
  }
  return parts;
}

}  // namespace ckflow::testing
