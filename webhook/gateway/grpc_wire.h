// The pure parts of the gateway's gRPC front-end (gateway/io/grpc_service.h): the gRPC-over-HTTP/2
// wire rules (grpc/grpc doc/PROTOCOL-HTTP2.md) that need no I/O.
//
// Promise:
//   - ParseGrpcTimeout: "grpc-timeout" is 1 to 8 ASCII digits and one unit of H, M, S, m, u, n
//     (hours .. nanoseconds); anything else (empty, 9 digits, no unit, a sign, spaces) -> nullopt;
//   - FrameMessage: the 5-byte Length-Prefixed-Message (flag 0, big-endian length) + payload;
//   - ReadUnaryMessage: `body` must be exactly one length-prefixed message: kTruncated when the
//     prefix or the payload is cut short, kTrailingData when bytes follow the message (a unary
//     call carries one), kCompressed when its compressed flag is set (the gateway does not
//     decompress), kOk with `payload` viewing the message inside `body` otherwise;
//   - GatewayDeadline: the deadline handed to the gateway for a gRPC timeout: `timeout` capped at
//     `max`, then shortened by 5% (at most 1 s) so that the gateway's own answer
//     (ResourceExhausted, as over REST) reaches the client before the client's deadline fires;
//     never below 1 ms;
//   - GrpcStatusOfRest: the gRPC status for an HTTP answer of the gateway's REST path: the `code`
//     of a grpc-gateway error body when there is one and it is positive, as it is (grpc-gateway
//     wrote it from the gRPC status; agones-allocator's gRPC answer to an invalid request carries
//     the Kubernetes status code 422 as its grpc-status, cmd/allocator/main.go),
//     else PROTOCOL-HTTP2's HTTP-to-gRPC table (400 INTERNAL, 401 UNAUTHENTICATED, 403
//     PERMISSION_DENIED, 404 UNIMPLEMENTED, 413 RESOURCE_EXHAUSTED, 429/502/503/504 UNAVAILABLE,
//     else UNKNOWN); the message is the body's `message` (or the body, trimmed);
//   - PercentEncodeGrpcMessage: grpc-message's encoding (bytes outside 0x20..0x7E and '%' as %XX).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace aw::gateway {

std::optional<std::chrono::nanoseconds> ParseGrpcTimeout(std::string_view text);

std::string FrameMessage(std::string_view payload);

enum class FrameResult { kOk, kTruncated, kTrailingData, kCompressed };
FrameResult ReadUnaryMessage(std::string_view body, std::string_view* payload);

std::chrono::nanoseconds GatewayDeadline(std::chrono::nanoseconds timeout,
                                         std::chrono::nanoseconds max);

struct GrpcStatus {
  int code = 0;
  std::string message;
};
GrpcStatus GrpcStatusOfRest(int http_status, std::string_view body);

std::string PercentEncodeGrpcMessage(std::string_view message);

}  // namespace aw::gateway
