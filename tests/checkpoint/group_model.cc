#include "tests/checkpoint/group_model.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>

#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "ops/optimizers.h"

namespace ckflow::testing {
namespace {

class Module : public Trackable {
 public:
  std::string TypeName() const override { return "Module"; }
};

uint32_t Mix(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  return x ^ (x >> 16);
}

}  // namespace

Tensor GroupModel::Values(uint32_t seed, int index, const TensorShape& shape) {
  Tensor t = *Tensor::Allocate(DT_FLOAT, shape);
  auto* data = static_cast<float*>(t.raw_data());
  const uint32_t base = Mix(seed * 2654435761U + static_cast<uint32_t>(index));
  for (int64_t i = 0; i < t.NumElements(); ++i) {
    data[i] = static_cast<float>(Mix(base + static_cast<uint32_t>(i)) % 2000003) * 1e-3f - 1000.f;
  }
  return t;
}

StatusOr<std::unique_ptr<GroupModel>> GroupModel::Create(const GroupModelSpec& spec,
                                                         CheckpointOptions options) {
  std::unique_ptr<GroupModel> m(new GroupModel());
  auto model = std::make_shared<Module>();
  m->model_ = model;
  m->init_seed_ = spec.init_seed;
  std::vector<Output> squares;
  for (int i = 0; i < spec.small + spec.large; ++i) {
    char name[32];
    const bool large = i >= spec.small;
    std::snprintf(name, sizeof(name), large ? "big%d" : "v%05d", large ? i - spec.small : i);
    const int64_t n = large ? spec.large_elements : 1 + i % 7;
    auto v =
        Variable::Create(m->scope_, name, ops::Const(m->scope_, Values(spec.init_seed, i, {n})));
    if (v == nullptr) return m->scope_.status();
    model->Track(name, v);
    m->vars_.push_back(v);
    if (spec.slots) squares.push_back(ops::Sum(m->scope_, ops::Square(m->scope_, v->value())));
  }
  if (spec.slots) {
    auto adam = Adam::Make({});
    model->Track("optimizer", adam);
    adam->Minimize(m->scope_, ops::AddN(m->scope_, squares));
    const size_t n = m->vars_.size();
    for (size_t i = 0; i < n; ++i) {
      for (const char* slot : {"m", "v"}) {
        std::shared_ptr<Variable> s = adam->GetSlotVariable(*m->vars_[i], slot);
        if (s == nullptr) return InternalError("no slot ", slot, " for ", m->vars_[i]->name());
        m->vars_.push_back(s);
      }
    }
    for (const char* name : {"beta1_power", "beta2_power"}) {
      std::shared_ptr<Variable> v = adam->GetNonSlotVariable(name);
      if (v == nullptr) return InternalError("no ", name);
      m->vars_.push_back(v);
    }
  }
  for (const auto& v : m->vars_) {
    if (spec.assignable) {
      Output feed = ops::Placeholder(m->scope_, DT_FLOAT);
      m->feeds_.push_back(feed);
      m->assigns_.push_back(v->Assign(m->scope_, feed));
    }
    m->initialized_.push_back(v->IsInitialized(m->scope_));
  }
  CKFLOW_RETURN_IF_ERROR(m->scope_.status());
  m->checkpoint_ = std::make_unique<Checkpoint>(
      m->scope_, Checkpoint::Dependencies{{"model", model}}, std::move(options));
  CKFLOW_RETURN_IF_ERROR(m->scope_.status());
  CKFLOW_ASSIGN_OR_RETURN(m->session_, Session::Create(m->scope_.graph()));
  return m;
}

Status GroupModel::Set(uint32_t seed) {
  if (assigns_.empty()) {
    if (seed != init_seed_)
      return InvalidArgumentError("GroupModel: no assign ops for seed ", seed);
    std::vector<Output> inits;
    for (const auto& v : vars_) inits.push_back(v->initializer());
    return session_->Run({}, {}, inits).status();
  }
  std::vector<Feed> feeds;
  for (size_t i = 0; i < vars_.size(); ++i) {
    feeds.emplace_back(feeds_[i],
                       Values(seed, static_cast<int>(i), vars_[i]->shape().ToTensorShape()));
  }
  return session_->Run(feeds, {}, assigns_).status();
}

StatusOr<int> GroupModel::CheckInitialized(uint32_t seed) {
  CKFLOW_ASSIGN_OR_RETURN(std::vector<Tensor> flags, session_->Run({}, initialized_, {}));
  std::vector<Output> reads;
  std::vector<int> which;
  for (size_t i = 0; i < vars_.size(); ++i) {
    if (!flags[i].scalar<bool>()) continue;
    reads.push_back(vars_[i]->value());
    which.push_back(static_cast<int>(i));
  }
  CKFLOW_ASSIGN_OR_RETURN(std::vector<Tensor> values, session_->Run({}, reads, {}));
  for (size_t k = 0; k < which.size(); ++k) {
    const Tensor expected = Values(seed, which[k], values[k].shape());
    if (values[k].TotalBytes() != expected.TotalBytes() ||
        std::memcmp(values[k].raw_data(), expected.raw_data(), expected.TotalBytes()) != 0) {
      return DataLossError("variable '", vars_[which[k]]->name(), "' does not hold seed ", seed,
                           "'s values");
    }
  }
  return static_cast<int>(which.size());
}

Status CheckSeedInOneProcess(const std::string& path, uint32_t seed) {
  CKFLOW_ASSIGN_OR_RETURN(std::unique_ptr<GroupModel> m, GroupModel::Create({}));
  CKFLOW_ASSIGN_OR_RETURN(LoadStatus status, m->checkpoint().Restore(path));
  CKFLOW_RETURN_IF_ERROR(status.AssertConsumed());
  CKFLOW_RETURN_IF_ERROR(status.InitializeOrRestore(m->session()));
  CKFLOW_ASSIGN_OR_RETURN(const int checked, m->CheckInitialized(seed));
  if (checked == m->num_values()) return OkStatus();
  return DataLossError("'", path, "' restored ", checked, " of ", m->num_values(), " values");
}

StatusOr<std::unique_ptr<WritableFile>> FailingPartFs::NewWritableFile(const std::string& path) {
  if (path.find(part_) != std::string::npos) return ErrnoStatus(ENOSPC, "open", path);
  return FileSystemWrapper::NewWritableFile(path);
}

std::vector<std::string> ThreadMeeting::AllGather(int rank, std::string_view mine) {
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

void RunGroup(int size, const std::function<void(int, CheckpointGroup&)>& body) {
  ThreadMeeting meeting(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      ThreadMember member(&meeting, r);
      body(r, member);
    });
  }
  for (std::thread& t : threads) t.join();
}

}  // namespace ckflow::testing
