// SaveWeights and LoadWeights of a Keras CNN (the Fashion-MNIST example's
// Sequential): the object graph rendered whole is Keras' (layer_with_weights
// and layer edges, BatchNormalization's "axis" before its four variables,
// the root's "root" edge to itself), and a model restored before it is built
// computes what the saved one computed, moving statistics included.

#include "checkpoint/weights.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "bundle/bundle_reader.h"
#include "bundle/object_tree.h"
#include "examples/fashion_mnist_model.h"
#include "ops/array_ops.h"
#include "ops/core_layers.h"
#include "ops/losses.h"
#include "ops/optimizers.h"
#include "ops/variables.h"
#include "runtime/session.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

// The example's model, trained one step (so the moving statistics and the
// weights are not their initial values), in a session of its own.
struct TrainedCnn {
  Scope root = Scope::NewRootScope();
  std::shared_ptr<Sequential> model = examples::FashionMnistModel();
  Output images = ops::Placeholder(root, DT_FLOAT, {.shape = {-1, 28, 28, 1}});
  Output inference;
  std::unique_ptr<Session> session;
  Tensor batch{DT_FLOAT, TensorShape({8, 28, 28, 1})};

  Status Train() {
    for (int64_t i = 0; i < batch.NumElements(); ++i) {
      batch.flat<float>()[i] = static_cast<float>((i * 37) % 256) / 255.0f;
    }
    Output labels = ops::Const<int32_t>(root, {0, 1, 2, 3, 4, 5, 6, 7});
    Output loss =
        losses::SparseSoftmaxCrossEntropyWithLogits(root, labels, (*model)(root, images, true));
    Output train_op = Adam::Make({})->Minimize(root, loss);
    inference = (*model)(root, images, false);
    Output init = GlobalVariablesInitializer(root);
    CKFLOW_RETURN_IF_ERROR(root.status());
    CKFLOW_ASSIGN_OR_RETURN(session, Session::Create(root.graph()));
    CKFLOW_RETURN_IF_ERROR(session->Run({}, {}, {init}).status());
    return session->Run({{images, batch}}, {}, {train_op}).status();
  }
};

TEST(WeightsTest, AKerasCnnSavesKerasObjectGraph) {
  TrainedCnn cnn;
  CKFLOW_ASSERT_OK(cnn.Train());
  const std::string prefix = testing::NewTempDir("weights") + "/weights";
  CKFLOW_ASSERT_OK(SaveWeights(cnn.model, prefix, *cnn.session));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string tree,
                              RenderObjectGraph(*reader, ObjectGraphFormat::kTree));
  // Node for node what tf_keras' save_weights writes for the same Sequential
  // (interop/test_fashion_mnist.py compares the two files' object graphs).
  EXPECT_EQ(tree, R"((root)
  layer_with_weights-0
    kernel  float32[3,3,1,32]  layer_with_weights-0/kernel/.ATTRIBUTES/VARIABLE_VALUE
    bias  float32[32]  layer_with_weights-0/bias/.ATTRIBUTES/VARIABLE_VALUE
  layer-0 -> layer_with_weights-0
  layer_with_weights-1
    axis
    gamma  float32[32]  layer_with_weights-1/gamma/.ATTRIBUTES/VARIABLE_VALUE
    beta  float32[32]  layer_with_weights-1/beta/.ATTRIBUTES/VARIABLE_VALUE
    moving_mean  float32[32]  layer_with_weights-1/moving_mean/.ATTRIBUTES/VARIABLE_VALUE
    moving_variance  float32[32]  layer_with_weights-1/moving_variance/.ATTRIBUTES/VARIABLE_VALUE
  layer-1 -> layer_with_weights-1
  layer-2
  layer-3
  layer_with_weights-2
    kernel  float32[3,3,32,64]  layer_with_weights-2/kernel/.ATTRIBUTES/VARIABLE_VALUE
    bias  float32[64]  layer_with_weights-2/bias/.ATTRIBUTES/VARIABLE_VALUE
  layer-4 -> layer_with_weights-2
  layer_with_weights-3
    axis
    gamma  float32[64]  layer_with_weights-3/gamma/.ATTRIBUTES/VARIABLE_VALUE
    beta  float32[64]  layer_with_weights-3/beta/.ATTRIBUTES/VARIABLE_VALUE
    moving_mean  float32[64]  layer_with_weights-3/moving_mean/.ATTRIBUTES/VARIABLE_VALUE
    moving_variance  float32[64]  layer_with_weights-3/moving_variance/.ATTRIBUTES/VARIABLE_VALUE
  layer-5 -> layer_with_weights-3
  layer-6
  layer-7
  layer-8
  layer-9
  layer_with_weights-4
    kernel  float32[1600,128]  layer_with_weights-4/kernel/.ATTRIBUTES/VARIABLE_VALUE
    bias  float32[128]  layer_with_weights-4/bias/.ATTRIBUTES/VARIABLE_VALUE
  layer-10 -> layer_with_weights-4
  layer_with_weights-5
    kernel  float32[128,10]  layer_with_weights-5/kernel/.ATTRIBUTES/VARIABLE_VALUE
    bias  float32[10]  layer_with_weights-5/bias/.ATTRIBUTES/VARIABLE_VALUE
  layer-11 -> layer_with_weights-5
  root -> (root)
31 objects, 16 values
)");
}

TEST(WeightsTest, ACnnLoadedBeforeItIsBuiltComputesWhatTheSavedOneDid) {
  TrainedCnn saved;
  CKFLOW_ASSERT_OK(saved.Train());
  const std::string prefix = testing::NewTempDir("weights") + "/weights";
  CKFLOW_ASSERT_OK(SaveWeights(saved.model, prefix, *saved.session));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> want,
                              saved.session->Run({{saved.images, saved.batch}}, {saved.inference}));

  Scope root = Scope::NewRootScope();
  auto model = examples::FashionMnistModel();
  Output images = ops::Placeholder(root, DT_FLOAT, {.shape = {-1, 28, 28, 1}});
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Session> session, Session::Create(root.graph()));
  // Deferred: nothing is built yet; each layer's weights restore as its
  // first call creates them.
  CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus status, LoadWeights(model, prefix, *session));
  Output inference = (*model)(root, images, false);
  ASSERT_TRUE(root.ok()) << root.status();
  CKFLOW_ASSERT_OK(status.RunRestoreOps(*session));
  CKFLOW_ASSERT_OK(status.AssertConsumed());
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> got,
                              session->Run({{images, saved.batch}}, {inference}));
  EXPECT_TRUE(testing::SameTensor(got[0], want[0]));
}

// As Keras' save_weights: a model that is not built is refused, a built
// one without weights (Sequential([Flatten])) saves its object graph alone,
// which loads back with every assertion passing.
TEST(WeightsTest, ABuiltModelWithoutWeightsSavesAndLoads) {
  Scope root = Scope::NewRootScope();
  auto model = Sequential::Make({Flatten::Make()});
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Session> session, Session::Create(root.graph()));
  const std::string prefix = testing::NewTempDir("weights") + "/weights";
  EXPECT_EQ(SaveWeights(model, prefix, *session).code(), StatusCode::kFailedPrecondition);
  (*model)(root, ops::Placeholder(root, DT_FLOAT, {.shape = {-1, 2, 3}}));
  ASSERT_TRUE(root.ok()) << root.status();
  CKFLOW_ASSERT_OK(SaveWeights(model, prefix, *session));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix));
  EXPECT_EQ(reader->entries().size(), 1u);  // the object graph

  auto other = Sequential::Make({Flatten::Make()});
  CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus status, LoadWeights(other, prefix, *session));
  CKFLOW_ASSERT_OK(status.RunRestoreOps(*session));
  CKFLOW_EXPECT_OK(status.AssertConsumed());
  CKFLOW_EXPECT_OK(status.AssertExistingObjectsMatched());
}

}  // namespace
}  // namespace ckflow
