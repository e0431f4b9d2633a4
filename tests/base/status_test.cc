#include "base/status.h"

#include <gtest/gtest.h>

#include <string>

namespace ckflow {
namespace {

TEST(Status, OkIsCheapAndPrintsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.ToString(), "OK");
}

struct CodeCase {
  Status status;
  StatusCode code;
  int number;
  const char* text;
};

TEST(Status, FactoriesUseTensorFlowCodesAndNumbers) {
  const CodeCase cases[] = {
      {InvalidArgumentError("x ", 3), StatusCode::kInvalidArgument, 3, "InvalidArgument: x 3"},
      {NotFoundError("k"), StatusCode::kNotFound, 5, "NotFound: k"},
      {AlreadyExistsError("k"), StatusCode::kAlreadyExists, 6, "AlreadyExists: k"},
      {FailedPreconditionError("k"), StatusCode::kFailedPrecondition, 9, "FailedPrecondition: k"},
      {OutOfRangeError("k"), StatusCode::kOutOfRange, 11, "OutOfRange: k"},
      {UnimplementedError("k"), StatusCode::kUnimplemented, 12, "Unimplemented: k"},
      {InternalError("k"), StatusCode::kInternal, 13, "Internal: k"},
      {DataLossError("k"), StatusCode::kDataLoss, 15, "DataLoss: k"},
  };
  for (const CodeCase& c : cases) {
    EXPECT_FALSE(c.status.ok());
    EXPECT_EQ(c.status.code(), c.code);
    EXPECT_EQ(static_cast<int>(c.status.code()), c.number);
    EXPECT_EQ(c.status.ToString(), c.text);
  }
}

TEST(Status, WithContextPrependsAndKeepsCode) {
  Status s = DataLossError("block checksum mismatch").WithContext("ckpt-7.index");
  EXPECT_TRUE(IsDataLoss(s));
  EXPECT_EQ(s.message(), "ckpt-7.index: block checksum mismatch");
  EXPECT_TRUE(OkStatus().WithContext("x").ok());
}

TEST(Status, CopiesAreIndependentValues) {
  Status a = NotFoundError("a");
  Status b = a;
  a = OkStatus();
  EXPECT_TRUE(a.ok());
  EXPECT_EQ(b.ToString(), "NotFound: a");
}

StatusOr<int> Half(int x) {
  if (x % 2) return InvalidArgumentError(x, " is odd");
  return x / 2;
}

Status Quarter(int x, int* out) {
  CKFLOW_ASSIGN_OR_RETURN(int h, Half(x));
  CKFLOW_ASSIGN_OR_RETURN(*out, Half(h));
  return OkStatus();
}

TEST(StatusOr, MacrosPropagateTheFirstError) {
  int out = 0;
  EXPECT_TRUE(Quarter(8, &out).ok());
  EXPECT_EQ(out, 2);
  Status s = Quarter(6, &out);
  EXPECT_EQ(s.ToString(), "InvalidArgument: 3 is odd");
}

TEST(StatusOr, HoldsMoveOnlyValues) {
  StatusOr<std::unique_ptr<int>> p = std::make_unique<int>(4);
  ASSERT_TRUE(p.ok());
  std::unique_ptr<int> q = std::move(p).value();
  EXPECT_EQ(*q, 4);
}

}  // namespace
}  // namespace ckflow
