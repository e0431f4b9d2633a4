// A restore opens its checkpoint once and hands the reader to each run of its
// restore ops; kernels given no reader open the checkpoint for that run; a
// reader handed to one run is not kept for the next, so a session that
// writes a prefix never reads it through a reader of what was there before.

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "bundle/bundle_reader.h"
#include "ops/array_ops.h"
#include "ops/checkpoint_ops.h"
#include "tests/bundle/bundle_test_util.h"
#include "tests/checkpoint/checkpoint_test_util.h"

namespace ckflow {
namespace {

namespace fs = std::filesystem;
using testing::CountingVariable;
using testing::ModelProgram;
using testing::SameTensor;
using testing::ValueOf;

TEST(ReaderHandoff, RestoreOpsReadThroughTheReaderTheRestoreOpened) {
  const std::string dir = testing::NewTempDir("handoff");
  ModelProgram writer;
  writer.Add("v", CountingVariable(writer.scope, "v", TensorShape({4}), 1.0f));
  CKFLOW_ASSERT_OK(writer.Finish());
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string path,
                              writer.checkpoint->Save(dir + "/ckpt", *writer.session));

  ModelProgram reader;
  reader.Add("v", CountingVariable(reader.scope, "v", TensorShape({4}), 100.0f));
  CKFLOW_ASSERT_OK(reader.Finish(/*initialize=*/false));
  CKFLOW_ASSERT_OK_AND_ASSIGN(LoadStatus status, reader.checkpoint->Restore(path));
  // The index was parsed by Restore; a restore op that opened the checkpoint
  // again would now find no index.
  ASSERT_TRUE(fs::remove(path + ".index"));
  CKFLOW_ASSERT_OK(status.RunRestoreOps(*reader.session));
  EXPECT_TRUE(SameTensor(ValueOf(*reader.session, *reader.vars[0]),
                         ValueOf(*writer.session, *writer.vars[0])));
}

Tensor OneString(const std::string& value) {
  Tensor t(DT_STRING, TensorShape({1}));
  t.flat<std::string>()[0] = value;
  return t;
}

// A RestoreV2 of `prefix`'s "x" in a graph of its own.
struct RestoreGraph {
  explicit RestoreGraph(const std::string& prefix)
      : restored(ops::RestoreV2(scope, ops::Const(scope, prefix), ops::Const(scope, OneString("x")),
                                ops::Const(scope, OneString("")), {DT_FLOAT})[0]),
        save(ops::SaveV2(scope, ops::Const(scope, prefix), ops::Const(scope, OneString("x")),
                         ops::Const(scope, OneString("")),
                         {ops::Const(scope, Tensor::FromVector<float>({3, 3}, {2}))})) {}

  float Restored(Session& session, const BundleReader* reader = nullptr) {
    StatusOr<std::vector<Tensor>> out = session.Run({}, {restored}, {}, {.bundle_reader = reader});
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? (*out)[0].flat<float>()[0] : -1;
  }

  Scope scope = Scope::NewRootScope();
  Output restored;
  Output save;
};

TEST(ReaderHandoff, AKernelWithNoReaderReadsWhatIsOnDiskAtEachRun) {
  const std::string prefix = testing::NewTempDir("handoff") + "/ckpt";
  CKFLOW_ASSERT_OK(testing::WriteBundle(prefix, {{"x", Tensor::FromVector<float>({1, 1}, {2})}}));
  RestoreGraph g(prefix);
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Session> session, Session::Create(g.scope.graph()));
  EXPECT_EQ(g.Restored(*session), 1.0f);
  CKFLOW_ASSERT_OK(testing::WriteBundle(prefix, {{"x", Tensor::FromVector<float>({2, 2}, {2})}}));
  EXPECT_EQ(g.Restored(*session), 2.0f);
}

TEST(ReaderHandoff, ASessionThatWritesAPrefixNeverReadsItThroughAnOlderReader) {
  const std::string prefix = testing::NewTempDir("handoff") + "/ckpt";
  CKFLOW_ASSERT_OK(testing::WriteBundle(prefix, {{"x", Tensor::FromVector<float>({1, 1}, {2})}}));
  RestoreGraph g(prefix);
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Session> session, Session::Create(g.scope.graph()));
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> opened, BundleReader::Open(prefix));
  EXPECT_EQ(g.Restored(*session, opened.get()), 1.0f);
  ASSERT_TRUE(session->Run({}, {}, {g.save}).ok());
  EXPECT_EQ(g.Restored(*session), 3.0f);
}

}  // namespace
}  // namespace ckflow
