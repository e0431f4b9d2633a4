// ckflow's side of the op judges (interop/test_window_ops.py and
// interop/test_nn_ops.py are TensorFlow's): runs one named op on tensors from
// a values file and writes its outputs and the gradients of its inputs.
//
//   interop_ops --op Conv2D --in IN --out OUT [--strides 1,2,2,1]
//               [--padding SAME] [--explicit-paddings ...] [--dilations ...]
//               [--ksize 1,2,2,1] [--epsilon E] [--exponential-avg-factor F]
//               [--is-training BOOL] [--alpha A] [--adj-x BOOL] [--adj-y BOOL]
//               [--axis 1,3] [--approximate BOOL] [--num-split N]
//
// IN holds the op's inputs by TensorFlow's argument names ("input" and
// "filter" for the convolutions, "x", "scale", ... for FusedBatchNormV3; a
// list argument as "values_0", "values_1", ...) and "dy", the gradient
// flowing into the op's first output. OUT gets "y", the first output, "y1",
// "y2", ... the others, and "d_<arg>" for each input that has a gradient:
// AddGradients of y with grad_ys {dy}, so the gradient ops are the ones
// ckflow registers for the op. Ops are looked up in one table keyed by op
// type; an op family adds its rows there.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "interop/values_file.h"
#include "ops/array_ops.h"
#include "ops/conv_ops.h"
#include "ops/gradients.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"
#include "ops/normalization_ops.h"
#include "ops/pooling_ops.h"
#include "runtime/session.h"

namespace ckflow::interop {
namespace {

struct Attrs {
  std::vector<int64_t> strides = {1, 1, 1, 1};
  std::vector<int64_t> ksize = {1, 1, 1, 1};
  std::vector<int64_t> dilations = {1, 1, 1, 1};
  std::vector<int64_t> explicit_paddings;
  std::string padding = "VALID";
  float epsilon = 1e-4f;
  float exponential_avg_factor = 1.0f;
  bool is_training = true;
  float alpha = 0.2f;
  bool adj_x = false;
  bool adj_y = false;
  std::vector<int64_t> axis;  // Squeeze's
  bool approximate = false;   // Gelu's
  int64_t num_split = 1;      // Split's and SplitV's, DynamicPartition's num_partitions
  // StridedSlice's begin, end, ellipsis, new axis and shrink axis masks.
  std::vector<int64_t> masks = {0, 0, 0, 0, 0};
};

struct OpRunner {
  // Input names, in the op's order; "values*" is a list argument, as many
  // "values_<i>" as the file holds.
  std::vector<std::string> args;
  // The op's outputs; the gradient flows into the first.
  std::function<std::vector<Output>(const Scope&, const std::vector<Output>&, const Attrs&)> build;
};

template <Output (*kFn)(const Scope&, ops::Input)>
OpRunner Activation() {
  return {{"features"}, [](const Scope& s, const std::vector<Output>& x, const Attrs&) {
            return std::vector<Output>{kFn(s, x[0])};
          }};
}

ops::Conv2DAttrs ConvAttrs(const Attrs& a) {
  return {.strides = a.strides,
          .padding = a.padding,
          .explicit_paddings = a.explicit_paddings,
          .dilations = a.dilations};
}

ops::PoolAttrs PoolAttrs(const Attrs& a) {
  return {.ksize = a.ksize, .strides = a.strides, .padding = a.padding};
}

const std::map<std::string, OpRunner>& Runners() {
  static const auto* const
      runners =
          new std::map<std::string, OpRunner>{
              {"Conv2D",
               {{"input", "filter"},
                [](const Scope& s, const std::vector<Output>& x, const Attrs& a) {
                  return std::vector<Output>{ops::Conv2D(s, x[0], x[1], ConvAttrs(a))};
                }}},
              {"DepthwiseConv2dNative",
               {{"input", "filter"},
                [](const Scope& s, const std::vector<Output>& x, const Attrs& a) {
                  return std::vector<Output>{
                      ops::DepthwiseConv2dNative(s, x[0], x[1], ConvAttrs(a))};
                }}},
              {"MaxPool",
               {{"input"},
                [](const Scope& s, const std::vector<Output>& x, const Attrs& a) {
                  return std::vector<Output>{ops::MaxPool(s, x[0], PoolAttrs(a))};
                }}},
              {"AvgPool",
               {{"value"},
                [](const Scope& s, const std::vector<Output>& x, const Attrs& a) {
                  return std::vector<Output>{ops::AvgPool(s, x[0], PoolAttrs(a))};
                }}},
              {"FusedBatchNormV3",
               {{"x", "scale", "offset", "mean", "variance"},
                [](const Scope& s, const std::vector<Output>& x, const Attrs& a) {
                  ops::FusedBatchNormOutputs bn =
                      ops::FusedBatchNorm(s, x[0], x[1], x[2], x[3], x[4],
                                          {.epsilon = a.epsilon,
                                           .exponential_avg_factor = a.exponential_avg_factor,
                                           .is_training = a.is_training});
                  return std::vector<Output>{bn.y, bn.batch_mean, bn.batch_variance,
                                             bn.reserve_space_1, bn.reserve_space_2};
                }}},
              {"Relu6", Activation<ops::Relu6>()},
              {"Elu", Activation<ops::Elu>()},
              {"Selu", Activation<ops::Selu>()},
              {"Softplus", Activation<ops::Softplus>()},
              {"LeakyRelu",
               {{"features"},
                [](const Scope& s, const std::vector<Output>& x, const Attrs& a) {
                  return std::vector<Output>{ops::LeakyRelu(s, x[0], a.alpha)};
                }}},
              {"Pad",
               {{"input", "paddings"},
                [](const Scope& s, const std::vector<Output>& x, const Attrs&) {
                  return std::vector<Output>{ops::Pad(s, x[0], x[1])};
                }}},
              {"PadV2",
               {{"input", "paddings", "constant_values"},
                [](const Scope& s, const std::vector<Output>& x, const Attrs&) {
                  return std::vector<Output>{ops::PadV2(s, x[0], x[1], x[2])};
                }}},
              {"Slice",
               {{"input", "begin", "size"},
                [](const Scope& s, const std::vector<Output>& x, const Attrs&) {
                  return std::vector<Output>{ops::Slice(s, x[0], x[1], x[2])};
                }}},
              {"Transpose",
               {{"x", "perm"},
                [](const Scope& s, const std::vector<Output>& x, const Attrs&) {
                  return std::vector<Output>{ops::Transpose(s, x[0], x[1])};
                }}},
              {"ExpandDims",
               {{"input", "axis"},
                [](const Scope& s, const std::vector<Output>& x, const Attrs&) {
                  return std::vector<Output>{ops::ExpandDims(s, x[0], x[1])};
                }}},
              {"Squeeze",
               {{"input"},
                [](const Scope& s, const std::vector<Output>& x, const Attrs& a) {
                  return std::vector<Output>{ops::Squeeze(s, x[0], a.axis)};
                }}},
              {"BatchMatMulV2",
               {{"x", "y"},
                [](const Scope& s, const std::vector<Output>& x, const Attrs& a) {
                  return std::vector<Output>{
                      ops::BatchMatMul(s, x[0], x[1], {.adj_x = a.adj_x, .adj_y = a.adj_y})};
                }}},
              {"Erf",
               {{"x"},
                [](const Scope& s, const std::vector<Output>& x, const Attrs&) {
                  return std::vector<Output>{ops::Erf(s, x[0])};
                }}},
              {"GatherV2",
               {{"params", "indices", "axis"},
                [](const Scope& s, const std::vector<Output>& x, const Attrs&) {
                  return std::vector<Output>{ops::Gather(s, x[0], x[1], x[2])};
                }}},
              {"UnsortedSegmentSum",
               {{"data", "segment_ids", "num_segments"},
                [](const Scope& s, const std::vector<Output>& x, const Attrs&) {
                  return std::vector<Output>{ops::UnsortedSegmentSum(s, x[0], x[1], x[2])};
                }}},
              {"Erfc",
               {{"x"},
                [](const Scope& s, const std::vector<Output>& x, const Attrs&) {
                  return std::vector<Output>{ops::Erfc(s, x[0])};
                }}},
              // Not one op but tf.nn.gelu's composition, judged as a whole.
              {"Gelu",
               {{"features"},
                [](const Scope& s, const std::vector<Output>& x, const Attrs& a) {
                  return std::vector<Output>{ops::Gelu(s, x[0], a.approximate)};
                }}},
              {"Split",
               {{"axis", "value"},
                [](const Scope& s, const std::vector<Output>& x, const Attrs& a) {
                  return ops::Split(s, x[0], x[1], a.num_split);
                }}},
              {"SplitV",
               {{"value", "size_splits", "axis"},
                [](const Scope& s, const std::vector<Output>& x, const Attrs& a) {
                  return ops::SplitV(s, x[0], x[1], x[2], a.num_split);
                }}},
              {"Tile",
               {{"input", "multiples"},
                [](const Scope& s, const std::vector<Output>& x, const Attrs&) {
                  return std::vector<Output>{ops::Tile(s, x[0], x[1])};
                }}},
              {"OneHot",
               {{"indices", "depth", "on_value", "off_value"},
                [](const Scope& s, const std::vector<Output>& x, const Attrs& a) {
                  return std::vector<Output>{
                      ops::OneHot(s, x[0], x[1], x[2], x[3], a.axis.empty() ? -1 : a.axis[0])};
                }}},
              {"MatrixBandPart",
               {{"input", "num_lower", "num_upper"},
                [](const Scope& s, const std::vector<Output>& x, const Attrs&) {
                  return std::vector<Output>{ops::MatrixBandPart(s, x[0], x[1], x[2])};
                }}},
              {"StridedSlice",
               {{"input", "begin", "end", "strides"},
                [](const Scope& s, const std::vector<Output>& x, const Attrs& a) {
                  return std::vector<Output>{ops::StridedSlice(
                      s, x[0], x[1], x[2], x[3],
                      {a.masks.at(0), a.masks.at(1), a.masks.at(2), a.masks.at(3), a.masks.at(4)})};
                }}},
              {"DynamicPartition",
               {{"data", "partitions"},
                [](const Scope& s, const std::vector<Output>& x, const Attrs& a) {
                  return ops::DynamicPartition(s, x[0], x[1], a.num_split);
                }}},
              {"DynamicStitch",
               {{"indices*", "data*"},
                [](const Scope& s, const std::vector<Output>& x, const Attrs&) {
                  const auto half = static_cast<std::ptrdiff_t>(x.size() / 2);
                  return std::vector<Output>{
                      ops::DynamicStitch(s, std::vector<Output>(x.begin(), x.begin() + half),
                                         std::vector<Output>(x.begin() + half, x.end()))};
                }}},
              {"ConcatV2",
               {{"values*", "axis"},
                [](const Scope& s, const std::vector<Output>& x, const Attrs&) {
                  return std::vector<Output>{
                      ops::Concat(s, std::vector<Output>(x.begin(), x.end() - 1), x.back())};
                }}},
          };
  return *runners;
}

Status Run(const std::string& op, const std::string& in, const std::string& out,
           const Attrs& attrs) {
  auto runner = Runners().find(op);
  if (runner == Runners().end()) return InvalidArgumentError("no runner for op '", op, "'");
  CKFLOW_ASSIGN_OR_RETURN(NamedTensors given, ReadValues(in));
  std::map<std::string, Tensor> by_name(given.begin(), given.end());
  Scope root = Scope::NewRootScope();
  std::vector<std::string> names;  // of xs
  std::vector<Output> xs;
  auto add = [&](const std::string& name) -> Status {
    auto it = by_name.find(name);
    if (it == by_name.end()) return InvalidArgumentError(in, ": no tensor '", name, "'");
    names.push_back(name);
    xs.push_back(ops::Const(root.WithOpName(name), it->second));
    return OkStatus();
  };
  for (const std::string& arg : runner->second.args) {
    if (!arg.ends_with("*")) {
      CKFLOW_RETURN_IF_ERROR(add(arg));
      continue;
    }
    const std::string list = arg.substr(0, arg.size() - 1);
    for (int i = 0; i == 0 || by_name.count(list + "_" + std::to_string(i)); ++i) {
      CKFLOW_RETURN_IF_ERROR(add(list + "_" + std::to_string(i)));
    }
  }
  auto dy = by_name.find("dy");
  if (dy == by_name.end()) return InvalidArgumentError(in, ": no tensor 'dy'");
  std::vector<Output> ys = runner->second.build(root.WithOpName(op), xs, attrs);
  CKFLOW_RETURN_IF_ERROR(root.status());
  CKFLOW_ASSIGN_OR_RETURN(std::vector<Output> grads,
                          AddGradients(root, {ys[0]}, xs, {ops::Const(root, dy->second)}));
  std::vector<Output> fetches = ys;
  std::vector<std::string> keys = {"y"};
  for (size_t i = 1; i < ys.size(); ++i) keys.push_back("y" + std::to_string(i));
  for (size_t i = 0; i < xs.size(); ++i) {
    if (!grads[i].valid()) continue;  // an integer input (paddings, axis, ...)
    fetches.push_back(grads[i]);
    keys.push_back("d_" + names[i]);
  }
  CKFLOW_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::Create(root.graph()));
  CKFLOW_ASSIGN_OR_RETURN(std::vector<Tensor> values, session->Run({}, fetches));
  NamedTensors written;
  for (size_t i = 0; i < values.size(); ++i) written.emplace_back(keys[i], values[i]);
  return WriteValues(out, written);
}

}  // namespace
}  // namespace ckflow::interop

int main(int argc, char** argv) {
  using namespace ckflow::interop;  // NOLINT
  CLI::App app{"runs one op of ckflow's on tensors from a values file, with its gradients"};
  std::string op, in, out;
  Attrs attrs;
  app.add_option("--op", op, "the op type")->required();
  app.add_option("--in", in, "values file: the inputs by argument name, and dy")->required();
  app.add_option("--out", out, "values file to write: y, y1, ... and d_<arg> per input")
      ->required();
  app.add_option("--strides", attrs.strides, "strides")->delimiter(',');
  app.add_option("--ksize", attrs.ksize, "ksize (pooling)")->delimiter(',');
  app.add_option("--dilations", attrs.dilations, "dilations (convolutions)")->delimiter(',');
  app.add_option("--explicit-paddings", attrs.explicit_paddings, "with --padding EXPLICIT")
      ->delimiter(',');
  app.add_option("--padding", attrs.padding, "SAME, VALID or EXPLICIT");
  app.add_option("--epsilon", attrs.epsilon, "FusedBatchNormV3's epsilon");
  app.add_option("--exponential-avg-factor", attrs.exponential_avg_factor,
                 "FusedBatchNormV3's exponential_avg_factor");
  app.add_option("--is-training", attrs.is_training, "FusedBatchNormV3's is_training");
  app.add_option("--alpha", attrs.alpha, "LeakyRelu's alpha");
  app.add_option("--adj-x", attrs.adj_x, "BatchMatMulV2's adj_x");
  app.add_option("--adj-y", attrs.adj_y, "BatchMatMulV2's adj_y");
  app.add_option("--axis", attrs.axis, "Squeeze's axis (squeeze_dims)")->delimiter(',');
  app.add_option("--approximate", attrs.approximate, "Gelu's approximate (tanh)");
  app.add_option("--num-split", attrs.num_split,
                 "Split's and SplitV's num_split, DynamicPartition's num_partitions");
  app.add_option("--masks", attrs.masks, "StridedSlice's five masks, begin to shrink_axis")
      ->delimiter(',')
      ->expected(5);
  CLI11_PARSE(app, argc, argv);
  ckflow::Status status = Run(op, in, out, attrs);
  if (!status.ok()) {
    std::fprintf(stderr, "interop_ops: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
