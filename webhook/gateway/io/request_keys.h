// RequestKeyIndex: the gateway's cached GameServers by allocating.agones.dev/request-key, so that
// a request carrying an idempotency key finds the server an earlier attempt allocated (docs/
// gateway.md, "Idempotent retries") without scanning the whole cache.
//
// Promise:
//   - An informer handler (added to the gateway's one GameServer informer). After the handler
//     calls for every change it holds exactly the cached objects that carry a request key, under
//     "<namespace>/<key>": an object whose key changes or goes is moved or dropped, a deleted one
//     is dropped. Objects without the key cost one annotation lookup and nothing stored.
//   - Find(ns, key): among the objects carrying `key` in `ns`, the one that still holds its
//     request (gateway/delivery.h, HoldsRequest), the earliest allocation (agones.dev/
//     last-allocated, then the name) when several do, so every replica settles on the same one,
//     whatever the order of its cache; nullptr when none. The same answer as FindByRequestKey over
//     the whole cache, in time proportional to the servers carrying that key (one, or a few after
//     re-allocations).
//   - Thread-safe: the handler calls run on the informer's (the client's I/O) thread, Find on any
//     thread.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kube/informer.h"
#include "util/io/mutex.h"

namespace aw::gateway {

// The value of allocating.agones.dev/request-key on `obj`, if it carries one (a string).
std::optional<std::string_view> RequestKeyOf(const kube::CachedObject& obj);

// Among `servers`, the one in `ns` carrying request key `key` that still holds its request; the
// earliest allocation (then the lowest name) when several do; nullptr when none (a linear scan;
// RequestKeyIndex keeps the candidates).
kube::ObjectPtr FindByRequestKey(const std::vector<kube::ObjectPtr>& servers, const std::string& ns,
                                 const std::string& key);

class RequestKeyIndex final : public kube::InformerHandler {
 public:
  void OnAdd(const kube::ObjectPtr& obj) override EXCLUDES(mu_) { Upsert(obj); }
  void OnUpdate(const kube::ObjectPtr&, const kube::ObjectPtr& obj) override EXCLUDES(mu_) {
    Upsert(obj);
  }
  void OnDelete(const kube::ObjectPtr& last_known) override EXCLUDES(mu_);

  kube::ObjectPtr Find(const std::string& ns, const std::string& key) const EXCLUDES(mu_);
  size_t Size() const EXCLUDES(mu_);  // objects indexed

 private:
  void Upsert(const kube::ObjectPtr& obj) EXCLUDES(mu_);
  void Remove(const std::string& ns_name) REQUIRES(mu_);

  mutable Mutex mu_;
  // "<ns>/<key>" -> "<ns>/<name>" -> the object.
  std::map<std::string, std::map<std::string, kube::ObjectPtr>> by_key_ GUARDED_BY(mu_);
  std::map<std::string, std::string> key_of_ GUARDED_BY(mu_);  // "<ns>/<name>" -> "<ns>/<key>"
};

}  // namespace aw::gateway
