#include "gateway/io/request_keys.h"

#include "contract/keys.h"
#include "gateway/delivery.h"
#include "policy/gameserver.h"

namespace aw::gateway {

std::optional<std::string_view> RequestKeyOf(const kube::CachedObject& obj) {
  return obj.Annotation(keys::kRequestKey);
}

kube::ObjectPtr FindByRequestKey(const std::vector<kube::ObjectPtr>& servers, const std::string& ns,
                                 const std::string& key) {
  kube::ObjectPtr best;
  std::string best_at;
  for (const kube::ObjectPtr& obj : servers) {
    if (!obj || obj->namespace_ != ns || RequestKeyOf(*obj) != std::string_view(key)) continue;
    const policy::GameServerView& gs = *obj;
    if (!HoldsRequest(gs)) continue;
    std::string at(gs.Annotation(keys::kLastAllocated).value_or(""));
    // RFC 3339 UTC times of one writer compare as text; the name breaks a tie, so the answer
    // does not depend on the order of `servers`.
    if (!best || at < best_at || (at == best_at && obj->name < best->name)) {
      best = obj;
      best_at = std::move(at);
    }
  }
  return best;
}

void RequestKeyIndex::Upsert(const kube::ObjectPtr& obj) {
  if (!obj) return;
  const std::string ns_name = obj->namespace_ + "/" + obj->name;
  const std::optional<std::string_view> key = RequestKeyOf(*obj);
  MutexLock lock(mu_);
  if (!key) {
    Remove(ns_name);
    return;
  }
  std::string ns_key = obj->namespace_ + "/";
  ns_key.append(*key);
  auto it = key_of_.find(ns_name);
  if (it != key_of_.end() && it->second != ns_key) Remove(ns_name);
  key_of_[ns_name] = ns_key;
  by_key_[ns_key][ns_name] = obj;
}

void RequestKeyIndex::OnDelete(const kube::ObjectPtr& last_known) {
  if (!last_known) return;
  MutexLock lock(mu_);
  Remove(last_known->namespace_ + "/" + last_known->name);
}

void RequestKeyIndex::Remove(const std::string& ns_name) {
  auto it = key_of_.find(ns_name);
  if (it == key_of_.end()) return;
  auto k = by_key_.find(it->second);
  if (k != by_key_.end()) {
    k->second.erase(ns_name);
    if (k->second.empty()) by_key_.erase(k);
  }
  key_of_.erase(it);
}

kube::ObjectPtr RequestKeyIndex::Find(const std::string& ns, const std::string& key) const {
  std::vector<kube::ObjectPtr> candidates;
  {
    MutexLock lock(mu_);
    auto it = by_key_.find(ns + "/" + key);
    if (it == by_key_.end()) return nullptr;
    candidates.reserve(it->second.size());
    for (const auto& [name, obj] : it->second) candidates.push_back(obj);
  }
  return FindByRequestKey(candidates, ns, key);
}

size_t RequestKeyIndex::Size() const {
  MutexLock lock(mu_);
  return key_of_.size();
}

}  // namespace aw::gateway
