// WaiterRegistry: woken by informer events, by its deadline, or by Stop(); each waiter completes
// exactly once.
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "gateway/io/waiters.h"
#include "policy/gameserver_stream.h"
#include "runtime/dispatcher.h"
#include "runtime/io_thread.h"

namespace aw::gateway {
namespace {

using namespace std::chrono_literals;
constexpr const char* kOurs = "2026-01-02T03:04:05.5Z";

kube::ObjectPtr Object(const std::string& name, const std::string& state,
                       const std::string& outcome = "", const std::string& last = kOurs,
                       const std::string& ns = "ns") {
  std::string ann = std::string(R"({"agones.dev/last-allocated":")") + last +
                    R"(","allocating.agones.dev/allocation":")" + last + R"(")";
  if (!outcome.empty()) {
    ann += R"(,"allocating.agones.dev/outcome":")" + outcome +
           R"(","allocating.agones.dev/confirmed":")" + last + R"(")";
  }
  ann += "}";
  const std::string json = R"({"metadata":{"name":")" + name + R"(","namespace":")" + ns +
                           R"(","annotations":)" + ann + R"(},"status":{"state":")" + state +
                           R"("}})";
  // The cache's form: the compact record decoded from the object's text.
  auto o = std::make_shared<kube::CachedObject>();
  EXPECT_TRUE(policy::DecodeGameServer(json, o.get()).ok()) << json;
  return o;
}

struct Result {
  std::mutex mu;
  std::condition_variable cv;
  int calls = 0;
  Decision d;
  kube::ObjectPtr obj;
  std::string ns;
  WaiterRegistry::Done Callback() {
    return [this](const Decision& dd, const kube::ObjectPtr& o, const std::string& n) {
      std::lock_guard lock(mu);
      ++calls;
      d = dd;
      obj = o;
      ns = n;
      cv.notify_all();
    };
  }
  bool WaitCalled(std::chrono::milliseconds t) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, t, [this] { return calls > 0; });
  }
};

class WaitersTest : public ::testing::Test {
 protected:
  void SetUp() override { reg_.Start(); }
  void TearDown() override { reg_.Stop(); }
  std::mutex cache_mu_;
  std::map<std::string, kube::ObjectPtr> cache_;
  WaiterRegistry reg_{[this](const std::string& name) {
    std::lock_guard lock(cache_mu_);
    std::vector<kube::ObjectPtr> out;
    for (const auto& [key, obj] : cache_) {
      if (obj->name == name) out.push_back(obj);
    }
    return out;
  }};
  std::chrono::steady_clock::time_point In(std::chrono::milliseconds d) {
    return std::chrono::steady_clock::now() + d;
  }
};

TEST_F(WaitersTest, ConfirmedEventAnswers) {
  Result r;
  reg_.Wait("ns", "gs", kOurs, In(10s), r.Callback());
  EXPECT_EQ(reg_.Waiting(), 1u);
  reg_.OnAdd(Object("gs", "Allocating"));
  EXPECT_EQ(reg_.Waiting(), 1u);
  reg_.OnAdd(Object("other", "Allocated", "Confirmed"));
  EXPECT_EQ(reg_.Waiting(), 1u);
  reg_.OnAdd(Object("gs", "Allocated", "Confirmed"));
  ASSERT_TRUE(r.WaitCalled(1s));
  EXPECT_EQ(r.d.verdict, Verdict::kAnswer);
  ASSERT_TRUE(r.obj);
  EXPECT_EQ(r.obj->name, "gs");
  EXPECT_EQ(reg_.Waiting(), 0u);
  reg_.OnAdd(Object("gs", "Unhealthy"));  // after the answer: nothing more
  EXPECT_EQ(r.calls, 1);
}

TEST_F(WaitersTest, CacheAlreadyDecidedAnswersAtOnce) {
  {
    std::lock_guard lock(cache_mu_);
    cache_["ns/gs"] = Object("gs", "Allocated", "Confirmed");
  }
  Result r;
  reg_.Wait("ns", "gs", kOurs, In(10s), r.Callback());
  ASSERT_TRUE(r.WaitCalled(1s));
  EXPECT_EQ(r.d.verdict, Verdict::kAnswer);
  EXPECT_EQ(reg_.Waiting(), 0u);
}

TEST_F(WaitersTest, DeleteAndUnhealthyRetry) {
  Result a, b;
  reg_.Wait("ns", "gs-a", kOurs, In(10s), a.Callback());
  reg_.Wait("ns", "gs-b", kOurs, In(10s), b.Callback());
  reg_.OnDelete(Object("gs-a", "Allocating"));
  reg_.OnAdd(Object("gs-b", "Unhealthy", "TimedOut"));
  ASSERT_TRUE(a.WaitCalled(1s));
  ASSERT_TRUE(b.WaitCalled(1s));
  EXPECT_EQ(a.d.verdict, Verdict::kRetry);
  EXPECT_EQ(a.d.reason, "deleted");
  EXPECT_EQ(b.d.verdict, Verdict::kRetry);
  EXPECT_NE(b.d.reason.find("timed out"), std::string::npos);
}

TEST_F(WaitersTest, DeadlineFires) {
  Result r;
  reg_.Wait("ns", "gs", kOurs, In(50ms), r.Callback());
  ASSERT_TRUE(r.WaitCalled(5s));
  EXPECT_EQ(r.d.verdict, Verdict::kWait);
  EXPECT_EQ(r.d.reason, "deadline");
  EXPECT_EQ(reg_.Waiting(), 0u);
  reg_.OnAdd(Object("gs", "Allocated", "Confirmed"));
  EXPECT_EQ(r.calls, 1);
}

TEST_F(WaitersTest, ManyWaitersOnOneKeyAndStop) {
  Result rs[5];
  for (auto& r : rs) reg_.Wait("ns", "gs", kOurs, In(60s), r.Callback());
  EXPECT_EQ(reg_.Waiting(), 5u);
  reg_.Stop();
  for (auto& r : rs) {
    ASSERT_TRUE(r.WaitCalled(1s));
    EXPECT_EQ(r.d.reason, "stopped");
  }
  Result late;
  reg_.Wait("ns", "gs", kOurs, In(60s), late.Callback());
  ASSERT_TRUE(late.WaitCalled(1s));
  EXPECT_EQ(late.d.reason, "stopped");
}

// Issue 23: the allocator may put the server in another namespace than the request's (a
// multi-cluster policy allocates in the policy's namespace): the copy carrying this allocation
// binds the waiter there; copies of same-named servers elsewhere are ignored.
TEST_F(WaitersTest, FindsTheServerInTheNamespaceTheAllocatorChose) {
  Result r;
  reg_.Wait("", "gs", kOurs, In(10s), r.Callback());  // no namespace in the request
  // A same-named server in another namespace, from another allocation: ignored.
  reg_.OnAdd(Object("gs", "Unhealthy", "TimedOut", "2027-01-01T00:00:00Z", "elsewhere"));
  reg_.OnDelete(Object("gs", "Allocating", "", "2025-01-01T00:00:00Z", "third"));
  EXPECT_EQ(reg_.Waiting(), 1u);
  reg_.OnAdd(Object("gs", "Allocating", "", kOurs, "policy-ns"));  // binds to policy-ns
  EXPECT_EQ(reg_.Waiting(), 1u);
  reg_.OnAdd(Object("gs", "Unhealthy", "TimedOut", kOurs, "other"));  // not the bound one
  EXPECT_EQ(reg_.Waiting(), 1u);
  reg_.OnAdd(Object("gs", "Allocated", "Confirmed", kOurs, "policy-ns"));
  ASSERT_TRUE(r.WaitCalled(1s));
  EXPECT_EQ(r.d.verdict, Verdict::kAnswer);
  EXPECT_EQ(r.ns, "policy-ns");
  EXPECT_EQ(r.obj->namespace_, "policy-ns");
}

TEST_F(WaitersTest, CacheInAnotherNamespaceAnswersAtOnce) {
  {
    std::lock_guard lock(cache_mu_);
    cache_["ns/gs"] = Object("gs", "Allocating", "", "2025-01-01T00:00:00Z", "ns");
    cache_["team-b/gs"] = Object("gs", "Allocated", "Confirmed", kOurs, "team-b");
  }
  Result r;
  reg_.Wait("ns", "gs", kOurs, In(10s), r.Callback());
  ASSERT_TRUE(r.WaitCalled(1s));
  EXPECT_EQ(r.d.verdict, Verdict::kAnswer);
  EXPECT_EQ(r.ns, "team-b");
}

TEST_F(WaitersTest, RequestNamespaceStillDecidesBeforeBinding) {
  // A newer allocation of the server in the request's namespace (the common case) is a loss.
  Result r;
  reg_.Wait("ns", "gs", kOurs, In(10s), r.Callback());
  reg_.OnAdd(Object("gs", "Allocating", "", "2027-01-01T00:00:00Z", "ns"));
  ASSERT_TRUE(r.WaitCalled(1s));
  EXPECT_EQ(r.d.verdict, Verdict::kRetry);
  EXPECT_EQ(r.ns, "ns");
}

TEST_F(WaitersTest, CancelCompletesOnceWithTheReason) {
  Result r;
  auto ticket = reg_.Wait("ns", "gs", kOurs, In(10s), r.Callback());
  reg_.Cancel(ticket, "abandoned");
  ASSERT_TRUE(r.WaitCalled(1s));
  EXPECT_EQ(r.d.verdict, Verdict::kWait);
  EXPECT_EQ(r.d.reason, "abandoned");
  EXPECT_EQ(reg_.Waiting(), 0u);
  reg_.Cancel(ticket, "again");
  reg_.OnAdd(Object("gs", "Allocated", "Confirmed"));
  EXPECT_EQ(r.calls, 1);
  EXPECT_EQ(r.d.reason, "abandoned");
}

}  // namespace
}  // namespace aw::gateway

namespace aw::gateway {
namespace {

// Issue 35: the timer handlers hold the registry's state, and a waiter's timer keeps its
// io_context: a waiter kept (through its ticket) after the registry is gone, with its timer
// armed, is destroyed without touching freed memory (run under ASan or TSan).
TEST(WaitersLifetime, AWaiterOutlivesItsRegistry) {
  std::shared_ptr<WaiterRegistry::Waiter> kept;
  Result r;
  {
    WaiterRegistry reg(nullptr);
    reg.Start();
    WaiterRegistry::Ticket t =
        reg.Wait("ns", "gs", kOurs, std::chrono::steady_clock::now() + 1h, r.Callback());
    kept = t.lock();
    ASSERT_NE(kept, nullptr);
    std::this_thread::sleep_for(20ms);  // the timer armed on the timer thread
  }
  ASSERT_TRUE(r.WaitCalled(1s));
  EXPECT_EQ(r.d.reason, "stopped");
  kept.reset();  // the waiter's timer goes after its io_context's registry did
}

// A Wait() racing Stop() (registered just before Stop() looked) must not keep the timer thread,
// and with it Stop(), waiting for the waiter's deadline: its timer is never armed once finished.
TEST(WaitersLifetime, StopRacingWaitReturnsPromptly) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 100; ++i) {
    WaiterRegistry reg(nullptr);
    reg.Start();
    std::atomic<int> done{0};
    std::thread waiter([&] {
      reg.Wait("ns", "gs", kOurs, std::chrono::steady_clock::now() + 1h,
               [&](const Decision&, const kube::ObjectPtr&, const std::string&) { ++done; });
    });
    reg.Stop();
    waiter.join();
    EXPECT_EQ(done.load(), 1);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);
}

// On the process's dispatcher (an executor given to the registry): the deadline fires there, Stop()
// completes the others with "stopped", and no timer of the registry is left on the dispatcher.
TEST(WaitersOnDispatcher, DeadlinesRunOnTheGivenExecutorAndStopLeavesNoWork) {
  auto d = runtime::Dispatcher::Start("waiters-test");
  ASSERT_TRUE(d.ok());
  Result soon, later;
  std::atomic<bool> on_dispatcher{false};
  {
    WaiterRegistry reg(nullptr, (*d)->executor());
    reg.Start();  // nothing to start: no thread of its own
    reg.Wait("ns", "a", kOurs, std::chrono::steady_clock::now() + 20ms,
             [&on_dispatcher, ex = (*d)->executor(), cb = soon.Callback()](
                 const Decision& dd, const kube::ObjectPtr& o, const std::string& n) {
               on_dispatcher = runtime::RunningOn(ex);
               cb(dd, o, n);
             });
    reg.Wait("ns", "b", kOurs, std::chrono::steady_clock::now() + 1h, later.Callback());
    ASSERT_TRUE(soon.WaitCalled(5s));
    EXPECT_EQ(soon.d.reason, "deadline");
    EXPECT_TRUE(on_dispatcher.load());
    reg.Stop();
    ASSERT_TRUE(later.WaitCalled(1s));
    EXPECT_EQ(later.d.reason, "stopped");
  }
  // The hour-long timer was cancelled: the dispatcher runs out of work at once.
  EXPECT_TRUE((*d)->Stop(std::chrono::steady_clock::now() + 5s).ok());
}

// Stop() from a `done` on the timer thread would join the thread it runs on: it fails at once,
// naming the rule, instead of hanging or throwing from the join.
TEST(WaitersLifetimeDeathTest, StopOnTheTimerThreadFailsLoudly) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        WaiterRegistry reg(nullptr);
        reg.Start();
        reg.Wait(
            "ns", "gs", kOurs, std::chrono::steady_clock::now() + 10ms,
            [&reg](const Decision&, const kube::ObjectPtr&, const std::string&) { reg.Stop(); });
        std::this_thread::sleep_for(5s);
      },
      "WaiterRegistry::Stop called on its own I/O thread");
}

}  // namespace
}  // namespace aw::gateway
