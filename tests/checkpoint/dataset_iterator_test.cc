// DatasetIterator (ops/dataset_iterator.h): the batches of each epoch, and
// its ITERATOR_STATE through checkpoints: a restored iterator hands out the
// batches the uninterrupted one would have, mid-epoch, across an epoch
// boundary, restored explicitly or on creation, in graph and eager mode;
// a state that is not one is an error naming ITERATOR_STATE.
#include "ops/dataset_iterator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "data/shuffle.h"
#include "ops/array_ops.h"
#include "ops/variables.h"
#include "runtime/session.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

using testing::StatusIs;

constexpr int64_t kElements = 10;

// Element i of the source is 100 + i, so a batch shows which rows it holds.
Tensor Source(int64_t n = kElements) {
  std::vector<int64_t> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) values[static_cast<size_t>(i)] = 100 + i;
  return Tensor::FromVector(values);
}

std::vector<int64_t> Values(const Tensor& t) {
  std::span<const int64_t> v = t.flat<int64_t>();
  return {v.begin(), v.end()};
}

// A graph with an iterator under the checkpoint's edge "data", and a
// session over it; restored from `restore_path` if set.
struct GraphRun {
  explicit GraphRun(const DatasetIteratorOptions& options,
                    const std::optional<std::string>& restore_path = std::nullopt,
                    int64_t n = kElements) {
    auto made = DatasetIterator::FromTensorSlices(root, "data", {Source(n)}, options);
    CKFLOW_CHECK(made.ok());
    it = *made;
    checkpoint = std::make_unique<Checkpoint>(root, Checkpoint::Dependencies{{"data", it}});
    auto status = checkpoint->Restore(restore_path);
    CKFLOW_CHECK(status.ok());
    auto s = Session::Create(root.graph());
    CKFLOW_CHECK(s.ok());
    session = *std::move(s);
    init = status->InitializeOrRestore(*session);
  }
  // The values of the next batch.
  StatusOr<std::vector<int64_t>> Next() {
    CKFLOW_ASSIGN_OR_RETURN(std::vector<Tensor> batch, it->Next(session->resources()));
    return Values(batch[0]);
  }
  std::vector<std::vector<int64_t>> Take(int count) {
    std::vector<std::vector<int64_t>> out;
    for (int i = 0; i < count; ++i) {
      StatusOr<std::vector<int64_t>> b = Next();
      EXPECT_TRUE(b.ok()) << b.status();
      if (!b.ok()) break;
      out.push_back(*b);
    }
    return out;
  }
  std::string Save(const std::string& prefix) {
    StatusOr<std::string> path = checkpoint->Save(prefix, *session);
    EXPECT_TRUE(path.ok()) << path.status();
    return path.ok() ? *path : "";
  }

  Scope root = Scope::NewRootScope();
  std::shared_ptr<DatasetIterator> it;
  std::unique_ptr<Checkpoint> checkpoint;
  std::unique_ptr<Session> session;
  Status init;
};

// What the batches of `epochs` epochs must be: ShuffledIndices' order (or
// 0..n-1), cut into batches that do not span epochs.
std::vector<std::vector<int64_t>> Expected(const DatasetIteratorOptions& o, int epochs,
                                           int64_t n = kElements) {
  std::vector<std::vector<int64_t>> batches;
  for (int e = 0; e < epochs; ++e) {
    std::vector<int64_t> order(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
    if (o.shuffle) order = ShuffledIndices(n, o.seed, e);
    for (int64_t b = 0; b < n; b += o.batch_size) {
      const int64_t count = std::min(o.batch_size, n - b);
      if (count < o.batch_size && o.drop_remainder) break;
      std::vector<int64_t> batch;
      for (int64_t i = b; i < b + count; ++i) batch.push_back(100 + order[static_cast<size_t>(i)]);
      batches.push_back(batch);
    }
  }
  return batches;
}

const DatasetIteratorOptions kShuffled = {.batch_size = 3, .shuffle = true, .seed = 7};

TEST(DatasetIterator, ShuffledBatchesFollowEachEpochsOrder) {
  GraphRun run(kShuffled);
  CKFLOW_ASSERT_OK(run.init);
  const auto expected = Expected(kShuffled, 3);
  EXPECT_EQ(run.Take(static_cast<int>(expected.size())), expected);
  // Reshuffled each epoch: epoch 1's order is not epoch 0's.
  EXPECT_NE(ShuffledIndices(kElements, 7, 0), ShuffledIndices(kElements, 7, 1));
}

TEST(DatasetIterator, UnshuffledDropRemainderSkipsTheShortBatch) {
  const DatasetIteratorOptions o = {.batch_size = 4, .drop_remainder = true};
  GraphRun run(o);
  CKFLOW_ASSERT_OK(run.init);
  const auto expected = Expected(o, 2);
  ASSERT_EQ(expected.size(), 4u);  // two full batches an epoch
  EXPECT_EQ(run.Take(4), expected);
}

TEST(DatasetIterator, EndsWithOutOfRangeAfterNumEpochs) {
  const DatasetIteratorOptions o = {.batch_size = 4, .num_epochs = 2};
  GraphRun run(o);
  CKFLOW_ASSERT_OK(run.init);
  EXPECT_EQ(run.Take(6), Expected(o, 2));
  EXPECT_THAT(run.Next(), StatusIs(StatusCode::kOutOfRange, "iterator 'data'"));
  GraphRun small({.batch_size = 11, .drop_remainder = true});
  CKFLOW_ASSERT_OK(small.init);
  EXPECT_THAT(small.Next(), StatusIs(StatusCode::kOutOfRange, "end of sequence"));
}

TEST(DatasetIterator, SlicesEveryComponentAlongItsFirstDimension) {
  Scope root = Scope::NewRootScope();
  const std::vector<std::string> names = {"a", "b", "c", "d", "e"};
  const Tensor pairs = Tensor::FromVector<float>({0, 1, 10, 11, 20, 21, 30, 31, 40, 41}, {5, 2});
  CKFLOW_ASSERT_OK_AND_ASSIGN(
      auto it, DatasetIterator::FromTensorSlices(root, "data", {Tensor::FromVector(names), pairs},
                                                 {.batch_size = 2, .shuffle = true, .seed = 5}));
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto session, Session::Create(root.graph()));
  CKFLOW_ASSERT_OK(session->Run({}, {}, {it->initializer()}).status());
  const std::vector<int64_t> order = ShuffledIndices(5, 5, 0);
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> batch, it->Next(session->resources()));
  ASSERT_EQ(batch[1].shape(), TensorShape({2, 2}));
  for (int i = 0; i < 2; ++i) {
    const int64_t row = order[static_cast<size_t>(i)];
    EXPECT_EQ(batch[0].flat<std::string>()[i], names[static_cast<size_t>(row)]);
    EXPECT_EQ(batch[1].flat<float>()[2 * i], 10.0f * static_cast<float>(row));
    EXPECT_EQ(batch[1].flat<float>()[2 * i + 1], 10.0f * static_cast<float>(row) + 1);
  }
}

TEST(DatasetIterator, NextBeforeInitializationIsFailedPrecondition) {
  Scope root = Scope::NewRootScope();
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto it, DatasetIterator::Create(root, "indices", 5, {}));
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto session, Session::Create(root.graph()));
  EXPECT_THAT(it->NextIndices(session->resources()),
              StatusIs(StatusCode::kFailedPrecondition, "not initialized"));
}

TEST(DatasetIterator, BadArgumentsAreInvalidArgument) {
  Scope root = Scope::NewRootScope();
  EXPECT_THAT(DatasetIterator::Create(root, "a", 5, {.batch_size = 0}),
              StatusIs(StatusCode::kInvalidArgument, "batch_size"));
  EXPECT_THAT(DatasetIterator::FromTensorSlices(root, "b", {Source(3), Source(4)}, {}),
              StatusIs(StatusCode::kInvalidArgument, "component 1 has 4 elements"));
  EXPECT_THAT(DatasetIterator::FromTensorSlices(root, "c", {Tensor::Scalar<int64_t>(1)}, {}),
              StatusIs(StatusCode::kInvalidArgument, "component 0"));
}

TEST(DatasetIterator, ThreadsGetEachBatchOnce) {
  const DatasetIteratorOptions o = {.batch_size = 1, .shuffle = true, .seed = 3, .num_epochs = 1};
  GraphRun run(o, std::nullopt, 400);
  CKFLOW_ASSERT_OK(run.init);
  std::vector<std::vector<int64_t>> seen(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < seen.size(); ++t) {
    threads.emplace_back([&, t] {
      while (true) {
        StatusOr<std::vector<int64_t>> b = run.Next();
        if (!b.ok()) return;
        seen[t].insert(seen[t].end(), b->begin(), b->end());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  std::multiset<int64_t> all;
  for (const auto& s : seen) all.insert(s.begin(), s.end());
  std::multiset<int64_t> expected;
  for (int64_t i = 0; i < 400; ++i) expected.insert(100 + i);
  EXPECT_EQ(all, expected);
}

// Saved after `before` batches, the run goes on for `after`; a new program
// restored from that save must hand out the same `after` batches.
void ExpectResumesAfter(const DatasetIteratorOptions& o, int before, int after) {
  const std::string dir = testing::NewTempDir("iterator");
  GraphRun first(o);
  CKFLOW_ASSERT_OK(first.init);
  first.Take(before);
  const std::string path = first.Save(dir + "/ckpt");
  const auto uninterrupted = first.Take(after);
  ASSERT_EQ(uninterrupted.size(), static_cast<size_t>(after));

  GraphRun resumed(o, path);
  CKFLOW_ASSERT_OK(resumed.init);
  EXPECT_EQ(resumed.Take(after), uninterrupted) << "saved after " << before << " batches";
}

TEST(DatasetIterator, RestoredMidEpochSeesTheSameBatches) { ExpectResumesAfter(kShuffled, 2, 6); }

TEST(DatasetIterator, RestoredAtAndAcrossEpochBoundariesSeesTheSameBatches) {
  // 4 batches an epoch (3, 3, 3, 1): saved right after the short last
  // batch, and one batch into the second epoch.
  ExpectResumesAfter(kShuffled, 4, 9);
  ExpectResumesAfter(kShuffled, 5, 9);
  ExpectResumesAfter({.batch_size = 3, .shuffle = true, .seed = 7, .drop_remainder = true}, 3, 7);
}

TEST(DatasetIterator, RestoredIteratorEndsWhereTheSavedOneWould) {
  const DatasetIteratorOptions o = {.batch_size = 4, .num_epochs = 1};
  const std::string dir = testing::NewTempDir("iterator");
  GraphRun first(o);
  CKFLOW_ASSERT_OK(first.init);
  first.Take(3);  // the whole epoch
  GraphRun resumed(o, first.Save(dir + "/ckpt"));
  CKFLOW_ASSERT_OK(resumed.init);
  EXPECT_THAT(resumed.Next(), StatusIs(StatusCode::kOutOfRange, "end of sequence"));
}

TEST(DatasetIterator, SaveHoldsThePositionAtTheSave) {
  const std::string dir = testing::NewTempDir("iterator");
  GraphRun run(kShuffled);
  CKFLOW_ASSERT_OK(run.init);
  run.Take(2);
  const std::string at_two = run.Save(dir + "/ckpt");
  run.Take(3);
  run.Save(dir + "/ckpt");
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto position, run.it->Tell(run.session->resources()));
  EXPECT_EQ(position.epoch, 1);
  EXPECT_EQ(position.position, 3);
  // Restoring the older checkpoint into the running program rewinds it.
  CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus status, run.checkpoint->Restore(at_two));
  CKFLOW_ASSERT_OK(status.RunRestoreOps(*run.session));
  CKFLOW_ASSERT_OK_AND_ASSIGN(position, run.it->Tell(run.session->resources()));
  EXPECT_EQ(position.epoch, 0);
  EXPECT_EQ(position.position, 6);
  const auto expected = Expected(kShuffled, 2);
  EXPECT_EQ(run.Take(3), std::vector(expected.begin() + 2, expected.begin() + 5));
}

TEST(DatasetIterator, RestoredOnCreationWhenTrackedAfterTheRestore) {
  const std::string dir = testing::NewTempDir("iterator");
  GraphRun first(kShuffled);
  CKFLOW_ASSERT_OK(first.init);
  first.Take(5);
  const std::string path = first.Save(dir + "/ckpt");
  const auto uninterrupted = first.Take(4);

  // The restore comes first; the iterator is made and tracked afterwards.
  Scope root = Scope::NewRootScope();
  Checkpoint checkpoint(root, {});
  CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus status, checkpoint.Restore(path));
  CKFLOW_ASSERT_OK_AND_ASSIGN(
      auto it, DatasetIterator::FromTensorSlices(root, "data", {Source()}, kShuffled));
  checkpoint.root()->Track("data", it);
  CKFLOW_ASSERT_OK(status.AssertConsumed());
  CKFLOW_ASSERT_OK_AND_ASSIGN(auto session, Session::Create(root.graph()));
  CKFLOW_ASSERT_OK(status.InitializeOrRestore(*session));
  for (const auto& batch : uninterrupted) {
    CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> got, it->Next(session->resources()));
    EXPECT_EQ(Values(got[0]), batch);
  }
}

TEST(DatasetIterator, EagerSavesAtTheCallAndRestores) {
  const std::string dir = testing::NewTempDir("iterator");
  std::string path;
  std::vector<std::vector<int64_t>> uninterrupted;
  {
    Scope eager = Scope::NewEagerScope();
    CKFLOW_ASSERT_OK_AND_ASSIGN(
        auto it, DatasetIterator::FromTensorSlices(eager, "data", {Source()}, kShuffled));
    Checkpoint checkpoint(eager, {{"data", it}});
    ResourceMgr& resources = eager.eager_context()->resources();
    for (int i = 0; i < 3; ++i) CKFLOW_ASSERT_OK(it->Next(resources).status());
    CKFLOW_ASSERT_OK_AND_ASSIGN(path, checkpoint.Save(dir + "/ckpt"));
    for (int i = 0; i < 5; ++i) {
      CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> b, it->Next(resources));
      uninterrupted.push_back(Values(b[0]));
    }
  }
  Scope eager = Scope::NewEagerScope();
  Checkpoint checkpoint(eager, {});
  CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus status, checkpoint.Restore(path));
  CKFLOW_ASSERT_OK_AND_ASSIGN(
      auto it, DatasetIterator::FromTensorSlices(eager, "data", {Source()}, kShuffled));
  checkpoint.root()->Track("data", it);  // restored as it is tracked
  CKFLOW_ASSERT_OK(status.AssertConsumed());
  for (const auto& batch : uninterrupted) {
    CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> got,
                                it->Next(eager.eager_context()->resources()));
    EXPECT_EQ(Values(got[0]), batch);
  }
}

// An object whose ITERATOR_STATE is any variable: what another program (an
// older format, TensorFlow's variant state) may have left under the key.
class OtherIteratorState : public Trackable {
 public:
  explicit OtherIteratorState(std::shared_ptr<Variable> state) : state_(std::move(state)) {}
  std::vector<SaveableAttribute> Attributes() const override {
    std::vector<SaveableAttribute> a = state_->Attributes();
    a[0].name = "ITERATOR_STATE";
    return a;
  }
  Output initializer() const override { return state_->initializer(); }

 private:
  std::shared_ptr<Variable> state_;
};

// A checkpoint whose "data" edge holds `value` as its ITERATOR_STATE.
std::string SaveOtherState(const Tensor& value) {
  Scope root = Scope::NewRootScope();
  auto variable = Variable::Create(root, "state", ops::Const(root, value), {.trainable = false});
  Checkpoint checkpoint(root, {{"data", std::make_shared<OtherIteratorState>(variable)}});
  auto session = Session::Create(root.graph());
  CKFLOW_CHECK(session.ok());
  CKFLOW_CHECK((*session)->Run({}, {}, {variable->initializer()}).ok());
  auto path = checkpoint.Save(testing::NewTempDir("iterator") + "/ckpt", **session);
  CKFLOW_CHECK(path.ok());
  return *path;
}

// The status of restoring `value` into an iterator and asking for a batch.
Status RestoreAndNext(const Tensor& value) {
  Scope root = Scope::NewRootScope();
  CKFLOW_ASSIGN_OR_RETURN(auto it,
                          DatasetIterator::FromTensorSlices(root, "data", {Source()}, kShuffled));
  Checkpoint checkpoint(root, {{"data", it}});
  CKFLOW_ASSIGN_OR_RETURN(LoadStatus status, checkpoint.Restore(SaveOtherState(value)));
  CKFLOW_ASSIGN_OR_RETURN(auto session, Session::Create(root.graph()));
  CKFLOW_RETURN_IF_ERROR(status.InitializeOrRestore(*session));
  return it->Next(session->resources()).status();
}

Tensor State(int64_t format, int64_t epoch, int64_t position, int64_t n, int64_t shuffle) {
  return Tensor::FromVector<int64_t>({format, 7, epoch, position, n, shuffle});
}

TEST(DatasetIterator, WrongSizedOrTypedStateIsAnErrorNamingTheKey) {
  EXPECT_THAT(RestoreAndNext(Tensor::FromVector<int64_t>({1, 2, 3, 4})),
              StatusIs(StatusCode::kInvalidArgument, "data/.ATTRIBUTES/ITERATOR_STATE"));
  // TensorFlow's iterator state is a variant (or, serialized, a string).
  EXPECT_THAT(RestoreAndNext(Tensor::Scalar<std::string>("tf.data state")),
              StatusIs(StatusCode::kInvalidArgument, "data/.ATTRIBUTES/ITERATOR_STATE"));
}

TEST(DatasetIterator, CorruptStateIsDataLossNamingItsAttribute) {
  const int64_t f = DatasetIterator::kStateFormat;
  EXPECT_THAT(RestoreAndNext(State(f + 1, 0, 0, kElements, 1)),
              StatusIs(StatusCode::kDataLoss, "ITERATOR_STATE (variable 'data') is not a"));
  EXPECT_THAT(RestoreAndNext(State(f, 0, kElements + 1, kElements, 1)),
              StatusIs(StatusCode::kDataLoss, "ITERATOR_STATE (variable 'data') holds epoch 0"));
  EXPECT_THAT(RestoreAndNext(State(f, -1, 0, kElements, 1)),
              StatusIs(StatusCode::kDataLoss, "ITERATOR_STATE"));
  // A state of another source, or of an unshuffled iterator.
  EXPECT_THAT(RestoreAndNext(State(f, 0, 0, kElements + 5, 1)),
              StatusIs(StatusCode::kInvalidArgument, "saved over 15 elements"));
  EXPECT_THAT(RestoreAndNext(State(f, 0, 0, kElements, 0)),
              StatusIs(StatusCode::kInvalidArgument, "shuffle off"));
  CKFLOW_EXPECT_OK(RestoreAndNext(State(f, 2, 4, kElements, 1)));
}

}  // namespace
}  // namespace ckflow
