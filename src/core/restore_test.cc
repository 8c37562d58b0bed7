// Replaying the journal into a fresh scheduler rebuilds every job and task.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

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

// A retried task that then succeeds has no reason live (success clears the
// retry's reason); a replay of its records must not bring the old one back.
TEST(RestoreTest, ASuccessAfterARetryKeepsNoStaleReason) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Submit(JobBuilder(TaskBuilder().Retries(1)));
  c.Run(T(1, 0));
  c.Finish(T(1, 0), 3);  // attempt 1 fails; a retry is due after its backoff
  ASSERT_FALSE(c.scheduler().GetTask(T(1, 0))->reason.empty());
  c.Advance(Seconds(3600));
  c.Run(T(1, 0));
  c.Finish(T(1, 0));
  ASSERT_EQ(c.scheduler().GetTask(T(1, 0))->state, TaskState::kSucceeded);
  c.Take();

  Scheduler restored;
  for (const Record& r : c.journal()) ASSERT_TRUE(restored.Restore(r).ok());
  Outbox out;
  restored.FinishRestore(c.now(), out);
  ExpectSameTasks(c.scheduler(), restored);
  EXPECT_EQ(restored.GetTask(T(1, 0))->reason, "");
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

// After a restart every worker comes back at once, each with tasks still on
// it: every restored task is re-booked on exactly its own worker's cores and
// GPUs, whatever order the workers join in, and nothing is handed out twice.
TEST(RestoreTest, ManyWorkersRejoiningKeepEveryRestoredTaskOnItsOwnResources) {
  constexpr uint32_t kWorkers = 300;
  constexpr uint32_t kCores = 8;
  TestCluster c;
  for (uint32_t w = 0; w < kWorkers; ++w) c.AddWorker(WorkerBuilder().Cpus(kCores).Gpus(1));
  // Every core busy (one task per worker also holds its GPU), plus a queue.
  const uint32_t gpu_tasks = kWorkers;
  const uint32_t cpu_tasks = kWorkers * (kCores - 1) + 50;
  c.Submit(JobBuilder()
               .Add(TaskBuilder("gpu").Gpus(1).Array(0, gpu_tasks))
               .Add(TaskBuilder("cpu").Array(0, cpu_tasks)));
  std::map<TaskId, TaskInfo> before;
  const uint32_t placed = kWorkers * kCores;
  for (uint32_t i = 0; i < placed; ++i) {
    const TaskId t = T(1, i);
    ASSERT_EQ(c.scheduler().GetTask(t)->state, TaskState::kAssigned) << t.ToString();
    if (i % 3 != 0) c.Grant(t);  // granted: assign sent
    if (i % 3 == 2) c.Start(t);  // and running
    before[t] = *c.scheduler().GetTask(t);
  }
  c.Take();

  Scheduler restored;
  for (const Record& r : c.journal()) ASSERT_TRUE(restored.Restore(r).ok());
  Outbox out;
  restored.FinishRestore(c.now(), out);
  EXPECT_TRUE(out.empty());
  // Join in reverse order, the last worker never comes back.
  for (WorkerId w = kWorkers - 1; w >= 1; --w) {
    WorkerJoined joined{w, WorkerBuilder().Cpus(kCores).Gpus(1).Build()};
    ASSERT_TRUE(restored.Handle(c.now(), std::move(joined), out).ok());
  }
  // All cores are taken by restored tasks: nothing new was claimed.
  for (const Command& cmd : out) {
    EXPECT_FALSE(std::holds_alternative<ClaimLeases>(cmd)) << DescribeCommand(cmd);
  }
  out.clear();
  for (WorkerId w = 1; w < kWorkers; ++w) {
    WorkerInfo info = *restored.GetWorker(w);
    EXPECT_TRUE(info.free_cores.empty()) << "worker " << w;
    EXPECT_EQ(info.gpu_free_share, std::vector<int64_t>{0}) << "worker " << w;
    EXPECT_EQ(info.tasks.size(), kCores) << "worker " << w;
  }
  for (const auto& [t, was] : before) {
    TaskInfo now = *restored.GetTask(t);
    EXPECT_EQ(now.worker, was.worker) << t.ToString();
    EXPECT_EQ(now.state, was.state) << t.ToString();
    if (*was.worker == kWorkers) continue;  // its worker is still away
    EXPECT_EQ(now.cores, was.cores) << t.ToString();
    EXPECT_EQ(now.gpus, was.gpus) << t.ToString();
  }
  // A restored task that finishes frees exactly its core for the queue's head.
  TaskId done;  // a running cpu task on a worker that came back
  for (const auto& [t, was] : before) {
    if (t.index >= gpu_tasks && was.state == TaskState::kRunning && *was.worker != kWorkers) {
      done = t;
      break;
    }
  }
  ASSERT_EQ(before[done].state, TaskState::kRunning);
  // The last worker never comes back: placement resumes once the restart's
  // settle window has passed (before that, nothing is placed at all).
  const Time later = c.now() + restored.config().restore_settle;
  ASSERT_TRUE(restored.Handle(later, Tick{}, out).ok());
  ASSERT_TRUE(restored.Handle(later, TaskFinished{done, before[done].attempt, {}}, out).ok());
  std::vector<std::string> claims;
  for (const Command& cmd : out) {
    if (const auto* claim = std::get_if<ClaimLeases>(&cmd)) {
      claims.push_back(DescribeCommand(cmd));
      EXPECT_EQ(claim->worker, *before[done].worker);
    }
  }
  EXPECT_EQ(claims.size(), 1u);
  EXPECT_EQ(restored.GetTask(T(1, placed))->cores, before[done].cores);
}

// A finished task keeps what it ran on, live and after a
// restart from its journal; tasks on one placement share one entry.
TEST(RestoreTest, EndedTaskKeepsItsCoresAndGpus) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(2).Gpus(1));
  c.Submit(JobBuilder()
               .Add(TaskBuilder("gpu").Gpus(0.5).Cpus(1))
               .Add(TaskBuilder("cpu").Array(0, 4)));
  std::map<TaskId, TaskInfo> ran;
  for (int round = 0; round < 5; ++round) {
    for (uint32_t i = 0; i < 5; ++i) {
      const TaskId t = T(1, i);
      TaskInfo info = *c.scheduler().GetTask(t);
      if (info.state != TaskState::kAssigned) continue;
      c.Run(t);
      ran[t] = *c.scheduler().GetTask(t);
      ASSERT_FALSE(ran[t].cores.empty()) << t.ToString();
      if (i == 3) {
        c.FinishWith(t, TaskOutcome{.exit_code = 2});  // failed: kept the same way
      } else {
        c.Finish(t);
      }
      TaskInfo after = *c.scheduler().GetTask(t);
      ASSERT_TRUE(IsTerminal(after.state)) << t.ToString();
      EXPECT_EQ(after.cores, ran[t].cores) << t.ToString();
      EXPECT_EQ(after.gpus, ran[t].gpus) << t.ToString();
    }
  }
  ASSERT_EQ(ran.size(), 5u);
  EXPECT_EQ(ran[T(1, 0)].gpus.size(), 1u);
  EXPECT_EQ(ran[T(1, 0)].gpus[0].share, 50);
  Scheduler restored;
  for (const Record& r : c.journal()) ASSERT_TRUE(restored.Restore(r).ok());
  Outbox out;
  restored.FinishRestore(c.now(), out);
  for (const auto& [t, was] : ran) {
    TaskInfo now = *restored.GetTask(t);
    EXPECT_EQ(now.state, c.scheduler().GetTask(t)->state) << t.ToString();
    EXPECT_EQ(now.cores, was.cores) << t.ToString();
    EXPECT_EQ(now.gpus, was.gpus) << t.ToString();
    EXPECT_EQ(now.worker, was.worker) << t.ToString();
  }
}

}  // namespace
}  // namespace drover::core
