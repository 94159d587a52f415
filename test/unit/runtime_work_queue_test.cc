// WorkQueueState (the resolver's work queue) row by row with explicit time.
#include <gtest/gtest.h>

#include "runtime/core/work_queue_state.h"

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

}  // namespace
}  // namespace aw::runtime
