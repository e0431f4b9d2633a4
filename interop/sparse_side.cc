// ckflow's side of the sparse-update judge (interop/test_sparse_optimizers.py
// is TensorFlow's): trains an embedding table through a gather with one of
// ckflow's optimizers, on the ids and row gradients a values file gives, and
// writes the table, its slots and the optimizer's other variables.
//
//   interop_sparse --optimizer adagrad --in IN --out OUT
//
// IN holds "table" (the initial value, [rows, width]) and, per step s,
// "ids_<s>" (int32 or int64, [n], rows repeated and unsorted) and
// "weights_<s>" ([n, width]). Each step minimizes sum(gather(table, ids) *
// weights), so the gradient is the IndexedSlices (weights, ids). OUT gets
// "table", "slot/<name>" for each slot and the non-slot variables by name.
// The optimizers' settings are fixed here and in the Python half.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "interop/values_file.h"
#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "ops/optimizers.h"
#include "ops/variables.h"
#include "runtime/session.h"

namespace ckflow::interop {
namespace {

const std::map<std::string, std::function<std::shared_ptr<Optimizer>()>>& Optimizers() {
  static const auto* const optimizers =
      new std::map<std::string, std::function<std::shared_ptr<Optimizer>()>>{
          {"sgd", [] { return GradientDescent::Make(0.1f); }},
          {"momentum", [] { return Momentum::Make({.learning_rate = 0.1f, .momentum = 0.9f}); }},
          {"nesterov",
           [] {
             return Momentum::Make({.learning_rate = 0.1f, .momentum = 0.9f, .use_nesterov = true});
           }},
          {"adam", [] { return Adam::Make({.learning_rate = 0.1f}); }},
          {"lazy_adam", [] { return LazyAdam::Make({.learning_rate = 0.1f}); }},
          {"adagrad", [] { return Adagrad::Make({.learning_rate = 0.1f}); }},
          {"ftrl", [] { return Ftrl::Make({.learning_rate = 0.5f, .l1 = 0.2f, .l2 = 0.1f}); }},
          {"ftrl_power",
           [] {
             return Ftrl::Make(
                 {.learning_rate = 0.5f, .learning_rate_power = -0.25f, .l1 = 0.2f, .l2 = 0.1f});
           }},
          {"rmsprop",
           [] { return RMSProp::Make({.learning_rate = 0.01f, .decay = 0.9f, .momentum = 0.5f}); }},
      };
  return *optimizers;
}

Status Run(const std::string& name, const std::string& in, const std::string& out) {
  auto make = Optimizers().find(name);
  if (make == Optimizers().end()) return InvalidArgumentError("no optimizer '", name, "'");
  CKFLOW_ASSIGN_OR_RETURN(NamedTensors given, ReadValues(in));
  std::map<std::string, Tensor> by_name(given.begin(), given.end());
  auto get = [&](const std::string& key) -> StatusOr<Tensor> {
    auto it = by_name.find(key);
    if (it == by_name.end()) return InvalidArgumentError(in, ": no tensor '", key, "'");
    return it->second;
  };
  CKFLOW_ASSIGN_OR_RETURN(Tensor initial, get("table"));
  CKFLOW_ASSIGN_OR_RETURN(Tensor first_ids, get("ids_0"));

  Scope root = Scope::NewRootScope();
  auto table = Variable::Create(root, "table", ops::Const(root, initial));
  Output ids = ops::Placeholder(root.WithOpName("ids"), first_ids.dtype());
  Output weights = ops::Placeholder(root.WithOpName("weights"), initial.dtype());
  Output loss = ops::Sum(root, ops::Mul(root, table->SparseRead(root, ids), weights));
  std::shared_ptr<Optimizer> optimizer = make->second();
  Output train = optimizer->Minimize(root, loss, {table});
  Output init = GlobalVariablesInitializer(root);
  CKFLOW_RETURN_IF_ERROR(root.status());
  CKFLOW_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::Create(root.graph()));
  CKFLOW_RETURN_IF_ERROR(session->Run({}, {}, {init}).status());
  for (int step = 0; by_name.count("ids_" + std::to_string(step)); ++step) {
    CKFLOW_ASSIGN_OR_RETURN(Tensor id, get("ids_" + std::to_string(step)));
    CKFLOW_ASSIGN_OR_RETURN(Tensor w, get("weights_" + std::to_string(step)));
    CKFLOW_RETURN_IF_ERROR(session->Run({{ids, id}, {weights, w}}, {}, {train}).status());
  }

  std::vector<std::string> keys = {"table"};
  std::vector<Output> fetches = {table->value()};
  for (const std::string& slot : optimizer->SlotNames()) {
    keys.push_back("slot/" + slot);
    fetches.push_back(optimizer->GetSlotVariable(*table, slot)->value());
  }
  for (const char* non_slot : {"beta1_power", "beta2_power"}) {
    if (auto v = optimizer->GetNonSlotVariable(non_slot)) {
      keys.push_back(non_slot);
      fetches.push_back(v->value());
    }
  }
  CKFLOW_ASSIGN_OR_RETURN(std::vector<Tensor> values, session->Run({}, fetches));
  NamedTensors written;
  for (size_t i = 0; i < values.size(); ++i) written.emplace_back(keys[i], values[i]);
  return WriteValues(out, written);
}

}  // namespace
}  // namespace ckflow::interop

int main(int argc, char** argv) {
  CLI::App app{"trains an embedding table with sparse updates, on ids and gradients from a file"};
  std::string optimizer, in, out;
  app.add_option("--optimizer", optimizer,
                 "sgd, momentum, nesterov, adam, lazy_adam, adagrad, "
                 "ftrl, ftrl_power or rmsprop")
      ->required();
  app.add_option("--in", in, "values file: table, ids_<s>, weights_<s>")->required();
  app.add_option("--out", out, "values file to write: table, slot/<name>, ...")->required();
  CLI11_PARSE(app, argc, argv);
  ckflow::Status status = ckflow::interop::Run(optimizer, in, out);
  if (!status.ok()) {
    std::fprintf(stderr, "interop_sparse: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
