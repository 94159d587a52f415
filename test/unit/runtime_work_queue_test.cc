// WorkQueueState row by row with explicit time, and WorkQueue with real threads (no timing
// assertions: only orderings and counts that hold on any machine).
#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "runtime/core/work_queue_state.h"
#include "runtime/work_queue.h"

namespace aw::runtime {
namespace {

using std::chrono::milliseconds;
const Clock::time_point T0 = Clock::time_point() + std::chrono::hours(1);

TEST(WorkQueueState, AddIsFifoAndDeduplicated) {
  WorkQueueState q;
  q.Add("a");
  q.Add("b");
  q.Add("a");
  EXPECT_EQ(q.Ready(), 2u);
  EXPECT_EQ(q.Pop(), "a");
  EXPECT_EQ(q.Pop(), "b");
  EXPECT_EQ(q.Pop(), std::nullopt);
}

TEST(WorkQueueState, OneItemInFlightPerKeyAndNoAddLost) {
  WorkQueueState q;
  q.Add("a");
  ASSERT_EQ(q.Pop(), "a");
  q.Add("a");  // while processing: dirty, not ready
  EXPECT_EQ(q.Ready(), 0u);
  EXPECT_EQ(q.Pop(), std::nullopt);
  q.Add("a");  // still one re-queue
  q.Done("a");
  EXPECT_EQ(q.Ready(), 1u);
  EXPECT_EQ(q.Pop(), "a");
  q.Done("a");
  EXPECT_EQ(q.Ready(), 0u);
  EXPECT_EQ(q.Processing(), 0u);
}

TEST(WorkQueueState, ClearStartsOverAfterShutDown) {
  WorkQueueState q;
  q.Add("a");
  q.AddAfter("b", T0 + milliseconds(10));
  q.AddRateLimited("c", T0);
  ASSERT_EQ(q.Pop(), "a");
  q.Add("a");  // dirty while processing
  q.ShutDown();
  q.Clear();
  EXPECT_FALSE(q.ShuttingDown());
  EXPECT_EQ(q.Ready(), 0u);
  EXPECT_EQ(q.Delayed(), 0u);
  EXPECT_EQ(q.Processing(), 0u);
  EXPECT_EQ(q.Retries("c"), 0);
  q.Done("a");  // from before the Clear: not queued again
  EXPECT_EQ(q.Ready(), 0u);
  q.Add("d");
  EXPECT_EQ(q.Pop(), "d");
}

TEST(WorkQueueState, DoneOfAKeyNotProcessingIsIgnored) {
  WorkQueueState q;
  q.Done("x");
  q.Add("x");
  q.Done("x");  // queued, not processing: stays queued once
  EXPECT_EQ(q.Ready(), 1u);
}

TEST(WorkQueueState, AddAfterBecomesReadyAtItsDueTime) {
  WorkQueueState q;
  q.AddAfter("a", T0 + milliseconds(100));
  q.AddAfter("b", T0 + milliseconds(50));
  EXPECT_EQ(q.Delayed(), 2u);
  EXPECT_EQ(q.NextDue(), T0 + milliseconds(50));
  q.PromoteDue(T0 + milliseconds(49));
  EXPECT_EQ(q.Pop(), std::nullopt);
  q.PromoteDue(T0 + milliseconds(100));
  EXPECT_EQ(q.Pop(), "b");
  EXPECT_EQ(q.Pop(), "a");
  EXPECT_EQ(q.NextDue(), std::nullopt);
}

TEST(WorkQueueState, EarlierDueTimeWinsAndAddSupersedes) {
  WorkQueueState q;
  q.AddAfter("a", T0 + milliseconds(100));
  q.AddAfter("a", T0 + milliseconds(500));  // later: ignored
  EXPECT_EQ(q.NextDue(), T0 + milliseconds(100));
  q.AddAfter("a", T0 + milliseconds(10));  // earlier: replaces
  EXPECT_EQ(q.NextDue(), T0 + milliseconds(10));
  EXPECT_EQ(q.Delayed(), 1u);
  q.Add("a");  // ready now; the delayed entry is gone
  EXPECT_EQ(q.Delayed(), 0u);
  EXPECT_EQ(q.Pop(), "a");
  q.PromoteDue(T0 + milliseconds(1000));
  EXPECT_EQ(q.Pop(), std::nullopt);
}

TEST(WorkQueueState, AddAfterOfAReadyKeyIsANoOp) {
  WorkQueueState q;
  q.Add("a");
  q.AddAfter("a", T0);
  EXPECT_EQ(q.Delayed(), 0u);
  EXPECT_EQ(q.Ready(), 1u);
}

TEST(WorkQueueState, DelayedKeyDueWhileProcessingIsRequeuedByDone) {
  WorkQueueState q;
  q.Add("a");
  ASSERT_EQ(q.Pop(), "a");
  q.AddAfter("a", T0);
  q.PromoteDue(T0);
  EXPECT_EQ(q.Pop(), std::nullopt);
  q.Done("a");
  EXPECT_EQ(q.Pop(), "a");
}

TEST(WorkQueueState, RateLimitedBackoffDoublesPerKeyUntilForget) {
  WorkQueueState q(RateLimit{milliseconds(100), milliseconds(1000)});
  EXPECT_EQ(q.AddRateLimited("a", T0), milliseconds(100));
  q.PromoteDue(T0 + milliseconds(100));
  ASSERT_EQ(q.Pop(), "a");
  q.Done("a");
  EXPECT_EQ(q.AddRateLimited("a", T0), milliseconds(200));
  q.PromoteDue(T0 + milliseconds(200));
  ASSERT_EQ(q.Pop(), "a");
  q.Done("a");
  EXPECT_EQ(q.AddRateLimited("a", T0), milliseconds(400));
  q.PromoteDue(T0 + milliseconds(400));
  ASSERT_EQ(q.Pop(), "a");
  q.Done("a");
  EXPECT_EQ(q.AddRateLimited("a", T0), milliseconds(800));
  q.PromoteDue(T0 + milliseconds(800));
  ASSERT_EQ(q.Pop(), "a");
  q.Done("a");
  EXPECT_EQ(q.AddRateLimited("a", T0), milliseconds(1000));  // capped
  EXPECT_EQ(q.Retries("a"), 5);
  EXPECT_EQ(q.AddRateLimited("b", T0), milliseconds(100));  // per key
  q.Forget("a");
  EXPECT_EQ(q.Retries("a"), 0);
}

TEST(WorkQueueState, ShutDownStopsPopAndAdds) {
  WorkQueueState q;
  q.Add("a");
  q.ShutDown();
  EXPECT_EQ(q.Pop(), std::nullopt);
  q.Add("b");
  q.AddAfter("c", T0);
  EXPECT_EQ(q.Delayed(), 0u);
}

TEST(WorkQueue, WorkersNeverProcessOneKeyTwiceAtOnce) {
  WorkQueue q;
  std::atomic<int> in_flight_a{0}, max_in_flight_a{0}, processed{0};
  std::vector<std::jthread> workers;
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&](std::stop_token stop) {
      while (auto key = q.Get(stop)) {
        if (*key == "a") {
          int now = ++in_flight_a;
          int prev = max_in_flight_a.load();
          while (now > prev && !max_in_flight_a.compare_exchange_weak(prev, now)) {
          }
          std::this_thread::yield();
          --in_flight_a;
        }
        ++processed;
        q.Done(*key);
      }
    });
  }
  for (int i = 0; i < 2000; ++i) {
    q.Add("a");
    std::string key = "k";  // not "k" + std::string&&: a false gcc 12 -O3 -Wrestrict
    key += std::to_string(i % 50);
    q.Add(key);
  }
  // Every add is either merged or processed; wait until the queue is idle.
  while (q.Ready() > 0) std::this_thread::yield();
  q.ShutDown();
  workers.clear();  // joins
  EXPECT_EQ(max_in_flight_a.load(), 1);
  EXPECT_GE(processed.load(), 51);
}

TEST(WorkQueue, DelayedKeyWakesABlockedWorker) {
  WorkQueue q;
  std::optional<std::string> got;
  std::jthread worker([&](std::stop_token stop) { got = q.Get(stop); });
  q.AddAfter("later", std::chrono::milliseconds(20));
  worker.join();
  EXPECT_EQ(got, "later");
}

// The worker is already asleep (with no due time, then with a later one) when the delayed key
// arrives: the add must wake it to re-read the due times. Before the fix it slept on, forever in
// the first case and for an hour in the second.
TEST(WorkQueue, DelayedKeyWakesAWorkerAlreadyAsleep) {
  WorkQueue q;
  std::optional<std::string> got;
  std::jthread worker([&](std::stop_token stop) { got = q.Get(stop); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  q.AddAfter("later", std::chrono::milliseconds(10));
  worker.join();
  EXPECT_EQ(got, "later");
}

TEST(WorkQueue, EarlierDelayedKeyWakesAWorkerSleepingForALaterOne) {
  WorkQueue q;
  q.AddAfter("in-an-hour", std::chrono::hours(1));
  std::optional<std::string> got;
  std::jthread worker([&](std::stop_token stop) { got = q.Get(stop); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  q.AddAfter("soon", std::chrono::milliseconds(10));
  worker.join();
  EXPECT_EQ(got, "soon");
}

TEST(WorkQueue, StopTokenAndShutDownReleaseGet) {
  WorkQueue q;
  std::optional<std::string> got = "unset";
  std::jthread worker([&](std::stop_token stop) { got = q.Get(stop); });
  worker.request_stop();
  worker.join();
  EXPECT_EQ(got, std::nullopt);
  std::jthread worker2([&](std::stop_token stop) { got = q.Get(stop); });
  q.ShutDown();
  worker2.join();
  EXPECT_EQ(got, std::nullopt);
}

}  // namespace
}  // namespace aw::runtime
