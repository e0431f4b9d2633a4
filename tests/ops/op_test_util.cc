#include "tests/ops/op_test_util.h"

#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "ops/array_ops.h"

namespace ckflow::testing {

StatusOr<std::vector<Tensor>> Evaluator::Run(const std::vector<std::pair<Output, Tensor>>& feeds,
                                             const std::vector<Output>& fetches) {
  CKFLOW_RETURN_IF_ERROR(graph_.status());
  std::map<std::pair<int, int>, Tensor> values;
  for (const auto& [output, value] : feeds) {
    values[{output.node()->id(), output.index()}] = value;
  }
  // The nodes the fetches need, stopping at fed outputs.
  std::set<int> needed;
  std::vector<const Node*> stack;
  auto want = [&](const Output& o) {
    if (!values.count({o.node()->id(), o.index()})) stack.push_back(o.node());
  };
  for (const Output& f : fetches) want(f);
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (!needed.insert(n->id()).second) continue;
    for (const Output& in : n->inputs()) want(in);
    for (const Node* dep : n->control_inputs()) stack.push_back(dep);
  }
  for (int id : needed) {  // ascending ids: a topological order
    const Node* n = graph_.node(id);
    auto it = kernels_.find(id);
    if (it == kernels_.end()) {
      if (!n->op_def().kernel_factory) {
        return UnimplementedError(n->name(), " (", n->type(), "): no kernel");
      }
      StatusOr<Kernel> k = n->op_def().kernel_factory(*n);
      if (!k.ok()) return k.status().WithContext(n->name() + " (" + n->type() + ")");
      it = kernels_.emplace(id, *std::move(k)).first;
    }
    std::vector<const Tensor*> inputs;
    for (const Output& in : n->inputs())
      inputs.push_back(&values.at({in.node()->id(), in.index()}));
    std::vector<Tensor> outputs(n->num_outputs());
    KernelContext ctx(*n, inputs, outputs, resources_);
    Status s = it->second(ctx);
    if (!s.ok()) return s.WithContext(n->name() + " (" + n->type() + ")");
    for (int i = 0; i < n->num_outputs(); ++i) {
      if (!outputs[i].IsValid()) {
        return InternalError(n->name(), " (", n->type(), "): output ", i, " not set");
      }
      if (outputs[i].dtype() != n->output_type(i) ||
          !n->output_shape(i).IsCompatibleWith(outputs[i].shape())) {
        return InternalError(n->name(), " (", n->type(), "): output ", i, " is ",
                             DataTypeName(outputs[i].dtype()), outputs[i].shape().ToString(),
                             ", declared ", DataTypeName(n->output_type(i)),
                             n->output_shape(i).ToString());
      }
      values.emplace(std::make_pair(id, i), std::move(outputs[i]));
    }
  }
  std::vector<Tensor> result;
  for (const Output& f : fetches) result.push_back(values.at({f.node()->id(), f.index()}));
  return result;
}

StatusOr<Tensor> Evaluator::Run(const Output& fetch,
                                const std::vector<std::pair<Output, Tensor>>& feeds) {
  CKFLOW_ASSIGN_OR_RETURN(std::vector<Tensor> out, Run(feeds, {fetch}));
  return out[0];
}

StatusOr<Tensor> Evaluate(const Output& fetch,
                          const std::vector<std::pair<Output, Tensor>>& feeds) {
  if (!fetch.valid()) return InvalidArgumentError("fetch is invalid");
  Evaluator evaluator(fetch.node()->graph());
  return evaluator.Run(fetch, feeds);
}

StatusOr<Tensor> EvaluateWithThreads(const Output& fetch, int threads) {
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, threads);
  return Evaluate(fetch);
}

Status RunWithFedShapes(BinaryBuilder build, const std::string& name, const TensorShape& a_shape,
                        const TensorShape& b_shape, DataType dtype) {
  Scope root = Scope::NewRootScope();
  Output a = ops::Placeholder(root.WithOpName("a"), dtype);
  Output b = ops::Placeholder(root.WithOpName("b"), dtype);
  Output y = build(root.WithOpName(name), a, b);
  CKFLOW_RETURN_IF_ERROR(root.status());
  return Evaluate(y, {{a, Tensor(dtype, a_shape)}, {b, Tensor(dtype, b_shape)}}).status();
}

Tensor MakeTensor(DataType dtype, const TensorShape& shape, const std::vector<double>& values) {
  Tensor t(dtype, shape);
  for (size_t i = 0; i < values.size(); ++i) {
    switch (dtype) {
      case DT_FLOAT:
        t.flat<float>()[i] = static_cast<float>(values[i]);
        break;
      case DT_DOUBLE:
        t.flat<double>()[i] = values[i];
        break;
      case DT_INT32:
        t.flat<int32_t>()[i] = static_cast<int32_t>(values[i]);
        break;
      case DT_INT64:
        t.flat<int64_t>()[i] = static_cast<int64_t>(values[i]);
        break;
      case DT_BOOL:
        t.flat<bool>()[i] = values[i] != 0;
        break;
      default:
        ADD_FAILURE() << "MakeTensor: unsupported dtype " << DataTypeName(dtype);
    }
  }
  return t;
}

Tensor RandomTensor(DataType dtype, const TensorShape& shape, std::mt19937& rng, double lo,
                    double hi) {
  std::vector<double> values(shape.num_elements());
  for (double& v : values) {
    if (dtype == DT_FLOAT || dtype == DT_DOUBLE) {
      v = std::uniform_real_distribution<double>(lo, hi)(rng);
    } else if (dtype == DT_BOOL) {
      v = std::uniform_int_distribution<int>(0, 1)(rng);
    } else {
      v = std::uniform_int_distribution<int64_t>(static_cast<int64_t>(std::ceil(lo)),
                                                 static_cast<int64_t>(std::floor(hi)))(rng);
    }
  }
  return MakeTensor(dtype, shape, values);
}

std::vector<int64_t> Unflatten(int64_t i, const std::vector<int64_t>& dims) {
  std::vector<int64_t> index(dims.size());
  for (int d = static_cast<int>(dims.size()) - 1; d >= 0; --d) {
    index[d] = i % dims[d];
    i /= dims[d];
  }
  return index;
}

int64_t Flatten(const std::vector<int64_t>& index, const std::vector<int64_t>& dims) {
  int64_t f = 0;
  for (size_t d = 0; d < dims.size(); ++d) f = f * dims[d] + index[d];
  return f;
}

int64_t Count(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::vector<double> ToDoubles(const Tensor& t) {
  std::vector<double> out(t.NumElements());
  for (int64_t i = 0; i < t.NumElements(); ++i) out[i] = t.ElementAsDouble(i);
  return out;
}

bool BroadcastShape(const TensorShape& a, const TensorShape& b, TensorShape* out) {
  const int rank = std::max(a.rank(), b.rank());
  std::vector<int64_t> dims(rank);
  for (int d = 0; d < rank; ++d) {
    int ia = d - (rank - a.rank()), ib = d - (rank - b.rank());
    int64_t da = ia >= 0 ? a.dim(ia) : 1, db = ib >= 0 ? b.dim(ib) : 1;
    if (da != db && da != 1 && db != 1) return false;
    dims[d] = da == 1 ? db : da;
  }
  *out = TensorShape(dims);
  return true;
}

std::vector<double> BroadcastReference(const std::vector<double>& a, const TensorShape& as,
                                       const std::vector<double>& b, const TensorShape& bs,
                                       const std::function<double(double, double)>& fn,
                                       TensorShape* out_shape) {
  TensorShape os;
  if (!BroadcastShape(as, bs, &os)) {
    ADD_FAILURE() << "incompatible reference shapes";
    return {};
  }
  *out_shape = os;
  const int rank = os.rank();
  std::vector<double> out(os.num_elements());
  std::vector<int64_t> index(rank, 0);
  for (int64_t i = 0; i < os.num_elements(); ++i) {
    // index = the multi-index of i; each input reads index mod its dims.
    int64_t rest = i;
    for (int d = rank - 1; d >= 0; --d) {
      index[d] = rest % os.dim(d);
      rest /= os.dim(d);
    }
    auto flat = [&](const TensorShape& s) {
      int64_t f = 0;
      for (int d = 0; d < s.rank(); ++d) {
        int64_t id = index[d + rank - s.rank()];
        f = f * s.dim(d) + (s.dim(d) == 1 ? 0 : id);
      }
      return f;
    };
    out[i] = fn(a[flat(as)], b[flat(bs)]);
  }
  return out;
}

void ExpectNear(const Tensor& actual, const TensorShape& shape, const std::vector<double>& expected,
                double rtol, double atol, const std::string& what) {
  ASSERT_EQ(actual.shape(), shape) << what << ": shape " << actual.shape().ToString();
  ASSERT_EQ(static_cast<size_t>(actual.NumElements()), expected.size()) << what;
  int reported = 0;
  for (int64_t i = 0; i < actual.NumElements(); ++i) {
    double a = actual.ElementAsDouble(i), e = expected[i];
    bool ok =
        (std::isnan(a) && std::isnan(e)) || a == e || std::abs(a - e) <= atol + rtol * std::abs(e);
    if (!ok && reported++ < 5) {
      ADD_FAILURE() << what << ": element " << i << " is " << a << ", expected " << e;
    }
  }
}

void ExpectSameVariables(const std::vector<std::shared_ptr<Variable>>& graph_vars,
                         const std::function<Tensor(const Variable&)>& read,
                         const std::vector<std::shared_ptr<Variable>>& eager_vars, float rtol,
                         float floor) {
  ASSERT_EQ(graph_vars.size(), eager_vars.size());
  for (size_t i = 0; i < graph_vars.size(); ++i) {
    SCOPED_TRACE(graph_vars[i]->name());
    EXPECT_EQ(graph_vars[i]->name(), eager_vars[i]->name());
    const Tensor g = read(*graph_vars[i]);
    const Tensor e = eager_vars[i]->value().value();
    ASSERT_EQ(g.shape(), e.shape());
    for (int64_t k = 0; k < g.NumElements(); ++k) {
      const float a = g.flat<float>()[k], b = e.flat<float>()[k];
      EXPECT_LE(std::abs(a - b), rtol * std::max(std::abs(a), floor)) << k;
    }
  }
}

void ExpectIdentical(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.dtype(), b.dtype()) << what;
  ASSERT_EQ(a.shape(), b.shape()) << what;
  EXPECT_EQ(std::memcmp(a.raw_data(), b.raw_data(), a.TotalBytes()), 0) << what;
}

Initializer WavyInitializer(float phase) {
  return [phase](const Scope& scope, DataType, const TensorShape& shape) {
    Tensor t(DT_FLOAT, shape);
    float i = 0;
    for (float& v : t.flat<float>()) v = 0.5f * std::sin(phase + 0.7f * i++);
    return ops::Const(scope, t);
  };
}

}  // namespace ckflow::testing
