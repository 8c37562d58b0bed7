// A worker's own account after a server restart (WorkerAttached): attempts
// the journal never saw are adopted (running: resources re-booked and leases
// claimed; finished: the outcome counts), everything else the worker runs is
// killed, and reports from a worker an attempt is not on never count.
//
// The "crash" is simulated: the restored scheduler replays only a prefix of
// the first scheduler's journal — what was durable when it died.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

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

// A scheduler restored from the first `durable` records of `c`'s journal.
class Restarted {
 public:
  Restarted(const TestCluster& c, size_t durable, std::vector<WorkerId> expected = {},
            SchedulerConfig config = {})
      : sched_(std::move(config)), now_(c.now()) {
    for (size_t i = 0; i < durable && i < c.journal().size(); ++i) {
      EXPECT_TRUE(sched_.Restore(c.journal()[i]).ok());
    }
    sched_.ExpectWorkers(expected);
    sched_.FinishRestore(now_, out_);
  }
  Scheduler& sched() { return sched_; }
  Status Handle(Event e) { return sched_.Handle(now_, std::move(e), out_); }
  void Advance(Duration d) {
    now_ += d;
    EXPECT_TRUE(Handle(Tick{}).ok());
  }
  // Commands since the last call, described (task records left out).
  std::vector<std::string> Take() {
    std::vector<std::string> lines;
    for (const Command& c : out_) {
      const auto* p = std::get_if<Persist>(&c);
      if (p && std::holds_alternative<TaskRecord>(p->record)) continue;
      lines.push_back(DescribeCommand(c));
    }
    raw_ = std::move(out_);
    out_.clear();
    return lines;
  }
  const Outbox& last_raw() const { return raw_; }
  TaskInfo Task(TaskId t) { return sched_.GetTask(t).value(); }

 private:
  Scheduler sched_;
  Time now_;
  Outbox out_;
  Outbox raw_;
};

ReportedAttempt Running(TaskId t, uint32_t attempt, std::vector<uint32_t> cores,
                        std::vector<GpuGrant> gpus = {}) {
  return ReportedAttempt{t, attempt, std::move(cores), std::move(gpus)};
}

TaskFinished Finished(TaskId t, uint32_t attempt, int exit_code = 0) {
  TaskOutcome o;
  o.exit_code = exit_code;
  return TaskFinished{t, attempt, o};
}

WorkerAttached Attach(WorkerId w, const WorkerBuilder& resources,
                      std::vector<ReportedAttempt> running, std::vector<TaskFinished> finished = {}) {
  return WorkerAttached{w, resources.Build(), std::move(running), std::move(finished)};
}

TEST(AdoptTest, RunningAttemptsTheJournalNeverSawAreAdoptedOnTheirOwnCores) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(3));
  c.Submit(JobBuilder(TaskBuilder().Array(0, 2)));
  ASSERT_EQ(c.journal().size(), 3u);  // the job, then two assignments
  c.Run(T(1, 0));
  c.Run(T(1, 1));
  ASSERT_EQ(c.scheduler().GetTask(T(1, 1))->cores, std::vector<uint32_t>{1});

  // Only the job record was durable when the server died.
  Restarted r(c, 1, {1});  // worker 1 was active
  EXPECT_EQ(r.Task(T(1, 0)).state, TaskState::kQueued);
  EXPECT_EQ(r.Task(T(1, 0)).attempt, 0u);
  ASSERT_TRUE(r.Handle(Attach(1, WorkerBuilder().Cpus(3),
                              {Running(T(1, 1), 1, {1}), Running(T(1, 0), 1, {0})}))
                  .ok());
  EXPECT_THAT(r.Take(), ElementsAre("claim 1.1#1 on w1 [lease:1:slot:1.1]",
                                    "state 1.1 queued->assigned #1",
                                    "state 1.1 assigned->running #1",
                                    "claim 1.0#1 on w1 [lease:1:slot:1.0]",
                                    "state 1.0 queued->assigned #1",
                                    "state 1.0 assigned->running #1"));
  // The assigned record carries the cores, so another restart keeps them.
  bool recorded = false;
  for (const Command& cmd : r.last_raw()) {
    const auto* p = std::get_if<Persist>(&cmd);
    const auto* rec = p ? std::get_if<TaskRecord>(&p->record) : nullptr;
    if (rec && rec->task == T(1, 1) && rec->state == TaskState::kAssigned) {
      EXPECT_EQ(rec->cores, std::vector<uint32_t>{1});
      recorded = true;
    }
  }
  EXPECT_TRUE(recorded);
  EXPECT_EQ(r.Task(T(1, 1)).cores, std::vector<uint32_t>{1});
  EXPECT_EQ(r.sched().GetWorker(1)->free_cores, std::vector<uint32_t>{2});

  // The grant sends no assignment: the attempt runs already.
  ASSERT_TRUE(r.Handle(LeaseGranted{T(1, 0), 1}).ok());
  ASSERT_TRUE(r.Handle(LeaseGranted{T(1, 1), 1}).ok());
  EXPECT_THAT(r.Take(), IsEmpty());
  ASSERT_TRUE(r.Handle(TaskFinished{T(1, 0), 1, {}, 1}).ok());
  ASSERT_TRUE(r.Handle(TaskFinished{T(1, 1), 1, {}, 1}).ok());
  EXPECT_THAT(r.Take(), ElementsAre("release 1.0#1 on w1 [lease:1:slot:1.0]",
                                    "state 1.0 running->succeeded #1",
                                    "release 1.1#1 on w1 [lease:1:slot:1.1]",
                                    "state 1.1 running->succeeded #1"));
  EXPECT_EQ(r.sched().GetJob(1)->counts[static_cast<int>(TaskState::kSucceeded)], 2u);
}

// A task with `disk` that filled its worker's disk is still adopted after a
// restart: free space decides where new work goes, not whether running
// work stays.
TEST(AdoptTest, ARunningTaskWithDiskIsAdoptedWhateverTheDiskHasFreeNow) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(2).DiskFree(30 * kGiB));
  c.Submit(JobBuilder(TaskBuilder().Disk(20 * kGiB)));
  c.Run(T(1, 0));
  Restarted r(c, 1, {1});
  ASSERT_TRUE(
      r.Handle(Attach(1, WorkerBuilder().Cpus(2).DiskFree(kGiB), {Running(T(1, 0), 1, {0})})).ok());
  EXPECT_THAT(r.Take(),
              ElementsAre("claim 1.0#1 on w1 [lease:1:slot:1.0]", "state 1.0 queued->assigned #1",
                          "state 1.0 assigned->running #1"));
}

TEST(AdoptTest, FinishedAttemptsTheJournalNeverSawCountAndAreNotRunAgain) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(2));
  c.Submit(JobBuilder().Add(TaskBuilder("a").Array(0, 2)).Add(TaskBuilder("b").DependsOn("a")));
  c.Run(T(1, 0));
  c.Run(T(1, 1));
  c.Finish(T(1, 0));
  c.Finish(T(1, 1), 3);  // failed, no retries: b is canceled
  Restarted r(c, 1, {1});  // worker 1 was active
  ASSERT_TRUE(r.Handle(Attach(1, WorkerBuilder().Cpus(2), {},
                              {Finished(T(1, 0), 1), Finished(T(1, 1), 1, 3)}))
                  .ok());
  // The releases clean up what the previous server may have claimed (a
  // compare-and-delete by owner: a no-op where it claimed nothing).
  EXPECT_THAT(r.Take(), ElementsAre("state 1.0 queued->assigned #1",
                                    "state 1.0 assigned->running #1",
                                    "release 1.0#1 on w1 [lease:1:slot:1.0]",
                                    "state 1.0 running->succeeded #1",
                                    "state 1.1 queued->assigned #1",
                                    "state 1.1 assigned->running #1",
                                    "release 1.1#1 on w1 [lease:1:slot:1.1]",
                                    "persist outcome 1.1#1",
                                    "state 1.1 running->failed #1: exit code 3",
                                    "state 1.2 waiting->canceled #0: dependency 1.1 failed"));
  EXPECT_EQ(r.sched().GetWorker(1)->free_cores, (std::vector<uint32_t>{0, 1}));
}

TEST(AdoptTest, AFinishedDependencyLetsItsRunningDependentBeAdopted) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Submit(JobBuilder().Add(TaskBuilder("a")).Add(TaskBuilder("b").DependsOn("a")));
  c.Run(T(1, 0));
  c.Finish(T(1, 0));
  c.Run(T(1, 1));
  Restarted r(c, 1, {1});  // worker 1 was active
  ASSERT_EQ(r.Task(T(1, 1)).state, TaskState::kWaiting);
  ASSERT_TRUE(
      r.Handle(Attach(1, WorkerBuilder().Cpus(1), {Running(T(1, 1), 1, {0})}, {Finished(T(1, 0), 1)}))
          .ok());
  EXPECT_EQ(r.Task(T(1, 0)).state, TaskState::kSucceeded);
  EXPECT_EQ(r.Task(T(1, 1)).state, TaskState::kRunning);
  EXPECT_EQ(r.Task(T(1, 1)).attempt, 1u);
}

TEST(AdoptTest, AnAttemptWhoseResourcesAreTakenIsKilledAndTheTaskRunsOnce) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(2));
  c.Submit(JobBuilder(TaskBuilder().Array(0, 2)));
  Restarted r(c, 1, {1});  // worker 1 was active
  // A report that claims a core twice: the second cannot be booked.
  ASSERT_TRUE(r.Handle(Attach(1, WorkerBuilder().Cpus(2),
                              {Running(T(1, 0), 1, {0}), Running(T(1, 1), 1, {0})}))
                  .ok());
  const std::vector<std::string> lines = r.Take();
  ASSERT_GE(lines.size(), 4u);
  EXPECT_EQ(lines[3], "kill 1.1#1 on w1: its resources are taken on this worker");
  const auto* kill = std::get_if<KillTask>(&r.last_raw()[5]);
  ASSERT_NE(kill, nullptr);
  EXPECT_TRUE(kill->hard);
  // The task itself is placed again as a new attempt on the free core.
  EXPECT_THAT(std::vector<std::string>(lines.begin() + 4, lines.end()),
              ElementsAre("claim 1.1#2 on w1 [lease:1:slot:1.1]", "state 1.1 queued->assigned #2"));
  // The killed attempt's end, from the same worker, does not pass for #2.
  TaskOutcome killed;
  killed.signal = 9;
  EXPECT_FALSE(r.Handle(TaskFinished{T(1, 1), 1, killed, 1}).ok());
  EXPECT_EQ(r.Task(T(1, 1)).state, TaskState::kAssigned);
}

TEST(AdoptTest, ReportsFromAnotherWorkerThanTheCurrentOneNeverCount) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Submit(JobBuilder(TaskBuilder()));
  c.Run(T(1, 0));
  SchedulerConfig no_hold;
  no_hold.restore_settle = Duration::zero();
  Restarted r(c, 1, {1}, no_hold);
  // Worker 2 attaches first and gets the task, with the same attempt number
  // as worker 1's attempt the journal never saw.
  ASSERT_TRUE(r.Handle(Attach(2, WorkerBuilder().Cpus(1), {})).ok());
  EXPECT_THAT(r.Take(),
              ElementsAre("claim 1.0#1 on w2 [lease:2:slot:1.0]", "state 1.0 queued->assigned #1"));
  ASSERT_TRUE(r.Handle(Attach(1, WorkerBuilder().Cpus(1), {Running(T(1, 0), 1, {0})})).ok());
  EXPECT_THAT(r.Take(), ElementsAre("kill 1.0#1 on w1: not current on the server"));
  // Worker 1's result (the kill, or a race) is stale; worker 2's counts.
  EXPECT_FALSE(r.Handle(TaskStarted{T(1, 0), 1, 1}).ok());
  EXPECT_FALSE(r.Handle(TaskFinished{T(1, 0), 1, {}, 1}).ok());
  EXPECT_EQ(r.Task(T(1, 0)).state, TaskState::kAssigned);
  ASSERT_TRUE(r.Handle(LeaseGranted{T(1, 0), 1}).ok());
  ASSERT_TRUE(r.Handle(TaskStarted{T(1, 0), 1, 2}).ok());
  ASSERT_TRUE(r.Handle(TaskFinished{T(1, 0), 1, {}, 2}).ok());
  EXPECT_EQ(r.Task(T(1, 0)).state, TaskState::kSucceeded);
  EXPECT_EQ(*r.Task(T(1, 0)).worker, 2u);
}

TEST(AdoptTest, UnknownAndEndedAttemptsAreKilled) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(2));
  c.Submit(JobBuilder(TaskBuilder()));
  c.Run(T(1, 0));
  c.Finish(T(1, 0));
  Restarted r(c, c.journal().size());  // everything durable: 1.0 succeeded
  ASSERT_TRUE(r.Handle(Attach(1, WorkerBuilder().Cpus(2),
                              {Running(T(1, 0), 2, {0}), Running(T(7, 0), 1, {1})}))
                  .ok());
  EXPECT_THAT(r.Take(), ElementsAre("kill 1.0#2 on w1: not current on the server",
                                    "kill 7.0#1 on w1: unknown task"));
  EXPECT_EQ(r.Task(T(1, 0)).state, TaskState::kSucceeded);
}

TEST(AdoptTest, ARestoredAttemptItsWorkerConfirmsIsRenewedAndNotRequeuedAtExpiry) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Submit(JobBuilder(TaskBuilder()));
  c.Run(T(1, 0));
  Restarted r(c, c.journal().size());
  ASSERT_TRUE(r.Handle(Attach(1, WorkerBuilder().Cpus(1), {Running(T(1, 0), 1, {0})})).ok());
  EXPECT_THAT(r.Take(), IsEmpty());
  // Past lease_ttl + expiry_grace (40 s): renewed all along, still running.
  for (int i = 0; i < 5; ++i) r.Advance(Seconds(10));
  std::vector<std::string> lines = r.Take();
  EXPECT_THAT(lines, ::testing::Contains("renew w1 [lease:1:slot:1.0]"));
  EXPECT_EQ(r.Task(T(1, 0)).state, TaskState::kRunning);
  ASSERT_TRUE(r.Handle(TaskFinished{T(1, 0), 1, {}, 1}).ok());
  EXPECT_EQ(r.Task(T(1, 0)).state, TaskState::kSucceeded);
}

TEST(AdoptTest, AnAssignedAttemptReportedRunningStartsAndAnUnreportedOneIsTakenBack) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(2));
  c.Submit(JobBuilder(TaskBuilder().Array(0, 2)));
  c.Grant(T(1, 0));
  Restarted r(c, c.journal().size());  // both assigned #1, durable
  ASSERT_TRUE(r.Handle(Attach(1, WorkerBuilder().Cpus(2), {Running(T(1, 0), 1, {0})})).ok());
  // 1.1 never reached the worker (or its claim was still pending when the
  // server died): it goes back at once and is placed again as #2.
  EXPECT_THAT(r.Take(),
              ElementsAre("release 1.1#1 on w1 [lease:1:slot:1.1]",
                          "state 1.1 assigned->queued #1: worker 1 re-attached without it (the "
                          "assignment did not reach it)",
                          "state 1.0 assigned->running #1", "claim 1.1#2 on w1 [lease:1:slot:1.1]",
                          "state 1.1 queued->assigned #2"));
  // A second attach of the same (live) worker changes nothing: 1.1#2's
  // claim is pending, so it was never sent.
  ASSERT_TRUE(r.Handle(Attach(1, WorkerBuilder().Cpus(2), {Running(T(1, 0), 1, {0})})).ok());
  EXPECT_THAT(r.Take(), IsEmpty());
}

TEST(AdoptTest, AnAdoptedAttemptWhoseClaimIsRejectedIsKilledAtOnce) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Submit(JobBuilder(TaskBuilder()));
  c.Run(T(1, 0));
  Restarted r(c, 1, {1});  // worker 1 was active
  ASSERT_TRUE(r.Handle(Attach(1, WorkerBuilder().Cpus(1), {Running(T(1, 0), 1, {0})})).ok());
  r.Take();
  ASSERT_TRUE(r.Handle(LeaseRejected{T(1, 0), 1}).ok());
  EXPECT_THAT(r.Take(), ElementsAre("kill 1.0#1 on w1: lease claim rejected"));
  EXPECT_TRUE(std::get<KillTask>(r.last_raw()[0]).hard);
}

// The settle window (SchedulerConfig::restore_settle). Worker 1 runs 1.0,
// worker 2 joins later; the server dies before 1.0's assignment is durable.
TestCluster& GapCluster(TestCluster& c) {
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Submit(JobBuilder(TaskBuilder()));
  c.Run(T(1, 0));
  c.AddWorker(WorkerBuilder().Cpus(1));
  return c;
}

TEST(SettleTest, WithoutAHoldTheTaskIsPlacedOnTheFirstWorkerBack) {
  // The gap the hold closes: worker 2 attaches first and gets 1.0, which
  // still runs on worker 1; it would run twice.
  TestCluster c;
  SchedulerConfig no_hold;
  no_hold.restore_settle = Duration::zero();
  Restarted r(GapCluster(c), 1, {1, 2}, no_hold);
  r.Take();
  ASSERT_TRUE(r.Handle(Attach(2, WorkerBuilder().Cpus(1), {})).ok());
  EXPECT_THAT(r.Take(), ElementsAre("claim 1.0#1 on w2 [lease:2:slot:1.0]",
                                    "state 1.0 queued->assigned #1"));
}

TEST(SettleTest, AfterARestartNothingIsPlacedUntilEveryKnownWorkerIsBack) {
  TestCluster c;
  Restarted r(GapCluster(c), 1, {1, 2});
  EXPECT_THAT(r.Take(), IsEmpty());
  EXPECT_EQ(r.sched().Explain(T(1, 0)).value(),
            "held: server restarted, waiting for workers to re-attach (0 of 2)");
  // A submitter is not told "no workers are connected" meanwhile.
  EXPECT_THAT(r.sched().Unrunnable(1).value(), IsEmpty());
  ASSERT_TRUE(r.Handle(Attach(2, WorkerBuilder().Cpus(1), {})).ok());
  EXPECT_THAT(r.Take(), IsEmpty());
  EXPECT_EQ(r.sched().Explain(T(1, 0)).value(),
            "held: server restarted, waiting for workers to re-attach (1 of 2)");
  r.Advance(Seconds(5));
  EXPECT_THAT(r.Take(), IsEmpty());
  // Worker 1 reports the attempt the journal never saw: adopted there, and
  // worker 2 never gets it.
  ASSERT_TRUE(r.Handle(Attach(1, WorkerBuilder().Cpus(1), {Running(T(1, 0), 1, {0})})).ok());
  EXPECT_THAT(r.Take(), ElementsAre("claim 1.0#1 on w1 [lease:1:slot:1.0]",
                                    "state 1.0 queued->assigned #1",
                                    "state 1.0 assigned->running #1"));
  EXPECT_EQ(r.Task(T(1, 0)).worker, 1u);
  EXPECT_EQ(r.Task(T(1, 0)).attempt, 1u);

  // The hold is over: a new task is placed at once, on the free worker.
  ASSERT_TRUE(r.Handle(JobSubmitted{0, JobBuilder(TaskBuilder()).Build()}).ok());
  EXPECT_THAT(r.Take(), ElementsAre("persist job 2", "claim 2.0#1 on w2 [lease:2:slot:2.0]",
                                    "state 2.0 queued->assigned #1"));
}

TEST(SettleTest, TheHoldEndsByTimerWhenAKnownWorkerNeverReturns) {
  TestCluster c;
  Restarted r(GapCluster(c), 1, {1, 2});
  ASSERT_TRUE(r.Handle(Attach(2, WorkerBuilder().Cpus(1), {})).ok());
  r.Advance(Seconds(10) - Micros(1));
  EXPECT_THAT(r.Take(), IsEmpty());
  EXPECT_EQ(r.Task(T(1, 0)).state, TaskState::kQueued);
  r.Advance(Micros(1));
  EXPECT_THAT(r.Take(), ElementsAre("claim 1.0#1 on w2 [lease:2:slot:1.0]",
                                    "state 1.0 queued->assigned #1"));
}

TEST(SettleTest, NoHoldWhenTheRestoredStateKnowsNoWorker) {
  TestCluster c;
  c.Submit(JobBuilder(TaskBuilder()));
  Restarted r(c, 1);
  ASSERT_TRUE(r.Handle(Attach(1, WorkerBuilder().Cpus(1), {})).ok());
  EXPECT_THAT(r.Take(), ElementsAre("claim 1.0#1 on w1 [lease:1:slot:1.0]",
                                    "state 1.0 queued->assigned #1"));
}

}  // namespace
}  // namespace drover::core
