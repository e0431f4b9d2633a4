// ckflow's side of the sequence-layer judge (interop/test_sequence_layers.py
// is TensorFlow's): builds one of Keras' layers as ckflow has it, runs it
// on the inputs of a values file (a training call for a name ending in
// "_train"), and writes its output and its weights (after the call).
//
//   interop_layers --layer mha_causal --in IN --out OUT --weights PREFIX
//
// IN holds "x" (and "value" for cross-attention). OUT gets "y" and each
// variable by its graph name ("multi_head_attention/query/kernel"); PREFIX
// gets SaveWeights of the layer, which tf_keras' layer of the same settings
// must restore with assert_consumed and then compute "y" from.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/weights.h"
#include "interop/values_file.h"
#include "ops/array_ops.h"
#include "ops/initializers.h"
#include "ops/layers.h"
#include "ops/normalization_layers.h"
#include "ops/sequence_layers.h"
#include "runtime/session.h"

namespace ckflow::interop {
namespace {

// Biases and norms start away from Keras' zeros and ones, so that a
// misplaced one shows in the output.
Initializer Spread(int64_t seed) { return initializers::RandomUniform(-0.5, 0.5, seed); }

const std::map<std::string, std::function<std::shared_ptr<Layer>()>>& Layers() {
  static const auto* const layers =
      new std::map<std::string, std::function<std::shared_ptr<Layer>()>>{
          {"embedding", [] { return Embedding::Make(50, 8); }},
          {"layer_norm",
           [] {
             return LayerNormalization::Make(
                 {.gamma_initializer = initializers::RandomUniform(0.5, 1.5, 1),
                  .beta_initializer = Spread(2)});
           }},
          {"dense3", [] { return Dense::Make(6, {.bias_initializer = Spread(3)}); }},
          {"mha", [] { return MultiHeadAttention::Make(4, 8, {.bias_initializer = Spread(4)}); }},
          {"mha_causal",
           [] {
             return MultiHeadAttention::Make(
                 4, 8, {.use_causal_mask = true, .bias_initializer = Spread(5)});
           }},
          // Moving statistics away from Keras' zeros and ones, for the
          // inference call to read; the training call updates Keras'.
          {"batch_norm",
           [] {
             return BatchNormalization::Make(
                 {.beta_initializer = Spread(7),
                  .gamma_initializer = initializers::RandomUniform(0.5, 1.5, 8),
                  .moving_mean_initializer = Spread(9),
                  .moving_variance_initializer = initializers::RandomUniform(0.5, 1.5, 10)});
           }},
          {"batch_norm_train",
           [] {
             return BatchNormalization::Make(
                 {.beta_initializer = Spread(11),
                  .gamma_initializer = initializers::RandomUniform(0.5, 1.5, 12)});
           }},
          {"mha_cross",
           [] {
             return MultiHeadAttention::Make(2, 8, {.value_dim = 5, .bias_initializer = Spread(6)});
           }},
      };
  return *layers;
}

Status Run(const std::string& name, const std::string& in, const std::string& out,
           const std::string& weights) {
  auto make = Layers().find(name);
  if (make == Layers().end()) return InvalidArgumentError("no layer '", name, "'");
  CKFLOW_ASSIGN_OR_RETURN(NamedTensors given, ReadValues(in));
  std::map<std::string, Tensor> by_name(given.begin(), given.end());
  if (!by_name.count("x")) return InvalidArgumentError(in, ": no tensor 'x'");
  std::shared_ptr<Layer> layer = make->second();
  Scope root = Scope::NewRootScope();
  Output x = ops::Const(root.WithOpName("x"), by_name["x"]);
  Output y;
  if (by_name.count("value")) {
    auto* attention = dynamic_cast<MultiHeadAttention*>(layer.get());
    if (attention == nullptr) return InvalidArgumentError("layer '", name, "' takes one input");
    y = (*attention)(root, x, ops::Const(root.WithOpName("value"), by_name["value"]));
  } else {
    // "_train": a training call (batch statistics, moving ones updated).
    y = (*layer)(root, x, name.ends_with("_train"));
  }
  Output init = GlobalVariablesInitializer(root);
  CKFLOW_RETURN_IF_ERROR(root.status());
  CKFLOW_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::Create(root.graph()));
  CKFLOW_RETURN_IF_ERROR(session->Run({}, {}, {init}).status());
  // The output first: its run applies a training call's updates, which
  // the variables then show.
  CKFLOW_ASSIGN_OR_RETURN(std::vector<Tensor> output, session->Run({}, {y}));
  NamedTensors written = {{"y", output[0]}};
  std::vector<Output> fetches;
  for (const auto& v : layer->variables()) fetches.push_back(v->value());
  CKFLOW_ASSIGN_OR_RETURN(std::vector<Tensor> values, session->Run({}, fetches));
  for (size_t i = 0; i < values.size(); ++i) {
    written.emplace_back(layer->variables()[i]->name(), values[i]);
  }
  CKFLOW_RETURN_IF_ERROR(WriteValues(out, written));
  return SaveWeights(layer, weights, *session);
}

}  // namespace
}  // namespace ckflow::interop

int main(int argc, char** argv) {
  CLI::App app{"runs one of Keras' sequence layers as ckflow has it and saves its weights"};
  std::string layer, in, out, weights;
  app.add_option("--layer", layer,
                 "embedding, layer_norm, dense3, batch_norm, batch_norm_train, mha, mha_causal or "
                 "mha_cross")
      ->required();
  app.add_option("--in", in, "values file: x (and value for mha_cross)")->required();
  app.add_option("--out", out, "values file to write: y and the weights by name")->required();
  app.add_option("--weights", weights, "SaveWeights prefix to write")->required();
  CLI11_PARSE(app, argc, argv);
  ckflow::Status status = ckflow::interop::Run(layer, in, out, weights);
  if (!status.ok()) {
    std::fprintf(stderr, "interop_layers: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
