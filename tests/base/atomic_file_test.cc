// The atomic-file helpers: the names they make are the names they
// recognize, and a failed step leaves every final name as it was.

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <utility>
#include <vector>

#include "base/atomic_file_internal.h"
#include "base/file_system.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

// Fails every rename from `fail_from` or to `fail_to`, and every SyncDir,
// when asked.
class FailingFileSystem final : public FileSystemWrapper {
 public:
  FailingFileSystem() : FileSystemWrapper(FileSystem::Default()) {}
  Status RenameFile(const std::string& from, const std::string& to) override {
    if (from == fail_from || to == fail_to) return ErrnoStatus(ENOSPC, "rename to " + to, from);
    return FileSystemWrapper::RenameFile(from, to);
  }
  Status SyncDir(const std::string& dir) override {
    if (fail_sync_dir) return ErrnoStatus(EIO, "fsync directory", dir);
    return FileSystemWrapper::SyncDir(dir);
  }
  std::string fail_from;
  std::string fail_to;
  bool fail_sync_dir = false;
};

std::vector<std::string> Names(const std::string& dir) {
  StatusOr<std::vector<std::string>> names = FileSystem::Default()->ListDir(dir);
  EXPECT_TRUE(names.ok()) << names.status();
  std::vector<std::string> sorted = names.ok() ? *names : std::vector<std::string>();
  std::sort(sorted.begin(), sorted.end());
  return sorted;
}

std::string Contents(const std::string& path) {
  StatusOr<std::string> text = FileSystem::Default()->ReadFileToString(path);
  return text.ok() ? *text : "<" + text.status().ToString() + ">";
}

TEST(AtomicFile, TempNamesAreRecognizedByTheirSuffixes) {
  EXPECT_TRUE(internal::IsTempStateSuffix(internal::TempStateSuffix()));
  EXPECT_TRUE(internal::IsSetAsideSuffix(".old123"));
  EXPECT_FALSE(internal::IsTempStateSuffix(".tempstate"));
  EXPECT_FALSE(internal::IsTempStateSuffix(".tempstate12x"));
  EXPECT_FALSE(internal::IsSetAsideSuffix(".tempstate1"));
  EXPECT_FALSE(internal::IsTempStateSuffix(".tempstate" + std::string(33, '1')));
}

TEST(AtomicFile, ReplaceFileLeavesOnlyTheFinalName) {
  const std::string dir = testing::NewTempDir("atomic");
  FileSystem* fs = FileSystem::Default();
  CKFLOW_ASSERT_OK(internal::ReplaceFile(fs, dir, "state", "one", /*durable=*/false));
  CKFLOW_ASSERT_OK(internal::ReplaceFile(fs, dir, "state", "two", /*durable=*/true));
  EXPECT_EQ(Names(dir), std::vector<std::string>{"state"});
  EXPECT_EQ(Contents(dir + "/state"), "two");
}

TEST(AtomicFile, ReplaceFileThatFailsToRenameKeepsThePreviousFile) {
  const std::string dir = testing::NewTempDir("atomic");
  FailingFileSystem fs;
  CKFLOW_ASSERT_OK(internal::ReplaceFile(&fs, dir, "state", "one", /*durable=*/false));
  fs.fail_to = dir + "/state";
  EXPECT_THAT(internal::ReplaceFile(&fs, dir, "state", "two", /*durable=*/false),
              testing::StatusIs(StatusCode::kResourceExhausted, "rename to"));
  EXPECT_EQ(Names(dir), std::vector<std::string>{"state"});
  EXPECT_EQ(Contents(dir + "/state"), "one");
}

TEST(AtomicFile, DurableReplaceWhoseDirectorySyncFailsPutsThePreviousFileBack) {
  const std::string dir = testing::NewTempDir("atomic");
  FailingFileSystem fs;
  CKFLOW_ASSERT_OK(internal::ReplaceFile(&fs, dir, "state", "one", /*durable=*/true));
  fs.fail_sync_dir = true;
  EXPECT_THAT(internal::ReplaceFile(&fs, dir, "state", "two", /*durable=*/true),
              testing::StatusIs(StatusCode::kDataLoss, "fsync directory"));
  EXPECT_EQ(Names(dir), std::vector<std::string>{"state"});
  EXPECT_EQ(Contents(dir + "/state"), "one");
}

TEST(AtomicFile, TheReplaceTempNameIsRecognized) {
  const std::string dir = testing::NewTempDir("atomic");
  FailingFileSystem fs;
  fs.fail_to = dir + "/state";
  // The failed rename leaves nothing; a rename that never ran leaves the
  // temp file a dead writer would: find it through the file system.
  class KeepTemp final : public FileSystemWrapper {
   public:
    explicit KeepTemp(FileSystem* target) : FileSystemWrapper(target) {}
    Status DeleteFile(const std::string&) override { return OkStatus(); }
  } keep(&fs);
  ASSERT_FALSE(internal::ReplaceFile(&keep, dir, "state", "x", /*durable=*/false).ok());
  const std::vector<std::string> names = Names(dir);
  ASSERT_EQ(names.size(), 1u);
  EXPECT_TRUE(internal::IsReplaceTempName(names[0], "state")) << names[0];
  EXPECT_FALSE(internal::IsReplaceTempName(names[0], "other"));
  EXPECT_FALSE(internal::IsReplaceTempName("state.tmp", "state"));
}

TEST(AtomicFile, MoveIntoPlaceThatFailsPutsEveryFinalNameBack) {
  const std::string dir = testing::NewTempDir("atomic");
  FailingFileSystem fs;
  CKFLOW_ASSERT_OK(internal::WriteNewFile(&fs, dir + "/data", "old data"));
  CKFLOW_ASSERT_OK(internal::WriteNewFile(&fs, dir + "/index", "old index"));
  CKFLOW_ASSERT_OK(internal::WriteNewFile(&fs, dir + "/data.new", "new data"));
  CKFLOW_ASSERT_OK(internal::WriteNewFile(&fs, dir + "/index.new", "new index"));
  fs.fail_from = dir + "/index.new";
  const std::vector<std::pair<std::string, std::string>> moves = {
      {dir + "/data.new", dir + "/data"}, {dir + "/index.new", dir + "/index"}};
  EXPECT_FALSE(internal::MoveIntoPlace(&fs, moves).ok());
  EXPECT_EQ(Contents(dir + "/data"), "old data");
  EXPECT_EQ(Contents(dir + "/index"), "old index");
  EXPECT_EQ(Names(dir), (std::vector<std::string>{"data", "data.new", "index", "index.new"}));
}

TEST(AtomicFile, MoveIntoPlaceDurablyWhoseSyncFailsRemovesTheNewFiles) {
  const std::string dir = testing::NewTempDir("atomic");
  FailingFileSystem fs;
  CKFLOW_ASSERT_OK(internal::WriteNewFile(&fs, dir + "/data.new", "new data"));
  fs.fail_sync_dir = true;
  const std::vector<std::pair<std::string, std::string>> moves = {
      {dir + "/data.new", dir + "/data"}};
  EXPECT_THAT(internal::MoveIntoPlaceDurably(&fs, moves, /*sync=*/true, "the data"),
              testing::StatusIs(StatusCode::kDataLoss, "making the data durable"));
  EXPECT_TRUE(Names(dir).empty());
}

}  // namespace
}  // namespace ckflow
