// The Regress example (regress.cc) trained data-parallel under MPI:
//
//   mpirun -np 4 distributed_train [--steps N] [--dir DIR] [--save-every K]
//
// Every rank holds a full replica of the model and trains on its own
// batches; after each step's gradients are computed, MPI_Allreduce sums
// them and every rank applies the average, so the replicas stay equal bit
// for bit. Every K steps the ranks save through a CheckpointManager as one
// WorkerGroup: each rank writes the part of the variables (and Adam's
// slots) the placement gives it, rank 0 merges the parts into one
// checkpoint. Since the training is data-parallel, a restore reads every
// value on every rank (GroupOptions::restore_owned_only = false). Run it
// again with another -np: it resumes from the latest checkpoint, whatever
// number of ranks wrote it. SIGTERM to any one rank (a node reclaimed) makes
// every rank save the same step as ckpt-<step> and the job exit with 42
// (PreemptionHandler); the next job resumes there.
#include <mpi.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_management.h"
#include "checkpoint/preemption.h"
#include "distributed/worker_group.h"
#include "examples/preempted.h"
#include "examples/regress_model.h"
#include "ops/array_ops.h"
#include "ops/layers.h"
#include "ops/losses.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"
#include "ops/optimizers.h"
#include "ops/variables.h"
#include "runtime/session.h"

namespace {

using namespace ckflow;  // NOLINT: an example reads better without prefixes

using examples::Regress;

// y = 2 x0 - x1 + 0.5 x2 x3 + noise; each rank draws its own stream.
std::vector<Feed> NextBatch(std::mt19937& rng, int64_t batch_size, Output x, Output y) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::normal_distribution<float> noise(0.0f, 0.01f);
  Tensor xs(DT_FLOAT, TensorShape({batch_size, 4}));
  Tensor ys(DT_FLOAT, TensorShape({batch_size, 1}));
  for (int64_t i = 0; i < batch_size; ++i) {
    float* v = &xs.flat<float>()[4 * i];
    for (int j = 0; j < 4; ++j) v[j] = uniform(rng);
    ys.flat<float>()[i] = 2 * v[0] - v[1] + 0.5f * v[2] * v[3] + noise(rng);
  }
  return {{x, xs}, {y, ys}};
}

Status Train(WorkerGroup& workers, int64_t steps, const std::string& dir, int64_t save_every) {
  Scope root = Scope::NewRootScope();
  root.graph().set_seed(1);  // the same initial values on every rank
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, {.shape = {-1, 4}});
  Output y = ops::Placeholder(root.WithOpName("y"), DT_FLOAT, {.shape = {-1, 1}});
  auto model = std::make_shared<Regress>();
  auto optimizer = Adam::Make({.learning_rate = 0.01f});
  auto global_step =
      Variable::Create(root, "global_step", ops::Const<int64_t>(root, 0), {.trainable = false});

  CheckpointOptions options;
  options.group = {.group = &workers, .restore_owned_only = false};
  Checkpoint checkpoint(root, {{"optimizer", optimizer}, {"model", model}, {"step", global_step}},
                        options);
  const std::optional<std::string> latest = LatestCheckpoint(dir);
  CKFLOW_ASSIGN_OR_RETURN(LoadStatus status, checkpoint.Restore(latest));

  // The gradients go out of the session, are averaged over the ranks, and
  // come back through placeholders into the update.
  Output loss = losses::MeanSquaredError(root, y, (*model)(root, x));
  std::vector<GradAndVar> grads = optimizer->ComputeGradients(root, loss);
  std::vector<Output> grad_outputs;
  std::vector<GradAndVar> averaged;
  for (const GradAndVar& g : grads) {
    grad_outputs.push_back(g.grad);
    averaged.push_back(
        {ops::Placeholder(root, DT_FLOAT, {.shape = g.variable->shape()}), g.variable});
  }
  Output apply = optimizer->ApplyGradients(root, averaged, global_step);
  if (latest) CKFLOW_RETURN_IF_ERROR(status.AssertConsumed());
  CKFLOW_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::Create(root.graph()));
  CKFLOW_RETURN_IF_ERROR(status.InitializeOrRestore(*session));
  CKFLOW_ASSIGN_OR_RETURN(std::vector<Tensor> start, session->Run({}, {global_step->value()}));
  const int64_t first = start[0].scalar<int64_t>();
  if (workers.rank() == 0) {
    std::printf(latest ? "%d ranks: restored %s at step %lld\n"
                       : "%d ranks: %sno checkpoint, initialized at step %lld\n",
                workers.size(), latest ? latest->c_str() : "", static_cast<long long>(first));
  }

  CKFLOW_ASSIGN_OR_RETURN(auto manager,
                          CheckpointManager::Create(checkpoint, dir, {.max_to_keep = 3}));
  // SIGTERM to any rank (a node being taken away): the ranks agree, without
  // waiting for each other, to save after the same step, save it together
  // as ckpt-<step>, and exit with 42, TensorFlow's restart code.
  PreemptionOptions preemption_options{.group = &workers};
  preemption_options.exit_fn = [&workers](const PreemptionSave& save) {
    if (workers.rank() == 0) examples::Report(save);
    // Rank 0's line goes out before a rank's exit ends the job.
    workers.Barrier().IgnoreError();
    std::exit(save.exit_code);
  };
  CKFLOW_ASSIGN_OR_RETURN(auto preemption,
                          PreemptionHandler::Create(checkpoint, *manager, preemption_options));
  std::printf("rank %d (pid %d): on SIGTERM: save at the step reached, exit %d\n", workers.rank(),
              static_cast<int>(getpid()), preemption_options.exit_code);
  std::fflush(stdout);
  std::mt19937 rng(static_cast<uint32_t>(first * 1000 + workers.rank()));
  float mean_loss = 0;
  for (int64_t step = 1; step <= steps; ++step) {
    std::vector<Output> fetches = grad_outputs;
    fetches.push_back(loss);
    CKFLOW_ASSIGN_OR_RETURN(std::vector<Tensor> out,
                            session->Run(NextBatch(rng, 64, x, y), fetches, {}));
    std::vector<Feed> feeds;
    for (size_t i = 0; i < grads.size(); ++i) {
      Tensor& g = out[i];
      MPI_Allreduce(MPI_IN_PLACE, g.raw_data(), static_cast<int>(g.NumElements()), MPI_FLOAT,
                    MPI_SUM, MPI_COMM_WORLD);
      for (float& v : g.flat<float>()) v /= static_cast<float>(workers.size());
      feeds.emplace_back(averaged[i].grad, g);
    }
    float step_loss = out.back().scalar<float>();
    MPI_Allreduce(&step_loss, &mean_loss, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    mean_loss /= static_cast<float>(workers.size());
    CKFLOW_RETURN_IF_ERROR(session->Run(feeds, {}, {apply}).status());
    if (step % save_every == 0 || step == steps) {
      CKFLOW_ASSIGN_OR_RETURN(std::string saved, manager->Save(*session));
      if (workers.rank() == 0) {
        std::printf("step %lld  loss %.6f  saved %s\n", static_cast<long long>(first + step),
                    mean_loss, saved.c_str());
      }
    }
    CKFLOW_RETURN_IF_ERROR(preemption->SaveIfPreempted(*session, first + step).status());
  }
  return OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Trains the Regress model data-parallel under mpirun, checkpointing as a group."};
  int64_t steps = 1000;
  std::string dir = "runs/distributed_train";
  int64_t save_every = 250;
  app.add_option("--steps", steps, "training steps")->check(CLI::PositiveNumber);
  app.add_option("--dir", dir, "checkpoint directory (shared by the ranks)");
  app.add_option("--save-every", save_every, "steps between checkpoints")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  ckflow::StatusOr<std::unique_ptr<ckflow::WorkerGroup>> workers = ckflow::WorkerGroup::World();
  ckflow::Status status = workers.status();
  if (status.ok()) status = Train(**workers, steps, dir, save_every);
  if (!status.ok()) {
    std::fprintf(stderr, "distributed_train: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
