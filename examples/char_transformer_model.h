// The decoder-only transformer of examples/char_transformer.cc, built from
// ckflow's Keras layers with Keras' names, so that tf_keras can rebuild it
// (interop) and load its SaveWeights file:
//
//   ids [batch, context] -> token embedding + position embedding
//     -> blocks x (pre-norm): x += attention(norm(x)),
//                             x += dense2(gelu(dense1(norm(x))))
//     -> norm -> dense to the vocabulary: logits [batch, context, vocab]
//
// The attention is causal: position t sees positions 0..t only, so every
// position of a window is a prediction of the next character.

#ifndef CKFLOW_EXAMPLES_CHAR_TRANSFORMER_MODEL_H_
#define CKFLOW_EXAMPLES_CHAR_TRANSFORMER_MODEL_H_

#include <cstdint>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "ops/array_ops.h"
#include "ops/layers.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"
#include "ops/sequence_layers.h"

namespace ckflow::examples {

struct TransformerConfig {
  int64_t vocab = 256;  // bytes
  int64_t context = 128;
  int64_t d_model = 128;
  int64_t heads = 4;
  int64_t blocks = 2;
  double dropout = 0.0;  // of the attention probabilities, in training
};

class CharTransformer : public Model {
 public:
  explicit CharTransformer(const TransformerConfig& c) : Model("char_transformer"), config_(c) {
    token_ =
        Track("token_embedding", Embedding::Make(c.vocab, c.d_model, {.name = "token_embedding"}));
    position_ = Track("position_embedding",
                      Embedding::Make(c.context, c.d_model, {.name = "position_embedding"}));
    for (int64_t b = 0; b < c.blocks; ++b) {
      const std::string n = "block" + std::to_string(b);
      Block block;
      block.attention_norm =
          Track(n + "_attention_norm", LayerNormalization::Make({.name = n + "_attention_norm"}));
      block.attention =
          Track(n + "_attention",
                MultiHeadAttention::Make(
                    c.heads, c.d_model / c.heads,
                    {.dropout = c.dropout, .use_causal_mask = true, .name = n + "_attention"}));
      block.mlp_norm = Track(n + "_mlp_norm", LayerNormalization::Make({.name = n + "_mlp_norm"}));
      block.mlp_in =
          Track(n + "_mlp_in",
                Dense::Make(4 * c.d_model,
                            {.activation = [](const Scope& s, Output x) { return ops::Gelu(s, x); },
                             .name = n + "_mlp_in"}));
      block.mlp_out = Track(n + "_mlp_out", Dense::Make(c.d_model, {.name = n + "_mlp_out"}));
      blocks_.push_back(block);
    }
    final_norm_ = Track("final_norm", LayerNormalization::Make({.name = "final_norm"}));
    logits_ = Track("logits", Dense::Make(c.vocab, {.name = "logits"}));
  }

  const TransformerConfig& config() const { return config_; }

 protected:
  // ids: int32 [batch, context].
  Output Call(const Scope& scope, Output ids) override {
    std::vector<int32_t> positions(config_.context);
    std::iota(positions.begin(), positions.end(), 0);
    Output x = ops::Add(scope, (*token_)(scope, ids),
                        (*position_)(scope, ops::Const(scope, Tensor::FromVector(positions))));
    for (const Block& b : blocks_) {
      x = ops::Add(scope, x, (*b.attention)(scope, (*b.attention_norm)(scope, x)));
      x = ops::Add(scope, x, (*b.mlp_out)(scope, (*b.mlp_in)(scope, (*b.mlp_norm)(scope, x))));
    }
    return (*logits_)(scope, (*final_norm_)(scope, x));
  }

 private:
  struct Block {
    std::shared_ptr<LayerNormalization> attention_norm, mlp_norm;
    std::shared_ptr<MultiHeadAttention> attention;
    std::shared_ptr<Dense> mlp_in, mlp_out;
  };

  const TransformerConfig config_;
  std::shared_ptr<Embedding> token_, position_;
  std::vector<Block> blocks_;
  std::shared_ptr<LayerNormalization> final_norm_;
  std::shared_ptr<Dense> logits_;
};

}  // namespace ckflow::examples

#endif  // CKFLOW_EXAMPLES_CHAR_TRANSFORMER_MODEL_H_
