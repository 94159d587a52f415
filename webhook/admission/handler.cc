#include "admission/handler.h"

#include <fmt/format.h>

#include <exception>

#include "admission/decisions.h"
#include "admission/handle_reference.h"
#include "admission/review.h"
#include "admission/review_scan.h"
#include "contract/keys.h"
#include "util/time_format.h"

namespace aw::admission {
namespace {

struct RouteInfo {
  Route route;
  std::string_view path;
  std::string_view name;
  std::string_view kind;  // expected request.kind.kind
};

constexpr RouteInfo kRoutes[] = {
    {Route::kMutateGameServers, "/mutate/gameservers", "mutate_gameservers", "GameServer"},
    {Route::kValidateGameServers, "/validate/gameservers", "validate_gameservers", "GameServer"},
    {Route::kValidateFleets, "/validate/fleets", "validate_fleets", "Fleet"},
    {Route::kValidateGameServerSets, "/validate/gameserversets", "validate_gameserversets",
     "GameServerSet"},
    {Route::kValidateGameServerAllocations, "/validate/gameserverallocations",
     "validate_gameserverallocations", "GameServerAllocation"},
};

const RouteInfo& Info(Route route) {
  for (const auto& r : kRoutes) {
    if (r.route == route) return r;
  }
  return kRoutes[0];
}

// Best-effort identification for logs; never throws.
void Identify(const ReviewRequest& req, HandlerResult* r) {
  r->namespace_ = std::string(req.namespace_);
  r->name = std::string(req.name);
  const Json* obj = req.object ? req.object : req.old_object;
  if (!obj || !obj->IsObject()) return;
  auto meta = obj->FindMember("metadata");
  if (meta == obj->MemberEnd() || !meta->value.IsObject()) return;
  auto get = [&meta](const char* key) -> std::string {
    auto it = meta->value.FindMember(key);
    if (it == meta->value.MemberEnd() || !it->value.IsString()) return {};
    return std::string(it->value.GetString(), it->value.GetStringLength());
  };
  if (r->namespace_.empty()) r->namespace_ = get("namespace");
  if (r->name.empty()) r->name = get("name");
  if (r->name.empty()) r->name = get("generateName");
}

// Identify for the one pass: the same fields, read from the scan.
void Identify(const ScannedReview& scan, HandlerResult* r) {
  r->namespace_.assign(scan.namespace_);
  r->name.assign(scan.name);
  const ScannedObject* obj = scan.object.present       ? &scan.object
                             : scan.old_object.present ? &scan.old_object
                                                       : nullptr;
  if (!obj || !obj->has_metadata) return;
  if (r->namespace_.empty()) r->namespace_.assign(obj->namespace_);
  if (r->name.empty()) r->name.assign(obj->name);
  if (r->name.empty()) r->name.assign(obj->generate_name);
}

// A webhook configuration that sends the wrong kind here: never block it.
Decision WrongKind(const RouteInfo& info, std::string_view kind) {
  Decision d = Decision::Allow(fmt::format("unexpected kind {}", kind));
  d.warnings.push_back(
      fmt::format("allocating-webhook: {} handles {}, got {}; check the "
                  "webhook configuration",
                  info.path, info.kind, kind));
  return d;
}

// The answer for a decision (both paths).
void Answer(std::string_view api_version, std::string_view uid, Decision&& d,
            HandlerResult* result) {
  BuildResponse(api_version, uid, d, &result->body);
  result->http_status = 200;
  result->content_type = "application/json";
  result->outcome = !d.allowed         ? Outcome::kDenied
                    : !d.patch.empty() ? Outcome::kRewritten
                                       : Outcome::kAllowed;
  result->fail_open = d.fail_open;
  result->neutralised = std::move(d.neutralised);
  result->shutdown_held = d.shutdown_held;
  result->scaled_down = d.scaled_down;
  result->shutdown_deferred = d.shutdown_deferred;
  result->reason = std::move(d.reason);
}

// A GameServer view of the scanned object, as ParseGameServer (kStrict) reads the same object for
// the fields the mutating decision reads; `v` is reused (its strings and map entries keep their
// capacity) and valid until the next scan on this thread. The scan is regular: every field has its
// type.
void Fill(const ScannedReview& scan, const ScannedObject& s, policy::GameServerView* v) {
  v->present = true;
  v->namespace_.assign(s.namespace_);
  v->name.assign(s.name);
  v->generate_name.assign(s.generate_name);
  v->uid.assign(s.uid);
  v->resource_version.assign(s.resource_version);
  v->deleting = s.deleting;
  // The maps point into the scan's copy of the body (sorted offsets; nothing copied).
  auto map = [&scan](const ScannedMap& m, policy::StringMap* out) {
    if (!m.present) {
      out->Clear();
      return;
    }
    const auto [items, count] = scan.Entries(m);
    out->Borrow(scan.base, {items, count});
  };
  map(s.labels, &v->labels);
  map(s.annotations, &v->annotations);
  v->state.assign(s.state);
  // What the view holds of status besides the state is not read by the decision.
  v->address.clear();
  v->ports.clear();
  v->node_name.clear();
  v->addresses.clear();
  v->counters_json.clear();
  v->lists_json.clear();
  v->allocation.assign(v->Annotation(keys::kAllocation).value_or(""));
  v->since.reset();
  if (auto since = v->Annotation(keys::kSince)) {
    if (auto t = util::ParseRfc3339(*since))
      v->since = std::chrono::time_point_cast<policy::Clock::duration>(*t);
  }
}

// The one pass (review_scan.h) for /mutate/gameservers and /validate/gameservers: true with
// *result filled when the review is regular and the decision was made; false when the document
// path must answer (whatever was written to *result is then to be discarded).
bool HandleScanned(Route route, std::string_view body, const Context& ctx, HandlerResult* result) {
  thread_local ScannedReview scan;
  thread_local policy::GameServerView n, o;
  if (!ScanReview(body, &scan)) return false;
  try {
    const RouteInfo& info = Info(route);
    result->uid.assign(scan.uid);
    Identify(scan, result);
    Decision d;
    if (!scan.kind.empty() && scan.kind != info.kind) {
      d = WrongKind(info, scan.kind);
    } else if (route == Route::kMutateGameServers) {
      if (scan.operation != "UPDATE") {
        d = MutateNotGated(scan.operation);
      } else {
        // A missing object (or one without metadata) is a 400: the document path words it.
        if (!scan.object.present || !scan.old_object.present || !scan.object.has_metadata ||
            !scan.old_object.has_metadata) {
          return false;
        }
        Fill(scan, scan.object, &n);
        Fill(scan, scan.old_object, &o);
        d = MutateGameServer(MutateInput{scan.username, scan.namespace_, scan.name, n, o, nullptr,
                                         scan.object.service_account},
                             ctx);
      }
    } else {  // /validate/gameservers
      const bool update = scan.operation == "UPDATE";
      if (!update && scan.operation != "CREATE") {
        d = NotValidated(scan.operation);
      } else {
        // A missing object (or one without metadata) is a 400: the document path words it.
        if (!scan.object.present || !scan.object.has_metadata ||
            (update && (!scan.old_object.present || !scan.old_object.has_metadata))) {
          return false;
        }
        Fill(scan, scan.object, &n);
        if (update) {
          Fill(scan, scan.old_object, &o);
        } else {
          o = policy::GameServerView{};
        }
        std::optional<std::vector<std::string_view>> ports;
        if (scan.object.ports.present) {
          ports.emplace(scan.port_names.begin() + static_cast<ptrdiff_t>(scan.object.ports.begin),
                        scan.port_names.begin() + static_cast<ptrdiff_t>(scan.object.ports.end));
        }
        d = ValidateGameServer(
            ValidateInput{scan.operation, scan.username, scan.namespace_, scan.name, n, o, nullptr,
                          std::move(ports), scan.object.service_account},
            ctx);
      }
    }
    Answer(scan.api_version, scan.uid, std::move(d), result);
    return true;
  } catch (...) {
    return false;  // the document path answers (and words any error) as before
  }
}

HandlerResult PlainError(int status, std::string message) {
  HandlerResult r;
  r.http_status = status;
  r.content_type = "text/plain; charset=utf-8";
  r.body = message + "\n";
  r.outcome = Outcome::kError;
  r.reason = std::move(message);
  return r;
}

}  // namespace

std::optional<Route> RouteFromPath(std::string_view path) {
  for (const auto& r : kRoutes) {
    if (r.path == path) return r.route;
  }
  return std::nullopt;
}

std::string_view RoutePath(Route route) { return Info(route).path; }

std::string_view RouteName(Route route) { return Info(route).name; }

const std::vector<Route>& AllRoutes() {
  static const std::vector<Route> all = [] {
    std::vector<Route> v;
    for (const auto& r : kRoutes) v.push_back(r.route);
    return v;
  }();
  return all;
}

std::string_view OutcomeName(Outcome outcome) {
  switch (outcome) {
    case Outcome::kAllowed:
      return "allowed";
    case Outcome::kRewritten:
      return "rewritten";
    case Outcome::kDenied:
      return "denied";
    case Outcome::kError:
      return "error";
  }
  return "error";
}

// /mutate/gameservers, the route every allocation crosses, and /validate/gameservers, which every
// write of an opted-in GameServer crosses, are answered from the one pass when the review is
// regular (every review kube-apiserver sends); any other review, and every other route, by the
// document path (handle_reference.h), which words every error.
HandlerResult Handle(Route route, std::string_view body, const Context& ctx) {
  if (route == Route::kMutateGameServers || route == Route::kValidateGameServers) {
    HandlerResult result;
    if (HandleScanned(route, body, ctx, &result)) return result;
  }
  return HandleReference(route, body, ctx);
}

HandlerResult HandleReference(Route route, std::string_view body, const Context& ctx) {
  HandlerResult result;
  try {
    ReviewRequest req;
    ParseReview(body, &req);
    result.uid = req.uid;
    Identify(req, &result);
    const RouteInfo& info = Info(route);
    Decision d;
    if (!req.kind.empty() && req.kind != info.kind) {
      d = WrongKind(info, req.kind);
    } else {
      switch (route) {
        case Route::kMutateGameServers:
          d = MutateGameServer(req, ctx);
          break;
        case Route::kValidateGameServers:
          d = ValidateGameServer(req, ctx);
          break;
        case Route::kValidateFleets:
        case Route::kValidateGameServerSets:
          d = ValidateTemplateOwner(req, ctx);
          break;
        case Route::kValidateGameServerAllocations:
          d = ValidateGameServerAllocation(req, ctx);
          break;
      }
    }
    Answer(req.api_version, req.uid, std::move(d), &result);
    return result;
  } catch (const BadRequest& e) {
    HandlerResult r = PlainError(400, e.what());
    r.uid = std::move(result.uid);
    r.namespace_ = std::move(result.namespace_);
    r.name = std::move(result.name);
    return r;
  } catch (const std::exception& e) {
    return PlainError(500, fmt::format("internal error: {}", e.what()));
  } catch (...) {
    return PlainError(500, "internal error");
  }
}

}  // namespace aw::admission
