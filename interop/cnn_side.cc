// ckflow's half of the Fashion-MNIST checks of the interop suite
// (interop/test_fashion_mnist.py is the other half and the judge): the
// example's CNN (examples/fashion_mnist_model.h) trained step by step and
// evaluated, beside the same tf_keras model.
//
//   interop_cnn train --data DIR --initial P --steps N --trajectory T
//                     [--batch B] [--seed S] [--dropout R] [--optimizer sgd]
//       Builds the model and Adam (TF1 semantics, learning rate 1e-3; or
//       gradient descent, learning rate kSgdLearningRate),
//       initializes them, saves the model's initial weights with SaveWeights
//       to P (TensorFlow starts from them), then trains N steps on the
//       batches of epoch 0 of ShuffledIndices(n, S, 0), B images each, as
//       the example does; after step k it dumps every variable (model,
//       moving statistics, Adam's slots and beta powers, keyed by
//       checkpoint key under "model" and "optimizer") and the step's
//       "loss" to T.k. The first batch's indices go to T.indices.
//   interop_cnn evaluate --data DIR --weights P
//       Builds the model, restores Keras-style weights P with LoadWeights
//       and prints the test set's accuracy on the inference path.
//
// Both print "name: value" lines (assert_consumed, accuracy, saved).
#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "checkpoint/weights.h"
#include "data/shuffle.h"
#include "examples/fashion_mnist_data.h"
#include "examples/fashion_mnist_model.h"
#include "interop/values_file.h"
#include "ops/array_ops.h"
#include "ops/losses.h"
#include "ops/math_ops.h"
#include "ops/optimizers.h"
#include "runtime/session.h"

namespace ckflow::interop {
namespace {

struct Options {
  std::string data = examples::kFashionMnistDir;
  std::string initial, trajectory, weights;
  int64_t steps = 50;
  int64_t batch = 64;
  uint64_t seed = 1;
  double dropout = 0;
  std::string optimizer = "adam";
};

// tf_cnn_side.py's SGD_LEARNING_RATE.
constexpr float kSgdLearningRate = 0.05f;

void Report(const std::string& name, const std::string& value) {
  std::printf("%s: %s\n", name.c_str(), value.c_str());
}

// tf.Module: the root of the dumped values, as TensorFlow's side keys them.
class Module : public Trackable {
 public:
  std::string TypeName() const override { return "Module"; }
};

Status Train(const Options& o) {
  CKFLOW_ASSIGN_OR_RETURN(examples::LabeledImages train,
                          examples::ReadLabeledImages(o.data, "train"));
  Scope root = Scope::NewRootScope();
  root.graph().set_seed(static_cast<int64_t>(o.seed));
  Output images = ops::Placeholder(root, DT_FLOAT, {.shape = {-1, 28, 28, 1}});
  Output labels = ops::Placeholder(root, DT_INT32, {.shape = {-1}});
  auto model = examples::FashionMnistModel(o.dropout);
  // Adam's first steps move every weight by about its learning rate,
  // whatever the size of its gradient, so a gradient that is rounding noise
  // (the bias before a BatchNormalization) moves as far as a real one; plain
  // gradient descent keeps noise as small as it is.
  std::shared_ptr<Optimizer> optimizer;
  if (o.optimizer == "adam") {
    optimizer = Adam::Make({.learning_rate = 1e-3f});
  } else if (o.optimizer == "sgd") {
    optimizer = GradientDescent::Make(kSgdLearningRate);
  } else {
    return InvalidArgumentError("--optimizer must be adam or sgd, got '", o.optimizer, "'");
  }
  Output loss =
      losses::SparseSoftmaxCrossEntropyWithLogits(root, labels, (*model)(root, images, true));
  Output train_op = optimizer->Minimize(root, loss);
  Output init = GlobalVariablesInitializer(root);
  CKFLOW_RETURN_IF_ERROR(root.status());
  CKFLOW_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::Create(root.graph()));
  CKFLOW_RETURN_IF_ERROR(session->Run({}, {}, {init}).status());
  CKFLOW_RETURN_IF_ERROR(SaveWeights(model, o.initial, *session));
  Report("saved", o.initial);

  auto top = std::make_shared<Module>();
  top->Track("optimizer", optimizer);
  top->Track("model", model);
  const std::vector<int64_t> order = ShuffledIndices(train.size(), o.seed, 0);
  if (o.steps * o.batch > train.size()) {
    return InvalidArgumentError(o.steps, " steps of ", o.batch, " are more than an epoch");
  }
  std::vector<int64_t> first(order.begin(), order.begin() + o.batch);
  CKFLOW_RETURN_IF_ERROR(
      WriteValues(o.trajectory + ".indices", {{"indices", Tensor::FromVector<int64_t>(first)}}));
  for (int64_t step = 0; step < o.steps; ++step) {
    examples::Batch batch =
        examples::Gather(train, std::span(order).subspan(step * o.batch, o.batch));
    CKFLOW_ASSIGN_OR_RETURN(
        std::vector<Tensor> out,
        session->Run({{images, batch.images}, {labels, batch.labels}}, {loss}, {train_op}));
    CKFLOW_RETURN_IF_ERROR(DumpValues(*session, top, o.trajectory + "." + std::to_string(step + 1),
                                      {{"loss", out[0]}}));
  }
  Report("steps", std::to_string(o.steps));
  return OkStatus();
}

Status Evaluate(const Options& o) {
  CKFLOW_ASSIGN_OR_RETURN(examples::LabeledImages test,
                          examples::ReadLabeledImages(o.data, "t10k"));
  Scope root = Scope::NewRootScope();
  Output images = ops::Placeholder(root, DT_FLOAT, {.shape = {-1, 28, 28, 1}});
  auto model = examples::FashionMnistModel();
  Output predictions =
      ops::ArgMax(root, (*model)(root, images, false), ops::Const<int32_t>(root, 1), DT_INT32);
  CKFLOW_RETURN_IF_ERROR(root.status());
  CKFLOW_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::Create(root.graph()));
  CKFLOW_ASSIGN_OR_RETURN(LoadStatus status, LoadWeights(model, o.weights, *session));
  Status consumed = status.AssertConsumed();
  Report("assert_consumed", consumed.ok() ? "ok" : "failed: " + consumed.ToString());
  CKFLOW_ASSIGN_OR_RETURN(double accuracy, examples::Accuracy(*session, images, predictions, test));
  char text[32];
  std::snprintf(text, sizeof(text), "%.6f", accuracy);
  Report("accuracy", text);
  return OkStatus();
}

}  // namespace
}  // namespace ckflow::interop

int main(int argc, char** argv) {
  using namespace ckflow::interop;  // NOLINT
  CLI::App app{"ckflow's side of the interop suite's Fashion-MNIST checks"};
  app.require_subcommand(1);
  Options o;
  CLI::App* train = app.add_subcommand("train", "save the initial weights, train, dump each step");
  train->add_option("--data", o.data, "the data set's directory");
  train->add_option("--initial", o.initial, "SaveWeights of the initial model here")->required();
  train->add_option("--steps", o.steps, "training steps");
  train->add_option("--trajectory", o.trajectory, "dump the values after step k to PATH.k")
      ->required();
  train->add_option("--batch", o.batch, "images per step");
  train->add_option("--seed", o.seed, "the graph's seed and the shuffle's");
  train->add_option("--dropout", o.dropout, "the Dropout layer's rate");
  train->add_option("--optimizer", o.optimizer, "adam (TF1's, 1e-3) or sgd (gradient descent)");
  CLI::App* evaluate = app.add_subcommand("evaluate", "load Keras weights, print the accuracy");
  evaluate->add_option("--data", o.data, "the data set's directory");
  evaluate->add_option("--weights", o.weights, "LoadWeights from this prefix")->required();
  CLI11_PARSE(app, argc, argv);

  ckflow::Status status = train->parsed() ? Train(o) : Evaluate(o);
  std::fflush(stdout);
  if (!status.ok()) {
    std::fprintf(stderr, "interop_cnn: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
