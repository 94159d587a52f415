// ConnectionRegistry: the open connections of one listener, their phases, and the cap.
//
// Promise: thread-safe. Admit() always admits the new connection; when `max_connections` are
// already open it first removes one chosen by ChooseVictim (eviction.h) and returns it so the
// caller can cut it (outside the registry's lock). SetPhase() records a connection's phase and
// when it started. WaitEmpty() waits until every connection has been removed. Sessions are held
// weakly: the registry never keeps a connection alive.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "server/core/eviction.h"
#include "util/io/mutex.h"

namespace aw::server {

class Connection {
 public:
  virtual ~Connection() = default;
  // Closes the connection at once (from any thread; runs on the connection's own executor).
  virtual void Cut() = 0;
  // The listener is draining: close the connection if it is idle (from any thread).
  virtual void Drain() = 0;
};

class ConnectionRegistry {
 public:
  explicit ConnectionRegistry(size_t max_connections) : max_(max_connections) {}

  struct Evicted {
    std::weak_ptr<Connection> conn;
    ConnPhase phase;
  };
  uint64_t NextId();
  // Registers `conn` (phase kHandshake, since now); the connection evicted to make room, if any.
  std::optional<Evicted> Admit(uint64_t id, std::weak_ptr<Connection> conn, ConnPhase phase);
  void SetPhase(uint64_t id, ConnPhase phase);
  void Remove(uint64_t id);
  size_t Size() const;
  // Every open connection (strong references, taken under the lock).
  std::vector<std::shared_ptr<Connection>> All() const;
  // True when empty before the deadline.
  bool WaitEmpty(std::chrono::steady_clock::time_point deadline);

 private:
  struct Entry {
    ConnPhase phase;
    std::chrono::steady_clock::time_point since;
    std::weak_ptr<Connection> conn;
  };
  const size_t max_;
  mutable Mutex mu_;
  CondVar empty_cv_;  // signalled when open_ becomes empty
  std::unordered_map<uint64_t, Entry> open_ GUARDED_BY(mu_);
  uint64_t next_id_ GUARDED_BY(mu_) = 1;
};

}  // namespace aw::server
