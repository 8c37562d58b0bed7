// A worker's re-attach is the truth about it (WorkerAttached, events.h):
// what it does not report holding is taken back at once, a new offer
// replaces the old one, and only a worker a restore expected may have
// attempts the journal never saw adopted. Also: refusals and attempts never
// started within SchedulerConfig::start_timeout go back without costing a
// retry.
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

ReportedAttempt Running(TaskId t, uint32_t attempt, std::vector<uint32_t> cores) {
  return ReportedAttempt{t, attempt, std::move(cores), {}};
}

TaskFinished Finished(TaskId t, uint32_t attempt, int exit_code = 0) {
  TaskOutcome o;
  o.exit_code = exit_code;
  return TaskFinished{t, attempt, o};
}

// Commands described, task records left out (TestCluster::Take checks them).
std::vector<std::string> Describe(const std::vector<Command>& commands) {
  std::vector<std::string> lines;
  for (const Command& cmd : commands) {
    const auto* p = std::get_if<Persist>(&cmd);
    if (!p || !std::holds_alternative<TaskRecord>(p->record)) lines.push_back(DescribeCommand(cmd));
  }
  return lines;
}

WorkerAttached Attach(WorkerId w, const WorkerBuilder& resources,
                      std::vector<ReportedAttempt> running = {},
                      std::vector<TaskFinished> finished = {}) {
  return WorkerAttached{w, resources.Build(), std::move(running), std::move(finished)};
}

TEST(ReattachTest, ARestartedWorkerThatHoldsNothingGetsItsRunningTaskBackAtOnce) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Submit(JobBuilder(TaskBuilder()));
  c.Run(T(1, 0));
  c.Take();
  // kill -9 and start again under the same name: it reports nothing.
  c.Handle(Attach(1, WorkerBuilder().Cpus(1)));
  EXPECT_THAT(c.Take(),
              ElementsAre("release 1.0#1 on w1 [lease:1:slot:1.0]",
                          "state 1.0 running->queued #1: worker 1 re-attached without it",
                          "claim 1.0#2 on w1 [lease:1:slot:1.0]", "state 1.0 queued->assigned #2"));
  EXPECT_FALSE(c.scheduler().GetTask(T(1, 0))->retry_at.has_value());  // no retry used
}

TEST(ReattachTest, AnAssignmentLostWithTheOldConnectionIsPlacedAgain) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Submit(JobBuilder(TaskBuilder()));
  c.Grant(T(1, 0));  // the assignment went out on the old connection
  c.Take();
  c.Handle(Attach(1, WorkerBuilder().Cpus(1)));
  EXPECT_THAT(c.Take(),
              ElementsAre("release 1.0#1 on w1 [lease:1:slot:1.0]",
                          "state 1.0 assigned->queued #1: worker 1 re-attached without "
                          "it (the assignment did not reach it)",
                          "claim 1.0#2 on w1 [lease:1:slot:1.0]", "state 1.0 queued->assigned #2"));
  // The new attempt goes out on the new connection; the old one's late
  // start (it cannot come, but if it did) does not count.
  c.Grant(T(1, 0));
  EXPECT_THAT(c.Take(), ElementsAre("assign 1.0#2 on w1 cores=[0]"));
  EXPECT_FALSE(c.TryHandle(TaskStarted{T(1, 0), 1, 1}).ok());
}

TEST(ReattachTest, AClaimStillPendingIsLeftToItsGrant) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Submit(JobBuilder(TaskBuilder()));
  c.Take();
  c.Handle(Attach(1, WorkerBuilder().Cpus(1)));
  EXPECT_THAT(c.Take(), IsEmpty());
  c.Grant(T(1, 0));
  EXPECT_THAT(c.Take(), ElementsAre("assign 1.0#1 on w1 cores=[0]"));
}

TEST(ReattachTest, WhatTheWorkerReportsStaysAndItsResultsCount) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(2));
  c.Submit(JobBuilder(TaskBuilder().Array(0, 2)));
  c.Run(T(1, 0));
  c.Run(T(1, 1));
  c.Take();
  c.Handle(Attach(1, WorkerBuilder().Cpus(2), {Running(T(1, 0), 1, {0})}, {Finished(T(1, 1), 1)}));
  EXPECT_THAT(c.Take(), ElementsAre("release 1.1#1 on w1 [lease:1:slot:1.1]",
                                    "state 1.1 running->succeeded #1"));
  EXPECT_EQ(c.scheduler().GetTask(T(1, 0))->state, TaskState::kRunning);
}

TEST(ReattachTest, AWaiterAndItsPredecessorBothUnreportedGoBackInLine) {
  SchedulerConfig config;
  config.queue_ahead = true;
  TestCluster c(config);
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Submit(JobBuilder(TaskBuilder().Array(0, 2)));
  c.Run(T(1, 0));
  c.Grant(T(1, 1));  // sent, waiting behind 1.0
  c.Take();
  c.Handle(Attach(1, WorkerBuilder().Cpus(1)));
  EXPECT_THAT(c.Take(),
              ElementsAre("release 1.1#1 on w1 [lease:1:slot:1.1]",
                          "state 1.1 assigned->queued #1: worker 1 re-attached without "
                          "it (the assignment did not reach it)",
                          "release 1.0#1 on w1 [lease:1:slot:1.0]",
                          "state 1.0 running->queued #1: worker 1 re-attached without it",
                          "claim 1.0#2 on w1 [lease:1:slot:1.0]", "state 1.0 queued->assigned #2",
                          "claim 1.1#2 on w1 [lease:1:slot:1.1]", "state 1.1 queued->assigned #2"));
  EXPECT_EQ(c.scheduler().GetWorker(1)->free_cores, std::vector<uint32_t>{});
}

TEST(ReattachTest, ACancelLostWithTheOldConnectionIsSentAgain) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Submit(JobBuilder(TaskBuilder()));
  c.Run(T(1, 0));
  c.Take();
  c.Handle(CancelTask{T(1, 0)});
  EXPECT_THAT(c.Take(), ElementsAre("kill 1.0#1 on w1: canceled by user"));
  // The cancel went out on a connection that broke; the worker still runs it.
  c.Handle(Attach(1, WorkerBuilder().Cpus(1), {Running(T(1, 0), 1, {0})}));
  EXPECT_THAT(c.Take(), ElementsAre("kill 1.0#1 on w1: canceled by user"));
}

TEST(ReattachTest, ALostWorkerThatComesBackWithNothingDoesNotWaitForItsLeases) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Submit(JobBuilder(TaskBuilder()));
  c.Run(T(1, 0));
  c.Handle(WorkerLost{1});
  c.Take();
  c.Handle(Attach(1, WorkerBuilder().Cpus(1)));
  EXPECT_THAT(c.Take(),
              ElementsAre("release 1.0#1 on w1 [lease:1:slot:1.0]",
                          "state 1.0 running->queued #1: worker 1 re-attached without it",
                          "claim 1.0#2 on w1 [lease:1:slot:1.0]", "state 1.0 queued->assigned #2"));
}

TEST(ReattachTest, ARestoredTaskWhoseWorkerComesBackWithoutItIsRequeuedAtOnce) {
  // `drover up` restarted: its local workers attach at once, holding nothing.
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Submit(JobBuilder(TaskBuilder()));
  c.Run(T(1, 0));
  Scheduler restored;
  for (const Record& r : c.journal()) ASSERT_TRUE(restored.Restore(r).ok());
  const WorkerId expected[] = {1};
  restored.ExpectWorkers(expected);
  Outbox out;
  restored.FinishRestore(c.now(), out);
  out.clear();
  ASSERT_TRUE(restored.Handle(c.now(), Attach(1, WorkerBuilder().Cpus(1)), out).ok());
  EXPECT_THAT(Describe(out),
              ElementsAre("release 1.0#1 on w1 [lease:1:slot:1.0]",
                          "state 1.0 running->queued #1: worker 1 re-attached without it",
                          "claim 1.0#2 on w1 [lease:1:slot:1.0]", "state 1.0 queued->assigned #2"));
}

TEST(ReattachTest, ASmallerOfferStopsWhatNoLongerFitsWithoutCountingAFailure) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(2));
  c.Submit(JobBuilder(TaskBuilder().Array(0, 2)));
  c.Run(T(1, 0));
  c.Run(T(1, 1));
  c.Take();
  // Restarted with --cpus 0 while both still run (reported with their cores).
  c.Handle(
      Attach(1, WorkerBuilder().Cpus(1), {Running(T(1, 0), 1, {0}), Running(T(1, 1), 1, {1})}));
  EXPECT_THAT(c.Take(),
              ElementsAre("kill 1.1#1 on w1: worker 1 no longer offers its cores, memory or GPUs"));
  WorkerInfo info = c.scheduler().GetWorker(1).value();
  EXPECT_EQ(info.resources.cpu_cores, std::vector<uint32_t>{0});
  EXPECT_EQ(info.offer_changes, 1u);
  EXPECT_EQ(info.offer_changed_at, c.now());
  TaskOutcome killed;
  killed.signal = 9;
  c.FinishWith(T(1, 1), killed);
  EXPECT_THAT(c.Take(),
              ElementsAre("release 1.1#1 on w1 [lease:1:slot:1.1]", "persist outcome 1.1#1",
                          "state 1.1 running->queued #1: stopped: worker 1 no longer "
                          "offers its cores, memory or GPUs"));
  EXPECT_FALSE(c.scheduler().GetTask(T(1, 1))->retry_at.has_value());  // no retry used
  // It grows back to four cores: the queued task takes a new one at once.
  c.Handle(Attach(1, WorkerBuilder().Cpus(4), {Running(T(1, 0), 1, {0})}));
  EXPECT_THAT(c.Take(),
              ElementsAre("claim 1.1#2 on w1 [lease:1:slot:1.1]", "state 1.1 queued->assigned #2"));
  EXPECT_EQ(c.scheduler().GetWorker(1)->offer_changes, 2u);
  EXPECT_EQ(c.scheduler().GetWorker(1)->free_cores, (std::vector<uint32_t>{2, 3}));
}

TEST(ReattachTest, ARefusedAssignmentGoesElsewhereWithoutUsingARetry) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Submit(JobBuilder(TaskBuilder()));
  c.Grant(T(1, 0));
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Take();
  c.Handle(TaskRefused{T(1, 0), 1, 1, "core 0 is taken"});
  EXPECT_THAT(c.Take(),
              ElementsAre("release 1.0#1 on w1 [lease:1:slot:1.0]",
                          "state 1.0 assigned->queued #1: refused by worker 1: core 0 is taken",
                          "claim 1.0#2 on w2 [lease:2:slot:1.0]", "state 1.0 queued->assigned #2"));
  EXPECT_FALSE(c.scheduler().GetTask(T(1, 0))->retry_at.has_value());  // no retry used
}

TEST(ReattachTest, ARefusingWorkerTakesNothingUntilItsNextHeartbeat) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Submit(JobBuilder(TaskBuilder().Retries(0)));
  c.Grant(T(1, 0));
  c.Take();
  c.Handle(TaskRefused{T(1, 0), 1, 1, "core 0 is taken"});
  EXPECT_THAT(c.Take(),
              ElementsAre("release 1.0#1 on w1 [lease:1:slot:1.0]",
                          "state 1.0 assigned->queued #1: refused by worker 1: core 0 is taken"));
  EXPECT_TRUE(c.scheduler().GetWorker(1)->refusing);
  c.Handle(WorkerHeartbeat{1, {}});
  EXPECT_THAT(c.Take(),
              ElementsAre("claim 1.0#2 on w1 [lease:1:slot:1.0]", "state 1.0 queued->assigned #2"));
  // A refusal from another worker than the attempt's is stale.
  c.Grant(T(1, 0));
  c.Take();
  EXPECT_FALSE(c.TryHandle(TaskRefused{T(1, 0), 2, 2, "full"}).ok());
  EXPECT_THAT(c.Take(), IsEmpty());
}

TEST(ReattachTest, AnAttemptNeverStartedWithinTheBoundIsTakenBack) {
  SchedulerConfig config;
  config.start_timeout = Seconds(30);
  config.renew_interval = Seconds(100);
  TestCluster c(config);
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Submit(JobBuilder(TaskBuilder()));
  c.Advance(Seconds(1));  // the first tick renews (nothing yet)
  c.Grant(T(1, 0));
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Take();
  c.Advance(Seconds(29));
  EXPECT_THAT(c.Take(), IsEmpty());
  c.Advance(Seconds(1));
  std::vector<Command> raw = c.TakeRaw();
  ASSERT_FALSE(raw.empty());
  EXPECT_TRUE(std::get<KillTask>(raw[0]).hard);
  EXPECT_THAT(Describe(raw),
              ElementsAre("kill 1.0#1 on w1: worker 1 did not start it within 30s",
                          "release 1.0#1 on w1 [lease:1:slot:1.0]",
                          "state 1.0 assigned->queued #1: worker 1 did not start it within 30s; "
                          "taken back",
                          "claim 1.0#2 on w2 [lease:2:slot:1.0]", "state 1.0 queued->assigned #2"));
  EXPECT_FALSE(c.scheduler().GetTask(T(1, 0))->retry_at.has_value());  // no retry used
  // One that starts in time is left alone.
  c.Grant(T(1, 0));
  c.Start(T(1, 0));
  c.Take();
  c.Advance(Seconds(31));
  EXPECT_THAT(c.Take(), IsEmpty());
}

// A task whose dependencies left files gets longer to start: its worker
// fetches them first, at input_fetch_rate.
TEST(ReattachTest, TheStartBoundGrowsWithTheInputFilesToFetch) {
  SchedulerConfig config;
  config.start_timeout = Seconds(30);
  config.renew_interval = Seconds(100);
  config.input_fetch_rate = 10 << 20;  // 10 MiB/s: 200 MiB take 20 s more
  TestCluster c(config);
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Submit(JobBuilder().Add(TaskBuilder("prep")).Add(TaskBuilder("use").DependsOn("prep")));
  c.Run(T(1, 0));
  TaskOutcome o;
  o.outputs = {OutputFile{"data.bin", 200ull << 20, std::string(64, 'a')}};
  c.FinishWith(T(1, 0), o);
  c.Advance(Seconds(1));
  c.Grant(T(1, 1));
  c.Take();
  c.Advance(Seconds(49));
  EXPECT_THAT(c.Take(), IsEmpty()) << "30 s + 20 s for 200 MiB";
  c.Advance(Seconds(1));
  EXPECT_THAT(Describe(c.TakeRaw()),
              ::testing::Contains("kill 1.1#1 on w1: worker 1 did not start it within 50s"));
}

// --- adoption only for what the server may have assigned --------------------

TEST(ReattachTest, AttemptsTheJournalNeverSawAreAdoptedOnlyFromAnExpectedWorkersFirstAttach) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Submit(JobBuilder(TaskBuilder().Array(0, 3)));
  // Nothing assigned yet durable but the job: restored with worker 1 active.
  Scheduler restored;
  ASSERT_TRUE(restored.Restore(c.journal()[0]).ok());
  const WorkerId expected[] = {1};
  restored.ExpectWorkers(expected);
  Outbox out;
  restored.FinishRestore(c.now(), out);
  // A process that is not worker 1 claims attempt 7 of 1.0, finished.
  ASSERT_TRUE(
      restored.Handle(c.now(), Attach(9, WorkerBuilder().Cpus(1), {}, {Finished(T(1, 0), 7)}), out)
          .ok());
  EXPECT_EQ(restored.GetTask(T(1, 0))->state, TaskState::kQueued);
  // Worker 1's first attach adopts its own unjournaled result...
  ASSERT_TRUE(
      restored.Handle(c.now(), Attach(1, WorkerBuilder().Cpus(1), {}, {Finished(T(1, 1), 1)}), out)
          .ok());
  EXPECT_EQ(restored.GetTask(T(1, 1))->state, TaskState::kSucceeded);
  // ... but a later attach of the same worker cannot: this server has
  // heard all it holds already.
  ASSERT_TRUE(
      restored.Handle(c.now(), Attach(1, WorkerBuilder().Cpus(1), {}, {Finished(T(1, 2), 5)}), out)
          .ok());
  EXPECT_NE(restored.GetTask(T(1, 2))->state, TaskState::kSucceeded);
  EXPECT_NE(restored.GetTask(T(1, 2))->attempt, 5u);
}

TEST(ReattachTest, ATaskWhoseLabelsTheWorkerLacksIsNeverAdoptedFromIt) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(1).Label("os", "linux"));
  c.Submit(JobBuilder(TaskBuilder().Label("os", "windows")));
  Scheduler restored;
  ASSERT_TRUE(restored.Restore(c.journal()[0]).ok());
  const WorkerId expected[] = {1};
  restored.ExpectWorkers(expected);
  Outbox out;
  restored.FinishRestore(c.now(), out);
  out.clear();
  ASSERT_TRUE(restored
                  .Handle(c.now(),
                          Attach(1, WorkerBuilder().Cpus(1).Label("os", "linux"),
                                 {Running(T(1, 0), 2, {0})}, {}),
                          out)
                  .ok());
  EXPECT_EQ(restored.GetTask(T(1, 0))->state, TaskState::kQueued);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(DescribeCommand(out[0]), "kill 1.0#2 on w1: not current on the server");
}

}  // namespace
}  // namespace drover::core
