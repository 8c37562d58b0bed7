#include "worker/exec/fencing.h"

#include <gtest/gtest.h>

namespace drover::worker {
namespace {

TEST(FencingPolicyTest, FencesAfterTtlMinusTwoHeartbeatsWithoutContact) {
  SimulatedClock clock;
  auto policy = FencingPolicy::Create(Seconds(30), Seconds(2), clock.Now());
  ASSERT_TRUE(policy.ok());
  EXPECT_EQ(policy->budget(), Seconds(26));
  clock.Advance(Seconds(26));
  EXPECT_FALSE(policy->ShouldFence(clock.Now()));  // exactly at the budget: still fine
  clock.Advance(Micros(1));
  EXPECT_TRUE(policy->ShouldFence(clock.Now()));
}

TEST(FencingPolicyTest, ContactPushesTheDeadline) {
  SimulatedClock clock;
  auto policy = FencingPolicy::Create(Seconds(30), Seconds(2), clock.Now());
  ASSERT_TRUE(policy.ok());
  for (int i = 0; i < 10; ++i) {
    clock.Advance(Seconds(20));
    EXPECT_FALSE(policy->ShouldFence(clock.Now()));
    policy->OnServerContact(clock.Now());
  }
  EXPECT_EQ(policy->deadline(), clock.Now() + Seconds(26));
  // A stale timestamp (reordered message) does not move the deadline back.
  policy->OnServerContact(clock.Now() - Seconds(10));
  EXPECT_EQ(policy->deadline(), clock.Now() + Seconds(26));
  clock.Advance(Seconds(27));
  EXPECT_TRUE(policy->ShouldFence(clock.Now()));
  // Contact again (server back): the worker is no longer fenced.
  policy->OnServerContact(clock.Now());
  EXPECT_FALSE(policy->ShouldFence(clock.Now()));
}

TEST(FencingPolicyTest, RejectsATtlThatHeartbeatsCannotKeepAlive) {
  SimulatedClock clock;
  EXPECT_EQ(FencingPolicy::Create(Seconds(4), Seconds(2), clock.Now()).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(FencingPolicy::Create(Seconds(30), Seconds(0), clock.Now()).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(FencingPolicy::Create(Seconds(5), Seconds(2), clock.Now()).ok());
}

}  // namespace
}  // namespace drover::worker
