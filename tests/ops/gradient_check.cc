#include "tests/ops/gradient_check.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "ops/array_ops.h"
#include "ops/gradients.h"
#include "tests/test_util.h"

namespace ckflow::testing {
namespace {

double Dot(const Tensor& a, const Tensor& b) {
  double sum = 0;
  for (int64_t i = 0; i < a.NumElements(); ++i) sum += a.flat<double>()[i] * b.flat<double>()[i];
  return sum;
}

}  // namespace

Tensor RandomDoubles(const std::vector<int64_t>& dims, double lo, double hi, std::mt19937& rng) {
  Tensor t(DT_DOUBLE, TensorShape(dims));
  std::uniform_real_distribution<double> dist(lo, hi);
  for (double& v : t.flat<double>()) v = dist(rng);
  return t;
}

std::unique_ptr<Session> NewSession(const Scope& root) {
  StatusOr<std::unique_ptr<Session>> s = Session::Create(root.graph());
  CKFLOW_CHECK(s.ok());
  return std::move(s).value();
}

std::vector<Feed> FeedsOf(const std::vector<Output>& xs, const std::vector<Tensor>& values) {
  std::vector<Feed> feeds;
  for (size_t i = 0; i < xs.size(); ++i) feeds.emplace_back(xs[i], values[i]);
  return feeds;
}

void ExpectGradientsMatchFiniteDifferences(const Scope& root, Output y,
                                           const std::vector<Output>& xs,
                                           std::vector<Tensor> values, double step,
                                           double tolerance, std::mt19937& rng) {
  ASSERT_TRUE(root.ok()) << root.status();
  auto session = NewSession(root);
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> y0, session->Run(FeedsOf(xs, values), {y}));
  Tensor w = RandomDoubles(y0[0].shape().dim_sizes(), -1, 1, rng);
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Output> grads,
                              AddGradients(root, {y}, xs, {ops::Const(root, w)}));
  ASSERT_EQ(grads.size(), xs.size());
  for (size_t i = 0; i < grads.size(); ++i)
    ASSERT_TRUE(grads[i].valid()) << "no gradient for x" << i;
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> analytic,
                              session->Run(FeedsOf(xs, values), grads));
  for (size_t i = 0; i < xs.size(); ++i) {
    ASSERT_EQ(analytic[i].dtype(), DT_DOUBLE);
    ASSERT_EQ(analytic[i].shape(), values[i].shape()) << "x" << i;
    for (int64_t j = 0; j < values[i].NumElements(); ++j) {
      // A fresh copy per run: a fetched tensor may share the fed buffer.
      auto f_at = [&](double delta) -> StatusOr<double> {
        std::vector<Tensor> moved = values;
        moved[i] = values[i].Clone();
        moved[i].flat<double>()[j] += delta;
        CKFLOW_ASSIGN_OR_RETURN(std::vector<Tensor> out, session->Run(FeedsOf(xs, moved), {y}));
        return Dot(w, out[0]);
      };
      CKFLOW_ASSERT_OK_AND_ASSIGN(double up, f_at(step));
      CKFLOW_ASSERT_OK_AND_ASSIGN(double down, f_at(-step));
      const double numeric = (up - down) / (2 * step);
      EXPECT_NEAR(analytic[i].flat<double>()[j], numeric,
                  tolerance * std::max(1.0, std::abs(numeric)))
          << "d y / d x" << i << "[" << j << "]";
    }
  }
}

}  // namespace ckflow::testing
