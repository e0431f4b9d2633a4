// A rank SIGKILLed in the middle of a group save, run as mpirun's child:
// Open MPI's mpirun sees the rank die and aborts the job (so the others do
// not wait at the barrier forever), and the checkpoint saved before stays
// the latest and intact.

#include <gtest/gtest.h>

#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_management.h"
#include "tests/checkpoint/group_model.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

TEST(GroupSaveKilled, MpirunAbortsTheJobAndThePreviousCheckpointStaysLatest) {
  const std::string dir = testing::NewTempDir("mpikill");
  std::string output;
  // As ctest runs the other mpirun tests (as root here).
  const int code = testing::RunCommand(
      "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 " + std::string(CKFLOW_MPIRUN) +
          " --oversubscribe -np 3 " CKFLOW_GROUP_ROUNDTRIP " kill '" + dir + "' 5 2>&1",
      &output);
  EXPECT_NE(code, 0) << output;
  // mpirun names the rank that died and says it killed the others.
  EXPECT_NE(output.find("signal 9"), std::string::npos) << output;
  EXPECT_EQ(LatestCheckpoint(dir), dir + "/ckpt-1") << output;
  EXPECT_FALSE(FileSystem::Default()->FileExists(dir + "/ckpt-2.index").ok());

  StatusOr<std::unique_ptr<testing::GroupModel>> m = testing::GroupModel::Create({});
  ASSERT_TRUE(m.ok()) << m.status();
  StatusOr<LoadStatus> status = (*m)->checkpoint().Restore(dir + "/ckpt-1");
  ASSERT_TRUE(status.ok()) << status.status();
  CKFLOW_ASSERT_OK(status->AssertConsumed());
  CKFLOW_ASSERT_OK(status->InitializeOrRestore((*m)->session()));
  StatusOr<int> restored = (*m)->CheckInitialized(5);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(*restored, (*m)->num_values());
}

}  // namespace
}  // namespace ckflow
