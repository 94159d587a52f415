#include "gateway/grpc_wire.h"

#include <algorithm>

#include "gateway/allocation.h"

namespace aw::gateway {

std::optional<std::chrono::nanoseconds> ParseGrpcTimeout(std::string_view text) {
  if (text.size() < 2 || text.size() > 9) return std::nullopt;
  int64_t value = 0;
  for (char c : text.substr(0, text.size() - 1)) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + (c - '0');
  }
  using namespace std::chrono;
  switch (text.back()) {
    case 'H':
      return duration_cast<nanoseconds>(hours(value));
    case 'M':
      return duration_cast<nanoseconds>(minutes(value));
    case 'S':
      return duration_cast<nanoseconds>(seconds(value));
    case 'm':
      return duration_cast<nanoseconds>(milliseconds(value));
    case 'u':
      return duration_cast<nanoseconds>(microseconds(value));
    case 'n':
      return nanoseconds(value);
    default:
      return std::nullopt;
  }
}

std::string FrameMessage(std::string_view payload) {
  std::string out;
  out.reserve(5 + payload.size());
  const auto n = static_cast<uint32_t>(payload.size());
  out.push_back('\0');
  out.push_back(static_cast<char>((n >> 24) & 0xff));
  out.push_back(static_cast<char>((n >> 16) & 0xff));
  out.push_back(static_cast<char>((n >> 8) & 0xff));
  out.push_back(static_cast<char>(n & 0xff));
  out.append(payload);
  return out;
}

FrameResult ReadUnaryMessage(std::string_view body, std::string_view* payload) {
  if (body.size() < 5) return FrameResult::kTruncated;
  const auto b = [&](size_t i) {
    return static_cast<uint32_t>(static_cast<unsigned char>(body[i]));
  };
  const uint32_t n = (b(1) << 24) | (b(2) << 16) | (b(3) << 8) | b(4);
  if (body.size() - 5 < n) return FrameResult::kTruncated;
  if (body.size() - 5 > n) return FrameResult::kTrailingData;
  if (b(0) != 0) return FrameResult::kCompressed;
  *payload = body.substr(5, n);
  return FrameResult::kOk;
}

std::chrono::nanoseconds GatewayDeadline(std::chrono::nanoseconds timeout,
                                         std::chrono::nanoseconds max) {
  using namespace std::chrono;
  const nanoseconds capped = std::min(timeout, max);
  const nanoseconds margin = std::min<nanoseconds>(capped / 20, seconds(1));
  return std::max<nanoseconds>(capped - margin, milliseconds(1));
}

GrpcStatus GrpcStatusOfRest(int http_status, std::string_view body) {
  GrpcStatus out;
  const int code = ErrorCodeOf(body);
  std::string message = ErrorMessageOf(body);
  while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) message.pop_back();
  out.message = std::move(message);
  if (code > 0) {  // as it came: agones-allocator answers code 422 (a k8s status code) too
    out.code = code;
    return out;
  }
  switch (http_status) {
    case 400:
      out.code = 13;
      break;
    case 401:
      out.code = 16;
      break;
    case 403:
      out.code = 7;
      break;
    case 404:
      out.code = 12;
      break;
    case 413:
      out.code = 8;
      break;
    case 429:
    case 502:
    case 503:
    case 504:
      out.code = 14;
      break;
    default:
      out.code = 2;
      break;
  }
  return out;
}

std::string PercentEncodeGrpcMessage(std::string_view message) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(message.size());
  for (char ch : message) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c <= 0x7e && c != '%') {
      out.push_back(ch);
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xf]);
    }
  }
  return out;
}

}  // namespace aw::gateway
