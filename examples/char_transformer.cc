// A character-level transformer trained on real text in a session loop,
// checkpointed asynchronously as it goes, resumed by a second run, and
// evaluated on held-out text:
//
//   char_transformer [--steps N] [--dir D] [--threads T] [--batch B]
//                    [--context C] [--blocks K] [--eval-every E]
//                    [--save-every S] [--seed S] [--text FILE ...]
//
// The text: the licences Debian installs with base-files on every system
// (/usr/share/common-licenses/*, the regular files in name order,
// concatenated; about 260 KB of English legal prose), read as bytes: the
// vocabulary is the 256 byte values. The last tenth is held out for
// validation. --text names other files instead.
//
// The model (examples/char_transformer_model.h): token and position
// embeddings of d_model 128, K pre-norm blocks (LayerNormalization,
// causal MultiHeadAttention with 4 heads, LayerNormalization, Dense 512 with
// GELU, Dense 128, each around a residual sum), a final LayerNormalization
// and a Dense layer to the 256 logits of the next byte at every position.
// The loss is the mean cross-entropy of every position of B random windows
// of C + 1 bytes (in nats per character), minimized by Adam (learning rate
// 1e-3). The windows of step s are drawn from a generator seeded with
// (seed, s), so a resumed run draws the windows the first run would have.
//
// Every E steps (and at the end) it prints "validation loss X.XXXX": the
// mean loss over 32 fixed windows of the held-out text, with the
// inference path. It first prints the unigram entropy of the training text
// (the loss of predicting each byte by its frequency alone): a model that
// learns anything from context beats it. Every S steps (and at the end) a
// CheckpointManager saves asynchronously (step, model, Adam's slots);
// running again with the same --dir restores the latest and goes on to N.
// At the end it prints a sampled continuation of a validation prompt, saves
// the model with SaveWeights to D/weights/model (tf_keras reads it) and
// prints the validation loss last.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_management.h"
#include "checkpoint/weights.h"
#include "examples/char_transformer_model.h"
#include "examples/progress_bar.h"
#include "ops/array_ops.h"
#include "ops/losses.h"
#include "ops/math_ops.h"
#include "ops/optimizers.h"
#include "ops/variables.h"
#include "runtime/session.h"

namespace {

using namespace ckflow;  // NOLINT: an example reads better without prefixes

constexpr char kLicences[] = "/usr/share/common-licenses";
constexpr int64_t kValidationWindows = 32;

struct Options {
  int64_t steps = 1000;
  std::string dir = "runs/char_transformer";
  int threads = 0;
  int64_t batch = 32;
  int64_t context = 128;
  int64_t blocks = 2;
  int64_t eval_every = 200;
  int64_t save_every = 100;
  uint64_t seed = 1;
  std::vector<std::string> text;  // default: the licences
};

StatusOr<std::string> ReadText(std::vector<std::string> files) {
  if (files.empty()) {
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator(kLicences, error)) {
      if (entry.is_regular_file() && !entry.is_symlink()) files.push_back(entry.path().string());
    }
    if (error) return NotFoundError(kLicences, ": ", error.message());
    std::sort(files.begin(), files.end());
  }
  std::string text;
  for (const std::string& file : files) {
    std::ifstream in(file, std::ios::binary);
    if (!in) return NotFoundError(file, ": cannot be read");
    text.append(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return text;
}

// Windows of context + 1 bytes starting at `starts`: inputs are the first
// `context`, labels the last `context` (each position's next byte).
void FillWindows(const std::string& text, const std::vector<int64_t>& starts, int64_t context,
                 Tensor* ids, Tensor* labels) {
  *ids = Tensor(DT_INT32, TensorShape({static_cast<int64_t>(starts.size()), context}));
  *labels = Tensor(DT_INT32, TensorShape({static_cast<int64_t>(starts.size()) * context}));
  auto in = ids->flat<int32_t>();
  auto out = labels->flat<int32_t>();
  for (size_t w = 0; w < starts.size(); ++w) {
    for (int64_t t = 0; t < context; ++t) {
      in[w * context + t] = static_cast<unsigned char>(text[starts[w] + t]);
      out[w * context + t] = static_cast<unsigned char>(text[starts[w] + t + 1]);
    }
  }
}

// -sum p log p of the bytes of `text`, in nats.
double UnigramEntropy(const std::string& text) {
  std::vector<double> count(256, 0);
  for (char c : text) ++count[static_cast<unsigned char>(c)];
  double h = 0;
  for (double n : count) {
    if (n > 0) h -= n / text.size() * std::log(n / text.size());
  }
  return h;
}

Status Train(const Options& o) {
  CKFLOW_ASSIGN_OR_RETURN(std::string text, ReadText(o.text));
  const int64_t split = static_cast<int64_t>(text.size()) * 9 / 10;
  const std::string train = text.substr(0, split), validation = text.substr(split);
  if (static_cast<int64_t>(validation.size()) <= o.context + 1) {
    return InvalidArgumentError("the text (", text.size(), " bytes) is too short for --context ",
                                o.context);
  }
  std::printf("text: %zu bytes for training, %zu held out; unigram entropy %.4f nats/char\n",
              train.size(), validation.size(), UnigramEntropy(train));

  Scope root = Scope::NewRootScope();
  root.graph().set_seed(static_cast<int64_t>(o.seed));
  Output ids = ops::Placeholder(root.WithOpName("ids"), DT_INT32, {.shape = {-1, o.context}});
  Output labels = ops::Placeholder(root.WithOpName("labels"), DT_INT32, {.shape = {-1}});
  auto model = std::make_shared<examples::CharTransformer>(
      examples::TransformerConfig{.context = o.context, .blocks = o.blocks});
  auto optimizer = Adam::Make({.learning_rate = 1e-3f});
  auto global_step =
      Variable::Create(root, "global_step", ops::Const<int64_t>(root, 0), {.trainable = false});
  Checkpoint checkpoint(root, {{"optimizer", optimizer}, {"model", model}, {"step", global_step}});
  const std::optional<std::string> latest = LatestCheckpoint(o.dir);
  CKFLOW_ASSIGN_OR_RETURN(LoadStatus status, checkpoint.Restore(latest));

  // Every position of every window is a prediction: logits [batch * C, 256].
  const Tensor flat = Tensor::FromVector<int64_t>({-1, model->config().vocab});
  Output logits = (*model)(root, ids, /*training=*/true);
  Output loss =
      losses::SparseSoftmaxCrossEntropyWithLogits(root, labels, ops::Reshape(root, logits, flat));
  Output train_op = optimizer->Minimize(root, loss, {}, global_step);
  Output eval_logits = (*model)(root, ids, /*training=*/false);
  Output eval_loss = losses::SparseSoftmaxCrossEntropyWithLogits(
      root, labels, ops::Reshape(root, eval_logits, flat));
  if (latest) CKFLOW_RETURN_IF_ERROR(status.AssertConsumed());
  CKFLOW_RETURN_IF_ERROR(root.status());
  CKFLOW_ASSIGN_OR_RETURN(
      std::unique_ptr<Session> session,
      Session::Create(root.graph(), {.inter_op_parallelism_threads = o.threads,
                                     .intra_op_parallelism_threads = o.threads}));
  CKFLOW_RETURN_IF_ERROR(status.InitializeOrRestore(*session));
  CKFLOW_ASSIGN_OR_RETURN(std::vector<Tensor> start, session->Run({}, {global_step->value()}));
  const int64_t first = start[0].scalar<int64_t>();
  std::printf(latest ? "restored %s at step %lld\n" : "%sno checkpoint: initialized at step %lld\n",
              latest ? latest->c_str() : "", static_cast<long long>(first));

  // Fixed validation windows, evenly spread over the held-out text.
  std::vector<int64_t> eval_starts;
  const int64_t span = static_cast<int64_t>(validation.size()) - o.context - 1;
  for (int64_t w = 0; w < kValidationWindows; ++w)
    eval_starts.push_back(span * w / kValidationWindows);
  Tensor eval_ids, eval_labels;
  FillWindows(validation, eval_starts, o.context, &eval_ids, &eval_labels);
  auto evaluate = [&]() -> Status {
    CKFLOW_ASSIGN_OR_RETURN(std::vector<Tensor> out,
                            session->Run({{ids, eval_ids}, {labels, eval_labels}}, {eval_loss}));
    std::printf("validation loss %.4f\n", out[0].scalar<float>());
    std::fflush(stdout);  // seen as it comes when piped (tee, a log file)
    return OkStatus();
  };

  CKFLOW_ASSIGN_OR_RETURN(
      auto manager, CheckpointManager::Create(checkpoint, o.dir,
                                              {.max_to_keep = 3, .save_options = {.async = true}}));
  examples::ProgressBar progress(o.steps, o.batch * o.context, "chars");
  const int64_t train_span = static_cast<int64_t>(train.size()) - o.context - 1;
  for (int64_t step = first; step < o.steps; ++step) {
    std::mt19937_64 rng(o.seed * 1000003 + static_cast<uint64_t>(step));
    std::vector<int64_t> starts(o.batch);
    for (int64_t& s : starts) s = static_cast<int64_t>(rng() % static_cast<uint64_t>(train_span));
    Tensor batch_ids, batch_labels;
    FillWindows(train, starts, o.context, &batch_ids, &batch_labels);
    CKFLOW_ASSIGN_OR_RETURN(
        std::vector<Tensor> out,
        session->Run({{ids, batch_ids}, {labels, batch_labels}}, {loss}, {train_op}));
    progress.Update(step + 1, out[0].scalar<float>());
    if ((step + 1) % o.save_every == 0 || step + 1 == o.steps) {
      CKFLOW_RETURN_IF_ERROR(manager->Save(*session).status());
    }
    if ((step + 1) % o.eval_every == 0 && step + 1 != o.steps) CKFLOW_RETURN_IF_ERROR(evaluate());
  }
  CKFLOW_RETURN_IF_ERROR(checkpoint.Sync());  // the last save is complete
  if (o.steps > first) {
    std::printf("trained to step %lld, saved %s\n", static_cast<long long>(o.steps),
                manager->latest_checkpoint()->c_str());
  }

  // A continuation of the first validation window, sampled byte by byte
  // from the model's distribution of the next byte.
  std::string sample = validation.substr(0, o.context);
  std::mt19937_64 rng(o.seed);
  Tensor window(DT_INT32, TensorShape({1, o.context}));
  for (int i = 0; i < 200; ++i) {
    for (int64_t t = 0; t < o.context; ++t) {
      window.flat<int32_t>()[t] = static_cast<unsigned char>(sample[sample.size() - o.context + t]);
    }
    CKFLOW_ASSIGN_OR_RETURN(std::vector<Tensor> out, session->Run({{ids, window}}, {eval_logits}));
    auto last = out[0].flat<float>().subspan((o.context - 1) * model->config().vocab);
    const float top = *std::max_element(last.begin(), last.end());
    std::vector<double> weights;
    for (float l : last) weights.push_back(std::exp(static_cast<double>(l - top)));
    sample.push_back(
        static_cast<char>(std::discrete_distribution<int>(weights.begin(), weights.end())(rng)));
  }
  const int64_t shown = std::min<int64_t>(60, o.context);  // of the prompt
  std::string printed = sample.substr(o.context - shown);
  printed.insert(shown, "|");
  // Bytes a terminal would not show as text (control bytes, pieces of
  // multi-byte characters the model made up) print as '?'.
  for (char& c : printed) {
    const auto byte = static_cast<unsigned char>(c);
    if ((byte < 32 && c != '\n') || byte >= 127) c = '?';
  }
  std::printf("sample: ...%s\n", printed.c_str());
  // tf_keras' model of the same layers reads this (model.load_weights); a
  // directory of its own, as the state file of D names the manager's
  // checkpoints.
  const std::string weights = o.dir + "/weights/model";
  CKFLOW_RETURN_IF_ERROR(SaveWeights(model, weights, *session));
  std::printf("saved the model's weights to %s\n", weights.c_str());
  return evaluate();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Trains a character-level transformer on the licences Debian installs."};
  Options o;
  app.add_option("--steps", o.steps, "train steps in all")->check(CLI::NonNegativeNumber);
  app.add_option("--dir", o.dir, "checkpoint directory: restored from if it has one, saved to");
  app.add_option("--threads", o.threads, "the session's threads (0: every core)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--batch", o.batch, "windows per step")->check(CLI::PositiveNumber);
  app.add_option("--context", o.context, "bytes per window")->check(CLI::PositiveNumber);
  app.add_option("--blocks", o.blocks, "transformer blocks")->check(CLI::PositiveNumber);
  app.add_option("--eval-every", o.eval_every, "steps between validation losses")
      ->check(CLI::PositiveNumber);
  app.add_option("--save-every", o.save_every, "steps between checkpoints")
      ->check(CLI::PositiveNumber);
  app.add_option("--seed", o.seed, "the graph's random seed and the windows'");
  app.add_option("--text", o.text, "files to train on instead of Debian's licences");
  CLI11_PARSE(app, argc, argv);

  ckflow::Status status = Train(o);
  if (!status.ok()) {
    std::fprintf(stderr, "char_transformer: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
