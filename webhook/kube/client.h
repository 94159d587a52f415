// A small Kubernetes API client: the verbs the webhook needs, generic over resource paths, each an
// asynchronous call (no thread waits for the API server).
//
// Promise: get/list/watch/create/update/patch/delete against any resource (core, apps, agones.dev,
// apiextensions.k8s.io, coordination.k8s.io, ...) described by a Resource. Every call has a
// timeout; errors carry the API server's Status (see status.h). Each verb's callback runs exactly
// once, on executor() (the transport's I/O thread; a fake transport's DoAsync may call it
// inline), and must not block. WatchAsync streams events to a handler until the server ends the
// stream, the handler says stop, an ERROR event arrives (the ApiError, 410 => IsExpired()) or
// Shutdown() is called. Thread-safe.
//
//   client.GetAsync(kube::kGameServers, "default", "gs-1", [](kube::Result<kube::JsonPtr> gs) {
//     if (!gs) log::warn("get failed", {{"error", gs.error().ToString()}});
//   });
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kube/core/json_text.h"
#include "kube/core/status.h"
#include "kube/core/watch_stream.h"
#include "kube/transport.h"

namespace aw::kube {

struct Resource {
  std::string group;    // "" for core
  std::string version;  // "v1"
  std::string plural;   // "gameservers"
  bool namespaced = true;
  // Collection or object path: /api/v1/namespaces/ns/pods[/name[/sub]] or /apis/g/v/....
  // ns is ignored for cluster-scoped resources; empty ns for a namespaced resource = all
  // namespaces.
  std::string Path(std::string_view ns, std::string_view name = {},
                   std::string_view sub = {}) const;
};

inline const Resource kGameServers{"agones.dev", "v1", "gameservers", true};
inline const Resource kCustomResourceDefinitions{"apiextensions.k8s.io", "v1",
                                                 "customresourcedefinitions", false};
inline const Resource kLeases{"coordination.k8s.io", "v1", "leases", true};
inline const Resource kEvents{"", "v1", "events", true};
inline const Resource kConfigMaps{"", "v1", "configmaps", true};

struct ListOptions {
  std::string label_selector;
  std::string field_selector;
  int64_t limit = 0;  // 0: no limit
  std::string continue_token;
  std::string resource_version;  // "" = most recent (quorum read); "0" = any (cache)
  std::chrono::milliseconds timeout{30000};
  Cancellation* cancel = nullptr;  // optional: lets another thread abort the call
};

struct WatchOptions {
  std::string label_selector;
  std::string field_selector;
  std::string resource_version;  // start after this version
  bool allow_bookmarks = true;
  // Raw events: WatchEvent::object stays null and WatchEvent::object_json is the object's text
  // (valid during the handler call), found without building a document (kube/core/raw_scan.h).
  // A line that is not a watch event is then skipped (counted in WatchEvent::skipped of the next
  // event delivered, and in the handler's `skipped` callback) instead of ending the stream.
  bool raw = false;
  std::function<void(std::string_view why)> on_skipped;  // raw only: a line was skipped
  size_t max_event_bytes = 32 * 1024 * 1024;             // a longer line: an error (raw: skipped)
  int timeout_seconds = 300;       // server closes the stream after this (randomise per call)
  Cancellation* cancel = nullptr;  // optional: lets another thread end the stream (e.g. Stop())
};

// One page of ListPagesAsync: the text of each item that is an object (views into the page, valid
// during the callback only).
struct ListPage {
  bool first = false;  // the first page of an attempt: forget what earlier pages gave
  int number = 0;      // 1, 2, ... within the attempt
  const std::vector<std::string_view>* items = nullptr;
  size_t non_object_items = 0;  // elements of `items` that were not objects (not passed on)
};

struct ListResult {
  std::vector<JsonPtr> items;    // each a standalone document
  std::string resource_version;  // list metadata.resourceVersion: start the watch from here
  int pages = 0;
};

enum class PatchType { kJson, kMerge, kStrategicMerge };
std::string_view PatchContentType(PatchType t);

// Percent-encodes a query parameter value (RFC 3986 unreserved chars stay).
std::string QueryEscape(std::string_view v);

class Client {
 public:
  explicit Client(std::unique_ptr<Transport> transport,
                  std::chrono::milliseconds default_timeout = std::chrono::seconds(30));
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // `timeout` (optional) overrides the client's default per-call timeout.
  using Timeout = std::optional<std::chrono::milliseconds>;
  // A patch of `type`: `done` runs exactly once, on the transport's I/O thread (it must not block),
  // with the patched object or the error.
  void PatchAsync(const Resource& r, std::string_view ns, std::string_view name, PatchType type,
                  const std::string& body, std::function<void(Result<JsonPtr>)> done);
  // GET, POST (create), PUT (update) and DELETE of one object the same way; DeleteAsync's answer is
  // the deleted object or a Status.
  using AsyncDone = std::function<void(Result<JsonPtr>)>;
  void GetAsync(const Resource& r, std::string_view ns, std::string_view name, AsyncDone done,
                Timeout timeout = std::nullopt);
  void CreateAsync(const Resource& r, std::string_view ns, const std::string& body, AsyncDone done,
                   Timeout timeout = std::nullopt);
  void UpdateAsync(const Resource& r, std::string_view ns, std::string_view name,
                   const std::string& body, AsyncDone done, Timeout timeout = std::nullopt);
  void DeleteAsync(const Resource& r, std::string_view ns, std::string_view name, AsyncDone done,
                   const std::string& delete_options_json = {});
  // One page of a list (follow ListOptions::continue_token yourself), or every page (when a
  // continue token expires mid-way, restarts once without a limit): `done` runs exactly once, on
  // the I/O thread (with a fake transport's inline DoAsync, on the calling thread).
  // opts.cancel, when set, aborts the call (a cancelled error).
  void ListAsync(const Resource& r, std::string_view ns, const ListOptions& opts,
                 std::function<void(Result<JsonPtr>)> done);
  void ListAllAsync(const Resource& r, std::string_view ns, ListOptions opts,
                    std::function<void(Result<ListResult>)> done);
  // A watch: `handler` runs on the I/O thread for each event, in order (return false to stop),
  // then `done` exactly once, on the I/O thread: an ERROR event => its ApiError, 410 =>
  // IsExpired(); the handler's stop or the server's end => the resourceVersion of the last event
  // seen (for resuming); Shutdown()/opts.cancel => cancelled.
  void WatchAsync(const Resource& r, std::string_view ns, const WatchOptions& opts,
                  std::function<bool(WatchEvent&)> handler,
                  std::function<void(Result<std::string>)> done);
  // Every page of a list, one page held at a time (client-go's pager with a page handler): each
  // page's items go to `on_page` (on the I/O thread, must not block) before the next page is
  // asked for; `done` runs once, with the list's resourceVersion or the error. When a continue
  // token expires mid-way the list starts over once, without a limit (on_page then sees `first`
  // again). opts.cancel, when set, aborts the call.
  void ListPagesAsync(const Resource& r, std::string_view ns, ListOptions opts,
                      std::function<void(const ListPage&)> on_page,
                      std::function<void(Result<std::string>)> done);

  // The transport's I/O executor (Transport::executor()): where the asynchronous calls' `done`
  // runs, and where the asynchronous components put their timers.
  boost::asio::any_io_executor executor() { return transport_->executor(); }

  // Cancels every in-flight call (watches included) and fails future calls fast.
  void Shutdown();
  bool IsShutdown() const;

 private:
  // The one asynchronous path: DoAsync, then the answer as JSON (or the ApiError it means).
  void CallAsync(HttpRequest req, std::function<void(Result<JsonPtr>)> done);
  std::unique_ptr<Transport> transport_;

 public:
  // The transport's connection counters (pool reuse, stale drops, retries).
  TransportCounters transport_counters() const { return transport_->counters(); }
  std::chrono::milliseconds default_timeout_;
};

// Builds a Client from a config; InvalidArgument when its TLS material is unusable.
StatusOr<std::unique_ptr<Client>> NewClient(const ClientConfig& config);

}  // namespace aw::kube
