// A worker that leaves at a set time (WorkerResources::ends_at: a Slurm
// allocation's end, `drover worker --lifetime`) takes only tasks whose
// timeout ends by then, and nothing queued ahead behind a running task.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/scheduler.h"
#include "core/testing/test_cluster.h"

namespace drover::core {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using testing::JobBuilder;
using testing::T;
using testing::TaskBuilder;
using testing::TestCluster;
using testing::WorkerBuilder;

constexpr Duration kMinute = Seconds(60);

TEST(EndingWorkerTest, TakesOnlyTasksWhoseTimeoutEndsBeforeItLeaves) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(4).EndsAt(c.now() + 60 * kMinute));
  c.Submit(JobBuilder(TaskBuilder()));                         // no timeout
  c.Submit(JobBuilder(TaskBuilder().Timeout(120 * kMinute)));  // ends after it leaves
  c.Submit(JobBuilder(TaskBuilder().Timeout(60 * kMinute)));   // ends as it leaves
  EXPECT_THAT(c.Take(),
              ElementsAre("claim 3.0#1 on w1 [lease:1:slot:3.0]", "state 3.0 queued->assigned #1"));
  EXPECT_EQ(*c.scheduler().Explain(T(1, 0)),
            "every worker that fits it leaves at a set time (the last in 1h) and it has no "
            "timeout to end by then");
  EXPECT_EQ(*c.scheduler().Explain(T(2, 0)),
            "every worker that fits it leaves before its timeout of 2h would end (the last in 1h)");

  // A worker that stays takes both.
  c.AddWorker(WorkerBuilder().Cpus(4));
  EXPECT_THAT(c.Take(),
              ElementsAre("claim 1.0#1 on w2 [lease:2:slot:1.0]", "state 1.0 queued->assigned #1",
                          "claim 2.0#1 on w2 [lease:2:slot:2.0]", "state 2.0 queued->assigned #1"));
}

TEST(EndingWorkerTest, ATaskThatFitsNoLongerAsTheEndNearsWaits) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(1).EndsAt(c.now() + 60 * kMinute));
  c.Submit(JobBuilder(TaskBuilder().Timeout(30 * kMinute)));
  c.Submit(JobBuilder(TaskBuilder().Timeout(45 * kMinute)));
  c.Run(T(1, 0));
  c.Take();
  // 1.0 ends at 20 minutes: 45 more would end after the worker leaves,
  // and the task behind it in its class that ends in time goes first.
  c.Advance(20 * kMinute);
  c.Take();  // the lease renewals
  c.Finish(T(1, 0));
  EXPECT_THAT(c.Take(), ElementsAre("release 1.0#1 on w1 [lease:1:slot:1.0]",
                                    "state 1.0 running->succeeded #1"));
  EXPECT_EQ(*c.scheduler().Explain(T(2, 0)),
            "every worker that fits it leaves before its timeout of 45m would end (the last in "
            "40m)");
  // Still free for a task that ends in time.
  c.Submit(JobBuilder(TaskBuilder().Timeout(30 * kMinute)));
  EXPECT_THAT(c.Take(),
              ElementsAre("claim 3.0#1 on w1 [lease:1:slot:3.0]", "state 3.0 queued->assigned #1"));
}

TEST(EndingWorkerTest, NothingQueuesAheadOnAWorkerThatLeaves) {
  SchedulerConfig config;
  config.queue_ahead = true;
  TestCluster c(config);
  c.AddWorker(WorkerBuilder().Cpus(1).EndsAt(c.now() + 60 * kMinute));
  c.Submit(JobBuilder(TaskBuilder().Timeout(5 * kMinute).Array(0, 2)));
  // One runs; the other waits in the server's queue, not behind it on the
  // worker (when the first ends is not known well enough to promise the
  // second's end).
  EXPECT_THAT(c.Take(),
              ElementsAre("claim 1.0#1 on w1 [lease:1:slot:1.0]", "state 1.0 queued->assigned #1"));
  c.Run(T(1, 0));
  c.Finish(T(1, 0));
  EXPECT_THAT(
      c.Take(),
      ElementsAre("assign 1.0#1 on w1 cores=[0]", "state 1.0 assigned->running #1",
                  "release 1.0#1 on w1 [lease:1:slot:1.0]", "state 1.0 running->succeeded #1",
                  "claim 1.1#1 on w1 [lease:1:slot:1.1]", "state 1.1 queued->assigned #1"));
}

TEST(EndingWorkerTest, AReservationIsNotHeldOnAWorkerThatLeavesTooSoon) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(2).EndsAt(c.now() + 60 * kMinute));
  c.AddWorker(WorkerBuilder().Cpus(2));
  // The stayer is busy with a 2-core task; a 2-core task without a timeout
  // waits for it, and small tasks with timeouts keep the leaver busy.
  c.Submit(JobBuilder(TaskBuilder().Cpus(2)));
  c.Run(T(1, 0));
  c.Submit(JobBuilder(TaskBuilder().Cpus(2).Priority(10)));
  c.Submit(JobBuilder(TaskBuilder().Timeout(10 * kMinute).Array(0, 2)));
  c.Take();
  // The big one's reservation is on w2, the only worker it can ever run on:
  // the small ones run on w1 meanwhile.
  EXPECT_EQ(c.scheduler().GetTask(T(3, 0))->worker, 1u);
  EXPECT_EQ(c.scheduler().GetTask(T(3, 1))->worker, 1u);
  EXPECT_EQ(*c.scheduler().Explain(T(2, 0)), "needs 2 cpus, largest free is 0");
  c.Finish(T(1, 0));
  EXPECT_EQ(c.scheduler().GetTask(T(2, 0))->worker, 2u);
}

}  // namespace
}  // namespace drover::core
