// Replaying the journal into a fresh scheduler rebuilds every job and task.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/scheduler.h"
#include "core/testing/test_cluster.h"

namespace drover::core {
namespace {

using ::testing::ElementsAre;
using testing::JobBuilder;
using testing::T;
using testing::TaskBuilder;
using testing::TestCluster;
using testing::WorkerBuilder;

void ExpectSameTasks(Scheduler& a, Scheduler& b) {
  ASSERT_EQ(a.Jobs(), b.Jobs());
  for (JobId j : a.Jobs()) {
    EXPECT_EQ(a.GetJob(j)->counts, b.GetJob(j)->counts) << "job " << j;
    const std::vector<TaskId> tasks = a.JobTasks(j).value();
    for (TaskId t : tasks) {
      TaskInfo x = *a.GetTask(t);
      TaskInfo y = *b.GetTask(t);
      EXPECT_EQ(x.state, y.state) << t.ToString();
      EXPECT_EQ(x.attempt, y.attempt) << t.ToString();
      EXPECT_EQ(x.reason, y.reason) << t.ToString();
      EXPECT_EQ(x.outcome, y.outcome) << t.ToString();
      EXPECT_EQ(x.worker, y.worker) << t.ToString();
    }
  }
}

TEST(RestoreTest, ReplayedRecordsRebuildJobAndTaskStates) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(2));
  c.Submit(JobBuilder()
               .Add(TaskBuilder("a").Array(0, 3).Retries(1))
               .Add(TaskBuilder("b").DependsOn("a")));
  c.Submit(JobBuilder(TaskBuilder()).After(1));
  c.Submit(JobBuilder(TaskBuilder().Array(0, 2)));
  c.Run(T(1, 0));
  c.Run(T(1, 1));
  c.Finish(T(1, 0));             // succeeded; 1.2 takes the core
  c.Finish(T(1, 1), 2);          // backing off for its retry
  c.Handle(CancelJob{3});        // queued tasks canceled
  c.Grant(T(1, 2));
  c.Start(T(1, 2));              // running at the snapshot
  c.Take();

  Scheduler restored;
  for (const Record& r : c.journal()) ASSERT_TRUE(restored.Restore(r).ok());
  Outbox out;
  restored.FinishRestore(c.now(), out);
  EXPECT_TRUE(out.empty());  // no workers yet: nothing to place
  ExpectSameTasks(c.scheduler(), restored);
  EXPECT_EQ(restored.GetTask(T(1, 1))->state, TaskState::kQueued);
  EXPECT_TRUE(restored.GetTask(T(1, 1))->retry_at.has_value());

  // The running task's worker comes back: its core stays booked, so the
  // retry of 1.1 gets the other core and nothing is double-booked.
  ASSERT_TRUE(restored.Handle(c.now(), WorkerJoined{1, WorkerBuilder().Cpus(2).Build()}, out).ok());
  EXPECT_EQ(restored.GetWorker(1)->free_cores, std::vector<uint32_t>{1});
  out.clear();
  ASSERT_TRUE(restored.Handle(c.now() + Seconds(10), Tick{}, out).ok());
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(DescribeCommand(out[0]), "claim 1.1#2 on w1 [lease:1:slot:1.1]");
  // Next ids continue after the restored ones.
  Result<JobId> next = restored.Submit(c.now(), JobBuilder(TaskBuilder()).Build(), out);
  EXPECT_EQ(*next, 4u);
}

TEST(RestoreTest, OrphanedRunningTaskRequeuesAfterTheLeaseTtl) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Submit(JobBuilder(TaskBuilder()));
  c.Run(T(1, 0));
  Scheduler restored;
  for (const Record& r : c.journal()) ASSERT_TRUE(restored.Restore(r).ok());
  Outbox out;
  restored.FinishRestore(c.now(), out);
  EXPECT_EQ(*restored.Explain(T(1, 0)), "worker 1 lost; waiting for its leases to expire");
  ASSERT_TRUE(restored.Handle(c.now() + Seconds(39), Tick{}, out).ok());
  EXPECT_TRUE(out.empty());
  ASSERT_TRUE(restored.Handle(c.now() + Seconds(40), Tick{}, out).ok());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(DescribeCommand(out[0]), "state 1.0 running->queued #1: worker lost");
}

}  // namespace
}  // namespace drover::core
