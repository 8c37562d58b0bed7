// Queue-ahead (SchedulerConfig::queue_ahead): a ready task that fits no free
// room is assigned behind a running task whose resources cover it, the
// resources pass from one to the other exactly once, nothing is overtaken,
// and the link survives a restart.
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

SchedulerConfig QueueAhead() {
  SchedulerConfig config;
  config.queue_ahead = true;
  return config;
}

std::vector<uint32_t> FreeCores(TestCluster& c, WorkerId w = 1) {
  return c.scheduler().GetWorker(w)->free_cores;
}

TEST(QueueAheadTest, TheNextTaskWaitsOnTheWorkerBehindTheRunningOne) {
  TestCluster c(QueueAhead());
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Submit(JobBuilder(TaskBuilder().Array(0, 3)));
  EXPECT_THAT(c.Take(), ElementsAre("claim 1.0#1 on w1 [lease:1:slot:1.0]",
                                    "state 1.0 queued->assigned #1",
                                    "claim 1.1#1 on w1 [lease:1:slot:1.1]",
                                    "state 1.1 queued->assigned #1"));
  c.Grant(T(1, 0));
  c.Grant(T(1, 1));
  EXPECT_THAT(c.Take(), ElementsAre("assign 1.0#1 on w1 cores=[0]",
                                    "assign 1.1#1 on w1 cores=[0] after 1.0#1"));
  EXPECT_THAT(FreeCores(c), IsEmpty());
  EXPECT_EQ(c.scheduler().GetTask(T(1, 1))->after, T(1, 0));
  EXPECT_EQ(c.scheduler().GetTask(T(1, 0))->after, std::nullopt);
  c.Start(T(1, 0));
  c.Take();

  // 1.0 ends: 1.1 holds core 0 now (the worker started it already), and 1.2
  // goes behind 1.1 at once.
  c.Finish(T(1, 0));
  EXPECT_THAT(c.Take(), ElementsAre("release 1.0#1 on w1 [lease:1:slot:1.0]",
                                    "state 1.0 running->succeeded #1",
                                    "claim 1.2#1 on w1 [lease:1:slot:1.2]",
                                    "state 1.2 queued->assigned #1"));
  EXPECT_THAT(FreeCores(c), IsEmpty());
  c.Start(T(1, 1));
  c.Grant(T(1, 2));
  EXPECT_THAT(c.Take(), ElementsAre("state 1.1 assigned->running #1",
                                    "assign 1.2#1 on w1 cores=[0] after 1.1#1"));
  c.Finish(T(1, 1));
  c.Start(T(1, 2));
  c.Finish(T(1, 2));
  c.Take();
  EXPECT_EQ(FreeCores(c), std::vector<uint32_t>{0});
}

TEST(QueueAheadTest, AStartReportedBeforeThePredecessorsEndBooksNothingTwice) {
  // The worker sends the next one's start right after the exit it saw; the
  // server may read them in either order.
  TestCluster c(QueueAhead());
  c.AddWorker(WorkerBuilder().Cpus(2));
  c.Submit(JobBuilder(TaskBuilder().Array(0, 3)));
  for (uint32_t i = 0; i < 3; ++i) c.Grant(T(1, i));
  c.Start(T(1, 0));
  c.Start(T(1, 1));
  c.Take();
  const std::vector<uint32_t> behind = c.scheduler().GetTask(T(1, 2))->cores;
  ASSERT_EQ(behind.size(), 1u);
  c.Start(T(1, 2));  // before the predecessor's end
  EXPECT_THAT(FreeCores(c), IsEmpty());
  const uint32_t other = behind[0] == 0 ? 1 : 0;
  // The predecessor is the task on the same core.
  const TaskId prev = c.scheduler().GetTask(T(1, 0))->cores[0] == behind[0] ? T(1, 0) : T(1, 1);
  const TaskId rest = prev == T(1, 0) ? T(1, 1) : T(1, 0);
  c.Finish(prev);
  EXPECT_THAT(FreeCores(c), IsEmpty());  // the core passed to the one behind
  c.Finish(rest);
  EXPECT_EQ(FreeCores(c), std::vector<uint32_t>{other});
  c.Finish(T(1, 2));
  EXPECT_EQ(FreeCores(c), (std::vector<uint32_t>{0, 1}));
}

TEST(QueueAheadTest, NothingOvertakesAHeadThatCannotQueue) {
  // Worker 2 runs two 1-core tasks; a 2-core task first in line can queue
  // behind neither, so a 1-core task behind it may not queue there and
  // start before it. It may queue on worker 1, where the big one never fits.
  TestCluster c(QueueAhead());
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Submit(JobBuilder(TaskBuilder()));  // job 1 on worker 1
  c.Run(T(1, 0));
  c.AddWorker(WorkerBuilder().Cpus(2));
  c.Submit(JobBuilder(TaskBuilder().Array(0, 2)));  // job 2: both cores of worker 2
  c.Run(T(2, 0));
  c.Run(T(2, 1));
  c.Take();
  c.Submit(JobBuilder(TaskBuilder().Cpus(2)));  // job 3: first in line
  EXPECT_THAT(c.Take(), IsEmpty());
  c.Submit(JobBuilder(TaskBuilder()));  // job 4: 1 core
  EXPECT_THAT(c.Take(), ElementsAre("claim 4.0#1 on w1 [lease:1:slot:4.0]",
                                    "state 4.0 queued->assigned #1"));
  c.Grant(T(4, 0));
  EXPECT_THAT(c.Take(), ElementsAre("assign 4.0#1 on w1 cores=[0] after 1.0#1"));
  c.Submit(JobBuilder(TaskBuilder()));  // job 5: nowhere to queue, no overtaking
  EXPECT_THAT(c.Take(), IsEmpty());
  // One core of worker 2 frees: held for the 2-core task, nothing queues.
  c.Finish(T(2, 0));
  EXPECT_THAT(c.Take(), ElementsAre("release 2.0#1 on w2 [lease:2:slot:2.0]",
                                    "state 2.0 running->succeeded #1"));
  c.Finish(T(2, 1));
  EXPECT_THAT(c.Take(), ElementsAre("release 2.1#1 on w2 [lease:2:slot:2.1]",
                                    "state 2.1 running->succeeded #1",
                                    "claim 3.0#1 on w2 [lease:2:slot:3.0]",
                                    "state 3.0 queued->assigned #1",
                                    // Job 5 now queues behind job 3.
                                    "claim 5.0#1 on w2 [lease:2:slot:5.0]",
                                    "state 5.0 queued->assigned #1"));
  c.Grant(T(3, 0));
  c.Grant(T(5, 0));
  EXPECT_THAT(c.Take(), ElementsAre("assign 3.0#1 on w2 cores=[0,1]",
                                    "assign 5.0#1 on w2 cores=[0] after 3.0#1"));
}

TEST(QueueAheadTest, GpuTasksAndBiggerTasksDoNotQueue) {
  TestCluster c(QueueAhead());
  c.AddWorker(WorkerBuilder().Cpus(3).Gpus(1));
  c.Submit(JobBuilder(TaskBuilder().Gpus(1)));
  c.Run(T(1, 0));
  c.Submit(JobBuilder(TaskBuilder().Gpus(1)));  // a GPU: leased per GPU, waits
  c.Submit(JobBuilder(TaskBuilder()));          // fits the free core
  std::vector<std::string> lines = c.Take();
  EXPECT_THAT(lines, ::testing::Not(::testing::Contains("claim 2.0#1 on w1 [lease:1:slot:2.0 "
                                                        "lease:1:gpu:0]")));
  EXPECT_EQ(c.scheduler().GetTask(T(2, 0))->state, TaskState::kQueued);
  EXPECT_EQ(c.scheduler().GetTask(T(3, 0))->state, TaskState::kAssigned);
}

TEST(QueueAheadTest, ACanceledWaiterFreesItsPlaceForTheNext) {
  TestCluster c(QueueAhead());
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Submit(JobBuilder(TaskBuilder().Array(0, 3)));
  c.Run(T(1, 0));
  c.Grant(T(1, 1));
  c.Take();
  ASSERT_TRUE(c.TryHandle(CancelTask{T(1, 1)}).ok());
  EXPECT_THAT(c.Take(), ElementsAre("kill 1.1#1 on w1: canceled by user"));
  // The worker drops it and reports it ended; 1.2 takes its place.
  c.Finish(T(1, 1), -1);
  EXPECT_THAT(c.Take(), ElementsAre("release 1.1#1 on w1 [lease:1:slot:1.1]",
                                    "persist outcome 1.1#1",
                                    "state 1.1 assigned->canceled #1: canceled by user",
                                    "claim 1.2#1 on w1 [lease:1:slot:1.2]",
                                    "state 1.2 queued->assigned #1"));
  c.Grant(T(1, 2));
  EXPECT_THAT(c.Take(), ElementsAre("assign 1.2#1 on w1 cores=[0] after 1.0#1"));
  EXPECT_THAT(FreeCores(c), IsEmpty());
}

TEST(QueueAheadTest, ALostWorkerRequeuesBothAndBooksNothingTwiceWhenItReturns) {
  TestCluster c(QueueAhead());
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Submit(JobBuilder(TaskBuilder().Array(0, 2)));
  c.Run(T(1, 0));
  c.Grant(T(1, 1));
  c.Handle(WorkerLost{1});
  c.Take();
  // Back before the leases expired: both keep their places, one core booked.
  c.Handle(WorkerJoined{1, WorkerBuilder().Cpus(1).Build()});
  EXPECT_THAT(FreeCores(c), IsEmpty());
  c.Advance(Seconds(60));  // nothing renewed them: both expire
  EXPECT_EQ(c.scheduler().GetTask(T(1, 0))->state, TaskState::kAssigned);
  EXPECT_EQ(c.scheduler().GetTask(T(1, 0))->attempt, 2u);
  EXPECT_EQ(c.scheduler().GetTask(T(1, 1))->attempt, 2u);
  EXPECT_THAT(FreeCores(c), IsEmpty());
}

// A scheduler restored from `c`'s whole journal, with the same config.
struct Restored {
  explicit Restored(const TestCluster& c) : sched(QueueAhead()), now(c.now()) {
    for (const Record& r : c.journal()) EXPECT_TRUE(sched.Restore(r).ok());
    sched.FinishRestore(now, out);
    out.clear();
  }
  Status Handle(Event e) { return sched.Handle(now, std::move(e), out); }
  std::vector<std::string> Take() {
    std::vector<std::string> lines;
    for (const Command& cmd : out) {
      const auto* p = std::get_if<Persist>(&cmd);
      if (p && std::holds_alternative<TaskRecord>(p->record)) continue;
      lines.push_back(DescribeCommand(cmd));
    }
    out.clear();
    return lines;
  }
  Scheduler sched;
  Time now;
  Outbox out;
};

TEST(QueueAheadTest, TheLinkIsJournaledAndARestartKeepsItsWaiterWaiting) {
  TestCluster c(QueueAhead());
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Submit(JobBuilder(TaskBuilder().Array(0, 3)));
  c.Run(T(1, 0));
  c.Grant(T(1, 1));
  bool linked = false;
  for (const Record& r : c.journal()) {
    const auto* rec = std::get_if<TaskRecord>(&r);
    if (rec && rec->task == T(1, 1) && rec->state == TaskState::kAssigned) {
      linked = rec->after == T(1, 0) && rec->after_attempt == 1;
    }
  }
  EXPECT_TRUE(linked);

  Restored r(c);
  // The worker still runs 1.0 and has 1.1 waiting behind it.
  ReportedAttempt queued{T(1, 1), 1, {0}, {}, true};
  ASSERT_TRUE(r.Handle(WorkerAttached{1, WorkerBuilder().Cpus(1).Build(),
                                      {ReportedAttempt{T(1, 0), 1, {0}, {}}, queued}, {}})
                  .ok());
  EXPECT_THAT(r.Take(), IsEmpty());  // confirmed: no kill, no start, nothing placed
  EXPECT_EQ(r.sched.GetTask(T(1, 1))->state, TaskState::kAssigned);
  EXPECT_THAT(r.sched.GetWorker(1)->free_cores, IsEmpty());
  // 1.0 ends: 1.1 takes the core; 1.2 goes behind it.
  TaskOutcome ok;
  ASSERT_TRUE(r.Handle(TaskFinished{T(1, 0), 1, ok, 1}).ok());
  EXPECT_THAT(r.Take(), ElementsAre("release 1.0#1 on w1 [lease:1:slot:1.0]",
                                    "state 1.0 running->succeeded #1",
                                    "claim 1.2#1 on w1 [lease:1:slot:1.2]",
                                    "state 1.2 queued->assigned #1"));
  EXPECT_THAT(r.sched.GetWorker(1)->free_cores, IsEmpty());
  // It runs and ends: its lease (claimed before the restart) is released.
  ASSERT_TRUE(r.Handle(TaskStarted{T(1, 1), 1, 1}).ok());
  ASSERT_TRUE(r.Handle(TaskFinished{T(1, 1), 1, ok, 1}).ok());
  EXPECT_THAT(r.Take(), ::testing::Contains("release 1.1#1 on w1 [lease:1:slot:1.1]"));
}

TEST(QueueAheadTest, ARestoredWaiterThatStartedBeforeItsPredecessorEndedBooksOnce) {
  TestCluster c(QueueAhead());
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Submit(JobBuilder(TaskBuilder().Array(0, 2)));
  c.Run(T(1, 0));
  c.Grant(T(1, 1));
  c.Start(T(1, 1));  // journaled running; 1.0's end was not durable yet

  Restored r(c);
  TaskOutcome ok;
  ASSERT_TRUE(r.Handle(WorkerAttached{1, WorkerBuilder().Cpus(1).Build(),
                                      {ReportedAttempt{T(1, 1), 1, {0}, {}}},
                                      {TaskFinished{T(1, 0), 1, ok, 1}}})
                  .ok());
  EXPECT_EQ(r.sched.GetTask(T(1, 0))->state, TaskState::kSucceeded);
  EXPECT_EQ(r.sched.GetTask(T(1, 1))->state, TaskState::kRunning);
  EXPECT_THAT(r.sched.GetWorker(1)->free_cores, IsEmpty());
  ASSERT_TRUE(r.Handle(TaskFinished{T(1, 1), 1, ok, 1}).ok());
  EXPECT_EQ(r.sched.GetWorker(1)->free_cores, std::vector<uint32_t>{0});
}

TEST(QueueAheadTest, RestoredWaitersStayBehindTheirPredecessors) {
  // Two cores, two running, two waiting; a new leader restores them and the
  // worker reports all four. Whether a restored waiter's assignment reached
  // the worker is not known from the journal, so none is moved or re-sent.
  TestCluster c(QueueAhead());
  c.AddWorker(WorkerBuilder().Cpus(2));
  c.Submit(JobBuilder(TaskBuilder().Array(0, 4)));
  for (uint32_t i = 0; i < 4; ++i) c.Grant(T(1, i));
  c.Start(T(1, 0));
  c.Start(T(1, 1));
  c.Take();
  std::vector<ReportedAttempt> running;
  for (uint32_t i = 0; i < 4; ++i) {
    running.push_back(ReportedAttempt{T(1, i), 1, c.scheduler().GetTask(T(1, i))->cores, {}, i >= 2});
  }
  Restored r(c);
  ASSERT_TRUE(r.Handle(WorkerAttached{1, WorkerBuilder().Cpus(2).Build(), running, {}}).ok());
  EXPECT_THAT(r.Take(), IsEmpty());
  EXPECT_THAT(r.sched.GetWorker(1)->free_cores, IsEmpty());
  // One of the running ones ends: its waiter takes its core, nothing moves.
  TaskOutcome ok;
  ASSERT_TRUE(r.Handle(TaskFinished{T(1, 0), 1, ok, 1}).ok());
  EXPECT_THAT(r.Take(), ElementsAre("release 1.0#1 on w1 [lease:1:slot:1.0]",
                                    "state 1.0 running->succeeded #1"));
  for (uint32_t i = 1; i < 4; ++i) EXPECT_EQ(r.sched.GetTask(T(1, i))->attempt, 1u) << i;
}

// A scheduler restored from `c`'s journal without 1.1's records (its
// assignment was not durable when the server died), then attached by a
// worker reporting `running`.
std::vector<std::string> RestartWithout11(const TestCluster& c, uint32_t cpus,
                                          std::vector<ReportedAttempt> running,
                                          Scheduler& fresh) {
  Outbox out;
  for (const Record& rec : c.journal()) {
    const auto* t = std::get_if<TaskRecord>(&rec);
    if (t && t->task == T(1, 1)) continue;
    EXPECT_TRUE(fresh.Restore(rec).ok());
  }
  fresh.FinishRestore(c.now(), out);
  out.clear();
  EXPECT_TRUE(fresh.Handle(c.now(),
                           WorkerAttached{1, WorkerBuilder().Cpus(cpus).Build(), std::move(running),
                                          {}},
                           out)
                  .ok());
  std::vector<std::string> lines;
  for (const Command& cmd : out) lines.push_back(DescribeCommand(cmd));
  return lines;
}

TEST(QueueAheadTest, AQueuedAttemptTheJournalNeverSawGoesBackBehindItsPredecessor) {
  TestCluster c(QueueAhead());
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Submit(JobBuilder(TaskBuilder().Array(0, 2)));  // 1.1 behind 1.0
  c.Run(T(1, 0));
  c.Grant(T(1, 1));
  Scheduler fresh(QueueAhead());
  // The worker reports the queued one first: it is handled after the others.
  std::vector<std::string> lines = RestartWithout11(
      c, 1, {ReportedAttempt{T(1, 1), 1, {0}, {}, true}, ReportedAttempt{T(1, 0), 1, {0}, {}}},
      fresh);
  EXPECT_THAT(lines, ::testing::Contains("claim 1.1#1 on w1 [lease:1:slot:1.1]"));
  EXPECT_THAT(lines, ::testing::Not(::testing::Contains(::testing::HasSubstr("kill"))));
  EXPECT_EQ(fresh.GetTask(T(1, 1))->state, TaskState::kAssigned);
  EXPECT_EQ(fresh.GetTask(T(1, 1))->after, T(1, 0));
}

TEST(QueueAheadTest, AQueuedAttemptTheJournalNeverSawWithNothingToWaitBehindIsDropped) {
  TestCluster c(QueueAhead());
  c.AddWorker(WorkerBuilder().Cpus(2));
  c.Submit(JobBuilder(TaskBuilder().Array(0, 2)));
  c.Run(T(1, 0));
  c.Run(T(1, 1));  // on core 1, not behind anything
  Scheduler fresh(QueueAhead());
  // Reported queued on core 1, which no attempt the server knows holds: no
  // place to wait in (a model of a report that does not fit the journal).
  std::vector<std::string> lines = RestartWithout11(
      c, 2, {ReportedAttempt{T(1, 0), 1, {0}, {}}, ReportedAttempt{T(1, 1), 1, {1}, {}, true}},
      fresh);
  EXPECT_THAT(lines, ::testing::Contains("kill 1.1#1 on w1: queued, not current on the server"));
  // Its number is used up: placed again, it is attempt 2.
  EXPECT_THAT(lines, ::testing::Contains("claim 1.1#2 on w1 [lease:1:slot:1.1]"));
}

// --- take-back: a waiter does not wait for a long predecessor while another
// worker frees first ---------------------------------------------------------

// Worker 1 runs 1.0, worker 2 runs 2.0 (both one core); 3.0 then waits
// behind 1.0, the one running longest (`granted`: its claim granted, so its
// assignment went out).
void WaiterBehindTheOlderOfTwo(TestCluster& c, bool granted = true) {
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Submit(JobBuilder(TaskBuilder()));
  c.Run(T(1, 0));
  c.Submit(JobBuilder(TaskBuilder()));
  c.Run(T(2, 0));
  c.Advance(std::chrono::seconds(1));
  c.Submit(JobBuilder(TaskBuilder()));
  if (granted) c.Grant(T(3, 0));
  c.Take();
  ASSERT_EQ(c.scheduler().GetTask(T(3, 0))->after, T(1, 0));
  ASSERT_EQ(*c.scheduler().Explain(T(3, 0)),
            std::string("waits behind 1.0 on worker 1") + (granted ? "" : " (lease claim pending)"));
}

TaskFinished NeverStartedReport(TaskId t, uint32_t attempt, std::string why) {
  TaskOutcome o;
  o.exit_code = -1;
  o.reason = std::move(why);
  TaskFinished f{t, attempt, std::move(o)};
  f.never_started = true;
  return f;
}

TEST(QueueAheadTest, AWaiterMovesToAWorkerThatFreesFirst) {
  TestCluster c(QueueAhead());
  WaiterBehindTheOlderOfTwo(c);
  c.Finish(T(2, 0));
  EXPECT_THAT(c.Take(), ElementsAre("release 2.0#1 on w2 [lease:2:slot:2.0]",
                                    "state 2.0 running->succeeded #1",
                                    "withdraw 3.0#1 on w1: room freed first on worker 2"));
  EXPECT_EQ(*c.scheduler().Explain(T(3, 0)),
            "moving to worker 2, where room freed first (waited behind 1.0 on worker 1)");
  // Worker 2's core is held for it: a later task neither takes it nor
  // queues there.
  c.Submit(JobBuilder(TaskBuilder()));
  EXPECT_THAT(c.Take(), IsEmpty());
  EXPECT_EQ(FreeCores(c, 2), std::vector<uint32_t>{0});
  // Worker 1 dropped it: it goes to worker 2 as attempt 2, no failure.
  c.Handle(NeverStartedReport(T(3, 0), 1, "withdrawn before it started: room freed first"));
  EXPECT_THAT(c.Take(),
              ElementsAre("release 3.0#1 on w1 [lease:1:slot:3.0]",
                          "state 3.0 assigned->queued #1: withdrawn before it started: room "
                          "freed first",
                          "claim 3.0#2 on w2 [lease:2:slot:3.0]", "state 3.0 queued->assigned #2",
                          // 4.0 now waits behind 1.0, where 3.0 waited.
                          "claim 4.0#1 on w1 [lease:1:slot:4.0]", "state 4.0 queued->assigned #1"));
  c.Grant(T(3, 0));
  EXPECT_THAT(c.Take(), ElementsAre("assign 3.0#2 on w2 cores=[0]"));
  EXPECT_THAT(FreeCores(c, 1), IsEmpty());
  EXPECT_THAT(FreeCores(c, 2), IsEmpty());
}

TEST(QueueAheadTest, AWithdrawalThatCrossesTheStartLeavesTheWaiterWhereItRuns) {
  TestCluster c(QueueAhead());
  WaiterBehindTheOlderOfTwo(c);
  c.Finish(T(2, 0));
  c.Take();
  // 1.0 exits and worker 1 starts 3.0 before the withdrawal reaches it; it
  // ignores the withdrawal. The hold on worker 2 ends, and the next task
  // gets worker 2.
  c.Finish(T(1, 0));
  c.Start(T(3, 0));
  c.Take();
  EXPECT_THAT(FreeCores(c, 1), IsEmpty());
  EXPECT_EQ(FreeCores(c, 2), std::vector<uint32_t>{0});
  c.Submit(JobBuilder(TaskBuilder()));
  EXPECT_THAT(c.Take(), ElementsAre("claim 4.0#1 on w2 [lease:2:slot:4.0]",
                                    "state 4.0 queued->assigned #1"));
  c.Finish(T(3, 0));
  EXPECT_THAT(c.Take(), ElementsAre("release 3.0#1 on w1 [lease:1:slot:3.0]",
                                    "state 3.0 running->succeeded #1"));
}

TEST(QueueAheadTest, AWaiterNotSentToItsWorkerYetMovesAtOnce) {
  TestCluster c(QueueAhead());
  WaiterBehindTheOlderOfTwo(c, /*granted=*/false);
  c.Finish(T(2, 0));
  EXPECT_THAT(c.Take(), ElementsAre("release 2.0#1 on w2 [lease:2:slot:2.0]",
                                    "state 2.0 running->succeeded #1",
                                    "release 3.0#1 on w1 [lease:1:slot:3.0]",
                                    "state 3.0 assigned->queued #1: moved before it was sent: "
                                    "room freed first on worker 2",
                                    "claim 3.0#2 on w2 [lease:2:slot:3.0]",
                                    "state 3.0 queued->assigned #2"));
  // The late grant of attempt 1 is stale.
  EXPECT_FALSE(c.TryHandle(LeaseGranted{T(3, 0), 1}).ok());
}

TEST(QueueAheadTest, AHigherPriorityTaskGetsTheFreedRoomInsteadOfTheWaiter) {
  TestCluster c(QueueAhead());
  WaiterBehindTheOlderOfTwo(c);
  // It needs memory, which neither running task holds: it cannot queue.
  c.Submit(JobBuilder(TaskBuilder().Priority(5).Mem(1 << 20)));
  EXPECT_THAT(c.Take(), IsEmpty());
  c.Finish(T(2, 0));
  EXPECT_THAT(c.Take(), ElementsAre("release 2.0#1 on w2 [lease:2:slot:2.0]",
                                    "state 2.0 running->succeeded #1",
                                    "claim 4.0#1 on w2 [lease:2:slot:4.0]",
                                    "state 4.0 queued->assigned #1"));
  EXPECT_EQ(c.scheduler().GetTask(T(3, 0))->after, T(1, 0));
}

// Queue-ahead never overtakes priority: a head of higher
// priority that cannot queue anywhere takes the place of a lower waiter,
// which is withdrawn and goes back to its queue without a failure.
TEST(QueueAheadTest, AHigherPriorityHeadTakesTheLowerWaitersPlace) {
  TestCluster c(QueueAhead());
  WaiterBehindTheOlderOfTwo(c);
  c.Submit(JobBuilder(TaskBuilder()));  // 4.0 waits behind 2.0
  c.Grant(T(4, 0));
  c.Take();
  ASSERT_EQ(c.scheduler().GetTask(T(4, 0))->after, T(2, 0));
  // 5.0 fits no free room and no free place in a queue: the last low
  // waiter makes way for it.
  c.Submit(JobBuilder(TaskBuilder().Priority(10)));
  EXPECT_THAT(c.Take(), ElementsAre("withdraw 4.0#1 on w2: task 5.0 of higher priority (10) takes "
                                    "its place"));
  EXPECT_EQ(*c.scheduler().Explain(T(4, 0)),
            "making way for 5.0 of higher priority (waited behind 2.0 on worker 2)");
  // Another task of that priority waits behind 5.0 in its queue: nothing
  // more is withdrawn while 5.0 is owed a place.
  c.Submit(JobBuilder(TaskBuilder().Priority(10)));
  EXPECT_THAT(c.Take(), IsEmpty());
  // Once 5.0 has its place, 6.0 is the head and takes the next one.
  c.Handle(NeverStartedReport(T(4, 0), 1, "withdrawn before it started"));
  EXPECT_THAT(c.Take(),
              ElementsAre("release 4.0#1 on w2 [lease:2:slot:4.0]",
                          "state 4.0 assigned->queued #1: withdrawn before it started",
                          "claim 5.0#1 on w2 [lease:2:slot:5.0]", "state 5.0 queued->assigned #1",
                          "withdraw 3.0#1 on w1: task 6.0 of higher priority (10) takes its "
                          "place"));
  EXPECT_EQ(c.scheduler().GetTask(T(5, 0))->after, T(2, 0));
  EXPECT_EQ(c.scheduler().GetTask(T(4, 0))->state, TaskState::kQueued);
  EXPECT_EQ(c.scheduler().GetTask(T(4, 0))->attempt, 1u);
  // 1.0 ends before the withdrawal of 3.0 reaches worker 1: 3.0 had the
  // room first and runs there.
  c.Finish(T(1, 0));
  c.Start(T(3, 0));
  c.Take();
  EXPECT_EQ(c.scheduler().GetTask(T(3, 0))->state, TaskState::kRunning);
}

// Equal priority: first come, first served, nothing is withdrawn.
TEST(QueueAheadTest, AnEqualPriorityHeadWaitsItsTurn) {
  TestCluster c(QueueAhead());
  WaiterBehindTheOlderOfTwo(c);
  c.Submit(JobBuilder(TaskBuilder()));  // 4.0 waits behind 2.0
  c.Take();
  c.Submit(JobBuilder(TaskBuilder()));
  EXPECT_THAT(c.Take(), IsEmpty());
  EXPECT_EQ(c.scheduler().GetTask(T(3, 0))->after, T(1, 0));
  EXPECT_EQ(c.scheduler().GetTask(T(4, 0))->after, T(2, 0));
}

TEST(QueueAheadTest, ACanceledWithdrawnWaiterEndsCanceled) {
  TestCluster c(QueueAhead());
  WaiterBehindTheOlderOfTwo(c);
  c.Finish(T(2, 0));
  c.Take();
  ASSERT_TRUE(c.TryHandle(CancelTask{T(3, 0)}).ok());
  EXPECT_THAT(c.Take(), ElementsAre("kill 3.0#1 on w1: canceled by user"));
  c.Handle(NeverStartedReport(T(3, 0), 1, "withdrawn before it started"));
  EXPECT_THAT(c.Take(), ElementsAre("release 3.0#1 on w1 [lease:1:slot:3.0]",
                                    "persist outcome 3.0#1",
                                    "state 3.0 assigned->canceled #1: canceled by user"));
  // The hold ended with it: worker 2 takes the next task.
  c.Submit(JobBuilder(TaskBuilder()));
  EXPECT_THAT(c.Take(), ElementsAre("claim 4.0#1 on w2 [lease:2:slot:4.0]",
                                    "state 4.0 queued->assigned #1"));
}

TEST(QueueAheadTest, AnAttemptDroppedBeforeItStartedIsNoFailure) {
  // A worker that loses the server drops what waits in its queue (fencing);
  // those attempts never ran, so they go back to the front of their queue
  // even without retries.
  TestCluster c(QueueAhead());
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Submit(JobBuilder(TaskBuilder().Array(0, 2)));
  c.Run(T(1, 0));
  c.Grant(T(1, 1));
  c.Take();
  c.Handle(NeverStartedReport(T(1, 1), 1, "no contact with the server for 30.0s"));
  EXPECT_THAT(c.Take(), ElementsAre("release 1.1#1 on w1 [lease:1:slot:1.1]",
                                    "state 1.1 assigned->queued #1: no contact with the server "
                                    "for 30.0s",
                                    "claim 1.1#2 on w1 [lease:1:slot:1.1]",
                                    "state 1.1 queued->assigned #2"));
}

TEST(QueueAheadTest, OffByDefault) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Submit(JobBuilder(TaskBuilder().Array(0, 2)));
  EXPECT_THAT(c.Take(), ElementsAre("claim 1.0#1 on w1 [lease:1:slot:1.0]",
                                    "state 1.0 queued->assigned #1"));
}

}  // namespace
}  // namespace drover::core
