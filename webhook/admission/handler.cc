#include "admission/handler.h"

#include <fmt/format.h>

#include <exception>

#include "admission/decisions.h"
#include "admission/review.h"

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

HandlerResult Handle(Route route, std::string_view body, const Context& ctx) {
  HandlerResult result;
  try {
    ReviewRequest req;
    ParseReview(body, &req);
    result.uid = req.uid;
    Identify(req, &result);
    const RouteInfo& info = Info(route);
    Decision d;
    if (!req.kind.empty() && req.kind != info.kind) {
      // A webhook configuration that sends the wrong kind here: never block it.
      d = Decision::Allow(fmt::format("unexpected kind {}", req.kind));
      d.warnings.push_back(
          fmt::format("allocating-webhook: {} handles {}, got {}; check the "
                      "webhook configuration",
                      info.path, info.kind, req.kind));
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
    result.body = BuildResponse(req.api_version, req.uid, d);
    result.http_status = 200;
    result.content_type = "application/json";
    result.outcome = !d.allowed         ? Outcome::kDenied
                     : !d.patch.empty() ? Outcome::kRewritten
                                        : Outcome::kAllowed;
    result.fail_open = d.fail_open;
    result.neutralised = std::move(d.neutralised);
    result.shutdown_held = d.shutdown_held;
    result.scaled_down = d.scaled_down;
    result.shutdown_deferred = d.shutdown_deferred;
    result.reason = std::move(d.reason);
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
