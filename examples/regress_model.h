// TensorFlow's classic Regress model, shared by the graph-mode example
// (regress.cc), the eager one (regress_eager.cc) and the data-parallel one
// (distributed_train.cc): a Dense(10) named input_transform, a hidden ReLU
// layer and a Dense(1) output.

#ifndef CKFLOW_EXAMPLES_REGRESS_MODEL_H_
#define CKFLOW_EXAMPLES_REGRESS_MODEL_H_

#include <memory>

#include "ops/layers.h"
#include "ops/nn_ops.h"

namespace ckflow::examples {

class Regress : public Model {
 public:
  Regress() : Model("regress") {
    input_transform_ = Track("input_transform", Dense::Make(10));
    hidden_ = Track("hidden", Dense::Make(10, {.activation = ops::Relu}));
    output_ = Track("output", Dense::Make(1));
  }

 protected:
  Output Call(const Scope& scope, Output x) override {
    return (*output_)(scope, (*hidden_)(scope, (*input_transform_)(scope, x)));
  }

 private:
  std::shared_ptr<Dense> input_transform_, hidden_, output_;
};

}  // namespace ckflow::examples

#endif  // CKFLOW_EXAMPLES_REGRESS_MODEL_H_
