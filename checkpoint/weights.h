// Keras' save_weights and load_weights: one object (usually a Model) saved
// and restored as the root of the object graph.

#ifndef CKFLOW_CHECKPOINT_WEIGHTS_H_
#define CKFLOW_CHECKPOINT_WEIGHTS_H_

#include <memory>
#include <string>

#include "base/status.h"
#include "checkpoint/checkpoint_options.h"
#include "checkpoint/load_status.h"
#include "graph/trackable.h"
#include "runtime/session.h"

namespace ckflow {

// Keras-style weights of one object (usually a Model) with that object as
// the root of the object graph: no save_counter, exactly `path` written. As
// Keras' save_weights (a tf.train.Checkpoint(root=model)), the root also
// lists itself as its child "root".
// Because the root differs, these files do not match Checkpoint{model}
// (TensorFlow warns about the same). Synchronous only: InvalidArgument for
// options.async. FailedPrecondition if the object owns no variables yet;
// the object graph's first refused Track (Trackable::tracking_status).
Status SaveWeights(const std::shared_ptr<Trackable>& root, const std::string& path,
                   Session& session, const SaveOptions& options = {});
// Restores with `root` as the root, runs the restore ops available now, and
// checks AssertNontrivialMatch, as Keras' load_weights does. Deferred like
// Checkpoint::Restore: a model (subclassed or Sequential) whose layers are
// not built yet is matched by its layers; each layer's weights get their
// restore ops when its first call creates them, an optimizer's slots when
// Minimize creates them, and, as Keras's graph-mode load_weights does, the
// ops run in `session` right there: each value is in place before the first
// step that reads it, with no RunRestoreOps (a problem is reported by
// RunRestoreOps, InitializeOrRestore and the assertions). `session` must
// outlive the building of the model. InitializeOrRestore still initializes
// what the file lacks. The ops go into `session`'s graph, where the model's
// variables are or will be. Errors: InvalidArgument for a null
// root; NotFound or DataLoss for the checkpoint; FailedPrecondition
// ("Nothing except the root object matched ..." or "Nothing to load ...")
// when nothing below the root matched. `options` as Checkpoint::Restore's.
StatusOr<LoadStatus> LoadWeights(const std::shared_ptr<Trackable>& root, const std::string& path,
                                 Session& session, const RestoreOptions& options = {});

}  // namespace ckflow

#endif  // CKFLOW_CHECKPOINT_WEIGHTS_H_
