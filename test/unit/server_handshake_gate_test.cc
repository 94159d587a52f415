#include <gtest/gtest.h>

#include <vector>

#include "server/handshake_gate.h"

namespace aw::server {
namespace {

TEST(HandshakeGate, GrantsUpToTheLimitThenQueuesInArrivalOrder) {
  HandshakeGate gate(2);
  std::vector<int> resumed;
  EXPECT_TRUE(gate.Enter([] { return true; }));
  EXPECT_TRUE(gate.Enter([] { return true; }));
  EXPECT_FALSE(gate.Enter([&] {
    resumed.push_back(3);
    return true;
  }));
  EXPECT_FALSE(gate.Enter([&] {
    resumed.push_back(4);
    return true;
  }));
  EXPECT_EQ(gate.Active(), 2u);
  EXPECT_EQ(gate.Waiting(), 2u);
  gate.Leave();  // the slot passes to the oldest waiter
  EXPECT_EQ(resumed, std::vector<int>{3});
  EXPECT_EQ(gate.Active(), 2u);
  gate.Leave();
  EXPECT_EQ(resumed, (std::vector<int>{3, 4}));
  EXPECT_EQ(gate.Waiting(), 0u);
  gate.Leave();
  gate.Leave();
  EXPECT_EQ(gate.Active(), 0u);
  gate.Leave();  // one Leave too many does not underflow
  EXPECT_EQ(gate.Active(), 0u);
  EXPECT_TRUE(gate.Enter([] { return true; }));
}

TEST(HandshakeGate, AWaiterThatIsGoneHandsTheSlotToTheNext) {
  HandshakeGate gate(1);
  int taken = 0;
  EXPECT_TRUE(gate.Enter([] { return true; }));
  EXPECT_FALSE(gate.Enter([] { return false; }));  // its connection closed meanwhile
  EXPECT_FALSE(gate.Enter([&] {
    ++taken;
    return true;
  }));
  gate.Leave();
  EXPECT_EQ(taken, 1);
  EXPECT_EQ(gate.Active(), 1u);
  EXPECT_FALSE(gate.Enter([] { return false; }));
  gate.Leave();  // the only waiter is gone: the slot is free
  EXPECT_EQ(gate.Active(), 0u);
}

TEST(HandshakeGate, ALimitOfZeroMeansOne) {
  HandshakeGate gate(0);
  EXPECT_TRUE(gate.Enter([] { return true; }));
  EXPECT_FALSE(gate.Enter([] { return true; }));
}

}  // namespace
}  // namespace aw::server
