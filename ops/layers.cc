#include "ops/layers.h"

#include <cctype>
#include <optional>
#include <set>
#include <span>
#include <string_view>
#include <utility>

#include "ops/array_ops.h"
#include "ops/initializers.h"
#include "ops/layers_internal.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"

namespace ckflow {
namespace {

void CollectVariables(const Trackable& object, std::set<const Trackable*>& seen,
                      std::vector<std::shared_ptr<Variable>>& out) {
  for (const auto& [name, child] : object.Children()) {
    if (!seen.insert(child.get()).second) continue;
    if (auto v = std::dynamic_pointer_cast<Variable>(child)) {
      out.push_back(std::move(v));
    } else {
      CollectVariables(*child, seen, out);
    }
  }
}

// The training flag of the layer call being built on a graph (Keras' call
// context): set by each Layer::operator() for the time of its Build and
// Call, so the layers it calls inherit it.
struct LayerCallContext : GraphAttachment {
  int depth = 0;  // layer calls in progress
  bool training = false;
};

// Enters a layer call: resolves its training flag and restores the outer
// call's on leaving.
class CallFrame {
 public:
  CallFrame(LayerCallContext& context, std::optional<bool> training)
      : context_(context), outer_training_(context.training) {
    context_.training = training.value_or(context_.depth > 0 && context_.training);
    ++context_.depth;
  }
  ~CallFrame() {
    --context_.depth;
    context_.training = outer_training_;
  }
  CallFrame(const CallFrame&) = delete;
  CallFrame& operator=(const CallFrame&) = delete;

 private:
  LayerCallContext& context_;
  const bool outer_training_;
};

}  // namespace

// ---------------------------------------------------------------- Layer

Layer::Layer(std::string type_name, std::string name)
    : type_name_(std::move(type_name)), name_(std::move(name)) {}

Output Layer::operator()(const Scope& scope, Output input, std::optional<bool> training) {
  if (!scope.ok()) return Output();
  const std::string context = "layer '" + name_ + "'";
  if (!input.valid()) {
    scope.UpdateStatus(InvalidArgumentError(context, ": the input is invalid"));
    return Output();
  }
  if (!tracking_status().ok()) {
    scope.UpdateStatus(Status(tracking_status()).WithContext(context));
    return Output();
  }
  Scope layer_scope = scope.NewSubScope(name_);
  CallFrame frame(scope.graph().Attachment<LayerCallContext>(), training);
  if (!built_) {
    Status s = Build(layer_scope, input);
    if (!s.ok()) {
      scope.UpdateStatus(s.WithContext(context));
      return Output();
    }
    if (!scope.ok()) return Output();
    if (!tracking_status().ok()) {
      scope.UpdateStatus(Status(tracking_status()).WithContext(context));
      return Output();
    }
    built_ = true;
  }
  return Call(layer_scope, input);
}

Status Layer::Build(const Scope&, const Output&) { return OkStatus(); }

bool Layer::training(const Scope& scope) {
  return scope.graph().Attachment<LayerCallContext>().training;
}

std::shared_ptr<Variable> Layer::AddWeight(const Scope& scope, const std::string& name,
                                           DataType dtype, const TensorShape& shape,
                                           const Initializer& initializer, bool trainable) {
  if (!scope.ok()) return nullptr;
  if (LookupChild(name) != nullptr) {
    // As TensorFlow's Trackable refuses a second dependency of one name:
    // replacing the first weight would orphan the ops that already read it.
    scope.UpdateStatus(InvalidArgumentError(
        "layer '", name_, "': AddWeight('", name,
        "'): a weight or dependency with this name is already declared; names must be unique"));
    return nullptr;
  }
  // A weight a restore waits for is read from the checkpoint, not
  // initialized.
  return Variable::CreateTracked(*this, scope, name, dtype, shape, initializer,
                                 {.trainable = trainable});
}

std::vector<std::shared_ptr<Variable>> Layer::variables() const {
  std::set<const Trackable*> seen{this};
  std::vector<std::shared_ptr<Variable>> out;
  CollectVariables(*this, seen, out);
  return out;
}

std::vector<std::shared_ptr<Variable>> Layer::trainable_variables() const {
  std::vector<std::shared_ptr<Variable>> out;
  for (auto& v : variables()) {
    if (v->trainable()) out.push_back(std::move(v));
  }
  return out;
}

std::vector<std::shared_ptr<Variable>> Layer::non_trainable_variables() const {
  std::vector<std::shared_ptr<Variable>> out;
  for (auto& v : variables()) {
    if (!v->trainable()) out.push_back(std::move(v));
  }
  return out;
}

// ------------------------------------------------------ shared checks

namespace internal {

Status CheckFloatInput(const Output& input) {
  if (input.dtype() != DT_FLOAT && input.dtype() != DT_DOUBLE) {
    return InvalidArgumentError("expects a float32 or float64 input, got ", input.name(), " of ",
                                DataTypeName(input.dtype()));
  }
  return OkStatus();
}

Status CheckImageInput(const Output& input) {
  const PartialShape& shape = input.shape();
  if (shape.rank() != 4 || shape.dim(3) < 0) {
    return InvalidArgumentError(
        "expects an input [batch, rows, cols, channels] with known channels, got ", input.name(),
        " of shape ", shape.ToString());
  }
  return CheckFloatInput(input);
}

Status CheckPositive(const Size2D& size, std::string_view what) {
  if (size.rows <= 0 || size.cols <= 0) {
    return InvalidArgumentError(what, " must be positive, got (", size.rows, ", ", size.cols, ")");
  }
  return OkStatus();
}

StatusOr<std::string> OpPadding(std::string_view padding) {
  std::string upper(padding);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (upper != "VALID" && upper != "SAME") {
    return InvalidArgumentError("padding must be \"valid\" or \"same\", got \"", padding, "\"");
  }
  return upper;
}

Output BiasAndActivation(const Scope& scope, Output y, const std::shared_ptr<Variable>& bias,
                         const Activation& activation) {
  if (bias != nullptr) y = ops::BiasAdd(scope, y, bias->Read(scope));
  if (activation) y = activation(scope, y);
  return y;
}

Output ContractLastAxes(const Scope& scope, Output x, int contracted, int64_t in_features,
                        Output matrix, Output bias, const std::vector<int64_t>& out_dims) {
  const PartialShape& shape = x.shape();
  const int leading = shape.rank() - contracted;
  Output flat = leading == 1 && contracted == 1
                    ? x
                    : ops::Reshape(scope, x, Tensor::FromVector<int64_t>({-1, in_features}));
  Output y = ops::MatMul(scope, flat, matrix);
  if (bias.valid()) y = ops::BiasAdd(scope, y, bias);
  if (leading == 1 && out_dims.size() == 1) return y;
  // The leading dimensions as constants if all are known, else read at run
  // time (a batch or sequence length fed later).
  std::vector<int64_t> dims;
  bool known = true;
  for (int d = 0; d < leading; ++d) {
    known = known && shape.dim(d) >= 0;
    dims.push_back(shape.dim(d));
  }
  dims.insert(dims.end(), out_dims.begin(), out_dims.end());
  if (known) return ops::Reshape(scope, y, Tensor::FromVector<int64_t>(dims));
  std::vector<int32_t> tail(out_dims.begin(), out_dims.end());
  Output target = ops::Concat(scope,
                              {ops::Slice(scope, ops::Shape(scope, x), {0}, {leading}),
                               ops::Const(scope, Tensor::FromVector<int32_t>(tail))},
                              0);
  return ops::Reshape(scope, y, target);
}

StatusOr<TensorShape> WeightShape(std::initializer_list<int64_t> dims) {
  StatusOr<TensorShape> shape =
      TensorShape::Make(std::span<const int64_t>(dims.begin(), dims.size()));
  if (!shape.ok()) return Status(shape.status()).WithContext("weight shape");
  return shape;
}

}  // namespace internal

// ---------------------------------------------------------------- Dense

Dense::Dense(int64_t units, DenseOptions options)
    : Layer("Dense", options.name), units_(units), options_(std::move(options)) {}

std::shared_ptr<Dense> Dense::Make(int64_t units, DenseOptions options) {
  return std::shared_ptr<Dense>(new Dense(units, std::move(options)));
}

Status Dense::Build(const Scope& scope, const Output& input) {
  if (units_ <= 0) return InvalidArgumentError("units must be positive, got ", units_);
  const PartialShape& shape = input.shape();
  if (!shape.known_rank() || shape.rank() < 2 || shape.dim(shape.rank() - 1) < 0) {
    return InvalidArgumentError(
        "expects an input [batch, ..., features] (rank >= 2) with known features, got ",
        input.name(), " of shape ", shape.ToString());
  }
  CKFLOW_RETURN_IF_ERROR(internal::CheckFloatInput(input));
  const Initializer& kernel_init =
      options_.kernel_initializer ? options_.kernel_initializer : initializers::GlorotUniform();
  kernel_ = AddWeight(scope, "kernel", input.dtype(),
                      TensorShape({shape.dim(shape.rank() - 1), units_}), kernel_init);
  if (options_.use_bias) {
    const Initializer& bias_init =
        options_.bias_initializer ? options_.bias_initializer : initializers::Zeros();
    bias_ = AddWeight(scope, "bias", input.dtype(), TensorShape({units_}), bias_init);
  }
  return OkStatus();
}

Output Dense::Call(const Scope& scope, Output input) {
  if (input.shape().rank() == 2) {
    return internal::BiasAndActivation(scope, ops::MatMul(scope, input, kernel_->Read(scope)),
                                       bias_, options_.activation);
  }
  // Keras' tensordot over the last axis: one MatMul of all positions.
  const int64_t features = kernel_->shape().dim(0);
  Output y = internal::ContractLastAxes(scope, input, 1, features, kernel_->Read(scope),
                                        bias_ ? bias_->Read(scope) : Output(), {units_});
  return options_.activation ? options_.activation(scope, y) : y;
}

// ----------------------------------------------------------- Sequential

namespace {
constexpr std::string_view kLayerEdge = "layer-";
constexpr std::string_view kWeightedLayerEdge = "layer_with_weights-";
}  // namespace

Sequential::Sequential(std::string name) : Layer("Sequential", std::move(name)) {}

std::shared_ptr<Sequential> Sequential::Make(std::vector<std::shared_ptr<Layer>> layers,
                                             std::string name) {
  auto model = std::shared_ptr<Sequential>(new Sequential(std::move(name)));
  for (auto& layer : layers) model->Add(std::move(layer));
  return model;
}

void Sequential::Add(std::shared_ptr<Layer> layer) {
  if (layer == nullptr) return;
  Track(std::string(kLayerEdge) + std::to_string(layers_.size()), layer);
  layers_.push_back(std::move(layer));
  TrackWeightedLayers();
}

void Sequential::TrackWeightedLayers() {
  size_t k = 0;
  for (const auto& layer : layers_) {
    if (layer->variables().empty()) continue;
    if (k == weighted_.size()) weighted_.push_back(nullptr);
    if (weighted_[k] != layer.get()) {
      weighted_[k] = layer.get();
      // Hands the layer to a restore waiting under this name (Keras'
      // _handle_deferred_layer_dependencies).
      TrackReplacing(std::string(kWeightedLayerEdge) + std::to_string(k), layer);
    }
    ++k;
  }
}

Output Sequential::Call(const Scope& scope, Output input) {
  Output x = input;
  for (const auto& layer : layers_) {
    x = (*layer)(scope, x);
    if (!x.valid()) return Output();
  }
  TrackWeightedLayers();
  return x;
}

std::vector<std::pair<std::string, std::shared_ptr<Trackable>>> Sequential::Children() const {
  std::vector<std::pair<std::string, std::shared_ptr<Trackable>>> out;
  for (size_t i = 0; i < layers_.size(); ++i) {
    for (size_t k = 0; k < weighted_.size(); ++k) {
      if (weighted_[k] == layers_[i].get()) {
        out.emplace_back(std::string(kWeightedLayerEdge) + std::to_string(k), layers_[i]);
      }
    }
    out.emplace_back(std::string(kLayerEdge) + std::to_string(i), layers_[i]);
  }
  for (auto& [name, child] : Trackable::Children()) {
    if (!name.starts_with(kLayerEdge) && !name.starts_with(kWeightedLayerEdge)) {
      out.emplace_back(name, std::move(child));
    }
  }
  return out;
}

}  // namespace ckflow
