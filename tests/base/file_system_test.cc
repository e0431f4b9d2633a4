// The file layer: errno mapped to a code once, naming the file and the
// operation; lexical path helpers that decide whether a state-file path
// stays in its directory; ListDir, Stat and SyncDir on POSIX.

#include "base/file_system.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <fstream>

#include "tests/test_util.h"

namespace ckflow {
namespace {

TEST(ErrnoStatus, MapsEachErrnoToOneCodeAndNamesFileAndStep) {
  const struct {
    int err;
    StatusCode code;
  } cases[] = {
      {ENOENT, StatusCode::kNotFound},
      {ENOTDIR, StatusCode::kNotFound},
      {EACCES, StatusCode::kPermissionDenied},
      {EPERM, StatusCode::kPermissionDenied},
      {EROFS, StatusCode::kPermissionDenied},
      {ENOSPC, StatusCode::kResourceExhausted},
      {EDQUOT, StatusCode::kResourceExhausted},
      {EMFILE, StatusCode::kResourceExhausted},
      {EEXIST, StatusCode::kAlreadyExists},
      {EIO, StatusCode::kDataLoss},
      {EFBIG, StatusCode::kOutOfRange},
      {ENOTEMPTY, StatusCode::kFailedPrecondition},
      {EXDEV, StatusCode::kFailedPrecondition},
      {EISDIR, StatusCode::kInvalidArgument},
      {ENAMETOOLONG, StatusCode::kInvalidArgument},
      {EBUSY, StatusCode::kUnavailable},
      {ENOTSUP, StatusCode::kUnknown},
  };
  for (const auto& c : cases) {
    Status s = ErrnoStatus(c.err, "fsync", "/d/ckpt-1.index");
    EXPECT_EQ(s.code(), c.code) << strerrorname_np(c.err);
    EXPECT_EQ(s.message(), std::string("/d/ckpt-1.index: fsync: ") + std::strerror(c.err) + " (" +
                               strerrorname_np(c.err) + ")");
  }
}

TEST(FileSystem, PosixErrorsNameTheOperation) {
  const std::string dir = testing::NewTempDir("fs");
  FileSystem* fs = FileSystem::Default();
  EXPECT_THAT(fs->RenameFile(dir + "/missing", dir + "/b"),
              testing::StatusIs(StatusCode::kNotFound,
                                dir + "/missing: rename to " + dir + "/b: No such file"));
  std::ofstream(dir + "/sub_file") << "x";
  EXPECT_THAT(fs->DeleteDir(dir),
              testing::StatusIs(StatusCode::kFailedPrecondition, dir + ": delete directory: "));
  EXPECT_THAT(fs->ListDir(dir + "/nope"), testing::StatusIs(StatusCode::kNotFound, ": list: "));
  EXPECT_THAT(fs->SyncDir(dir + "/nope"),
              testing::StatusIs(StatusCode::kNotFound, ": open directory: "));
}

TEST(FileSystem, ListStatAndSyncDir) {
  const std::string dir = testing::NewTempDir("fs");
  FileSystem* fs = FileSystem::Default();
  CKFLOW_ASSERT_OK(fs->CreateDirs(dir + "/a/b"));
  std::ofstream(dir + "/f") << "12345";
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<std::string> names, fs->ListDir(dir));
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"a", "f"}));
  CKFLOW_ASSERT_OK_AND_ASSIGN(FileStat f, fs->Stat(dir + "/f"));
  EXPECT_EQ(f.size, 5u);
  EXPECT_FALSE(f.is_directory);
  CKFLOW_ASSERT_OK_AND_ASSIGN(FileStat a, fs->Stat(dir + "/a"));
  EXPECT_TRUE(a.is_directory);
  EXPECT_NE(a.inode, f.inode);
  CKFLOW_EXPECT_OK(fs->SyncDir(dir));
}

// LinkFile: POSIX makes a second name of the same file; the default (what a
// file system without hard links gets) copies, in chunks, and refuses to
// replace an existing file.
TEST(FileSystem, LinkFileLinksOrCopies) {
  const std::string dir = testing::NewTempDir("fs");
  FileSystem* fs = FileSystem::Default();
  std::string contents(9 << 20, '\0');  // several of the copy's chunks
  for (size_t i = 0; i < contents.size(); ++i) contents[i] = static_cast<char>(i * 131 % 251);
  std::ofstream(dir + "/a", std::ios::binary) << contents;
  CKFLOW_ASSERT_OK(fs->LinkFile(dir + "/a", dir + "/linked"));
  CKFLOW_ASSERT_OK_AND_ASSIGN(FileStat a, fs->Stat(dir + "/a"));
  CKFLOW_ASSERT_OK_AND_ASSIGN(FileStat linked, fs->Stat(dir + "/linked"));
  EXPECT_EQ(linked.inode, a.inode);
  EXPECT_THAT(
      fs->LinkFile(dir + "/a", dir + "/linked"),
      testing::StatusIs(StatusCode::kAlreadyExists, dir + "/a: link to " + dir + "/linked"));
  EXPECT_THAT(fs->LinkFile(dir + "/missing", dir + "/b"),
              testing::StatusIs(StatusCode::kNotFound, dir + "/missing"));

  struct NoLinks final : FileSystemWrapper {
    NoLinks() : FileSystemWrapper(FileSystem::Default()) {}
    Status LinkFile(const std::string& from, const std::string& to) override {
      return FileSystem::LinkFile(from, to);
    }
  } copying;
  CKFLOW_ASSERT_OK(copying.LinkFile(dir + "/a", dir + "/copied"));
  CKFLOW_ASSERT_OK_AND_ASSIGN(FileStat copied, fs->Stat(dir + "/copied"));
  EXPECT_NE(copied.inode, a.inode);
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::string read, fs->ReadFileToString(dir + "/copied"));
  EXPECT_TRUE(read == contents);
  EXPECT_THAT(copying.LinkFile(dir + "/a", dir + "/copied"),
              testing::StatusIs(StatusCode::kAlreadyExists, dir + "/copied"));
  EXPECT_THAT(copying.LinkFile(dir + "/missing", dir + "/c"),
              testing::StatusIs(StatusCode::kNotFound, dir + "/missing"));
  EXPECT_EQ(fs->FileExists(dir + "/c").code(), StatusCode::kNotFound);
}

TEST(Paths, CleanPathIsLexical) {
  EXPECT_EQ(CleanPath("a/./b/"), "a/b");
  EXPECT_EQ(CleanPath("a//b"), "a/b");
  EXPECT_EQ(CleanPath("a/../../b"), "../b");
  EXPECT_EQ(CleanPath("/../a"), "/a");
  EXPECT_EQ(CleanPath(""), ".");
  EXPECT_EQ(CleanPath("a/.."), ".");
  EXPECT_EQ(CleanPath("/"), "/");
}

TEST(Paths, InsideDirectory) {
  EXPECT_TRUE(IsInsideDirectory("d", "ckpt-1"));
  EXPECT_TRUE(IsInsideDirectory("d", "sub/ckpt-1"));
  EXPECT_TRUE(IsInsideDirectory("d", "./x/../ckpt-1"));
  EXPECT_FALSE(IsInsideDirectory("d", "../ckpt-1"));
  EXPECT_FALSE(IsInsideDirectory("d", "x/../../ckpt-1"));
  EXPECT_FALSE(IsInsideDirectory("d", "."));
  EXPECT_FALSE(IsInsideDirectory("/a/d", "/a/other/ckpt-1"));
  EXPECT_FALSE(IsInsideDirectory("/a/d", "/a/dd/ckpt-1"));
  EXPECT_TRUE(IsInsideDirectory("/a/d", "/a/d/ckpt-1"));
  EXPECT_TRUE(IsInsideDirectory("/a/d/", "/a/d/./ckpt-1"));
  EXPECT_FALSE(IsInsideDirectory("/a/d", "/a/d/../d2/x"));
  EXPECT_TRUE(IsInsideDirectory(".", "ckpt-1"));
  EXPECT_FALSE(IsInsideDirectory(".", "../ckpt-1"));
}

}  // namespace
}  // namespace ckflow
