// The admission hot path's one pass over an AdmissionReview (issue 36): the review's body read
// once, streaming, keeping only what the decisions read, nothing built for the rest.
//
// Promise: ScanReview(body, out) parses a private per-thread copy of `body` in situ with
// RapidJSON's iterative SAX reader, with the parse flags, the nesting limit (512) and the
// duplicate-key rule of json::ParseChecked (every object at any depth, names compared unescaped),
// and records as views into that copy:
//   - the envelope: kind, apiVersion, and of request: uid, operation, userInfo.username,
//     kind.kind, subResource, namespace, name;
//   - of request.object and request.oldObject: metadata.{name, generateName, namespace, uid,
//     resourceVersion, deletionTimestamp}, metadata.labels and metadata.annotations (the entries),
//     status.state; of request.object also spec.template.spec.serviceAccountName and the names
//     of spec.ports (spec.ports an array of objects, each name a string, as PortNames reads them).
// Every other value (managedFields, the pod template, most of spec and status) is checked by the
// reader and skipped. It returns true only for a review that is "regular": the body holds no NUL
// byte, parses, nests at most 512 levels, repeats no key, is an AdmissionReview object of
// admission.k8s.io/v1 or v1beta1 with a request object and a non-empty uid, and every field above
// has the JSON type the decisions expect (a string, an object; a map of strings) or is absent.
// For a regular review every field reads exactly as the document path (ParseReview,
// ParseGameServer in kStrict) reads it. false means "not certain": the caller answers with the
// document path, which names what is wrong exactly as before (the views are then meaningless).
// The views stay valid until the next ScanReview on the same thread. Pure, no I/O; after the first
// calls on a thread nothing is allocated (the copy, the reader's stack and the lists are kept).
#pragma once

#include <cstddef>
#include <string_view>
#include <utility>
#include <vector>

namespace aw::admission {

// A map of strings as it appears in the body: its entries in document order.
struct ScannedMap {
  bool present = false;
  size_t begin = 0;  // into ScannedReview::entries
  size_t end = 0;
};

struct ScannedObject {
  bool present = false;       // not absent and not null (then an object: else not regular)
  bool has_metadata = false;  // metadata present (and an object)
  std::string_view name, generate_name, namespace_, uid, resource_version;
  bool deleting = false;  // metadata.deletionTimestamp is a string
  ScannedMap labels, annotations;
  std::string_view state;            // status.state
  std::string_view service_account;  // spec.template.spec.serviceAccountName (object only)
  // spec.ports (object only): present when an array; its items' names, in order, in
  // ScannedReview::port_names[begin, end) (items without a name are not listed).
  struct {
    bool present = false;
    size_t begin = 0;
    size_t end = 0;
  } ports;
};

struct ScannedReview {
  // The start of the per-thread copy every view points into.
  const char* base = nullptr;
  std::string_view api_version;
  std::string_view uid;
  std::string_view operation;
  std::string_view username;
  std::string_view kind;
  std::string_view sub_resource;
  std::string_view namespace_;
  std::string_view name;
  ScannedObject object;                                                // request.object
  ScannedObject old_object;                                            // request.oldObject
  std::vector<std::pair<std::string_view, std::string_view>> entries;  // of every ScannedMap
  std::vector<std::string_view> port_names;                            // of object.ports

  std::pair<const std::pair<std::string_view, std::string_view>*, size_t> Entries(
      const ScannedMap& m) const {
    return {entries.data() + m.begin, m.end - m.begin};
  }
};

bool ScanReview(std::string_view body, ScannedReview* out);

}  // namespace aw::admission
