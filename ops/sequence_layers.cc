#include "ops/sequence_layers.h"

#include <cmath>
#include <utility>
#include <vector>

#include "ops/array_ops.h"
#include "ops/initializers.h"
#include "ops/layers_internal.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"
#include "ops/normalization_ops.h"
#include "ops/ops_internal.h"

namespace ckflow {
namespace {

// A scalar Const of `dtype`.
Output Scalar(const Scope& scope, DataType dtype, double value) {
  StatusOr<Tensor> t = internal::ScalarOfType(dtype, value);
  if (!t.ok()) {
    scope.UpdateStatus(t.status());
    return Output();
  }
  return ops::Const(scope, *t);
}

// Keras' EinsumDense as MultiHeadAttention builds it: the input's last
// `contracted` dimensions times a kernel [those dimensions..., out_dims...],
// plus a bias [out_dims...]. One MatMul over the flattened dimensions, the
// same products Keras' einsum computes.
class EinsumDense : public Layer {
 public:
  EinsumDense(std::string name, int contracted, std::vector<int64_t> out_dims, bool use_bias,
              Initializer kernel_initializer, Initializer bias_initializer)
      : Layer("EinsumDense", std::move(name)),
        contracted_(contracted),
        out_dims_(std::move(out_dims)),
        use_bias_(use_bias),
        kernel_initializer_(std::move(kernel_initializer)),
        bias_initializer_(std::move(bias_initializer)) {}

 protected:
  Status Build(const Scope& scope, const Output& input) override {
    const PartialShape& shape = input.shape();
    std::vector<int64_t> kernel_dims;
    in_features_ = 1;
    for (int d = shape.rank() - contracted_; d < shape.rank(); ++d) {
      kernel_dims.push_back(shape.dim(d));
      in_features_ *= shape.dim(d);
    }
    out_features_ = 1;
    for (int64_t d : out_dims_) out_features_ *= d;
    kernel_dims.insert(kernel_dims.end(), out_dims_.begin(), out_dims_.end());
    CKFLOW_ASSIGN_OR_RETURN(TensorShape kernel_shape, TensorShape::Make(kernel_dims));
    kernel_ = AddWeight(scope, "kernel", input.dtype(), kernel_shape, kernel_initializer_);
    if (use_bias_) {
      CKFLOW_ASSIGN_OR_RETURN(TensorShape bias_shape, TensorShape::Make(out_dims_));
      bias_ = AddWeight(scope, "bias", input.dtype(), bias_shape, bias_initializer_);
    }
    return OkStatus();
  }

  Output Call(const Scope& scope, Output input) override {
    Output matrix = ops::Reshape(scope, kernel_->Read(scope),
                                 Tensor::FromVector<int64_t>({in_features_, out_features_}));
    Output bias;
    if (bias_) {
      bias = ops::Reshape(scope, bias_->Read(scope), Tensor::FromVector<int64_t>({out_features_}));
    }
    return internal::ContractLastAxes(scope, input, contracted_, in_features_, matrix, bias,
                                      out_dims_);
  }

 private:
  const int contracted_;
  const std::vector<int64_t> out_dims_;
  const bool use_bias_;
  const Initializer kernel_initializer_;
  const Initializer bias_initializer_;
  int64_t in_features_ = 0;
  int64_t out_features_ = 0;
  std::shared_ptr<Variable> kernel_;
  std::shared_ptr<Variable> bias_;
};

// InvalidArgument unless `x` is [batch, time, features] with known
// features, float32 or float64.
Status CheckSequenceInput(const Output& x, std::string_view what) {
  const PartialShape& shape = x.shape();
  if (!shape.known_rank() || shape.rank() != 3 || shape.dim(2) < 0) {
    return InvalidArgumentError("expects ", what, " [batch, time, features] with known features, ",
                                "got ", x.name(), " of shape ", shape.ToString());
  }
  return internal::CheckFloatInput(x);
}

}  // namespace

// ------------------------------------------------------------ Embedding

Embedding::Embedding(int64_t input_dim, int64_t output_dim, EmbeddingOptions options)
    : Layer("Embedding", options.name),
      input_dim_(input_dim),
      output_dim_(output_dim),
      options_(std::move(options)) {}

std::shared_ptr<Embedding> Embedding::Make(int64_t input_dim, int64_t output_dim,
                                           EmbeddingOptions options) {
  return std::shared_ptr<Embedding>(new Embedding(input_dim, output_dim, std::move(options)));
}

Status Embedding::Build(const Scope& scope, const Output& input) {
  if (input_dim_ <= 0 || output_dim_ <= 0) {
    return InvalidArgumentError("input_dim and output_dim must be positive, got ", input_dim_,
                                " and ", output_dim_);
  }
  if (input.dtype() != DT_INT32 && input.dtype() != DT_INT64) {
    return InvalidArgumentError("expects int32 or int64 ids, got ", input.name(), " of ",
                                DataTypeName(input.dtype()));
  }
  if (options_.dtype != DT_FLOAT && options_.dtype != DT_DOUBLE) {
    return InvalidArgumentError("dtype must be float32 or float64, got ",
                                DataTypeName(options_.dtype));
  }
  CKFLOW_ASSIGN_OR_RETURN(TensorShape shape, internal::WeightShape({input_dim_, output_dim_}));
  embeddings_ = AddWeight(scope, "embeddings", options_.dtype, shape,
                          internal::OrDefault(options_.embeddings_initializer,
                                              initializers::RandomUniform(-0.05, 0.05)));
  return OkStatus();
}

Output Embedding::Call(const Scope& scope, Output input) {
  return embeddings_->SparseRead(scope, input);
}

// --------------------------------------------------- LayerNormalization

LayerNormalization::LayerNormalization(LayerNormalizationOptions options)
    : Layer("LayerNormalization", options.name), options_(std::move(options)) {}

std::shared_ptr<LayerNormalization> LayerNormalization::Make(LayerNormalizationOptions options) {
  return std::shared_ptr<LayerNormalization>(new LayerNormalization(std::move(options)));
}

Status LayerNormalization::Build(const Scope& scope, const Output& input) {
  const PartialShape& shape = input.shape();
  if (!shape.known_rank() || shape.rank() < 1 || shape.dim(shape.rank() - 1) < 0) {
    return InvalidArgumentError("expects an input with a known last dimension, got ", input.name(),
                                " of shape ", shape.ToString());
  }
  CKFLOW_RETURN_IF_ERROR(internal::CheckFloatInput(input));
  if (!(options_.epsilon > 0)) {
    return InvalidArgumentError("epsilon must be positive, got ", options_.epsilon);
  }
  const TensorShape features({shape.dim(shape.rank() - 1)});
  // Keras creates gamma, then beta.
  if (options_.scale) {
    gamma_ = AddWeight(scope, "gamma", input.dtype(), features,
                       internal::OrDefault(options_.gamma_initializer, initializers::Ones()));
  }
  if (options_.center) {
    beta_ = AddWeight(scope, "beta", input.dtype(), features,
                      internal::OrDefault(options_.beta_initializer, initializers::Zeros()));
  }
  return OkStatus();
}

Output LayerNormalization::Call(const Scope& scope, Output input) {
  const DataType dtype = input.dtype();
  // tf_keras' rule: float32 with an epsilon fused_batch_norm would not
  // raise normalizes in one fused op (FusedBatchNormV3 there, LayerNorm
  // here), then multiplies by gamma and adds beta.
  if (dtype == DT_FLOAT && options_.epsilon >= 1.001e-5) {
    Output y = ops::LayerNorm(scope, input, static_cast<float>(options_.epsilon));
    if (gamma_) y = ops::Mul(scope, y, gamma_->Read(scope));
    if (beta_) y = ops::Add(scope, y, beta_->Read(scope));
    return y;
  }
  // Otherwise tf.nn.moments, then tf.nn.batch_normalization: x * inv +
  // (beta - mean * inv) with inv = gamma / sqrt(variance + epsilon).
  Output axis = ops::Const<int32_t>(scope, -1);
  Output mean = ops::Mean(scope, input, axis, {.keep_dims = true});
  Output variance =
      ops::Mean(scope, ops::SquaredDifference(scope, input, ops::StopGradient(scope, mean)), axis,
                {.keep_dims = true});
  Output inv = ops::Rsqrt(scope, ops::Add(scope, variance, Scalar(scope, dtype, options_.epsilon)));
  if (gamma_) inv = ops::Mul(scope, inv, gamma_->Read(scope));
  Output mean_inv = ops::Mul(scope, mean, inv);
  Output shift = beta_ ? ops::Sub(scope, beta_->Read(scope), mean_inv) : ops::Neg(scope, mean_inv);
  return ops::Add(scope, ops::Mul(scope, input, inv), shift);
}

// --------------------------------------------------- MultiHeadAttention

MultiHeadAttention::MultiHeadAttention(int64_t num_heads, int64_t key_dim,
                                       MultiHeadAttentionOptions options)
    : Layer("MultiHeadAttention", options.name),
      num_heads_(num_heads),
      key_dim_(key_dim),
      value_dim_(options.value_dim > 0 ? options.value_dim : key_dim),
      options_(std::move(options)) {}

std::shared_ptr<MultiHeadAttention> MultiHeadAttention::Make(int64_t num_heads, int64_t key_dim,
                                                             MultiHeadAttentionOptions options) {
  return std::shared_ptr<MultiHeadAttention>(
      new MultiHeadAttention(num_heads, key_dim, std::move(options)));
}

Output MultiHeadAttention::operator()(const Scope& scope, Output query, Output value,
                                      std::optional<bool> training) {
  if (!value.valid()) {
    scope.UpdateStatus(InvalidArgumentError("layer '", name(), "': the value is invalid"));
    return Output();
  }
  value_ = value;
  Output out = Layer::operator()(scope, query, training);
  value_ = Output();
  return out;
}

Status MultiHeadAttention::Build(const Scope&, const Output& query) {
  if (num_heads_ <= 0 || key_dim_ <= 0 || options_.value_dim < 0) {
    return InvalidArgumentError("num_heads, key_dim and value_dim must be positive, got ",
                                num_heads_, ", ", key_dim_, " and ", options_.value_dim);
  }
  if (!(options_.dropout >= 0 && options_.dropout < 1)) {
    return InvalidArgumentError("dropout must be in [0, 1), got ", options_.dropout);
  }
  const Output value = value_.valid() ? value_ : query;
  CKFLOW_RETURN_IF_ERROR(CheckSequenceInput(query, "a query"));
  CKFLOW_RETURN_IF_ERROR(CheckSequenceInput(value, "a value"));
  if (value.dtype() != query.dtype()) {
    return InvalidArgumentError("the query ", query.name(), " is ", DataTypeName(query.dtype()),
                                " but the value ", value.name(), " is ",
                                DataTypeName(value.dtype()));
  }
  const Initializer kernel =
      internal::OrDefault(options_.kernel_initializer, initializers::GlorotUniform());
  const Initializer bias = internal::OrDefault(options_.bias_initializer, initializers::Zeros());
  auto dense = [&](const char* edge, const char* name, int contracted,
                   std::vector<int64_t> out_dims) {
    auto layer = std::make_shared<EinsumDense>(name, contracted, std::move(out_dims),
                                               options_.use_bias, kernel, bias);
    Track(edge, layer);
    return layer;
  };
  // Keras' attribute names and creation order.
  query_dense_ = dense("_query_dense", "query", 1, {num_heads_, key_dim_});
  key_dense_ = dense("_key_dense", "key", 1, {num_heads_, key_dim_});
  value_dense_ = dense("_value_dense", "value", 1, {num_heads_, value_dim_});
  output_dense_ = dense("_output_dense", "attention_output", 2, {query.shape().dim(2)});
  return OkStatus();
}

Output MultiHeadAttention::Call(const Scope& scope, Output query) {
  const Output value = value_.valid() ? value_ : query;
  const DataType dtype = query.dtype();
  const std::vector<int32_t> heads_first = {0, 2, 1, 3};
  // [batch, time, heads, dim] -> [batch, heads, time, dim].
  auto project = [&](Layer& dense, const Output& x) {
    return ops::Transpose(scope, dense(scope, x), Tensor::FromVector<int32_t>(heads_first));
  };
  Output q = project(*query_dense_, query);
  Output k = project(*key_dense_, value);
  Output v = project(*value_dense_, value);
  // Keras scales the queries, not the scores.
  q = ops::Mul(scope, q, Scalar(scope, dtype, 1.0 / std::sqrt(static_cast<double>(key_dim_))));
  Output scores = ops::BatchMatMul(scope, q, k, {.adj_y = true});  // [batch, heads, T, S]
  if (options_.use_causal_mask) {
    // Keras' masked softmax: -1e9 where the mask is 0 (above the diagonal).
    // The adder is made at [T, S] and broadcast over batch and heads: the
    // same sums as Keras' [batch, 1, T, S], without passes over the scores.
    Output time_shape =
        ops::Slice(scope, ops::Shape(scope, scores, DT_INT64), Tensor::FromVector<int64_t>({2}),
                   Tensor::FromVector<int64_t>({2}));
    Output mask =
        ops::MatrixBandPart(scope, ops::Fill(scope, time_shape, Scalar(scope, dtype, 1.0)),
                            ops::Const<int64_t>(scope, -1), ops::Const<int64_t>(scope, 0));
    scores = ops::Add(scope, scores,
                      ops::Mul(scope, ops::Sub(scope, Scalar(scope, dtype, 1.0), mask),
                               Scalar(scope, dtype, -1e9)));
  }
  Output probabilities = ops::Softmax(scope, scores);
  if (training(scope) && options_.dropout > 0) {
    probabilities = ops::Dropout(scope, probabilities, options_.dropout, {.seed = options_.seed});
  }
  Output heads =
      ops::Transpose(scope, ops::BatchMatMul(scope, probabilities, v),
                     Tensor::FromVector<int32_t>(heads_first));  // [batch, T, heads, dim]
  return (*output_dense_)(scope, heads);
}

}  // namespace ckflow
