// runtime::Dispatcher: the process's one control dispatcher (runtime/dispatcher.h).
#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <future>
#include <memory>
#include <thread>

#include "runtime/dispatcher.h"
#include "runtime/io_thread.h"

namespace aw::runtime {
namespace {

namespace net = boost::asio;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

TEST(Dispatcher, RunsPostedWorkOnItsOwnThreadUntilStopped) {
  auto d = Dispatcher::Start("test");
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_TRUE((*d)->Running());
  std::promise<std::thread::id> ran;
  net::post((*d)->executor(), [&ran, ex = (*d)->executor()] {
    EXPECT_TRUE(RunningOn(ex));
    ran.set_value(std::this_thread::get_id());
  });
  auto f = ran.get_future();
  ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
  EXPECT_NE(f.get(), std::this_thread::get_id());
  EXPECT_FALSE(RunningOn((*d)->executor()));
  EXPECT_TRUE((*d)->Stop(Clock::now() + 5s).ok());
  EXPECT_FALSE((*d)->Running());
  EXPECT_TRUE((*d)->Stop(Clock::now() + 5s).ok());  // idempotent
}

TEST(Dispatcher, StopWaitsForTheWorkLeftToEnd) {
  auto d = Dispatcher::Start();
  ASSERT_TRUE(d.ok());
  std::atomic<bool> fired{false};
  auto timer = std::make_shared<net::steady_timer>((*d)->executor(), 100ms);
  timer->async_wait([timer, &fired](const boost::system::error_code& ec) {
    if (!ec) fired = true;
  });
  EXPECT_TRUE((*d)->Stop(Clock::now() + 5s).ok());
  EXPECT_TRUE(fired.load());  // the timer was work: Stop waited for it
}

TEST(Dispatcher, StopGivesUpAtItsDeadlineAndLeftWorkIsDestroyedUnrun) {
  auto d = Dispatcher::Start();
  ASSERT_TRUE(d.ok());
  std::atomic<bool> fired{false};
  auto alive = std::make_shared<int>(1);
  std::weak_ptr<int> watch = alive;
  {
    // A component that did not stop: its timer is an hour away.
    auto timer = std::make_shared<net::steady_timer>((*d)->executor(), 1h);
    timer->async_wait([timer, alive, &fired](const boost::system::error_code&) { fired = true; });
  }
  alive.reset();
  const auto start = Clock::now();
  const Status st = (*d)->Stop(Clock::now() + 200ms);
  EXPECT_EQ(st.code(), Status::Code::kDeadlineExceeded) << st.message();
  EXPECT_LT(Clock::now() - start, 5s);
  EXPECT_FALSE(watch.expired());  // still queued, unrun
  d->reset();                     // the io_context goes, and the handler with it
  EXPECT_TRUE(watch.expired());
  EXPECT_FALSE(fired.load());
}

TEST(Dispatcher, WorkPostedAfterStopNeverRunsAndIsFreedWithTheDispatcher) {
  auto d = Dispatcher::Start();
  ASSERT_TRUE(d.ok());
  const net::any_io_executor ex = (*d)->executor();
  ASSERT_TRUE((*d)->Stop(Clock::now() + 5s).ok());
  std::atomic<bool> ran{false};
  auto held = std::make_shared<int>(7);
  std::weak_ptr<int> watch = held;
  net::post(ex, [held, &ran] { ran = true; });
  held.reset();
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(ran.load());
  d->reset();
  EXPECT_TRUE(watch.expired());
  EXPECT_FALSE(ran.load());
}

TEST(Dispatcher, AnExceptionFromAHandlerIsLoggedAndTheLoopGoesOn) {
  auto d = Dispatcher::Start();
  ASSERT_TRUE(d.ok());
  net::post((*d)->executor(), [] { throw std::runtime_error("boom"); });
  std::promise<void> after;
  net::post((*d)->executor(), [&after] { after.set_value(); });
  EXPECT_EQ(after.get_future().wait_for(5s), std::future_status::ready);
  EXPECT_TRUE((*d)->Stop(Clock::now() + 5s).ok());
}

TEST(DispatcherDeathTest, StopOnItsOwnThreadFailsLoudly) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        auto d = Dispatcher::Start();
        Dispatcher* p = d->get();
        net::post(p->executor(), [p] { (void)p->Stop(Clock::now() + 1s); });
        std::this_thread::sleep_for(5s);
      },
      "Dispatcher::Stop called on its own I/O thread");
}

}  // namespace
}  // namespace aw::runtime
