// Partitioned variables (TensorFlow 1's get_variable(partitioner=...)):
// the parts fixed_size_partitioner makes, SaveV2/RestoreV2 with
// shape_and_slices, and NameBasedSaver and Checkpoint saving a partitioned
// variable as one sliced tensor that restores whole, into the same parts
// or into another partitioning, bit for bit; the reader-level check passes.

#include <gtest/gtest.h>

#include "bundle/bundle_reader.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/name_based_saver.h"
#include "ops/array_ops.h"
#include "ops/checkpoint_ops.h"
#include "ops/initializers.h"
#include "ops/optimizers.h"
#include "ops/partitioned_variables.h"
#include "tests/bundle/bundle_test_util.h"
#include "tests/bundle/testdata_util.h"
#include "tests/checkpoint/checkpoint_test_util.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

using testing::Grid;
using testing::NewSession;
using testing::RunOrFail;
using testing::SetValue;
using testing::StatusIs;
using testing::ValueOf;

constexpr int64_t kRows = 10;
constexpr int64_t kCols = 6;

std::shared_ptr<PartitionedVariable> MakeGridVariable(const Scope& scope, const std::string& name,
                                                      int parts, int axis) {
  auto v = PartitionedVariable::Create(scope, name, DT_FLOAT, TensorShape({kRows, kCols}),
                                       initializers::Zeros(), {.num_shards = parts, .axis = axis});
  EXPECT_NE(v, nullptr) << scope.status();
  return v;
}

// The box of the grid part i of `v` holds.
Tensor GridPart(const PartitionedVariable& v, int i) {
  const TensorShape shape = v.parts()[i]->shape().ToTensorShape();
  return v.axis() == 0 ? Grid(shape.dim(0), shape.dim(1), v.offset(i), 0)
                       : Grid(shape.dim(0), shape.dim(1), 0, v.offset(i));
}

void ExpectBits(const Tensor& got, const Tensor& want) {
  ASSERT_EQ(got.shape(), want.shape());
  EXPECT_EQ(std::memcmp(got.raw_data(), want.raw_data(), want.TotalBytes()), 0)
      << got.DebugString() << " vs " << want.DebugString();
}

// Every part of `v` in `session` holds its box of the grid.
void ExpectGrid(Session& session, const PartitionedVariable& v) {
  for (int i = 0; i < v.num_parts(); ++i) {
    SCOPED_TRACE(v.parts()[i]->name());
    ExpectBits(ValueOf(session, *v.parts()[i]), GridPart(v, i));
  }
}

// A session of a new graph holding `v` (n parts on `axis`) set to the grid.
struct Trainer {
  Trainer(int parts, int axis, const std::string& name = "w")
      : scope(Scope::NewRootScope()), v(MakeGridVariable(scope, name, parts, axis)) {
    session = NewSession(scope);
    RunOrFail(*session, {v->initializer()});
    for (int i = 0; i < v->num_parts(); ++i) SetValue(*session, *v->parts()[i], GridPart(*v, i));
  }
  Scope scope;
  std::shared_ptr<PartitionedVariable> v;
  std::unique_ptr<Session> session;
};

TEST(PartitionedVariable, PartsAreFixedSizePartitionersWithSaveSliceInfo) {
  Scope scope = Scope::NewRootScope();
  auto v = MakeGridVariable(scope.NewSubScope("layer"), "w", 3, 0);
  ASSERT_EQ(v->num_parts(), 3);
  EXPECT_EQ(v->name(), "layer/w");
  EXPECT_EQ(v->shape(), TensorShape({10, 6}));
  std::vector<std::string> names, specs;
  for (const auto& part : v->parts()) {
    names.push_back(part->name());
    specs.push_back(part->save_slice_info()->Spec());
  }
  EXPECT_EQ(names,
            (std::vector<std::string>{"layer/w/part_0", "layer/w/part_1", "layer/w/part_2"}));
  EXPECT_EQ(specs, (std::vector<std::string>{"10 6 0,4:0,6", "10 6 4,3:0,6", "10 6 7,3:0,6"}));
  EXPECT_EQ(v->offset(2), 7);
  auto columns = MakeGridVariable(scope, "c", 4, 1);
  EXPECT_EQ(columns->parts()[3]->save_slice_info()->Spec(), "10 6 0,10:5,1");

  // More shards than rows: one part per row, as fixed_size_partitioner
  // asks for min(num_shards, rows).
  auto capped = PartitionedVariable::Create(scope, "capped", DT_FLOAT, {3, 2},
                                            initializers::Zeros(), {.num_shards = 4});
  ASSERT_NE(capped, nullptr) << scope.status();
  ASSERT_EQ(capped->num_parts(), 3);
  EXPECT_EQ(capped->parts()[2]->save_slice_info()->Spec(), "3 2 2,1:0,2");

  for (auto [shape, shards] : {std::pair{TensorShape({3, 2}), 0}, {TensorShape({0, 2}), 2}}) {
    Scope bad = Scope::NewRootScope();
    EXPECT_EQ(PartitionedVariable::Create(bad, "w", DT_FLOAT, shape, initializers::Zeros(),
                                          {.num_shards = shards}),
              nullptr);
    EXPECT_THAT(bad.status(), StatusIs(StatusCode::kInvalidArgument, "'w'"));
  }
  Scope bad_axis = Scope::NewRootScope();
  EXPECT_EQ(PartitionedVariable::Create(bad_axis, "w", DT_FLOAT, {3, 2}, initializers::Zeros(),
                                        {.num_shards = 1, .axis = 2}),
            nullptr);
  EXPECT_THAT(bad_axis.status(), StatusIs(StatusCode::kInvalidArgument, "no axis 2"));
}

TEST(PartitionedVariable, EachSlotOfAPartIsASliceOfItsOwnWhole) {
  // TensorFlow 1's slot_creator: a part's first slot is a slice of
  // "<whole>/<optimizer>", its k-th of "<whole>/<optimizer>_k"; another
  // variable's slots count from 0 again.
  Scope scope = Scope::NewRootScope();
  auto w = MakeGridVariable(scope, "w", 2, 0);
  auto u = MakeGridVariable(scope, "u", 2, 0);
  auto adam = Adam::Make();
  std::vector<GradAndVar> grads;
  for (const auto& v : {w, u}) {
    for (const auto& part : v->parts()) {
      grads.push_back({ops::ZerosLike(scope, part->value()), part});
    }
  }
  adam->ApplyGradients(scope, grads);
  ASSERT_TRUE(scope.ok()) << scope.status();
  for (const auto& [v, name] : {std::pair{w, "w"}, std::pair{u, "u"}}) {
    for (const auto& [slot_name, full_name] :
         {std::pair{"m", "/Adam"}, std::pair{"v", "/Adam_1"}}) {
      auto slot = std::dynamic_pointer_cast<PartitionedVariable>(adam->GetSlot(*v, slot_name));
      ASSERT_NE(slot, nullptr) << name << " " << slot_name;
      for (const auto& part : slot->parts()) {
        EXPECT_EQ(part->save_slice_info()->full_name, std::string(name) + full_name);
      }
      EXPECT_EQ(slot->parts()[1]->save_slice_info()->Spec(),
                v->parts()[1]->save_slice_info()->Spec());
    }
  }
}

class PartitionedSaverTest : public ::testing::TestWithParam<std::tuple<int, int>> {
 protected:
  std::string dir_ = testing::NewTempDir("partitioned");
};

// Saved by name from n parts on one axis; restored whole, and into 1 to 4
// parts on either axis.
TEST_P(PartitionedSaverTest, NameBasedRestoresWholeAndRepartitioned) {
  const auto [n, axis] = GetParam();
  Trainer trainer(n, axis);
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto saver, NameBasedSaver::Create(trainer.scope, {}));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string path, saver->Save(*trainer.session, dir_ + "/model"));

  CKFLOW_ASSERT_OK_AND_ASSIGN(auto reader, BundleReader::Open(path));
  const BundleEntry* w = reader->FindEntry("w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->shape, TensorShape({kRows, kCols}));
  EXPECT_EQ(w->slices.size(), n == 1 ? 0u : static_cast<size_t>(n));
  CKFLOW_EXPECT_OK(testing::CheckBundle(path).status());

  {  // whole
    Scope scope = Scope::NewRootScope();
    auto plain = Variable::Create(scope, "w", DT_FLOAT, {kRows, kCols}, initializers::Zeros());
    auto session = NewSession(scope);
    CKFLOW_ASSERT_OK_AND_ASSIGN(auto restorer, NameBasedSaver::Create(scope, {plain}));
    CKFLOW_ASSERT_OK(restorer->Restore(*session, path));
    ExpectBits(ValueOf(*session, *plain), Grid(kRows, kCols));
  }
  for (int m = 1; m <= 4; ++m) {
    for (int other_axis : {0, 1}) {
      SCOPED_TRACE(::testing::Message() << m << " parts on axis " << other_axis);
      Scope scope = Scope::NewRootScope();
      auto v = MakeGridVariable(scope, "w", m, other_axis);
      auto session = NewSession(scope);
      CKFLOW_ASSERT_OK_AND_ASSIGN(auto restorer, NameBasedSaver::Create(scope, {}));
      CKFLOW_ASSERT_OK(restorer->Restore(*session, path));
      ExpectGrid(*session, *v);
    }
  }
}

// Saved by a Checkpoint under the object's path, sliced; restored into
// another partitioning and into a plain variable at the same path.
TEST_P(PartitionedSaverTest, CheckpointRestoresWholeAndRepartitioned) {
  const auto [n, axis] = GetParam();
  Trainer trainer(n, axis, "embedding");
  Checkpoint checkpoint(trainer.scope, {{"emb", trainer.v}});
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string path, checkpoint.Save(dir_ + "/ckpt", *trainer.session));
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto reader, BundleReader::Open(path));
  const BundleEntry* e = reader->FindEntry("emb/.ATTRIBUTES/VARIABLE_VALUE");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->slices.size(), n == 1 ? 0u : static_cast<size_t>(n));
  CKFLOW_EXPECT_OK(testing::CheckBundle(path).status());

  {
    Scope scope = Scope::NewRootScope();
    auto v = MakeGridVariable(scope, "other_name", n % 4 + 1, 1 - axis);
    Checkpoint restored(scope, {{"emb", v}});
    CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus status, restored.Restore(path));
    CKFLOW_ASSERT_OK(status.AssertConsumed());
    auto session = NewSession(scope);
    CKFLOW_ASSERT_OK(status.RunRestoreOps(*session));
    ExpectGrid(*session, *v);
  }
  {
    Scope scope = Scope::NewRootScope();
    auto plain = Variable::Create(scope, "w", DT_FLOAT, {kRows, kCols}, initializers::Zeros());
    Checkpoint restored(scope, {{"emb", plain}});
    CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus status, restored.Restore(path));
    CKFLOW_ASSERT_OK(status.AssertConsumed());
    auto session = NewSession(scope);
    CKFLOW_ASSERT_OK(status.RunRestoreOps(*session));
    ExpectBits(ValueOf(*session, *plain), Grid(kRows, kCols));
  }
}

INSTANTIATE_TEST_SUITE_P(PartsAndAxes, PartitionedSaverTest,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4),
                                            ::testing::Values(0, 1)));

TEST(PartitionedSaver, PlainCheckpointRestoresIntoParts) {
  const std::string dir = testing::NewTempDir("plain_to_parts");
  Scope scope = Scope::NewRootScope();
  auto plain = Variable::Create(scope, "w", ops::Const(scope, Grid(kRows, kCols)));
  auto session = NewSession(scope);
  RunOrFail(*session, {plain->initializer()});
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto saver, NameBasedSaver::Create(scope, {plain}));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string path, saver->Save(*session, dir + "/model"));

  Scope parts_scope = Scope::NewRootScope();
  auto v = MakeGridVariable(parts_scope, "w", 3, 1);
  auto parts_session = NewSession(parts_scope);
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto restorer, NameBasedSaver::Create(parts_scope, v->parts()));
  CKFLOW_ASSERT_OK(restorer->Restore(*parts_session, path));
  ExpectGrid(*parts_session, *v);
}

TEST(PartitionedSaver, ShapeMismatchNamesTheKey) {
  const std::string dir = testing::NewTempDir("mismatch");
  Trainer trainer(2, 0);
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto saver, NameBasedSaver::Create(trainer.scope, {}));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string path, saver->Save(*trainer.session, dir + "/model"));
  Scope scope = Scope::NewRootScope();
  auto v = PartitionedVariable::Create(scope, "w", DT_FLOAT, {kRows, kCols + 1},
                                       initializers::Zeros(), {.num_shards = 2});
  auto session = NewSession(scope);
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto restorer, NameBasedSaver::Create(scope, {}));
  EXPECT_THAT(restorer->Restore(*session, path), StatusIs(StatusCode::kInvalidArgument, "key 'w'"));
  EXPECT_THAT(restorer->Restore(*session, path),
              StatusIs(StatusCode::kInvalidArgument, "a part of"));
}

// SaveV2 and RestoreV2 with TensorFlow's shape_and_slices strings.
TEST(PartitionedOps, SaveV2AndRestoreV2TakeShapeAndSlices) {
  const std::string prefix = testing::NewTempDir("ops") + "/ckpt";
  Scope scope = Scope::NewRootScope();
  auto strings = [&](std::vector<std::string> v) {
    return ops::Const(scope, Tensor::FromVector<std::string>(v));
  };
  Output save =
      ops::SaveV2(scope, ops::Const(scope, Tensor::Scalar(prefix)), strings({"w", "w"}),
                  strings({"10 6 0,7:-", "10 6 7,3:-"}),
                  {ops::Const(scope, Grid(7, kCols)), ops::Const(scope, Grid(3, kCols, 7))});
  std::vector<Output> restored =
      ops::RestoreV2(scope, ops::Const(scope, Tensor::Scalar(prefix)), strings({"w", "w"}),
                     strings({"10 6 5,4:1,5", ""}), {DT_FLOAT, DT_FLOAT});
  std::vector<Output> wrong = ops::RestoreV2(scope, ops::Const(scope, Tensor::Scalar(prefix)),
                                             strings({"w"}), strings({"10 7 0,4:-"}), {DT_FLOAT});
  auto session = NewSession(scope);
  RunOrFail(*session, {save});
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> values, session->Run({}, restored));
  ExpectBits(values[0], Grid(4, 5, 5, 1));
  ExpectBits(values[1], Grid(kRows, kCols));
  EXPECT_THAT(session->Run({}, wrong).status(),
              StatusIs(StatusCode::kInvalidArgument, "does not match the shape stored"));
}

}  // namespace
}  // namespace ckflow
