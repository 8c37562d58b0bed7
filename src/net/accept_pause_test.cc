#include "net/accept_pause.h"

#include <gtest/gtest.h>

#include <cerrno>

namespace drover::net {
namespace {

const Time kStart = Time(Seconds(1'000'000));

TEST(AcceptPauseTest, OutOfDescriptorsPausesDoublingUpToASecondAndResetsOnSuccess) {
  AcceptPause p;
  Time now = kStart;
  std::vector<int64_t> pauses_ms;
  for (int i = 0; i < 9; ++i) {
    AcceptPause::Step s = p.OnFailure(EMFILE, now);
    pauses_ms.push_back(s.pause.count() / 1000);
    now += s.pause;
  }
  EXPECT_EQ(pauses_ms, (std::vector<int64_t>{10, 20, 40, 80, 160, 320, 640, 1000, 1000}));
  p.OnSuccess();
  EXPECT_EQ(p.OnFailure(ENFILE, now).pause, Millis(10));
  EXPECT_EQ(p.OnFailure(ENOBUFS, now).pause, Millis(20));
  EXPECT_EQ(p.OnFailure(ENOMEM, now).pause, Millis(40));
}

TEST(AcceptPauseTest, AFailureOfOneConnectionDoesNotPause) {
  AcceptPause p;
  EXPECT_EQ(p.OnFailure(ECONNABORTED, kStart).pause, Duration(0));
  EXPECT_EQ(p.OnFailure(EPERM, kStart).pause, Duration(0));
  EXPECT_FALSE(AcceptPause::OutOfResources(ECONNABORTED));
  EXPECT_TRUE(AcceptPause::OutOfResources(EMFILE));
}

TEST(AcceptPauseTest, LogsOncePerTenSecondsWithTheCountHeldBack) {
  AcceptPause p;
  AcceptPause::Step first = p.OnFailure(EMFILE, kStart);
  EXPECT_TRUE(first.log);
  EXPECT_EQ(first.failures, 1u);
  // A thousand failures a second for 9.9 s: silent.
  int lines = 0;
  for (int i = 1; i < 9'900; ++i) lines += p.OnFailure(EMFILE, kStart + Millis(i)).log ? 1 : 0;
  EXPECT_EQ(lines, 0);
  AcceptPause::Step next = p.OnFailure(EMFILE, kStart + Seconds(10));
  EXPECT_TRUE(next.log);
  EXPECT_EQ(next.failures, 9'900u);  // those held back and this one
}

TEST(LogLimiterTest, CountsEventsPerLine) {
  LogLimiter limiter(Seconds(1));
  EXPECT_EQ(limiter.Allow(kStart), 1u);
  EXPECT_EQ(limiter.Allow(kStart + Millis(1)), 0u);
  EXPECT_EQ(limiter.Allow(kStart + Millis(999)), 0u);
  EXPECT_EQ(limiter.Allow(kStart + Seconds(1)), 3u);
  EXPECT_EQ(limiter.Allow(kStart + Seconds(5)), 1u);
}

}  // namespace
}  // namespace drover::net
