// The examples' progress bar: one line of stderr, redrawn at most every
// 100 ms,
//
//   epoch 1/2 [##########..........] step 300/937  loss 0.41230  5120 images/s
//
// the rate counted from the bar's creation. Not thread-safe: one training
// loop draws it.

#ifndef CKFLOW_EXAMPLES_PROGRESS_BAR_H_
#define CKFLOW_EXAMPLES_PROGRESS_BAR_H_

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>

namespace ckflow::examples {

class ProgressBar {
 public:
  // `total` steps, each of `items_per_step` items counted in `unit` ("steps"
  // for 1 per step, "images" for a batch's).
  explicit ProgressBar(int64_t total, int64_t items_per_step = 1, std::string unit = "steps")
      : total_(total), items_per_step_(items_per_step), unit_(std::move(unit)) {}

  // Step `step` of `total` (1-based) is done with `loss`; `prefix` goes
  // before the bar. The last step always draws and ends the line.
  void Update(int64_t step, float loss, const std::string& prefix = "") {
    ++done_;
    auto now = std::chrono::steady_clock::now();
    if (step != total_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    const double seconds = std::chrono::duration<double>(now - start_).count();
    const int filled = total_ > 0 ? static_cast<int>(kWidth * step / total_) : kWidth;
    std::fprintf(stderr, "\r%s[%s%s] step %lld/%lld  loss %.5f  %.0f %s/s", prefix.c_str(),
                 std::string(filled, '#').c_str(), std::string(kWidth - filled, '.').c_str(),
                 static_cast<long long>(step), static_cast<long long>(total_), loss,
                 seconds > 0 ? static_cast<double>(done_ * items_per_step_) / seconds : 0.0,
                 unit_.c_str());
    if (step == total_) std::fputc('\n', stderr);
  }

 private:
  static constexpr int kWidth = 30;
  const int64_t total_;
  const int64_t items_per_step_;
  const std::string unit_;
  int64_t done_ = 0;  // Update calls so far
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace ckflow::examples

#endif  // CKFLOW_EXAMPLES_PROGRESS_BAR_H_
