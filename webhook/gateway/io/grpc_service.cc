#include "gateway/io/grpc_service.h"

#include <fmt/format.h>
#include <google/protobuf/util/json_util.h>
#include <prometheus/counter.h>

#include <map>
#include <mutex>

#include "gateway/allocation.h"
#include "gateway/grpc_wire.h"
#include "gateway/io/protobuf_log.h"
#include "proto/allocation/allocation.pb.h"
#include "proto/grpc/health/v1/health.pb.h"
#include "util/duration.h"
#include "util/io/mutex.h"
#include "util/text.h"

namespace aw::gateway {
namespace {

constexpr std::string_view kAllocatePath = "/allocation.AllocationService/Allocate";
constexpr std::string_view kHealthPrefix = "/grpc.health.v1.Health/";
constexpr std::string_view kAllocationService = "allocation.AllocationService";
constexpr std::string_view kGrpcContentType = "application/grpc";

bool IsGrpcContentType(std::string_view ct) {
  if (!ct.starts_with(kGrpcContentType)) return false;
  const std::string_view rest = ct.substr(kGrpcContentType.size());
  return rest.empty() || rest[0] == '+' || rest[0] == ';';
}

bool IsGrpcPath(std::string_view path) {
  return path.starts_with("/allocation.AllocationService/") || path.starts_with(kHealthPrefix);
}

server::HttpResponse GrpcOk(std::string_view payload) {
  server::HttpResponse r;
  r.status = 200;
  r.content_type = std::string(kGrpcContentType);
  r.body = FrameMessage(payload);
  r.trailers.emplace_back("grpc-status", "0");
  return r;
}

// Parses one request message. On failure, the answer: INVALID_ARGUMENT with libprotobuf's own words
// when a string field held invalid UTF-8 (the client's mistake, and it says which field), else
// INTERNAL "grpc: error unmarshalling request" as grpc-go answers an undecodable message.
std::optional<server::HttpResponse> Decode(std::string_view payload,
                                           google::protobuf::MessageLite* msg) {
  ProtobufLogCapture capture;
  if (msg->ParseFromArray(payload.data(), static_cast<int>(payload.size()))) return std::nullopt;
  if (capture.InvalidUtf8()) {
    return GrpcError(3, fmt::format("grpc: error unmarshalling request: {}", capture.text()));
  }
  return GrpcError(13, "grpc: error unmarshalling request");
}

// What the gateway's REST handler is given for one Allocate call; lives until the call's answer.
struct AllocateCall {
  std::string json;
  std::string deadline;  // X-Allocating-Deadline from grpc-timeout ("" when none)
  std::function<std::string_view(std::string_view)> metadata;
  server::HttpRequest request;
};

}  // namespace

struct GrpcService::Metrics {
  explicit Metrics(prometheus::Registry& r)
      : calls(prometheus::BuildCounter()
                  .Name("allocating_gateway_grpc_calls_total")
                  .Help("gRPC calls answered on the gateway's port, by method and grpc-status")
                  .Register(r)) {}
  void Call(std::string_view method, int code) {
    MutexLock lock(mu);
    auto key = std::make_pair(std::string(method), code);
    auto it = by.find(key);
    if (it == by.end()) {
      it = by.emplace(key, &calls.Add({{"method", key.first}, {"code", std::to_string(code)}}))
               .first;
    }
    it->second->Increment();
  }
  prometheus::Family<prometheus::Counter>& calls;
  Mutex mu;
  std::map<std::pair<std::string, int>, prometheus::Counter*> by GUARDED_BY(mu);
};

server::HttpResponse GrpcError(int code, std::string_view message) {
  server::HttpResponse r;
  r.status = 200;
  r.content_type = std::string(kGrpcContentType);
  r.headers.emplace_back("grpc-status", std::to_string(code));
  if (!message.empty()) r.headers.emplace_back("grpc-message", PercentEncodeGrpcMessage(message));
  return r;
}

GrpcService::GrpcService(
    GrpcServiceOptions options,
    std::function<void(const server::HttpRequest&, server::Responder)> allocate,
    std::function<bool()> serving, prometheus::Registry& registry)
    : options_(options),
      allocate_(std::move(allocate)),
      serving_(std::move(serving)),
      metrics_(std::make_unique<Metrics>(registry)) {
  InstallProtobufLogHandler();
}

GrpcService::~GrpcService() = default;

bool GrpcService::Handle(const server::HttpRequest& req, server::Responder respond) {
  const bool grpc_type = IsGrpcContentType(req.content_type);
  if (!grpc_type && !(req.http2 && IsGrpcPath(req.path))) return false;
  if (!req.http2) {
    respond(server::HttpResponse{505, "text/plain; charset=utf-8", "gRPC requires HTTP/2\n", {}});
    return true;
  }
  if (!grpc_type) {
    respond(server::HttpResponse{
        415,
        "text/plain; charset=utf-8",
        fmt::format("invalid gRPC request content-type \"{}\"\n", req.content_type),
        {}});
    return true;
  }
  const std::string method(req.path);
  auto answer = [this, method, respond](server::HttpResponse r, int code) {
    metrics_->Call(method, code);
    respond(std::move(r));
  };
  if (req.method != "POST") {
    answer(GrpcError(12, fmt::format("method {} is not POST", req.method)), 12);
    return true;
  }
  if (req.path != kAllocatePath && !req.path.starts_with(kHealthPrefix)) {
    answer(GrpcError(12, fmt::format("unknown service or method {}", req.path)), 12);
    return true;
  }
  if (req.body_too_large) {
    answer(GrpcError(8, "grpc: received message larger than the gateway's body limit"), 8);
    return true;
  }
  std::string_view payload;
  switch (ReadUnaryMessage(req.body, &payload)) {
    case FrameResult::kOk:
      break;
    case FrameResult::kTruncated:
      answer(GrpcError(13, "grpc: truncated message"), 13);
      return true;
    case FrameResult::kTrailingData:
      answer(GrpcError(13, "grpc: more than one message in a unary call"), 13);
      return true;
    case FrameResult::kCompressed: {
      const std::string_view enc = req.header ? req.header("grpc-encoding") : std::string_view();
      if (enc.empty() || enc == "identity") {
        answer(GrpcError(13, "grpc: compressed flag set with identity or empty encoding"), 13);
      } else {
        answer(GrpcError(12, fmt::format("grpc: decompressor is not installed for grpc-encoding "
                                         "\"{}\"",
                                         enc)),
               12);
      }
      return true;
    }
  }
  // Handed to the gateway, which may answer after this service is gone: guarded.
  server::Responder counted = life_.Guard([this, method, respond](server::HttpResponse r) {
    int code = 0;
    for (auto* fields : {&r.headers, &r.trailers}) {
      for (auto& [n, v] : *fields) {
        if (n == "grpc-status") code = std::atoi(v.c_str());
      }
    }
    metrics_->Call(method, code);
    respond(std::move(r));
  });
  if (req.path == kAllocatePath) {
    Allocate(req, payload, std::move(counted));
  } else {
    Health(req.path.substr(kHealthPrefix.size()), payload, std::move(counted));
  }
  return true;
}

void GrpcService::Health(std::string_view method, std::string_view payload,
                         server::Responder respond) {
  if (method != "Check") {
    return respond(GrpcError(12, fmt::format("grpc.health.v1.Health/{} is not served by the "
                                             "gateway (Check is)",
                                             method)));
  }
  grpc::health::v1::HealthCheckRequest in;
  if (auto bad = Decode(payload, &in)) return respond(std::move(*bad));
  if (!in.service().empty() && in.service() != kAllocationService) {
    return respond(GrpcError(5, "unknown service"));
  }
  grpc::health::v1::HealthCheckResponse out;
  out.set_status(serving_() ? grpc::health::v1::HealthCheckResponse::SERVING
                            : grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  respond(GrpcOk(out.SerializeAsString()));
}

void GrpcService::Allocate(const server::HttpRequest& req, std::string_view payload,
                           server::Responder respond) {
  allocation::AllocationRequest in;
  if (auto bad = Decode(payload, &in)) return respond(std::move(*bad));
  auto call = std::make_shared<AllocateCall>();
  google::protobuf::util::JsonPrintOptions print;
  print.preserve_proto_field_names = true;
  if (auto st = google::protobuf::util::MessageToJsonString(in, &call->json, print); !st.ok()) {
    return respond(GrpcError(13, fmt::format("cannot convert the request: {}", st.ToString())));
  }
  const std::string_view explicit_deadline =
      req.header ? req.header(kDeadlineHeader) : std::string_view();
  if (explicit_deadline.empty() && req.header) {
    if (std::string_view t = req.header("grpc-timeout"); !t.empty()) {
      const auto timeout = ParseGrpcTimeout(t);
      if (!timeout) {
        return respond(GrpcError(13, fmt::format("malformed grpc-timeout \"{}\"", t)));
      }
      call->deadline = util::FormatDuration(GatewayDeadline(*timeout, options_.max_deadline));
    }
  }
  // The metadata, for header(): the deadline from grpc-timeout unless given explicitly.
  auto original = req.header;
  call->metadata = [original, raw = call.get()](std::string_view name) -> std::string_view {
    if (util::EqualsIgnoreCase(name, kDeadlineHeader) && !raw->deadline.empty())
      return raw->deadline;
    return original ? original(name) : std::string_view();
  };
  server::HttpRequest& out = call->request;
  out.method = "POST";
  out.path = "/gameserverallocation";
  out.content_type = "application/json";
  out.body = call->json;
  out.header = call->metadata;
  out.on_abandoned = req.on_abandoned;
  out.http2 = true;
  server::Responder back = [call, respond](server::HttpResponse r) {
    server::HttpResponse g;
    if (r.status == 200) {
      allocation::AllocationResponse msg;
      google::protobuf::util::JsonParseOptions parse;
      parse.ignore_unknown_fields = true;
      if (auto st = google::protobuf::util::JsonStringToMessage(r.body, &msg, parse); st.ok()) {
        g = GrpcOk(msg.SerializeAsString());
      } else {
        g = GrpcError(13, fmt::format("the allocator's answer does not decode: {}", st.ToString()));
      }
    } else {
      const GrpcStatus s = GrpcStatusOfRest(r.status, r.body);
      g = GrpcError(s.code, s.message);
    }
    g.on_written = std::move(r.on_written);
    respond(std::move(g));
  };
  allocate_(out, std::move(back));
}

}  // namespace aw::gateway
