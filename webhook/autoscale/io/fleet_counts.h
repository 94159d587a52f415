// Per-fleet counts of opted-in GameServers, and of those in state Allocating, kept from a watch.
//
// Promise:
//   - FleetCounts holds one entry per GameServer (namespace/name) given to Upsert, moved between
//     fleets and states as later Upserts say, dropped by Remove. Lookup(namespace, fleet) returns
//     how many of the GameServers last seen carry that fleet label (`servers`) and how many of
//     them are Allocating; both 0 for a fleet never seen. A GameServer without a fleet label is
//     remembered (so a later label is handled) but counts for no fleet.
//   - Synced() is false until MarkSynced() (the watch's first full list) and stays true after.
//   - Fleets() lists the fleets with at least one server, with their counts.
// Thread-safe: one writer (the watch thread) and any number of readers; a Lookup costs one
// shared lock and one map lookup.
#pragma once

#include <atomic>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "autoscale/counts.h"
#include "util/io/mutex.h"

namespace aw::autoscale {

class FleetCounts final : public CountsView {
 public:
  void Upsert(std::string_view ns, std::string_view name, const GameServerFacts& facts)
      EXCLUDES(mu_);
  void Remove(std::string_view ns, std::string_view name) EXCLUDES(mu_);
  FleetCount Lookup(std::string_view ns, std::string_view fleet) const override EXCLUDES(mu_);

  void MarkSynced() { synced_.store(true, std::memory_order_release); }
  bool Synced() const override { return synced_.load(std::memory_order_acquire); }

  struct FleetEntry {
    std::string namespace_;
    std::string fleet;
    FleetCount count;
  };
  std::vector<FleetEntry> Fleets() const EXCLUDES(mu_);

 private:
  struct Server {
    std::string fleet_key;  // "" = no fleet
    bool allocating = false;
  };
  static std::string Key(std::string_view ns, std::string_view name);
  void Unaccount(const Server& s) REQUIRES(mu_);
  void Account(const Server& s) REQUIRES(mu_);

  mutable SharedMutex mu_;
  std::map<std::string, Server, std::less<>> servers_ GUARDED_BY(mu_);     // "<ns>/<name>"
  std::map<std::string, FleetCount, std::less<>> fleets_ GUARDED_BY(mu_);  // "<ns>/<fleet>"
  std::atomic<bool> synced_{false};
};

}  // namespace aw::autoscale
