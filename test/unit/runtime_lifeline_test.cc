// Lifeline (issue 35): a guarded callback reaches its component only while it is alive; the
// component's destruction waits for those running and fails loudly from inside one.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <thread>

#include "runtime/lifeline.h"

namespace aw::runtime {
namespace {

using namespace std::chrono_literals;

TEST(Lifeline, GuardedCallbackRunsOnlyWhileAlive) {
  auto life = std::make_unique<Lifeline>();
  int runs = 0;
  auto f = life->Guard([&runs](int n) { runs += n; });
  f(2);
  EXPECT_EQ(runs, 2);
  life.reset();  // the component goes; the callback, still held, must not reach it
  f(5);
  EXPECT_EQ(runs, 2);
}

TEST(Lifeline, ReentrantGuardsRun) {
  Lifeline life;
  int inner = 0;
  auto g = life.Guard([&inner] { ++inner; });
  auto f = life.Guard([&g] { g(); });
  f();
  EXPECT_EQ(inner, 1);
}

TEST(Lifeline, EndWaitsForTheCallbackRunning) {
  auto life = std::make_unique<Lifeline>();
  std::promise<void> entered, release;
  std::atomic<bool> finished{false};
  auto f = life->Guard([&] {
    entered.set_value();
    release.get_future().wait();
    finished = true;
  });
  std::thread t([&f] { f(); });
  entered.get_future().wait();
  std::thread ender([&] { life.reset(); });
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(finished.load());  // End() is still waiting for it
  release.set_value();
  ender.join();
  EXPECT_TRUE(finished.load());
  t.join();
}

TEST(LifelineDeathTest, EndFromInsideAGuardedCallbackFailsLoudly) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        auto life = std::make_unique<Lifeline>();
        auto f = life->Guard([&life] { life.reset(); });
        f();
      },
      "Lifeline::End .*called from inside one of its guarded callbacks");
}

}  // namespace
}  // namespace aw::runtime
