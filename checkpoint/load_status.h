// LoadStatus: what Checkpoint::Restore and LoadWeights return, with
// TensorFlow's status methods (assert_consumed, initialize_or_restore, ...).

#ifndef CKFLOW_CHECKPOINT_LOAD_STATUS_H_
#define CKFLOW_CHECKPOINT_LOAD_STATUS_H_

#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "base/status.h"

namespace ckflow {

class Session;

namespace internal {
class LoadStatusImpl;
}  // namespace internal

// What Checkpoint::Restore returns: TensorFlow's CheckpointLoadStatus,
// InitializationOnlyStatus or NameBasedSaverStatus, as one value type (copies
// share the same restore). kind() tells which; each method has the exact
// conditions of its TensorFlow namesake (assert_consumed, ...). A failed
// assertion is FailedPrecondition listing what did not match by object path
// and checkpoint key.
//
// Dropping the last copy of a status whose checkpoint values were never all
// matched logs a warning listing them, unless ExpectPartial() was called.
class LoadStatus {
 public:
  enum class Kind { kCheckpointLoad, kInitializationOnly, kNameBasedSaver };

  Kind kind() const;
  // "CheckpointLoadStatus", "InitializationOnlyStatus", "NameBasedSaverStatus".
  std::string_view kind_name() const;

  // Every checkpointed value was matched to an object and every object that
  // exists now was matched (also AssertExistingObjectsMatched).
  Status AssertConsumed() const;
  // Every object that exists now and owns values was matched.
  Status AssertExistingObjectsMatched() const;
  // Something besides the root was matched.
  Status AssertNontrivialMatch() const;
  // Silences the warning about unmatched values. Returns *this.
  LoadStatus& ExpectPartial();
  // Runs all restore ops created so far (including deferred ones).
  Status RunRestoreOps(Session& session) const;
  // Runs the restore ops, then initializes every variable this restore did
  // not match and no later restore assigned.
  Status InitializeOrRestore(Session& session) const;
  // A restore into an eager scope (graph/eager.h) assigned each value as its
  // object appeared: the four calls above (with or without a session) are
  // no-ops returning OK; without one, in graph mode, FailedPrecondition.
  Status RunRestoreOps() const;
  Status InitializeOrRestore() const;

  // The checkpoint this status restores from; empty for kInitializationOnly.
  const std::string& save_path() const;

 private:
  friend class Checkpoint;
  friend class internal::LoadStatusImpl;
  explicit LoadStatus(std::shared_ptr<internal::LoadStatusImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<internal::LoadStatusImpl> impl_;
};

}  // namespace ckflow

#endif  // CKFLOW_CHECKPOINT_LOAD_STATUS_H_
