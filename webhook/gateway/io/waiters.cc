#include "gateway/io/waiters.h"

#include <algorithm>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <map>
#include <vector>

#include "contract/keys.h"
#include "runtime/io_thread.h"
#include "util/io/log.h"

namespace aw::gateway {

namespace net = boost::asio;

struct WaiterRegistry::Timers {
  explicit Timers(net::any_io_executor given) {
    if (given) {
      ex = std::move(given);
      return;
    }
    own.emplace(1);
    ex = own->get_executor();
    work.emplace(own->get_executor());
  }
  std::optional<net::io_context> own;  // without a given executor: the timer thread's
  net::any_io_executor ex;             // where the timers run
  // Keeps the timer thread running while it has no timer (until Stop()).
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
};

struct WaiterRegistry::Waiter {
  Waiter(std::shared_ptr<Timers> t, std::string n, std::string hint, std::string la, Done d)
      : timers(std::move(t)),
        name(std::move(n)),
        ns_hint(std::move(hint)),
        last_allocated(std::move(la)),
        done(std::move(d)),
        timer(timers->ex) {}
  const std::shared_ptr<Timers> timers;  // outlives `timer` (declared before it)
  const std::string name;
  const std::string ns_hint;
  const std::string last_allocated;
  Done done;
  net::steady_timer timer;  // touched on the timer thread only
  Mutex mu;
  std::string bound_ns GUARDED_BY(mu);   // "" until the allocation was seen
  bool finished GUARDED_BY(mu) = false;  // set before the timer's cancel is posted
};

struct WaiterRegistry::State {
  // Removes `w` if still registered and completes it.
  void Finish(const std::shared_ptr<Waiter>& w, const Decision& d, const kube::ObjectPtr& obj)
      EXCLUDES(mu);

  explicit State(net::any_io_executor executor)
      : timers(std::make_shared<Timers>(std::move(executor))) {}

  const std::shared_ptr<Timers> timers;
  mutable Mutex mu;
  std::multimap<std::string, std::shared_ptr<Waiter>> waiters GUARDED_BY(mu);  // key: name
  bool stopped GUARDED_BY(mu) = false;
};

namespace {

// The decision for `w` from `obj` (kWait when `obj` does not concern it); binds `w`.
template <typename W>
Decision Judge(W& w, const kube::ObjectPtr& obj, bool deleted) {
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

}  // namespace

WaiterRegistry::WaiterRegistry(Lookup lookup, boost::asio::any_io_executor executor)
    : lookup_(std::move(lookup)), state_(std::make_shared<State>(std::move(executor))) {}

WaiterRegistry::~WaiterRegistry() { Stop(); }

void WaiterRegistry::Start() {
  MutexLock lock(thread_mu_);
  if (thread_.joinable() || !state_->timers->own) return;
  // The thread holds the io_context it runs (not the registry).
  thread_ = std::thread([timers = state_->timers] {
    for (;;) {
      try {
        timers->own->run();
        return;
      } catch (const std::exception& e) {
        log::error("unexpected exception on the gateway timer thread", {{"error", e.what()}});
      }
    }
  });
  thread_id_.store(thread_.get_id());
}

void WaiterRegistry::Stop() {
  // A `done` on the timer thread calling Stop() would join its own thread.
  runtime::DieIfThread(thread_id_.load(), "WaiterRegistry::Stop");
  if (!state_->timers->own) runtime::DieIfOn(state_->timers->ex, "WaiterRegistry::Stop");
  std::vector<std::shared_ptr<Waiter>> all;
  {
    MutexLock lock(state_->mu);
    if (!state_->stopped) {
      state_->stopped = true;
      for (auto& [key, w] : state_->waiters) all.push_back(w);
    }
  }
  for (auto& w : all) state_->Finish(w, {Verdict::kWait, "stopped"}, nullptr);
  // A deadline's `done` still running returns first; a later deadline handler does nothing.
  life_.End();
  // Every timer is cancelled (or never armed) now: the timer thread runs out of work and returns.
  MutexLock lock(thread_mu_);
  state_->timers->work.reset();
  if (thread_.joinable()) thread_.join();
  thread_id_.store(std::thread::id());  // a later thread may be given the same id
}

size_t WaiterRegistry::Waiting() const {
  MutexLock lock(state_->mu);
  return state_->waiters.size();
}

WaiterRegistry::Ticket WaiterRegistry::Wait(const std::string& ns_hint, const std::string& name,
                                            std::string last_allocated,
                                            std::chrono::steady_clock::time_point deadline,
                                            Done done) {
  auto w = std::make_shared<Waiter>(state_->timers, name, ns_hint, std::move(last_allocated),
                                    std::move(done));
  bool stopped;
  {
    MutexLock lock(state_->mu);
    stopped = state_->stopped;
    if (!stopped) state_->waiters.emplace(name, w);
  }
  if (stopped) {
    w->done({Verdict::kWait, "stopped"}, nullptr, ns_hint);
    return {};
  }
  // The handlers hold weak handles: a handler left in the queue keeps nothing alive, and one that
  // runs finds the state and the waiter or returns.
  std::weak_ptr<Waiter> weak = w;
  std::weak_ptr<State> weak_state = state_;
  // Guarded: Stop() waits for a deadline's `done` that runs, and a later one does nothing.
  auto on_deadline = life_.Guard([weak, weak_state](const boost::system::error_code& ec) {
    if (ec) return;  // cancelled: finished before its deadline
    auto s = weak.lock();
    auto state = weak_state.lock();
    if (s && state) state->Finish(s, {Verdict::kWait, "deadline"}, nullptr);
  });
  net::post(state_->timers->ex, [weak, deadline, on_deadline = std::move(on_deadline)]() mutable {
    auto self = weak.lock();
    if (!self) return;
    {
      MutexLock lock(self->mu);
      if (self->finished) return;  // finished before its timer was armed: nothing to cancel
    }
    self->timer.expires_at(deadline);
    self->timer.async_wait(std::move(on_deadline));
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
        state_->Finish(w, d, obj);
        break;
      }
    }
  }
  return weak;
}

void WaiterRegistry::Cancel(const Ticket& ticket, const std::string& reason) {
  if (auto w = ticket.lock()) state_->Finish(w, {Verdict::kWait, reason}, nullptr);
}

void WaiterRegistry::Evaluate(const kube::ObjectPtr& obj, bool deleted) {
  std::vector<std::shared_ptr<Waiter>> matched;
  {
    MutexLock lock(state_->mu);
    auto [b, e] = state_->waiters.equal_range(obj->name);
    for (auto it = b; it != e; ++it) matched.push_back(it->second);
  }
  for (auto& w : matched) {
    Decision d = Judge(*w, obj, deleted);
    if (d.verdict != Verdict::kWait) state_->Finish(w, d, obj);
  }
}

void WaiterRegistry::State::Finish(const std::shared_ptr<Waiter>& w, const Decision& d,
                                   const kube::ObjectPtr& obj) {
  {
    MutexLock lock(mu);
    auto [b, e] = waiters.equal_range(w->name);
    auto it = b;
    for (; it != e; ++it) {
      if (it->second == w) break;
    }
    if (it == e) return;  // already finished
    waiters.erase(it);
  }
  std::string ns;
  {
    MutexLock lock(w->mu);
    w->finished = true;
    ns = w->bound_ns.empty() ? w->ns_hint : w->bound_ns;
  }
  std::weak_ptr<Waiter> weak = w;
  net::post(timers->ex, [weak] {
    if (auto s = weak.lock()) s->timer.cancel();
  });
  w->done(d, obj, ns);
}

void WaiterRegistry::OnDelete(const kube::ObjectPtr& last_known) { Evaluate(last_known, true); }

}  // namespace aw::gateway
