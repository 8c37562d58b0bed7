#include "net/event_loop.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "net/idle.h"
#include "net/net_test_util.h"

namespace drover::net {
namespace {

TEST(EventLoopTest, PostFromAnotherThreadRunsOnTheLoopThread) {
  EventLoop loop;
  testing::Inbox<bool> ran;
  std::thread other([&] {
    loop.Post([&] {
      ran.Push(loop.InLoopThread());
      loop.Stop();
    });
  });
  loop.Run();
  other.join();
  std::optional<bool> in_loop = ran.Pop();
  ASSERT_TRUE(in_loop.has_value());
  EXPECT_TRUE(*in_loop);
  EXPECT_FALSE(loop.InLoopThread());
}

TEST(EventLoopTest, TimersFireInOrderAndCancelIsFinal) {
  EventLoop loop;
  std::vector<std::string> fired;
  Timer canceled(loop), early(loop), late(loop), rearmed(loop);
  canceled.ArmAfter(Millis(1), [&] { fired.push_back("canceled"); });
  early.ArmAfter(Millis(2), [&] { fired.push_back("early"); });
  rearmed.ArmAfter(Millis(3), [&] { fired.push_back("first arming"); });
  rearmed.ArmAfter(Millis(4), [&] { fired.push_back("rearmed"); });
  late.ArmAt(std::chrono::time_point_cast<Duration>(std::chrono::system_clock::now()) + Millis(30),
             [&] {
               fired.push_back("late");
               loop.Stop();
             });
  canceled.Cancel();
  EXPECT_TRUE(late.armed());
  EXPECT_FALSE(canceled.armed());
  loop.Run();
  EXPECT_EQ(fired, (std::vector<std::string>{"early", "rearmed", "late"}));
  EXPECT_FALSE(late.armed());
}

TEST(EventLoopTest, TimerDestroyedBeforeExpiryNeverFires) {
  EventLoop loop;
  bool fired = false;
  {
    Timer t(loop);
    t.ArmAfter(Millis(1), [&] { fired = true; });
  }
  Timer stop(loop);
  stop.ArmAfter(Millis(10), [&] { loop.Stop(); });
  loop.Run();
  EXPECT_FALSE(fired);
}

TEST(EventLoopTest, FdWatchReportsEachReadinessAndEof) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  EventLoop loop;
  std::string got;
  std::unique_ptr<FdWatch> watch;
  watch = std::make_unique<FdWatch>(loop, fds[0], [&] {
    char buf[16];
    ssize_t n = ::read(fds[0], buf, sizeof(buf));
    if (n > 0) {
      got.append(buf, static_cast<size_t>(n));
      if (got == "a") {
        EXPECT_EQ(::write(fds[1], "b", 1), 1);  // readable again
      } else if (got == "ab") {
        ::close(fds[1]);  // then EOF
      }
      return;
    }
    got += "<eof>";
    watch.reset();  // destroying the watch from its own callback is allowed
    loop.Stop();
  });
  ASSERT_TRUE(watch->status().ok());
  ASSERT_EQ(::write(fds[1], "a", 1), 1);
  loop.Run();
  EXPECT_EQ(got, "ab<eof>");
  ::close(fds[0]);
}

TEST(EventLoopTest, AWatchMadeWhileABatchIsHandledGetsNoStaleEventOfAnUnwatchedFd) {
  // Two pipes readable at once, so both events come in one batch. The first
  // callback unwatches and closes the other pipe and watches a new, empty
  // one (as a worker starting the next task from a task's exit does): the
  // other pipe's event, still queued, must not reach the new watch.
  int a[2], b[2], c[2];
  ASSERT_EQ(::pipe(a), 0);
  ASSERT_EQ(::pipe(b), 0);
  ASSERT_EQ(::write(a[1], "x", 1), 1);
  ASSERT_EQ(::write(b[1], "x", 1), 1);
  EventLoop loop;
  std::unique_ptr<FdWatch> wa, wb, wc;
  bool swapped = false;
  int spurious = 0;
  int closed = -1;
  auto first = [&](int (&mine)[2], std::unique_ptr<FdWatch>& other, int (&theirs)[2]) {
    char buf[4];
    EXPECT_EQ(::read(mine[0], buf, sizeof(buf)), 1);
    if (swapped) return;
    swapped = true;
    other.reset();
    ::close(theirs[0]);
    closed = theirs[0];
    ASSERT_EQ(::pipe(c), 0);
    wc = std::make_unique<FdWatch>(loop, c[0], [&] { ++spurious; });
    loop.Post([&] { loop.Stop(); });  // after the rest of the batch
  };
  wa = std::make_unique<FdWatch>(loop, a[0], [&] { first(a, wb, b); });
  wb = std::make_unique<FdWatch>(loop, b[0], [&] { first(b, wa, a); });
  loop.Run();
  EXPECT_TRUE(swapped);
  EXPECT_EQ(spurious, 0) << "an empty pipe was reported readable";
  wa.reset();
  wb.reset();
  wc.reset();
  for (int fd : {a[0], a[1], b[0], b[1]}) {
    if (fd != closed) ::close(fd);
  }
  ::close(c[0]);
  ::close(c[1]);
}

TEST(EventLoopTest, StopBeforeRunReturnsAndLoopIsReusable) {
  EventLoop loop;
  loop.Stop();
  loop.Run();  // returns at once
  int ran = 0;
  loop.Post([&] {
    ++ran;
    loop.Stop();
  });
  loop.Run();
  EXPECT_EQ(ran, 1);
}

// PostWhenIdle waits for everything ready: callbacks queued before it, the
// ones they queue, and an fd that became readable meanwhile (what a second
// message already in a socket looks like).
TEST(EventLoopTest, IdleCallbacksRunOnceNothingElseIsReady) {
  EventLoop loop;
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  std::vector<std::string> order;
  FdWatch watch(loop, fds[0], [&] {
    char c;
    ASSERT_EQ(read(fds[0], &c, 1), 1);
    order.push_back("readable");
  });
  loop.Post([&] {
    order.push_back("first");
    PostWhenIdle(loop, [&] {
      order.push_back("idle");
      PostWhenIdle(loop, [&] {
        order.push_back("idle again");
        loop.Stop();
      });
      loop.Post([&] { order.push_back("posted by idle"); });
    });
    loop.Post([&] {
      order.push_back("second");
      loop.Post([&] {
        order.push_back("third");
        ASSERT_EQ(write(fds[1], "x", 1), 1);
      });
    });
  });
  loop.Run();
  EXPECT_EQ(order, (std::vector<std::string>{"first", "second", "third", "readable", "idle",
                                             "posted by idle", "idle again"}));
  close(fds[0]);
  close(fds[1]);
}

// A loop that never runs dry still reaches its idle callbacks, after at
// most kMaxBeforeIdle other callbacks.
TEST(EventLoopTest, IdleCallbacksAreNotStarvedByABusyLoop) {
  EventLoop loop;
  int ran = 0;
  int ran_at_idle = -1;
  bool stop = false;
  std::function<void()> busy = [&] {
    ++ran;
    if (!stop) loop.Post(busy);
  };
  loop.Post([&] {
    loop.Post(busy);
    PostWhenIdle(loop, [&] {
      ran_at_idle = ran;
      stop = true;
      loop.Post([&] { loop.Stop(); });
    });
  });
  loop.Run();
  EXPECT_GE(ran_at_idle, 1);
  EXPECT_LE(ran_at_idle, kMaxBeforeIdle + 1);
}

// Poll() runs the idle callbacks too, so a test that polls sees them.
TEST(EventLoopTest, PollRunsIdleCallbacks) {
  EventLoop loop;
  std::vector<std::string> order;
  PostWhenIdle(loop, [&] { order.push_back("idle"); });
  loop.Post([&] { order.push_back("posted"); });
  loop.Poll();
  EXPECT_EQ(order, (std::vector<std::string>{"posted", "idle"}));
}

// Idle callbacks left waiting by a Stop() run once the loop runs again,
// without waiting for other work.
TEST(EventLoopTest, IdleCallbacksLeftByAStopRunInTheNextRun) {
  EventLoop loop;
  int idle_ran = 0;
  // The Stop() comes from a callback that runs after the idle callback was
  // queued, on the way to the idle point.
  loop.Post([&] {
    PostWhenIdle(loop, [&] {
      ++idle_ran;
      loop.Stop();
    });
    loop.Post([&] { loop.Stop(); });
  });
  loop.Run();
  EXPECT_EQ(idle_ran, 0);
  // Nothing else to run: only the idle callback can stop this Run (the
  // timer is the failure bound).
  Timer bound(loop);
  bound.ArmAfter(Seconds(30), [&] { loop.Stop(); });
  loop.Run();
  EXPECT_EQ(idle_ran, 1);
  EXPECT_TRUE(bound.armed());
  bound.Cancel();
  // Through RunOneFor too, which must not sit out its timeout first.
  loop.Post([&] {
    PostWhenIdle(loop, [&] { ++idle_ran; });
    loop.Post([&] { loop.Stop(); });
  });
  loop.Run();
  const auto start = std::chrono::steady_clock::now();
  RunOneFor(loop, Seconds(30));
  EXPECT_EQ(idle_ran, 2);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

// Virtual time: a day of timers runs in no real time, in deadline order,
// each seeing the clock at its own deadline.
TEST(EventLoopTest, VirtualTimeFiresTimersInOrderAtTheirDeadlines) {
  SimulatedClock clock;
  const Time start = clock.Now();
  EventLoop loop(clock);
  EXPECT_TRUE(loop.virtual_time());
  EXPECT_EQ(&loop.clock(), &clock);
  std::vector<std::pair<std::string, Duration>> fired;
  Timer hour(loop), minute(loop), day(loop), canceled(loop);
  auto note = [&](std::string name) { fired.emplace_back(std::move(name), clock.Now() - start); };
  day.ArmAfter(Seconds(86400), [&] { note("day"); });
  hour.ArmAfter(Seconds(3600), [&] {
    note("hour");
    // A timer armed by a timer counts from that timer's deadline.
    minute.ArmAfter(Seconds(60), [&] { note("hour+minute"); });
  });
  canceled.ArmAfter(Seconds(10), [&] { note("canceled"); });
  canceled.Cancel();
  EXPECT_EQ(loop.NextTimer(), start + Seconds(3600));
  loop.AdvanceTo(start + Seconds(3600 + 59));
  EXPECT_EQ(fired, (std::vector<std::pair<std::string, Duration>>{{"hour", Seconds(3600)}}));
  EXPECT_EQ(clock.Now(), start + Seconds(3659));
  EXPECT_TRUE(minute.armed());
  loop.AdvanceBy(Seconds(86400));
  EXPECT_EQ(fired, (std::vector<std::pair<std::string, Duration>>{
                       {"hour", Seconds(3600)}, {"hour+minute", Seconds(3660)},
                       {"day", Seconds(86400)}}));
  EXPECT_FALSE(loop.NextTimer().has_value());
  EXPECT_FALSE(day.armed());
}

// Run() on virtual time jumps to the next timer whenever nothing is ready,
// and a re-armed timer replaces its earlier deadline.
TEST(EventLoopTest, VirtualRunJumpsToTheNextTimerAndStops) {
  SimulatedClock clock;
  const Time start = clock.Now();
  EventLoop loop(clock);
  Timer a(loop), b(loop);
  std::vector<Duration> seen;
  int ticks = 0;
  std::function<void()> tick = [&] {
    seen.push_back(clock.Now() - start);
    if (++ticks < 3) a.ArmAfter(Seconds(30), tick);
  };
  a.ArmAfter(Seconds(5), tick);
  a.ArmAfter(Seconds(30), tick);  // replaces the 5 s deadline
  b.ArmAt(start + Seconds(1000), [&] { loop.Stop(); });
  loop.Post([&] { seen.push_back(Duration::zero()); });
  loop.Run();
  EXPECT_EQ(seen, (std::vector<Duration>{Duration::zero(), Seconds(30), Seconds(60),
                                         Seconds(90)}));
  EXPECT_EQ(clock.Now(), start + Seconds(1000));
}

// RunUntil stops at the condition, or at the limit with the clock there;
// work posted from another thread lands before time moves on.
TEST(EventLoopTest, VirtualRunUntilStopsAtTheConditionOrTheLimit) {
  SimulatedClock clock;
  const Time start = clock.Now();
  EventLoop loop(clock);
  Timer t(loop);
  bool fired = false;
  t.ArmAfter(Seconds(20), [&] { fired = true; });
  EXPECT_FALSE(loop.RunUntil([&] { return fired; }, start + Seconds(10)));
  EXPECT_EQ(clock.Now(), start + Seconds(10));
  EXPECT_TRUE(loop.RunUntil([&] { return fired; }, start + Seconds(60)));
  EXPECT_EQ(clock.Now(), start + Seconds(20));
  bool posted = false;
  std::thread other([&] { loop.Post([&] { posted = true; }); });
  other.join();
  EXPECT_TRUE(loop.RunUntil([&] { return posted; }, start + Seconds(20)));
}

}  // namespace
}  // namespace drover::net
