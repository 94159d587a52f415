// Errors from the Kubernetes API server, as values.
//
// Promise: every failed call yields an ApiError that carries the HTTP status (0 for a transport
// failure: connect, TLS, timeout, cancelled), the API server's metav1.Status reason/message/code
// when the body holds one, and the Retry-After delay when the server sent one. Parsing never
// throws and accepts any bytes. Result<T> is either a T or an ApiError: the kube client's StatusOr,
// keeping the HTTP detail (status, reason, Retry-After) that retry and re-list decisions need;
// status() gives the project-wide Status for code outside kube/.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "util/status.h"

namespace aw::kube {

struct ApiError {
  int http_status = 0;  // 0: the request never got an HTTP answer (see transport_error)
  std::string reason;   // Status.reason, e.g. "Conflict", "NotFound", "Expired", "Forbidden"
  std::string message;  // Status.message, or a transport description
  int code = 0;         // Status.code (usually == http_status)
  std::chrono::seconds retry_after{0};  // from Retry-After or Status.details.retryAfterSeconds
  bool cancelled = false;               // the client was shut down while the call was in flight

  bool IsTransport() const { return http_status == 0; }
  bool IsNotFound() const { return http_status == 404; }
  bool IsForbidden() const { return http_status == 403; }
  bool IsUnauthorized() const { return http_status == 401; }
  bool IsAlreadyExists() const { return http_status == 409 && reason == "AlreadyExists"; }
  // Optimistic-concurrency failure (resourceVersion mismatch): re-read and retry.
  bool IsConflict() const { return http_status == 409 && reason != "AlreadyExists"; }
  // A JSON patch "test" op failed: the server answers 422 Invalid (or 409 on some paths).
  bool IsInvalid() const { return http_status == 422; }
  // The watch/list resourceVersion is too old: re-list.
  bool IsExpired() const {
    return http_status == 410 || code == 410 || reason == "Expired" || reason == "Gone";
  }
  bool IsTooManyRequests() const { return http_status == 429; }
  // Worth retrying the same request after a delay (Retry-After when given).
  bool IsRetryable() const {
    return !cancelled && (IsTransport() || http_status == 429 || http_status >= 500);
  }
  std::string ToString() const;
  // The same failure as the project's Status (for code outside kube/): Cancelled, NotFound,
  // Conflict (optimistic concurrency), Unavailable (worth retrying: transport, 429, 5xx),
  // InvalidArgument (other 4xx: the request itself was refused, e.g. 403, 422, AlreadyExists);
  // the message is ToString().
  Status ToStatus() const;
};

// Builds an ApiError from an HTTP answer. `body` may be a metav1.Status JSON object or anything.
ApiError ParseStatusError(int http_status, std::string_view body, std::string_view retry_after);
// Builds an ApiError from a metav1.Status object already known to be JSON text (watch ERROR
// events).
ApiError StatusFromJsonObject(std::string_view status_json);
// Parses a Retry-After header: delta-seconds only (HTTP dates are ignored -> 0). Capped at 1h.
std::chrono::seconds ParseRetryAfter(std::string_view header);

ApiError TransportError(std::string message, bool cancelled = false);

// A value or the API error, [[nodiscard]] as Status is: an ignored answer is a compile error.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}         // NOLINT(google-explicit-constructor)
  Result(ApiError error) : v_(std::move(error)) {}  // NOLINT(google-explicit-constructor)
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() { return std::get<0>(v_); }
  const T& value() const { return std::get<0>(v_); }
  T& operator*() { return value(); }
  const T& operator*() const { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const ApiError& error() const { return std::get<1>(v_); }
  // OK, or error().ToStatus().
  Status status() const { return ok() ? Status::Ok() : error().ToStatus(); }

 private:
  std::variant<T, ApiError> v_;
};

}  // namespace aw::kube
