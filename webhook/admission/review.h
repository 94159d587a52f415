// AdmissionReview codec (admission.k8s.io/v1 and v1beta1).
//
// Promise: ParseReview reads the body once (json::ParseChecked: the parse, the nesting limit and
// the duplicate-key check in one pass) into a rapidjson document and exposes typed views of the
// request; it throws BadRequest (-> HTTP 400) for a NUL byte, nesting deeper than 512 levels,
// invalid JSON, a duplicate key in any object
// of the document (`request.object.status: duplicate key "state"`), a non-object, a wrong
// kind/apiVersion, a missing or non-object request, a missing or empty uid, and wrong JSON types
// of the request fields it reads. Objects are checked by the route handlers, which know which of
// object/oldObject the operation needs. BuildResponse serialises the answer in the request's
// apiVersion, echoing the uid, with status {code, reason, message} on denial, patchType
// "JSONPatch" plus the base64 patch when there is one, and warnings when any.
#pragma once

#include <rapidjson/document.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "json/checked_parse.h"
#include "policy/gameserver.h"

namespace aw::admission {

// Admission reads JSON with the gate's typed accessors (policy/gameserver.h).
using policy::BadRequest;
using policy::Json;
using policy::JsonTypeName;
using policy::Member;
using policy::OptBool;
using policy::OptObject;
using policy::OptString;

struct ReviewRequest {
  ReviewRequest();
  ~ReviewRequest();
  ReviewRequest(const ReviewRequest&) = delete;
  ReviewRequest& operator=(const ReviewRequest&) = delete;

 private:
  // The parsed values live in a per-thread arena first (no malloc for typical reviews), then on
  // the heap for larger ones, and the copy of the body in a per-thread buffer. A second
  // ReviewRequest alive on the same thread uses the heap for both.
  bool owns_arena_;
  rapidjson::MemoryPoolAllocator<> pool_;
  std::string own_buffer_;

 public:
  // A private copy of the body, parsed in situ: strings in `doc` point into it.
  std::string* const buffer;
  json::CheckedDocument doc;
  std::string_view api_version;  // "admission.k8s.io/v1" or "admission.k8s.io/v1beta1"
  std::string uid;
  std::string_view operation;  // CREATE, UPDATE, DELETE, CONNECT ("" when absent)
  std::string_view username;   // request.userInfo.username ("" when absent)
  std::string_view kind;       // request.kind.kind ("" when absent)
  std::string_view sub_resource;
  std::string_view namespace_;       // request.namespace
  std::string_view name;             // request.name
  const Json* object = nullptr;      // request.object (nullptr when absent or null)
  const Json* old_object = nullptr;  // request.oldObject
};

// Parses into *out (not movable: views point into out->doc). Throws BadRequest.
void ParseReview(std::string_view body, ReviewRequest* out);

struct Decision {
  bool allowed = true;
  int code = 0;               // HTTP-like status code for a denial (403, 422)
  std::string status_reason;  // metav1.StatusReason for a denial ("Forbidden", "Invalid")
  std::string message;        // shown to the user on denial
  std::string patch;          // RFC 6902 JSON text, empty when none
  std::vector<std::string> warnings;
  // For logs/metrics.
  bool fail_open = false;
  // Keys (annotations, or the opt-in label) that the writer may not set and that this decision
  // reverted instead of denying the update (forged keys in an allocation's metadata).
  std::vector<std::string> neutralised;
  // The Agones controller's Shutdown of an Allocating server was not applied (on-scale-down:
  // Hold).
  bool shutdown_held = false;
  // The Agones controller's Shutdown of an Allocating server was applied, its allocation
  // abandoned before it was confirmed (on-scale-down: Shutdown, outcome ScaledDown).
  bool scaled_down = false;
  // A server leaving the allocation cycle was moved to Shutdown instead (deferred scale-down).
  bool shutdown_deferred = false;
  std::string reason;

  static Decision Allow(std::string reason) {
    Decision d;
    d.reason = std::move(reason);
    return d;
  }
  static Decision Deny(int code, std::string status_reason, std::string message) {
    Decision d;
    d.allowed = false;
    d.code = code;
    d.status_reason = std::move(status_reason);
    d.reason = message;
    d.message = std::move(message);
    return d;
  }
};

std::string BuildResponse(std::string_view api_version, std::string_view uid, const Decision& d);
// The same answer written into *out (replacing what it held; one allocation of its size, none
// when *out already has the capacity).
void BuildResponse(std::string_view api_version, std::string_view uid, const Decision& d,
                   std::string* out);

}  // namespace aw::admission
