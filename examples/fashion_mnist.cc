// A small CNN trained on Fashion-MNIST in a session loop, checkpointed as it
// goes, evaluated on the test set and saved as Keras weights:
//
//   fashion_mnist [--epochs N] [--dir D] [--threads T] [--batch B] [--data DIR]
//                 [--save-every K] [--max-steps S] [--seed S]
//
// The model (examples/fashion_mnist_model.h) is two blocks of Conv2D,
// BatchNormalization, ReLU and MaxPooling2D, then Flatten, Dropout(0.25),
// Dense(128, relu) and Dense(10), built from ckflow's Keras layers; the loss
// is the sparse softmax cross-entropy of the logits, minimized by Adam (TF1's
// AdamOptimizer, learning rate 1e-3). Pixels are scaled to [0, 1] by / 255,
// nothing else. The model is called twice: with training=true for the train
// step (batch statistics, moving statistics updated, dropout) and with
// training=false to evaluate (moving statistics, no dropout); both calls
// share the variables.
//
// Each epoch visits the training images in the order ShuffledIndices(n,
// seed, epoch) gives (data/shuffle.h), B at a time (a last partial batch is
// left out), through a DatasetIterator (ops/dataset_iterator.h). Every K
// steps (and at the end) a CheckpointManager saves asynchronously: the
// step, the model (its moving statistics included), Adam's slots and the
// iterator's place in the data. Run it
// again with the same --dir and it restores the latest checkpoint and goes
// on where it stopped, with the batches the first run would have used; once
// it has trained N epochs it only evaluates. At the end it prints the
// accuracy of the inference path on the 10,000 test images, saves the model
// with SaveWeights to D/weights/model (tf_keras' model.load_weights reads
// it; a directory of its own because SaveWeights, like Keras' save_weights,
// points its directory's `checkpoint` state file at what it wrote, and D's
// must keep naming the manager's checkpoints), and its last line is "test
// accuracy 0.xxxx".
//
// --data is a directory with the four files of the data set
// (train-images-idx3-ubyte.gz, ...), by default where Debian's
// dataset-fashion-mnist installs them. --threads sets both of the session's
// thread counts (0: every core). --max-steps stops this run after that
// many steps (the tests' short runs).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_management.h"
#include "checkpoint/weights.h"
#include "examples/fashion_mnist_data.h"
#include "examples/fashion_mnist_model.h"
#include "examples/progress_bar.h"
#include "ops/array_ops.h"
#include "ops/dataset_iterator.h"
#include "ops/losses.h"
#include "ops/math_ops.h"
#include "ops/optimizers.h"
#include "ops/variables.h"
#include "runtime/session.h"

namespace {

using namespace ckflow;  // NOLINT: an example reads better without prefixes

struct Options {
  int64_t epochs = 2;
  std::string dir = "runs/fashion_mnist";
  int threads = 0;
  int64_t batch = 64;
  std::string data = examples::kFashionMnistDir;
  int64_t save_every = 500;
  int64_t max_steps = 0;  // 0: no limit
  uint64_t seed = 1;
};

Status Train(const Options& o) {
  CKFLOW_ASSIGN_OR_RETURN(examples::LabeledImages train,
                          examples::ReadLabeledImages(o.data, "train"));
  CKFLOW_ASSIGN_OR_RETURN(examples::LabeledImages test,
                          examples::ReadLabeledImages(o.data, "t10k"));
  const int64_t steps_per_epoch = train.size() / o.batch;
  if (steps_per_epoch == 0) {
    return InvalidArgumentError("--batch ", o.batch, " is more than the ", train.size(),
                                " training images");
  }

  Scope root = Scope::NewRootScope();
  root.graph().set_seed(static_cast<int64_t>(o.seed));
  Output images = ops::Placeholder(root.WithOpName("images"), DT_FLOAT,
                                   {.shape = {-1, examples::kImageSide, examples::kImageSide, 1}});
  Output labels = ops::Placeholder(root.WithOpName("labels"), DT_INT32, {.shape = {-1}});
  auto model = examples::FashionMnistModel();
  auto optimizer = Adam::Make({.learning_rate = 1e-3f});
  auto global_step =
      Variable::Create(root, "global_step", ops::Const<int64_t>(root, 0), {.trainable = false});
  CKFLOW_ASSIGN_OR_RETURN(
      std::shared_ptr<DatasetIterator> data,
      DatasetIterator::Create(
          root, "data", train.size(),
          {.batch_size = o.batch, .shuffle = true, .seed = o.seed, .drop_remainder = true}));

  // Restored before the model is built: the layers' variables (moving
  // statistics too) and Adam's slots are restored as they are created below.
  Checkpoint checkpoint(
      root, {{"optimizer", optimizer}, {"model", model}, {"step", global_step}, {"data", data}});
  const std::optional<std::string> latest = LatestCheckpoint(o.dir);
  CKFLOW_ASSIGN_OR_RETURN(LoadStatus status, checkpoint.Restore(latest));

  Output logits = (*model)(root, images, /*training=*/true);
  Output loss = losses::SparseSoftmaxCrossEntropyWithLogits(root, labels, logits);
  Output train_op = optimizer->Minimize(root, loss, {}, global_step);
  Output predictions = ops::ArgMax(root, (*model)(root, images, /*training=*/false),
                                   ops::Const<int32_t>(root, 1), DT_INT32);
  if (latest) CKFLOW_RETURN_IF_ERROR(status.AssertConsumed());
  CKFLOW_ASSIGN_OR_RETURN(
      std::unique_ptr<Session> session,
      Session::Create(root.graph(), {.inter_op_parallelism_threads = o.threads,
                                     .intra_op_parallelism_threads = o.threads}));
  CKFLOW_RETURN_IF_ERROR(status.InitializeOrRestore(*session));
  CKFLOW_ASSIGN_OR_RETURN(std::vector<Tensor> start, session->Run({}, {global_step->value()}));
  const int64_t first = start[0].scalar<int64_t>();
  std::printf(latest ? "restored %s at step %lld\n" : "%sno checkpoint: initialized at step %lld\n",
              latest ? latest->c_str() : "", static_cast<long long>(first));

  const int64_t end =
      std::min(o.epochs * steps_per_epoch, o.max_steps > 0 ? first + o.max_steps : INT64_MAX);
  CKFLOW_ASSIGN_OR_RETURN(
      auto manager, CheckpointManager::Create(checkpoint, o.dir,
                                              {.max_to_keep = 3, .save_options = {.async = true}}));
  examples::ProgressBar progress(end, o.batch, "images");
  for (int64_t step = first; step < end; ++step) {
    const int64_t epoch = step / steps_per_epoch;
    CKFLOW_ASSIGN_OR_RETURN(std::vector<int64_t> indices, data->NextIndices(session->resources()));
    examples::Batch batch = examples::Gather(train, indices);
    CKFLOW_ASSIGN_OR_RETURN(
        std::vector<Tensor> out,
        session->Run({{images, batch.images}, {labels, batch.labels}}, {loss}, {train_op}));
    progress.Update(step + 1, out[0].scalar<float>(),
                    "epoch " + std::to_string(epoch + 1) + "/" + std::to_string(o.epochs) + " ");
    if ((step + 1) % o.save_every == 0 || step + 1 == end) {
      CKFLOW_RETURN_IF_ERROR(manager->Save(*session).status());
    }
  }
  CKFLOW_RETURN_IF_ERROR(checkpoint.Sync());  // the last save is complete
  if (end > first) {
    std::printf("trained to step %lld, saved %s\n", static_cast<long long>(end),
                manager->latest_checkpoint()->c_str());
  }

  CKFLOW_ASSIGN_OR_RETURN(double accuracy, examples::Accuracy(*session, images, predictions, test));
  const std::string weights = o.dir + "/weights/model";
  CKFLOW_RETURN_IF_ERROR(SaveWeights(model, weights, *session));
  std::printf("saved the model's weights to %s\n", weights.c_str());
  std::printf("test accuracy %.4f\n", accuracy);
  return OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Trains a CNN on Fashion-MNIST, checkpointing; a second run resumes."};
  Options o;
  app.add_option("--epochs", o.epochs, "epochs to train in all")->check(CLI::NonNegativeNumber);
  app.add_option("--dir", o.dir, "checkpoint directory: restored from if it has one, saved to");
  app.add_option("--threads", o.threads, "the session's threads (0: every core)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--batch", o.batch, "images per step")->check(CLI::PositiveNumber);
  app.add_option("--data", o.data, "directory of the data set's four IDX files");
  app.add_option("--save-every", o.save_every, "steps between checkpoints")
      ->check(CLI::PositiveNumber);
  app.add_option("--max-steps", o.max_steps, "stop this run after this many steps (0: no limit)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--seed", o.seed, "the graph's random seed and the shuffle's");
  CLI11_PARSE(app, argc, argv);

  ckflow::Status status = Train(o);
  if (!status.ok()) {
    std::fprintf(stderr, "fashion_mnist: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
