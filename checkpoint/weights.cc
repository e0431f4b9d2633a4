#include "checkpoint/weights.h"

#include <map>

#include "checkpoint/checkpoint_internal.h"
#include "checkpoint/load_status_internal.h"
#include "checkpoint/object_graph_internal.h"
#include "checkpoint/save_sequence_internal.h"
#include "checkpoint/saver_internal.h"
#include "ops/layers.h"

namespace ckflow {

namespace {

// The saver of a SaveWeights root, kept with its graph so repeated
// SaveWeights and LoadWeights calls reuse their ops.
struct WeightSavers : GraphAttachment {
  std::map<const Trackable*, std::shared_ptr<internal::Saver>> by_root;
};

// The saver's ops go into the graph `session` runs: the graph of the root's
// variables or, before there are any (LoadWeights deferred until the layers
// build), where they will appear. Its file system is the session's, fixed
// when the saver is first made for `root`.
StatusOr<std::shared_ptr<internal::Saver>> SaverForRoot(const std::shared_ptr<Trackable>& root,
                                                        Session& session) {
  if (root == nullptr) return InvalidArgumentError("SaveWeights/LoadWeights: the object is null");
  // A session runs a graph that keeps growing (these restore ops are added
  // to it), so the const in Session::graph() is the session's promise not to
  // change it, not the graph's.
  Graph& g = const_cast<Graph&>(session.graph());
  std::shared_ptr<internal::Saver>& saver = g.Attachment<WeightSavers>().by_root[root.get()];
  if (saver == nullptr) {
    CKFLOW_ASSIGN_OR_RETURN(Scope scope, Scope::ForGraph(g));
    saver = std::make_shared<internal::Saver>(scope.NewSubScope("weights"), session.file_system());
  }
  return saver;
}

}  // namespace

Status SaveWeights(const std::shared_ptr<Trackable>& root, const std::string& path,
                   Session& session, const SaveOptions& options) {
  if (options.async) {
    // Nothing would let the caller wait for it or see its error.
    return InvalidArgumentError("SaveWeights('", path,
                                "'): async saves need a Checkpoint (Checkpoint::Sync waits)");
  }
  if (options.incremental) {
    // Keras' save_weights writes one path over and over: nothing to link.
    return InvalidArgumentError("SaveWeights('", path,
                                "'): incremental saves need a Checkpoint's numbered saves");
  }
  if (root == nullptr) return InvalidArgumentError("SaveWeights('", path, "'): the object is null");
  CKFLOW_RETURN_IF_ERROR(internal::Saver::CheckOptions(options, "SaveWeights('" + path + "')"));
  internal::ObjectGraph graph = internal::BuildObjectGraph(root);
  CKFLOW_RETURN_IF_ERROR(graph.tracking_status);
  // Keras refuses a model that is not built; a built one without weights
  // (a Flatten, a pooling) saves its object graph alone.
  const auto* layer = dynamic_cast<const Layer*>(root.get());
  if (graph.values.empty() && (layer == nullptr || !layer->built())) {
    return FailedPreconditionError("SaveWeights('", path,
                                   "'): the object owns no variables yet (call the model once so "
                                   "its layers build)");
  }
  // Keras' save_weights writes through tf.train.Checkpoint(root=model),
  // whose root lists itself as the dependency "root": the same edge here
  // makes the object graph Keras', node for node.
  graph.nodes[0].children.emplace_back("root", 0);
  if (!graph.values.empty() &&
      &graph.values[0].attribute.handle.node()->graph() != &session.graph()) {
    return InvalidArgumentError("SaveWeights('", path,
                                "'): the object's variables are not in the session's graph");
  }
  CKFLOW_ASSIGN_OR_RETURN(std::shared_ptr<internal::Saver> saver, SaverForRoot(root, session));
  CKFLOW_RETURN_IF_ERROR(saver->Write(graph, path, session, options));
  return internal::CommitStateFile(saver->file_system(), path, options.durable);
}

StatusOr<LoadStatus> LoadWeights(const std::shared_ptr<Trackable>& root, const std::string& path,
                                 Session& session, const RestoreOptions& options) {
  CKFLOW_ASSIGN_OR_RETURN(std::shared_ptr<internal::Saver> saver, SaverForRoot(root, session));
  CKFLOW_ASSIGN_OR_RETURN(LoadStatus status,
                          internal::RestoreRoot(root, saver, path, nullptr, options, &session));
  CKFLOW_RETURN_IF_ERROR(status.RunRestoreOps(session));
  CKFLOW_RETURN_IF_ERROR(status.AssertNontrivialMatch());
  return status;
}

}  // namespace ckflow
