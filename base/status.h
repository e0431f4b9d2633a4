// Status and StatusOr<T>: the one error model of ckflow.
//
// A Status is either OK (a null pointer, free to copy and test) or a code
// with a message. Codes and their numbers are TensorFlow's, so an error read
// by a TensorFlow user means what they expect. Messages name the thing at
// fault ("dense/MatMul: ...", "ckpt-7.index: ..."); callers prepend context
// with WithContext() as errors travel up, keeping the code.
//
// Thread safety: Status and StatusOr are values; distinct objects may be used
// from different threads freely, a shared const object too.

#ifndef CKFLOW_BASE_STATUS_H_
#define CKFLOW_BASE_STATUS_H_

#include <memory>
#include <ostream>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace ckflow {

// TensorFlow's error codes, with TensorFlow's numbers.
enum class StatusCode : int {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
  kUnauthenticated = 16,
};

// "InvalidArgument", "NotFound", ... (TensorFlow's spelling).
std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string_view message);

  Status(const Status& other);
  Status& operator=(const Status& other);
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;

  bool ok() const { return rep_ == nullptr; }
  StatusCode code() const { return ok() ? StatusCode::kOk : rep_->code; }
  std::string_view message() const {
    return ok() ? std::string_view() : std::string_view(rep_->message);
  }
  // "OK" or "NotFound: message".
  std::string ToString() const;

  // Returns this status with "context: " in front of the message; OK stays OK.
  Status WithContext(std::string_view context) const;

  // Marks a status deliberately dropped.
  void IgnoreError() const {}

  friend bool operator==(const Status& a, const Status& b) {
    return a.code() == b.code() && a.message() == b.message();
  }

 private:
  struct Rep {
    StatusCode code;
    std::string message;
  };
  std::unique_ptr<Rep> rep_;
};

std::ostream& operator<<(std::ostream& os, const Status& status);

inline Status OkStatus() { return Status(); }

namespace internal {
template <typename... Args>
std::string StrCat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace internal

// Error factories: the arguments are streamed into the message, so callers
// write NotFoundError("feed '", name, "': no such node").
#define CKFLOW_DEFINE_ERROR_FACTORY(Name, Code)                 \
  template <typename... Args>                                   \
  Status Name##Error(const Args&... args) {                     \
    return Status(StatusCode::Code, internal::StrCat(args...)); \
  }                                                             \
  inline bool Is##Name(const Status& s) { return s.code() == StatusCode::Code; }
CKFLOW_DEFINE_ERROR_FACTORY(Cancelled, kCancelled)
CKFLOW_DEFINE_ERROR_FACTORY(Unknown, kUnknown)
CKFLOW_DEFINE_ERROR_FACTORY(DeadlineExceeded, kDeadlineExceeded)
CKFLOW_DEFINE_ERROR_FACTORY(InvalidArgument, kInvalidArgument)
CKFLOW_DEFINE_ERROR_FACTORY(NotFound, kNotFound)
CKFLOW_DEFINE_ERROR_FACTORY(AlreadyExists, kAlreadyExists)
CKFLOW_DEFINE_ERROR_FACTORY(PermissionDenied, kPermissionDenied)
CKFLOW_DEFINE_ERROR_FACTORY(ResourceExhausted, kResourceExhausted)
CKFLOW_DEFINE_ERROR_FACTORY(FailedPrecondition, kFailedPrecondition)
CKFLOW_DEFINE_ERROR_FACTORY(Aborted, kAborted)
CKFLOW_DEFINE_ERROR_FACTORY(OutOfRange, kOutOfRange)
CKFLOW_DEFINE_ERROR_FACTORY(Unimplemented, kUnimplemented)
CKFLOW_DEFINE_ERROR_FACTORY(Internal, kInternal)
CKFLOW_DEFINE_ERROR_FACTORY(Unavailable, kUnavailable)
CKFLOW_DEFINE_ERROR_FACTORY(DataLoss, kDataLoss)
#undef CKFLOW_DEFINE_ERROR_FACTORY

// StatusOr<T>: a T or a non-OK Status. Accessing the value of an error is a
// broken invariant (aborts); check ok() first.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(const Status& status) : v_(status) { CheckNotOk(); }        // NOLINT
  StatusOr(Status&& status) : v_(std::move(status)) { CheckNotOk(); }  // NOLINT
  StatusOr(const T& value) : v_(value) {}                              // NOLINT
  StatusOr(T&& value) : v_(std::move(value)) {}                        // NOLINT
  template <typename U, typename = std::enable_if_t<std::is_constructible_v<T, U&&> &&
                                                    !std::is_same_v<std::decay_t<U>, T> &&
                                                    !std::is_same_v<std::decay_t<U>, Status>>>
  StatusOr(U&& value) : v_(T(std::forward<U>(value))) {}  // NOLINT

  bool ok() const { return v_.index() == 1; }
  Status status() const { return ok() ? Status() : std::get<0>(v_); }

  const T& value() const& {
    CheckOk();
    return std::get<1>(v_);
  }
  T& value() & {
    CheckOk();
    return std::get<1>(v_);
  }
  T&& value() && {
    CheckOk();
    return std::get<1>(std::move(v_));
  }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

 private:
  void CheckNotOk() const;
  void CheckOk() const;
  std::variant<Status, T> v_;
};

namespace internal {
[[noreturn]] void CheckFailed(const char* file, int line, const char* what);
}  // namespace internal

template <typename T>
void StatusOr<T>::CheckNotOk() const {
  if (std::get<0>(v_).ok()) {
    internal::CheckFailed(__FILE__, __LINE__, "StatusOr built from an OK Status");
  }
}

template <typename T>
void StatusOr<T>::CheckOk() const {
  if (!ok()) {
    internal::CheckFailed(__FILE__, __LINE__,
                          ("value() of an error StatusOr: " + std::get<0>(v_).ToString()).c_str());
  }
}

}  // namespace ckflow

#define CKFLOW_STATUS_CONCAT_INNER_(a, b) a##b
#define CKFLOW_STATUS_CONCAT_(a, b) CKFLOW_STATUS_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` is not OK.
#define CKFLOW_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::ckflow::Status ckflow_status_ = (expr);        \
    if (!ckflow_status_.ok()) return ckflow_status_; \
  } while (0)

// `lhs = value of expr`, or returns its error. lhs may declare: `auto x`.
#define CKFLOW_ASSIGN_OR_RETURN(lhs, expr) \
  CKFLOW_ASSIGN_OR_RETURN_IMPL_(CKFLOW_STATUS_CONCAT_(ckflow_statusor_, __LINE__), lhs, expr)
#define CKFLOW_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()

// Internal invariants only; never for anything a user can cause.
#define CKFLOW_CHECK(cond)                                                   \
  do {                                                                       \
    if (!(cond)) ::ckflow::internal::CheckFailed(__FILE__, __LINE__, #cond); \
  } while (0)

#endif  // CKFLOW_BASE_STATUS_H_
