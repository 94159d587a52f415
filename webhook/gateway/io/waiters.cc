#include "gateway/io/waiters.h"

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <vector>

#include "contract/keys.h"
#include "util/io/log.h"

namespace aw::gateway {

namespace net = boost::asio;

struct WaiterRegistry::Waiter {
  Waiter(net::io_context& ioc, std::string n, std::string hint, std::string la, Done d)
      : name(std::move(n)),
        ns_hint(std::move(hint)),
        last_allocated(std::move(la)),
        done(std::move(d)),
        timer(ioc) {}
  const std::string name;
  const std::string ns_hint;
  const std::string last_allocated;
  Done done;
  net::steady_timer timer;  // touched on the timer thread only
  Mutex mu;
  std::string bound_ns GUARDED_BY(mu);  // "" until the allocation was seen
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
    MutexLock lock(mu_);
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
  MutexLock lock(mu_);
  return waiters_.size();
}

WaiterRegistry::Ticket WaiterRegistry::Wait(const std::string& ns_hint, const std::string& name,
                                            std::string last_allocated,
                                            std::chrono::steady_clock::time_point deadline,
                                            Done done) {
  auto w =
      std::make_shared<Waiter>(timers_, name, ns_hint, std::move(last_allocated), std::move(done));
  bool stopped;
  {
    MutexLock lock(mu_);
    stopped = stopped_;
    if (!stopped) waiters_.emplace(name, w);
  }
  if (stopped) {
    w->done({Verdict::kWait, "stopped"}, nullptr, ns_hint);
    return {};
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
  // The cache may already hold the allocator's write (or a later one): the copy of this very
  // allocation first, wherever it is, then the copy in the request's namespace.
  if (lookup_) {
    std::vector<kube::ObjectPtr> copies = lookup_(name);
    std::stable_partition(copies.begin(), copies.end(), [&w](const kube::ObjectPtr& o) {
      return o->Annotation(keys::kLastAllocated).value_or("") == w->last_allocated;
    });
    for (const auto& obj : copies) {
      Decision d = Judge(*w, obj, false);
      if (d.verdict != Verdict::kWait) {
        Finish(w, d, obj);
        break;
      }
    }
  }
  return weak;
}

void WaiterRegistry::Cancel(const Ticket& ticket, const std::string& reason) {
  if (auto w = ticket.lock()) Finish(w, {Verdict::kWait, reason}, nullptr);
}

Decision WaiterRegistry::Judge(Waiter& w, const kube::ObjectPtr& obj, bool deleted) {
  const policy::GameServerView& view = *obj;
  {
    MutexLock lock(w.mu);
    if (w.bound_ns.empty()) {
      if (view.Annotation(keys::kLastAllocated).value_or("") == w.last_allocated) {
        w.bound_ns = obj->namespace_;  // this allocation's copy: the server is here
      } else if (obj->namespace_ != w.ns_hint) {
        return {Verdict::kWait, "another namespace's GameServer"};
      }
    } else if (obj->namespace_ != w.bound_ns) {
      return {Verdict::kWait, "another namespace's GameServer"};
    }
  }
  return Decide(&view, deleted, w.last_allocated);
}

void WaiterRegistry::Evaluate(const kube::ObjectPtr& obj, bool deleted) {
  std::vector<std::shared_ptr<Waiter>> matched;
  {
    MutexLock lock(mu_);
    auto [b, e] = waiters_.equal_range(obj->name);
    for (auto it = b; it != e; ++it) matched.push_back(it->second);
  }
  for (auto& w : matched) {
    Decision d = Judge(*w, obj, deleted);
    if (d.verdict != Verdict::kWait) Finish(w, d, obj);
  }
}

void WaiterRegistry::Finish(const std::shared_ptr<Waiter>& w, const Decision& d,
                            const kube::ObjectPtr& obj) {
  {
    MutexLock lock(mu_);
    auto [b, e] = waiters_.equal_range(w->name);
    auto it = b;
    for (; it != e; ++it) {
      if (it->second == w) break;
    }
    if (it == e) return;  // already finished
    waiters_.erase(it);
  }
  net::post(timers_, [w] { w->timer.cancel(); });
  std::string ns;
  {
    MutexLock lock(w->mu);
    ns = w->bound_ns.empty() ? w->ns_hint : w->bound_ns;
  }
  w->done(d, obj, ns);
}

void WaiterRegistry::OnDelete(const kube::ObjectPtr& last_known) { Evaluate(last_known, true); }

}  // namespace aw::gateway
