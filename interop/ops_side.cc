// ckflow's side of the op judges (interop/test_window_ops.py is TensorFlow's):
// runs one named op on tensors from a values file and writes its output and
// the gradients of its inputs.
//
//   interop_ops --op Conv2D --in IN --out OUT [--strides 1,2,2,1]
//               [--padding SAME] [--explicit-paddings ...] [--dilations ...]
//               [--ksize 1,2,2,1]
//
// IN holds the op's inputs by argument name ("input" and "filter" for the
// convolutions, "input" for MaxPool, "value" for AvgPool) and "dy", the
// gradient flowing into the op's output. OUT gets "y", the output, and
// "d_<arg>" for each input: AddGradients of y with grad_ys {dy}, so the
// gradient ops are the ones ckflow registers for the op. Ops are looked up
// in one table keyed by op type; an op family adds its rows there.
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
};

struct OpRunner {
  std::vector<std::string> args;  // input names, in the op's order
  std::function<Output(const Scope&, const std::vector<Output>&, const Attrs&)> build;
};

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
  static const auto* const runners = new std::map<std::string, OpRunner>{
      {"Conv2D",
       {{"input", "filter"},
        [](const Scope& s, const std::vector<Output>& x, const Attrs& a) {
          return ops::Conv2D(s, x[0], x[1], ConvAttrs(a));
        }}},
      {"DepthwiseConv2dNative",
       {{"input", "filter"},
        [](const Scope& s, const std::vector<Output>& x, const Attrs& a) {
          return ops::DepthwiseConv2dNative(s, x[0], x[1], ConvAttrs(a));
        }}},
      {"MaxPool",
       {{"input"},
        [](const Scope& s, const std::vector<Output>& x, const Attrs& a) {
          return ops::MaxPool(s, x[0], PoolAttrs(a));
        }}},
      {"AvgPool",
       {{"value"},
        [](const Scope& s, const std::vector<Output>& x, const Attrs& a) {
          return ops::AvgPool(s, x[0], PoolAttrs(a));
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
  std::vector<Output> xs;
  for (const std::string& arg : runner->second.args) {
    auto it = by_name.find(arg);
    if (it == by_name.end()) return InvalidArgumentError(in, ": no tensor '", arg, "'");
    xs.push_back(ops::Const(root.WithOpName(arg), it->second));
  }
  auto dy = by_name.find("dy");
  if (dy == by_name.end()) return InvalidArgumentError(in, ": no tensor 'dy'");
  Output y = runner->second.build(root.WithOpName(op), xs, attrs);
  CKFLOW_RETURN_IF_ERROR(root.status());
  CKFLOW_ASSIGN_OR_RETURN(std::vector<Output> grads,
                          AddGradients(root, {y}, xs, {ops::Const(root, dy->second)}));
  std::vector<Output> fetches = {y};
  fetches.insert(fetches.end(), grads.begin(), grads.end());
  CKFLOW_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::Create(root.graph()));
  CKFLOW_ASSIGN_OR_RETURN(std::vector<Tensor> values, session->Run({}, fetches));
  NamedTensors written = {{"y", values[0]}};
  for (size_t i = 0; i < xs.size(); ++i) {
    written.emplace_back("d_" + runner->second.args[i], values[i + 1]);
  }
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
  app.add_option("--out", out, "values file to write: y and d_<arg> per input")->required();
  app.add_option("--strides", attrs.strides, "strides")->delimiter(',');
  app.add_option("--ksize", attrs.ksize, "ksize (pooling)")->delimiter(',');
  app.add_option("--dilations", attrs.dilations, "dilations (convolutions)")->delimiter(',');
  app.add_option("--explicit-paddings", attrs.explicit_paddings, "with --padding EXPLICIT")
      ->delimiter(',');
  app.add_option("--padding", attrs.padding, "SAME, VALID or EXPLICIT");
  CLI11_PARSE(app, argc, argv);
  ckflow::Status status = Run(op, in, out, attrs);
  if (!status.ok()) {
    std::fprintf(stderr, "interop_ops: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
