// Session: runs a Graph, step after step, in parallel on oneTBB.
//
//   CKFLOW_ASSIGN_OR_RETURN(auto session, Session::Create(root.graph()));
//   CKFLOW_ASSIGN_OR_RETURN(std::vector<Tensor> out,
//                           session->Run({{x, batch}}, {loss}, {train_op}));
//
// Run prunes the graph to what the fetches and targets need (an unfed
// Placeholder outside that subgraph is no error), lets a feed replace any
// node's output, and runs each node once its data and control inputs are
// done, independent branches at the same time. The plan for a (feeds,
// fetches, targets) signature is computed once and cached, so a step loop
// does no graph analysis. The graph may grow after the session is created
// (checkpoint ops are added lazily); new nodes are picked up by new plans.
//
// State that ops keep across runs (variables) lives in the session's
// ResourceMgr: two sessions over one graph are independent.
//
// Parallelism: one oneTBB scheduler runs both a step's independent nodes
// (inter-op) and the loops big kernels split (intra-op: MatMul's blocks,
// large elementwise ops), so the two never oversubscribe the cores. By
// default a step uses the threads of the calling thread's oneTBB arena,
// which honours tbb::global_control; under a limit of one, every node and
// every loop runs on the calling thread. SessionOptions'
// inter_op_parallelism_threads and intra_op_parallelism_threads, after
// TensorFlow's ConfigProto, set them per session instead.
//
// Errors: an op's error stops the run and is returned prefixed with the
// node's name and op type ("dense/MatMul (MatMul): ..."); feeds of the wrong
// dtype or shape, and feeds or fetches of nodes from another graph, are
// InvalidArgument. Nothing escapes as an exception.
//
// Thread safety: Run may be called from many threads at once. The Graph
// must outlive the Session and must not be extended while a Run is being
// planned on another thread.

#ifndef CKFLOW_RUNTIME_SESSION_H_
#define CKFLOW_RUNTIME_SESSION_H_

#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "base/resource.h"
#include "base/status.h"
#include "base/tensor.h"
#include "graph/graph.h"

namespace ckflow {

namespace internal {
class SessionInternals;  // counters for tests and benchmarks (session_internal.h)
}  // namespace internal

class BundleReader;  // bundle/bundle_reader.h
class FileSystem;    // base/file_system.h

struct SessionOptions {
  // Where kernels come from; nullptr means the standard ops.
  const OpRegistry* registry = nullptr;
  // The file layer of the kernels that touch the disk (SaveV2, RestoreV2,
  // MergeV2Checkpoints, RestoreVariables); nullptr means
  // FileSystem::Default(). Must outlive the session.
  FileSystem* file_system = nullptr;
  // The state the session's ops keep (variables); null: the session's own.
  // An eager context's (EagerContext::shared_resources()) lets a session
  // run graph-mode ops, such as a checkpoint's save ops, on the variables
  // an eager program created.
  std::shared_ptr<ResourceMgr> resources;

  // Parallelism, named as in TensorFlow's ConfigProto; 0 leaves each to
  // oneTBB (the calling thread's arena, honouring tbb::global_control).
  // When either is set, the session runs its steps in its own oneTBB
  // task_arena of max(inter, intra) threads, the calling thread included (a
  // 0 counting as oneTBB's default), shared by nodes and kernels' loops:
  //  - inter_op_parallelism_threads: 1 runs a step's nodes one after
  //    another on the calling thread; n > 1 lets independent nodes run at
  //    once on the arena's threads.
  //  - intra_op_parallelism_threads: the most threads one kernel splits its
  //    loops over; 1 runs every kernel's loops on the thread that runs it.
  // Both 1: a step runs entirely on the calling thread. Negative values are
  // InvalidArgument.
  int inter_op_parallelism_threads = 0;
  int intra_op_parallelism_threads = 0;

  // TensorFlow's remapper (RewriterConfig.remapping, on by default there
  // too): a Conv2D or MatMul followed by BiasAdd, then for a convolution
  // an inference FusedBatchNormV3, then Relu or Relu6, runs as one fused
  // op that applies the rest to each block of its output while it is in
  // cache. Only chains whose intermediate results nothing else in the run
  // reads or fetches are fused, and the fused op computes the same bits as
  // the separate ones; off runs every node as built (for comparisons). A
  // MaxPool whose MaxPoolGrad is in the same run also records where each
  // maximum was, so that the gradient (with a ReluGrad through the
  // pooling's input) need not read the input again; a FusedBatchNormGradV3
  // of that gradient, with windows that cannot overlap, makes the
  // gradient's rows itself. It needs the registry's _FusedConv2D,
  // _FusedMatMul, _MaxPoolWithTaps, _MaxPoolGradWithTaps and
  // _FusedBatchNormGradFromTaps (the standard ops have them).
  bool remapping = true;
};

// Options of one Run.
struct RunOptions {
  // Replaces SessionOptions::file_system for this run (a Checkpoint passes
  // its own, so its kernels write where it does); nullptr: the session's.
  FileSystem* file_system = nullptr;
  // An open checkpoint the run's restore kernels (RestoreV2,
  // RestoreVariables) read through when the prefix they are fed is its
  // prefix(), instead of opening the checkpoint: a restore's status passes
  // the reader it matched with, so the index is parsed once however many
  // restore ops run. Kept for this run only; must outlive it. Null: each
  // kernel opens the checkpoint it is fed for that run.
  const BundleReader* bundle_reader = nullptr;
};

// A fed value: for an Output, or for a tensor named "node" / "node:1".
struct Feed {
  Feed(Output output, Tensor tensor) : target(output), value(std::move(tensor)) {}
  Feed(std::string name, Tensor tensor) : target(std::move(name)), value(std::move(tensor)) {}
  Feed(const char* name, Tensor tensor) : target(std::string(name)), value(std::move(tensor)) {}
  std::variant<Output, std::string> target;
  Tensor value;
};

class Session {
 public:
  // Fails with the graph's first build error, if any.
  static StatusOr<std::unique_ptr<Session>> Create(const Graph& graph, SessionOptions options = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Runs the subgraph that `fetches` and `targets` need, with `feeds`
  // replacing node outputs; returns the fetched tensors in order.
  StatusOr<std::vector<Tensor>> Run(const std::vector<Feed>& feeds,
                                    const std::vector<Output>& fetches,
                                    const std::vector<Output>& targets = {});
  StatusOr<std::vector<Tensor>> Run(const std::vector<Feed>& feeds,
                                    const std::vector<Output>& fetches,
                                    const std::vector<Output>& targets, const RunOptions& options);

  // SessionOptions::file_system (null: the default one).
  FileSystem* file_system() const;

  const Graph& graph() const;
  ResourceMgr& resources();

 private:
  class Impl;
  friend class internal::SessionInternals;
  explicit Session(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ckflow

#endif  // CKFLOW_RUNTIME_SESSION_H_
