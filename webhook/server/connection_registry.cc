#include "server/connection_registry.h"

namespace aw::server {

uint64_t ConnectionRegistry::NextId() {
  MutexLock lock(mu_);
  return next_id_++;
}

std::optional<ConnectionRegistry::Evicted> ConnectionRegistry::Admit(uint64_t id,
                                                                     std::weak_ptr<Connection> conn,
                                                                     ConnPhase phase) {
  const auto now = std::chrono::steady_clock::now();
  std::optional<Evicted> evicted;
  MutexLock lock(mu_);
  if (open_.size() >= max_) {
    std::vector<ConnSnapshot> snapshot;
    snapshot.reserve(open_.size());
    for (const auto& [cid, e] : open_) snapshot.push_back({cid, e.phase, e.since});
    if (auto victim = ChooseVictim(snapshot)) {
      auto it = open_.find(*victim);
      evicted = Evicted{std::move(it->second.conn), it->second.phase};
      open_.erase(it);
    }
  }
  open_.emplace(id, Entry{phase, now, std::move(conn)});
  return evicted;
}

void ConnectionRegistry::SetPhase(uint64_t id, ConnPhase phase) {
  const auto now = std::chrono::steady_clock::now();
  MutexLock lock(mu_);
  auto it = open_.find(id);
  if (it == open_.end()) return;  // evicted: being cut
  it->second.phase = phase;
  it->second.since = now;
}

void ConnectionRegistry::Remove(uint64_t id) {
  MutexLock lock(mu_);
  if (open_.erase(id) > 0 && open_.empty()) empty_cv_.SignalAll();
}

size_t ConnectionRegistry::Size() const {
  MutexLock lock(mu_);
  return open_.size();
}

std::vector<std::shared_ptr<Connection>> ConnectionRegistry::All() const {
  std::vector<std::shared_ptr<Connection>> out;
  MutexLock lock(mu_);
  out.reserve(open_.size());
  for (const auto& [id, e] : open_) {
    if (auto c = e.conn.lock()) out.push_back(std::move(c));
  }
  return out;
}

bool ConnectionRegistry::WaitEmpty(std::chrono::steady_clock::time_point deadline) {
  MutexLock lock(mu_);
  return empty_cv_.WaitUntil(mu_, deadline, [this]() REQUIRES(mu_) { return open_.empty(); });
}

}  // namespace aw::server
