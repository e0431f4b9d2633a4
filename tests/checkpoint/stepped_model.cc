#include "tests/checkpoint/stepped_model.h"

#include <cstring>
#include <filesystem>
#include <set>

#include "bundle/bundle_format.h"
#include "bundle/bundle_reader.h"
#include "bundle/checkpoint_state.h"
#include "ops/array_ops.h"

namespace ckflow::testing {
namespace {

class Holder : public Trackable {
 public:
  std::string TypeName() const override { return "Module"; }
};

}  // namespace

int64_t SteppedModel::Elements(int i) {
  static constexpr int64_t kElements[kVariables] = {300000, 7, 20000, 500000};
  return kElements[i];
}

float SteppedModel::Value(int64_t step, int variable, int64_t element) {
  if (variable == kFrozen) step /= kFrozenSteps;
  return static_cast<float>(step * 1000 + variable * 100) + static_cast<float>(element % 97) / 8;
}

std::string SteppedModel::Key(int i) {
  return "model/v" + std::to_string(i) + "/.ATTRIBUTES/VARIABLE_VALUE";
}

namespace {

Status CheckStep(const std::string& where, int64_t step, int i, const Tensor& t) {
  if (t.dtype() != DT_FLOAT || t.NumElements() != SteppedModel::Elements(i)) {
    return DataLossError(where, ": ", SteppedModel::Key(i), " is ", t.shape().ToString());
  }
  auto values = t.flat<float>();
  for (int64_t e = 0; e < SteppedModel::Elements(i); ++e) {
    const float want = SteppedModel::Value(step, i, e);
    if (std::memcmp(&values[e], &want, sizeof(float)) != 0) {
      return DataLossError(where, ": ", SteppedModel::Key(i), "[", e, "] is ", values[e], ", step ",
                           step, " has ", want);
    }
  }
  return OkStatus();
}

}  // namespace

Status SteppedModel::CheckSessionHoldsStep(int64_t step) {
  CKFLOW_ASSIGN_OR_RETURN(std::vector<Tensor> values, session_->Run({}, reads_));
  for (int i = 0; i < kVariables; ++i) {
    CKFLOW_RETURN_IF_ERROR(CheckStep("session", step, i, values[i]));
  }
  return OkStatus();
}

Status SteppedModel::CheckHoldsStep(const std::string& prefix, int64_t step, FileSystem* fs) {
  CKFLOW_ASSIGN_OR_RETURN(std::unique_ptr<BundleReader> reader,
                          BundleReader::Open(prefix, {.fs = fs}));
  for (int i = 0; i < kVariables; ++i) {
    CKFLOW_ASSIGN_OR_RETURN(Tensor t, reader->Lookup(Key(i)));
    CKFLOW_RETURN_IF_ERROR(CheckStep(prefix, step, i, t));
  }
  return OkStatus();
}

StatusOr<std::unique_ptr<SteppedModel>> SteppedModel::Create(CheckpointOptions options) {
  std::unique_ptr<SteppedModel> m(new SteppedModel());
  m->model_ = std::make_shared<Holder>();
  for (int i = 0; i < kVariables; ++i) {
    const std::string name = "v" + std::to_string(i);
    Tensor init(DT_FLOAT, TensorShape({Elements(i)}));
    auto v = Variable::Create(m->scope_, name, ops::Const(m->scope_, init));
    if (v == nullptr) return m->scope_.status();
    m->variables_.push_back(m->model_->Track(name, v));
    Output feed = ops::Placeholder(m->scope_.WithOpName(name + "_value"), DT_FLOAT,
                                   {.shape = PartialShape({Elements(i)})});
    m->feeds_.push_back(feed);
    m->assigns_.push_back(v->Assign(m->scope_, feed));
    m->reads_.push_back(v->value());
  }
  m->checkpoint_ = std::make_unique<Checkpoint>(
      m->scope_, Checkpoint::Dependencies{{"model", m->model_}}, options);
  CKFLOW_RETURN_IF_ERROR(m->scope_.status());
  CKFLOW_ASSIGN_OR_RETURN(m->session_, Session::Create(m->scope_.graph()));
  std::vector<Output> init;
  for (const auto& v : m->variables_) init.push_back(v->initializer());
  CKFLOW_RETURN_IF_ERROR(m->session_->Run({}, {}, init).status());
  return m;
}

Status SteppedModel::SetStep(int64_t step) {
  std::vector<Feed> feeds;
  std::vector<Output> assigns;
  for (int i = 0; i < kVariables; ++i) {
    if (i == kFrozen && frozen_at_.load(std::memory_order_relaxed) == step / kFrozenSteps) {
      continue;
    }
    Tensor t(DT_FLOAT, TensorShape({Elements(i)}));
    auto values = t.flat<float>();
    for (int64_t e = 0; e < Elements(i); ++e) values[e] = Value(step, i, e);
    feeds.emplace_back(feeds_[i], std::move(t));
    assigns.push_back(assigns_[i]);
  }
  CKFLOW_RETURN_IF_ERROR(session_->Run(feeds, {}, assigns).status());
  frozen_at_.store(step / kFrozenSteps, std::memory_order_relaxed);
  return OkStatus();
}

StatusOr<SaveOptions> SaveModeOptions(const std::string& mode) {
  SaveOptions o;
  if (mode == "sync") return o;
  if (mode == "durable") {
    o.durable = true;
    return o;
  }
  if (mode == "async") {
    o.async = true;
    return o;
  }
  if (mode == "async_durable") {
    o.async = o.durable = true;
    return o;
  }
  if (mode == "incremental") {
    o.incremental = true;
    return o;
  }
  if (mode == "sharded") {
    o.async = o.durable = true;
    o.files_per_device = 3;
    return o;
  }
  return InvalidArgumentError("unknown save mode '", mode, "'");
}

std::vector<std::string> StrayFiles(const std::string& dir, uint64_t* bytes) {
  std::set<std::string> kept = {kCheckpointStateFilename};
  StatusOr<std::optional<CheckpointStateData>> state = ReadCheckpointState(dir);
  if (state.ok() && state->has_value()) {
    std::vector<std::string> listed = (*state)->all_model_checkpoint_paths;
    listed.push_back((*state)->model_checkpoint_path);
    for (const std::string& p : listed) {
      if (p.empty()) continue;
      kept.insert(IndexFilename(p));
      for (int n = 1; n <= 8; ++n) {
        for (int s = 0; s < n; ++s) kept.insert(DataFilename(p, s, n));
      }
    }
  }
  std::vector<std::string> strays;
  if (bytes) *bytes = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir, ec)) {
    std::string rel = std::filesystem::relative(entry.path(), dir).string();
    if (entry.is_directory()) {
      strays.push_back(rel + "/");
    } else if (!kept.count(rel)) {
      strays.push_back(rel);
      if (bytes) *bytes += entry.file_size();
    }
  }
  return strays;
}

}  // namespace ckflow::testing
