// RestoreOptions::cast through every way a value is restored: graph-mode
// restore ops (small values batched, large ones in parallel chunks),
// deferred restore-on-create, eager restores and LoadWeights. The conversions themselves are tested
// in tests/base/cast_test.cc; here, that each path converts exactly as CastElements does, refuses
// what the rule refuses, and names the key and both dtypes when it does.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/cast.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/weights.h"
#include "ops/array_ops.h"
#include "ops/variables.h"
#include "tests/checkpoint/checkpoint_test_util.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

using ::testing::HasSubstr;
using testing::Module;
using testing::NewSession;
using testing::RunOrFail;
using testing::StatusIs;
using testing::ValueOf;

// n values of `dtype` that differ from one another and need rounding in
// narrower types: (i - n/2) * 1.000123, through CastElements.
Tensor Values(DataType dtype, int64_t n) {
  std::vector<double> wide(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) wide[i] = static_cast<double>(i - n / 2) * 1.000123;
  Tensor t(dtype, TensorShape({n}));
  CastElements(DT_DOUBLE, wide.data(), dtype, t.raw_data(), n);
  return t;
}

Tensor Zeros(DataType dtype, int64_t n) {
  Tensor t(dtype, TensorShape({n}));
  std::memset(t.raw_data(), 0, t.TotalBytes());
  return t;
}

// What CastElements makes of `value` in `to`.
Tensor Converted(const Tensor& value, DataType to) {
  Tensor t(to, value.shape());
  CastElements(value.dtype(), value.raw_data(), to, t.raw_data(), value.NumElements());
  return t;
}

bool SameBytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.TotalBytes()) == 0;
}

using NamedValues = std::vector<std::pair<std::string, Tensor>>;

class RestoreCastTest : public ::testing::Test {
 protected:
  // A checkpoint of a Module with one variable per value, tracked under
  // its name.
  std::string Save(const NamedValues& values) {
    Scope scope = Scope::NewRootScope();
    auto root = std::make_shared<Module>();
    for (const auto& [name, value] : values) {
      root->Track(name, Variable::Create(scope, name, ops::Const(scope, value)));
    }
    Checkpoint checkpoint(scope, {{"m", root}});
    auto session = NewSession(scope);
    RunOrFail(*session, {GlobalVariablesInitializer(scope)});
    StatusOr<std::string> path = checkpoint.Save(dir_ + "/ckpt", *session);
    EXPECT_TRUE(path.ok()) << path.status();
    return path.ok() ? *path : std::string();
  }

  // A program of the same structure whose variables have the dtypes of
  // `like` (their values are zeros).
  struct Program {
    Scope scope = Scope::NewRootScope();
    std::shared_ptr<Module> root = std::make_shared<Module>();
    std::map<std::string, std::shared_ptr<Variable>> vars;
    std::unique_ptr<Checkpoint> checkpoint;

    void Add(const std::string& name, DataType dtype, int64_t n) {
      vars[name] =
          root->Track(name, Variable::Create(scope, name, ops::Const(scope, Zeros(dtype, n))));
    }
    Checkpoint& Make() {
      checkpoint = std::make_unique<Checkpoint>(scope, Checkpoint::Dependencies{{"m", root}});
      return *checkpoint;
    }
  };

  std::string dir_ = testing::NewTempDir("restore_cast");
};

TEST_F(RestoreCastTest, ADtypeMismatchIsAnErrorNamingKeyAndBothDtypesByDefault) {
  const std::string path = Save({{"w", Values(DT_BFLOAT16, 3)}});
  Program p;
  p.Add("w", DT_FLOAT, 3);
  CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus status, p.Make().Restore(path));
  auto session = NewSession(p.scope);
  const Status restored = status.RunRestoreOps(*session);
  EXPECT_THAT(restored, StatusIs(StatusCode::kInvalidArgument, "m/w/.ATTRIBUTES/VARIABLE_VALUE"));
  EXPECT_THAT(restored.message(), HasSubstr("bfloat16"));
  EXPECT_THAT(restored.message(), HasSubstr("float32"));
  EXPECT_THAT(restored.message(), HasSubstr("kWidening or kAny"));
}

// bfloat16 and float16 checkpoints into float32 variables: small values
// (read in a batch) and one of 600,000 elements (parallel chunks), each
// exactly the widened value.
TEST_F(RestoreCastTest, WideningRestoresHalfPrecisionIntoFloat32Exactly) {
  const NamedValues saved = {{"small_bf16", Values(DT_BFLOAT16, 5)},
                             {"small_f16", Values(DT_HALF, 7)},
                             {"large_bf16", Values(DT_BFLOAT16, 600000)},
                             {"same", Values(DT_FLOAT, 4)}};
  const std::string path = Save(saved);
  Program p;
  for (const auto& [name, value] : saved) p.Add(name, DT_FLOAT, value.NumElements());
  CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus status,
                              p.Make().Restore(path, {.cast = CastRule::kWidening}));
  auto session = NewSession(p.scope);
  CKFLOW_ASSERT_OK(status.RunRestoreOps(*session));
  CKFLOW_EXPECT_OK(status.AssertConsumed());
  for (const auto& [name, value] : saved) {
    EXPECT_TRUE(SameBytes(ValueOf(*session, *p.vars[name]), Converted(value, DT_FLOAT))) << name;
  }
}

TEST_F(RestoreCastTest, WideningRefusesANarrowingAndSaysWhichRuleWouldConvert) {
  const std::string path = Save({{"w", Values(DT_DOUBLE, 3)}});
  Program p;
  p.Add("w", DT_FLOAT, 3);
  CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus status,
                              p.Make().Restore(path, {.cast = CastRule::kWidening}));
  auto session = NewSession(p.scope);
  const Status restored = status.RunRestoreOps(*session);
  EXPECT_THAT(restored, StatusIs(StatusCode::kInvalidArgument, "'m/w/.ATTRIBUTES/VARIABLE_VALUE'"));
  EXPECT_THAT(restored.message(),
              HasSubstr("a float64 value does not always fit a float32 exactly"));
  EXPECT_THAT(restored.message(), HasSubstr("kAny"));
}

// kAny narrows floats and saturates integers, small and large, in the
// values CastElements gives; a variable created after Restore (deferred
// restore-on-create) converts under the same rule.
TEST_F(RestoreCastTest, AnyNarrowsAndSaturatesAlsoForVariablesCreatedLater) {
  Tensor extremes = Values(DT_DOUBLE, 6);
  extremes.flat<double>()[0] = 1e300;
  extremes.flat<double>()[1] = -std::numeric_limits<double>::infinity();
  extremes.flat<double>()[2] = std::numeric_limits<double>::quiet_NaN();
  const NamedValues saved = {{"narrow", extremes},
                             {"large", Values(DT_DOUBLE, 300000)},
                             {"ints", Values(DT_INT64, 9)},
                             {"later", Values(DT_FLOAT, 5)}};
  const std::string path = Save(saved);
  const std::map<std::string, DataType> into = {
      {"narrow", DT_FLOAT}, {"large", DT_BFLOAT16}, {"ints", DT_INT8}, {"later", DT_INT32}};
  Program p;
  for (const auto& [name, value] : saved) {
    if (name != "later") p.Add(name, into.at(name), value.NumElements());
  }
  CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus status, p.Make().Restore(path, {.cast = CastRule::kAny}));
  p.Add("later", DT_INT32, 5);
  auto session = NewSession(p.scope);
  CKFLOW_ASSERT_OK(status.RunRestoreOps(*session));
  CKFLOW_EXPECT_OK(status.AssertConsumed());
  for (const auto& [name, value] : saved) {
    const Tensor got = ValueOf(*session, *p.vars[name]);
    const Tensor want = Converted(value, into.at(name));
    if (name == "narrow") {  // NaN compares unequal, bit patterns may differ
      EXPECT_TRUE(std::isnan(got.flat<float>()[2]));
      for (int i : {0, 1, 3, 4, 5}) EXPECT_EQ(got.flat<float>()[i], want.flat<float>()[i]) << i;
      EXPECT_EQ(got.flat<float>()[0], std::numeric_limits<float>::infinity());
      continue;
    }
    EXPECT_TRUE(SameBytes(got, want)) << name;
  }
}

// Kernels run with subnormals flushed to zero (as TensorFlow's do), but a
// restore's conversion keeps IEEE arithmetic: a float64 1e-40 becomes the
// float32 subnormal nearest it, and a float32 subnormal widens exactly, in
// a small tensor and in one of 300,000 elements (parallel chunks).
TEST_F(RestoreCastTest, AConversionKeepsSubnormals) {
  auto filled = [](DataType dtype, int64_t n, double value) {
    std::vector<double> wide(static_cast<size_t>(n), value);
    Tensor t(dtype, TensorShape({n}));
    CastElements(DT_DOUBLE, wide.data(), dtype, t.raw_data(), n);
    return t;
  };
  const NamedValues saved = {{"narrow", filled(DT_DOUBLE, 3, 1e-40)},
                             {"large", filled(DT_DOUBLE, 300000, -3e-39)},
                             {"wide", filled(DT_FLOAT, 4, 2e-44)}};
  const std::map<std::string, DataType> into = {
      {"narrow", DT_FLOAT}, {"large", DT_FLOAT}, {"wide", DT_DOUBLE}};
  const std::string path = Save(saved);
  Program p;
  for (const auto& [name, value] : saved) p.Add(name, into.at(name), value.NumElements());
  CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus status, p.Make().Restore(path, {.cast = CastRule::kAny}));
  auto session = NewSession(p.scope);
  CKFLOW_ASSERT_OK(status.RunRestoreOps(*session));
  for (const auto& [name, value] : saved) {
    const Tensor want = Converted(value, into.at(name));
    const bool narrowed = into.at(name) == DT_FLOAT;
    ASSERT_EQ(
        narrowed ? std::fpclassify(want.flat<float>()[0]) : std::fpclassify(want.flat<double>()[0]),
        narrowed ? FP_SUBNORMAL : FP_NORMAL)
        << name;
    EXPECT_TRUE(SameBytes(ValueOf(*session, *p.vars[name]), want)) << name;
  }
}

// The same checkpoint restored twice under two rules builds two restore
// ops: the op cached for one rule must not serve the other.
TEST_F(RestoreCastTest, ARestoreUnderAnotherRuleDoesNotReuseTheCachedOp) {
  const std::string path = Save({{"w", Values(DT_HALF, 4)}});
  Program p;
  p.Add("w", DT_FLOAT, 4);
  Checkpoint& checkpoint = p.Make();
  auto session = NewSession(p.scope);
  CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus widening,
                              checkpoint.Restore(path, {.cast = CastRule::kWidening}));
  CKFLOW_ASSERT_OK(widening.RunRestoreOps(*session));
  CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus strict, checkpoint.Restore(path));
  EXPECT_THAT(strict.RunRestoreOps(*session), StatusIs(StatusCode::kInvalidArgument, "float16"));
}

TEST_F(RestoreCastTest, EagerRestoreOnCreateConverts) {
  const Tensor saved = Values(DT_BFLOAT16, 100000);
  const std::string path = Save({{"w", saved}});
  Scope scope = Scope::NewEagerScope();
  auto root = std::make_shared<Module>();
  Checkpoint checkpoint(scope, {{"m", root}});
  CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus status,
                              checkpoint.Restore(path, {.cast = CastRule::kWidening}));
  auto w = Variable::CreateTracked(*root, scope, "w", DT_FLOAT, saved.shape(),
                                   [](const Scope& s, DataType dtype, const TensorShape& shape) {
                                     return ops::Const(s, Zeros(dtype, shape.num_elements()));
                                   });
  ASSERT_TRUE(scope.ok()) << scope.status();
  CKFLOW_EXPECT_OK(status.AssertConsumed());
  EXPECT_TRUE(SameBytes(w->value().value(), Converted(saved, DT_FLOAT)));
}

// Keras' load_weights takes the restore options too: float16 weights (a
// model saved for inference) load into a float32 training program.
TEST_F(RestoreCastTest, LoadWeightsConverts) {
  const Tensor saved = Values(DT_HALF, 10);
  const std::string path = dir_ + "/weights";
  {
    Scope scope = Scope::NewRootScope();
    auto model = std::make_shared<Module>();
    model->Track("kernel", Variable::Create(scope, "kernel", ops::Const(scope, saved)));
    auto session = NewSession(scope);
    RunOrFail(*session, {GlobalVariablesInitializer(scope)});
    CKFLOW_ASSERT_OK(SaveWeights(model, path, *session));
  }
  for (CastRule rule : {CastRule::kNone, CastRule::kWidening}) {
    SCOPED_TRACE(CastRuleName(rule));
    Scope scope = Scope::NewRootScope();
    auto model = std::make_shared<Module>();
    auto kernel = model->Track(
        "kernel", Variable::Create(scope, "kernel", ops::Const(scope, Zeros(DT_FLOAT, 10))));
    auto session = NewSession(scope);
    StatusOr<LoadStatus> status = LoadWeights(model, path, *session, {.cast = rule});
    if (rule == CastRule::kNone) {
      const Status failed = status.ok() ? status->RunRestoreOps(*session) : status.status();
      EXPECT_THAT(failed, StatusIs(StatusCode::kInvalidArgument, "float16"));
      continue;
    }
    ASSERT_TRUE(status.ok()) << status.status();
    CKFLOW_ASSERT_OK(status->RunRestoreOps(*session));
    EXPECT_TRUE(SameBytes(ValueOf(*session, *kernel), Converted(saved, DT_FLOAT)));
  }
}

}  // namespace
}  // namespace ckflow
