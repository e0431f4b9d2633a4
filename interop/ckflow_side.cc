// The ckflow half of the TensorFlow interop suite (interop/test_interop.py
// is the other half and the judge): small steps the suite runs in turn with
// TensorFlow's, each reading what the other side wrote.
//
//   interop_ckflow train   --dir D [--restore latest|none|PATH] --data F --steps N ...
//       The graph-mode example of tf.compat.v1.train.Checkpoint: a Regress
//       model (Dense "input_transform", Dense "hidden" with ReLU, Dense
//       "out") and an optimizer, restored before the model is built (so the
//       layers' variables and the slots restore as they appear), trained,
//       saved.
//   interop_ckflow weights [--load P] [--load-via-checkpoint P] [--save P] ...
//       Keras' Sequential([Dense(4), Dense(2)]) and its weights files.
//   interop_ckflow stack --layers L --input-shape H,W,C [--load P] [--save P] [--dump F]
//       A Sequential of Keras layers described by L (Stack below), through
//       LoadWeights and SaveWeights.
//   interop_ckflow partitioned --spec F [--parts N --axis A] [--cut NAME:N:A] ...
//       TensorFlow 1's get_variable(partitioner=fixed_size_partitioner(N,
//       A)): a PartitionedVariable (or, with no parts, a plain variable)
//       for each of the spec's values, saved and restored by name
//       with a NameBasedSaver (V1 files too; --step, --pad-step-number,
//       --latest-filename, --restore-latest D as tf.compat.v1.train.Saver's).
//   interop_ckflow eager --data F --steps N --save PREFIX [--dump F]
//       An eager program (README's TrainEagerly): Sequential([Dense(10,
//       ReLU), Dense(1)]) and Adam on an eager scope, trained N steps with
//       Minimize of a loss function, saved by Checkpoint::Save without a
//       Session.
//   interop_ckflow state --dir D --path P [--all P ...]
//       UpdateCheckpointState as given, from the working directory.
//   interop_ckflow generic --spec F [--restore PATH|--restore-latest D] ...
//       A tree of modules and variables made from the keys of a values file
//       ("a/b/.ATTRIBUTES/VARIABLE_VALUE" is variable b of module a), for
//       dtypes, devices, managers and structure checks; with --group N, N
//       threads save it as the members of a group (checkpoint/group.h); with
//       --optimizer NAME and --train KEY..., a tf.compat.v1.train optimizer
//       "optimizer" beside the tree, with its slots for those variables.
//
// Both print what they did as "name: value" lines on stdout (kind,
// assert_consumed, save_counter, saved, ...), and dump the live values of
// every variable, keyed by checkpoint key, to values files
// (interop/values_file.h).
#include <CLI/CLI.hpp>
#include <charconv>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bundle/bundle_format.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_management.h"
#include "checkpoint/name_based_saver.h"
#include "checkpoint/weights.h"
#include "interop/values_file.h"
#include "ops/array_ops.h"
#include "ops/conv_layers.h"
#include "ops/core_layers.h"
#include "ops/initializers.h"
#include "ops/layers.h"
#include "ops/losses.h"
#include "ops/nn_ops.h"
#include "ops/normalization_layers.h"
#include "ops/optimizers.h"
#include "ops/partitioned_variables.h"
#include "ops/pooling_layers.h"
#include "ops/sequence_layers.h"
#include "ops/variables.h"
#include "runtime/session.h"

namespace ckflow::interop {
namespace {

constexpr char kValueSuffix[] = "/.ATTRIBUTES/VARIABLE_VALUE";

// tf.Module.
class Module : public Trackable {
 public:
  std::string TypeName() const override { return "Module"; }
};

class Regress : public Model {
 public:
  Regress() : Model("regress") {
    input_transform_ = Track("input_transform", Dense::Make(10));
    hidden_ = Track("hidden", Dense::Make(10, {.activation = ops::Relu}));
    out_ = Track("out", Dense::Make(1));
  }

 protected:
  Output Call(const Scope& scope, Output x) override {
    return (*out_)(scope, (*hidden_)(scope, (*input_transform_)(scope, x)));
  }

 private:
  std::shared_ptr<Dense> input_transform_, hidden_, out_;
};

// A group member other than rank 0 reports nothing: rank 0 speaks for all.
thread_local bool quiet = false;

void Report(const std::string& name, const std::string& value) {
  if (!quiet) std::printf("%s: %s\n", name.c_str(), value.c_str());
}

// A group of threads (checkpoint/group.h): AllGather is a barrier that hands
// every member everyone's string.
class ThreadGroup {
 public:
  explicit ThreadGroup(int size) : size_(size), slots_(size) {}
  int size() const { return size_; }
  std::vector<std::string> AllGather(int rank, std::string_view mine) {
    std::unique_lock<std::mutex> lock(mu_);
    const int64_t round = round_;
    slots_[rank] = std::string(mine);
    if (++arrived_ == size_) {
      result_ = slots_;
      arrived_ = 0;
      ++round_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return round_ != round; });
    }
    return result_;
  }

 private:
  const int size_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  int64_t round_ = 0;
  std::vector<std::string> slots_, result_;
};

class ThreadMember final : public CheckpointGroup {
 public:
  ThreadMember(ThreadGroup* group, int rank) : group_(group), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }
  StatusOr<std::vector<std::string>> AllGather(std::string_view mine, GroupTimeout) override {
    return group_->AllGather(rank_, mine);
  }

 private:
  ThreadGroup* group_;
  int rank_;
};

// "ok", or "failed: " and the message's first line.
std::string Outcome(const Status& s) {
  if (s.ok()) return "ok";
  std::string message = s.ToString();
  return "failed: " + message.substr(0, message.find('\n'));
}

void ReportAssertions(const LoadStatus& status) {
  Report("kind", std::string(status.kind_name()));
  Report("assert_consumed", Outcome(status.AssertConsumed()));
  Report("assert_existing_objects_matched", Outcome(status.AssertExistingObjectsMatched()));
  Report("assert_nontrivial_match", Outcome(status.AssertNontrivialMatch()));
}

StatusOr<int64_t> SaveCounter(Session& session, const Checkpoint& checkpoint) {
  if (checkpoint.save_counter() == nullptr) return int64_t{0};
  CKFLOW_ASSIGN_OR_RETURN(std::vector<Tensor> out,
                          session.Run({}, {checkpoint.save_counter()->value()}));
  return out[0].scalar<int64_t>();
}

std::optional<std::string> RestorePath(const std::string& restore, const std::string& dir) {
  if (restore == "none" || restore.empty()) return std::nullopt;
  if (restore == "latest") return LatestCheckpoint(dir);
  return restore;
}

// Rows [begin, begin + count) of a [rows, ...] float tensor.
Tensor Rows(const Tensor& t, int64_t begin, int64_t count) {
  std::vector<int64_t> dims = t.shape().dim_sizes();
  const int64_t row = t.NumElements() / dims[0];
  dims[0] = count;
  Tensor out(DT_FLOAT, TensorShape(dims));
  std::memcpy(out.raw_data(), t.flat<float>().data() + begin * row,
              static_cast<size_t>(count * row) * sizeof(float));
  return out;
}

// The training data of a values file: x [N,4] and y [N,1].
StatusOr<std::pair<Tensor, Tensor>> ReadData(const std::string& path) {
  CKFLOW_ASSIGN_OR_RETURN(NamedTensors data, ReadValues(path));
  std::optional<Tensor> x, y;
  for (const auto& [key, t] : data) {
    if (key == "x") x = t;
    if (key == "y") y = t;
  }
  if (!x || !y) return InvalidArgumentError(path, ": needs x and y");
  return std::make_pair(*x, *y);
}

struct TrainOptions {
  std::string dir;
  std::string restore = "latest";
  std::string data;
  int64_t steps = 0;
  int64_t batch = 8;
  std::string optimizer = "adam";
  float learning_rate = 0.01f;
  std::string restored_dump, trained_dump;
  std::string trajectory;           // dump after every step to "<trajectory>.<step>"
  std::string save = "checkpoint";  // checkpoint | manager | none
  int max_to_keep = 3;
  bool expect_restore = false;
};

Status Train(const TrainOptions& o) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, {.shape = {-1, 4}});
  Output y = ops::Placeholder(root.WithOpName("y"), DT_FLOAT, {.shape = {-1, 1}});
  auto model = std::make_shared<Regress>();
  std::shared_ptr<Optimizer> optimizer;
  if (o.optimizer == "adam") {
    optimizer = Adam::Make({.learning_rate = o.learning_rate});
  } else if (o.optimizer == "momentum") {
    optimizer = Momentum::Make({.learning_rate = o.learning_rate, .momentum = 0.9f});
  } else if (o.optimizer == "sgd") {
    optimizer = GradientDescent::Make(o.learning_rate);
  } else {
    return InvalidArgumentError("unknown optimizer '", o.optimizer, "'");
  }
  Checkpoint checkpoint(root, {{"optimizer", optimizer}, {"model", model}});
  const std::optional<std::string> path = RestorePath(o.restore, o.dir);
  if (o.expect_restore && !path) return NotFoundError("no checkpoint to restore in ", o.dir);
  Report("restore", path.value_or("none"));
  // Before the model is built: every restore below is deferred.
  CKFLOW_ASSIGN_OR_RETURN(LoadStatus status, checkpoint.Restore(path));

  Output loss = losses::MeanSquaredError(root, y, (*model)(root, x));
  Output train_op = optimizer->Minimize(root, loss);
  CKFLOW_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::Create(root.graph()));
  CKFLOW_RETURN_IF_ERROR(status.InitializeOrRestore(*session));
  if (path) ReportAssertions(status);
  CKFLOW_ASSIGN_OR_RETURN(int64_t counter, SaveCounter(*session, checkpoint));
  Report("restored_save_counter", std::to_string(counter));
  if (!o.restored_dump.empty()) {
    CKFLOW_RETURN_IF_ERROR(DumpValues(*session, checkpoint.root(), o.restored_dump));
  }

  if (o.steps > 0) {
    CKFLOW_ASSIGN_OR_RETURN(auto data, ReadData(o.data));
    const Tensor* xs = &data.first;
    const Tensor* ys = &data.second;
    const int64_t batches = xs->shape().dim(0) / o.batch;
    float last_loss = 0;
    for (int64_t step = 0; step < o.steps; ++step) {
      const int64_t begin = (step % batches) * o.batch;
      CKFLOW_ASSIGN_OR_RETURN(
          std::vector<Tensor> out,
          session->Run({{x, Rows(*xs, begin, o.batch)}, {y, Rows(*ys, begin, o.batch)}}, {loss},
                       {train_op}));
      last_loss = out[0].scalar<float>();
      if (!o.trajectory.empty()) {
        CKFLOW_RETURN_IF_ERROR(
            DumpValues(*session, checkpoint.root(), o.trajectory + "." + std::to_string(step + 1)));
      }
    }
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.9g", last_loss);
    Report("loss", buf);
  }

  std::unique_ptr<CheckpointManager> manager;
  if (o.save == "manager") {
    CKFLOW_ASSIGN_OR_RETURN(
        manager, CheckpointManager::Create(checkpoint, o.dir, {.max_to_keep = o.max_to_keep}));
    CKFLOW_ASSIGN_OR_RETURN(std::string saved, manager->Save(*session));
    Report("saved", saved);
  } else if (o.save == "checkpoint") {
    CKFLOW_ASSIGN_OR_RETURN(std::string saved, checkpoint.Save(o.dir + "/ckpt", *session));
    Report("saved", saved);
  }
  CKFLOW_ASSIGN_OR_RETURN(counter, SaveCounter(*session, checkpoint));
  Report("save_counter", std::to_string(counter));
  if (!o.trained_dump.empty()) {
    CKFLOW_RETURN_IF_ERROR(DumpValues(*session, checkpoint.root(), o.trained_dump));
  }
  return OkStatus();
}

struct GenericOptions {
  std::string spec;
  bool zeros = false;
  std::string restore;
  std::string restore_latest;
  bool expect_partial = false;
  std::string dump;
  std::string write, save, manager;
  int max_to_keep = 5;
  std::optional<double> keep_every_hours;
  std::string checkpoint_name = "ckpt";
  int devices = 1;
  int files_per_device = 0;
  int group = 0;              // > 0: that many threads, as the members of a group
  std::string cast = "none";  // RestoreOptions::cast: none, widening or any
  // A tf.compat.v1.train optimizer, its slots made for the `train` keys.
  std::string optimizer;
  std::vector<std::string> train;
  // The manager saves `saves` times; before each save after the first,
  // every float32 variable whose key starts with `change` gains 1.
  int saves = 1;
  std::string change;
  bool incremental = false;  // SaveOptions::incremental
};

// A zero (false, empty) tensor like `t`.
Tensor ZerosLike(const Tensor& t) {
  Tensor out(t.dtype(), t.shape());
  if (t.dtype() == DT_STRING) {
    for (std::string& s : out.flat<std::string>()) s.clear();
  } else {
    std::memset(out.raw_data(), 0, out.TotalBytes());
  }
  return out;
}

// The names of a checkpoint key's object path, unescaped as TensorFlow
// escapes each ("." as "..", "/" as ".S"): "a/b..c/d.Se" is a, b.c, d/e.
StatusOr<std::vector<std::string>> SplitObjectPath(std::string_view path) {
  std::vector<std::string> names(1);
  for (size_t i = 0; i < path.size(); ++i) {
    if (path[i] == '/') {
      names.emplace_back();
    } else if (path[i] != '.') {
      names.back() += path[i];
    } else if (i + 1 < path.size() && (path[i + 1] == '.' || path[i + 1] == 'S')) {
      names.back() += path[++i] == '.' ? '.' : '/';
    } else {
      return InvalidArgumentError("a '.' that escapes nothing at ", i);
    }
  }
  for (const std::string& name : names) {
    if (name.empty()) return InvalidArgumentError("an empty name");
  }
  return names;
}

StatusOr<std::shared_ptr<Optimizer>> MakeOptimizer(const std::string& name) {
  if (name == "sgd") return std::shared_ptr<Optimizer>(GradientDescent::Make(0.01f));
  if (name == "momentum") return std::shared_ptr<Optimizer>(Momentum::Make({}));
  if (name == "adam") return std::shared_ptr<Optimizer>(Adam::Make());
  if (name == "rmsprop") return std::shared_ptr<Optimizer>(RMSProp::Make());
  if (name == "adagrad") return std::shared_ptr<Optimizer>(Adagrad::Make());
  if (name == "ftrl") return std::shared_ptr<Optimizer>(Ftrl::Make());
  return InvalidArgumentError("no optimizer named '", name, "'");
}

Status Generic(const GenericOptions& o, CheckpointGroup* group = nullptr) {
  CKFLOW_ASSIGN_OR_RETURN(NamedTensors spec, ReadValues(o.spec));
  std::vector<Output> steps;  // what changes between the manager's saves
  Scope root = Scope::NewRootScope();
  auto top = std::make_shared<Module>();
  std::map<std::string, std::shared_ptr<Trackable>> modules = {{"", top}};
  std::map<std::string, std::shared_ptr<Variable>> by_key;
  int index = 0;
  for (const auto& [key, value] : spec) {
    if (key == std::string("save_counter") + kValueSuffix) continue;
    const size_t suffix = key.rfind(kValueSuffix);
    StatusOr<std::vector<std::string>> names =
        suffix == std::string::npos || suffix + std::strlen(kValueSuffix) != key.size()
            ? InvalidArgumentError("no ", kValueSuffix)
            : SplitObjectPath(key.substr(0, suffix));
    if (!names.ok()) {
      return InvalidArgumentError("spec key '", key,
                                  "' is not a plain variable's: ", names.status().message());
    }
    const std::string object_path = key.substr(0, suffix);
    const std::string name = names->back();
    // The parent chain, made as needed (keyed by the escaped path).
    std::shared_ptr<Trackable> parent = top;
    std::string at;
    for (size_t i = 0; i + 1 < names->size(); ++i) {
      const std::string& part = (*names)[i];
      at += (at.empty() ? "" : "/") + EscapeLocalName(part);
      auto& module = modules[at];
      if (module == nullptr) module = parent->Track(part, std::make_shared<Module>());
      parent = module;
    }
    VariableOptions options;
    if (o.devices > 1) {
      // One CPU on each of `devices` tasks: ckflow, like TensorFlow, writes a
      // data file (or files_per_device of them) per task, not per device.
      options.device =
          "/job:worker/replica:0/task:" + std::to_string(index % o.devices) + "/device:CPU:0";
    }
    ++index;
    auto var = Variable::Create(root, object_path,
                                ops::Const(root, o.zeros ? ZerosLike(value) : value), options);
    if (var == nullptr) return root.status();
    parent->Track(name, var);
    by_key.emplace(key, var);
    if (!o.change.empty() && key.starts_with(o.change) && value.dtype() == DT_FLOAT) {
      Tensor ones(DT_FLOAT, value.shape());
      for (float& x : ones.flat<float>()) x = 1.0f;
      steps.push_back(var->AssignAdd(root, ops::Const(root, ones)));
    }
  }

  Checkpoint::Dependencies dependencies;
  for (const auto& [name, child] : top->Children()) dependencies.emplace_back(name, child);
  if (!o.optimizer.empty()) {
    CKFLOW_ASSIGN_OR_RETURN(std::shared_ptr<Optimizer> optimizer, MakeOptimizer(o.optimizer));
    std::vector<GradAndVar> grads;
    for (const std::string& key : o.train) {
      auto it = by_key.find(key);
      if (it == by_key.end()) return InvalidArgumentError("--train '", key, "': not in the spec");
      grads.push_back({ops::ZerosLike(root, it->second->value()), it->second});
    }
    // Building the update makes the slots; it never runs, so the slots hold
    // what the restore (or their initializers) put there.
    if (!grads.empty()) optimizer->ApplyGradients(root, grads);
    dependencies.emplace_back("optimizer", optimizer);
  }
  CheckpointOptions checkpoint_options;
  checkpoint_options.group.group = group;
  Checkpoint checkpoint(root, dependencies, std::move(checkpoint_options));

  std::optional<std::string> path;
  if (!o.restore.empty()) path = o.restore;
  if (!o.restore_latest.empty()) {
    path = LatestCheckpoint(o.restore_latest);
    if (!path) return NotFoundError("no checkpoint in ", o.restore_latest);
  }
  std::optional<LoadStatus> status;
  if (path) {
    RestoreOptions restore_options;
    if (o.cast == "widening") restore_options.cast = CastRule::kWidening;
    if (o.cast == "any") restore_options.cast = CastRule::kAny;
    CKFLOW_ASSIGN_OR_RETURN(status, checkpoint.Restore(path, restore_options));
  }
  CKFLOW_RETURN_IF_ERROR(root.status());
  CKFLOW_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::Create(root.graph()));
  CKFLOW_RETURN_IF_ERROR(session->Run({}, {}, {GlobalVariablesInitializer(root)}).status());
  if (status) {
    Report("restore", Outcome(status->RunRestoreOps(*session)));
    ReportAssertions(*status);
    if (o.expect_partial) status->ExpectPartial();
  }
  CKFLOW_ASSIGN_OR_RETURN(int64_t counter, SaveCounter(*session, checkpoint));
  Report("restored_save_counter", std::to_string(counter));
  if (!o.dump.empty()) CKFLOW_RETURN_IF_ERROR(DumpValues(*session, checkpoint.root(), o.dump));

  const SaveOptions save_options{.files_per_device = o.files_per_device,
                                 .incremental = o.incremental};
  if (!o.write.empty()) {
    CKFLOW_ASSIGN_OR_RETURN(std::string saved, checkpoint.Write(o.write, *session, save_options));
    Report("saved", saved);
  }
  if (!o.save.empty()) {
    CKFLOW_ASSIGN_OR_RETURN(std::string saved, checkpoint.Save(o.save, *session, save_options));
    Report("saved", saved);
  }
  if (!o.manager.empty()) {
    CKFLOW_ASSIGN_OR_RETURN(auto manager, CheckpointManager::Create(
                                              checkpoint, o.manager,
                                              {.max_to_keep = o.max_to_keep,
                                               .keep_checkpoint_every_n_hours = o.keep_every_hours,
                                               .checkpoint_name = o.checkpoint_name,
                                               .save_options = save_options}));
    std::string saved, all;
    for (int k = 0; k < o.saves; ++k) {
      if (k > 0 && !steps.empty()) CKFLOW_RETURN_IF_ERROR(session->Run({}, {}, steps).status());
      CKFLOW_ASSIGN_OR_RETURN(saved, manager->Save(*session));
      all += (all.empty() ? "" : " ") + saved;
    }
    Report("saved", saved);
    Report("saved_all", all);
    std::string kept;
    for (const std::string& p : manager->checkpoints()) kept += (kept.empty() ? "" : " ") + p;
    Report("kept", kept);
  }
  CKFLOW_ASSIGN_OR_RETURN(counter, SaveCounter(*session, checkpoint));
  Report("save_counter", std::to_string(counter));
  return OkStatus();
}

// Generic on o.group threads, each a member of one group; rank 0 reports.
Status GenericGroup(const GenericOptions& o) {
  ThreadGroup group(o.group);
  std::vector<Status> results(o.group);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < o.group; ++rank) {
    threads.emplace_back([&, rank] {
      quiet = rank != 0;
      ThreadMember member(&group, rank);
      results[rank] = Generic(o, &member);
    });
  }
  for (std::thread& t : threads) t.join();
  for (const Status& s : results) CKFLOW_RETURN_IF_ERROR(s);
  return OkStatus();
}

struct EagerOptions {
  std::string data, save, dump;
  int64_t steps = 3;
  int64_t batch = 8;
};

Status Eager(const EagerOptions& o) {
  CKFLOW_ASSIGN_OR_RETURN(auto data, ReadData(o.data));
  const Tensor* xs = &data.first;
  const Tensor* ys = &data.second;
  Scope scope = Scope::NewEagerScope();
  auto model = Sequential::Make({Dense::Make(10, {.activation = ops::Relu}), Dense::Make(1)});
  auto optimizer = Adam::Make({.learning_rate = 0.01f});
  Checkpoint checkpoint(scope, {{"optimizer", optimizer}, {"model", model}});
  const int64_t batches = xs->shape().dim(0) / o.batch;
  for (int64_t step = 0; step < o.steps; ++step) {
    const int64_t begin = (step % batches) * o.batch;
    const Tensor x = Rows(*xs, begin, o.batch), y = Rows(*ys, begin, o.batch);
    optimizer->Minimize(scope, [&] {
      return losses::MeanSquaredError(scope, ops::Const(scope, y),
                                      (*model)(scope, ops::Const(scope, x)));
    });
    CKFLOW_RETURN_IF_ERROR(scope.status());
  }
  CKFLOW_ASSIGN_OR_RETURN(std::string saved, checkpoint.Save(o.save));
  CKFLOW_RETURN_IF_ERROR(checkpoint.Sync());
  Report("saved", saved);
  if (!o.dump.empty()) {
    NamedTensors named;
    for (const auto& [key, v] : VariablesByKey(checkpoint.root())) {
      named.emplace_back(key, v->value().value());
    }
    CKFLOW_RETURN_IF_ERROR(WriteValues(o.dump, named));
  }
  return OkStatus();
}

// What the Keras programs end with: LoadWeights from `load` (else the
// given status), the restore and its assertions reported, then the dump of
// the model's values and SaveWeights.
Status LoadDumpSave(Session& session, const std::shared_ptr<Trackable>& model,
                    std::optional<LoadStatus> status, const std::string& load,
                    const std::string& dump, const std::string& save) {
  if (!load.empty()) {
    StatusOr<LoadStatus> loaded = LoadWeights(model, load, session);
    Report("load_weights", Outcome(loaded.status()));
    if (loaded.ok()) status = *loaded;
  }
  if (status) {
    Report("restore", Outcome(status->RunRestoreOps(session)));
    ReportAssertions(*status);
    status->ExpectPartial();
  }
  if (!dump.empty()) CKFLOW_RETURN_IF_ERROR(DumpValues(session, model, dump));
  if (!save.empty()) {
    CKFLOW_RETURN_IF_ERROR(SaveWeights(model, save, session));
    Report("saved", save);
  }
  return OkStatus();
}

struct WeightsOptions {
  std::string load, load_via_checkpoint, save, dump;
};

// Keras' Sequential([Dense(4), Dense(2)]) called on [batch, 3] inputs, and
// its weights through LoadWeights / SaveWeights (the model is the root), or
// through a Checkpoint whose child "model" it is.
Status Weights(const WeightsOptions& o) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, {.shape = {-1, 3}});
  auto model = Sequential::Make({Dense::Make(4), Dense::Make(2)});
  (*model)(root, x);
  std::optional<Checkpoint> checkpoint;
  std::optional<LoadStatus> status;
  if (!o.load_via_checkpoint.empty()) {
    checkpoint.emplace(root, Checkpoint::Dependencies{{"model", model}});
    CKFLOW_ASSIGN_OR_RETURN(status, checkpoint->Restore(o.load_via_checkpoint));
  }
  CKFLOW_RETURN_IF_ERROR(root.status());
  CKFLOW_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::Create(root.graph()));
  CKFLOW_RETURN_IF_ERROR(session->Run({}, {}, {GlobalVariablesInitializer(root)}).status());
  return LoadDumpSave(*session, model, std::move(status), o.load, o.dump, o.save);
}

struct StackOptions {
  std::string layers, load, save, dump;
  std::vector<int64_t> input_shape;  // without the batch
};

// The integer `text`, or InvalidArgument naming `what`.
StatusOr<int64_t> ParseInt(std::string_view text, std::string_view what) {
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) {
    return InvalidArgumentError(what, ": '", text, "' is not an integer");
  }
  return value;
}

// The layers of a description such as "conv:4:3:1,bn:1:0,maxpool,flatten,
// dense:5:0" (interop/test_differential.py draws them), with Keras' names.
StatusOr<std::vector<std::shared_ptr<Layer>>> StackLayers(const std::string& description) {
  std::vector<std::shared_ptr<Layer>> layers;
  std::stringstream all(description);
  for (std::string item; std::getline(all, item, ',');) {
    std::vector<std::string> f;
    std::stringstream fields(item);
    for (std::string field; std::getline(fields, field, ':');) f.push_back(field);
    if (f.empty()) return InvalidArgumentError("an empty layer in '", description, "'");
    std::vector<int64_t> args(4, 0);  // a missing argument is 0
    for (size_t i = 1; i < f.size() && i < args.size(); ++i) {
      CKFLOW_ASSIGN_OR_RETURN(args[i], ParseInt(f[i], item));
    }
    const auto arg = [&](size_t i) { return args[i]; };
    const std::string& kind = f[0];
    if (kind == "dense") {
      layers.push_back(Dense::Make(arg(1), {.use_bias = arg(2) != 0}));
    } else if (kind == "conv") {
      layers.push_back(Conv2D::Make(arg(1), arg(2), {.padding = "same", .use_bias = arg(3) != 0}));
    } else if (kind == "dwconv") {
      layers.push_back(DepthwiseConv2D::Make(
          arg(1), {.padding = "same", .depth_multiplier = arg(2), .use_bias = arg(3) != 0}));
    } else if (kind == "bn") {
      layers.push_back(BatchNormalization::Make({.center = arg(1) != 0, .scale = arg(2) != 0}));
    } else if (kind == "ln") {
      layers.push_back(LayerNormalization::Make({.center = arg(1) != 0, .scale = arg(2) != 0}));
    } else if (kind == "maxpool") {
      layers.push_back(MaxPooling2D::Make({.padding = "same"}));
    } else if (kind == "avgpool") {
      layers.push_back(AveragePooling2D::Make({.padding = "same"}));
    } else if (kind == "gap") {
      layers.push_back(GlobalAveragePooling2D::Make());
    } else if (kind == "flatten") {
      layers.push_back(Flatten::Make());
    } else if (kind == "dropout") {
      layers.push_back(Dropout::Make(0.5));
    } else {
      return InvalidArgumentError("no layer kind '", kind, "' in '", description, "'");
    }
  }
  return layers;
}

// Keras' Sequential of the described layers on inputs [batch, input_shape],
// its weights loaded (LoadWeights) and saved (SaveWeights).
Status Stack(const StackOptions& o) {
  CKFLOW_ASSIGN_OR_RETURN(std::vector<std::shared_ptr<Layer>> layers, StackLayers(o.layers));
  Scope root = Scope::NewRootScope();
  std::vector<int64_t> shape = {-1};
  shape.insert(shape.end(), o.input_shape.begin(), o.input_shape.end());
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, {.shape = PartialShape(shape)});
  auto model = Sequential::Make(std::move(layers));
  (*model)(root, x, /*training=*/false);
  CKFLOW_RETURN_IF_ERROR(root.status());
  CKFLOW_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::Create(root.graph()));
  CKFLOW_RETURN_IF_ERROR(session->Run({}, {}, {GlobalVariablesInitializer(root)}).status());
  return LoadDumpSave(*session, model, std::nullopt, o.load, o.dump, o.save);
}

struct PartitionedOptions {
  std::string spec, restore, restore_latest, save, dump;
  int parts = 0;  // 0: a plain variable
  int axis = 0;
  std::vector<std::string> cuts;  // NAME:PARTS:AXIS, overriding parts and axis
  int64_t step = -1;              // -1: none
  bool pad_step_number = false;
  std::string latest_filename = "checkpoint";
};

// The part [offset, offset + part's size) along `axis` of a whole tensor of
// any rank and fixed-size dtype, copied out of `whole` (to_part) or into it.
void CopyPart(Tensor& whole, Tensor& part, int axis, int64_t offset, bool to_part) {
  const TensorShape& shape = whole.shape();
  const size_t element = DataTypeSize(whole.dtype());
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= shape.dim(d);
  for (int d = axis + 1; d < shape.rank(); ++d) inner *= shape.dim(d);
  const size_t run = static_cast<size_t>(part.shape().dim(axis) * inner) * element;
  const size_t stride = static_cast<size_t>(shape.dim(axis) * inner) * element;
  auto* w = static_cast<char*>(whole.raw_data()) + static_cast<size_t>(offset * inner) * element;
  auto* p = static_cast<char*>(part.raw_data());
  for (int64_t o = 0; o < outer; ++o) {
    if (to_part) {
      std::memcpy(p + o * run, w + o * stride, run);
    } else {
      std::memcpy(w + o * stride, p + o * run, run);
    }
  }
}

Status Partitioned(const PartitionedOptions& o) {
  CKFLOW_ASSIGN_OR_RETURN(NamedTensors spec, ReadValues(o.spec));
  // Each variable's cut: --cut NAME:PARTS:AXIS, else --parts and --axis.
  std::map<std::string, std::pair<int, int>> cuts;
  for (const std::string& cut : o.cuts) {
    const size_t second = cut.rfind(':');
    const size_t first = second == std::string::npos ? second : cut.rfind(':', second - 1);
    if (first == std::string::npos) return InvalidArgumentError("--cut '", cut, "': not N:P:A");
    CKFLOW_ASSIGN_OR_RETURN(int64_t parts,
                            ParseInt(cut.substr(first + 1, second - first - 1), "--cut " + cut));
    CKFLOW_ASSIGN_OR_RETURN(int64_t axis, ParseInt(cut.substr(second + 1), "--cut " + cut));
    cuts[cut.substr(0, first)] = {static_cast<int>(parts), static_cast<int>(axis)};
  }
  // One variable of the spec: its parts and each part's offset along `axis`.
  struct Whole {
    std::string name;
    Tensor value;
    int axis = 0;
    std::vector<std::shared_ptr<Variable>> parts;
    std::vector<int64_t> offsets;
  };
  std::vector<Whole> wholes;
  Scope root = Scope::NewRootScope();
  std::vector<Output> assigns;
  for (auto& [name, value] : spec) {
    const auto [num_parts, axis] = cuts.count(name) ? cuts.at(name) : std::pair{o.parts, o.axis};
    const DataType dtype = value.dtype();
    Whole& w = wholes.emplace_back(Whole{name, value, num_parts == 0 ? 0 : axis});
    if (num_parts == 0) {
      w.parts.push_back(Variable::Create(root, name, dtype, value.shape(), initializers::Zeros()));
      w.offsets.push_back(0);
    } else {
      if (dtype == DT_STRING || value.shape().rank() == 0) {
        return InvalidArgumentError(name, ": only values of rank 1 or more, not strings, split");
      }
      auto v = PartitionedVariable::Create(root, name, dtype, value.shape(), initializers::Zeros(),
                                           {.num_shards = num_parts, .axis = axis});
      CKFLOW_RETURN_IF_ERROR(root.status());
      w.parts = v->parts();
      for (int i = 0; i < v->num_parts(); ++i) w.offsets.push_back(v->offset(i));
    }
    CKFLOW_RETURN_IF_ERROR(root.status());
    if (w.parts.size() == 1) {  // the whole value (strings and scalars too)
      assigns.push_back(w.parts[0]->Assign(root, ops::Const(root, value)));
    } else {
      for (size_t i = 0; i < w.parts.size(); ++i) {
        Tensor box(dtype, w.parts[i]->shape().ToTensorShape());
        CopyPart(value, box, w.axis, w.offsets[i], /*to_part=*/true);
        assigns.push_back(w.parts[i]->Assign(root, ops::Const(root, box)));
      }
    }
  }
  CKFLOW_RETURN_IF_ERROR(root.status());
  CKFLOW_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::Create(root.graph()));
  CKFLOW_ASSIGN_OR_RETURN(auto saver,
                          NameBasedSaver::Create(root, {}, {.pad_step_number = o.pad_step_number}));
  std::string restore = o.restore;
  if (!o.restore_latest.empty()) {
    std::optional<std::string> latest =
        LatestCheckpoint(o.restore_latest, {.latest_filename = o.latest_filename});
    if (!latest) return NotFoundError(o.restore_latest, ": no latest checkpoint");
    Report("latest", *latest);
    restore = *latest;
  }
  if (!restore.empty()) {
    Report("restore", Outcome(saver->Restore(*session, restore)));
  } else {
    CKFLOW_RETURN_IF_ERROR(session->Run({}, {}, assigns).status());
  }
  if (!o.dump.empty()) {
    NamedTensors dumped;
    for (Whole& w : wholes) {
      std::vector<Output> fetches;
      for (const auto& part : w.parts) fetches.push_back(part->value());
      CKFLOW_ASSIGN_OR_RETURN(std::vector<Tensor> parts, session->Run({}, fetches));
      if (parts.size() == 1) {
        dumped.emplace_back(w.name, parts[0]);
        continue;
      }
      Tensor whole(w.value.dtype(), w.value.shape());
      for (size_t i = 0; i < parts.size(); ++i) {
        CopyPart(whole, parts[i], w.axis, w.offsets[i], /*to_part=*/false);
      }
      dumped.emplace_back(w.name, whole);
    }
    CKFLOW_RETURN_IF_ERROR(WriteValues(o.dump, dumped));
  }
  if (!o.save.empty()) {
    const std::optional<int64_t> step = o.step >= 0 ? std::optional<int64_t>(o.step) : std::nullopt;
    CKFLOW_ASSIGN_OR_RETURN(std::string saved,
                            saver->Save(*session, o.save, step, true, o.latest_filename));
    Report("saved", saved);
  }
  return OkStatus();
}

}  // namespace
}  // namespace ckflow::interop

int main(int argc, char** argv) {
  using namespace ckflow::interop;  // NOLINT
  CLI::App app{"ckflow's side of the TensorFlow interop suite"};
  app.require_subcommand(1);

  TrainOptions t;
  CLI::App* train = app.add_subcommand("train", "restore, train and save the Regress example");
  train->add_option("--dir", t.dir, "checkpoint directory")->required();
  train->add_option("--restore", t.restore, "latest (of --dir), none, or a checkpoint prefix");
  train->add_flag("--expect-restore", t.expect_restore, "fail if there is nothing to restore");
  train->add_option("--data", t.data, "values file with x [N,4] and y [N,1]");
  train->add_option("--steps", t.steps, "training steps");
  train->add_option("--batch", t.batch, "rows per step");
  train->add_option("--optimizer", t.optimizer, "adam, momentum or sgd");
  train->add_option("--learning-rate", t.learning_rate, "learning rate");
  train->add_option("--restored", t.restored_dump, "dump the values after the restore here");
  train->add_option("--trained", t.trained_dump, "dump the values after training here");
  train->add_option("--trajectory", t.trajectory, "dump the values after every step to PATH.N");
  train->add_option("--save", t.save, "checkpoint (Checkpoint::Save), manager or none");
  train->add_option("--max-to-keep", t.max_to_keep, "the manager's max_to_keep");

  GenericOptions g;
  CLI::App* generic = app.add_subcommand("generic", "modules and variables from a values file");
  generic->add_option("--spec", g.spec, "values file: the variables and their values")->required();
  generic->add_flag("--zeros", g.zeros, "initialize with zeros instead of the spec's values");
  generic->add_option("--restore", g.restore, "restore this checkpoint");
  generic->add_option("--restore-latest", g.restore_latest, "restore the latest checkpoint here");
  generic->add_flag("--expect-partial", g.expect_partial, "call ExpectPartial on the status");
  generic->add_option("--dump", g.dump, "dump the values (after any restore) here");
  generic->add_option("--write", g.write, "Checkpoint::Write to this prefix");
  generic->add_option("--save", g.save, "Checkpoint::Save with this prefix");
  generic->add_option("--manager", g.manager, "CheckpointManager::Save in this directory");
  generic->add_option("--max-to-keep", g.max_to_keep, "the manager's max_to_keep");
  generic->add_option("--keep-every-hours", g.keep_every_hours,
                      "the manager's keep_checkpoint_every_n_hours");
  generic->add_option("--checkpoint-name", g.checkpoint_name, "the manager's checkpoint_name");
  generic->add_option("--devices", g.devices,
                      "spread the variables over the CPUs of this many tasks");
  generic->add_option("--files-per-device", g.files_per_device, "SaveOptions::files_per_device");
  generic->add_option("--group", g.group, "save as a group of this many threads");
  generic->add_option("--saves", g.saves, "how many times the manager saves");
  generic->add_option("--change", g.change,
                      "before each save after the first, add 1 to the float32 variables whose "
                      "key starts with this");
  generic->add_flag("--incremental", g.incremental, "SaveOptions::incremental");
  generic->add_option("--cast", g.cast, "RestoreOptions::cast of the restore")
      ->check(CLI::IsMember({"none", "widening", "any"}));
  generic->add_option("--optimizer", g.optimizer,
                      "a child \"optimizer\": sgd, momentum, adam, rmsprop, adagrad or ftrl");
  generic->add_option("--train", g.train, "make the optimizer's slots for this key's variable");
  EagerOptions e;
  CLI::App* eager = app.add_subcommand("eager", "an eager program, saved without a Session");
  eager->add_option("--data", e.data, "values file with x [N,4] and y [N,1]")->required();
  eager->add_option("--steps", e.steps, "training steps");
  eager->add_option("--save", e.save, "Checkpoint::Save with this prefix")->required();
  eager->add_option("--dump", e.dump, "dump the values after the save here");
  WeightsOptions w;
  CLI::App* weights = app.add_subcommand("weights", "Keras' Sequential, through its weights");
  weights->add_option("--load", w.load, "LoadWeights from this prefix");
  weights->add_option("--load-via-checkpoint", w.load_via_checkpoint,
                      "restore this prefix through Checkpoint{model}");
  weights->add_option("--save", w.save, "SaveWeights to this prefix");
  weights->add_option("--dump", w.dump, "dump the model's values here");
  StackOptions k;
  CLI::App* stack = app.add_subcommand("stack", "a Sequential of Keras layers, by its weights");
  stack->add_option("--layers", k.layers, "the layers, e.g. conv:4:3:1,maxpool,flatten,dense:5:0")
      ->required();
  stack->add_option("--input-shape", k.input_shape, "the input's shape without the batch")
      ->required()
      ->delimiter(',');
  stack->add_option("--load", k.load, "LoadWeights from this prefix");
  stack->add_option("--save", k.save, "SaveWeights to this prefix");
  stack->add_option("--dump", k.dump, "dump the model's values here");
  PartitionedOptions p;
  CLI::App* partitioned =
      app.add_subcommand("partitioned", "a partitioned variable, saved and restored by name");
  partitioned->add_option("--spec", p.spec, "values file: the variable's name and value")
      ->required();
  partitioned->add_option("--parts", p.parts, "fixed_size_partitioner's num_shards (0: plain)");
  partitioned->add_option("--axis", p.axis, "the axis the parts split");
  partitioned->add_option("--cut", p.cuts, "NAME:PARTS:AXIS of one variable (0 parts: plain)");
  partitioned->add_option("--restore", p.restore, "NameBasedSaver::Restore this prefix");
  partitioned->add_option("--save", p.save, "NameBasedSaver::Save to this path");
  partitioned->add_option("--dump", p.dump, "dump the whole value here");
  partitioned->add_option("--restore-latest", p.restore_latest,
                          "restore LatestCheckpoint of this directory");
  partitioned->add_option("--step", p.step, "Save's global_step");
  partitioned->add_flag("--pad-step-number", p.pad_step_number, "NameBasedSaver's pad_step_number");
  partitioned->add_option("--latest-filename", p.latest_filename,
                          "the state file's name (Save and --restore-latest)");
  std::string state_dir, state_path;
  std::vector<std::string> state_all;
  CLI::App* state = app.add_subcommand(
      "state", "UpdateCheckpointState(DIR, PATH, all paths) from the working directory");
  state->add_option("--dir", state_dir, "the directory, as given")->required();
  state->add_option("--path", state_path, "model_checkpoint_path, as given")->required();
  state->add_option("--all", state_all, "all_model_checkpoint_paths, as given");
  CLI11_PARSE(app, argc, argv);

  ckflow::Status status =
      state->parsed()         ? ckflow::UpdateCheckpointState(state_dir, state_path,
                                                              {.all_model_checkpoint_paths = state_all})
      : train->parsed()       ? Train(t)
      : eager->parsed()       ? Eager(e)
      : weights->parsed()     ? Weights(w)
      : stack->parsed()       ? Stack(k)
      : partitioned->parsed() ? Partitioned(p)
      : g.group > 0           ? GenericGroup(g)
                              : Generic(g);
  std::fflush(stdout);
  if (!status.ok()) {
    std::fprintf(stderr, "interop_ckflow: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
