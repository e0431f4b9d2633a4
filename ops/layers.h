// Keras-style layers and models in C++: Layer, Dense, Sequential, and Model
// as the base of a user's own model class.
//
//   class Regress : public Model {
//    public:
//     Regress() : Model("regress") {
//       input_transform_ = Track("input_transform", Dense::Make(10));
//       output_ = Track("output", Dense::Make(1));
//     }
//    protected:
//     Output Call(const Scope& scope, Output x) override {
//       return (*output_)(scope, ops::Relu(scope, (*input_transform_)(scope, x)));
//     }
//    private:
//     std::shared_ptr<Dense> input_transform_, output_;
//   };
//
//   auto model = std::make_shared<Regress>();
//   Output y = (*model)(root, x);   // builds the layers' variables now
//
// A layer builds lazily: its first call sees the input's dtype and shape and
// creates the variables then (Build), every call adds the layer's ops
// (Call). Weights are created with AddWeight, which creates the variable
// through Variable::Create and tracks it as a child under its name ("kernel",
// "bias"), so a checkpoint restore requested before the first call restores
// it the moment it exists. A model tracks its layers with Track(name, layer):
// the names are the edges of the object graph a checkpoint saves, in
// registration order. A name is declared once: a second AddWeight or Track
// of a name already taken is InvalidArgument naming the layer and the name
// (AddWeight's in the scope at once, Track's by the layer's next call).
//
// Names in the graph: a layer's first call opens the name scope of its name
// ("dense", made unique: "dense_1"), which holds its variables
// ("dense/kernel") and its ops; later calls open a fresh scope for their ops
// and reuse the variables.
//
// The training flag (Keras' `training=`): a call may say whether it builds
// the training computation (Dropout drops, BatchNormalization normalizes
// with the batch's statistics and updates its moving ones) or the inference
// one. An explicit value wins; a call that gives none inherits the value of
// the layer call it is made inside (a model's Call calling its layers), as
// Keras' call context does; a call outside any other is inference (false),
// as Keras outside fit(). The value of the call being built is kept with the
// graph (not in a global), and a layer's Build and Call read it with
// training(scope). A graph-mode program that needs both computations calls
// the model twice, (*model)(scope, x, true) and (*model)(scope, x, false):
// the second call reuses the variables the first created.
//
// Errors: a call returns an invalid Output and leaves the error sticky in
// the scope, prefixed with the layer's name.
//
// Thread safety: building is single-threaded.

#ifndef CKFLOW_OPS_LAYERS_H_
#define CKFLOW_OPS_LAYERS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "graph/graph.h"
#include "graph/trackable.h"
#include "ops/variables.h"

namespace ckflow {

// An elementwise function applied to a layer's output, e.g. ops::Relu or
// ops::Tanh (their builders have this signature).
using Activation = std::function<Output(const Scope& scope, Output x)>;

// (rows, columns) of a 2-D window, stride or dilation: Keras' "an integer
// or a tuple of 2 integers". Size2D(3) is (3, 3); {3, 5} is (3, 5).
struct Size2D {
  Size2D(int64_t both) : rows(both), cols(both) {}  // NOLINT: Keras' int form
  Size2D(int64_t r, int64_t c) : rows(r), cols(c) {}
  int64_t rows;
  int64_t cols;
};

class Layer : public Trackable {
 public:
  // Builds the layer if this is its first call, then adds its ops to
  // `scope`'s graph applied to `input`: the training computation if
  // `training` is true, the inference one if false, and if it is not given,
  // the one of the layer call this call is made inside (inference outside
  // any).
  Output operator()(const Scope& scope, Output input, std::optional<bool> training = std::nullopt);

  // The name given at construction; the graph uses it, made unique, as the
  // layer's name scope.
  const std::string& name() const { return name_; }
  bool built() const { return built_; }

  // The variables of this layer and of everything it tracks, once each, in
  // tracking order (depth first). Empty before the first call.
  std::vector<std::shared_ptr<Variable>> variables() const;
  std::vector<std::shared_ptr<Variable>> trainable_variables() const;
  std::vector<std::shared_ptr<Variable>> non_trainable_variables() const;

  std::string TypeName() const override { return type_name_; }

 protected:
  Layer(std::string type_name, std::string name);

  // Creates the layer's variables for `input` (its dtype and shape) with
  // AddWeight. Called once, by the first call, in the layer's name scope.
  virtual Status Build(const Scope& scope, const Output& input);
  // The layer's computation. `scope` is the call's name scope.
  virtual Output Call(const Scope& scope, Output input) = 0;

  // Whether the call being built on `scope`'s graph is a training call (see
  // the top of this file). REQUIRES: called from Build or Call.
  static bool training(const Scope& scope);

  // A variable `name` of `dtype` and `shape` in the layer's name scope,
  // initialized by `initializer` and tracked as the child `name`. Null, and
  // InvalidArgument in the scope, if the layer already has a child `name`.
  std::shared_ptr<Variable> AddWeight(const Scope& scope, const std::string& name, DataType dtype,
                                      const TensorShape& shape, const Initializer& initializer,
                                      bool trainable = true);

 private:
  const std::string type_name_;
  const std::string name_;
  bool built_ = false;
};

struct DenseOptions {
  Activation activation;  // none if empty
  bool use_bias = true;
  Initializer kernel_initializer;  // GlorotUniform() if empty
  Initializer bias_initializer;    // Zeros() if empty
  std::string name = "dense";
};

// output = activation(input · kernel + bias) for inputs [batch, features];
// kernel is [features, units], bias [units]. An input of higher rank
// [batch, ..., features] is multiplied along its last axis, as Keras' Dense
// does: output [batch, ..., units]. The variables take the input's dtype
// (float32 or float64).
class Dense : public Layer {
 public:
  static std::shared_ptr<Dense> Make(int64_t units, DenseOptions options = {});

  int64_t units() const { return units_; }
  // Null before the first call (and bias without use_bias).
  const std::shared_ptr<Variable>& kernel() const { return kernel_; }
  const std::shared_ptr<Variable>& bias() const { return bias_; }

 protected:
  Status Build(const Scope& scope, const Output& input) override;
  Output Call(const Scope& scope, Output input) override;

 private:
  Dense(int64_t units, DenseOptions options);

  const int64_t units_;
  const DenseOptions options_;
  std::shared_ptr<Variable> kernel_;
  std::shared_ptr<Variable> bias_;
};

// Layers applied one after another. Children as Keras orders them: for each
// layer I in order, "layer_with_weights-K" if it has variables (K counts only
// such layers), then "layer-I"; then anything else tracked.
class Sequential : public Layer {
 public:
  static std::shared_ptr<Sequential> Make(std::vector<std::shared_ptr<Layer>> layers = {},
                                          std::string name = "sequential");

  // Appends a layer (tracked as "layer-I"). A null layer is ignored.
  void Add(std::shared_ptr<Layer> layer);
  const std::vector<std::shared_ptr<Layer>>& layers() const { return layers_; }

  std::vector<std::pair<std::string, std::shared_ptr<Trackable>>> Children() const override;

 protected:
  Output Call(const Scope& scope, Output input) override;

 private:
  explicit Sequential(std::string name);
  // Tracks "layer_with_weights-K" for layers that have variables now.
  void TrackWeightedLayers();

  std::vector<std::shared_ptr<Layer>> layers_;
  std::vector<const Layer*> weighted_;  // tracked as layer_with_weights-K, in order
};

// The base of a user's model: a layer whose Call combines the layers it
// tracks (see the example at the top). Its variables are created by its
// layers' first calls.
class Model : public Layer {
 protected:
  explicit Model(std::string name = "model") : Layer("Model", std::move(name)) {}
};

}  // namespace ckflow

#endif  // CKFLOW_OPS_LAYERS_H_
