// GrpcService: agones-allocator's gRPC API (allocation.AllocationService/Allocate) and
// grpc.health.v1.Health/Check, served on the gateway's listener over HTTP/2 (H2Session), in front
// of the same Gateway as REST.
//
// Promise:
//   - Handle() takes a request when it is gRPC: on HTTP/2 with a content-type of application/grpc
//     (or application/grpc+proto, or ;-parameters), or on HTTP/2 to a path of the two services
//     (which with another content-type is answered HTTP 415, as grpc-go answers); it returns false
//     for everything else (REST, served by Gateway::Handle). gRPC over HTTP/1.1 -> HTTP 505;
//   - Allocate: the request message becomes the JSON agones-allocator's REST API takes (protobuf's
//     JSON printer with proto field names, as Agones' grpc-gateway marshaler), sent through
//     Gateway::Handle as POST /gameserverallocation with header() answering from the gRPC metadata
//     (so x-allocating-idempotency-key is header("X-Allocating-Idempotency-Key")), and
//     header("X-Allocating-Deadline") from grpc-timeout (GatewayDeadline: capped at `max_deadline`)
//     unless the metadata carries x-allocating-deadline itself; the client resetting the stream or
//     leaving runs the gateway's on_abandoned at once. A 200 answer's JSON becomes the
//     AllocationResponse (unknown fields ignored); any other answer a trailers-only response with
//     grpc-status from GrpcStatusOfRest (grpc_wire.h) and grpc-message. The answer's on_written
//     is passed on to the transport;
//   - bad calls, each a trailers-only answer: a message over the body limit -> RESOURCE_EXHAUSTED;
//     a truncated message, trailing bytes or a message that does not decode -> INTERNAL, except a
//     string field holding invalid UTF-8 -> INVALID_ARGUMENT naming the field (libprotobuf's line
//     for it goes to the structured log at debug level, rate-limited: protobuf_log.h); the
//     compressed flag -> UNIMPLEMENTED when grpc-encoding names a compression, else INTERNAL (as
//     grpc-go); an unknown service or method -> UNIMPLEMENTED;
//   - Health/Check for "" and "allocation.AllocationService": SERVING while `serving()` is true,
//     NOT_SERVING otherwise (SIGTERM); another service -> NOT_FOUND; Health/Watch -> UNIMPLEMENTED.
//   - Metrics: allocating_gateway_grpc_calls_total{method,code}.
#pragma once

#include <prometheus/registry.h>

#include <chrono>
#include <functional>
#include <memory>

#include "runtime/lifeline.h"
#include "server/connection_server.h"

namespace aw::gateway {

class Gateway;

struct GrpcServiceOptions {
  std::chrono::nanoseconds max_deadline = std::chrono::minutes(10);
};

class GrpcService {
 public:
  // `allocate` is Gateway::Handle (or a stand-in in tests); `serving` answers Health/Check.
  GrpcService(GrpcServiceOptions options,
              std::function<void(const server::HttpRequest&, server::Responder)> allocate,
              std::function<bool()> serving, prometheus::Registry& registry);
  ~GrpcService();
  GrpcService(const GrpcService&) = delete;
  GrpcService& operator=(const GrpcService&) = delete;

  // True when `req` is a gRPC call (answered through `respond`); false: not gRPC, not touched.
  bool Handle(const server::HttpRequest& req, server::Responder respond);

  struct Metrics;

 private:
  void Allocate(const server::HttpRequest& req, std::string_view payload,
                server::Responder respond);
  void Health(std::string_view method, std::string_view payload, server::Responder respond);

  const GrpcServiceOptions options_;
  const std::function<void(const server::HttpRequest&, server::Responder)> allocate_;
  const std::function<bool()> serving_;
  std::unique_ptr<Metrics> metrics_;
  runtime::Lifeline life_;  // the responders handed to the gateway reach this service through it
};

// A trailers-only gRPC answer.
server::HttpResponse GrpcError(int code, std::string_view message);

}  // namespace aw::gateway
