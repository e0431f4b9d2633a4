// A recommender in the wide-and-deep style whose embedding table is the
// largest variable anyone checkpoints: 2^21 rows of 128 floats (1 GiB),
// partitioned, looked up by Zipf-distributed ids, trained with sparse
// updates and saved asynchronously while it trains:
//
//   embedding_recsys [--steps N] [--dir D] [--partitions P] [--rows R]
//                    [--threads T] [--batch B] [--save-every S]
//                    [--eval-every E] [--seed S]
//
// The data: synthetic clicks with a planted signal. An example is 8 ids
// (one per field), each drawn from a Zipf distribution over the R rows
// (rank k with probability about 1 / k, the ranks scattered over the table
// by a bijection, so every part holds hot rows). Each row has a hidden
// preference, +1 or -1; an example is clicked with probability
// sigmoid(0.75 * the sum of its rows' preferences). A model that learns
// the rows' embeddings can predict clicks; one that does not stays at the
// loss of the base rate. The examples of step s come from a generator
// seeded with (seed, s), so a resumed run sees what the first would have.
//
// The model: the 8 rows' embeddings (EmbeddingLookup on a
// PartitionedVariable of P parts: one ResourceGather per part), joined
// into one vector of 8 x 128, a Dense layer of 64 with ReLU and a Dense
// layer to one logit; the loss is sigmoid cross-entropy. The table is
// trained by Adagrad (sparse: only the rows looked up move, and only their
// accumulators), the dense layers by Adam.
//
// Every S steps (and at the end) a CheckpointManager saves asynchronously:
// the table and its accumulator as slices of one tensor each, the dense
// layers, Adam's state and the step. Running again with the same --dir
// restores the latest checkpoint, into --partitions parts whatever the
// saving run had, and trains on to N: the losses are those of a run that
// never stopped. At the end it prints the validation loss (4096 fixed
// examples), the loop's step times (p50, p99) and the process' peak
// resident memory beside the table's size.
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_management.h"
#include "examples/progress_bar.h"
#include "ops/array_ops.h"
#include "ops/initializers.h"
#include "ops/layers.h"
#include "ops/losses.h"
#include "ops/nn_ops.h"
#include "ops/optimizers.h"
#include "ops/partitioned_variables.h"
#include "ops/variables.h"
#include "runtime/session.h"

namespace {

using namespace ckflow;  // NOLINT: an example reads better without prefixes

constexpr int64_t kFields = 8;
constexpr int64_t kDim = 128;
constexpr int64_t kValidationExamples = 4096;

struct Options {
  int64_t steps = 1000;
  std::string dir = "runs/embedding_recsys";
  int partitions = 8;
  int64_t rows = int64_t{1} << 21;
  int threads = 0;
  int64_t batch = 256;
  int64_t save_every = 100;  // 0: only at the end
  int64_t eval_every = 250;
  uint64_t seed = 1;
};

uint64_t Mix(uint64_t x) {  // splitmix64's finalizer: a well-spread hash
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Clicks with a planted signal (see the top of the file).
class Clicks {
 public:
  explicit Clicks(int64_t rows) : rows_(rows) {
    // The ranks are scattered by k -> k * stride mod rows, a bijection when
    // stride and rows share no factor.
    stride_ = 2654435761 % rows;
    while (stride_ == 0 || std::gcd(stride_, rows) != 1) ++stride_;
  }

  // `count` examples drawn from `rng`: ids [count, kFields], labels [count, 1].
  void Draw(std::mt19937_64& rng, int64_t count, Tensor* ids, Tensor* labels) const {
    *ids = Tensor(DT_INT64, TensorShape({count, kFields}));
    *labels = Tensor(DT_FLOAT, TensorShape({count, 1}));
    std::uniform_real_distribution<double> uniform(0, 1);
    const double log_span = std::log(static_cast<double>(rows_) + 1);
    for (int64_t e = 0; e < count; ++e) {
      int preference = 0;
      for (int64_t f = 0; f < kFields; ++f) {
        // Rank k (0-based) with density about 1 / (k + 1).
        const auto rank = std::min<int64_t>(
            rows_ - 1, static_cast<int64_t>(std::exp(uniform(rng) * log_span)) - 1);
        // Below 2^62: rank and stride are below rows, at most 2^31.
        const int64_t id =
            static_cast<int64_t>(static_cast<uint64_t>(rank) * static_cast<uint64_t>(stride_) %
                                 static_cast<uint64_t>(rows_));
        ids->flat<int64_t>()[e * kFields + f] = id;
        preference += (Mix(static_cast<uint64_t>(id)) & 1) ? 1 : -1;
      }
      const double p = 1 / (1 + std::exp(-0.75 * preference));
      labels->flat<float>()[e] = uniform(rng) < p ? 1.0f : 0.0f;
    }
  }

 private:
  int64_t rows_;
  int64_t stride_;
};

double Percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[static_cast<size_t>(q * static_cast<double>(values.size() - 1))];
}

Status Train(const Options& o) {
  if (o.rows > (int64_t{1} << 31)) {
    return InvalidArgumentError("--rows ", o.rows, " is more than 2^31");
  }
  if (o.partitions > o.rows) {
    return InvalidArgumentError("--partitions ", o.partitions, " is more than --rows ", o.rows);
  }
  const Clicks clicks(o.rows);
  Scope root = Scope::NewRootScope();
  root.graph().set_seed(static_cast<int64_t>(o.seed));
  Output ids = ops::Placeholder(root.WithOpName("ids"), DT_INT64, {.shape = {-1, kFields}});
  Output labels = ops::Placeholder(root.WithOpName("labels"), DT_FLOAT, {.shape = {-1, 1}});
  auto table = PartitionedVariable::Create(root, "embedding", DT_FLOAT, {o.rows, kDim},
                                           initializers::RandomUniform(-0.05, 0.05),
                                           {.num_shards = o.partitions});
  CKFLOW_RETURN_IF_ERROR(root.status());
  auto hidden = Dense::Make(64, {.activation = ops::Relu, .name = "hidden"});
  auto output = Dense::Make(1, {.name = "logit"});
  auto table_optimizer = Adagrad::Make({.learning_rate = 0.05f});
  auto optimizer = Adam::Make({.learning_rate = 1e-3f});
  auto global_step =
      Variable::Create(root, "global_step", ops::Const<int64_t>(root, 0), {.trainable = false});
  Checkpoint checkpoint(root, {{"embedding", table},
                               {"hidden", hidden},
                               {"logit", output},
                               {"table_optimizer", table_optimizer},
                               {"optimizer", optimizer},
                               {"step", global_step}});
  // Restored before the layers and slots exist: each is restored as it is
  // made (the table's accumulator once every part has its own).
  const std::optional<std::string> latest = LatestCheckpoint(o.dir);
  CKFLOW_ASSIGN_OR_RETURN(LoadStatus status, checkpoint.Restore(latest));

  Output rows = EmbeddingLookup(root, *table, ids);  // [batch, 8, 128]
  Output joined = ops::Reshape(root, rows, Tensor::FromVector<int64_t>({-1, kFields * kDim}));
  Output logits = (*output)(root, (*hidden)(root, joined));
  Output loss = losses::SigmoidCrossEntropyWithLogits(root, labels, logits);
  // One gradient computation; each optimizer applies its share.
  std::vector<GradAndVar> grads = optimizer->ComputeGradients(root, loss);
  std::vector<GradAndVar> table_grads, dense_grads;
  for (GradAndVar& g : grads) {
    const auto& parts = table->parts();
    const bool in_table = std::find(parts.begin(), parts.end(), g.variable) != parts.end();
    (in_table ? table_grads : dense_grads).push_back(std::move(g));
  }
  Output train_op = ops::Group(root, {table_optimizer->ApplyGradients(root, table_grads),
                                      optimizer->ApplyGradients(root, dense_grads, global_step)});
  if (latest) CKFLOW_RETURN_IF_ERROR(status.AssertConsumed());
  CKFLOW_RETURN_IF_ERROR(root.status());
  CKFLOW_ASSIGN_OR_RETURN(
      std::unique_ptr<Session> session,
      Session::Create(root.graph(), {.inter_op_parallelism_threads = o.threads,
                                     .intra_op_parallelism_threads = o.threads}));
  CKFLOW_RETURN_IF_ERROR(status.InitializeOrRestore(*session));
  CKFLOW_ASSIGN_OR_RETURN(std::vector<Tensor> start, session->Run({}, {global_step->value()}));
  const int64_t first = start[0].scalar<int64_t>();
  const double table_mib = static_cast<double>(o.rows * kDim * 4) / (1 << 20);
  std::printf("table: %lld rows x %lld floats (%.0f MiB) in %d parts\n",
              static_cast<long long>(o.rows), static_cast<long long>(kDim), table_mib,
              o.partitions);
  std::printf(latest ? "restored %s at step %lld\n" : "%sno checkpoint: initialized at step %lld\n",
              latest ? latest->c_str() : "", static_cast<long long>(first));

  Tensor eval_ids, eval_labels;
  std::mt19937_64 eval_rng(Mix(o.seed) ^ 0xe7a1);
  clicks.Draw(eval_rng, kValidationExamples, &eval_ids, &eval_labels);
  auto evaluate = [&]() -> Status {
    CKFLOW_ASSIGN_OR_RETURN(std::vector<Tensor> out,
                            session->Run({{ids, eval_ids}, {labels, eval_labels}}, {loss}));
    std::printf("validation loss %.6f\n", out[0].scalar<float>());
    std::fflush(stdout);  // seen as it comes when piped (tee, a log file)
    return OkStatus();
  };
  if (first == 0) CKFLOW_RETURN_IF_ERROR(evaluate());

  CKFLOW_ASSIGN_OR_RETURN(
      auto manager, CheckpointManager::Create(checkpoint, o.dir,
                                              {.max_to_keep = 2, .save_options = {.async = true}}));
  examples::ProgressBar progress(o.steps, o.batch, "examples");
  std::vector<double> step_ms;
  for (int64_t step = first; step < o.steps; ++step) {
    std::mt19937_64 rng(o.seed * 1000003 + static_cast<uint64_t>(step));
    Tensor batch_ids, batch_labels;
    clicks.Draw(rng, o.batch, &batch_ids, &batch_labels);
    const auto began = std::chrono::steady_clock::now();
    CKFLOW_ASSIGN_OR_RETURN(
        std::vector<Tensor> out,
        session->Run({{ids, batch_ids}, {labels, batch_labels}}, {loss}, {train_op}));
    const bool save = (o.save_every > 0 && (step + 1) % o.save_every == 0) || step + 1 == o.steps;
    // An async save returns once its snapshot is taken; that pause is the
    // loop's, so it is in the step's time.
    if (save) CKFLOW_RETURN_IF_ERROR(manager->Save(*session).status());
    step_ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - began)
            .count());
    progress.Update(step + 1, out[0].scalar<float>());
    if ((step + 1) % o.eval_every == 0 && step + 1 != o.steps) CKFLOW_RETURN_IF_ERROR(evaluate());
  }
  CKFLOW_RETURN_IF_ERROR(checkpoint.Sync());  // the last save is complete
  if (o.steps > first) {
    std::printf("trained to step %lld, saved %s\n", static_cast<long long>(o.steps),
                manager->latest_checkpoint()->c_str());
    std::printf("step time p50 %.2f ms, p99 %.2f ms over %zu steps\n", Percentile(step_ms, 0.5),
                Percentile(step_ms, 0.99), step_ms.size());
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  std::printf("peak resident memory %.0f MiB (the table: %.0f MiB)\n",
              static_cast<double>(usage.ru_maxrss) / 1024, table_mib);
  return evaluate();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Trains a recommender with a partitioned 1 GiB embedding table on synthetic clicks."};
  Options o;
  app.add_option("--steps", o.steps, "train steps in all")->check(CLI::NonNegativeNumber);
  app.add_option("--dir", o.dir, "checkpoint directory: restored from if it has one, saved to");
  app.add_option("--partitions", o.partitions, "parts of the embedding table")
      ->check(CLI::PositiveNumber);
  app.add_option("--rows", o.rows, "rows of the embedding table (of 128 floats)")
      ->check(CLI::PositiveNumber);
  app.add_option("--threads", o.threads, "the session's threads (0: every core)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--batch", o.batch, "examples per step")->check(CLI::PositiveNumber);
  app.add_option("--save-every", o.save_every, "steps between checkpoints (0: only at the end)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--eval-every", o.eval_every, "steps between validation losses")
      ->check(CLI::PositiveNumber);
  app.add_option("--seed", o.seed, "the graph's random seed and the examples'");
  CLI11_PARSE(app, argc, argv);

  ckflow::Status status = Train(o);
  if (!status.ok()) {
    std::fprintf(stderr, "embedding_recsys: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
