// libFuzzer target: any bytes on any admission route, on the autoscaling endpoint, through the
// allocation gateway's parsers (request, allocator answer, metadata refresh, error body), as an
// HTTP/2 client's bytes into H2Session (server/h2_session.h) whose requests go to the gateway's
// GrpcService, and as a gRPC request body into GrpcService (gateway/io/grpc_service.h).
// Handle must answer 200 (a JSON
// AdmissionReview echoing a uid) or 400, never crash, hang, leak or answer 500. Oracle for
// duplicate keys: every body that parses as JSON is also checked by an independent SAX pass (a
// std::set of names per open object); FindDuplicateKey must agree with it, and a body with a
// duplicate key must get a 400 that says so. The one-pass parse (json::ParseChecked) must give
// exactly the answer of the three steps it replaced (FirstTooDeep, the parse, FindDuplicateKey).
// Oracle for the admission hot path: on /mutate/gameservers and /validate/gameservers, Handle
// (the one pass, admission/review_scan.h) must answer every body exactly as HandleReference (the
// document path).
//
// Build and run with clang (test/fuzz/run does all of this, see test/fuzz/README.md):
//   CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DAW_FUZZ=ON -DAW_BUILD_TESTS=OFF
//   cmake --build build-fuzz --target admission_fuzz
//   build-fuzz/admission_fuzz -max_len=65536 -dict=test/fuzz/admission.dict CORPUS_DIR
// With another compiler AW_FUZZ builds the same target with a small driver (standalone_main.cc)
// that replays files, e.g. a corpus or crash reproducers.
#include <prometheus/registry.h>
#include <rapidjson/document.h>
#include <rapidjson/reader.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "admission/handle_reference.h"
#include "admission/handler.h"
#include "autoscale/endpoint.h"
#include "gateway/allocation.h"
#include "gateway/grpc_wire.h"
#include "gateway/io/grpc_service.h"
#include "json/checked_parse.h"
#include "json/duplicate_keys.h"
#include "json/nesting_depth.h"
#include "server/h2_session.h"

namespace {

// SAX handler: true from Key() on when an open object already had that name.
struct DuplicateOracle : rapidjson::BaseReaderHandler<rapidjson::UTF8<>, DuplicateOracle> {
  std::vector<std::set<std::string>> open;
  bool duplicate = false;
  bool Default() { return true; }
  bool StartObject() {
    open.emplace_back();
    return true;
  }
  bool Key(const char* s, rapidjson::SizeType n, bool) {
    if (!open.back().emplace(s, n).second) duplicate = true;
    return true;
  }
  bool EndObject(rapidjson::SizeType) {
    open.pop_back();
    return true;
  }
};

// nullopt when `body` is not one JSON text; otherwise whether some object repeats a key.
std::optional<bool> OracleHasDuplicate(std::string_view body) {
  rapidjson::Reader reader;
  rapidjson::MemoryStream ms(body.data(), body.size());
  DuplicateOracle h;
  if (!reader.Parse<rapidjson::kParseIterativeFlag>(ms, h)) return std::nullopt;
  return h.duplicate;
}

// What json::ParseChecked answers, and what the steps it replaced answer, as comparable text.
std::string CheckedAnswer(std::string_view body, size_t depth) {
  std::string buffer(body);
  aw::json::CheckedDocument doc;
  const aw::json::CheckedParse r = aw::json::ParseChecked(body, buffer.data(), depth, &doc);
  switch (r.result) {
    case aw::json::CheckedParse::Result::kOk:
      return "ok";
    case aw::json::CheckedParse::Result::kTooDeep:
      return "deep " + std::to_string(r.offset);
    case aw::json::CheckedParse::Result::kSyntax:
      return "syntax " + std::to_string(r.code) + " " + std::to_string(r.offset);
    case aw::json::CheckedParse::Result::kDuplicateKey:
      return r.duplicate->Message();
  }
  return "?";
}

std::string ThreeStepAnswer(std::string_view body, size_t depth) {
  if (auto at = aw::json::FirstTooDeep(body, depth)) return "deep " + std::to_string(*at);
  std::string buffer(body);
  rapidjson::Document doc;
  doc.ParseInsitu<rapidjson::kParseIterativeFlag>(buffer.data());
  if (doc.HasParseError()) {
    return "syntax " + std::to_string(doc.GetParseError()) + " " +
           std::to_string(doc.GetErrorOffset());
  }
  if (auto dup = aw::json::FindDuplicateKey(doc)) return dup->Message();
  return "ok";
}

}  // namespace

namespace {

// Synced counts that know one fleet, "f" in namespace "n", with one Allocating server.
class OneFleet final : public aw::autoscale::CountsView {
 public:
  bool Synced() const override { return true; }
  aw::autoscale::FleetCount Lookup(std::string_view ns, std::string_view fleet) const override {
    if (ns == "n" && fleet == "f") return {1, 1};
    return {};
  }
};

}  // namespace

namespace {

// The gRPC front-end with a REST stand-in that answers every allocation with a fixed body.
aw::gateway::GrpcService& Grpc() {
  static prometheus::Registry registry;
  static aw::gateway::GrpcService service(
      {},
      [](const aw::server::HttpRequest& req, aw::server::Responder r) {
        (void)req.header("X-Allocating-Deadline");
        r({200,
           "application/json",
           R"({"gameServerName":"gs","ports":[{"name":"p","port":7000}],"source":"local"})",
           {}});
      },
      [] { return true; }, registry);
  return service;
}

// Every gRPC answer is trailers-only (grpc-status in the headers) or has grpc-status trailers; an
// HTTP answer (415, 505) has a plain-text body.
void CheckGrpcAnswer(const aw::server::HttpResponse& r) {
  bool status = false;
  for (auto* fields : {&r.headers, &r.trailers}) {
    for (auto& [n, v] : *fields) status = status || n == "grpc-status";
  }
  if (!status && r.status == 200) std::abort();
}

// `bytes` as what an HTTP/2 client sent (after the preface when `preface`), in two reads split
// at `split`; each request is answered by GrpcService (or 404), the output taken and "written".
void DriveH2(std::string_view bytes, bool preface, size_t split) {
  std::vector<std::pair<int32_t, aw::server::HttpResponse>> answers;
  aw::server::H2Options o;
  o.max_body_bytes = 4096;
  o.max_concurrent_streams = 8;
  aw::server::H2Session s(o, [&answers](int32_t id, aw::server::HttpRequest& req) {
    req.on_abandoned([] {});
    std::optional<aw::server::HttpResponse> out;
    if (!Grpc().Handle(req, [&out](aw::server::HttpResponse r) { out = std::move(r); })) {
      out = aw::server::HttpResponse{404, "text/plain", "not found\n", {}};
    }
    if (!out) std::abort();  // GrpcService answers synchronously with this stand-in
    answers.emplace_back(id, std::move(*out));
  });
  if (!s.Start().ok()) std::abort();
  std::string input = preface ? std::string("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") : std::string();
  input.append(bytes);
  split = std::min(split, input.size());
  for (std::string_view part :
       {std::string_view(input).substr(0, split), std::string_view(input).substr(split)}) {
    if (!s.Receive(part).ok()) break;
    for (auto& [id, r] : answers) s.Respond(id, std::move(r));
    answers.clear();
    (void)s.TakeOutput(1 << 20);
    s.Flushed(true);
  }
  (void)s.WantsIo();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const aw::policy::Policy policy = [] {
    aw::policy::Policy p;
    p.trusted_users = {"system:serviceaccount:allocating-system:allocating-webhook"};
    return p;
  }();
  if (size == 0) return 0;
  // The first byte picks the route and the CRD readiness; the rest is the body.
  const auto& routes = aw::admission::AllRoutes();
  aw::admission::Route route = routes[data[0] % routes.size()];
  bool crd = (data[0] / routes.size()) % 2 == 0;
  std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  aw::admission::Context ctx{policy, crd, std::chrono::system_clock::time_point{}};
  aw::admission::HandlerResult r = aw::admission::Handle(route, body, ctx);
  if (r.http_status != 200 && r.http_status != 400) std::abort();
  if (r.http_status == 200 && (r.body.empty() || r.body.front() != '{')) std::abort();

  // Oracle for the one pass (admission/review_scan.h): on /mutate/gameservers and
  // /validate/gameservers, whatever the bytes, Handle answers exactly what the document path
  // (HandleReference) answers.
  for (const auto scanned :
       {aw::admission::Route::kMutateGameServers, aw::admission::Route::kValidateGameServers}) {
    aw::admission::HandlerResult other;
    if (route != scanned) other = aw::admission::Handle(scanned, body, ctx);
    const aw::admission::HandlerResult& fast = route == scanned ? r : other;
    const aw::admission::HandlerResult ref = aw::admission::HandleReference(scanned, body, ctx);
    if (fast.http_status != ref.http_status || fast.content_type != ref.content_type ||
        fast.body != ref.body || fast.outcome != ref.outcome || fast.fail_open != ref.fail_open ||
        fast.neutralised != ref.neutralised || fast.shutdown_held != ref.shutdown_held ||
        fast.scaled_down != ref.scaled_down || fast.shutdown_deferred != ref.shutdown_deferred ||
        fast.uid != ref.uid || fast.namespace_ != ref.namespace_ || fast.name != ref.name ||
        fast.reason != ref.reason) {
      std::abort();
    }
  }

  // The same bytes as a FleetAutoscaleReview (autoscale/endpoint.h): 200 with a JSON answer or a
  // 4xx with a message, nothing else. The counts know fleet "f" in namespace "n".
  static const OneFleet counts;
  aw::autoscale::ReviewAnswer a =
      aw::autoscale::HandleBufferReview({"POST", "/autoscale/buffer/bufferSize=2/maxReplicas=100",
                                         "", "application/json", body, false},
                                        counts);
  if (a.status != 200 && a.status != 400 && a.status != 413) std::abort();
  if (a.body.empty() || (a.status == 200 && a.body.front() != '{')) std::abort();

  // The same bytes as the allocation gateway's AllocationRequest and as the allocator's answer
  // (gateway/allocation.h): an answer or InvalidArgument, never a crash; anything accepted is a
  // JSON object within the nesting bound (checked by rapidjson's iterative parser).
  {
    aw::gateway::AllocationRequest req;
    aw::Status rs = aw::gateway::ParseAllocationRequest(body, &req);
    if (!rs.ok() && rs.code() != aw::Status::Code::kInvalidArgument) std::abort();
    aw::gateway::AllocationResponse res;
    aw::Status as = aw::gateway::ParseAllocationResponse(body, &res);
    if (!as.ok() && as.code() != aw::Status::Code::kInvalidArgument) std::abort();
    if (as.ok() && res.game_server_name.empty()) std::abort();
    static const aw::policy::GameServerView gs = [] {
      rapidjson::Document d;
      d.Parse(R"({"metadata":{"labels":{"l":"v"},"annotations":{"a":"b"}}})");
      return aw::policy::ParseGameServer(d);
    }();
    std::string refreshed;
    if (aw::gateway::RefreshMetadata(body, gs, &refreshed).ok()) {
      rapidjson::Document again;
      again.Parse<rapidjson::kParseIterativeFlag>(refreshed.data(), refreshed.size());
      if (again.HasParseError() || !again.IsObject()) std::abort();
    }
    (void)aw::gateway::ErrorMessageOf(body);
    if (rs.ok()) {
      rapidjson::Document d;
      d.Parse<rapidjson::kParseIterativeFlag>(body.data(), body.size());
      if (d.HasParseError() || !d.IsObject()) std::abort();
      if (aw::json::FirstTooDeep(body, aw::gateway::kMaxNestingDepth)) std::abort();
    }
  }

  // The same bytes as an HTTP/2 client's (with and without the preface), and as the body of a
  // gRPC call to each method: an answer, never a crash or a hang.
  DriveH2(body, (data[0] & 1) != 0, data[0] * 7u);
  {
    std::string_view payload;
    (void)aw::gateway::ReadUnaryMessage(body, &payload);
    for (std::string_view path : {"/allocation.AllocationService/Allocate",
                                  "/grpc.health.v1.Health/Check", "/grpc.health.v1.Health/Watch"}) {
      for (const std::string& framed : {std::string(body), aw::gateway::FrameMessage(body)}) {
        aw::server::HttpRequest req;
        req.method = "POST";
        req.path = path;
        req.content_type = "application/grpc";
        req.body = framed;
        req.http2 = true;
        req.header = [&body](std::string_view name) -> std::string_view {
          return name == "grpc-timeout" ? body.substr(0, std::min<size_t>(body.size(), 4))
                                        : std::string_view();
        };
        bool answered = false;
        Grpc().Handle(req, [&answered](aw::server::HttpResponse r) {
          answered = true;
          CheckGrpcAnswer(r);
        });
        if (!answered) std::abort();
      }
    }
  }

  // Bodies with a NUL byte are refused before parsing, whatever their keys.
  if (std::memchr(body.data(), '\0', body.size()) != nullptr) return 0;
  // The one-pass parse answers what the three separate steps (depth pre-scan, parse, duplicate
  // walk) answer, at the admission limit and at a small one that short bodies reach.
  for (size_t depth : {size_t{512}, size_t{4}}) {
    if (CheckedAnswer(body, depth) != ThreeStepAnswer(body, depth)) std::abort();
  }
  std::optional<bool> dup = OracleHasDuplicate(body);
  if (!dup) return 0;
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseIterativeFlag>(body.data(), body.size());
  if (doc.HasParseError()) std::abort();  // the SAX pass accepted it
  if (aw::json::FindDuplicateKey(doc).has_value() != *dup) std::abort();
  if (*dup && (r.http_status != 400 || r.body.find(": duplicate key \"") == std::string::npos)) {
    std::abort();
  }
  return 0;
}
