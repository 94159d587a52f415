#include "autoscale/io/fleet_counts.h"

namespace aw::autoscale {

std::string FleetCounts::Key(std::string_view ns, std::string_view name) {
  std::string k;
  k.reserve(ns.size() + 1 + name.size());
  k.append(ns).push_back('/');
  k.append(name);
  return k;
}

void FleetCounts::Unaccount(const Server& s) {
  if (s.fleet_key.empty()) return;
  auto it = fleets_.find(s.fleet_key);
  if (it == fleets_.end()) return;
  it->second.servers -= 1;
  if (s.allocating) it->second.allocating -= 1;
  if (it->second.servers <= 0) fleets_.erase(it);
}

void FleetCounts::Account(const Server& s) {
  if (s.fleet_key.empty()) return;
  FleetCount& c = fleets_[s.fleet_key];
  c.servers += 1;
  if (s.allocating) c.allocating += 1;
}

void FleetCounts::Upsert(std::string_view ns, std::string_view name, const GameServerFacts& facts) {
  Server next{facts.fleet.empty() ? std::string() : Key(ns, facts.fleet), facts.allocating};
  WriterMutexLock lock(mu_);
  auto it = servers_.find(Key(ns, name));
  if (it == servers_.end()) {
    Account(next);
    servers_.emplace(Key(ns, name), std::move(next));
    return;
  }
  if (it->second.fleet_key == next.fleet_key && it->second.allocating == next.allocating) return;
  Unaccount(it->second);
  Account(next);
  it->second = std::move(next);
}

void FleetCounts::Remove(std::string_view ns, std::string_view name) {
  WriterMutexLock lock(mu_);
  auto it = servers_.find(Key(ns, name));
  if (it == servers_.end()) return;
  Unaccount(it->second);
  servers_.erase(it);
}

FleetCount FleetCounts::Lookup(std::string_view ns, std::string_view fleet) const {
  const std::string k = Key(ns, fleet);
  ReaderMutexLock lock(mu_);
  auto it = fleets_.find(k);
  return it == fleets_.end() ? FleetCount{} : it->second;
}

std::vector<FleetCounts::FleetEntry> FleetCounts::Fleets() const {
  std::vector<FleetEntry> out;
  ReaderMutexLock lock(mu_);
  out.reserve(fleets_.size());
  for (const auto& [key, count] : fleets_) {
    const size_t slash = key.find('/');
    out.push_back({key.substr(0, slash), key.substr(slash + 1), count});
  }
  return out;
}

}  // namespace aw::autoscale
