// Layers and models: lazy build, the object graph they expose (child names
// and order, as Keras has them), restore-on-create through AddWeight and
// Sequential, and Dense's arithmetic.
#include "ops/layers.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "ops/array_ops.h"
#include "ops/initializers.h"
#include "ops/nn_ops.h"
#include "runtime/session.h"
#include "tests/ops/training_test_util.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

using ::ckflow::testing::RecordingRestore;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> ChildNames(const Trackable& t) {
  std::vector<std::string> names;
  for (const auto& [name, child] : t.Children()) names.push_back(name);
  return names;
}

std::vector<std::string> VariableNames(const std::vector<std::shared_ptr<Variable>>& vars) {
  std::vector<std::string> names;
  for (const auto& v : vars) names.push_back(v->name());
  return names;
}

// A layer without weights.
class ReluLayer : public Layer {
 public:
  ReluLayer() : Layer("ReluLayer", "relu") {}

 protected:
  Output Call(const Scope& scope, Output x) override { return ops::Relu(scope, x); }
};

class LayersTest : public ::testing::Test {
 protected:
  Output Input(int64_t features) {
    return ops::Placeholder(root_, DT_FLOAT, {.shape = {-1, features}});
  }
  Scope root_ = Scope::NewRootScope();
};

TEST_F(LayersTest, DenseCreatesItsVariablesOnTheFirstCallOnly) {
  auto dense = Dense::Make(3);
  EXPECT_FALSE(dense->built());
  EXPECT_TRUE(dense->variables().empty());
  EXPECT_TRUE(ChildNames(*dense).empty());

  Output y = (*dense)(root_, Input(4));
  ASSERT_TRUE(root_.ok()) << root_.status();
  EXPECT_TRUE(dense->built());
  EXPECT_EQ(y.shape(), PartialShape({-1, 3}));
  EXPECT_THAT(ChildNames(*dense), ElementsAre("kernel", "bias"));
  EXPECT_THAT(VariableNames(dense->variables()), ElementsAre("dense/kernel", "dense/bias"));
  EXPECT_EQ(dense->kernel()->shape(), PartialShape({4, 3}));
  EXPECT_EQ(dense->bias()->shape(), PartialShape({3}));

  size_t variables = GlobalVariables(root_.graph()).size();
  Output y2 = (*dense)(root_, Input(4));
  ASSERT_TRUE(root_.ok()) << root_.status();
  EXPECT_EQ(GlobalVariables(root_.graph()).size(), variables);
  EXPECT_EQ(y2.node()->name().rfind("dense_1/", 0), 0u) << y2.node()->name();
}

TEST_F(LayersTest, DenseWithoutBiasHasOnlyAKernel) {
  auto dense = Dense::Make(2, {.use_bias = false});
  (*dense)(root_, Input(5));
  EXPECT_THAT(ChildNames(*dense), ElementsAre("kernel"));
  EXPECT_EQ(dense->bias(), nullptr);
}

TEST_F(LayersTest, DenseComputesActivationOfInputTimesKernelPlusBias) {
  auto dense = Dense::Make(2, {.activation = ops::Relu,
                               .kernel_initializer = initializers::Constant(0.5),
                               .bias_initializer = initializers::Constant(-1.0)});
  Output x = Input(3);
  Output y = (*dense)(root_, x);
  Output init = GlobalVariablesInitializer(root_);
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto session, Session::Create(root_.graph()));
  CKFLOW_ASSERT_OK(session->Run({}, {}, {init}).status());
  Tensor batch = Tensor::FromVector<float>({1, 2, 3, -1, -2, -3}, TensorShape({2, 3}));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, session->Run({{x, batch}}, {y}));
  // Row 0: 0.5 * 6 - 1 = 2; row 1: relu(0.5 * -6 - 1) = 0.
  EXPECT_THAT(std::vector<float>(out[0].flat<float>().begin(), out[0].flat<float>().end()),
              ElementsAre(2, 2, 0, 0));
}

TEST_F(LayersTest, GlorotUniformIsBoundedAndReproducibleWithASeed) {
  auto kernel_values = [](int64_t graph_seed) {
    Scope root = Scope::NewRootScope();
    root.graph().set_seed(graph_seed);
    auto dense = Dense::Make(30);
    (*dense)(root, ops::Placeholder(root, DT_FLOAT, {.shape = {-1, 20}}));
    Output init = GlobalVariablesInitializer(root);
    auto session = Session::Create(root.graph());
    EXPECT_TRUE(session.ok()) << session.status();
    EXPECT_TRUE((*session)->Run({}, {}, {init}).ok());
    auto out = (*session)->Run({}, {dense->kernel()->value()});
    EXPECT_TRUE(out.ok()) << out.status();
    auto f = (*out)[0].flat<float>();
    return std::vector<float>(f.begin(), f.end());
  };
  std::vector<float> a = kernel_values(7), b = kernel_values(7), c = kernel_values(8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  const float limit = std::sqrt(6.0f / (20 + 30));
  float lo = limit, hi = -limit;
  for (float x : a) {
    EXPECT_LE(std::abs(x), limit);
    lo = std::min(lo, x);
    hi = std::max(hi, x);
  }
  EXPECT_LT(lo, -0.8f * limit);  // 600 draws cover the range
  EXPECT_GT(hi, 0.8f * limit);
}

TEST_F(LayersTest, RestoresDeferredOnALayerRunWhenItsWeightsAreCreated) {
  auto dense = Dense::Make(2);
  std::vector<std::shared_ptr<Trackable>> restored;
  dense->AddDeferredRestore("kernel", std::make_shared<RecordingRestore>(&restored));
  EXPECT_TRUE(restored.empty());
  (*dense)(root_, Input(3));
  ASSERT_EQ(restored.size(), 1u);
  EXPECT_EQ(restored[0], dense->kernel());
}

TEST_F(LayersTest, BadInputIsAStickyErrorNamingTheLayer) {
  struct Case {
    std::string name;
    int64_t units;
    PartialShape input_shape;
    DataType dtype;
    std::string message;
  };
  std::vector<Case> cases = {
      {"Rank1", 2, PartialShape({4}), DT_FLOAT,
       "layer 'dense': expects an input [batch, ..., features] (rank >= 2) with known features, "
       "got x:0 of shape "
       "[4]"},
      {"UnknownFeatures", 2, PartialShape({2, -1}), DT_FLOAT, "with known features"},
      {"Integer", 2, PartialShape({2, 3}), DT_INT32, "expects a float32 or float64 input"},
      {"NoUnits", 0, PartialShape({2, 3}), DT_FLOAT,
       "layer 'dense': units must be positive, got 0"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Scope root = Scope::NewRootScope();
    Output x = ops::Placeholder(root.WithOpName("x"), c.dtype, {.shape = c.input_shape});
    auto dense = Dense::Make(c.units);
    EXPECT_FALSE((*dense)(root, x).valid());
    EXPECT_EQ(root.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(root.status().message()), HasSubstr(c.message));
    EXPECT_FALSE(dense->built());
  }
}

// A layer whose Build declares "w" twice, as TensorFlow refuses.
class TwiceLayer : public Layer {
 public:
  TwiceLayer() : Layer("TwiceLayer", "twice") {}
  std::shared_ptr<Variable> first, second;

 protected:
  Status Build(const Scope& scope, const Output&) override {
    first = AddWeight(scope, "w", DT_FLOAT, TensorShape({2}), initializers::Zeros());
    second = AddWeight(scope, "w", DT_FLOAT, TensorShape({2}), initializers::Zeros());
    return OkStatus();
  }
  Output Call(const Scope&, Output x) override { return x; }
};

TEST_F(LayersTest, AddWeightTwiceUnderOneNameIsInvalidArgumentNamingLayerAndName) {
  auto layer = std::make_shared<TwiceLayer>();
  EXPECT_FALSE((*layer)(root_, Input(2)).valid());
  EXPECT_EQ(root_.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(root_.status().message()),
              HasSubstr("layer 'twice': AddWeight('w'): a weight or dependency with this name is "
                        "already declared"));
  ASSERT_NE(layer->first, nullptr);
  EXPECT_EQ(layer->second, nullptr);
  EXPECT_EQ(layer->LookupChild("w"), layer->first);  // the first weight is kept
  EXPECT_FALSE(layer->built());
}

// A model that tracks two layers under one name: the model's first call
// reports it (TensorFlow raises at the Track), naming the model and name.
TEST_F(LayersTest, AModelTrackingTwoLayersUnderOneNameFailsItsCall) {
  class Clash : public Model {
   public:
    Clash() : Model("clash") {
      first_ = Track("dense", Dense::Make(2));
      Track("dense", Dense::Make(3));
    }

   protected:
    Output Call(const Scope& scope, Output x) override { return (*first_)(scope, x); }

   private:
    std::shared_ptr<Dense> first_;
  };
  auto model = std::make_shared<Clash>();
  EXPECT_EQ(model->tracking_status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE((*model)(root_, Input(2)).valid());
  EXPECT_EQ(root_.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(root_.status().message()),
              HasSubstr("layer 'clash': Model: Track('dense', Dense): a Trackable with this name "
                        "is already declared as a dependency"));
}

TEST_F(LayersTest, SequentialNamesItsChildrenAsKeras) {
  auto seq = Sequential::Make({Dense::Make(4), std::make_shared<ReluLayer>(), Dense::Make(1)});
  EXPECT_THAT(ChildNames(*seq), ElementsAre("layer-0", "layer-1", "layer-2"));
  Output y = (*seq)(root_, Input(3));
  ASSERT_TRUE(root_.ok()) << root_.status();
  EXPECT_EQ(y.shape(), PartialShape({-1, 1}));
  EXPECT_THAT(ChildNames(*seq), ElementsAre("layer_with_weights-0", "layer-0", "layer-1",
                                            "layer_with_weights-1", "layer-2"));
  EXPECT_EQ(seq->LookupChild("layer_with_weights-1"), seq->layers()[2]);
  EXPECT_THAT(VariableNames(seq->trainable_variables()),
              ElementsAre("sequential/dense/kernel", "sequential/dense/bias",
                          "sequential/dense_1/kernel", "sequential/dense_1/bias"));
}

TEST_F(LayersTest, SequentialHandsDeferredWeightedLayerRestoresToTheLayer) {
  auto seq = Sequential::Make({std::make_shared<ReluLayer>(), Dense::Make(2)});
  std::vector<std::shared_ptr<Trackable>> restored;
  seq->AddDeferredRestore("layer_with_weights-0", std::make_shared<RecordingRestore>(&restored));
  (*seq)(root_, Input(3));
  ASSERT_EQ(restored.size(), 1u);
  EXPECT_EQ(restored[0], seq->layers()[1]);
}

TEST_F(LayersTest, SequentialAddOfABuiltLayerTracksItsWeightsAtOnce) {
  auto dense = Dense::Make(2);
  (*dense)(root_, Input(3));
  auto seq = Sequential::Make();
  seq->Add(dense);
  EXPECT_THAT(ChildNames(*seq), ElementsAre("layer_with_weights-0", "layer-0"));
}

// The classic Regress model of TensorFlow's checkpoint guide.
class Regress : public Model {
 public:
  Regress() : Model("regress") {
    input_transform_ = Track("input_transform", Dense::Make(10));
    hidden_ = Track("hidden", Dense::Make(8, {.activation = ops::Relu}));
    output_ = Track("output", Dense::Make(1));
  }
  // Keras' attribute reassignment (self.hidden = Dense(6)) overwrites; a
  // plain Track of a taken name is refused.
  void ReplaceHidden(std::shared_ptr<Dense> layer) {
    hidden_ = layer;
    TrackReplacing("hidden", std::move(layer));
  }

 protected:
  Output Call(const Scope& scope, Output x) override {
    return (*output_)(scope, (*hidden_)(scope, (*input_transform_)(scope, x)));
  }

 private:
  std::shared_ptr<Dense> input_transform_, hidden_, output_;
};

TEST_F(LayersTest, AModelTracksItsLayersInRegistrationOrder) {
  auto model = std::make_shared<Regress>();
  EXPECT_THAT(ChildNames(*model), ElementsAre("input_transform", "hidden", "output"));
  model->ReplaceHidden(Dense::Make(6));
  EXPECT_THAT(ChildNames(*model), ElementsAre("input_transform", "hidden", "output"));
  EXPECT_EQ(std::static_pointer_cast<Dense>(model->LookupChild("hidden"))->units(), 6);

  Output y = (*model)(root_, Input(5));
  ASSERT_TRUE(root_.ok()) << root_.status();
  EXPECT_EQ(y.shape(), PartialShape({-1, 1}));
  EXPECT_EQ(model->TypeName(), "Model");
  EXPECT_THAT(
      VariableNames(model->trainable_variables()),
      ElementsAre("regress/dense/kernel", "regress/dense/bias", "regress/dense_1/kernel",
                  "regress/dense_1/bias", "regress/dense_2/kernel", "regress/dense_2/bias"));
}

TEST_F(LayersTest, ModelVariablesAreDeduplicatedAndSplitByTrainability) {
  class Shared : public Model {
   public:
    Shared() {
      layer_ = Track("a", Dense::Make(2));
      Track("b", layer_);  // the same layer under two names
    }
    std::shared_ptr<Variable> AddCounter(const Scope& scope) {
      return AddWeight(scope, "counter", DT_FLOAT, TensorShape(), initializers::Zeros(),
                       /*trainable=*/false);
    }

   protected:
    Output Call(const Scope& scope, Output x) override { return (*layer_)(scope, x); }

   private:
    std::shared_ptr<Dense> layer_;
  };
  auto model = std::make_shared<Shared>();
  (*model)(root_, Input(3));
  auto counter = model->AddCounter(root_);
  EXPECT_THAT(VariableNames(model->trainable_variables()),
              ElementsAre("model/dense/kernel", "model/dense/bias"));
  EXPECT_THAT(VariableNames(model->non_trainable_variables()), ElementsAre("counter"));
  EXPECT_EQ(model->variables().size(), 3u);
}

// Records the training flag it sees in each Build and Call.
class FlagProbe : public Layer {
 public:
  explicit FlagProbe(std::vector<std::string>* seen) : Layer("FlagProbe", "probe"), seen_(seen) {}

 protected:
  Status Build(const Scope& scope, const Output&) override {
    seen_->push_back(std::string("build:") + (training(scope) ? "train" : "infer"));
    return OkStatus();
  }
  Output Call(const Scope& scope, Output x) override {
    seen_->push_back(training(scope) ? "train" : "infer");
    return x;
  }

 private:
  std::vector<std::string>* seen_;
};

// Calls `inherits` with no flag and `infers` with training=false, as a
// user's Model whose Call(scope, x) knows nothing of the flag.
class TwoProbes : public Model {
 public:
  explicit TwoProbes(std::vector<std::string>* seen) {
    inherits_ = Track("inherits", std::make_shared<FlagProbe>(seen));
    infers_ = Track("infers", std::make_shared<FlagProbe>(seen));
  }

 protected:
  Output Call(const Scope& scope, Output x) override {
    return (*infers_)(scope, (*inherits_)(scope, x), false);
  }

 private:
  std::shared_ptr<FlagProbe> inherits_, infers_;
};

TEST_F(LayersTest, ACallOutsideAnyOtherIsInferenceUnlessToldSo) {
  std::vector<std::string> seen;
  auto probe = std::make_shared<FlagProbe>(&seen);
  (*probe)(root_, Input(2));
  (*probe)(root_, Input(2), true);
  (*probe)(root_, Input(2), false);
  ASSERT_TRUE(root_.ok()) << root_.status();
  EXPECT_THAT(seen, ElementsAre("build:infer", "infer", "train", "infer"));
}

TEST_F(LayersTest, LayersCalledInsideACallInheritItsFlagUnlessGivenOne) {
  std::vector<std::string> seen;
  auto model = std::make_shared<TwoProbes>(&seen);
  (*model)(root_, Input(2), true);
  EXPECT_THAT(seen, ElementsAre("build:train", "train", "build:infer", "infer"));
  seen.clear();
  (*model)(root_, Input(2));
  EXPECT_THAT(seen, ElementsAre("infer", "infer"));
  seen.clear();
  (*model)(root_, Input(2), true);
  EXPECT_THAT(seen, ElementsAre("train", "infer"));
  ASSERT_TRUE(root_.ok()) << root_.status();
}

TEST_F(LayersTest, TheFlagEndsWithItsCall) {
  std::vector<std::string> seen;
  auto model = std::make_shared<TwoProbes>(&seen);
  auto after = std::make_shared<FlagProbe>(&seen);
  (*model)(root_, Input(2), true);
  seen.clear();
  (*after)(root_, Input(2));
  EXPECT_THAT(seen, ElementsAre("build:infer", "infer"));
}

TEST_F(LayersTest, TheFlagBelongsToTheGraphBeingBuilt) {
  // A training call on one graph whose Call builds a layer on another: the
  // other graph has no call in progress, so its layer infers.
  class CallsElsewhere : public Model {
   public:
    CallsElsewhere(Scope other, std::vector<std::string>* seen)
        : other_(std::move(other)), probe_(std::make_shared<FlagProbe>(seen)) {}

   protected:
    Output Call(const Scope&, Output x) override {
      (*probe_)(other_, ops::Placeholder(other_, DT_FLOAT, {.shape = {-1, 2}}));
      return x;
    }

   private:
    Scope other_;
    std::shared_ptr<FlagProbe> probe_;
  };
  std::vector<std::string> seen;
  Scope other = Scope::NewRootScope();
  auto model = std::make_shared<CallsElsewhere>(other, &seen);
  (*model)(root_, Input(2), true);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_THAT(seen, ElementsAre("build:infer", "infer"));
}

}  // namespace
}  // namespace ckflow
