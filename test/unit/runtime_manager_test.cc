// Manager: group order, readiness gating, reverse stop order, failures, leader-only runnables,
// the stop deadline. Orders are checked, never durations.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/manager.h"
#include "util/status.h"

namespace aw::runtime {
namespace {

using namespace std::chrono_literals;

// Records start/stop events in order.
struct Journal {
  std::mutex mu;
  std::vector<std::string> events;
  void Add(std::string e) {
    std::lock_guard l(mu);
    events.push_back(std::move(e));
  }
  std::vector<std::string> Get() {
    std::lock_guard l(mu);
    return events;
  }
  size_t Index(const std::string& e) {
    auto v = Get();
    return static_cast<size_t>(std::find(v.begin(), v.end(), e) - v.begin());
  }
};

// A runnable that becomes ready at once and stops when asked.
std::unique_ptr<Runnable> Component(std::string name, Journal& j) {
  return MakeRunnable(name, [name, &j](RunContext& ctx) {
    j.Add("start " + name);
    ctx.Ready();
    std::mutex m;
    std::condition_variable_any cv;
    std::unique_lock l(m);
    cv.wait(l, ctx.stop(), [] { return false; });
    j.Add("stop " + name);
    return Status::Ok();
  });
}

// Waits (at most 10 s: then the test fails) until `e` is in the journal.
void WaitFor(Journal& j, const std::string& e) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (j.Index(e) == j.Get().size()) {
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "no \"" << e << "\" within 10 s";
      return;
    }
    std::this_thread::sleep_for(1ms);
  }
}

TEST(Status, OkAndErrors) {
  EXPECT_TRUE(Status().ok());
  EXPECT_EQ(Status::Ok().ToString(), "OK");
  Status e = Status::IOError("bind 0.0.0.0:8443: Address already in use");
  EXPECT_FALSE(e.ok());
  EXPECT_EQ(e.code(), Status::Code::kIOError);
  EXPECT_EQ(e.ToString(), "I/O error: bind 0.0.0.0:8443: Address already in use");
  EXPECT_EQ(e.Annotate("admission server").message(),
            "admission server: bind 0.0.0.0:8443: Address already in use");
  EXPECT_TRUE(Status::Ok().Annotate("x").ok());
  EXPECT_EQ(Status::Conflict("a"), Status::Conflict("a"));
  EXPECT_FALSE(Status::Conflict("a") == Status::NotFound("a"));
}

TEST(Manager, GroupsStartInOrderAndStopInReverse) {
  Journal j;
  Manager m({"servers", "caches", "controllers"}, 5s);
  ASSERT_TRUE(m.Add(Component("controller", j), {"controllers"}).ok());
  ASSERT_TRUE(m.Add(Component("http", j), {"servers"}).ok());
  // A cache that is ready only after a while: the controllers wait for it.
  ASSERT_TRUE(m.Add(MakeRunnable("cache",
                                 [&j](RunContext& ctx) {
                                   j.Add("start cache");
                                   std::this_thread::sleep_for(20ms);
                                   j.Add("cache synced");
                                   ctx.Ready();
                                   std::mutex mu;
                                   std::condition_variable_any cv;
                                   std::unique_lock l(mu);
                                   cv.wait(l, ctx.stop(), [] { return false; });
                                   j.Add("stop cache");
                                   return Status::Ok();
                                 }),
                    {"caches"})
                  .ok());
  std::jthread runner;
  Status result;
  runner = std::jthread([&](std::stop_token st) { result = m.Run(st); });
  WaitFor(j, "start controller");
  runner.request_stop();
  runner.join();
  EXPECT_TRUE(result.ok()) << result.ToString();
  EXPECT_LT(j.Index("start http"), j.Index("start cache"));
  EXPECT_LT(j.Index("cache synced"), j.Index("start controller"));
  EXPECT_LT(j.Index("stop controller"), j.Index("stop cache"));
  EXPECT_LT(j.Index("stop cache"), j.Index("stop http"));
}

TEST(Manager, AFailureStopsEverythingAndIsReturned) {
  Journal j;
  Manager m({"servers", "controllers"}, 5s);
  ASSERT_TRUE(m.Add(Component("http", j), {"servers"}).ok());
  ASSERT_TRUE(m.Add(MakeRunnable("broken",
                                 [](RunContext& ctx) {
                                   ctx.Ready();
                                   return Status::IOError("watch: connection refused");
                                 }),
                    {"controllers"})
                  .ok());
  Status result = m.Run(std::stop_token());
  EXPECT_FALSE(result.ok());
  EXPECT_NE(result.message().find("broken"), std::string::npos) << result.ToString();
  EXPECT_NE(result.message().find("connection refused"), std::string::npos);
  EXPECT_LT(j.Index("stop http"), j.Get().size());
}

TEST(Manager, ReturningWithoutBeingAskedIsAFailure) {
  Manager m({"g"}, 5s);
  ASSERT_TRUE(m.Add(MakeRunnable("quitter",
                                 [](RunContext& ctx) {
                                   ctx.Ready();
                                   return Status::Ok();
                                 }),
                    {"g"})
                  .ok());
  Status result = m.Run(std::stop_token());
  EXPECT_EQ(result.code(), Status::Code::kInternal);
  EXPECT_NE(result.message().find("quitter"), std::string::npos);
}

TEST(Manager, LeaderRunnablesRunOnlyWhileLeading) {
  Journal j;
  Manager m({"servers"}, 5s);
  ASSERT_TRUE(m.Add(Component("http", j), {"servers"}).ok());
  ASSERT_TRUE(m.Add(Component("resolver", j), {"servers", true}).ok());
  Status result;
  std::jthread runner([&](std::stop_token st) { result = m.Run(st); });
  WaitFor(j, "start http");
  EXPECT_EQ(j.Index("start resolver"), j.Get().size());  // not leading: not started
  m.SetLeader(true);
  WaitFor(j, "start resolver");
  m.SetLeader(false);  // returns at once; Run's thread stops it and waits for it
  WaitFor(j, "stop resolver");
  EXPECT_LT(j.Index("stop resolver"), j.Get().size());
  m.SetLeader(true);  // runs again
  auto starts = [&j] {
    auto ev = j.Get();
    return std::count(ev.begin(), ev.end(), std::string("start resolver"));
  };
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (starts() < 2 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  ASSERT_EQ(starts(), 2);
  runner.request_stop();
  runner.join();
  EXPECT_TRUE(result.ok()) << result.ToString();
  auto ev = j.Get();
  // The leader runnable stops before the group it was added to.
  EXPECT_EQ(ev.back(), "stop http");
}

// SetLeader returns at once (an elector calls it from an I/O thread), and a loss followed at
// once by a gain is applied in order: the leader runnable stops, then runs again.
TEST(Manager, ALossThenAGainIsAppliedInOrder) {
  Journal j;
  Manager m({"servers"}, 5s);
  ASSERT_TRUE(m.Add(Component("http", j), {"servers"}).ok());
  ASSERT_TRUE(m.Add(Component("resolver", j), {"servers", true}).ok());
  Status result;
  std::jthread runner([&](std::stop_token st) { result = m.Run(st); });
  m.SetLeader(true);
  WaitFor(j, "start resolver");
  m.SetLeader(false);
  m.SetLeader(true);
  auto count = [&j](const std::string& e) {
    auto ev = j.Get();
    return std::count(ev.begin(), ev.end(), e);
  };
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (count("start resolver") < 2 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  ASSERT_EQ(count("start resolver"), 2);
  EXPECT_EQ(count("stop resolver"), 1);
  auto ev = j.Get();
  EXPECT_LT(std::find(ev.begin(), ev.end(), "stop resolver") - ev.begin(),
            std::find(ev.rbegin(), ev.rend(), "start resolver").base() - ev.begin() - 1);
  runner.request_stop();
  runner.join();
  EXPECT_TRUE(result.ok()) << result.ToString();
}

TEST(Manager, LeadershipBeforeTheGroupsAreUpWaitsForThem) {
  Journal j;
  Manager m({"servers"}, 5s);
  ASSERT_TRUE(m.Add(Component("http", j), {"servers"}).ok());
  ASSERT_TRUE(m.Add(Component("resolver", j), {"servers", true}).ok());
  m.SetLeader(true);
  Status result;
  std::jthread runner([&](std::stop_token st) { result = m.Run(st); });
  WaitFor(j, "start resolver");
  EXPECT_LT(j.Index("start http"), j.Index("start resolver"));
  runner.request_stop();
  runner.join();
  EXPECT_TRUE(result.ok()) << result.ToString();
}

TEST(Manager, StopDeadlineNamesWhatIsStillRunning) {
  std::atomic<bool> release{false};
  Manager m({"g"}, 30ms);
  ASSERT_TRUE(m.Add(MakeRunnable("stubborn",
                                 [&release](RunContext& ctx) {
                                   ctx.Ready();
                                   while (!release.load()) std::this_thread::sleep_for(1ms);
                                   return Status::Ok();
                                 }),
                    {"g"})
                  .ok());
  std::stop_source src;
  Status result;
  std::jthread runner([&] { result = m.Run(src.get_token()); });
  std::this_thread::sleep_for(5ms);
  src.request_stop();
  runner.join();
  EXPECT_EQ(result.code(), Status::Code::kDeadlineExceeded) << result.ToString();
  EXPECT_NE(result.message().find("stubborn"), std::string::npos);
  release = true;  // lets the destructor join
}

// A service that records its Start/Stop and the thread each ran on.
struct ServiceProbe {
  Journal& j;
  std::thread::id start_thread, stop_thread;
  std::unique_ptr<Service> Make(std::string name, Status start = Status::Ok(),
                                Status stop = Status::Ok()) {
    return MakeService(
        name,
        [this, name, start] {
          start_thread = std::this_thread::get_id();
          j.Add("start " + name);
          return start;
        },
        [this, name, stop](std::chrono::steady_clock::time_point) {
          stop_thread = std::this_thread::get_id();
          j.Add("stop " + name);
          return stop;
        });
  }
};

TEST(Manager, ServicesRunOnTheManagersThreadInGroupOrder) {
  Journal j;
  ServiceProbe probe{j};
  Manager m({"servers", "caches", "controllers"}, 5s);
  ASSERT_TRUE(m.Add(probe.Make("http"), {"servers"}).ok());
  ASSERT_TRUE(m.Add(Component("cache", j), {"caches"}).ok());
  ASSERT_TRUE(m.Add(Component("controller", j), {"controllers"}).ok());
  std::thread::id run_thread;
  Status result;
  std::jthread runner([&](std::stop_token st) {
    run_thread = std::this_thread::get_id();
    result = m.Run(st);
  });
  WaitFor(j, "start controller");
  runner.request_stop();
  runner.join();
  EXPECT_TRUE(result.ok()) << result.ToString();
  EXPECT_EQ(probe.start_thread, run_thread);  // no thread of its own
  EXPECT_EQ(probe.stop_thread, run_thread);
  EXPECT_LT(j.Index("start http"), j.Index("start cache"));
  EXPECT_LT(j.Index("stop cache"), j.Index("stop http"));
  EXPECT_LT(j.Index("stop http"), j.Get().size());
}

TEST(Manager, AServiceThatCannotStartFailsTheRunAndIsNotStopped) {
  Journal j;
  ServiceProbe probe{j};
  Manager m({"servers", "controllers"}, 5s);
  ASSERT_TRUE(m.Add(Component("cache", j), {"servers"}).ok());
  ASSERT_TRUE(
      m.Add(probe.Make("http", Status::IOError("bind :8443: Address already in use")), {"servers"})
          .ok());
  ASSERT_TRUE(m.Add(Component("controller", j), {"controllers"}).ok());
  Status result = m.Run(std::stop_token());
  EXPECT_FALSE(result.ok());
  EXPECT_NE(result.message().find("http"), std::string::npos) << result.ToString();
  EXPECT_NE(result.message().find("Address already in use"), std::string::npos);
  EXPECT_EQ(j.Index("start controller"), j.Get().size());  // the next group never started
  EXPECT_EQ(j.Index("stop http"), j.Get().size());
}

TEST(Manager, AServiceThatCannotStopInTimeIsNamed) {
  Journal j;
  ServiceProbe probe{j};
  Manager m({"servers"}, 5s);
  ASSERT_TRUE(
      m.Add(probe.Make("drain", Status::Ok(), Status::DeadlineExceeded("2 requests in progress")),
            {"servers"})
          .ok());
  std::stop_source stop;
  Status result;
  std::jthread runner([&] { result = m.Run(stop.get_token()); });
  WaitFor(j, "start drain");
  stop.request_stop();
  runner.join();
  EXPECT_EQ(result.code(), Status::Code::kDeadlineExceeded);
  EXPECT_NE(result.message().find("drain (2 requests in progress)"), std::string::npos)
      << result.ToString();
}

TEST(Manager, UnknownGroupAndLateAddAreRefused) {
  Manager m({"g"}, 1s);
  Status s = m.Add(MakeRunnable("x", [](RunContext&) { return Status::Ok(); }), {"nope"});
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("nope"), std::string::npos);
}

}  // namespace
}  // namespace aw::runtime
