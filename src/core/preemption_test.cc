// Preemption by priority (SchedulerConfig::preempt_priority, preemption.h):
// a waiting task of high priority stops tasks of lower priority on one
// worker, the room they free is kept for it, and a task preempted too often
// cools down.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/scheduler.h"
#include "core/testing/restore_check.h"
#include "core/testing/test_cluster.h"

namespace drover::core {
namespace {

using ::testing::ElementsAre;
using testing::FirstDifference;
using ::testing::IsEmpty;
using testing::JobBuilder;
using testing::RestoredFrom;
using testing::T;
using testing::TaskBuilder;
using testing::TestCluster;
using testing::WorkerBuilder;

constexpr Duration kOneMinute = Seconds(60);

// Tasks of priority 50 and above preempt; the default gap (10), count (3)
// and cool-down (10m).
SchedulerConfig Preemptive() {
  SchedulerConfig config;
  config.preempt_priority = 50;
  return config;
}

// What a worker reports for an attempt it vacated: stopped by the vacate
// signal, with the kill's reason.
TaskFinished Vacated(TaskId task, uint32_t attempt, const std::string& reason) {
  TaskOutcome o;
  o.exit_code = -1;
  o.signal = 15;
  o.reason = reason;
  TaskFinished f{task, attempt, o};
  f.vacated = true;
  return f;
}

TEST(PreemptionTest, NothingIsPreemptedWhenItIsOff) {
  for (const bool on : {false, true}) {
    SCOPED_TRACE(on ? "on" : "off (the default)");
    TestCluster c(on ? Preemptive() : SchedulerConfig{});
    c.AddWorker(WorkerBuilder().Cpus(4));
    c.Submit(JobBuilder(TaskBuilder().Cpus(4)));
    c.Run(T(1, 0));
    c.Take();
    c.Submit(JobBuilder(TaskBuilder().Cpus(4).Priority(1000)));
    c.Advance(Seconds(10));
    if (on) {
      EXPECT_THAT(c.Take(), ElementsAre("vacate 1.0#1 on w1: preempted by 2.0 (priority 1000)",
                                        "renew w1 [lease:1:slot:1.0]"));
      EXPECT_EQ(*c.scheduler().Explain(T(2, 0)), "preempting 1.0 on worker 1");
    } else {
      EXPECT_THAT(c.Take(), ElementsAre("renew w1 [lease:1:slot:1.0]"));
      EXPECT_EQ(*c.scheduler().Explain(T(2, 0)), "needs 4 cpus, largest free is 0");
    }
  }
}

TEST(PreemptionTest, TheFewestVictimsGo) {
  TestCluster c(Preemptive());
  c.AddWorker(WorkerBuilder().Cpus(4));
  c.Submit(JobBuilder(TaskBuilder().Cpus(2).Array(0, 2)));  // both on w1
  c.AddWorker(WorkerBuilder().Cpus(4));
  c.Submit(JobBuilder(TaskBuilder().Cpus(4)));  // on w2
  c.Run(T(2, 0));
  c.Advance(kOneMinute);  // w1's tasks start later: less work lost there, but two of them
  c.Run(T(1, 0));
  c.Run(T(1, 1));
  c.Take();
  c.Submit(JobBuilder(TaskBuilder().Cpus(4).Priority(90)));
  EXPECT_THAT(c.Take(), ElementsAre("vacate 2.0#1 on w2: preempted by 3.0 (priority 90)"));
  EXPECT_EQ(*c.scheduler().Explain(T(3, 0)), "preempting 2.0 on worker 2");
}

TEST(PreemptionTest, TheLowestPriorityGoesThenTheMostRecentlyStarted) {
  // w2's task started later, but w1's has the lower priority.
  {
    TestCluster c(Preemptive());
    c.AddWorker(WorkerBuilder().Cpus(4));
    c.Submit(JobBuilder(TaskBuilder().Cpus(4).Priority(0)));
    c.AddWorker(WorkerBuilder().Cpus(4));
    c.Submit(JobBuilder(TaskBuilder().Cpus(4).Priority(5)));
    c.Run(T(1, 0));
    c.Advance(kOneMinute);
    c.Run(T(2, 0));
    c.Take();
    c.Submit(JobBuilder(TaskBuilder().Cpus(4).Priority(90)));
    EXPECT_THAT(c.Take(), ElementsAre("vacate 1.0#1 on w1: preempted by 3.0 (priority 90)"));
  }
  // The same priority: the one that started last loses the least work.
  {
    TestCluster c(Preemptive());
    c.AddWorker(WorkerBuilder().Cpus(4));
    c.Submit(JobBuilder(TaskBuilder().Cpus(4)));
    c.AddWorker(WorkerBuilder().Cpus(4));
    c.Submit(JobBuilder(TaskBuilder().Cpus(4)));
    c.Run(T(1, 0));
    c.Advance(kOneMinute);
    c.Run(T(2, 0));
    c.Take();
    c.Submit(JobBuilder(TaskBuilder().Cpus(4).Priority(90)));
    EXPECT_THAT(c.Take(), ElementsAre("vacate 2.0#1 on w2: preempted by 3.0 (priority 90)"));
  }
}

TEST(PreemptionTest, OnOneWorkerTheLowestAndMostRecentAreTakenUntilItFits) {
  // Four 1-cpu tasks of priorities 3, 1, 2, 1; 4.0 started after 2.0.
  for (const auto& [cpus, victims] : std::vector<std::pair<int, std::vector<std::string>>>{
           {1, {"4.0"}}, {2, {"2.0", "4.0"}}, {3, {"2.0", "3.0", "4.0"}}}) {
    SCOPED_TRACE(std::to_string(cpus) + " cpus");
    TestCluster c(Preemptive());
    c.AddWorker(WorkerBuilder().Cpus(4));
    for (int32_t priority : {3, 1, 2, 1}) c.Submit(JobBuilder(TaskBuilder().Priority(priority)));
    for (JobId j = 1; j <= 4; ++j) {
      c.Run(T(j, 0));
      c.Advance(kOneMinute);
    }
    c.Take();
    c.Submit(JobBuilder(TaskBuilder().Cpus(cpus).Priority(90)));
    std::vector<std::string> expected;
    for (const std::string& v : victims) {
      expected.push_back("vacate " + v + "#1 on w1: preempted by 5.0 (priority 90)");
    }
    EXPECT_EQ(c.Take(), expected);
  }
}

TEST(PreemptionTest, VictimsAreOnTheOneWorkerWhereItThenFits) {
  TestCluster c(Preemptive());
  // Two small workers with tasks of the lowest priority: together they
  // would free 3 cpus, but 3 never fit on either.
  c.AddWorker(WorkerBuilder().Cpus(2));
  c.Submit(JobBuilder(TaskBuilder().Array(0, 2)));
  c.AddWorker(WorkerBuilder().Cpus(2));
  c.Submit(JobBuilder(TaskBuilder().Array(0, 2)));
  c.AddWorker(WorkerBuilder().Cpus(4));
  c.Submit(JobBuilder(TaskBuilder().Priority(5).Array(0, 4)));
  for (JobId j = 1; j <= 3; ++j) {
    for (uint32_t i = 0; i < (j == 3 ? 4u : 2u); ++i) {
      c.Run(T(j, i));
      c.Advance(kOneMinute);
    }
  }
  c.Take();
  c.Submit(JobBuilder(TaskBuilder().Cpus(3).Priority(90)));
  EXPECT_THAT(c.Take(), ElementsAre("vacate 3.1#1 on w3: preempted by 4.0 (priority 90)",
                                    "vacate 3.2#1 on w3: preempted by 4.0 (priority 90)",
                                    "vacate 3.3#1 on w3: preempted by 4.0 (priority 90)"));
}

// Queue-ahead: a task waiting on the worker behind a victim would take the
// victim's room as it ends; it is stopped with it.
TEST(PreemptionTest, ATaskWaitingBehindAVictimGoesWithIt) {
  SchedulerConfig config = Preemptive();
  config.queue_ahead = true;
  TestCluster c(config);
  c.AddWorker(WorkerBuilder().Cpus(4));
  c.Submit(JobBuilder(TaskBuilder().Cpus(4).Array(0, 2)));  // 1.1 waits behind 1.0
  c.Run(T(1, 0));
  c.Grant(T(1, 1));
  c.Take();
  c.Submit(JobBuilder(TaskBuilder().Cpus(4).Priority(90)));
  EXPECT_THAT(c.Take(), ElementsAre("vacate 1.0#1 on w1: preempted by 2.0 (priority 90)",
                                    "vacate 1.1#1 on w1: preempted by 2.0 (priority 90)"));
  // 1.0 ends first: the waiter takes over its room, still to be stopped.
  c.Handle(Vacated(T(1, 0), 1, "preempted by 2.0 (priority 90)"));
  EXPECT_THAT(c.Take(),
              ElementsAre("release 1.0#1 on w1 [lease:1:slot:1.0]", "persist outcome 1.0#1",
                          "state 1.0 running->queued #1: preempted by 2.0 (priority 90)"));
  EXPECT_EQ(*c.scheduler().Explain(T(2, 0)), "preempting 1.1 on worker 1");
  // The worker dropped it unstarted: now the room is free (and the next
  // task waits behind the preemptor).
  TaskOutcome dropped;
  dropped.reason = "preempted by 2.0 (priority 90)";
  TaskFinished f{T(1, 1), 1, dropped};
  f.never_started = true;
  c.Handle(f);
  EXPECT_THAT(c.Take(),
              ElementsAre("release 1.1#1 on w1 [lease:1:slot:1.1]",
                          "state 1.1 assigned->queued #1: preempted by 2.0 (priority 90)",
                          "claim 2.0#1 on w1 [lease:1:slot:2.0]", "state 2.0 queued->assigned #1",
                          "claim 1.1#2 on w1 [lease:1:slot:1.1]", "state 1.1 queued->assigned #2"));
}

TEST(PreemptionTest, NothingQueuesAheadOnTheHeldWorker) {
  SchedulerConfig config = Preemptive();
  config.queue_ahead = true;
  TestCluster c(config);
  c.AddWorker(WorkerBuilder().Cpus(4));
  c.Submit(JobBuilder(TaskBuilder().Cpus(4)));
  c.Run(T(1, 0));
  c.Take();
  c.Submit(JobBuilder(TaskBuilder().Cpus(4).Priority(90)));
  EXPECT_THAT(c.Take(), ElementsAre("vacate 1.0#1 on w1: preempted by 2.0 (priority 90)"));
  // It would wait behind 1.0, and take its room as it ends.
  c.Submit(JobBuilder(TaskBuilder().Cpus(3)));
  EXPECT_THAT(c.Take(), IsEmpty());
  c.Handle(Vacated(T(1, 0), 1, "preempted by 2.0 (priority 90)"));
  EXPECT_THAT(c.Take(),
              ElementsAre("release 1.0#1 on w1 [lease:1:slot:1.0]", "persist outcome 1.0#1",
                          "state 1.0 running->queued #1: preempted by 2.0 (priority 90)",
                          "claim 2.0#1 on w1 [lease:1:slot:2.0]", "state 2.0 queued->assigned #1",
                          "claim 3.0#1 on w1 [lease:1:slot:3.0]", "state 3.0 queued->assigned #1"));
  // Now it may wait behind the preemptor.
  EXPECT_EQ(c.scheduler().GetTask(T(3, 0))->after, T(2, 0));
}

TEST(PreemptionTest, NeverATaskThatIsNotPreemptibleNorOneWithinTheGap) {
  // w1 runs the lowest priority, but may not be preempted; w2's task is
  // within the gap (90 - 81 < 10); w3's, when there, is just far enough
  // below (90 - 80).
  for (const bool with_w3 : {false, true}) {
    SCOPED_TRACE(with_w3 ? "with w3" : "without w3");
    TestCluster c(Preemptive());
    c.AddWorker(WorkerBuilder().Cpus(4));
    c.Submit(JobBuilder(TaskBuilder().Cpus(4).Priority(0).Preemptible(false)));
    c.AddWorker(WorkerBuilder().Cpus(4));
    c.Submit(JobBuilder(TaskBuilder().Cpus(4).Priority(81)));
    c.AddWorker(WorkerBuilder().Cpus(4));
    c.Submit(JobBuilder(TaskBuilder().Cpus(4).Priority(with_w3 ? 80 : 81)));
    for (JobId j = 1; j <= 3; ++j) c.Run(T(j, 0));
    c.Take();
    c.Submit(JobBuilder(TaskBuilder().Cpus(4).Priority(90)));
    if (with_w3) {
      EXPECT_THAT(c.Take(), ElementsAre("vacate 3.0#1 on w3: preempted by 4.0 (priority 90)"));
    } else {
      EXPECT_THAT(c.Take(), IsEmpty());
      EXPECT_EQ(*c.scheduler().Explain(T(4, 0)), "needs 4 cpus, largest free is 0");
    }
  }
}

TEST(PreemptionTest, TheFreedRoomWaitsForThePreemptor) {
  TestCluster c(Preemptive());
  c.AddWorker(WorkerBuilder().Cpus(4));
  c.Submit(JobBuilder(TaskBuilder().Cpus(2).Array(0, 2)));  // on w1
  c.AddWorker(WorkerBuilder().Cpus(4));
  c.Submit(JobBuilder(TaskBuilder().Cpus(2).Array(0, 2)));  // on w2, started first
  c.Run(T(2, 0));
  c.Run(T(2, 1));
  c.Advance(kOneMinute);
  c.Run(T(1, 0));
  c.Run(T(1, 1));
  c.Take();
  c.Submit(JobBuilder(TaskBuilder().Cpus(4).Priority(90)));
  EXPECT_THAT(c.Take(), ElementsAre("vacate 1.0#1 on w1: preempted by 3.0 (priority 90)",
                                    "vacate 1.1#1 on w1: preempted by 3.0 (priority 90)"));
  // A short task of lower priority, which backfill would let into room
  // freed before a reservation's start.
  c.Submit(JobBuilder(TaskBuilder().Timeout(kOneMinute)));
  // One preemption at a time: the next Tick does not preempt w2's tasks
  // as well.
  c.Advance(Seconds(10));
  EXPECT_THAT(c.Take(), ElementsAre("renew w1 [lease:1:slot:1.0 lease:1:slot:1.1]",
                                    "renew w2 [lease:2:slot:2.0 lease:2:slot:2.1]"));

  c.Handle(Vacated(T(1, 0), 1, "preempted by 3.0 (priority 90)"));
  // Two cpus are free, and kept: neither the victim nor the short task
  // takes them.
  EXPECT_THAT(c.Take(),
              ElementsAre("release 1.0#1 on w1 [lease:1:slot:1.0]", "persist outcome 1.0#1",
                          "state 1.0 running->queued #1: preempted by 3.0 (priority 90)"));
  EXPECT_EQ(c.scheduler().GetWorker(1)->free_cores, (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(*c.scheduler().Explain(T(3, 0)), "preempting 1.1 on worker 1");
  EXPECT_EQ(*c.scheduler().Explain(T(4, 0)), "held back: preemption by 3.0 on worker 1");

  // The last victim's end: the preemptor starts there at once.
  c.Handle(Vacated(T(1, 1), 1, "preempted by 3.0 (priority 90)"));
  EXPECT_THAT(c.Take(),
              ElementsAre("release 1.1#1 on w1 [lease:1:slot:1.1]", "persist outcome 1.1#1",
                          "state 1.1 running->queued #1: preempted by 3.0 (priority 90)",
                          "claim 3.0#1 on w1 [lease:1:slot:3.0]", "state 3.0 queued->assigned #1"));
  // Both victims lost no retry, and their attempts say why they ended.
  for (uint32_t i = 0; i < 2; ++i) {
    const TaskInfo info = *c.scheduler().GetTask(T(1, i));
    EXPECT_EQ(info.state, TaskState::kQueued);
    EXPECT_FALSE(info.retry_at.has_value());
    const std::vector<PastAttempt> past = c.scheduler().PastAttempts(T(1, i));
    ASSERT_EQ(past.size(), 1u);
    EXPECT_EQ(past[0].reason, "preempted by 3.0 (priority 90)");
    EXPECT_EQ(past[0].kind, EndKind::kPreempted);
    std::unique_ptr<Scheduler> restored = RestoredFrom(c.journal(), c.now());
    ASSERT_NE(restored, nullptr);
    EXPECT_EQ(restored->PastAttempts(T(1, i)).at(0).kind, EndKind::kPreempted);
  }

  // When the preemptor ends, its room goes to the queues as usual: the
  // victims went back to the front of their class (the last first), and
  // the short task was queued before the other one went back.
  c.Run(T(3, 0));
  c.Finish(T(3, 0));
  EXPECT_THAT(
      c.Take(),
      ElementsAre("assign 3.0#1 on w1 cores=[0,1,2,3]", "state 3.0 assigned->running #1",
                  "release 3.0#1 on w1 [lease:1:slot:3.0]", "state 3.0 running->succeeded #1",
                  "claim 1.1#2 on w1 [lease:1:slot:1.1]", "state 1.1 queued->assigned #2",
                  "claim 4.0#1 on w1 [lease:1:slot:4.0]", "state 4.0 queued->assigned #1"));
}

TEST(PreemptionTest, ATaskPreemptedTooOftenCoolsDown) {
  for (const Duration cooldown : {10 * kOneMinute, Duration::zero()}) {
    SCOPED_TRACE("cool-down " + std::to_string(cooldown.count()) + "us");
    SchedulerConfig config = Preemptive();  // at most 3 times
    config.preempt_cooldown = cooldown;
    TestCluster c(config);
    c.AddWorker(WorkerBuilder().Cpus(4));
    c.Submit(JobBuilder(TaskBuilder().Cpus(4)));  // 1.0, no retries
    c.Run(T(1, 0));
    c.Take();
    for (uint32_t n = 1; n <= 3; ++n) {
      const JobId j = c.Submit(JobBuilder(TaskBuilder().Cpus(4).Priority(90)));
      const std::string why = "preempted by " + std::to_string(j) + ".0 (priority 90)";
      ASSERT_THAT(c.Take(), ElementsAre("vacate 1.0#" + std::to_string(n) + " on w1: " + why));
      c.Handle(Vacated(T(1, 0), n, why));
      c.Run(T(j, 0));
      c.Finish(T(j, 0));
      c.Run(T(1, 0));  // back on its worker
      ASSERT_EQ(c.scheduler().GetTask(T(1, 0))->attempt, n + 1);
      c.Take();
    }
    c.Submit(JobBuilder(TaskBuilder().Cpus(4).Priority(90)));  // 5.0
    if (cooldown == Duration::zero()) {
      EXPECT_THAT(c.Take(), ElementsAre("vacate 1.0#4 on w1: preempted by 5.0 (priority 90)"));
      continue;
    }
    // The fourth preemptor finds its only victim cooling down.
    EXPECT_THAT(c.Take(), IsEmpty());
    // The clock starts at 2001-09-09 01:46:40 UTC.
    EXPECT_EQ(*c.scheduler().Explain(T(5, 0)),
              "would preempt 1.0, in cool-down until 2001-09-09 01:56:40 UTC");

    // The counts live in memory: a restarted server preempts at once.
    std::unique_ptr<Scheduler> restarted = RestoredFrom(c.journal(), c.now(), config);
    ASSERT_NE(restarted, nullptr);
    WorkerAttached hello{1, WorkerBuilder().Cpus(4).Build(), {}, {}};
    hello.running.push_back(ReportedAttempt{T(1, 0), 4, {0, 1, 2, 3}, {}});
    Outbox out;
    ASSERT_TRUE(restarted->Handle(c.now(), std::move(hello), out).ok());
    std::vector<std::string> vacates;
    for (const Command& cmd : out) {
      if (const auto* k = std::get_if<KillTask>(&cmd); k != nullptr && k->vacate) {
        vacates.push_back(DescribeCommand(cmd));
      }
    }
    EXPECT_THAT(vacates, ElementsAre("vacate 1.0#4 on w1: preempted by 5.0 (priority 90)"));

    c.Advance(10 * kOneMinute - Seconds(1));
    EXPECT_THAT(c.Take(), ElementsAre("renew w1 [lease:1:slot:1.0]"));
    c.Advance(Seconds(1));
    EXPECT_THAT(c.Take(), ElementsAre("vacate 1.0#4 on w1: preempted by 5.0 (priority 90)"));
  }
}

TEST(PreemptionTest, PreemptedAttemptsAreNotFailures) {
  TestCluster c(Preemptive());
  c.AddWorker(WorkerBuilder().Cpus(4));
  c.Submit(JobBuilder(TaskBuilder().Cpus(4).Retries(0)));
  c.Run(T(1, 0));
  c.Submit(JobBuilder(TaskBuilder().Cpus(4).Priority(90)));
  c.Handle(Vacated(T(1, 0), 1, "preempted by 2.0 (priority 90)"));
  c.Run(T(2, 0));
  c.Finish(T(2, 0));
  c.Run(T(1, 0));
  c.Submit(JobBuilder(TaskBuilder().Cpus(4).Priority(60)));
  c.Take();
  // A worker that does not vacate kills it: that is no failure either.
  TaskOutcome killed;
  killed.signal = 15;
  c.FinishWith(T(1, 0), killed);
  EXPECT_THAT(c.Take(),
              ElementsAre("release 1.0#2 on w1 [lease:1:slot:1.0]", "persist outcome 1.0#2",
                          "state 1.0 running->queued #2: preempted by 3.0 (priority 60)",
                          "claim 3.0#1 on w1 [lease:1:slot:3.0]", "state 3.0 queued->assigned #1"));
  c.Run(T(3, 0));
  c.Finish(T(3, 0));
  c.Run(T(1, 0));
  c.Finish(T(1, 0));
  EXPECT_EQ(c.scheduler().GetTask(T(1, 0))->state, TaskState::kSucceeded);
  const std::vector<PastAttempt> past = c.scheduler().PastAttempts(T(1, 0));
  ASSERT_EQ(past.size(), 2u);
  EXPECT_EQ(past[0].reason, "preempted by 2.0 (priority 90)");
  EXPECT_EQ(past[1].reason, "preempted by 3.0 (priority 60)");
  // The journal never counted a failure.
  for (const Record& r : c.journal()) {
    if (const auto* t = std::get_if<TaskRecord>(&r); t != nullptr && t->task == T(1, 0)) {
      EXPECT_EQ(t->failures, 0u) << TaskStateName(t->state);
    }
  }
}

TEST(PreemptionTest, AVictimThatEndedWellFirstSucceeded) {
  TestCluster c(Preemptive());
  c.AddWorker(WorkerBuilder().Cpus(4));
  c.Submit(JobBuilder(TaskBuilder().Cpus(4)));
  c.Run(T(1, 0));
  c.Submit(JobBuilder(TaskBuilder().Cpus(4).Priority(90)));
  c.Take();
  c.Finish(T(1, 0));  // exit 0 before the stop reached it
  EXPECT_THAT(
      c.Take(),
      ElementsAre("release 1.0#1 on w1 [lease:1:slot:1.0]", "state 1.0 running->succeeded #1",
                  "claim 2.0#1 on w1 [lease:1:slot:2.0]", "state 2.0 queued->assigned #1"));
}

TEST(PreemptionTest, ALostWorkerEndsThePreemptionThere) {
  TestCluster c(Preemptive());
  c.AddWorker(WorkerBuilder().Cpus(4));
  c.Submit(JobBuilder(TaskBuilder().Cpus(4)));
  c.Run(T(1, 0));
  c.Advance(kOneMinute);
  c.AddWorker(WorkerBuilder().Cpus(4));
  c.Submit(JobBuilder(TaskBuilder().Cpus(4)));
  c.Run(T(2, 0));  // started last: the victim
  c.Take();
  c.Submit(JobBuilder(TaskBuilder().Cpus(4).Priority(90)));
  EXPECT_THAT(c.Take(), ElementsAre("vacate 2.0#1 on w2: preempted by 3.0 (priority 90)"));

  c.Handle(WorkerLost{2});
  EXPECT_THAT(c.Take(), IsEmpty());
  EXPECT_EQ(*c.scheduler().Explain(T(3, 0)), "needs 4 cpus, largest free is 0");
  // The next Tick preempts where it can now.
  c.Advance(Seconds(10));
  EXPECT_THAT(c.Take(), ElementsAre("renew w1 [lease:1:slot:1.0]",
                                    "vacate 1.0#1 on w1: preempted by 3.0 (priority 90)"));
  EXPECT_EQ(*c.scheduler().Explain(T(3, 0)), "preempting 1.0 on worker 1");
  // The lost victim's leases expire: it goes back as preempted, not as a
  // worker's loss, and the room on w1 stays kept for 3.0.
  c.Advance(Seconds(30));
  EXPECT_THAT(c.Take(), ElementsAre("state 2.0 running->queued #1: preempted by 3.0 (priority 90)",
                                    "renew w1 [lease:1:slot:1.0]"));
  c.Handle(Vacated(T(1, 0), 1, "preempted by 3.0 (priority 90)"));
  EXPECT_THAT(c.Take(),
              ElementsAre("release 1.0#1 on w1 [lease:1:slot:1.0]", "persist outcome 1.0#1",
                          "state 1.0 running->queued #1: preempted by 3.0 (priority 90)",
                          "claim 3.0#1 on w1 [lease:1:slot:3.0]", "state 3.0 queued->assigned #1"));
}

// Flags are not journaled: a server that restarts while a victim is being
// vacated learns of it from the worker, whose report says vacated, and that
// alone requeues it without a retry.
TEST(PreemptionTest, ARestartInTheMiddleOfAVacate) {
  const SchedulerConfig config = Preemptive();
  TestCluster c(config);
  c.AddWorker(WorkerBuilder().Cpus(4));
  c.Submit(JobBuilder(TaskBuilder().Cpus(4)));  // no retries
  c.Run(T(1, 0));
  c.Take();
  c.Submit(JobBuilder(TaskBuilder().Cpus(4).Priority(90)));
  ASSERT_THAT(c.Take(), ElementsAre("vacate 1.0#1 on w1: preempted by 2.0 (priority 90)"));

  std::vector<Record> journal = c.journal();
  std::unique_ptr<Scheduler> s = RestoredFrom(journal, c.now(), config);
  ASSERT_NE(s, nullptr);
  WorkerAttached hello{1, WorkerBuilder().Cpus(4).Build(), {}, {}};
  hello.finished.push_back(Vacated(T(1, 0), 1, "preempted by 2.0 (priority 90)"));
  Outbox out;
  ASSERT_TRUE(s->Handle(c.now(), std::move(hello), out).ok());
  std::vector<std::string> lines;
  for (const Command& cmd : out) {
    if (const auto* p = std::get_if<Persist>(&cmd)) {
      journal.push_back(p->record);
      if (std::holds_alternative<TaskRecord>(p->record)) continue;
    }
    lines.push_back(DescribeCommand(cmd));
  }
  EXPECT_THAT(lines,
              ElementsAre("release 1.0#1 on w1 [lease:1:slot:1.0]", "persist outcome 1.0#1",
                          "state 1.0 running->queued #1: preempted by 2.0 (priority 90)",
                          "claim 2.0#1 on w1 [lease:1:slot:2.0]", "state 2.0 queued->assigned #1"));
  const TaskInfo victim = *s->GetTask(T(1, 0));
  EXPECT_EQ(victim.state, TaskState::kQueued);
  EXPECT_EQ(victim.reason, "preempted by 2.0 (priority 90)");
  EXPECT_FALSE(victim.retry_at.has_value());
  ASSERT_EQ(s->PastAttempts(T(1, 0)).size(), 1u);
  EXPECT_EQ(s->PastAttempts(T(1, 0))[0].reason, "preempted by 2.0 (priority 90)");
  // Known from the worker's report alone: a vacate, in its words.
  EXPECT_EQ(s->PastAttempts(T(1, 0))[0].kind, EndKind::kVacated);
  EXPECT_EQ(victim.reason_kind, EndKind::kVacated);
  // Its journal and its snapshot restore alike.
  std::unique_ptr<Scheduler> from_journal = RestoredFrom(journal, c.now(), config);
  std::unique_ptr<Scheduler> from_snapshot = RestoredFrom(s->Snapshot(), c.now(), config);
  ASSERT_NE(from_journal, nullptr);
  ASSERT_NE(from_snapshot, nullptr);
  EXPECT_EQ(FirstDifference(*from_journal, *from_snapshot), "");
  EXPECT_EQ(from_journal->PastAttempts(T(1, 0)).at(0).kind, EndKind::kVacated);
  EXPECT_EQ(from_journal->GetTask(T(1, 0))->reason_kind, EndKind::kVacated);
  EXPECT_EQ(FirstDifference(*s, *from_snapshot), "");
}

}  // namespace
}  // namespace drover::core
