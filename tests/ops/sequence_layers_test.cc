// Embedding, LayerNormalization, Dense on rank > 2 and MultiHeadAttention:
// Keras' variable names, shapes and tracking, outputs against naive
// double-precision references computed from the layers' own weights, and
// errors. (TensorFlow judges the layers in interop/test_sequence_layers.py.)
#include "ops/sequence_layers.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "ops/array_ops.h"
#include "ops/gradients.h"
#include "ops/initializers.h"
#include "ops/layers.h"
#include "ops/math_ops.h"
#include "ops/optimizers.h"
#include "runtime/session.h"
#include "tests/ops/gradient_check.h"
#include "tests/ops/layer_test_util.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

using ::ckflow::testing::FilledTensor;
using ::ckflow::testing::MaxAbsDifference;
using ::ckflow::testing::RunLayer;
using ::ckflow::testing::VariableNames;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<double> Doubles(const Tensor& t) {
  std::vector<double> out;
  if (t.dtype() == DT_DOUBLE) return {t.flat<double>().begin(), t.flat<double>().end()};
  for (float v : t.flat<float>()) out.push_back(v);
  return out;
}

// ------------------------------------------------------------ Embedding

TEST(EmbeddingTest, LooksUpRowsOfAKerasNamedTable) {
  auto embedding = Embedding::Make(10, 4);
  Tensor ids = Tensor::FromVector<int64_t>({3, 0, 9, 3, 7, 1}, TensorShape({2, 3}));
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto run, RunLayer(*embedding, ids));
  EXPECT_THAT(VariableNames(embedding->variables()), ElementsAre("embedding/embeddings"));
  EXPECT_EQ(embedding->embeddings()->shape().ToString(), "[10,4]");
  EXPECT_EQ(run.output.shape(), TensorShape({2, 3, 4}));
  const std::vector<double> table = Doubles(run.Value(embedding->embeddings()));
  std::vector<double> want;
  for (int64_t id : ids.flat<int64_t>()) {
    want.insert(want.end(), table.begin() + id * 4, table.begin() + id * 4 + 4);
  }
  EXPECT_EQ(MaxAbsDifference(run.output, want), 0);
  // Keras' default initializer: uniform in [-0.05, 0.05].
  for (double v : table) EXPECT_LE(std::abs(v), 0.05);
}

TEST(EmbeddingTest, ATrainingStepChangesOnlyTheRowsLookedUp) {
  Scope root = Scope::NewRootScope();
  auto embedding = Embedding::Make(6, 2);
  Output rows = (*embedding)(root, ops::Const<int32_t>(root, {4, 1, 4}));
  Output train = Adagrad::Make({.learning_rate = 0.5f})->Minimize(root, ops::Sum(root, rows));
  Output init = GlobalVariablesInitializer(root);
  ASSERT_TRUE(root.ok()) << root.status();
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto session, Session::Create(root.graph()));
  CKFLOW_ASSERT_OK(session->Run({}, {}, {init}).status());
  CKFLOW_ASSERT_OK_AND_ASSIGN(
      auto before, session->Run({}, std::vector<Output>{embedding->embeddings()->value()}));
  CKFLOW_ASSERT_OK(session->Run({}, {}, {train}).status());
  CKFLOW_ASSERT_OK_AND_ASSIGN(
      auto after, session->Run({}, std::vector<Output>{embedding->embeddings()->value()}));
  const std::vector<double> b = Doubles(before[0]), a = Doubles(after[0]);
  for (int row = 0; row < 6; ++row) {
    for (int j = 0; j < 2; ++j) {
      if (row == 1 || row == 4) {
        EXPECT_LT(a[row * 2 + j], b[row * 2 + j]) << row;
      } else {
        EXPECT_EQ(a[row * 2 + j], b[row * 2 + j]) << row;
      }
    }
  }
}

TEST(EmbeddingTest, RejectsFloatIdsAndNamesAnIdOutOfRange) {
  Scope root = Scope::NewRootScope();
  (*Embedding::Make(5, 2))(root, ops::Const(root, 1.0f));
  EXPECT_EQ(root.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(root.status().message(), HasSubstr("layer 'embedding': expects int32 or int64 ids"));

  auto embedding = Embedding::Make(5, 2);
  StatusOr<testing::LayerRun> run = RunLayer(*embedding, Tensor::FromVector<int32_t>({2, 5}));
  EXPECT_EQ(run.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(run.status().message(), HasSubstr("indices[1] = 5 is not in [0, 5)"));
}

// --------------------------------------------------- LayerNormalization

TEST(LayerNormalizationTest, NormalizesEachVectorThenScalesAndShifts) {
  auto norm =
      LayerNormalization::Make({.gamma_initializer = initializers::RandomUniform(0.5, 1.5, 3),
                                .beta_initializer = initializers::RandomUniform(-1, 1, 4)});
  const Tensor x = FilledTensor({2, 3, 5}, 7);
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto run, RunLayer(*norm, x));
  EXPECT_THAT(VariableNames(norm->variables()),
              ElementsAre("layer_normalization/gamma", "layer_normalization/beta"));
  const std::vector<double> in = Doubles(x), gamma = Doubles(run.Value(norm->gamma())),
                            beta = Doubles(run.Value(norm->beta()));
  std::vector<double> want(in.size());
  for (size_t row = 0; row < in.size() / 5; ++row) {
    double mean = 0, variance = 0;
    for (int j = 0; j < 5; ++j) mean += in[row * 5 + j] / 5;
    for (int j = 0; j < 5; ++j) variance += std::pow(in[row * 5 + j] - mean, 2) / 5;
    for (int j = 0; j < 5; ++j) {
      want[row * 5 + j] =
          (in[row * 5 + j] - mean) / std::sqrt(variance + 1e-3) * gamma[j] + beta[j];
    }
  }
  EXPECT_LT(MaxAbsDifference(run.output, want), 2e-6);
}

TEST(LayerNormalizationTest, GradientMatchesFiniteDifferences) {
  std::mt19937 rng(5);
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_DOUBLE, {.shape = {3, 4}});
  Output y = (*LayerNormalization::Make({.center = false, .scale = false}))(root, x);
  ASSERT_TRUE(root.ok()) << root.status();
  testing::ExpectGradientsMatchFiniteDifferences(
      root, y, {x}, {testing::RandomDoubles({3, 4}, -2, 2, rng)}, 1e-6, 1e-6, rng);
}

// tf_keras' rule: float32 with epsilon >= 1.001e-5 normalizes in one op
// (LayerNorm, fused batch norm in Keras) and applies gamma and beta after;
// float64 or a smaller epsilon takes tf.nn.moments + batch_normalization.
// The fused path's output and its gradients for x, gamma and beta agree
// with the composite's computed in float64 on the same values.
TEST(LayerNormalizationTest, Float32NormalizesInOneOpAsKerasDecides) {
  auto count_fused = [](const Graph& graph) {
    int fused = 0;
    for (int id = 0; id < graph.num_nodes(); ++id)
      fused += graph.node(id)->op_def().type == "LayerNorm";
    return fused;
  };
  struct Built {
    Scope root = Scope::NewRootScope();
    Output x, y;
    std::vector<Output> grads;
    std::shared_ptr<LayerNormalization> norm;
  };
  auto build = [](DataType dtype, double epsilon) {
    auto b = std::make_unique<Built>();
    b->norm = LayerNormalization::Make({.epsilon = epsilon,
                                        // Random draws differ by dtype.
                                        .gamma_initializer = initializers::Constant(1.3),
                                        .beta_initializer = initializers::Constant(-0.4)});
    b->x = ops::Placeholder(b->root, dtype, {.shape = {-1, 6}});
    b->y = (*b->norm)(b->root, b->x);
    Output weights = ops::Cast(b->root, ops::Const<float>(b->root, {1, -2, 3, 0.5, 2, -1}), dtype);
    StatusOr<std::vector<Output>> grads =
        AddGradients(b->root, {ops::Mul(b->root, b->y, weights)},
                     {b->x, b->norm->gamma()->handle(), b->norm->beta()->handle()});
    if (grads.ok()) b->grads = *grads;
    return b;
  };
  auto fused = build(DT_FLOAT, 1e-3);
  ASSERT_TRUE(fused->root.ok()) << fused->root.status();
  EXPECT_EQ(count_fused(fused->root.graph()), 1);
  auto wide = build(DT_DOUBLE, 1e-3);
  ASSERT_TRUE(wide->root.ok()) << wide->root.status();
  EXPECT_EQ(count_fused(wide->root.graph()), 0);
  auto small = build(DT_FLOAT, 1e-6);
  ASSERT_TRUE(small->root.ok()) << small->root.status();
  EXPECT_EQ(count_fused(small->root.graph()), 0);

  const Tensor x = FilledTensor({4, 6}, 11);
  std::vector<Output> fetches = {fused->y};
  fetches.insert(fetches.end(), fused->grads.begin(), fused->grads.end());
  std::vector<Output> wide_fetches = {wide->y};
  wide_fetches.insert(wide_fetches.end(), wide->grads.begin(), wide->grads.end());
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto session, Session::Create(fused->root.graph()));
  CKFLOW_ASSERT_OK(session->Run({}, {}, {GlobalVariablesInitializer(fused->root)}).status());
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto got, session->Run({{fused->x, x}}, fetches));
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto wide_session, Session::Create(wide->root.graph()));
  CKFLOW_ASSERT_OK(wide_session->Run({}, {}, {GlobalVariablesInitializer(wide->root)}).status());
  Tensor x64(DT_DOUBLE, x.shape());
  for (int64_t i = 0; i < x.NumElements(); ++i) x64.flat<double>()[i] = x.flat<float>()[i];
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto want, wide_session->Run({{wide->x, x64}}, wide_fetches));
  const char* what[] = {"y", "dx", "dgamma", "dbeta"};
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_LT(MaxAbsDifference(got[i], Doubles(want[i])), 1e-5) << what[i];
  }
}

// ---------------------------------------------------------------- Dense

TEST(DenseTest, MultipliesTheLastAxisOfAnyRank) {
  auto dense = Dense::Make(3, {.bias_initializer = initializers::RandomUniform(-1, 1, 2)});
  Scope root = Scope::NewRootScope();
  // Batch and time unknown until run time.
  Output x = ops::Placeholder(root, DT_FLOAT, {.shape = {-1, -1, 4}});
  Output y = (*dense)(root, x);
  Output init = GlobalVariablesInitializer(root);
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(y.shape().ToString(), "[?,?,3]");
  EXPECT_EQ(dense->kernel()->shape().ToString(), "[4,3]");
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto session, Session::Create(root.graph()));
  CKFLOW_ASSERT_OK(session->Run({}, {}, {init}).status());
  const Tensor input = FilledTensor({2, 5, 4}, 9);
  CKFLOW_ASSERT_OK_AND_ASSIGN(
      auto got, session->Run({{x, input}}, {y, dense->kernel()->value(), dense->bias()->value()}));
  EXPECT_EQ(got[0].shape(), TensorShape({2, 5, 3}));
  const std::vector<double> in = Doubles(input), k = Doubles(got[1]), b = Doubles(got[2]);
  std::vector<double> want;
  for (int p = 0; p < 10; ++p) {
    for (int u = 0; u < 3; ++u) {
      double sum = b[u];
      for (int f = 0; f < 4; ++f) sum += in[p * 4 + f] * k[f * 3 + u];
      want.push_back(sum);
    }
  }
  EXPECT_LT(MaxAbsDifference(got[0], want), 1e-6);
}

// --------------------------------------------------- MultiHeadAttention

struct AttentionWeights {
  std::vector<double> wq, bq, wk, bk, wv, bv, wo, bo;
};

// Keras' computation, one loop per einsum, in double.
std::vector<double> NaiveAttention(const std::vector<double>& query,
                                   const std::vector<double>& value, int64_t batch, int64_t t_len,
                                   int64_t s_len, int64_t d_query, int64_t d_value, int64_t heads,
                                   int64_t key_dim, int64_t value_dim, const AttentionWeights& w,
                                   bool causal) {
  auto project = [&](const std::vector<double>& x, int64_t len, int64_t d,
                     const std::vector<double>& kernel, const std::vector<double>& bias,
                     int64_t dim) {
    std::vector<double> out(batch * len * heads * dim);
    for (int64_t p = 0; p < batch * len; ++p) {
      for (int64_t h = 0; h < heads * dim; ++h) {
        double sum = bias[h];
        for (int64_t f = 0; f < d; ++f) sum += x[p * d + f] * kernel[f * heads * dim + h];
        out[p * heads * dim + h] = sum;
      }
    }
    return out;
  };
  const std::vector<double> q = project(query, t_len, d_query, w.wq, w.bq, key_dim);
  const std::vector<double> k = project(value, s_len, d_value, w.wk, w.bk, key_dim);
  const std::vector<double> v = project(value, s_len, d_value, w.wv, w.bv, value_dim);
  std::vector<double> heads_out(batch * t_len * heads * value_dim, 0.0);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t t = 0; t < t_len; ++t) {
        std::vector<double> score(s_len);
        double top = -INFINITY;
        for (int64_t s = 0; s < s_len; ++s) {
          double dot = 0;
          for (int64_t j = 0; j < key_dim; ++j) {
            dot += q[((b * t_len + t) * heads + h) * key_dim + j] / std::sqrt(double(key_dim)) *
                   k[((b * s_len + s) * heads + h) * key_dim + j];
          }
          score[s] = dot + (causal && s > t ? -1e9 : 0.0);
          top = std::max(top, score[s]);
        }
        double total = 0;
        for (double& e : score) total += (e = std::exp(e - top));
        for (int64_t s = 0; s < s_len; ++s) {
          for (int64_t j = 0; j < value_dim; ++j) {
            heads_out[((b * t_len + t) * heads + h) * value_dim + j] +=
                score[s] / total * v[((b * s_len + s) * heads + h) * value_dim + j];
          }
        }
      }
    }
  }
  std::vector<double> out(batch * t_len * d_query);
  for (int64_t p = 0; p < batch * t_len; ++p) {
    for (int64_t d = 0; d < d_query; ++d) {
      double sum = w.bo[d];
      for (int64_t hv = 0; hv < heads * value_dim; ++hv) {
        sum += heads_out[p * heads * value_dim + hv] * w.wo[hv * d_query + d];
      }
      out[p * d_query + d] = sum;
    }
  }
  return out;
}

struct AttentionCase {
  int64_t batch, t_len, s_len, d_query, d_value, heads, key_dim, value_dim;
  bool causal, cross, unknown_time;
};

void CheckAttention(const AttentionCase& c) {
  SCOPED_TRACE(::testing::Message() << "T " << c.t_len << " S " << c.s_len << " causal " << c.causal
                                    << " cross " << c.cross);
  auto attention =
      MultiHeadAttention::Make(c.heads, c.key_dim,
                               {.value_dim = c.value_dim,
                                .use_causal_mask = c.causal,
                                .bias_initializer = initializers::RandomUniform(-0.5, 0.5, 11)});
  Scope root = Scope::NewRootScope();
  const int64_t time = c.unknown_time ? -1 : c.t_len;
  Output query = ops::Placeholder(root, DT_FLOAT, {.shape = {c.batch, time, c.d_query}});
  Output value = ops::Placeholder(root, DT_FLOAT, {.shape = {c.batch, c.s_len, c.d_value}});
  Output y = c.cross ? (*attention)(root, query, value) : (*attention)(root, query);
  Output init = GlobalVariablesInitializer(root);
  ASSERT_TRUE(root.ok()) << root.status();
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto session, Session::Create(root.graph()));
  CKFLOW_ASSERT_OK(session->Run({}, {}, {init}).status());
  const Tensor q = FilledTensor({c.batch, c.t_len, c.d_query}, 21);
  const Tensor v = c.cross ? FilledTensor({c.batch, c.s_len, c.d_value}, 22) : q;
  std::vector<Output> fetches = {y};
  for (const auto& var : attention->variables()) fetches.push_back(var->value());
  std::vector<Feed> feeds = {{query, q}};
  if (c.cross) feeds.push_back({value, v});
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto got, session->Run(feeds, fetches));
  ASSERT_EQ(got.size(), 9u);
  const AttentionWeights w{Doubles(got[1]), Doubles(got[2]), Doubles(got[3]), Doubles(got[4]),
                           Doubles(got[5]), Doubles(got[6]), Doubles(got[7]), Doubles(got[8])};
  const std::vector<double> want = NaiveAttention(
      Doubles(q), Doubles(v), c.batch, c.t_len, c.cross ? c.s_len : c.t_len, c.d_query,
      c.cross ? c.d_value : c.d_query, c.heads, c.key_dim, c.value_dim, w, c.causal);
  EXPECT_EQ(got[0].shape(), TensorShape({c.batch, c.t_len, c.d_query}));
  EXPECT_LT(MaxAbsDifference(got[0], want), 1e-5);
}

TEST(MultiHeadAttentionTest, MatchesKerasComputation) {
  CheckAttention({2, 5, 5, 8, 8, 2, 4, 4, false, false, false});
  CheckAttention({2, 5, 5, 8, 8, 2, 4, 3, true, false, false});
  CheckAttention({1, 6, 6, 12, 12, 4, 3, 3, true, false, true});  // T known only at run time
  CheckAttention({2, 3, 7, 8, 6, 2, 4, 5, false, true, false});   // cross-attention
}

TEST(MultiHeadAttentionTest, HasKerasSublayersVariablesAndShapes) {
  auto attention = MultiHeadAttention::Make(4, 16, {.use_causal_mask = true});
  Scope root = Scope::NewRootScope();
  (*attention)(root, ops::Placeholder(root, DT_FLOAT, {.shape = {-1, 10, 32}}));
  ASSERT_TRUE(root.ok()) << root.status();
  std::vector<std::string> edges;
  for (const auto& [name, child] : attention->Children()) edges.push_back(name);
  EXPECT_THAT(edges, ElementsAre("_query_dense", "_key_dense", "_value_dense", "_output_dense"));
  std::vector<std::string> shapes;
  for (const auto& v : attention->variables()) shapes.push_back(v->name() + v->shape().ToString());
  EXPECT_THAT(shapes, ElementsAre("multi_head_attention/query/kernel[32,4,16]",
                                  "multi_head_attention/query/bias[4,16]",
                                  "multi_head_attention/key/kernel[32,4,16]",
                                  "multi_head_attention/key/bias[4,16]",
                                  "multi_head_attention/value/kernel[32,4,16]",
                                  "multi_head_attention/value/bias[4,16]",
                                  "multi_head_attention/attention_output/kernel[4,16,32]",
                                  "multi_head_attention/attention_output/bias[32]"));
}

TEST(MultiHeadAttentionTest, DropsProbabilitiesOnlyInTraining) {
  auto attention = MultiHeadAttention::Make(2, 4, {.dropout = 0.5, .seed = 3});
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_FLOAT, {.shape = {2, 6, 8}});
  Output train = (*attention)(root, x, true);
  Output infer = (*attention)(root, x, false);
  Output init = GlobalVariablesInitializer(root);
  ASSERT_TRUE(root.ok()) << root.status();
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto session, Session::Create(root.graph()));
  CKFLOW_ASSERT_OK(session->Run({}, {}, {init}).status());
  const Tensor input = FilledTensor({2, 6, 8}, 4);
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto a, session->Run({{x, input}}, {train, infer}));
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto b, session->Run({{x, input}}, {train, infer}));
  EXPECT_EQ(Doubles(a[1]), Doubles(b[1]));  // inference is deterministic
  EXPECT_NE(Doubles(a[0]), Doubles(a[1]));
  EXPECT_NE(Doubles(a[0]), Doubles(b[0]));  // a new mask each run
}

TEST(MultiHeadAttentionTest, RejectsInputsThatAreNotSequences) {
  Scope root = Scope::NewRootScope();
  (*MultiHeadAttention::Make(2, 4))(root, ops::Placeholder(root, DT_FLOAT, {.shape = {3, 8}}));
  EXPECT_EQ(root.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(root.status().message(),
              HasSubstr("layer 'multi_head_attention': expects a query [batch, time, features]"));
  Scope other = Scope::NewRootScope();
  (*MultiHeadAttention::Make(0, 4))(other, ops::Placeholder(other, DT_FLOAT, {.shape = {1, 3, 8}}));
  EXPECT_THAT(other.status().message(), HasSubstr("must be positive"));
}

}  // namespace
}  // namespace ckflow
