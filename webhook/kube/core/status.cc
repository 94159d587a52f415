#include "kube/core/status.h"

#include <fmt/format.h>
#include <rapidjson/document.h>

#include <cctype>

namespace aw::kube {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string GetString(const rapidjson::Value& obj, const char* key) {
  if (!obj.IsObject()) return {};
  auto it = obj.FindMember(key);
  if (it == obj.MemberEnd() || !it->value.IsString()) return {};
  return std::string(it->value.GetString(), it->value.GetStringLength());
}

// Fills reason/message/code/retry_after from a parsed Status object. Returns false when the value
// does not look like a metav1.Status.
bool FillFromStatus(const rapidjson::Value& v, ApiError* e) {
  if (!v.IsObject()) return false;
  std::string kind = GetString(v, "kind");
  auto code_it = v.FindMember("code");
  bool has_code = code_it != v.MemberEnd() && code_it->value.IsInt();
  if (kind != "Status" && !has_code && GetString(v, "reason").empty()) return false;
  e->reason = GetString(v, "reason");
  std::string msg = GetString(v, "message");
  if (!msg.empty()) e->message = std::move(msg);
  if (has_code) e->code = code_it->value.GetInt();
  auto det = v.FindMember("details");
  if (det != v.MemberEnd() && det->value.IsObject()) {
    auto ra = det->value.FindMember("retryAfterSeconds");
    if (ra != det->value.MemberEnd() && ra->value.IsInt() && ra->value.GetInt() > 0 &&
        e->retry_after.count() == 0) {
      e->retry_after = std::chrono::seconds(std::min(ra->value.GetInt(), 3600));
    }
  }
  return true;
}

}  // namespace

std::string ApiError::ToString() const {
  if (http_status == 0) {
    return fmt::format("{}{}", cancelled ? "cancelled: " : "transport error: ", message);
  }
  std::string s = fmt::format("HTTP {}", http_status);
  if (!reason.empty()) s += " " + reason;
  if (!message.empty()) s += ": " + message;
  if (retry_after.count() > 0) s += fmt::format(" (retry after {}s)", retry_after.count());
  return s;
}

Status ApiError::ToStatus() const {
  std::string m = ToString();
  if (cancelled) return Status::Cancelled(std::move(m));
  if (IsNotFound()) return Status::NotFound(std::move(m));
  if (IsConflict()) return Status::Conflict(std::move(m));
  if (IsRetryable()) return Status::Unavailable(std::move(m));
  if (http_status == 408 || http_status == 504) return Status::DeadlineExceeded(std::move(m));
  if (http_status >= 400 && http_status < 500) return Status::InvalidArgument(std::move(m));
  return Status::Internal(std::move(m));
}

std::chrono::seconds ParseRetryAfter(std::string_view header) {
  header = Trim(header);
  if (header.empty() || header.size() > 9) return std::chrono::seconds(0);
  long v = 0;
  for (char c : header) {
    if (c < '0' || c > '9') return std::chrono::seconds(0);
    v = v * 10 + (c - '0');
  }
  return std::chrono::seconds(std::min(v, 3600L));
}

ApiError ParseStatusError(int http_status, std::string_view body, std::string_view retry_after) {
  ApiError e;
  e.http_status = http_status;
  e.code = http_status;
  e.retry_after = ParseRetryAfter(retry_after);
  rapidjson::Document d;
  d.Parse(body.data(), body.size());
  if (d.HasParseError() || !FillFromStatus(d, &e)) {
    std::string_view snippet = Trim(body.substr(0, 512));
    e.message = std::string(snippet);
  }
  if (e.message.empty()) e.message = fmt::format("HTTP status {}", http_status);
  return e;
}

ApiError StatusFromJsonObject(std::string_view status_json) {
  ApiError e;
  rapidjson::Document d;
  d.Parse(status_json.data(), status_json.size());
  if (d.HasParseError() || !FillFromStatus(d, &e)) {
    e.http_status = 500;
    e.message = "watch ERROR event without a Status object";
    return e;
  }
  e.http_status = e.code > 0 ? e.code : 500;
  return e;
}

ApiError TransportError(std::string message, bool cancelled) {
  ApiError e;
  e.message = std::move(message);
  e.cancelled = cancelled;
  return e;
}

}  // namespace aw::kube
