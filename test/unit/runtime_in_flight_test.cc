// runtime::InFlightLimit: at most N operations in flight, the others first in, first out; a
// release hands the slot on; WaitIdle; operations that end at once cost no stack.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "runtime/in_flight.h"

namespace aw::runtime {
namespace {

TEST(InFlightLimit, AtMostLimitInFlightTheRestInOrder) {
  InFlightLimit limit(2);
  std::vector<InFlightLimit::Release> releases;
  std::vector<int> started;
  for (int i = 0; i < 5; ++i) {
    limit.Submit([&, i](InFlightLimit::Release r) {
      started.push_back(i);
      releases.push_back(std::move(r));
    });
  }
  EXPECT_EQ(started, (std::vector<int>{0, 1}));
  EXPECT_EQ(limit.InFlight(), 2u);
  EXPECT_EQ(limit.Waiting(), 3u);
  releases[1]();
  releases[1]();  // a second call frees nothing more
  EXPECT_EQ(started, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(limit.InFlight(), 2u);
  EXPECT_EQ(limit.Waiting(), 2u);
  releases[0]();
  releases[2]();
  EXPECT_EQ(started, (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(limit.Waiting(), 0u);
  releases[3]();
  releases[4]();
  EXPECT_EQ(limit.InFlight(), 0u);
  limit.WaitIdle();
}

TEST(InFlightLimit, WaitIdleReturnsOnceTheLastOperationEndsOnAnotherThread) {
  InFlightLimit limit(1);
  InFlightLimit::Release held;
  std::atomic<int> ran{0};
  limit.Submit([&](InFlightLimit::Release r) {
    ++ran;
    held = std::move(r);
  });
  limit.Submit([&](InFlightLimit::Release r) {
    ++ran;
    r();
  });
  EXPECT_EQ(ran.load(), 1);
  std::atomic<bool> idle{false};
  std::thread waiter([&] {
    limit.WaitIdle();
    idle = true;
  });
  // Nothing can make WaitIdle return while the first operation holds its slot.
  EXPECT_FALSE(idle.load());
  std::thread releaser([&] { held(); });  // the second runs on this thread, then all is idle
  releaser.join();
  waiter.join();
  EXPECT_TRUE(idle.load());
  EXPECT_EQ(ran.load(), 2);
}

TEST(InFlightLimit, OperationsEndingAtOnceCostNoStack) {
  InFlightLimit limit(1);
  InFlightLimit::Release first;
  int ran = 0;
  limit.Submit([&](InFlightLimit::Release r) { first = std::move(r); });
  for (int i = 0; i < 200000; ++i) {
    limit.Submit([&](InFlightLimit::Release r) {
      ++ran;
      r();  // ends at once: the next waiting one runs without recursing
    });
  }
  EXPECT_EQ(limit.Waiting(), 200000u);
  first();
  EXPECT_EQ(ran, 200000);
  EXPECT_EQ(limit.InFlight(), 0u);
}

}  // namespace
}  // namespace aw::runtime
