// Scheduler::Snapshot: the state as records, restoring to what replaying the
// whole journal restores; past attempts, last changes and forgotten ids.
#include <gtest/gtest.h>

#include "core/scheduler.h"
#include "core/testing/restore_check.h"
#include "core/testing/test_cluster.h"

namespace drover::core {
namespace {

using testing::FirstDifference;
using testing::JobBuilder;
using testing::RestoredFrom;
using testing::T;
using testing::TaskBuilder;
using testing::TestCluster;
using testing::WorkerBuilder;

// Replaying the journal and replaying the snapshot give the same scheduler;
// so does replaying the snapshot of the snapshot's scheduler.
void ExpectSnapshotRestoresAsTheJournal(TestCluster& c) {
  std::string error;
  std::unique_ptr<Scheduler> from_journal = RestoredFrom(c.journal(), c.now(), {}, &error);
  ASSERT_NE(from_journal, nullptr) << error;
  std::unique_ptr<Scheduler> from_snapshot =
      RestoredFrom(c.scheduler().Snapshot(), c.now(), {}, &error);
  ASSERT_NE(from_snapshot, nullptr) << error;
  EXPECT_EQ(FirstDifference(*from_journal, *from_snapshot), "");
  std::unique_ptr<Scheduler> again = RestoredFrom(from_snapshot->Snapshot(), c.now(), {}, &error);
  ASSERT_NE(again, nullptr) << error;
  EXPECT_EQ(FirstDifference(*from_snapshot, *again), "");
}

// Attempts that sent their task back to the queue are kept by the core,
// survive a snapshot, and the snapshot restores as the journal does.
TEST(SnapshotTest, PastAttemptsSurviveTheSnapshot) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Submit(JobBuilder(TaskBuilder().Retries(2)));
  c.Run(T(1, 0));
  c.Finish(T(1, 0), 3);
  c.Advance(Seconds(3600));
  c.Run(T(1, 0));
  TaskOutcome measured;
  measured.exit_code = 4;
  measured.usage.cpu = Seconds(2);
  c.FinishWith(T(1, 0), measured);
  c.Advance(Seconds(3600));
  c.Run(T(1, 0));
  c.Finish(T(1, 0));
  c.Take();

  const std::vector<PastAttempt> past = c.scheduler().PastAttempts(T(1, 0));
  ASSERT_EQ(past.size(), 2u);
  EXPECT_EQ(past[0].attempt, 1u);
  EXPECT_EQ(past[0].worker, 1u);
  EXPECT_TRUE(past[0].started_at.has_value());
  EXPECT_NE(past[0].reason.find("exit code 3"), std::string::npos) << past[0].reason;
  ASSERT_TRUE(past[0].outcome.has_value());
  EXPECT_EQ(past[0].outcome->exit_code, 3);
  EXPECT_EQ(past[1].attempt, 2u);
  ASSERT_TRUE(past[1].outcome.has_value());
  EXPECT_EQ(past[1].outcome->usage.cpu, Seconds(2));
  EXPECT_TRUE(c.scheduler().PastAttempts(T(1, 1)).empty());  // no such task

  std::unique_ptr<Scheduler> back = RestoredFrom(c.scheduler().Snapshot(), c.now());
  ASSERT_NE(back, nullptr);
  EXPECT_EQ(back->PastAttempts(T(1, 0)), past);
  EXPECT_EQ(back->GetTask(T(1, 0))->state, TaskState::kSucceeded);
  EXPECT_EQ(back->GetTask(T(1, 0))->started_at, c.scheduler().GetTask(T(1, 0))->started_at);
  ExpectSnapshotRestoresAsTheJournal(c);
}

// Running, assigned, queued-behind-a-retry, succeeded with a result and
// untouched tasks: the snapshot writes only what differs from a fresh job,
// and keeps the running task's cores.
TEST(SnapshotTest, LatestStatesAndTheRunningAllocation) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(3));
  c.Submit(JobBuilder(TaskBuilder("a").Array(0, 6).Retries(1)));
  c.Run(T(1, 0));
  c.Grant(T(1, 1));  // assigned, not started
  c.Run(T(1, 2));
  TaskOutcome result;
  result.result = "r";
  c.FinishWith(T(1, 2), result);
  c.Run(T(1, 3));
  c.Finish(T(1, 3), 1);  // queued for its retry, backing off
  c.Take();

  const std::vector<Record> snap = c.scheduler().Snapshot();
  size_t task_records = 0;
  for (const Record& r : snap) {
    if (const auto* t = std::get_if<TaskRecord>(&r)) {
      ++task_records;
      EXPECT_NE(t->task.index, 5u) << "an untouched task needs no record";
      if (t->task == T(1, 0) && t->state == TaskState::kAssigned) {
        EXPECT_EQ(t->cores.size(), 1u);
      }
    }
  }
  // 0: assigned + running; 1: assigned; 2: succeeded; 3: a past attempt
  // (running, queued) and its latest queued record; 4: placed after the
  // retry's backoff freed a core (assigned).
  EXPECT_GE(task_records, 7u);
  ExpectSnapshotRestoresAsTheJournal(c);
}

// A forgotten job leaves the snapshot; when it had the highest id, a
// tombstone keeps that id from being given again after a restore.
TEST(SnapshotTest, ForgottenHighestJobKeepsItsId) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(1));
  const JobId first = c.Submit(JobBuilder(TaskBuilder()));
  const JobId second = c.Submit(JobBuilder(TaskBuilder()));
  c.Run(T(first, 0));
  c.Finish(T(first, 0));
  c.Run(T(second, 0));
  c.Finish(T(second, 0), 2);
  c.Take();
  EXPECT_EQ(c.scheduler().LastChange(second), c.now());
  ASSERT_TRUE(c.scheduler().ForgetJob(second).ok());
  EXPECT_TRUE(c.scheduler().Forgotten(second));
  EXPECT_FALSE(c.scheduler().Forgotten(first));
  EXPECT_FALSE(c.scheduler().Forgotten(second + 1));
  EXPECT_EQ(c.scheduler().LastChange(second), std::nullopt);

  std::unique_ptr<Scheduler> back = RestoredFrom(c.scheduler().Snapshot(), c.now());
  ASSERT_NE(back, nullptr);
  EXPECT_EQ(back->Jobs(), std::vector<JobId>{first});
  EXPECT_TRUE(back->Forgotten(second));
  // The journal with the job's records and then its tombstone restores the
  // same: the job is dropped at its tombstone.
  std::vector<Record> journal = c.journal();
  journal.emplace_back(std::in_place_type<JobRecord>, second, nullptr, c.now());
  std::unique_ptr<Scheduler> replayed = RestoredFrom(journal, c.now());
  ASSERT_NE(replayed, nullptr);
  EXPECT_EQ(FirstDifference(*replayed, *back), "");

  Outbox out;
  Result<JobId> next = back->Submit(c.now(), JobBuilder(TaskBuilder()).Build(), out);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(*next, second + 1);
}

// A snapshot taken while restoring (a standby's replay, which never
// finishes) holds what the records said, assignments' cores included.
TEST(SnapshotTest, SnapshotWhileRestoring) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(2));
  c.Submit(JobBuilder(TaskBuilder().Array(0, 3)));
  c.Run(T(1, 0));
  c.Grant(T(1, 1));
  c.Take();
  Scheduler replaying;
  for (const Record& r : c.journal()) ASSERT_TRUE(replaying.Restore(r).ok());
  std::unique_ptr<Scheduler> from_replaying = RestoredFrom(replaying.Snapshot(), c.now());
  std::unique_ptr<Scheduler> from_journal = RestoredFrom(c.journal(), c.now());
  ASSERT_NE(from_replaying, nullptr);
  ASSERT_NE(from_journal, nullptr);
  EXPECT_EQ(FirstDifference(*from_journal, *from_replaying), "");
  EXPECT_EQ(from_replaying->GetTask(T(1, 1))->cores.size(), 1u);
}

}  // namespace
}  // namespace drover::core
