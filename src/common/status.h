// Status and Result<T>: Drover's error values.
//
// Errors are values, never exceptions across module boundaries. A Status is
// either OK or carries a code and a message a person can read ("memory
// quantity \"4G\" is ambiguous: ..."). Result<T> holds a T or a non-OK Status.
//
// Code meanings follow Abseil: kUnavailable means retry with backoff,
// kFailedPrecondition means do not retry until something changes,
// kInvalidArgument means the input itself is wrong.
//
// Thread safety: plain values; safe to copy between threads.
#ifndef DROVER_COMMON_STATUS_H_
#define DROVER_COMMON_STATUS_H_

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace drover {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,
  kNotFound,
  kAlreadyExists,
  kFailedPrecondition,
  kResourceExhausted,
  kUnavailable,
  kPermissionDenied,
  kUnauthenticated,
  kDeadlineExceeded,
  kAborted,
  kDataLoss,
  kInternal,
};

// Returns a stable lower-case name such as "invalid_argument", used in API
// error bodies and logs.
std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "invalid_argument: memory quantity ..." or "ok".
  std::string ToString() const;

  // Returns a copy whose message is prefixed with `context: `, for adding
  // where an error happened ("job.toml:12: task.resources.mem: ...").
  Status WithContext(std::string_view context) const;

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string msg) {
  return Status(StatusCode::kInvalidArgument, std::move(msg));
}
inline Status NotFound(std::string msg) { return Status(StatusCode::kNotFound, std::move(msg)); }
inline Status AlreadyExists(std::string msg) {
  return Status(StatusCode::kAlreadyExists, std::move(msg));
}
inline Status FailedPrecondition(std::string msg) {
  return Status(StatusCode::kFailedPrecondition, std::move(msg));
}
inline Status ResourceExhausted(std::string msg) {
  return Status(StatusCode::kResourceExhausted, std::move(msg));
}
inline Status Unavailable(std::string msg) {
  return Status(StatusCode::kUnavailable, std::move(msg));
}
inline Status PermissionDenied(std::string msg) {
  return Status(StatusCode::kPermissionDenied, std::move(msg));
}
inline Status Unauthenticated(std::string msg) {
  return Status(StatusCode::kUnauthenticated, std::move(msg));
}
inline Status DataLoss(std::string msg) { return Status(StatusCode::kDataLoss, std::move(msg)); }
inline Status Internal(std::string msg) { return Status(StatusCode::kInternal, std::move(msg)); }

// Result<T>: a T on success, a non-OK Status on failure. Accessing value()
// of a failed Result is a programming error (asserts in debug builds).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    assert(!status_.ok() && "Result constructed from an OK status");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  T& value() & {
    assert(ok());
    return *value_;
  }
  const T& value() const& {
    assert(ok());
    return *value_;
  }
  T&& value() && {
    assert(ok());
    return std::move(*value_);
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  T value_or(T fallback) const { return ok() ? *value_ : std::move(fallback); }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace drover

#define DROVER_CONCAT_INNER_(a, b) a##b
#define DROVER_CONCAT_(a, b) DROVER_CONCAT_INNER_(a, b)

// Returns the Status from the enclosing function if `expr` is not OK.
#define RETURN_IF_ERROR(expr)                   \
  do {                                          \
    ::drover::Status drover_status_ = (expr);   \
    if (!drover_status_.ok()) return drover_status_; \
  } while (0)

// ASSIGN_OR_RETURN(auto x, MakeX()); declares x from a Result or returns its
// Status.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL_(DROVER_CONCAT_(drover_result_, __LINE__), lhs, expr)
#define ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                           \
  if (!tmp.ok()) return tmp.status();          \
  lhs = std::move(tmp).value()

#endif  // DROVER_COMMON_STATUS_H_
