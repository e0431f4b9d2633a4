#include "base/status.h"

#include <cstdio>
#include <cstdlib>

namespace ckflow {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kCancelled:
      return "Cancelled";
    case StatusCode::kUnknown:
      return "Unknown";
    case StatusCode::kInvalidArgument:
      return "InvalidArgument";
    case StatusCode::kDeadlineExceeded:
      return "DeadlineExceeded";
    case StatusCode::kNotFound:
      return "NotFound";
    case StatusCode::kAlreadyExists:
      return "AlreadyExists";
    case StatusCode::kPermissionDenied:
      return "PermissionDenied";
    case StatusCode::kResourceExhausted:
      return "ResourceExhausted";
    case StatusCode::kFailedPrecondition:
      return "FailedPrecondition";
    case StatusCode::kAborted:
      return "Aborted";
    case StatusCode::kOutOfRange:
      return "OutOfRange";
    case StatusCode::kUnimplemented:
      return "Unimplemented";
    case StatusCode::kInternal:
      return "Internal";
    case StatusCode::kUnavailable:
      return "Unavailable";
    case StatusCode::kDataLoss:
      return "DataLoss";
    case StatusCode::kUnauthenticated:
      return "Unauthenticated";
  }
  return "Unknown";
}

Status::Status(StatusCode code, std::string_view message) {
  // An "error" with code OK would make ok() lie; keep the invariant.
  if (code != StatusCode::kOk) {
    rep_ = std::make_unique<Rep>(Rep{code, std::string(message)});
  }
}

Status::Status(const Status& other)
    : rep_(other.rep_ ? std::make_unique<Rep>(*other.rep_) : nullptr) {}

Status& Status::operator=(const Status& other) {
  if (this != &other) {
    rep_ = other.rep_ ? std::make_unique<Rep>(*other.rep_) : nullptr;
  }
  return *this;
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string out(StatusCodeName(rep_->code));
  out += ": ";
  out += rep_->message;
  return out;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  std::string message(context);
  message += ": ";
  message += rep_->message;
  return Status(rep_->code, message);
}

std::ostream& operator<<(std::ostream& os, const Status& status) { return os << status.ToString(); }

namespace internal {
void CheckFailed(const char* file, int line, const char* what) {
  std::fprintf(stderr, "ckflow internal check failed at %s:%d: %s\n", file, line, what);
  std::abort();
}
}  // namespace internal

}  // namespace ckflow
