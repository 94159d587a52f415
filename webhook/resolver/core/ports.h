// The resolver's needs from the outside world, as small interfaces ("ports"), so the loop can be
// unit-tested with fakes and run on the real Kubernetes client in production (kube_adapters.h).
//
// Promise: each interface is minimal and documents its threading. None of them is called while
// the resolver holds a lock.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "resolver/core/gameserver.h"
#include "util/status.h"

namespace aw::resolver {

// Read side: the current view of opted-in GameServers (a watch-backed cache in production).
// Called only from the resolver's loop thread. Change notifications go the other way: whoever
// owns the cache calls Resolver::Notify(key) / NotifyAll().
class GameServerSource {
 public:
  virtual ~GameServerSource() = default;
  // nullptr when the server is not (or no longer) known.
  virtual std::shared_ptr<const GameServerView> Get(const std::string& ns,
                                                    const std::string& name) = 0;
  // Every known opted-in server.
  virtual std::vector<std::shared_ptr<const GameServerView>> List() = 0;
};

// What a patch's Status means to the resolver.
enum class PatchStatus {
  kOk,
  kConflict,  // Conflict: resourceVersion or allocation test failed (409/422): re-decide
  kNotFound,  // NotFound: the object is gone
  kRejected,  // any other error: refused for good with this content (denied by admission, 403)
  kRetry,     // Unavailable, DeadlineExceeded, Cancelled: transient (transport, 429, 5xx)
};
PatchStatus PatchStatusOf(const Status& status);
std::string_view PatchStatusName(PatchStatus s);

// Write side: applies one RFC 6902 JSON patch to a GameServer, without a waiting thread. The
// Status's code says what happened (see PatchStatus), its message why. `done` runs exactly once,
// on any thread, and must not block (the production patcher: kube_adapters.h).
class Patcher {
 public:
  virtual ~Patcher() = default;
  virtual void PatchGameServerAsync(const std::string& ns, const std::string& name,
                                    const std::string& json_patch,
                                    std::function<void(Status)> done) = 0;
};

enum class EventType { kNormal, kWarning };

// Records a Kubernetes Event about a GameServer. May block; called from the patch workers.
class EventRecorder {
 public:
  virtual ~EventRecorder() = default;
  virtual void Record(const GameServerView& gs, EventType type, const std::string& reason,
                      const std::string& message) = 0;
};

// Wall clock (the `since` annotation is wall-clock time).
class WallClock {
 public:
  virtual ~WallClock() = default;
  virtual TimePoint Now() const = 0;
};

class SystemWallClock final : public WallClock {
 public:
  TimePoint Now() const override { return Clock::now(); }
};

// Where the resolver starts its patches and Events, off the loop's pass: a ManualExecutor in
// tests; in production an InlineExecutor (resolver.h), as starting either never blocks.
class Executor {
 public:
  virtual ~Executor() = default;
  virtual void Post(std::function<void()> task) = 0;
};

}  // namespace aw::resolver
