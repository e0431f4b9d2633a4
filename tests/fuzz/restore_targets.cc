#include "tests/fuzz/restore_targets.h"

#include <cstring>
#include <map>
#include <utility>

#include "base/status.h"
#include "bundle/bundle_format.h"
#include "bundle/bundle_reader.h"
#include "bundle/protos/trackable_object_graph.pb.h"
#include "checkpoint/checkpoint.h"
#include "ops/array_ops.h"
#include "ops/initializers.h"
#include "ops/layers.h"
#include "ops/losses.h"
#include "ops/optimizers.h"
#include "ops/partitioned_variables.h"
#include "ops/variables.h"
#include "runtime/session.h"
#include "tests/fuzz/memory_file_system.h"
#include "tests/test_util.h"

namespace ckflow::fuzz {
namespace {

// tf.Module: an object that only tracks others.
class Module : public Trackable {
 public:
  std::string TypeName() const override { return "Module"; }
};

// A graph-mode program whose objects all exist, the Checkpoint over them
// and a session. Members in construction order: the checkpoint and the
// objects go before the graph they built in.
struct Structure {
  Scope scope = Scope::NewRootScope();
  Checkpoint::Dependencies dependencies;
  std::vector<std::shared_ptr<PartitionedVariable>> partitioned;
  Output train;  // a training step, if the structure has one
  Output x, y;   // its feeds
  std::unique_ptr<Checkpoint> checkpoint;
  std::unique_ptr<Session> session;

  // What the structure's own Save writes: its object graph, and the key
  // of each variable (a part of a partitioned one: the whole variable's
  // key and the part's first row).
  struct Value {
    std::shared_ptr<Variable> variable;
    std::string key;
    int64_t first_row = -1;  // -1: the whole tensor
  };
  std::string own_graph;
  std::vector<Value> values;
  int restores = 0;
};

Tensor Filled(DataType dtype, const TensorShape& shape, int seed) {
  Tensor t(dtype, shape);
  const int64_t n = shape.num_elements();
  for (int64_t i = 0; i < n; ++i) {
    const int v = seed * 31 + static_cast<int>(i) * 7;
    switch (dtype) {
      case DT_FLOAT:
        t.flat<float>()[i] = static_cast<float>(v) / 8;
        break;
      case DT_DOUBLE:
        t.flat<double>()[i] = -static_cast<double>(v) / 3;
        break;
      case DT_INT32:
        t.flat<int32_t>()[i] = v;
        break;
      case DT_INT64:
        t.flat<int64_t>()[i] = int64_t{v} << 33;
        break;
      case DT_BOOL:
        t.flat<bool>()[i] = v % 2 == 1;
        break;
      case DT_STRING:
        t.flat<std::string>()[i] = std::string(static_cast<size_t>(v % 5), 'a') + "\0\xff";
        break;
      default:
        break;
    }
  }
  return t;
}

std::shared_ptr<Variable> Make(const Scope& scope, const std::string& name, DataType dtype,
                               const TensorShape& shape, int seed) {
  return Variable::Create(scope, name, ops::Const(scope, Filled(dtype, shape, seed)));
}

Status BuildAdamMlp(Structure& s) {
  auto model = Sequential::Make({Dense::Make(3), Dense::Make(1)});
  auto optimizer = Adam::Make();
  auto step =
      Variable::Create(s.scope, "step", ops::Const<int64_t>(s.scope, 0), {.trainable = false});
  s.x = ops::Placeholder(s.scope.WithOpName("x"), DT_FLOAT, {.shape = {-1, 2}});
  s.y = ops::Placeholder(s.scope.WithOpName("y"), DT_FLOAT, {.shape = {-1, 1}});
  Output loss = losses::MeanSquaredError(s.scope, s.y, (*model)(s.scope, s.x));
  s.train = optimizer->Minimize(s.scope, loss, {}, step);
  s.dependencies = {{"model", model}, {"optimizer", optimizer}, {"step", step}};
  return s.scope.status();
}

Status BuildPartitioned(Structure& s) {
  auto root = std::make_shared<Module>();
  auto emb = root->Track(
      "emb", PartitionedVariable::Create(s.scope, "emb", DT_FLOAT, {7, 3},
                                         initializers::RandomUniform(-1, 1, 7), {.num_shards = 3}));
  root->Track("bias", Make(s.scope, "bias", DT_FLOAT, {3}, 1));
  root->Track("count", Make(s.scope, "count", DT_INT64, {}, 2));
  s.partitioned.push_back(emb);
  s.dependencies = {{"embedding", root}};
  return s.scope.status();
}

Status BuildTree(Structure& s) {
  auto tree = std::make_shared<Module>();
  const char* names[] = {"a/b", "c.d", "with space", "\u00fcnic\u00f6de", "plain", ".S", "..", "z"};
  struct Kind {
    DataType dtype;
    TensorShape shape;
  };
  const Kind kinds[] = {{DT_FLOAT, {}},     {DT_DOUBLE, {0}}, {DT_INT64, {1, 1, 2, 1, 1, 2}},
                        {DT_BOOL, {3}},     {DT_STRING, {2}}, {DT_INT32, {2, 2}},
                        {DT_FLOAT, {4, 1}}, {DT_STRING, {}}};
  auto shared = std::make_shared<Module>();
  shared->Track("w", Make(s.scope, "shared_w", DT_FLOAT, {2}, 9));
  tree->Track("left", shared);
  Trackable* level = tree.get();
  for (int depth = 0; depth < 8; ++depth) {
    auto next = std::make_shared<Module>();
    level->Track(names[depth], next);
    next->Track("v", Make(s.scope, "v" + std::to_string(depth), kinds[depth].dtype,
                          kinds[depth].shape, depth));
    if (depth == 2) next->TrackReference("right", shared);  // a second path to `shared`
    level = next.get();
  }
  level->TrackReference("parent", tree);  // a cycle back up
  auto wide = std::make_shared<Module>();
  for (int i = 0; i < 20; ++i) {
    wide->Track("w" + std::to_string(i), Make(s.scope, "wide", DT_FLOAT, {}, 100 + i));
  }
  tree->Track("wide", wide);
  s.dependencies = {{"tree", tree}};
  return s.scope.status();
}

using Builder = Status (*)(Structure&);
struct StructureKind {
  const char* name;
  Builder build;
  const char* root_child;  // a dependency of its Checkpoint no other has
};
constexpr StructureKind kStructures[] = {{"adam_mlp", BuildAdamMlp, "model"},
                                         {"partitioned", BuildPartitioned, "embedding"},
                                         {"tree", BuildTree, "tree"}};

// Runs the training step once (so that slots hold other than zeros) and
// saves under `dir`, learning the structure's own object graph and keys.
StatusOr<std::string> TrainAndSave(Structure& s, const std::string& dir, FileSystem* fs) {
  CKFLOW_RETURN_IF_ERROR(s.session->Run({}, {}, {GlobalVariablesInitializer(s.scope)}).status());
  if (s.train.node() != nullptr) {
    Tensor x(DT_FLOAT, TensorShape({1, 2}));
    Tensor y(DT_FLOAT, TensorShape({1, 1}));
    x.flat<float>()[0] = 1;
    x.flat<float>()[1] = -1;
    y.flat<float>()[0] = 0.5f;
    CKFLOW_RETURN_IF_ERROR(
        s.session->Run({{s.x, std::move(x)}, {s.y, std::move(y)}}, {}, {s.train}).status());
  }
  CKFLOW_ASSIGN_OR_RETURN(std::string path, s.checkpoint->Save(dir + "/ckpt", *s.session));
  CKFLOW_ASSIGN_OR_RETURN(std::unique_ptr<BundleReader> reader,
                          BundleReader::Open(path, {.fs = fs}));
  CKFLOW_ASSIGN_OR_RETURN(Tensor graph, reader->Lookup(kObjectGraphKey));
  s.own_graph = graph.flat<std::string>()[0];
  tensorflow::TrackableObjectGraph proto;
  if (!proto.ParseFromString(s.own_graph)) return InternalError("own object graph does not parse");
  std::map<std::string, std::string> key_of;  // variable name -> checkpoint key
  for (const auto& node : proto.nodes()) {
    for (const auto& attribute : node.attributes()) {
      key_of[attribute.full_name()] = attribute.checkpoint_key();
    }
  }
  for (const std::shared_ptr<Variable>& variable : GlobalVariables(s.scope.graph())) {
    if (auto key = key_of.find(variable->name()); key != key_of.end()) {
      s.values.push_back({variable, key->second});
    }
  }
  for (const auto& whole : s.partitioned) {
    for (int i = 0; i < whole->num_parts(); ++i) {
      s.values.push_back({whole->parts()[i], key_of.at(whole->name()), whole->offset(i)});
    }
  }
  return path;
}

// A structure whose Checkpoint does its I/O through `fs` (null: the disk).
StatusOr<std::unique_ptr<Structure>> BuildStructure(Builder build, FileSystem* fs) {
  auto s = std::make_unique<Structure>();
  CKFLOW_RETURN_IF_ERROR(build(*s));
  s->checkpoint =
      std::make_unique<Checkpoint>(s->scope, s->dependencies, CheckpointOptions{.file_system = fs});
  CKFLOW_RETURN_IF_ERROR(s->scope.status());
  CKFLOW_ASSIGN_OR_RETURN(s->session, Session::Create(s->scope.graph()));
  return s;
}

}  // namespace

bool IsInputError(const Status& status) {
  switch (status.code()) {
    case StatusCode::kDataLoss:
    case StatusCode::kNotFound:
    case StatusCode::kInvalidArgument:
    case StatusCode::kFailedPrecondition:
    case StatusCode::kOutOfRange:
    case StatusCode::kUnimplemented:
    case StatusCode::kResourceExhausted:
      return !status.message().empty();
    default:
      return false;
  }
}

struct RestoreTargets::Impl {
  MemoryFileSystem fs;
  int scratch_dirs = 0;
  std::vector<std::unique_ptr<Structure>> structures{std::size(kStructures)};
  std::vector<int> builds = std::vector<int>(std::size(kStructures));

  using Report = std::function<void(std::string)>;
  void Expect(const Report& report, const std::string& what, const Status& status) {
    if (!status.ok() && !IsInputError(status)) report(what + " returned " + status.ToString());
  }

  // Checks the status's assertions and `initialized` (what its
  // InitializeOrRestore returned); true if all passed. Silences the status'
  // warning about unmatched values: the assertions said what did not match.
  bool Assertions(const std::string& name, LoadStatus& status, const Status& initialized,
                  const Report& report) {
    bool passed = true;
    for (auto [what, result] : {
             std::pair{"AssertConsumed", status.AssertConsumed()},
             std::pair{"AssertExistingObjectsMatched", status.AssertExistingObjectsMatched()},
             std::pair{"AssertNontrivialMatch", status.AssertNontrivialMatch()},
             std::pair{"InitializeOrRestore", initialized},
         }) {
      Expect(report, name + ": " + what, result);
      passed = passed && result.ok();
    }
    status.ExpectPartial();
    return passed;
  }
  bool RestoreInto(Structure& s, const std::string& name, const std::string& prefix,
                   const BundleReader* reader, const RestoreOptions& options, const Report& report);
  bool RestoreDeferred(const std::string& prefix, const RestoreOptions& options,
                       const Report& report);
  void CheckValues(Structure& s, const std::string& name, const BundleReader& reader,
                   const Report& report);
};

bool RestoreTargets::Impl::RestoreInto(Structure& s, const std::string& name,
                                       const std::string& prefix, const BundleReader* reader,
                                       const RestoreOptions& options, const Report& report) {
  ++s.restores;
  StatusOr<LoadStatus> status = s.checkpoint->Restore(prefix, options);
  if (!status.ok()) {
    Expect(report, name + ": Checkpoint::Restore", status.status());
    return false;
  }
  const bool restored = Assertions(name, *status, status->InitializeOrRestore(*s.session), report);
  if (restored && reader != nullptr) CheckValues(s, name, *reader, report);
  return restored;
}

// When the input's object graph is the structure's own (only the index or
// the data were mutated), which key each variable must restore from is
// known. A restore that reports success must then have put exactly those
// bytes there.
void RestoreTargets::Impl::CheckValues(Structure& s, const std::string& name,
                                       const BundleReader& reader, const Report& report) {
  StatusOr<Tensor> graph = reader.Lookup(kObjectGraphKey);
  if (!graph.ok() || graph->flat<std::string>()[0] != s.own_graph) return;
  std::vector<Output> fetches;
  for (const Structure::Value& v : s.values) fetches.push_back(v.variable->value());
  StatusOr<std::vector<Tensor>> restored = s.session->Run({}, fetches);
  if (!restored.ok())
    return report(name + ": reading the restored variables returned " +
                  restored.status().ToString());
  for (size_t i = 0; i < s.values.size(); ++i) {
    const Structure::Value& v = s.values[i];
    StatusOr<Tensor> stored = reader.Lookup(v.key);
    bool same = stored.ok();
    if (same && v.first_row < 0) {
      same = testing::SameTensor(*stored, (*restored)[i]);
    } else if (same) {  // rows [first_row, first_row + rows) of a float32 matrix
      const Tensor& part = (*restored)[i];
      const size_t offset = stored->shape().dims().size() != 2
                                ? stored->TotalBytes()
                                : static_cast<size_t>(v.first_row) * sizeof(float) *
                                      static_cast<size_t>(stored->shape().dim(1));
      same = stored->dtype() == DT_FLOAT && offset + part.TotalBytes() <= stored->TotalBytes() &&
             std::memcmp(static_cast<const char*>(stored->raw_data()) + offset, part.raw_data(),
                         part.TotalBytes()) == 0;
    }
    if (!same) {
      return report(name + ": variable '" + v.variable->name() + "' does not hold what '" + v.key +
                    "' stores after a successful restore");
    }
  }
}

// The TF2 flow: restore first, then the first training step creates the
// layers and slots, each restored as it appears (eagerly, through the
// restore's reader).
bool RestoreTargets::Impl::RestoreDeferred(const std::string& prefix, const RestoreOptions& options,
                                           const Report& report) {
  Scope scope = Scope::NewEagerScope();
  auto model = Sequential::Make({Dense::Make(3), Dense::Make(1)});
  auto optimizer = Adam::Make();
  Checkpoint checkpoint(scope, {{"model", model}, {"optimizer", optimizer}}, {.file_system = &fs});
  StatusOr<LoadStatus> status = checkpoint.Restore(prefix, options);
  if (!status.ok()) {
    Expect(report, "eager: Checkpoint::Restore", status.status());
    return false;
  }
  Tensor x = Filled(DT_FLOAT, TensorShape({1, 2}), 1);
  Tensor y = Filled(DT_FLOAT, TensorShape({1, 1}), 2);
  optimizer->Minimize(scope, [&] {
    return losses::MeanSquaredError(scope, ops::Const(scope, y),
                                    (*model)(scope, ops::Const(scope, x)));
  });
  Expect(report, "eager: a training step after Restore", scope.status());
  return Assertions("eager", *status, status->InitializeOrRestore(), report) && scope.ok();
}

RestoreTargets::RestoreTargets() : impl_(std::make_unique<Impl>()) {}
RestoreTargets::~RestoreTargets() = default;

std::vector<std::string> RestoreTargets::Names() {
  std::vector<std::string> names;
  for (const StructureKind& kind : kStructures) names.push_back(kind.name);
  return names;
}

std::vector<int> RestoreTargets::builds() const { return impl_->builds; }

MemoryFileSystem& RestoreTargets::file_system() { return impl_->fs; }

size_t RestoreTargets::Pick(std::span<const std::string> root_children, uint32_t hash) {
  for (const std::string& child : root_children) {
    for (size_t i = 0; i < std::size(kStructures); ++i) {
      if (child == kStructures[i].root_child) return i;
    }
  }
  return hash % std::size(kStructures);
}

std::vector<std::string> RestoreTargets::Restore(const std::string& prefix,
                                                 std::shared_ptr<const BundleReader> reader,
                                                 bool reuse_reader, size_t structure, bool deferred,
                                                 const std::function<void(std::string)>& report) {
  std::vector<std::string> restored;
  const std::string name = kStructures[structure].name;
  std::unique_ptr<Structure>& s = impl_->structures[structure];
  if (s == nullptr || s->restores >= kRestoresPerBuild) {
    s.reset();  // the old graph goes before the new one is built
    StatusOr<std::unique_ptr<Structure>> built =
        BuildStructure(kStructures[structure].build, &impl_->fs);
    const std::string scratch = "/own-" + std::to_string(++impl_->scratch_dirs);
    StatusOr<std::string> saved =
        built.ok() ? TrainAndSave(**built, scratch, &impl_->fs) : built.status();
    impl_->fs.RemoveAll(scratch);
    if (!saved.ok()) {
      report(name + ": cannot build: " + saved.status().ToString());
      return restored;
    }
    s = *std::move(built);
    ++impl_->builds[structure];
  }
  const RestoreOptions options{.reader = reuse_reader ? reader : nullptr};
  if (impl_->RestoreInto(*s, name, prefix, reader.get(), options, report)) {
    restored.push_back(name);
  }
  if (deferred && impl_->RestoreDeferred(prefix, options, report)) restored.push_back("eager");
  return restored;
}

StatusOr<std::string> RestoreTargets::SaveStructure(const std::string& name,
                                                    const std::string& dir) {
  for (const StructureKind& kind : kStructures) {
    if (name != kind.name) continue;
    CKFLOW_ASSIGN_OR_RETURN(std::unique_ptr<Structure> s, BuildStructure(kind.build, nullptr));
    return TrainAndSave(*s, dir, nullptr);
  }
  return NotFoundError("no structure named '", name, "'");
}

}  // namespace ckflow::fuzz
