// Keras' layers for sequences (tf_keras' layers/core/embedding.py,
// layers/normalization/layer_normalization.py, layers/attention/
// multi_head_attention.py), with Keras' variable names, shapes, creation
// order and defaults, so SaveWeights lines up with Keras' save_weights:
//
//   auto embed = Embedding::Make(vocab, 128);
//   auto norm = LayerNormalization::Make();
//   auto attention = MultiHeadAttention::Make(4, 32, {.use_causal_mask = true});
//   Output h = (*embed)(scope, ids);               // [batch, time, 128]
//   h = ops::Add(scope, h, (*attention)(scope, (*norm)(scope, h)));
//
// Dense (ops/layers.h) applies to the last axis of inputs of any rank >= 2,
// as Keras' does, so a transformer's feed-forward block is two Dense layers.
//
// Errors of a call (InvalidArgument, sticky, prefixed with the layer's
// name) name the input and what was expected.
//
// Thread safety: building is single-threaded (see ops/layers.h).

#ifndef CKFLOW_OPS_SEQUENCE_LAYERS_H_
#define CKFLOW_OPS_SEQUENCE_LAYERS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ops/layers.h"

namespace ckflow {

struct EmbeddingOptions {
  Initializer embeddings_initializer;  // RandomUniform(-0.05, 0.05) if empty
  DataType dtype = DT_FLOAT;           // of the table (float32 or float64)
  std::string name = "embedding";
};

// The rows of "embeddings" [input_dim, output_dim] at the input's ids
// (int32 or int64, any shape): output shape = ids' shape + [output_dim]. A
// ResourceGather, so the table's gradient is its rows (IndexedSlices) and
// an optimizer updates only the rows looked up (see ops/optimizers.h). An id
// outside [0, input_dim) fails the run with InvalidArgument naming it.
class Embedding : public Layer {
 public:
  static std::shared_ptr<Embedding> Make(int64_t input_dim, int64_t output_dim,
                                         EmbeddingOptions options = {});

  // Null before the first call.
  const std::shared_ptr<Variable>& embeddings() const { return embeddings_; }

 protected:
  Status Build(const Scope& scope, const Output& input) override;
  Output Call(const Scope& scope, Output input) override;

 private:
  Embedding(int64_t input_dim, int64_t output_dim, EmbeddingOptions options);

  const int64_t input_dim_;
  const int64_t output_dim_;
  const EmbeddingOptions options_;
  std::shared_ptr<Variable> embeddings_;
};

struct LayerNormalizationOptions {
  double epsilon = 1e-3;
  bool center = true;             // add "beta"
  bool scale = true;              // multiply by "gamma"
  Initializer gamma_initializer;  // Ones() if empty
  Initializer beta_initializer;   // Zeros() if empty
  std::string name = "layer_normalization";
};

// Each vector along the last axis normalized to mean 0 and variance 1, then
// scaled by "gamma" and shifted by "beta" ([features] each, created in that
// order): y = (x - mean) / sqrt(variance + epsilon) * gamma + beta, the
// statistics of each example and position alone (Keras' axis -1). As
// tf_keras decides: float32 with epsilon >= 1.001e-5 (the default 1e-3)
// normalizes in one op (ops::LayerNorm, where Keras uses fused batch norm)
// and then applies gamma and beta; any other dtype or epsilon is computed
// as tf.nn.moments and tf.nn.batch_normalization compute it. The same in
// training and inference.
class LayerNormalization : public Layer {
 public:
  static std::shared_ptr<LayerNormalization> Make(LayerNormalizationOptions options = {});

  // Null before the first call (or without scale / center).
  const std::shared_ptr<Variable>& gamma() const { return gamma_; }
  const std::shared_ptr<Variable>& beta() const { return beta_; }

 protected:
  Status Build(const Scope& scope, const Output& input) override;
  Output Call(const Scope& scope, Output input) override;

 private:
  explicit LayerNormalization(LayerNormalizationOptions options);

  const LayerNormalizationOptions options_;
  std::shared_ptr<Variable> gamma_;
  std::shared_ptr<Variable> beta_;
};

struct MultiHeadAttentionOptions {
  int64_t value_dim = 0;  // per head; 0 means key_dim
  // Dropout on the attention probabilities in a training call.
  double dropout = 0.0;
  std::optional<int64_t> seed;  // of the dropout's draws
  bool use_bias = true;
  // Each query position attends only to itself and earlier positions
  // (Keras' use_causal_mask, here fixed for the layer).
  bool use_causal_mask = false;
  Initializer kernel_initializer;  // GlorotUniform() if empty
  Initializer bias_initializer;    // Zeros() if empty
  std::string name = "multi_head_attention";
};

// Keras' MultiHeadAttention for query [batch, T, d_query] and value
// [batch, S, d_value] (key = value): per head h,
//   softmax(q_h k_h^T / sqrt(key_dim) + mask) v_h,
// the heads' outputs projected back to d_query. Its four projections are
// Keras' EinsumDense sublayers, tracked as Keras tracks them:
//   _query_dense  "query":  kernel [d_query, heads, key_dim], bias [heads, key_dim]
//   _key_dense    "key":    kernel [d_value, heads, key_dim], bias [heads, key_dim]
//   _value_dense  "value":  kernel [d_value, heads, value_dim], bias [heads, value_dim]
//   _output_dense "attention_output": kernel [heads, value_dim, d_query], bias [d_query]
// The causal mask adds -1e9 to the scores above the diagonal, as Keras'
// masked softmax does (so a fully masked row would be uniform, not NaN).
// The queries' and values' last dimensions must be known; T and S may be
// unknown until run time.
class MultiHeadAttention : public Layer {
 public:
  static std::shared_ptr<MultiHeadAttention> Make(int64_t num_heads, int64_t key_dim,
                                                  MultiHeadAttentionOptions options = {});

  // Self-attention: query = value = key = input.
  using Layer::operator();
  // Attention of `query` over `value` (cross-attention). The first call
  // fixes d_query and d_value.
  Output operator()(const Scope& scope, Output query, Output value,
                    std::optional<bool> training = std::nullopt);

  int64_t num_heads() const { return num_heads_; }
  int64_t key_dim() const { return key_dim_; }
  int64_t value_dim() const { return value_dim_; }

 protected:
  Status Build(const Scope& scope, const Output& query) override;
  Output Call(const Scope& scope, Output query) override;

 private:
  MultiHeadAttention(int64_t num_heads, int64_t key_dim, MultiHeadAttentionOptions options);

  const int64_t num_heads_;
  const int64_t key_dim_;
  const int64_t value_dim_;
  const MultiHeadAttentionOptions options_;
  // The value of a cross-attention call in progress (invalid: self-
  // attention); Layer::operator() passes Build and Call one input.
  Output value_;
  std::shared_ptr<Layer> query_dense_, key_dense_, value_dense_, output_dense_;
};

}  // namespace ckflow

#endif  // CKFLOW_OPS_SEQUENCE_LAYERS_H_
