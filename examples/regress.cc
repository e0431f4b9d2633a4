// TensorFlow's classic Regress model, trained with Adam on synthetic data in
// a session loop:
//
//   regress [--steps N] [--dir DIR] [--save-every K] [--print-batches]
//
// It checkpoints the way tf.compat.v1.train.Checkpoint does in graph mode:
// restore the latest checkpoint of DIR (deferred: the layers build and the
// optimizer's slots appear afterwards, and are restored as they do), then
// initialize what was not restored, train, and save every K steps through a
// CheckpointManager, asynchronously. Run it twice: the second run continues where the first
// stopped (global step, save_counter, loss and the data iterator's place).
//
// The model is a Dense(10) named input_transform, a hidden ReLU layer and a
// Dense(1) output; the data is y = 2 x0 - x1 + 0.5 x2 x3 (+ a little noise)
// for x uniform in [-1, 1]^4: 1000 fixed examples, reshuffled each epoch by
// a checkpointed DatasetIterator. A progress bar on stderr shows the step, the
// loss of the current batch and the steps per second.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_management.h"
#include "checkpoint/preemption.h"
#include "examples/preempted.h"
#include "examples/progress_bar.h"
#include "examples/regress_model.h"
#include "ops/array_ops.h"
#include "ops/dataset_iterator.h"
#include "ops/layers.h"
#include "ops/losses.h"
#include "ops/nn_ops.h"
#include "ops/optimizers.h"
#include "ops/variables.h"
#include "runtime/session.h"

namespace {

using namespace ckflow;  // NOLINT: an example reads better without prefixes

using examples::ProgressBar;
using examples::Regress;

// `n` examples (x, y) of the function above, the same in every run: the
// data set the iterator below shuffles into batches.
std::vector<Tensor> SyntheticExamples(int64_t n) {
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::normal_distribution<float> noise(0.0f, 0.01f);
  Tensor xs(DT_FLOAT, TensorShape({n, 4}));
  Tensor ys(DT_FLOAT, TensorShape({n, 1}));
  for (int64_t i = 0; i < n; ++i) {
    float* v = &xs.flat<float>()[4 * i];
    for (int j = 0; j < 4; ++j) v[j] = uniform(rng);
    ys.flat<float>()[i] = 2 * v[0] - v[1] + 0.5f * v[2] * v[3] + noise(rng);
  }
  return {xs, ys};
}

// FNV-1a of a batch's bytes: --print-batches shows which batches a run saw,
// so a resumed run can be compared with one that never stopped.
uint64_t Digest(const std::vector<Tensor>& batch) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (const Tensor& t : batch) {
    const auto* p = static_cast<const unsigned char*>(t.raw_data());
    for (size_t i = 0; i < t.TotalBytes(); ++i) h = (h ^ p[i]) * 0x100000001b3ULL;
  }
  return h;
}

Status Train(int64_t steps, const std::string& dir, int64_t save_every, bool print_batches) {
  Scope root = Scope::NewRootScope();
  root.graph().set_seed(1);
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, {.shape = {-1, 4}});
  Output y = ops::Placeholder(root.WithOpName("y"), DT_FLOAT, {.shape = {-1, 1}});
  auto model = std::make_shared<Regress>();
  auto optimizer = Adam::Make({.learning_rate = 0.01f});
  auto global_step =
      Variable::Create(root, "global_step", ops::Const<int64_t>(root, 0), {.trainable = false});

  // The data: 1000 examples, reshuffled every epoch, 64 at a time. The
  // iterator's position is checkpointed with the model (under "data"), so a
  // resumed run sees the batches the uninterrupted run would have.
  CKFLOW_ASSIGN_OR_RETURN(
      std::shared_ptr<DatasetIterator> data,
      DatasetIterator::FromTensorSlices(
          root, "data", SyntheticExamples(1000),
          {.batch_size = 64, .shuffle = true, .seed = 1, .drop_remainder = true}));

  // Restore before the model is built: nothing exists yet, so the restore is
  // deferred until the layers and slots are created below. The newest
  // checkpoint that is whole: a damaged one (a file lost or cut short) is
  // skipped, with a warning saying why, for the one before.
  Checkpoint checkpoint(
      root, {{"optimizer", optimizer}, {"model", model}, {"step", global_step}, {"data", data}});
  const std::optional<std::string> latest = LatestGoodCheckpoint(dir);
  CKFLOW_ASSIGN_OR_RETURN(LoadStatus status, checkpoint.Restore(latest));

  Output loss = losses::MeanSquaredError(root, y, (*model)(root, x));
  Output train_op = optimizer->Minimize(root, loss, {}, global_step);
  if (latest) CKFLOW_RETURN_IF_ERROR(status.AssertConsumed());  // everything matched
  CKFLOW_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::Create(root.graph()));
  CKFLOW_RETURN_IF_ERROR(status.InitializeOrRestore(*session));
  CKFLOW_ASSIGN_OR_RETURN(std::vector<Tensor> start, session->Run({}, {global_step->value()}));
  const int64_t first = start[0].scalar<int64_t>();
  std::printf(latest ? "restored %s at step %lld\n" : "%sno checkpoint: initialized at step %lld\n",
              latest ? latest->c_str() : "", static_cast<long long>(first));

  // Saves are asynchronous: Save returns once the variables are copied, and
  // the files are written while the next steps train.
  CKFLOW_ASSIGN_OR_RETURN(
      auto manager, CheckpointManager::Create(checkpoint, dir,
                                              {.max_to_keep = 3, .save_options = {.async = true}}));
  // SIGTERM (the machine is being taken away): the step finishes, is saved
  // as ckpt-<step>, and the program exits with 42, TensorFlow's restart code.
  CKFLOW_ASSIGN_OR_RETURN(
      auto preemption,
      PreemptionHandler::Create(checkpoint, *manager, {.exit_fn = examples::ReportAndExit}));
  std::printf("on SIGTERM: save at the step reached, exit %d\n", preemption->options().exit_code);
  std::fflush(stdout);
  ProgressBar progress(steps);
  float last_loss = 0;
  for (int64_t step = 1; step <= steps; ++step) {
    CKFLOW_ASSIGN_OR_RETURN(std::vector<Tensor> batch, data->Next(session->resources()));
    if (print_batches) {
      std::printf("batch %lld %016llx\n", static_cast<long long>(first + step),
                  static_cast<unsigned long long>(Digest(batch)));
    }
    CKFLOW_ASSIGN_OR_RETURN(std::vector<Tensor> out,
                            session->Run({{x, batch[0]}, {y, batch[1]}}, {loss}, {train_op}));
    last_loss = out[0].scalar<float>();
    progress.Update(step, last_loss);
    CKFLOW_RETURN_IF_ERROR(preemption->SaveIfPreempted(*session, first + step).status());
    if (step % save_every == 0 || step == steps) {
      CKFLOW_RETURN_IF_ERROR(manager->Save(*session).status());
    }
  }
  CKFLOW_RETURN_IF_ERROR(checkpoint.Sync());  // the last save is complete
  CKFLOW_ASSIGN_OR_RETURN(
      std::vector<Tensor> done,
      session->Run({}, {global_step->value(), checkpoint.save_counter()->value()}));
  std::printf("global step %lld, loss %.6f, saved %s (save_counter %lld)\n",
              static_cast<long long>(done[0].scalar<int64_t>()), last_loss,
              manager->latest_checkpoint()->c_str(),
              static_cast<long long>(done[1].scalar<int64_t>()));
  return OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Trains TensorFlow's Regress example model with Adam on synthetic data."};
  int64_t steps = 2000;
  std::string dir = "runs/regress";
  app.add_option("--steps", steps, "training steps")->check(CLI::PositiveNumber);
  int64_t save_every = 500;
  app.add_option("--dir", dir, "checkpoint directory: restored from if it has one, saved to");
  app.add_option("--save-every", save_every, "steps between checkpoints")
      ->check(CLI::PositiveNumber);
  bool print_batches = false;
  app.add_flag("--print-batches", print_batches,
               "print each step's global step and a digest of its batch");
  CLI11_PARSE(app, argc, argv);

  ckflow::Status status = Train(steps, dir, save_every, print_batches);
  if (!status.ok()) {
    std::fprintf(stderr, "regress: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
