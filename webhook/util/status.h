// Status: the outcome of an operation at an I/O edge, as a value (LevelDB's Status is the model).
//
// Promise: a Status is OK (no message, no allocation) or an error with a code and a message that
// says what failed, written for an operator's log line ("bind 0.0.0.0:8443: Address already in
// use"). Cheap to copy and to return; never throws. Annotate() prefixes context to an error and
// leaves OK untouched, so layers can add what they know without re-testing ok().
//
// StatusOr<T> is a T or an error Status (never an OK Status without a value): the one return type
// of an I/O edge that yields a value. value() on an error is a bug and aborts the process.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace aw {

class [[nodiscard]] Status {
 public:
  enum class Code {
    kOk = 0,
    kInvalidArgument,  // bad input or configuration (the caller's to fix)
    kNotFound,
    kConflict,          // optimistic concurrency: re-read and retry
    kUnavailable,       // transient: the peer is down or overloaded; retry later
    kDeadlineExceeded,  // a deadline passed before the operation ended
    kCancelled,         // stopped on request
    kIOError,           // the operating system or a library reported a failure
    kInternal,          // a bug: an invariant did not hold
  };

  Status() = default;  // OK
  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string msg) {
    return {Code::kInvalidArgument, std::move(msg)};
  }
  static Status NotFound(std::string msg) { return {Code::kNotFound, std::move(msg)}; }
  static Status Conflict(std::string msg) { return {Code::kConflict, std::move(msg)}; }
  static Status Unavailable(std::string msg) { return {Code::kUnavailable, std::move(msg)}; }
  static Status DeadlineExceeded(std::string msg) {
    return {Code::kDeadlineExceeded, std::move(msg)};
  }
  static Status Cancelled(std::string msg) { return {Code::kCancelled, std::move(msg)}; }
  static Status IOError(std::string msg) { return {Code::kIOError, std::move(msg)}; }
  static Status Internal(std::string msg) { return {Code::kInternal, std::move(msg)}; }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

  // "OK", or "<code name>: <message>".
  std::string ToString() const;
  // An error with "<context>: " before its message; OK stays OK.
  Status Annotate(std::string_view context) const;

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }

 private:
  Status(Code code, std::string msg) : code_(code), message_(std::move(msg)) {}
  Code code_ = Code::kOk;
  std::string message_;
};

std::string_view CodeName(Status::Code code);

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  // `error` must not be OK (an OK status without a value becomes kInternal).
  StatusOr(Status error)  // NOLINT(google-explicit-constructor)
      : status_(error.ok() ? Status::Internal("StatusOr built from an OK status without a value")
                           : std::move(error)) {}

  bool ok() const { return value_.has_value(); }
  explicit operator bool() const { return ok(); }
  const Status& status() const { return status_; }  // OK when ok()

  T& value() & { return Checked(); }
  const T& value() const& { return const_cast<StatusOr*>(this)->Checked(); }
  T&& value() && { return std::move(Checked()); }
  T& operator*() & { return Checked(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &Checked(); }
  const T* operator->() const { return &value(); }

 private:
  T& Checked() {
    if (!value_) std::abort();
    return *value_;
  }
  Status status_;
  std::optional<T> value_;
};

}  // namespace aw
