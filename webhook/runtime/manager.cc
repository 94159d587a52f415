#include "runtime/manager.h"

#include <algorithm>

#include "util/io/log.h"

namespace aw::runtime {

struct Manager::Slot {
  std::unique_ptr<Runnable> runnable;  // exactly one of runnable and service
  std::unique_ptr<Service> service;
  RunnableOptions options;
  size_t group = 0;
  std::string name;
  std::jthread thread;
  bool running = false;  // thread started and not yet finished
  bool ready = false;
  bool stop_asked = false;  // the manager asked it to stop
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  Status failure;  // non-OK when it failed
};

namespace {

class FunctionRunnable final : public Runnable {
 public:
  FunctionRunnable(std::string name, std::function<Status(RunContext&)> run)
      : name_(std::move(name)), run_(std::move(run)) {}
  std::string Name() const override { return name_; }
  Status Run(RunContext& ctx) override { return run_(ctx); }

 private:
  std::string name_;
  std::function<Status(RunContext&)> run_;
};

class FunctionService final : public Service {
 public:
  FunctionService(std::string name, std::function<Status()> start,
                  std::function<Status(std::chrono::steady_clock::time_point)> stop)
      : name_(std::move(name)), start_(std::move(start)), stop_(std::move(stop)) {}
  std::string Name() const override { return name_; }
  Status Start() override { return start_(); }
  Status Stop(std::chrono::steady_clock::time_point deadline) override { return stop_(deadline); }

 private:
  std::string name_;
  std::function<Status()> start_;
  std::function<Status(std::chrono::steady_clock::time_point)> stop_;
};

}  // namespace

std::unique_ptr<Service> MakeService(
    std::string name, std::function<Status()> start,
    std::function<Status(std::chrono::steady_clock::time_point)> stop) {
  return std::make_unique<FunctionService>(std::move(name), std::move(start), std::move(stop));
}

std::unique_ptr<Runnable> MakeRunnable(std::string name, std::function<Status(RunContext&)> run) {
  return std::make_unique<FunctionRunnable>(std::move(name), std::move(run));
}

void RunContext::Ready() { m_->MarkReady(slot_); }

std::chrono::steady_clock::time_point RunContext::StopDeadline() const {
  MutexLock lock(m_->mu_);
  return m_->slots_[slot_]->deadline;
}

void Manager::OnStarted(std::function<void()> f) {
  MutexLock lock(mu_);
  on_started_ = std::move(f);
}

Manager::Manager(std::vector<std::string> groups, std::chrono::nanoseconds stop_deadline)
    : groups_(std::move(groups)), stop_deadline_(stop_deadline) {}

Manager::~Manager() {
  // jthreads join here: a runnable that ignored its stop request blocks destruction (see header).
  // Services still running (Run never stopped them) are stopped at once.
  MutexLock lock(mu_);
  for (auto& s : slots_) {
    if (s->thread.joinable()) s->thread.request_stop();
  }
  for (auto& s : slots_) {
    if (s->service && s->running) {
      s->running = false;
      Service* service = s->service.get();
      lock.Unlock();
      // Destruction cannot report: a service that fails to stop is logged by the service itself
      // (Run, which reports failures, was never asked to stop it).
      Status st = service->Stop(std::chrono::steady_clock::now());
      if (!st.ok())
        log::warn("manager: service stopped with an error",
                  {{"service", s->name}, {"error", st.ToString()}});
      lock.Lock();
    }
  }
}

Status Manager::Add(std::unique_ptr<Runnable> runnable, RunnableOptions options) {
  auto slot = std::make_unique<Slot>();
  slot->name = runnable->Name();
  slot->runnable = std::move(runnable);
  slot->options = std::move(options);
  return AddSlot(std::move(slot), "runnable ");
}

Status Manager::Add(std::unique_ptr<Service> service, RunnableOptions options) {
  auto slot = std::make_unique<Slot>();
  slot->name = service->Name();
  slot->service = std::move(service);
  slot->options = std::move(options);
  return AddSlot(std::move(slot), "service ");
}

Status Manager::AddSlot(std::unique_ptr<Slot> slot, const std::string& kind) {
  auto it = std::find(groups_.begin(), groups_.end(), slot->options.group);
  if (it == groups_.end()) {
    return Status::InvalidArgument(kind + slot->name + ": unknown group \"" + slot->options.group +
                                   "\"");
  }
  MutexLock lock(mu_);
  if (running_) return Status::InvalidArgument(kind + slot->name + ": added after Run");
  slot->group = static_cast<size_t>(it - groups_.begin());
  slots_.push_back(std::move(slot));
  return Status::Ok();
}

void Manager::Start(size_t i) {
  Slot& s = *slots_[i];
  if (s.thread.joinable()) s.thread.join();  // a finished earlier run (leader runnables)
  s.running = true;
  s.ready = false;
  s.stop_asked = false;
  s.deadline = std::chrono::steady_clock::time_point::max();
  if (s.service) {
    Service* service = s.service.get();
    mu_.Unlock();
    Status st = service->Start();
    mu_.Lock();
    if (st.ok()) {
      slots_[i]->ready = true;
    } else {
      slots_[i]->running = false;
      slots_[i]->failure = st;
    }
    cv_.SignalAll();
    return;
  }
  Runnable* runnable = s.runnable.get();
  s.thread = std::jthread([this, i, runnable](std::stop_token stop) {
    RunContext ctx(this, i, stop);
    Status st = runnable->Run(ctx);
    MutexLock lock(mu_);
    Slot& me = *slots_[i];
    me.running = false;
    if (!st.ok()) {
      me.failure = st;
    } else if (!me.stop_asked && !stop.stop_requested()) {
      me.failure = Status::Internal("returned without being asked to stop");
    }
    cv_.SignalAll();
  });
}

void Manager::MarkReady(size_t i) {
  MutexLock lock(mu_);
  slots_[i]->ready = true;
  cv_.SignalAll();
}

bool Manager::GroupReady(size_t group) {
  for (auto& s : slots_) {
    if (s->group == group && !s->options.needs_leader && !s->ready) return false;
  }
  return true;
}

std::string Manager::FirstFailure() {
  for (auto& s : slots_) {
    if (!s->failure.ok()) return s->name + ": " + s->failure.ToString();
  }
  return "";
}

std::vector<std::string> Manager::StopAndWait(const std::vector<size_t>& slots,
                                              std::chrono::steady_clock::time_point deadline) {
  std::vector<std::string> stuck;
  for (size_t i : slots) {
    if (slots_[i]->running && slots_[i]->runnable) {
      slots_[i]->stop_asked = true;
      slots_[i]->deadline = deadline;
      slots_[i]->thread.request_stop();
    }
  }
  for (size_t i : slots) {
    // A service another caller is stopping is waited for below, not stopped twice.
    if (!slots_[i]->running || !slots_[i]->service || slots_[i]->stop_asked) continue;
    slots_[i]->stop_asked = true;
    slots_[i]->deadline = deadline;
    Service* service = slots_[i]->service.get();
    mu_.Unlock();
    Status st = service->Stop(deadline);
    mu_.Lock();
    slots_[i]->running = false;
    if (!st.ok()) stuck.push_back(slots_[i]->name + " (" + st.message() + ")");
    cv_.SignalAll();
  }
  auto all_done = [&]() REQUIRES(mu_) {
    return std::none_of(slots.begin(), slots.end(),
                        [&](size_t i) REQUIRES(mu_) { return slots_[i]->running; });
  };
  cv_.WaitUntil(mu_, deadline, all_done);
  for (size_t i : slots) {
    if (slots_[i]->running) stuck.push_back(slots_[i]->name);
  }
  return stuck;
}

Status Manager::Run(std::stop_token stop) {
  MutexLock lock(mu_);
  if (running_) return Status::InvalidArgument("Manager::Run called twice");
  running_ = true;
  auto failed_or_stopped = [&]() REQUIRES(mu_) {
    return stop.stop_requested() || !FirstFailure().empty();
  };

  // Start the groups in order; each waits for the previous ones to be ready.
  for (size_t g = 0; g < groups_.size() && !failed_or_stopped(); ++g) {
    for (size_t i = 0; i < slots_.size(); ++i) {
      if (slots_[i]->group == g && !slots_[i]->options.needs_leader && slots_[i]->service) {
        Start(i);
      }
    }
    for (size_t i = 0; i < slots_.size() && FirstFailure().empty(); ++i) {
      if (slots_[i]->group == g && !slots_[i]->options.needs_leader && slots_[i]->runnable) {
        Start(i);
      }
    }
    cv_.Wait(mu_, stop, [&]() REQUIRES(mu_) { return !FirstFailure().empty() || GroupReady(g); });
  }
  if (!failed_or_stopped()) {
    if (on_started_) {
      auto f = std::move(on_started_);
      lock.Unlock();
      f();
      lock.Lock();
    }
    // Leadership changes, applied here one after the other (SetLeader only records them).
    while (true) {
      cv_.Wait(mu_, stop,
               [&]() REQUIRES(mu_) { return !FirstFailure().empty() || !leader_changes_.empty(); });
      if (failed_or_stopped()) break;
      ApplyLeadership();
    }
  }

  // Stop: leader runnables, then the groups from last to first, under one deadline.
  const auto deadline = std::chrono::steady_clock::now() + stop_deadline_;
  std::vector<std::string> stuck;
  std::vector<size_t> leaders;
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i]->options.needs_leader) leaders.push_back(i);
  }
  auto s = StopAndWait(leaders, deadline);
  stuck.insert(stuck.end(), s.begin(), s.end());
  for (size_t g = groups_.size(); g-- > 0;) {
    std::vector<size_t> group;
    for (size_t i = 0; i < slots_.size(); ++i) {
      if (slots_[i]->group == g && !slots_[i]->options.needs_leader) group.push_back(i);
    }
    s = StopAndWait(group, deadline);
    stuck.insert(stuck.end(), s.begin(), s.end());
  }
  std::string failure = FirstFailure();
  if (!failure.empty()) return Status::Internal(failure);
  if (!stuck.empty()) {
    std::string names;
    for (const auto& n : stuck) names += (names.empty() ? "" : ", ") + n;
    return Status::DeadlineExceeded("still running at the stop deadline: " + names);
  }
  return Status::Ok();
}

void Manager::SetLeader(bool leader) {
  MutexLock lock(mu_);
  if (leader_wish_ == leader) return;
  leader_wish_ = leader;
  // Every change, in order (a loss then a gain before Run's thread looks still stops and
  // restarts the leader runnables): Run's thread applies them (ApplyLeadership).
  leader_changes_.push_back(leader);
  cv_.SignalAll();
}

void Manager::ApplyLeadership() {
  leader_ = leader_changes_.front();
  leader_changes_.pop_front();
  std::vector<size_t> leaders;
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i]->options.needs_leader) leaders.push_back(i);
  }
  if (leader_) {
    for (size_t i : leaders) {
      if (!slots_[i]->running) Start(i);
    }
    return;
  }
  std::vector<std::string> stuck =
      StopAndWait(leaders, std::chrono::steady_clock::now() + stop_deadline_);
  for (const auto& name : stuck) {
    log::error(
        "manager: leader runnable still running at the stop deadline after leadership was "
        "lost",
        {{"runnable", name}});
  }
}

}  // namespace aw::runtime
