// A partitioned embedding table in training: EmbeddingLookup reads the same
// rows as a gather on the whole table, its gradient reaches each part as
// rows so a sparse optimizer trains the parts exactly as it trains the
// whole, and the optimizer's slots of the parts are saved as slices of one
// partitioned slot, so table and slots restore into another number of
// parts (or into a plain variable) and training goes on as if unbroken.

#include <gtest/gtest.h>

#include <random>

#include "checkpoint/checkpoint.h"
#include "ops/array_ops.h"
#include "ops/initializers.h"
#include "ops/math_ops.h"
#include "ops/optimizers.h"
#include "ops/partitioned_variables.h"
#include "ops/variable_ops.h"
#include "tests/checkpoint/checkpoint_test_util.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

using testing::NewSession;
using testing::RunOrFail;
using testing::ValueOf;

constexpr int64_t kRows = 11;  // 11 rows in 3 or 4 parts: uneven parts
constexpr int64_t kCols = 4;

Tensor Table() {
  std::vector<float> values(kRows * kCols);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.25f * static_cast<float>(i % 13) - 1;
  return Tensor::FromVector(values, TensorShape({kRows, kCols}));
}

std::vector<float> Floats(const Tensor& t) {
  return std::vector<float>(t.flat<float>().begin(), t.flat<float>().end());
}

// The whole value of `v` (its parts concatenated along axis 0).
std::vector<float> Whole(Session& session, const std::vector<std::shared_ptr<Variable>>& parts) {
  std::vector<float> whole;
  for (const auto& part : parts) {
    const std::vector<float> part_values = Floats(ValueOf(session, *part));
    whole.insert(whole.end(), part_values.begin(), part_values.end());
  }
  return whole;
}

// A model of one table (partitioned in `parts`, or plain if 0) whose loss
// is the weighted sum of squares of the rows at fixed ids; trained by
// Adagrad, checkpointed with the optimizer.
struct Model {
  explicit Model(int parts) : scope(Scope::NewRootScope()) {
    ids = ops::Placeholder(scope.WithOpName("ids"), DT_INT64, {.shape = {2, 3}});
    if (parts > 0) {
      table = PartitionedVariable::Create(scope, "table", DT_FLOAT, {kRows, kCols},
                                          initializers::Constant(0), {.num_shards = parts});
      rows = EmbeddingLookup(scope, *table, ids);
      variables = table->parts();
      object = table;
    } else {
      plain = Variable::Create(scope, "table", DT_FLOAT, {kRows, kCols}, initializers::Constant(0));
      rows = ops::ResourceGather(scope, plain->handle(), ids, DT_FLOAT, plain->shape());
      variables = {plain};
      object = plain;
    }
    optimizer = Adagrad::Make({.learning_rate = 0.5f});
    checkpoint.emplace(scope,
                       Checkpoint::Dependencies{{"table", object}, {"optimizer", optimizer}});
  }
  // Builds the train op (after a Restore, so slots are made as it waits).
  void Build() {
    Output weights = ops::Const<float>(scope, {1, -2, 3, 0.5f}, {1, 1, 4});
    Output loss = ops::Sum(scope, ops::Mul(scope, ops::Square(scope, rows), weights), {0, 1, 2});
    train = optimizer->Minimize(scope, ops::Add(scope, loss, ops::Sum(scope, rows, {0, 1, 2})),
                                variables);
    init = GlobalVariablesInitializer(scope);
    ASSERT_TRUE(scope.ok()) << scope.status();
    session = NewSession(scope);
  }
  void Step(const std::vector<int64_t>& batch) {
    CKFLOW_ASSERT_OK(
        session->Run({{ids, Tensor::FromVector(batch, TensorShape({2, 3}))}}, {}, {train})
            .status());
  }
  Scope scope;
  Output ids, rows, train, init;
  std::shared_ptr<PartitionedVariable> table;
  std::shared_ptr<Variable> plain;
  std::shared_ptr<Trackable> object;
  std::vector<std::shared_ptr<Variable>> variables;
  std::shared_ptr<Adagrad> optimizer;
  std::optional<Checkpoint> checkpoint;
  std::unique_ptr<Session> session;
};

const std::vector<std::vector<int64_t>> kBatches = {
    {10, 0, 3, 3, 7, 10}, {4, 4, 4, 2, 9, 1}, {0, 8, 5, 6, 10, 3}, {2, 2, 7, 1, 0, 9}};

TEST(PartitionedEmbedding, LookupReadsTheRowsAGatherOnTheWholeReads) {
  for (int parts : {1, 2, 3, 4, 11}) {
    for (DataType id_type : {DT_INT32, DT_INT64}) {
      SCOPED_TRACE(std::to_string(parts) + " parts");
      Scope scope = Scope::NewRootScope();
      auto table = PartitionedVariable::Create(scope, "t", DT_FLOAT, {kRows, kCols},
                                               initializers::Constant(0), {.num_shards = parts});
      Output ids = ops::Placeholder(scope, id_type);
      Output rows = EmbeddingLookup(scope, *table, ids);
      Output whole = ops::Const(scope, Table());
      Output expected = ops::Gather(scope, whole, ids);
      ASSERT_TRUE(scope.ok()) << scope.status();
      auto session = NewSession(scope);
      RunOrFail(*session, {table->initializer()});
      // Each part gets its rows of the table.
      for (int p = 0; p < parts; ++p) {
        Tensor box = Tensor(DT_FLOAT, table->parts()[p]->shape().ToTensorShape());
        std::copy_n(Table().flat<float>().data() + table->offset(p) * kCols, box.NumElements(),
                    box.flat<float>().data());
        testing::SetValue(*session, *table->parts()[p], box);
      }
      for (const std::vector<int64_t>& batch :
           std::vector<std::vector<int64_t>>{{10, 0, 3, 3, 7, 10}, {}, {5}}) {
        Tensor feed =
            Tensor::FromVector(batch, TensorShape({static_cast<int64_t>(batch.size()), 1}));
        if (id_type == DT_INT32) {
          std::vector<int32_t> narrow(batch.begin(), batch.end());
          feed = Tensor::FromVector(narrow, feed.shape());
        }
        CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out,
                                    session->Run({{ids, feed}}, {rows, expected}));
        ASSERT_EQ(out[0].shape(), out[1].shape());
        EXPECT_EQ(Floats(out[0]), Floats(out[1]));
      }
      // An id past the table falls in the last part and is named there.
      Status status = session
                          ->Run({{ids, id_type == DT_INT32 ? Tensor::FromVector<int32_t>({3, 11})
                                                           : Tensor::FromVector<int64_t>({3, 11})}},
                                {rows})
                          .status();
      EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
      EXPECT_NE(status.message().find(table->parts().back()->name()), std::string::npos) << status;
    }
  }
  Scope scope = Scope::NewRootScope();
  auto columns =
      PartitionedVariable::Create(scope, "c", DT_FLOAT, {kRows, kCols}, initializers::Constant(0),
                                  {.num_shards = 2, .axis = 1});
  EmbeddingLookup(scope, *columns, ops::Const<int32_t>(scope, {1}));
  EXPECT_EQ(scope.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(scope.status().message().find("partitioned along axis 1"), std::string::npos)
      << scope.status();
}

TEST(PartitionedEmbedding, SparseAdagradTrainsThePartsAsItTrainsTheWhole) {
  Model whole(0);
  whole.Build();
  RunOrFail(*whole.session, {whole.init});
  testing::SetValue(*whole.session, *whole.plain, Table());
  for (const auto& batch : kBatches) whole.Step(batch);
  const std::vector<float> want = Whole(*whole.session, whole.variables);
  const std::vector<float> want_accum =
      Whole(*whole.session, {whole.optimizer->GetSlotVariable(*whole.plain, "accumulator")});

  for (int parts : {2, 3, 4}) {
    SCOPED_TRACE(std::to_string(parts) + " parts");
    Model model(parts);
    model.Build();
    RunOrFail(*model.session, {model.init});
    for (int p = 0; p < parts; ++p) {
      Tensor box = Tensor(DT_FLOAT, model.table->parts()[p]->shape().ToTensorShape());
      std::copy_n(Table().flat<float>().data() + model.table->offset(p) * kCols, box.NumElements(),
                  box.flat<float>().data());
      testing::SetValue(*model.session, *model.table->parts()[p], box);
    }
    for (const auto& batch : kBatches) model.Step(batch);
    EXPECT_EQ(Whole(*model.session, model.variables), want);
    auto slot = std::dynamic_pointer_cast<PartitionedVariable>(
        model.optimizer->GetSlot(*model.table, "accumulator"));
    ASSERT_NE(slot, nullptr);
    EXPECT_EQ(slot, model.optimizer->GetSlot(*model.table, "accumulator"));  // one object
    EXPECT_EQ(Whole(*model.session, slot->parts()), want_accum);
    // TensorFlow 1's slot_creator: the slot of a part is the same slice of
    // "<whole>/<optimizer>".
    ASSERT_TRUE(slot->parts()[1]->save_slice_info().has_value());
    EXPECT_EQ(slot->parts()[1]->save_slice_info()->full_name, "table/Adagrad");
    EXPECT_EQ(slot->parts()[1]->save_slice_info()->var_offset,
              model.table->parts()[1]->save_slice_info()->var_offset);
  }
}

// Two steps with 4 parts, saved; restored into 3 parts, 2 parts, 1 part and
// a plain variable (the restore waiting for the slots, made by the train
// op built after it), two more steps: the values of four unbroken steps.
TEST(PartitionedEmbedding, TableAndSlotsRestoreIntoAnotherPartitioning) {
  Model unbroken(4);
  unbroken.Build();
  RunOrFail(*unbroken.session, {unbroken.init});
  for (const auto& batch : kBatches) unbroken.Step(batch);
  const std::vector<float> want = Whole(*unbroken.session, unbroken.variables);

  // Initialized as a training program starts without a checkpoint: what
  // the checkpoint holds, the table's partitioned accumulator included.
  Model first(4);
  CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus fresh, first.checkpoint->Restore(std::nullopt));
  first.Build();
  CKFLOW_ASSERT_OK(fresh.InitializeOrRestore(*first.session));
  first.Step(kBatches[0]);
  first.Step(kBatches[1]);
  const std::string dir = testing::NewTempDir("partitioned_slots");
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string path,
                              first.checkpoint->Save(dir + "/ckpt", *first.session));
  for (int parts : {3, 2, 1, 0}) {
    SCOPED_TRACE(std::to_string(parts) + " parts");
    Model second(parts);
    CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus status, second.checkpoint->Restore(path));
    second.Build();
    CKFLOW_ASSERT_OK(status.AssertConsumed());
    CKFLOW_ASSERT_OK(status.InitializeOrRestore(*second.session));
    second.Step(kBatches[2]);
    second.Step(kBatches[3]);
    EXPECT_EQ(Whole(*second.session, second.variables), want);
  }
}

}  // namespace
}  // namespace ckflow
