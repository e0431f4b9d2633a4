// What the training tests share: a DeferredRestore that records the objects
// handed to it, standing in for the checkpoint layer's restores.

#ifndef CKFLOW_TESTS_OPS_TRAINING_TEST_UTIL_H_
#define CKFLOW_TESTS_OPS_TRAINING_TEST_UTIL_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "graph/trackable.h"

namespace ckflow::testing {

class RecordingRestore : public DeferredRestore {
 public:
  explicit RecordingRestore(std::vector<std::shared_ptr<Trackable>>* restored)
      : restored_(restored) {}
  int64_t restore_uid() const override { return 1; }
  void Restore(const std::shared_ptr<Trackable>& object) override { restored_->push_back(object); }

 private:
  std::vector<std::shared_ptr<Trackable>>* restored_;
};

}  // namespace ckflow::testing

#endif  // CKFLOW_TESTS_OPS_TRAINING_TEST_UTIL_H_
