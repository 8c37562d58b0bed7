// Task lifecycle on a simulated clock: retries with backoff, timeouts, lost
// workers and lease expiry, rejected claims, dependency cascades, cancel.
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

// An assignment carries everything its worker needs: the job's
// name and the results of the tasks its group depends on, so the shell
// never asks the core again.
TEST(AssignTest, AnAssignmentCarriesItsJobNameAndItsDependenciesResults) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(4));
  c.Submit(JobBuilder()
               .Add(TaskBuilder("make").Array(0, 3))
               .Add(TaskBuilder("use").DependsOn("make")));
  c.TakeRaw();
  const std::string sha(64, 'a');
  for (uint32_t i = 0; i < 3; ++i) {
    c.Run(T(1, i));
    TaskOutcome o;
    o.result = i == 1 ? "" : "r" + std::to_string(i);            // 1.1 leaves no result...
    if (i == 1) o.outputs = {OutputFile{"model.bin", 10, sha}};  // ...but a file
    c.FinishWith(T(1, i), o);
  }
  c.Grant(T(1, 3));
  const AssignTask* assign = nullptr;
  std::vector<Command> out = c.TakeRaw();
  for (const Command& cmd : out) {
    if (const auto* a = std::get_if<AssignTask>(&cmd); a != nullptr && a->task == T(1, 3)) {
      assign = a;
    }
  }
  ASSERT_NE(assign, nullptr);
  ASSERT_NE(assign->job, nullptr);
  EXPECT_EQ(assign->job->name, "job");
  ASSERT_NE(assign->inputs, nullptr);
  // The file is held where 1.1 ran.
  EXPECT_THAT(*assign->inputs,
              ElementsAre(DependencyInput{T(1, 0), "r0", {}, 0},
                          DependencyInput{T(1, 1), "", {OutputFile{"model.bin", 10, sha}}, 1},
                          DependencyInput{T(1, 2), "r2", {}, 0}));
  EXPECT_EQ(assign->Spec().name, "use");
  // A task whose group depends on nothing gets none.
  for (const Command& cmd : out) {
    if (const auto* a = std::get_if<AssignTask>(&cmd); a != nullptr && a->task != T(1, 3)) {
      EXPECT_EQ(a->inputs, nullptr);
    }
  }
}

TEST(RetryTest, FailedAttemptRequeuesAfterExponentialBackoff) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Submit(JobBuilder(TaskBuilder().Retries(2, Seconds(10))));
  c.Run(T(1, 0));
  c.Take();
  c.Finish(T(1, 0), 3);
  EXPECT_THAT(c.Take(), ElementsAre("release 1.0#1 on w1 [lease:1:slot:1.0]",
                                    "persist outcome 1.0#1",
                                    "state 1.0 running->queued #1: exit code 3; retry 1 of 2 in 10s"));
  c.Advance(Seconds(9));
  EXPECT_THAT(c.Take(), IsEmpty());
  c.Advance(Seconds(1));
  EXPECT_THAT(c.Take(), ElementsAre("claim 1.0#2 on w1 [lease:1:slot:1.0]",
                                    "state 1.0 queued->assigned #2"));
  c.Run(T(1, 0));
  c.Take();
  TaskOutcome killed;
  killed.signal = 9;
  c.FinishWith(T(1, 0), killed);
  EXPECT_THAT(c.Take(),
              ElementsAre("release 1.0#2 on w1 [lease:1:slot:1.0]", "persist outcome 1.0#2",
                          "state 1.0 running->queued #2: killed by signal 9; retry 2 of 2 in 20s"));
  c.Advance(Seconds(19));
  EXPECT_THAT(c.Take(), IsEmpty());
  c.Advance(Seconds(1));
  c.Run(T(1, 0));
  c.Take();
  TaskOutcome oom;
  oom.oom_killed = true;
  oom.signal = 9;
  oom.usage.peak_mem_bytes = 64 * kMiB;
  c.FinishWith(T(1, 0), oom);
  EXPECT_THAT(c.Take(), ElementsAre("release 1.0#3 on w1 [lease:1:slot:1.0]",
                                    "persist outcome 1.0#3",
                                    "state 1.0 running->failed #3: OOM-killed (limit none, peak 64 MiB)"));
  EXPECT_EQ(c.scheduler().GetTask(T(1, 0))->outcome->usage.peak_mem_bytes, 64 * kMiB);
}

TEST(RetryTest, OomReasonNamesTheLimit) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Submit(JobBuilder(TaskBuilder().Mem(64 * kMiB)));
  c.Run(T(1, 0));
  c.Take();
  TaskOutcome oom;
  oom.oom_killed = true;
  oom.usage.peak_mem_bytes = 64 * kMiB;
  c.FinishWith(T(1, 0), oom);
  EXPECT_EQ(c.scheduler().GetTask(T(1, 0))->reason, "OOM-killed (limit 64 MiB, peak 64 MiB)");
}

TEST(TimeoutTest, KillsAtTheDeadlineThenFailsWithTheReason) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Submit(JobBuilder(TaskBuilder().Timeout(Seconds(7200))));
  c.Run(T(1, 0));
  c.Take();
  c.Advance(Seconds(7199));
  EXPECT_THAT(c.Take(), ElementsAre("renew w1 [lease:1:slot:1.0]"));
  c.Advance(Seconds(1));
  EXPECT_THAT(c.Take(), ElementsAre("kill 1.0#1 on w1: timed out after 2h"));
  TaskOutcome killed;
  killed.signal = 9;
  c.FinishWith(T(1, 0), killed);
  EXPECT_THAT(c.Take(), ElementsAre("release 1.0#1 on w1 [lease:1:slot:1.0]",
                                    "persist outcome 1.0#1",
                                    "state 1.0 running->failed #1: timed out after 2h"));
}

TEST(LeaseTest, RenewalsAreBatchedPerWorkerOnTheInterval) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(4));
  c.AddWorker(WorkerBuilder().Cpus(4));
  c.Submit(JobBuilder(TaskBuilder().Array(0, 4)));
  for (uint32_t i = 0; i < 4; ++i) c.Run(T(1, i));
  c.Take();
  c.Advance(Seconds(1));
  EXPECT_THAT(c.Take(), ElementsAre("renew w1 [lease:1:slot:1.0 lease:1:slot:1.2]",
                                    "renew w2 [lease:2:slot:1.1 lease:2:slot:1.3]"));
  c.Advance(Seconds(9));
  EXPECT_THAT(c.Take(), IsEmpty());
  c.Advance(Seconds(1));
  EXPECT_EQ(c.Take().size(), 2u);
}

TEST(LeaseTest, RejectedClaimPutsTheTaskBackAndFreesItsResources) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Submit(JobBuilder(TaskBuilder()));
  c.Take();
  c.Reject(T(1, 0));
  // The freed core is offered again at once; the task is first in line.
  EXPECT_THAT(c.Take(), ElementsAre("state 1.0 assigned->queued #1: lease claim rejected",
                                    "claim 1.0#2 on w1 [lease:1:slot:1.0]",
                                    "state 1.0 queued->assigned #2"));
  EXPECT_FALSE(c.TryHandle(LeaseGranted{T(1, 0), 1}).ok());  // the old attempt is stale
  EXPECT_THAT(c.Take(), IsEmpty());
}

TEST(WorkerLostTest, TasksRequeueOnlyAfterTheirLeasesExpire) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Submit(JobBuilder(TaskBuilder().Array(0, 2)));
  c.Run(T(1, 0));
  c.Run(T(1, 1));
  c.Take();
  c.Handle(WorkerLost{1});
  EXPECT_THAT(c.Take(), IsEmpty());
  EXPECT_EQ(*c.scheduler().Explain(T(1, 0)), "worker 1 lost; waiting for its leases to expire");
  c.Advance(Seconds(20));  // renews only the live worker's lease
  EXPECT_THAT(c.Take(), ElementsAre("renew w2 [lease:2:slot:1.1]"));
  c.Handle(LeaseFreed{T(1, 0), 1, true});  // the store saw it expire
  EXPECT_THAT(c.Take(), ElementsAre("state 1.0 running->queued #1: worker lost"));
  // The freed core is gone with the worker; the task runs on w2 once 1.1 ends.
  c.Finish(T(1, 1));
  EXPECT_THAT(c.Take(), ElementsAre("release 1.1#1 on w2 [lease:2:slot:1.1]",
                                    "state 1.1 running->succeeded #1",
                                    "claim 1.0#2 on w2 [lease:2:slot:1.0]",
                                    "state 1.0 queued->assigned #2"));
}

TEST(WorkerLostTest, FallbackExpiryAfterTtlPlusGraceAndFailAfterThreeLosses) {
  SchedulerConfig config;
  config.lease_ttl = Seconds(30);
  config.expiry_grace = Seconds(10);
  TestCluster c(config);
  c.Submit(JobBuilder(TaskBuilder()));
  for (uint32_t loss = 1; loss <= 3; ++loss) {
    WorkerId w = c.AddWorker(WorkerBuilder().Cpus(1));
    c.Run(T(1, 0));
    c.Take();
    c.Handle(WorkerLost{w});
    c.Advance(Seconds(39));
    EXPECT_THAT(c.Take(), IsEmpty());
    c.Advance(Seconds(1));
    if (loss < 3) {
      EXPECT_THAT(c.Take(), ElementsAre("state 1.0 running->queued #" + std::to_string(loss) +
                                        ": worker lost"));
    } else {
      EXPECT_THAT(c.Take(), ElementsAre("state 1.0 running->failed #3: worker lost (3 attempts)"));
    }
  }
}

TEST(DependencyTest, DependentsWaitAndAreCanceledWhenADependencyFails) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(4));
  c.Submit(JobBuilder()
               .Add(TaskBuilder("prep"))
               .Add(TaskBuilder("train").DependsOn("prep").Array(0, 2))
               .Add(TaskBuilder("report").DependsOn("train")));
  EXPECT_THAT(c.Take(), ElementsAre("claim 1.0#1 on w1 [lease:1:slot:1.0]",
                                    "state 1.0 queued->assigned #1"));
  EXPECT_EQ(*c.scheduler().Explain(T(1, 3)), "waiting for dependency 1.1");
  c.Run(T(1, 0));
  c.Take();
  c.Finish(T(1, 0));
  EXPECT_THAT(c.Take(), ElementsAre("release 1.0#1 on w1 [lease:1:slot:1.0]",
                                    "state 1.0 running->succeeded #1",
                                    "state 1.1 waiting->queued #0", "state 1.2 waiting->queued #0",
                                    "claim 1.1#1 on w1 [lease:1:slot:1.1]",
                                    "state 1.1 queued->assigned #1",
                                    "claim 1.2#1 on w1 [lease:1:slot:1.2]",
                                    "state 1.2 queued->assigned #1"));
  c.Run(T(1, 1));
  c.Take();
  c.Finish(T(1, 1), 1);
  EXPECT_THAT(c.Take(), ElementsAre("release 1.1#1 on w1 [lease:1:slot:1.1]",
                                    "persist outcome 1.1#1",
                                    "state 1.1 running->failed #1: exit code 1",
                                    "state 1.3 waiting->canceled #0: dependency 1.1 failed"));
  // A later job that depends on the failed task is canceled at submission.
  c.Submit(JobBuilder(TaskBuilder()).AfterTask(T(1, 1)));
  EXPECT_THAT(c.Take(), ElementsAre("state 2.0 waiting->canceled #0: dependency 1.1 failed"));
}

// The worker's own reason (output it could not save on a full disk) fails
// the attempt even after exit 0, and is what the task says.
TEST(LifecycleTest, WorkerReasonFailsAnAttemptThatExitedZero) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Submit(JobBuilder(TaskBuilder()));
  c.Run(T(1, 0));
  c.Take();
  TaskOutcome o;
  o.reason = "stdout not saved: no space left on device (/w/1/0.1/stdout)";
  c.FinishWith(T(1, 0), o);
  EXPECT_EQ(c.scheduler().GetTask(T(1, 0))->state, TaskState::kFailed);
  EXPECT_EQ(c.scheduler().GetTask(T(1, 0))->reason,
            "stdout not saved: no space left on device (/w/1/0.1/stdout)");
  // With an exit code too, both are told.
  c.Submit(JobBuilder(TaskBuilder()));
  c.Run(T(2, 0));
  c.Take();
  o.exit_code = 1;
  c.FinishWith(T(2, 0), o);
  EXPECT_EQ(c.scheduler().GetTask(T(2, 0))->reason,
            "exit code 1; stdout not saved: no space left on device (/w/1/0.1/stdout)");
}

// Exit code -1 is no exit status (an attempt that did not run normally: its
// command was not found, the worker fenced it): the worker's reason alone.
TEST(LifecycleTest, AnAttemptWithoutAnExitStatusSaysOnlyTheWorkersReason) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Submit(JobBuilder(TaskBuilder()));
  c.Run(T(1, 0));
  c.Take();
  TaskOutcome o;
  o.exit_code = -1;
  o.reason = "command not found: trian.py";
  c.FinishWith(T(1, 0), o);
  EXPECT_EQ(c.scheduler().GetTask(T(1, 0))->state, TaskState::kFailed);
  EXPECT_EQ(c.scheduler().GetTask(T(1, 0))->reason, "command not found: trian.py");
  // Without a reason, -1 is still told as it is.
  c.Submit(JobBuilder(TaskBuilder()));
  c.Run(T(2, 0));
  c.Take();
  o.reason.clear();
  c.FinishWith(T(2, 0), o);
  EXPECT_EQ(c.scheduler().GetTask(T(2, 0))->reason, "exit code -1");
}

TEST(DependencyTest, AfterJobWaitsForTheWholeJob) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(4));
  c.Submit(JobBuilder(TaskBuilder().Array(0, 2)));
  c.Submit(JobBuilder(TaskBuilder()).After(1));
  c.Run(T(1, 0));
  c.Run(T(1, 1));
  c.Take();
  EXPECT_EQ(*c.scheduler().Explain(T(2, 0)), "waiting for job 1");
  c.Finish(T(1, 0));
  EXPECT_THAT(c.Take(), ElementsAre("release 1.0#1 on w1 [lease:1:slot:1.0]",
                                    "state 1.0 running->succeeded #1"));
  c.Finish(T(1, 1));
  EXPECT_THAT(c.Take(), ElementsAre("release 1.1#1 on w1 [lease:1:slot:1.1]",
                                    "state 1.1 running->succeeded #1",
                                    "state 2.0 waiting->queued #0",
                                    "claim 2.0#1 on w1 [lease:1:slot:2.0]",
                                    "state 2.0 queued->assigned #1"));
}

TEST(CancelTest, CancelingAJobKillsRunningTasksAndCancelsTheRest) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(2));
  c.Submit(JobBuilder(TaskBuilder().Array(0, 4)));
  c.Run(T(1, 0));  // 1.0 running; 1.1 claimed, not granted; 1.2, 1.3 queued
  c.Take();
  c.Handle(CancelJob{1});
  EXPECT_THAT(c.Take(), ElementsAre("kill 1.0#1 on w1: canceled by user",
                                    "release 1.1#1 on w1 [lease:1:slot:1.1]",
                                    "state 1.1 assigned->canceled #1: canceled by user",
                                    "state 1.2 queued->canceled #0: canceled by user",
                                    "state 1.3 queued->canceled #0: canceled by user"));
  TaskOutcome killed;
  killed.signal = 15;
  c.FinishWith(T(1, 0), killed);
  EXPECT_THAT(c.Take(), ElementsAre("release 1.0#1 on w1 [lease:1:slot:1.0]",
                                    "persist outcome 1.0#1",
                                    "state 1.0 running->canceled #1: canceled by user"));
  Result<JobInfo> job = c.scheduler().GetJob(1);
  EXPECT_TRUE(job->done);
  EXPECT_EQ(job->counts[static_cast<int>(TaskState::kCanceled)], 4u);
  // Nothing is left booked on the worker.
  EXPECT_EQ(c.scheduler().GetWorker(1)->free_cores.size(), 2u);
}

// Idle-desktop mode: an attempt its worker vacated because the owner came
// back is not the task's failure: it goes back to the queue at once with the
// worker's reason, using no retry, and shows in the attempt history; a
// paused worker is offered nothing until its owner leaves.
TEST(LifecycleTest, AVacatedAttemptIsRequeuedWithoutARetryAndAPausedWorkerGetsNothing) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Submit(JobBuilder(TaskBuilder()));  // retries = 0
  c.Run(T(1, 0));
  c.Take();
  c.Handle(WorkerPaused{1, true, "owner present", TimeFromMicros(5)});
  TaskOutcome o;
  o.signal = 15;
  o.reason = "preempted: owner returned on w1";
  TaskFinished vacated{T(1, 0), 1, o};
  vacated.vacated = true;
  c.Handle(vacated);
  Result<TaskInfo> info = c.scheduler().GetTask(T(1, 0));
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->state, TaskState::kQueued);
  EXPECT_EQ(info->reason, "preempted: owner returned on w1");
  EXPECT_FALSE(info->retry_at.has_value());  // no backoff: not a failure
  EXPECT_EQ(*c.scheduler().Explain(T(1, 0)), "all workers are in use by their owners");
  Result<WorkerInfo> worker = c.scheduler().GetWorker(1);
  ASSERT_TRUE(worker.ok());
  EXPECT_TRUE(worker->paused);
  EXPECT_EQ(worker->note, "owner present");
  EXPECT_EQ(worker->note_since, TimeFromMicros(5));
  // The owner leaves: the task runs again there (attempt 2) and may succeed.
  c.Handle(WorkerPaused{1, false, "owner away", TimeFromMicros(9)});
  c.Run(T(1, 0));
  EXPECT_EQ(c.scheduler().GetTask(T(1, 0))->attempt, 2u);
  c.FinishWith(T(1, 0), TaskOutcome{});
  EXPECT_EQ(c.scheduler().GetTask(T(1, 0))->state, TaskState::kSucceeded);
  std::vector<PastAttempt> past = c.scheduler().PastAttempts(T(1, 0));
  ASSERT_EQ(past.size(), 1u);
  EXPECT_EQ(past[0].reason, "preempted: owner returned on w1");
  EXPECT_EQ(past[0].kind, EndKind::kVacated);
}

}  // namespace
}  // namespace drover::core

namespace drover::core {
namespace {

// A worker whose own health checks fail (its heartbeats say why) is
// offered nothing new; what runs there goes on; `explain` and GetWorker
// say why, and a heartbeat without the complaint lets work in again. A
// re-attach forgets it until the worker says it again.
TEST(LifecycleTest, AnUnhealthyWorkerGetsNothingNewUntilItsHeartbeatsSayItIsWell) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(2));
  c.Submit(JobBuilder(TaskBuilder("long")));
  c.Run(T(1, 0));
  c.Take();
  c.Advance(Seconds(1));
  const Time since = c.now();
  c.Handle(WorkerHeartbeat{1, {}, "/scratch not mounted"});
  c.Take();  // the heartbeat's lease renewal
  c.Submit(JobBuilder(TaskBuilder("next")));
  EXPECT_THAT(c.Take(), ::testing::IsEmpty());  // the free core is not offered
  EXPECT_EQ(c.scheduler().GetTask(T(2, 0))->state, TaskState::kQueued);
  EXPECT_EQ(*c.scheduler().Explain(T(2, 0)), "all workers are unhealthy (/scratch not mounted)");
  Result<WorkerInfo> worker = c.scheduler().GetWorker(1);
  ASSERT_TRUE(worker.ok());
  EXPECT_EQ(worker->unhealthy, "/scratch not mounted");
  EXPECT_EQ(worker->unhealthy_since, since);
  // The running task ends as it would.
  c.FinishWith(T(1, 0), TaskOutcome{});
  EXPECT_EQ(c.scheduler().GetTask(T(1, 0))->state, TaskState::kSucceeded);
  // Another complaint keeps the first one's time.
  c.Advance(Seconds(1));
  c.Handle(WorkerHeartbeat{1, {}, "disk full"});
  EXPECT_EQ(c.scheduler().GetWorker(1)->unhealthy_since, since);
  // Well again: the queued task is placed.
  c.Handle(WorkerHeartbeat{1, {}, ""});
  c.Run(T(2, 0));
  EXPECT_EQ(c.scheduler().GetTask(T(2, 0))->state, TaskState::kRunning);
  EXPECT_TRUE(c.scheduler().GetWorker(1)->unhealthy.empty());
}

}  // namespace
}  // namespace drover::core

namespace drover::core {
namespace {

// A GPU its worker found sick is out of the offer: nothing new goes to it,
// the task holding another GPU goes on, and a task wanting a GPU waits
// for the sick one to be well (or another worker); GetWorker names it.
TEST(LifecycleTest, ASickGpuIsOutOfTheOfferAndTheOthersGoOn) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(4).Gpus(2));
  c.Submit(JobBuilder(TaskBuilder("a").Gpus(1)));
  c.Run(T(1, 0));
  ASSERT_EQ(c.scheduler().GetTask(T(1, 0))->gpus.size(), 1u);
  const uint32_t held = c.scheduler().GetTask(T(1, 0))->gpus[0].index;
  const uint32_t other = 1 - held;
  c.Take();
  c.Handle(WorkerHeartbeat{1, {}, "", {{other, "3 uncorrectable ECC errors"}}});
  c.Take();  // the renewal
  c.Submit(JobBuilder(TaskBuilder("b").Gpus(1)));
  EXPECT_THAT(c.Take(), ::testing::IsEmpty());
  EXPECT_EQ(c.scheduler().GetTask(T(2, 0))->state, TaskState::kQueued);
  Result<WorkerInfo> worker = c.scheduler().GetWorker(1);
  ASSERT_TRUE(worker.ok());
  EXPECT_EQ(worker->sick_gpus, (std::map<uint32_t, std::string>{{other, "3 uncorrectable ECC errors"}}));
  EXPECT_EQ(worker->gpu_free_share[other], 0);
  // The holder ends: its GPU is free again and b runs there, not on the sick one.
  c.FinishWith(T(1, 0), TaskOutcome{});
  c.Run(T(2, 0));
  EXPECT_EQ(c.scheduler().GetTask(T(2, 0))->gpus[0].index, held);
  // Well again: a third task gets it.
  c.Handle(WorkerHeartbeat{1, {}, "", {}});
  c.Submit(JobBuilder(TaskBuilder("c").Gpus(1)));
  c.Run(T(3, 0));
  EXPECT_EQ(c.scheduler().GetTask(T(3, 0))->gpus[0].index, other);
}

}  // namespace
}  // namespace drover::core
