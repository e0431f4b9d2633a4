// Helpers shared by the tests: where the sources and the golden files are,
// fresh temp dirs, gtest matchers for Status, and bitwise tensor equality.

#ifndef CKFLOW_TESTS_TEST_UTIL_H_
#define CKFLOW_TESTS_TEST_UTIL_H_

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "base/status.h"
#include "base/tensor.h"

namespace ckflow::testing {

// The repository root, and its tests/testdata (the golden checkpoints
// TensorFlow wrote, tests/testdata/README.md).
std::string SourceDir();
std::string TestDataDir();
// A new empty directory under the system temp dir, removed at exit of the
// test binary unless CKFLOW_KEEP_TEST_DIRS is set.
std::string NewTempDir(const std::string& tag = "t");
// Runs a shell command; returns its exit code and fills *output with stdout.
int RunCommand(const std::string& command, std::string* output);
std::string ReadFileOrDie(const std::string& path);
// Bitwise equality of two tensors (dtype, shape and bytes or strings).
bool SameTensor(const Tensor& a, const Tensor& b);

inline Status StatusOf(const Status& s) { return s; }
template <typename T>
Status StatusOf(const StatusOr<T>& s) {
  return s.status();
}

// EXPECT_THAT(status_or_statusor, StatusIs(StatusCode::kNotFound, "ckpt-9.index")):
// the code is `code` and the message contains `substring` (empty: anything).
MATCHER_P2(StatusIs, code, substring,
           std::string(negation ? "isn't" : "is") + " a status with code " +
               std::string(::ckflow::StatusCodeName(code)) + " whose message contains \"" +
               std::string(substring) + "\"") {
  const ::ckflow::Status s = ::ckflow::testing::StatusOf(arg);
  *result_listener << "whose status is " << s;
  return s.code() == code &&
         std::string_view(s.message()).find(substring) != std::string_view::npos;
}

}  // namespace ckflow::testing

#define CKFLOW_ASSERT_OK(expr)                          \
  do {                                                  \
    ::ckflow::Status ckflow_test_s_ = (expr);           \
    ASSERT_TRUE(ckflow_test_s_.ok()) << ckflow_test_s_; \
  } while (0)
#define CKFLOW_EXPECT_OK(expr)                          \
  do {                                                  \
    ::ckflow::Status ckflow_test_s_ = (expr);           \
    EXPECT_TRUE(ckflow_test_s_.ok()) << ckflow_test_s_; \
  } while (0)
// `auto x = CKFLOW_ASSERT_OK_AND_ASSIGN_VALUE(expr)` is not possible in gtest;
// use this two-step form instead.
#define CKFLOW_ASSERT_OK_AND_ASSIGN(lhs, expr)                       \
  auto CKFLOW_STATUS_CONCAT_(ckflow_test_or_, __LINE__) = (expr);    \
  ASSERT_TRUE(CKFLOW_STATUS_CONCAT_(ckflow_test_or_, __LINE__).ok()) \
      << CKFLOW_STATUS_CONCAT_(ckflow_test_or_, __LINE__).status();  \
  lhs = std::move(CKFLOW_STATUS_CONCAT_(ckflow_test_or_, __LINE__)).value()

#endif  // CKFLOW_TESTS_TEST_UTIL_H_
