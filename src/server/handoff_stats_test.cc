#include "server/handoff_stats.h"

#include <gtest/gtest.h>

namespace drover::server {
namespace {

Time At(int64_t us) { return TimeFromMicros(1'000'000'000 + us); }

TEST(HandoffStatsTest, PairsEachStartWithTheExitBeforeIt) {
  HandoffStats stats;
  stats.Started(1, At(0));  // idle worker gets work: not a handoff
  stats.Exited(1, At(100));
  stats.Started(1, At(250));
  stats.Exited(1, At(1000));
  stats.Started(1, At(1400));
  HandoffSummary s = stats.Summary();
  EXPECT_EQ(s.count, 2u);
  EXPECT_EQ(s.p50_us, 150);
  EXPECT_EQ(s.p99_us, 400);
  EXPECT_EQ(s.max_us, 400);
}

TEST(HandoffStatsTest, WorkersAreSeparateAndAStartBeforeTheExitDoesNotPair) {
  HandoffStats stats;
  stats.Exited(1, At(500));
  stats.Started(2, At(600));  // another worker
  stats.Started(1, At(400));  // started before that exit (another slot)
  EXPECT_EQ(stats.Summary().count, 0u);
  stats.Started(1, At(700));
  EXPECT_EQ(stats.Summary().count, 1u);
  EXPECT_EQ(stats.Summary().p50_us, 200);
}

TEST(HandoffStatsTest, KeepsTheLastWindowAndForgetsALeavingWorker) {
  HandoffStats stats(/*window=*/2, /*max_waiting=*/2);
  for (int64_t d : {10, 20, 30}) {
    stats.Exited(1, At(1000 * d));
    stats.Started(1, At(1000 * d + d));
  }
  HandoffSummary s = stats.Summary();
  EXPECT_EQ(s.count, 3u);
  EXPECT_EQ(s.p50_us, 20);  // 10 fell out of the window
  EXPECT_EQ(s.max_us, 30);
  stats.Exited(1, At(100'000));
  stats.Forget(1);
  stats.Started(1, At(100'010));
  EXPECT_EQ(stats.Summary().count, 3u);
}

TEST(HandoffStatsTest, NoSamplesIsZeros) {
  HandoffSummary s = HandoffStats().Summary();
  EXPECT_EQ(s.count, 0u);
  EXPECT_EQ(s.p50_us, 0);
  EXPECT_EQ(s.p99_us, 0);
}

}  // namespace
}  // namespace drover::server
