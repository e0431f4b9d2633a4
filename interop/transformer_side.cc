// ckflow's side of the transformer judge (interop/test_char_transformer.py
// is TensorFlow's): the example's model (examples/char_transformer_model.h)
// in a small configuration, its initial weights saved, then trained with
// Adam on the batches of a values file.
//
//   interop_transformer --in IN --initial PREFIX --final PREFIX --out OUT
//
// IN holds "ids_<s>" (int32 [batch, context]) and "labels_<s>" (int32
// [batch * context]) per step. PREFIX files are SaveWeights of the model
// before and after the steps; OUT gets "loss_<s>", each step's loss.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/weights.h"
#include "examples/char_transformer_model.h"
#include "interop/values_file.h"
#include "ops/array_ops.h"
#include "ops/losses.h"
#include "ops/optimizers.h"
#include "runtime/session.h"

namespace ckflow::interop {
namespace {

// The configuration test_char_transformer.py builds in tf_keras.
constexpr examples::TransformerConfig kConfig{
    .vocab = 256, .context = 16, .d_model = 32, .heads = 4, .blocks = 2};

Status Run(const std::string& in, const std::string& initial, const std::string& final_weights,
           const std::string& out) {
  CKFLOW_ASSIGN_OR_RETURN(NamedTensors given, ReadValues(in));
  std::map<std::string, Tensor> by_name(given.begin(), given.end());
  Scope root = Scope::NewRootScope();
  Output ids = ops::Placeholder(root.WithOpName("ids"), DT_INT32, {.shape = {-1, kConfig.context}});
  Output labels = ops::Placeholder(root.WithOpName("labels"), DT_INT32, {.shape = {-1}});
  auto model = std::make_shared<examples::CharTransformer>(kConfig);
  Output logits = ops::Reshape(root, (*model)(root, ids, /*training=*/true),
                               Tensor::FromVector<int64_t>({-1, kConfig.vocab}));
  Output loss = losses::SparseSoftmaxCrossEntropyWithLogits(root, labels, logits);
  Output train = Adam::Make({.learning_rate = 1e-3f})->Minimize(root, loss);
  Output init = GlobalVariablesInitializer(root);
  CKFLOW_RETURN_IF_ERROR(root.status());
  CKFLOW_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::Create(root.graph()));
  CKFLOW_RETURN_IF_ERROR(session->Run({}, {}, {init}).status());
  CKFLOW_RETURN_IF_ERROR(SaveWeights(model, initial, *session));
  NamedTensors losses;
  for (int step = 0; by_name.count("ids_" + std::to_string(step)); ++step) {
    const std::string s = std::to_string(step);
    if (!by_name.count("labels_" + s)) return InvalidArgumentError(in, ": no labels_", s);
    CKFLOW_ASSIGN_OR_RETURN(
        std::vector<Tensor> value,
        session->Run({{ids, by_name["ids_" + s]}, {labels, by_name["labels_" + s]}}, {loss},
                     {train}));
    losses.emplace_back("loss_" + s, value[0]);
  }
  CKFLOW_RETURN_IF_ERROR(SaveWeights(model, final_weights, *session));
  return WriteValues(out, losses);
}

}  // namespace
}  // namespace ckflow::interop

int main(int argc, char** argv) {
  CLI::App app{"trains the example's transformer on batches from a file, saving its weights"};
  std::string in, initial, final_weights, out;
  app.add_option("--in", in, "values file: ids_<s>, labels_<s>")->required();
  app.add_option("--initial", initial, "SaveWeights prefix of the initial weights")->required();
  app.add_option("--final", final_weights, "SaveWeights prefix of the trained weights")->required();
  app.add_option("--out", out, "values file to write: loss_<s>")->required();
  CLI11_PARSE(app, argc, argv);
  ckflow::Status status = ckflow::interop::Run(in, initial, final_weights, out);
  if (!status.ok()) {
    std::fprintf(stderr, "interop_transformer: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
