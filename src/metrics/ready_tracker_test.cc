#include "metrics/ready_tracker.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/testing/test_cluster.h"

namespace drover::metrics {
namespace {

using core::testing::JobBuilder;
using core::testing::T;
using core::testing::TaskBuilder;
using core::testing::TestCluster;
using core::testing::WorkerBuilder;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

// Feeds every state change since the last call; returns the waits.
std::vector<Duration> Feed(ReadyTracker& tracker, TestCluster& c) {
  std::vector<Duration> waits;
  for (const core::Command& cmd : c.TakeRaw()) {
    if (const auto* change = std::get_if<core::TaskStateChanged>(&cmd)) {
      if (auto w = tracker.OnStateChanged(*change, c.now(), c.scheduler())) waits.push_back(*w);
    }
  }
  return waits;
}

TEST(ReadyTrackerTest, QueuedAtSubmissionWaitsUntilAWorkerComes) {
  TestCluster c;
  ReadyTracker tracker(c.now());
  c.Submit(JobBuilder(TaskBuilder("a")));
  EXPECT_THAT(Feed(tracker, c), IsEmpty());
  c.Advance(Seconds(3));
  c.AddWorker(WorkerBuilder().Cpus(2));
  EXPECT_THAT(Feed(tracker, c), ElementsAre(Seconds(3)));
}

TEST(ReadyTrackerTest, DependentIsRunnableWhenItsDependencyEnds) {
  TestCluster c;
  ReadyTracker tracker(c.now());
  c.AddWorker(WorkerBuilder().Cpus(1));
  const JobId job = c.Submit(JobBuilder()
                                 .Add(TaskBuilder("a"))
                                 .Add(TaskBuilder("other"))
                                 .Add(TaskBuilder("b").DependsOn("a")));
  EXPECT_THAT(Feed(tracker, c), ElementsAre(Duration::zero()));  // a, at once
  c.Run(T(job, 0));
  c.Advance(Seconds(5));
  c.Finish(T(job, 0));  // frees the core: "other" (queued 5 s) goes first
  EXPECT_THAT(Feed(tracker, c), ElementsAre(Seconds(5)));
  EXPECT_EQ(tracker.pending(), 1u);  // b, queued since a ended
  c.Run(T(job, 1));
  c.Advance(Seconds(2));
  c.Finish(T(job, 1));
  EXPECT_THAT(Feed(tracker, c), ElementsAre(Seconds(2)));
  EXPECT_EQ(tracker.pending(), 0u);
}

TEST(ReadyTrackerTest, RetryCountsFromTheEndOfItsBackoff) {
  TestCluster c;
  ReadyTracker tracker(c.now());
  c.AddWorker(WorkerBuilder().Cpus(1));
  const JobId job = c.Submit(JobBuilder(TaskBuilder("a").Retries(1, Seconds(10))));
  EXPECT_THAT(Feed(tracker, c), ElementsAre(Duration::zero()));
  c.Run(T(job, 0));
  c.Finish(T(job, 0), 1);  // back to queued, retry in 10 s
  EXPECT_THAT(Feed(tracker, c), IsEmpty());
  c.Advance(Seconds(10));
  // Placed on the tick that ends the backoff: no wait counted for it.
  EXPECT_THAT(Feed(tracker, c), ElementsAre(Duration::zero()));
}

TEST(ReadyTrackerTest, TasksQueuedBeforeTheStartAreNotTimedAndCancelForgets) {
  TestCluster c;
  c.Submit(JobBuilder(TaskBuilder("a")));
  const JobId second = c.Submit(JobBuilder().Add(TaskBuilder("x")).Add(TaskBuilder("y").DependsOn("x")));
  c.Advance(Seconds(1));
  ReadyTracker tracker(c.now());  // e.g. a server restarted on this state
  c.TakeRaw();
  c.Handle(core::CancelTask{T(second, 0)});
  Feed(tracker, c);
  EXPECT_EQ(tracker.pending(), 0u);
  c.AddWorker(WorkerBuilder().Cpus(2));
  EXPECT_THAT(Feed(tracker, c), IsEmpty());
}

}  // namespace
}  // namespace drover::metrics
