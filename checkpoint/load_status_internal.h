// What stands behind a LoadStatus: one of three status kinds, and
// RestoreRoot, which restores a root object and returns the right one.

#ifndef CKFLOW_CHECKPOINT_LOAD_STATUS_INTERNAL_H_
#define CKFLOW_CHECKPOINT_LOAD_STATUS_INTERNAL_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "checkpoint/checkpoint.h"
#include "checkpoint/saver_internal.h"
#include "graph/trackable.h"

namespace ckflow::internal {

// TensorFlow's CheckpointLoadStatus, InitializationOnlyStatus and
// NameBasedSaverStatus behind LoadStatus.
class LoadStatusImpl {
 public:
  virtual ~LoadStatusImpl() = default;
  virtual LoadStatus::Kind kind() const = 0;
  virtual Status AssertConsumed() = 0;
  virtual Status AssertExistingObjectsMatched() = 0;
  virtual Status AssertNontrivialMatch() = 0;
  virtual void ExpectPartial() = 0;
  virtual Status RunRestoreOps(Session& session) = 0;
  virtual Status InitializeOrRestore(Session& session) = 0;
  virtual const std::string& save_path() const = 0;

  static LoadStatus Wrap(std::shared_ptr<LoadStatusImpl> impl) {
    return LoadStatus(std::move(impl));
  }

  // Restored into an eager scope: values were assigned as their objects
  // appeared, so there are no ops to run (TensorFlow's eager statuses).
  bool eager() const { return eager_; }
  void set_eager(bool eager) { eager_ = eager; }

 private:
  bool eager_ = false;
};

// Restores `root` from `save_path` through `saver`: the object-based path if
// the checkpoint has an object graph, else the name-based one (nullopt: an
// initialization-only status). `make_save_counter`, if set, runs after the
// status is built (as TensorFlow creates save_counter then) and returns the
// counter, which a name-based restore treats as optional. With
// `run_later_restores_in`, an object-based graph-mode restore runs the
// restore ops of objects created after this call in that session at once
// (RestoreCoordinator::RunLaterRestoresIn; LoadWeights).
StatusOr<LoadStatus> RestoreRoot(
    const std::shared_ptr<Trackable>& root, const std::shared_ptr<Saver>& saver,
    const std::optional<std::string>& save_path,
    const std::function<std::shared_ptr<Trackable>()>& make_save_counter,
    const RestoreOptions& options = {}, Session* run_later_restores_in = nullptr);

}  // namespace ckflow::internal

#endif  // CKFLOW_CHECKPOINT_LOAD_STATUS_INTERNAL_H_
