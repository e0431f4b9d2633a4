// The Regress example executing eagerly, as the seed's second program:
//
//   regress_eager [--steps N] [--dir DIR]
//
// Restore the latest checkpoint of DIR before any variable exists; every
// variable then takes its checkpointed value the moment it is created (the
// layers' on their first call, the optimizer's slots and beta powers on its
// first update), with no restore ops to run. Train with Minimize in a plain
// loop, assert the restore consumed the whole checkpoint (on a resumed run),
// and save. Run it twice: the second run continues (step, save_counter).
#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <utility>

#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_management.h"
#include "examples/regress_model.h"
#include "ops/array_ops.h"
#include "ops/layers.h"
#include "ops/losses.h"
#include "ops/nn_ops.h"
#include "ops/optimizers.h"
#include "ops/variables.h"

namespace {

using namespace ckflow;  // NOLINT: an example reads better without prefixes

using examples::Regress;

// A batch of y = 2 x0 - x1 + 0.5 x2 x3 for x uniform in [-1, 1]^4.
std::pair<Tensor, Tensor> Batch(std::mt19937& rng, int64_t n) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  Tensor xs(DT_FLOAT, TensorShape({n, 4}));
  Tensor ys(DT_FLOAT, TensorShape({n, 1}));
  for (int64_t i = 0; i < n; ++i) {
    float* v = &xs.flat<float>()[4 * i];
    for (int j = 0; j < 4; ++j) v[j] = uniform(rng);
    ys.flat<float>()[i] = 2 * v[0] - v[1] + 0.5f * v[2] * v[3];
  }
  return {xs, ys};
}

Status Train(int64_t steps, const std::string& dir) {
  Scope scope = Scope::NewEagerScope();
  scope.graph().set_seed(1);
  auto model = std::make_shared<Regress>();
  auto optimizer = Adam::Make({.learning_rate = 0.01f});
  auto step = Variable::Create(scope, "step", ops::Const<int64_t>(scope, 0), {.trainable = false});
  Checkpoint checkpoint(scope, {{"optimizer", optimizer}, {"model", model}, {"step", step}});
  const std::optional<std::string> latest = LatestCheckpoint(dir);
  CKFLOW_ASSIGN_OR_RETURN(LoadStatus status, checkpoint.Restore(latest));
  const int64_t first = step->value().value().scalar<int64_t>();  // restored on the spot
  std::printf(latest ? "restored %s at step %lld\n" : "%sno checkpoint: starting at step %lld\n",
              latest ? latest->c_str() : "", static_cast<long long>(first));

  // The loss on a fixed batch: the model builds here, so on a resumed run its
  // variables are restored as they are created, and this equals the loss
  // the previous run ended with.
  std::mt19937 eval_rng(0);
  const std::pair<Tensor, Tensor> eval = Batch(eval_rng, 256);
  auto eval_loss = [&] {
    return losses::MeanSquaredError(scope, ops::Const(scope, eval.second),
                                    (*model)(scope, ops::Const(scope, eval.first)))
        .value()
        .scalar<float>();
  };
  std::printf("eval loss at start %.9g\n", eval_loss());
  CKFLOW_RETURN_IF_ERROR(scope.status());

  std::mt19937 rng(static_cast<uint32_t>(42 + first));
  Output loss;
  for (int64_t i = 0; i < steps; ++i) {
    // Not a structured binding: clang 14 cannot capture one in a lambda.
    const std::pair<Tensor, Tensor> batch = Batch(rng, 64);
    optimizer->Minimize(
        scope,
        [&] {
          loss = losses::MeanSquaredError(scope, ops::Const(scope, batch.second),
                                          (*model)(scope, ops::Const(scope, batch.first)));
          return loss;
        },
        {}, step);
    CKFLOW_RETURN_IF_ERROR(scope.status());
  }
  if (latest) CKFLOW_RETURN_IF_ERROR(status.AssertConsumed());  // everything was created
  std::printf("eval loss at end %.9g\n", eval_loss());
  CKFLOW_ASSIGN_OR_RETURN(std::string path, checkpoint.Save(dir + "/ckpt"));
  std::printf("step %lld, loss %.6f, saved %s (save_counter %lld)\n",
              static_cast<long long>(step->value().value().scalar<int64_t>()),
              loss.value().scalar<float>(), path.c_str(),
              static_cast<long long>(checkpoint.save_counter()->value().value().scalar<int64_t>()));
  return checkpoint.Sync();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Trains TensorFlow's Regress example model eagerly, restoring on creation."};
  int64_t steps = 200;
  std::string dir = "runs/regress_eager";
  app.add_option("--steps", steps, "training steps")->check(CLI::PositiveNumber);
  app.add_option("--dir", dir, "checkpoint directory: restored from if it has one, saved to");
  CLI11_PARSE(app, argc, argv);

  ckflow::Status status = Train(steps, dir);
  if (!status.ok()) {
    std::fprintf(stderr, "regress_eager: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
