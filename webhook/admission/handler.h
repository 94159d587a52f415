// Admission handlers: pure functions from (route, request body, context) to an HTTP answer.
//
// This is the only entry point the server uses. It performs no I/O: the caller supplies the
// clock reading and the CRD readiness, and writes logs/metrics from the returned result.
// Contract:
//   - a well-formed AdmissionReview (admission.k8s.io/v1 or v1beta1) gets HTTP 200 and an
//     AdmissionReview response in the request's apiVersion echoing request.uid;
//   - a malformed body (bad JSON, a duplicate key in any object, not an AdmissionReview, missing
//     request/uid/object, wrong JSON types) gets HTTP 400 with a plain-text message naming what
//     is wrong;
//   - never throws for any input; an unexpected internal failure yields HTTP 500.
// HTTP-level checks (method, content type, body size, unknown paths) belong to the server.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "policy/policy.h"

namespace aw::admission {

enum class Route {
  kMutateGameServers,
  kValidateGameServers,
  kValidateFleets,
  kValidateGameServerSets,
  kValidateGameServerAllocations,
};

// "/mutate/gameservers" -> kMutateGameServers, etc. Query strings must be stripped by the caller.
std::optional<Route> RouteFromPath(std::string_view path);
// Short label for metrics and logs, e.g. "mutate_gameservers".
std::string_view RouteName(Route route);
// The URL path the route is served on, e.g. "/mutate/gameservers".
std::string_view RoutePath(Route route);
// Every route, for registering handlers and pre-creating metric series.
const std::vector<Route>& AllRoutes();

// What happened, for metrics: allowed unchanged, allowed with a patch, denied, or not decided.
enum class Outcome { kAllowed, kRewritten, kDenied, kError };
std::string_view OutcomeName(Outcome outcome);

struct Context {
  const policy::Policy& policy;
  bool crd_accepts_allocating;
  std::chrono::system_clock::time_point now;
};

struct HandlerResult {
  int http_status = 200;
  std::string content_type = "application/json";
  std::string body;
  Outcome outcome = Outcome::kError;
  bool fail_open = false;  // allowed unchanged only because the CRD does not accept Allocating
  std::vector<std::string> neutralised;  // keys reverted instead of denying (Decision::neutralised)
  bool shutdown_held = false;            // a controller Shutdown kept Allocating
  bool scaled_down = false;              // a controller Shutdown of an Allocating server applied
  bool shutdown_deferred = false;        // leaving the cycle became Shutdown (deferred scale-down)
  // For structured logs.
  std::string uid;
  std::string namespace_;
  std::string name;
  std::string reason;  // human-readable reason for the decision (or the error)
};

HandlerResult Handle(Route route, std::string_view body, const Context& ctx);

}  // namespace aw::admission
