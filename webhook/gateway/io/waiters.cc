#include "gateway/io/waiters.h"

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <vector>

#include "util/log.h"

namespace aw::gateway {

namespace net = boost::asio;

struct WaiterRegistry::Waiter {
  Waiter(net::io_context& ioc, std::string k, std::string la, Done d)
      : key(std::move(k)), last_allocated(std::move(la)), done(std::move(d)), timer(ioc) {}
  const std::string key;
  const std::string last_allocated;
  Done done;
  net::steady_timer timer;  // touched on the timer thread only
};

WaiterRegistry::WaiterRegistry(Lookup lookup)
    : lookup_(std::move(lookup)), work_(net::make_work_guard(timers_)) {}

WaiterRegistry::~WaiterRegistry() { Stop(); }

void WaiterRegistry::Start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] {
    for (;;) {
      try {
        timers_.run();
        return;
      } catch (const std::exception& e) {
        log::error("unexpected exception on the gateway timer thread", {{"error", e.what()}});
      }
    }
  });
}

void WaiterRegistry::Stop() {
  std::vector<std::shared_ptr<Waiter>> all;
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
    stopped_ = true;
    for (auto& [key, w] : waiters_) all.push_back(w);
  }
  for (auto& w : all) Finish(w, {Verdict::kWait, "stopped"}, nullptr);
  // Every timer is cancelled now: the timer thread runs out of work and returns.
  work_.reset();
  if (thread_.joinable()) thread_.join();
}

size_t WaiterRegistry::Waiting() const {
  std::lock_guard lock(mu_);
  return waiters_.size();
}

void WaiterRegistry::Wait(const std::string& ns, const std::string& name,
                          std::string last_allocated,
                          std::chrono::steady_clock::time_point deadline, Done done) {
  const std::string key = ns + "/" + name;
  auto w = std::make_shared<Waiter>(timers_, key, std::move(last_allocated), std::move(done));
  bool stopped;
  {
    std::lock_guard lock(mu_);
    stopped = stopped_;
    if (!stopped) waiters_.emplace(key, w);
  }
  if (stopped) {
    w->done({Verdict::kWait, "stopped"}, nullptr);
    return;
  }
  std::weak_ptr<Waiter> weak = w;
  net::post(timers_, [this, weak, deadline] {
    auto self = weak.lock();
    if (!self) return;
    self->timer.expires_at(deadline);
    self->timer.async_wait([this, weak](const boost::system::error_code& ec) {
      if (ec) return;  // cancelled: finished before its deadline
      if (auto s = weak.lock()) Finish(s, {Verdict::kWait, "deadline"}, nullptr);
    });
  });
  // The cache may already hold the allocator's write (or a later one).
  Decision d = Decide(nullptr, false, w->last_allocated);
  kube::ObjectPtr obj = lookup_ ? lookup_(ns, name) : nullptr;
  if (obj) {
    const gate::GameServerView view = gate::ParseGameServer(*obj->doc);
    d = Decide(&view, false, w->last_allocated);
  }
  if (d.verdict != Verdict::kWait) Finish(w, d, obj);
}

void WaiterRegistry::Evaluate(const std::string& key, const kube::ObjectPtr& obj, bool deleted) {
  std::vector<std::shared_ptr<Waiter>> matched;
  {
    std::lock_guard lock(mu_);
    auto [b, e] = waiters_.equal_range(key);
    for (auto it = b; it != e; ++it) matched.push_back(it->second);
  }
  if (matched.empty()) return;
  const gate::GameServerView view = obj ? gate::ParseGameServer(*obj->doc) : gate::GameServerView{};
  for (auto& w : matched) {
    Decision d = Decide(&view, deleted, w->last_allocated);
    if (d.verdict != Verdict::kWait) Finish(w, d, obj);
  }
}

void WaiterRegistry::Finish(const std::shared_ptr<Waiter>& w, const Decision& d,
                            const kube::ObjectPtr& obj) {
  {
    std::lock_guard lock(mu_);
    auto [b, e] = waiters_.equal_range(w->key);
    auto it = b;
    for (; it != e; ++it) {
      if (it->second == w) break;
    }
    if (it == e) return;  // already finished
    waiters_.erase(it);
  }
  net::post(timers_, [w] { w->timer.cancel(); });
  w->done(d, obj);
}

void WaiterRegistry::OnUpsert(const kube::ObjectPtr& obj) {
  Evaluate(obj->namespace_ + "/" + obj->name, obj, false);
}

void WaiterRegistry::OnDelete(const kube::ObjectPtr& last_known) {
  Evaluate(last_known->namespace_ + "/" + last_known->name, last_known, true);
}

}  // namespace aw::gateway
