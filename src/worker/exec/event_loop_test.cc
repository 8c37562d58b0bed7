#include "worker/exec/event_loop.h"

#include <gtest/gtest.h>
#include <unistd.h>

namespace drover::worker {
namespace {

TEST(EpollLoopTest, CallsBackWhenReadableAndStopsAfterUnwatch) {
  auto loop = EpollLoop::Create();
  ASSERT_TRUE(loop.ok());
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  int calls = 0;
  ASSERT_TRUE((*loop)
                  ->Watch(p[0],
                          [&] {
                            char c;
                            ASSERT_EQ(read(p[0], &c, 1), 1);
                            ++calls;
                          })
                  .ok());
  EXPECT_EQ((*loop)->Watch(p[0], [] {}).code(), StatusCode::kAlreadyExists);
  ASSERT_EQ(write(p[1], "x", 1), 1);
  ASSERT_TRUE((*loop)->RunUntil([&] { return calls == 1; }, Seconds(10)).ok());
  // Nothing readable: a zero timeout returns without running callbacks.
  auto ran = (*loop)->RunOnce(Duration(0));
  ASSERT_TRUE(ran.ok());
  EXPECT_EQ(*ran, 0);
  (*loop)->Unwatch(p[0]);
  ASSERT_EQ(write(p[1], "y", 1), 1);
  ran = (*loop)->RunOnce(Duration(0));
  ASSERT_TRUE(ran.ok());
  EXPECT_EQ(*ran, 0);
  EXPECT_EQ(calls, 1);
  close(p[0]);
  close(p[1]);
}

TEST(EpollLoopTest, CallbackMayUnwatchItselfAndHangupCountsAsReadable) {
  auto loop = EpollLoop::Create();
  ASSERT_TRUE(loop.ok());
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  bool seen = false;
  ASSERT_TRUE((*loop)
                  ->Watch(p[0],
                          [&] {
                            seen = true;
                            (*loop)->Unwatch(p[0]);
                          })
                  .ok());
  close(p[1]);  // EOF
  ASSERT_TRUE((*loop)->RunUntil([&] { return seen; }, Seconds(10)).ok());
  EXPECT_EQ((*loop)->watched(), 0u);
  close(p[0]);
}

TEST(EpollLoopTest, RunUntilReportsDeadline) {
  auto loop = EpollLoop::Create();
  ASSERT_TRUE(loop.ok());
  Status s = (*loop)->RunUntil([] { return false; }, Millis(20));
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded);
}

}  // namespace
}  // namespace drover::worker
