#include "runtime/session.h"

#include <tbb/info.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <new>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "base/mutex.h"
#include "ops/standard_ops.h"
#include "runtime/executor_internal.h"
#include "runtime/session_internal.h"

namespace ckflow {
namespace {

using internal::ExecutionPlan;

// A step loop may use a few signatures; a program that makes a new one per
// step must not grow the cache without bound.
constexpr size_t kMaxCachedPlans = 1024;

std::string FeedName(const Feed& feed) {
  if (const auto* out = std::get_if<Output>(&feed.target)) return out->name();
  return std::get<std::string>(feed.target);
}

// The (feeds, fetches, targets) a plan was built for, as the caller spelled
// them: a feed by name and the same feed by Output are different signatures
// with equal plans, which costs one more plan and saves resolving names on
// every step.
struct Signature {
  std::vector<std::variant<Output, std::string>> feeds;
  std::vector<Output> fetches;
  std::vector<Output> targets;

  bool Matches(const std::vector<Feed>& f, const std::vector<Output>& fe,
               const std::vector<Output>& t) const {
    if (f.size() != feeds.size() || fe != fetches || t != targets) return false;
    for (size_t i = 0; i < f.size(); ++i) {
      if (!(f[i].target == feeds[i])) return false;
    }
    return true;
  }
};

void HashCombine(uint64_t& h, uint64_t v) { h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2); }

void HashOutputs(uint64_t& h, const std::vector<Output>& outputs) {
  HashCombine(h, outputs.size());
  for (const Output& o : outputs) {
    HashCombine(h, std::hash<const void*>()(o.node()));
    HashCombine(h, static_cast<uint64_t>(o.index()));
  }
}

uint64_t HashSignature(const std::vector<Feed>& feeds, const std::vector<Output>& fetches,
                       const std::vector<Output>& targets) {
  uint64_t h = feeds.size();
  for (const Feed& f : feeds) {
    if (const auto* out = std::get_if<Output>(&f.target)) {
      HashCombine(h, std::hash<const void*>()(out->node()));
      HashCombine(h, static_cast<uint64_t>(out->index()));
    } else {
      HashCombine(h, std::hash<std::string_view>()(std::get<std::string>(f.target)));
    }
  }
  HashOutputs(h, fetches);
  HashOutputs(h, targets);
  return h;
}

struct CachedPlan {
  Signature signature;
  std::unique_ptr<ExecutionPlan> plan;
};

}  // namespace

class Session::Impl {
 public:
  Impl(const Graph& graph, const OpRegistry& registry, const SessionOptions& options)
      : graph_(graph),
        registry_(registry),
        file_system_(options.file_system),
        resources_(options.resources ? options.resources : std::make_shared<ResourceMgr>()),
        remapping_(options.remapping),
        serial_(options.inter_op_parallelism_threads == 1),
        intra_op_threads_(options.intra_op_parallelism_threads) {
    const int inter = options.inter_op_parallelism_threads;
    const int intra = options.intra_op_parallelism_threads;
    if (inter > 0 || intra > 0) {
      const int default_threads = tbb::info::default_concurrency();
      arena_.emplace(
          std::max(inter > 0 ? inter : default_threads, intra > 0 ? intra : default_threads));
    }
  }

  StatusOr<std::vector<Tensor>> Run(const RunOptions& options, const std::vector<Feed>& feeds,
                                    const std::vector<Output>& fetches,
                                    const std::vector<Output>& targets) {
    const uint64_t hash = HashSignature(feeds, fetches, targets);
    std::shared_ptr<const CachedPlan> cached = FindPlan(hash, feeds, fetches, targets);
    if (cached == nullptr) {
      CKFLOW_ASSIGN_OR_RETURN(cached, BuildPlan(hash, feeds, fetches, targets));
    }
    const ExecutionPlan& plan = *cached->plan;
    CKFLOW_RETURN_IF_ERROR(CheckFeedValues(plan, feeds));
    std::vector<Tensor> fetched;
    FileSystem* file_system = options.file_system ? options.file_system : file_system_;
    auto run = [&] {
      return plan.Run(feeds, *resources_, &fetched, file_system, serial_, intra_op_threads_,
                      options.bundle_reader);
    };
    Status status;
    if (arena_.has_value()) {
      // The whole step runs inside the arena, so every task and loop it
      // starts stays on the arena's threads.
      arena_->execute([&] { status = run(); });
    } else {
      status = run();
    }
    CKFLOW_RETURN_IF_ERROR(status);
    return fetched;
  }

  const Graph& graph() const { return graph_; }
  ResourceMgr& resources() { return *resources_; }
  FileSystem* file_system() const { return file_system_; }

  int num_cached_plans() const CKFLOW_EXCLUDES(cache_mu_) {
    ReaderMutexLock lock(&cache_mu_);
    return static_cast<int>(plans_.size());
  }
  int num_fused_ops() const CKFLOW_EXCLUDES(cache_mu_) {
    ReaderMutexLock lock(&cache_mu_);
    int n = 0;
    for (const auto& [hash, cached] : plans_) n += cached->plan->num_fused_ops();
    return n;
  }
  std::vector<std::string> fused_op_types() const CKFLOW_EXCLUDES(cache_mu_) {
    ReaderMutexLock lock(&cache_mu_);
    std::vector<std::string> types;
    for (const auto& [hash, cached] : plans_) {
      for (const Output& fused : cached->plan->fused_nodes()) types.push_back(fused.node()->type());
    }
    std::sort(types.begin(), types.end());
    return types;
  }
  int num_kernels() const CKFLOW_EXCLUDES(build_mu_) {
    MutexLock lock(&build_mu_);
    return static_cast<int>(kernels_.size());
  }

 private:
  std::shared_ptr<const CachedPlan> FindPlan(uint64_t hash, const std::vector<Feed>& feeds,
                                             const std::vector<Output>& fetches,
                                             const std::vector<Output>& targets) const
      CKFLOW_EXCLUDES(cache_mu_) {
    ReaderMutexLock lock(&cache_mu_);
    auto [begin, end] = plans_.equal_range(hash);
    for (auto it = begin; it != end; ++it) {
      if (it->second->signature.Matches(feeds, fetches, targets)) return it->second;
    }
    return nullptr;
  }

  StatusOr<std::shared_ptr<const CachedPlan>> BuildPlan(uint64_t hash,
                                                        const std::vector<Feed>& feeds,
                                                        const std::vector<Output>& fetches,
                                                        const std::vector<Output>& targets)
      CKFLOW_EXCLUDES(build_mu_, cache_mu_) {
    // One builder at a time: threads racing on a new signature build it once,
    // and kernels are created once per node.
    MutexLock build_lock(&build_mu_);
    if (auto cached = FindPlan(hash, feeds, fetches, targets)) return cached;

    auto cached = std::make_shared<CachedPlan>();
    std::vector<Output> fed;
    for (const Feed& f : feeds) {
      CKFLOW_ASSIGN_OR_RETURN(Output out, ResolveFeed(f, fed.size()));
      for (size_t j = 0; j < fed.size(); ++j) {
        if (fed[j] == out) {
          return InvalidArgumentError("feed '", FeedName(f), "': ", out.name(),
                                      " is already fed by feed '", FeedName(feeds[j]), "'");
        }
      }
      fed.push_back(out);
      cached->signature.feeds.push_back(f.target);
    }
    for (size_t i = 0; i < fetches.size(); ++i) {
      CKFLOW_RETURN_IF_ERROR(CheckOutput(fetches[i], "fetch", i, /*need_index=*/true));
    }
    for (size_t i = 0; i < targets.size(); ++i) {
      CKFLOW_RETURN_IF_ERROR(CheckOutput(targets[i], "target", i, /*need_index=*/false));
    }
    CKFLOW_ASSIGN_OR_RETURN(cached->plan, ExecutionPlan::Build(
                                              std::move(fed), fetches, targets,
                                              [this](const Node& n) {
                                                // Build calls this before it returns,
                                                // under build_lock.
                                                build_mu_.AssertHeld();
                                                return KernelFor(n);
                                              },
                                              remapping_ ? &registry_ : nullptr));
    cached->signature.fetches = fetches;
    cached->signature.targets = targets;

    WriterMutexLock lock(&cache_mu_);
    if (plans_.size() >= kMaxCachedPlans) plans_.erase(plans_.begin());
    plans_.emplace(hash, cached);
    return std::shared_ptr<const CachedPlan>(std::move(cached));
  }

  // "node" or "node:1" (or an Output) -> the output it names.
  StatusOr<Output> ResolveFeed(const Feed& feed, size_t i) const {
    if (const auto* out = std::get_if<Output>(&feed.target)) {
      CKFLOW_RETURN_IF_ERROR(CheckOutput(*out, "feed", i, /*need_index=*/true));
      return *out;
    }
    const std::string& name = std::get<std::string>(feed.target);
    std::string_view node_name = name;
    int index = 0;
    if (size_t colon = name.rfind(':'); colon != std::string::npos) {
      const char* first = name.data() + colon + 1;
      const char* last = name.data() + name.size();
      auto [end, ec] = std::from_chars(first, last, index);
      if (first != last && ec == std::errc() && end == last && index >= 0) {
        node_name = node_name.substr(0, colon);
      } else {
        index = 0;  // not an output index: the whole name is the node's
      }
    }
    const Node* node = graph_.FindNode(node_name);
    if (node == nullptr) return InvalidArgumentError("feed '", name, "': no such node");
    if (index >= node->num_outputs()) {
      return InvalidArgumentError("feed '", name, "': node '", node->name(), "' has ",
                                  node->num_outputs(), " output(s)");
    }
    return Output(const_cast<Node*>(node), index);
  }

  // Valid, from this session's graph, and (for feeds and fetches) naming an
  // existing output.
  Status CheckOutput(const Output& out, std::string_view what, size_t i, bool need_index) const {
    if (!out.valid()) {
      // Most likely built after the session was created, by a step that
      // failed: say why.
      const Status build_error = graph_.status();
      return InvalidArgumentError(
          what, " ", i, " is an invalid Output (an earlier build step failed",
          build_error.ok() ? std::string() : ": " + build_error.ToString(), ")");
    }
    if (&out.node()->graph() != &graph_) {
      return InvalidArgumentError(what, " '", out.name(), "' is from another graph");
    }
    if (need_index && (out.index() < 0 || out.index() >= out.node()->num_outputs())) {
      return InvalidArgumentError(what, " '", out.name(), "': node '", out.node()->name(), "' has ",
                                  out.node()->num_outputs(), " output(s)");
    }
    return OkStatus();
  }

  static Status CheckFeedValues(const ExecutionPlan& plan, const std::vector<Feed>& feeds) {
    for (size_t i = 0; i < feeds.size(); ++i) {
      const Output& out = plan.feeds()[i];
      const Tensor& value = feeds[i].value;
      if (value.dtype() != out.dtype()) {
        return InvalidArgumentError("feed '", FeedName(feeds[i]), "': a ",
                                    DataTypeName(value.dtype()), " tensor for ", out.name(),
                                    ", which is ", DataTypeName(out.dtype()));
      }
      if (!internal::ShapeAdmits(out.shape(), value.shape())) {
        return InvalidArgumentError("feed '", FeedName(feeds[i]), "': shape ",
                                    value.shape().ToString(), " is incompatible with ", out.name(),
                                    "'s shape ", out.shape().ToString());
      }
    }
    return OkStatus();
  }

  StatusOr<const Kernel*> KernelFor(const Node& node) CKFLOW_REQUIRES(build_mu_) {
    auto it = kernels_.find(node.id());
    if (it != kernels_.end()) return it->second.get();
    const std::string label = node.name() + " (" + node.type() + ")";
    const OpDef* def = registry_.Find(node.type());
    if (def == nullptr) {
      return NotFoundError(label, ": op type '", node.type(),
                           "' is not in the session's op registry");
    }
    if (!def->kernel_factory) return UnimplementedError(label, ": op has no kernel");
    Status error;
    std::unique_ptr<Kernel> kernel;
    // Factories are user code too: nothing they throw leaves the session.
    try {
      StatusOr<Kernel> made = def->kernel_factory(node);
      if (made.ok()) {
        kernel = std::make_unique<Kernel>(std::move(made).value());
      } else {
        error = made.status();
      }
    } catch (const std::bad_alloc&) {
      error = ResourceExhaustedError("out of memory creating the kernel");
    } catch (const std::exception& e) {
      error = InternalError("kernel factory threw: ", e.what());
    }
    if (!error.ok()) return error.WithContext(label);
    if (!*kernel) return InternalError(label, ": kernel factory returned an empty kernel");
    const Kernel* result = kernel.get();
    kernels_.emplace(node.id(), std::move(kernel));
    return result;
  }

  const Graph& graph_;
  const OpRegistry& registry_;
  FileSystem* const file_system_;
  const std::shared_ptr<ResourceMgr> resources_;  // never null
  const bool remapping_;
  const bool serial_;           // inter_op_parallelism_threads == 1
  const int intra_op_threads_;  // 0: no limit
  // The session's own threads, if its options ask for a number.
  std::optional<tbb::task_arena> arena_;

  mutable Mutex build_mu_;  // serializes plan building
  // By node id; a plan points into these, so they live as long as the
  // session.
  std::unordered_map<int, std::unique_ptr<Kernel>> kernels_ CKFLOW_GUARDED_BY(build_mu_);

  mutable SharedMutex cache_mu_;
  // By signature hash. shared_ptr: a run keeps its plan even if the cache
  // evicts it meanwhile.
  std::unordered_multimap<uint64_t, std::shared_ptr<const CachedPlan>> plans_
      CKFLOW_GUARDED_BY(cache_mu_);
};

Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Session::~Session() = default;

StatusOr<std::unique_ptr<Session>> Session::Create(const Graph& graph, SessionOptions options) {
  CKFLOW_RETURN_IF_ERROR(graph.status());
  if (options.inter_op_parallelism_threads < 0) {
    return InvalidArgumentError("SessionOptions::inter_op_parallelism_threads is ",
                                options.inter_op_parallelism_threads, ": expected 0 or more");
  }
  if (options.intra_op_parallelism_threads < 0) {
    return InvalidArgumentError("SessionOptions::intra_op_parallelism_threads is ",
                                options.intra_op_parallelism_threads, ": expected 0 or more");
  }
  const OpRegistry& registry = options.registry ? *options.registry : StandardOps();
  return std::unique_ptr<Session>(new Session(std::make_unique<Impl>(graph, registry, options)));
}

StatusOr<std::vector<Tensor>> Session::Run(const std::vector<Feed>& feeds,
                                           const std::vector<Output>& fetches,
                                           const std::vector<Output>& targets) {
  return Run(feeds, fetches, targets, RunOptions());
}

FileSystem* Session::file_system() const { return impl_->file_system(); }

StatusOr<std::vector<Tensor>> Session::Run(const std::vector<Feed>& feeds,
                                           const std::vector<Output>& fetches,
                                           const std::vector<Output>& targets,
                                           const RunOptions& options) {
  // The library boundary: allocation failures in planning or bookkeeping
  // (kernels' own are caught by the executor) become a Status.
  try {
    return impl_->Run(options, feeds, fetches, targets);
  } catch (const std::bad_alloc&) {
    return ResourceExhaustedError("Session::Run: out of memory");
  } catch (const std::exception& e) {
    return InternalError("Session::Run: ", e.what());
  }
}

const Graph& Session::graph() const { return impl_->graph(); }
ResourceMgr& Session::resources() { return impl_->resources(); }

namespace internal {
int SessionInternals::num_cached_plans(const Session& session) {
  return session.impl_->num_cached_plans();
}
int SessionInternals::num_kernels(const Session& session) { return session.impl_->num_kernels(); }
int SessionInternals::num_fused_ops(const Session& session) {
  return session.impl_->num_fused_ops();
}
std::vector<std::string> SessionInternals::fused_op_types(const Session& session) {
  return session.impl_->fused_op_types();
}
}  // namespace internal

}  // namespace ckflow
