// The smallest ckflow program: build a graph, run it in a session, print the
// result.
//
//   y = relu(x · w + b)  for x = [[1, 2], [3, 4]], w = [[1, -1], [0.5, 2]], b = [0.5, -8]
#include <cstdio>
#include <memory>
#include <vector>

#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"
#include "runtime/session.h"

int main() {
  using namespace ckflow;  // NOLINT: an example reads better without prefixes
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, {.shape = {-1, 2}});
  Output w = ops::Const<float>(root.WithOpName("w"), {1, -1, 0.5f, 2}, {2, 2});
  Output b = ops::Const<float>(root.WithOpName("b"), {0.5f, -8}, {2});
  Output y = ops::Relu(root.WithOpName("y"), ops::BiasAdd(root, ops::MatMul(root, x, w), b));

  StatusOr<std::unique_ptr<Session>> session = Session::Create(root.graph());
  if (!session.ok()) {
    std::fprintf(stderr, "hello_graph: %s\n", session.status().ToString().c_str());
    return 1;
  }
  Tensor input = Tensor::FromVector<float>({1, 2, 3, 4}, TensorShape({2, 2}));
  StatusOr<std::vector<Tensor>> out = (*session)->Run({{x, input}}, {y});
  if (!out.ok()) {
    std::fprintf(stderr, "hello_graph: %s\n", out.status().ToString().c_str());
    return 1;
  }
  std::printf("x = %s\ny = relu(x · w + b) = %s\n", input.DebugString().c_str(),
              (*out)[0].DebugString().c_str());
  return 0;
}
