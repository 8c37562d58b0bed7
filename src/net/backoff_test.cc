#include "net/backoff.h"

#include <gtest/gtest.h>

namespace drover::net {
namespace {

TEST(BackoffTest, DoublesUpToTheCapWithoutJitter) {
  Backoff b({.initial = Millis(100), .max = Millis(700), .multiplier = 2.0, .jitter = 0.5},
            [] { return 0.0; });
  EXPECT_EQ(b.Next(), Millis(100));
  EXPECT_EQ(b.Next(), Millis(200));
  EXPECT_EQ(b.Next(), Millis(400));
  EXPECT_EQ(b.Next(), Millis(700));
  EXPECT_EQ(b.Next(), Millis(700));
  EXPECT_EQ(b.attempts(), 5);
  b.Reset();
  EXPECT_EQ(b.Next(), Millis(100));
}

TEST(BackoffTest, JitterTakesAFractionFromTheInjectedSource) {
  double u = 0.5;
  Backoff b({.initial = Millis(1000), .max = Seconds(60), .multiplier = 2.0, .jitter = 0.5},
            [&] { return u; });
  EXPECT_EQ(b.Next(), Millis(750));  // 1000 * (1 - 0.5 * 0.5)
  u = 0.999;
  Duration d = b.Next();  // base 2000, nearly half removed
  EXPECT_GT(d, Millis(1000));
  EXPECT_LT(d, Millis(1010));
}

TEST(BackoffTest, FullJitterNeverReachesZero) {
  Backoff b({.initial = Millis(10), .max = Millis(10), .multiplier = 2.0, .jitter = 1.0},
            [] { return 1.0; });
  EXPECT_GT(b.Next(), Duration::zero());
}

}  // namespace
}  // namespace drover::net
