// The two ways a save reads its variables write the same bytes: SaveV2 fed
// by a ReadVariableOp per variable (what an async save's snapshot stands in
// for) and SaveVariables, which reads the variables itself (a sync save).
// For every dtype, at sizes on both sides of the size SaveVariables writes
// under the variable's lock, with other tensors interleaved among the keys.

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "bundle/bundle_reader.h"
#include "checkpoint/checkpoint.h"
#include "ops/array_ops.h"
#include "ops/checkpoint_ops.h"
#include "ops/variable_ops.h"
#include "tests/bundle/bundle_test_util.h"
#include "tests/bundle/testdata_util.h"
#include "tests/checkpoint/checkpoint_test_util.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

using testing::FilesOf;

Tensor StringVector(const std::vector<std::string>& values) {
  Tensor t(DT_STRING, TensorShape({static_cast<int64_t>(values.size())}));
  for (size_t i = 0; i < values.size(); ++i) t.flat<std::string>()[i] = values[i];
  return t;
}

// Variables of every dtype, some small (written under the variable's lock)
// and some over 64 KiB (shared and written unlocked), in a session.
struct Program {
  Scope scope = Scope::NewRootScope();
  std::unique_ptr<Session> session;
  std::vector<std::shared_ptr<Variable>> vars;
  std::vector<std::string> keys;  // sorted, as the saver passes them
  std::vector<Tensor> values;

  Program() {
    std::mt19937_64 rng(11);
    const DataType dtypes[] = {DT_FLOAT, DT_DOUBLE, DT_INT8, DT_BOOL, DT_HALF, DT_COMPLEX64};
    std::map<std::string, std::pair<std::string, Tensor>> by_key;
    for (DataType dtype : dtypes) {
      for (int64_t bytes : {int64_t{8}, int64_t{64} << 10, (int64_t{64} << 10) + 64}) {
        const auto n = std::max<int64_t>(1, bytes / static_cast<int64_t>(DataTypeSize(dtype)));
        Tensor t = Tensor::Allocate(dtype, TensorShape({n})).value();
        auto* p = static_cast<unsigned char*>(t.raw_data());
        for (size_t i = 0; i < t.TotalBytes(); ++i) {
          p[i] = static_cast<unsigned char>(dtype == DT_BOOL ? rng() & 1 : rng());
        }
        const std::string name = std::string(DataTypeName(dtype)) + "_" + std::to_string(bytes);
        by_key["v/" + name] = {name, t};
      }
    }
    for (auto& [key, named] : by_key) {
      vars.push_back(Variable::Create(scope, named.first, ops::Const(scope, named.second)));
      keys.push_back(key);
      values.push_back(named.second);
    }
    std::vector<Output> inits;
    for (const auto& v : vars) inits.push_back(v->initializer());
    session = testing::NewSession(scope);
    testing::RunOrFail(*session, inits);
  }

  std::vector<Output> Handles() const {
    std::vector<Output> handles;
    for (const auto& v : vars) handles.push_back(v->handle());
    return handles;
  }
};

TEST(SaveVariablesTest, WritesTheBytesSaveV2WritesFromReads) {
  const std::string dir = testing::NewTempDir("savepaths");
  Program p;
  // Two more tensors, sorting before, between and after the variables.
  const std::vector<std::string> tensor_names = {"a_first", "v/m_between", "z_last"};
  const std::vector<Output> tensors = {ops::Const(p.scope, Tensor::Scalar(std::string("graph"))),
                                       ops::Const(p.scope, Tensor::FromVector<int32_t>({1, 2})),
                                       ops::Const(p.scope, Tensor::Scalar(2.5f))};
  CKFLOW_ASSERT_OK_AND_ASSIGN(ops::VariableDeclarations declared, ops::DeclarationsOf(p.Handles()));
  Output by_name = ops::SaveVariables(p.scope, ops::Const(p.scope, dir + "/by_name"), p.keys,
                                      declared, {}, tensor_names, tensors);

  // SaveV2 writes in the order it is given: the keys sorted, as the saver
  // gives them and as SaveVariables interleaves its two lists.
  std::map<std::string, Output> sorted;
  for (size_t i = 0; i < p.vars.size(); ++i) sorted[p.keys[i]] = p.vars[i]->value();
  for (size_t i = 0; i < tensors.size(); ++i) sorted[tensor_names[i]] = tensors[i];
  std::vector<std::string> names;
  std::vector<Output> reads;
  for (const auto& [name, read] : sorted) {
    names.push_back(name);
    reads.push_back(read);
  }
  Output from_reads = ops::SaveV2(
      p.scope, ops::Const(p.scope, dir + "/from_reads"), ops::Const(p.scope, StringVector(names)),
      ops::Const(p.scope, StringVector(std::vector<std::string>(names.size(), std::string()))),
      reads);
  ASSERT_TRUE(p.scope.ok()) << p.scope.status();
  // Only the prefix and the tensors: no value input per variable.
  EXPECT_EQ(by_name.node()->inputs().size(), 1 + tensors.size());
  testing::RunOrFail(*p.session, {by_name, from_reads});

  const std::map<std::string, std::string> files = FilesOf(dir + "/by_name");
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files, FilesOf(dir + "/from_reads"));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader,
                              BundleReader::Open(dir + "/by_name"));
  for (size_t i = 0; i < p.keys.size(); ++i) {
    CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor got, reader->Lookup(p.keys[i]));
    EXPECT_TRUE(testing::SameTensor(got, p.values[i])) << p.keys[i];
  }
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor between, reader->Lookup("v/m_between"));
  EXPECT_TRUE(testing::SameTensor(between, Tensor::FromVector<int32_t>({1, 2})));
  CKFLOW_EXPECT_OK(testing::CheckBundle(dir + "/by_name").status());
}

TEST(SaveVariablesTest, AVariableNeverInitializedFailsNamingItAndLeavesNoFile) {
  const std::string dir = testing::NewTempDir("savepaths");
  Program p;
  auto fresh = Variable::Create(p.scope, "fresh", ops::Const(p.scope, Tensor::Scalar(1.0f)));
  CKFLOW_ASSERT_OK_AND_ASSIGN(ops::VariableDeclarations declared,
                              ops::DeclarationsOf({p.vars[0]->handle(), fresh->handle()}));
  Output save = ops::SaveVariables(p.scope, ops::Const(p.scope, dir + "/ckpt"), {"a", "b/fresh"},
                                   declared, {}, {}, {});
  ASSERT_TRUE(p.scope.ok()) << p.scope.status();
  Status s = p.session->Run({}, {}, {save}).status();
  EXPECT_THAT(s, testing::StatusIs(StatusCode::kFailedPrecondition, "'fresh' is not initialized"));
  EXPECT_THAT(s, testing::StatusIs(StatusCode::kFailedPrecondition, "saving 'b/fresh'"));
  EXPECT_TRUE(testing::ListDir(dir).empty());
}

TEST(SaveVariablesTest, RefusesListsOfDifferentLengths) {
  Scope scope = Scope::NewRootScope();
  ops::VariableDeclarations one{{"v"}, {DT_FLOAT}, {PartialShape({2})}};
  Output prefix = ops::Const(scope, Tensor::Scalar(std::string("/tmp/x")));
  Output op = ops::SaveVariables(scope.WithOpName("save"), prefix, {"k0", "k1"}, one, {}, {}, {});
  EXPECT_FALSE(op.valid());
  EXPECT_THAT(scope.status(), testing::StatusIs(StatusCode::kInvalidArgument, "save"));
  EXPECT_THAT(scope.status(),
              testing::StatusIs(StatusCode::kInvalidArgument, "2 keys for 1 variables"));

  Scope other = Scope::NewRootScope();
  Output op2 =
      ops::SaveVariables(other, ops::Const(other, Tensor::Scalar(std::string("/tmp/x"))), {"k0"},
                         one, {}, {"t0", "t1"}, {ops::Const(other, Tensor::Scalar(1.0f))});
  EXPECT_FALSE(op2.valid());
  EXPECT_THAT(other.status(),
              testing::StatusIs(StatusCode::kInvalidArgument, "1 tensors for 2 tensor_names"));
}

// A Checkpoint's sync save reads its variables inside SaveVariables (one op
// per data file, no read op per variable); an async one feeds its snapshot
// to SaveV2 in place of ReadVariableOps. Both write the same bytes (see
// SavePlanTest.AnUnchangedModelIsSavedWithoutBuildingItsObjectGraphAgain).
TEST(SaveVariablesTest, ASyncCheckpointSaveRunsNoReadPerVariable) {
  const std::string dir = testing::NewTempDir("savepaths");
  Program p;
  auto root = std::make_shared<testing::Module>();
  for (size_t i = 0; i < p.vars.size(); ++i) root->Track("v" + std::to_string(i), p.vars[i]);
  Checkpoint checkpoint(p.scope, {{"model", root}});
  auto count = [&](const std::string& type) {
    int n = 0;
    for (int id = 0; id < p.scope.graph().num_nodes(); ++id) {
      const Node* node = p.scope.graph().node(id);
      if (node->type() == type && node->name().rfind("save", 0) == 0) ++n;
    }
    return n;
  };
  CKFLOW_ASSERT_OK(checkpoint.Write(dir + "/sync", *p.session).status());
  EXPECT_EQ(count("SaveVariables"), 1);
  EXPECT_EQ(count("ReadVariableOp"), 0);
  EXPECT_EQ(count("SaveV2"), 0);
  CKFLOW_ASSERT_OK(checkpoint.Write(dir + "/async", *p.session, {.async = true}).status());
  CKFLOW_ASSERT_OK(checkpoint.Sync());
  EXPECT_EQ(count("SaveV2"), 1);
  EXPECT_EQ(count("ReadVariableOp"), static_cast<int>(p.vars.size()));
  EXPECT_EQ(FilesOf(dir + "/sync"), FilesOf(dir + "/async"));
}

}  // namespace
}  // namespace ckflow

namespace ckflow {
namespace {

// An async save reads the variables straight from the session it is given,
// looked up once per session: a save through a new session (the old one
// gone, its memory possibly reused) reads the new session's variables.
TEST(SaveVariablesTest, AnAsyncSaveReadsTheSessionItIsGiven) {
  const std::string dir = testing::NewTempDir("savepaths");
  Scope scope = Scope::NewRootScope();
  auto v = testing::CountingVariable(scope, "v", TensorShape({3}), 1.0f);
  auto root = std::make_shared<testing::Module>();
  root->Track("v", v);
  Checkpoint checkpoint(scope, {{"model", root}});
  for (float start : {1.0f, 10.0f, 100.0f}) {
    std::unique_ptr<Session> session = testing::NewSession(scope);
    testing::RunOrFail(*session, {v->initializer()});
    testing::SetValue(*session, *v, Tensor::FromVector<float>({start, start + 1, start + 2}));
    const std::string prefix = dir + "/ckpt-" + std::to_string(static_cast<int>(start));
    CKFLOW_ASSERT_OK(checkpoint.Write(prefix, *session, {.async = true}).status());
    CKFLOW_ASSERT_OK(checkpoint.Sync());
    CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(prefix));
    CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor saved, reader->Lookup("model/v/.ATTRIBUTES/VARIABLE_VALUE"));
    EXPECT_TRUE(
        testing::SameTensor(saved, Tensor::FromVector<float>({start, start + 1, start + 2})))
        << prefix;
  }
  // A variable never initialized in the session fails the snapshot, naming it.
  std::unique_ptr<Session> fresh = testing::NewSession(scope);
  Status s = checkpoint.Write(dir + "/never", *fresh, {.async = true}).status();
  EXPECT_THAT(s, testing::StatusIs(StatusCode::kFailedPrecondition, "'v' is not initialized"));
  EXPECT_THAT(s, testing::StatusIs(StatusCode::kFailedPrecondition, "snapshotting"));
}

}  // namespace
}  // namespace ckflow
