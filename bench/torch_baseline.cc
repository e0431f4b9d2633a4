// libtorch's own C++ checkpoint path on the sizes `ckflow bench` uses, so that
// ckflow's restore can be compared with C++ rather than Python PyTorch
// (bench/side_by_side.py runs both).
//
//   torch_baseline --count N --size TOTAL_BYTES [--repeat R] [--dir D] [--threads T]
//
// N float32 tensors of TOTAL_BYTES / N bytes each, tensor i filled with i,
// saved under the names v0..vN-1 (as a Python {name: tensor} state dict
// would be). Prints the median of R runs of each measurement:
//
//   libtorch save: 1.234 GB/s        torch::serialize::OutputArchive::save_to, new file
//   libtorch load: 4.567 GB/s        InputArchive::load_from + read into fresh tensors
//   libtorch load+copy_: 2.345 GB/s  the load, then copy_ into existing tensors
//
// GB/s is 1e9 bytes of tensor payload per second. The file was just written,
// so loads read from the page cache, as `ckflow bench restore` does.

#include <ATen/Parallel.h>
#include <torch/serialize.h>
#include <torch/types.h>
#include <torch/utils.h>
#include <torch/version.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace {

namespace fs = std::filesystem;

struct Options {
  int64_t count = 0;
  int64_t bytes = 0;
  int repeat = 3;
  std::string dir;
  int threads = 0;  // 0: libtorch's default
};

[[noreturn]] void Usage(const std::string& message) {
  std::fprintf(stderr,
               "torch_baseline: %s\nusage: torch_baseline --count N --size TOTAL_BYTES "
               "[--repeat R] [--dir D] [--threads T]\n",
               message.c_str());
  std::exit(2);
}

int64_t ParsePositive(std::string_view flag, std::string_view text, int64_t max = INT64_MAX) {
  int64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < 1 || value > max) {
    Usage(std::string(flag) + " '" + std::string(text) + "': expected a whole number from 1 to " +
          std::to_string(max));
  }
  return value;
}

Options ParseFlags(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (i + 1 == argc) Usage("missing value after " + std::string(flag));
    const std::string_view value = argv[++i];
    if (flag == "--count") {
      options.count = ParsePositive(flag, value);
    } else if (flag == "--size") {
      options.bytes = ParsePositive(flag, value);
    } else if (flag == "--repeat") {
      options.repeat = static_cast<int>(ParsePositive(flag, value, 1000));
    } else if (flag == "--dir") {
      options.dir = value;
    } else if (flag == "--threads") {
      options.threads = static_cast<int>(ParsePositive(flag, value, 1024));
    } else {
      Usage("unknown flag " + std::string(flag));
    }
  }
  if (options.count == 0) Usage("--count is required");
  if (options.bytes == 0) Usage("--size is required");
  // Same rule as `ckflow bench`, so both run on exactly the same shapes.
  if (options.bytes % (options.count * static_cast<int64_t>(sizeof(float))) != 0) {
    Usage("--size " + std::to_string(options.bytes) + " does not split into --count " +
          std::to_string(options.count) + " float32 tensors of equal size");
  }
  if (options.dir.empty()) options.dir = fs::temp_directory_path().string();
  if (!fs::is_directory(options.dir)) Usage("--dir " + options.dir + ": not a directory");
  return options;
}

std::string Name(int64_t i) {
  // Appended rather than "v" + to_string: that trips g++ 12's false -Wrestrict.
  std::string name = "v";
  name += std::to_string(i);
  return name;
}

double Seconds(const std::function<void()>& work) {
  const auto start = std::chrono::steady_clock::now();
  work();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Removes the checkpoint file however Run ends (a failed load throws).
class FileRemover {
 public:
  explicit FileRemover(std::string path) : path_(std::move(path)) {}
  FileRemover(const FileRemover&) = delete;
  FileRemover& operator=(const FileRemover&) = delete;
  ~FileRemover() {
    std::error_code ignored;
    fs::remove(path_, ignored);
  }

 private:
  std::string path_;
};

// What torch::save(std::vector<Tensor>) does, with a state dict's names.
void Save(const std::vector<torch::Tensor>& tensors, const std::string& path) {
  torch::serialize::OutputArchive archive;
  for (size_t i = 0; i < tensors.size(); ++i) archive.write(Name(i), tensors[i]);
  archive.save_to(path);
}

// What torch::load does: reading into undefined tensors hands over the
// archive's tensors without a copy.
std::vector<torch::Tensor> Load(const std::string& path, int64_t count) {
  torch::serialize::InputArchive archive;
  archive.load_from(path);
  std::vector<torch::Tensor> tensors(count);
  for (int64_t i = 0; i < count; ++i) archive.read(Name(i), tensors[i]);
  return tensors;
}

int Run(const Options& options) {
  if (options.threads > 0) at::set_num_threads(options.threads);
  const int64_t numel = options.bytes / options.count / static_cast<int64_t>(sizeof(float));
  // The pid keeps concurrent runs in one directory apart.
  const std::string path =
      (fs::path(options.dir) / ("torch_baseline." + std::to_string(getpid()) + ".pt")).string();
  const FileRemover remover(path);
  std::printf(
      "torch_baseline: %lld x %lld-byte float32 tensors, libtorch %s, %d thread%s, "
      "median of %d run%s, in %s\n",
      static_cast<long long>(options.count), static_cast<long long>(numel * 4), TORCH_VERSION,
      at::get_num_threads(), at::get_num_threads() == 1 ? "" : "s", options.repeat,
      options.repeat == 1 ? "" : "s", options.dir.c_str());
  std::fflush(stdout);

  std::vector<double> save_s;
  {
    std::vector<torch::Tensor> tensors;
    tensors.reserve(options.count);
    for (int64_t i = 0; i < options.count; ++i) {
      tensors.push_back(torch::full({numel}, static_cast<float>(i), torch::kFloat32));
    }
    // Every save writes a new file, as `ckflow bench save` does; the removal
    // of the previous one is not timed.
    for (int run = 0; run < options.repeat; ++run) {
      fs::remove(path);
      save_s.push_back(Seconds([&] { Save(tensors, path); }));
    }
  }

  // A live model's tensors: touched, and holding other values than the file.
  std::vector<torch::Tensor> existing;
  existing.reserve(options.count);
  for (int64_t i = 0; i < options.count; ++i) {
    existing.push_back(torch::full({numel}, -1.0f, torch::kFloat32));
  }
  // Interleaved, so that both see the allocator in the same state; freeing
  // the loaded tensors is left out of both timings.
  std::vector<double> load_s;
  std::vector<double> copy_s;
  for (int run = 0; run < options.repeat; ++run) {
    std::vector<torch::Tensor> loaded;
    load_s.push_back(Seconds([&] { loaded = Load(path, options.count); }));
    loaded.clear();
    copy_s.push_back(Seconds([&] {
      loaded = Load(path, options.count);
      torch::NoGradGuard no_grad;
      for (int64_t i = 0; i < options.count; ++i) existing[i].copy_(loaded[i]);
    }));
  }

  const float last = existing.back()[numel - 1].item<float>();
  if (last != static_cast<float>(options.count - 1)) {
    std::fprintf(stderr, "torch_baseline: load + copy_ left v%lld[%lld] = %g, expected %lld\n",
                 static_cast<long long>(options.count - 1), static_cast<long long>(numel - 1), last,
                 static_cast<long long>(options.count - 1));
    return 1;
  }
  const double bytes = static_cast<double>(options.bytes);
  std::printf("libtorch save: %.3f GB/s\n", bytes / Median(save_s) / 1e9);
  std::printf("libtorch load: %.3f GB/s\n", bytes / Median(load_s) / 1e9);
  std::printf("libtorch load+copy_: %.3f GB/s\n", bytes / Median(copy_s) / 1e9);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = ParseFlags(argc, argv);
  try {
    return Run(options);
  } catch (const std::exception& e) {
    // c10::Error's what() carries a backtrace; its first line says what failed.
    std::string message = e.what();
    message = message.substr(0, message.find('\n'));
    std::fprintf(stderr, "torch_baseline: %s\n", message.c_str());
    return 1;
  }
}
