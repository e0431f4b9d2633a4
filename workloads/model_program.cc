#include "workloads/model_program.h"

#include <chrono>
#include <cstdio>
#include <optional>
#include <utility>

#include "bundle/bundle_format.h"
#include "bundle/bundle_reader.h"
#include "ops/array_ops.h"
#include "ops/optimizers.h"
#include "workloads/memory.h"

namespace ckflow::workloads {

void ModelProgram::Add(const std::string& name, std::shared_ptr<Variable> variable) {
  vars.push_back(model->Track(name, std::move(variable)));
}

const char* OptimizerName(SyntheticOptimizer optimizer) {
  return optimizer == SyntheticOptimizer::kAdam ? "adam" : "none";
}

StatusOr<SyntheticOptimizer> OptimizerNamed(const std::string& name) {
  for (SyntheticOptimizer o : {SyntheticOptimizer::kNone, SyntheticOptimizer::kAdam}) {
    if (name == OptimizerName(o)) return o;
  }
  return InvalidArgumentError("--optimizer '", name, "': not an optimizer here (none or adam)");
}

int VariablesPerModelVariable(SyntheticOptimizer optimizer) {
  return optimizer == SyntheticOptimizer::kAdam ? 3 : 1;
}

Status ModelProgram::Finish(bool initialize) {
  CKFLOW_RETURN_IF_ERROR(scope.status());
  Checkpoint::Dependencies dependencies{{"model", model}};
  if (optimizer != nullptr) dependencies.emplace_back("optimizer", optimizer);
  checkpoint = std::make_unique<Checkpoint>(scope, std::move(dependencies));
  CKFLOW_ASSIGN_OR_RETURN(session, Session::Create(scope.graph()));
  if (!initialize) return OkStatus();
  return session->Run({}, {}, {GlobalVariablesInitializer(scope)}).status();
}

StatusOr<std::unique_ptr<ModelProgram>> ModelProgram::Synthetic(int64_t count, int64_t elements,
                                                                float first, bool initialize,
                                                                int64_t layers,
                                                                SyntheticOptimizer optimizer) {
  auto m = std::make_unique<ModelProgram>();
  m->vars.reserve(static_cast<size_t>(count));
  std::vector<std::shared_ptr<Module>> modules;
  for (int64_t k = 0; layers > 1 && k < layers; ++k) {
    char name[32];  // not "layer" + to_string: GCC 12 warns falsely (-Wrestrict)
    std::snprintf(name, sizeof(name), "layer%lld", static_cast<long long>(k));
    modules.push_back(m->model->Track(name, std::make_shared<Module>()));
  }
  Output shape = ops::Const(m->scope, std::vector<int64_t>{elements}, {1});
  for (int64_t i = 0; i < count; ++i) {
    char name[32];
    std::snprintf(name, sizeof(name), "v%lld", static_cast<long long>(i));
    Output value = ops::Fill(m->scope, shape, ops::Const(m->scope, first + static_cast<float>(i)));
    std::shared_ptr<Variable> variable = Variable::Create(m->scope, name, value);
    if (modules.empty()) {
      m->Add(name, std::move(variable));
    } else {
      m->vars.push_back(modules[i * layers / count]->Track(name, std::move(variable)));
    }
  }
  if (optimizer == SyntheticOptimizer::kAdam) {
    // The update ops create the slots; one zero gradient serves them all.
    m->optimizer = Adam::Make();
    Output zeros = ops::Fill(m->scope, shape, ops::Const(m->scope, 0.0f));
    std::vector<GradAndVar> grads;
    grads.reserve(m->vars.size());
    for (const std::shared_ptr<Variable>& v : m->vars) grads.push_back({zeros, v});
    m->optimizer->ApplyGradients(m->scope, grads);
  }
  CKFLOW_RETURN_IF_ERROR(m->Finish(/*initialize=*/false));
  if (initialize) {
    CKFLOW_ASSIGN_OR_RETURN(LoadStatus init, m->checkpoint->Restore(std::nullopt));
    CKFLOW_RETURN_IF_ERROR(init.InitializeOrRestore(*m->session));
  }
  return m;
}

StatusOr<ValueLayout> LayoutOf(const std::string& prefix) {
  CKFLOW_ASSIGN_OR_RETURN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix));
  ValueLayout layout;
  for (const BundleEntry& e : reader->entries()) {
    if (e.key.find("VARIABLE_VALUE") == std::string::npos ||
        e.key.find("save_counter") != std::string::npos) {
      continue;
    }
    layout.pieces.push_back({e.offset, e.size, e.shard_id});
  }
  for (int i = 0; i < reader->num_shards(); ++i) {
    layout.data_files.push_back(DataFilename(prefix, i, reader->num_shards()));
  }
  return layout;
}

StatusOr<TimedRestore> TimeRestoreIntoNewModel(const std::string& prefix, int64_t count,
                                               int64_t elements, SyntheticOptimizer optimizer) {
  CKFLOW_ASSIGN_OR_RETURN(
      std::unique_ptr<ModelProgram> p,
      ModelProgram::Synthetic(count, elements, -1.0f, /*initialize=*/false, 1, optimizer));
  const int64_t faults = MinorPageFaults();
  const auto start = std::chrono::steady_clock::now();
  CKFLOW_ASSIGN_OR_RETURN(LoadStatus status, p->checkpoint->Restore(prefix));
  CKFLOW_RETURN_IF_ERROR(status.InitializeOrRestore(*p->session));
  const TimedRestore timed{.seconds = SecondsSince(start),
                           .page_faults = faults < 0 ? -1 : MinorPageFaults() - faults};
  // A checkpoint of another model (one with slots, say) fails here, not
  // as a fast restore of part of it.
  CKFLOW_RETURN_IF_ERROR(status.AssertConsumed());
  CKFLOW_ASSIGN_OR_RETURN(std::vector<Tensor> got, p->session->Run({}, {p->vars.back()->value()}));
  const float expected = static_cast<float>(count - 1);
  for (float v : got[0].flat<float>()) {
    if (v != expected) {
      return InternalError(prefix, ": variable ", p->vars.back()->name(), " holds ", v,
                           " after the restore, expected ", expected);
    }
  }
  return timed;
}

}  // namespace ckflow::workloads
