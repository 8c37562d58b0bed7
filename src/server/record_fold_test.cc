#include "server/record_fold.h"

#include <gtest/gtest.h>

#include "core/scheduler.h"
#include "core/testing/test_cluster.h"

namespace drover::server {
namespace {

using core::TaskState;

std::shared_ptr<const core::JobSpec> TwoTaskJob() {
  auto spec = std::make_shared<core::JobSpec>();
  spec->name = "j";
  core::TaskGroupSpec g;
  g.name = "a";
  g.command = {"true"};
  g.array = core::ArrayRange{0, 2, 1};
  spec->groups.push_back(g);
  return spec;
}

core::TaskRecord Task(uint32_t index, TaskState state, uint32_t attempt) {
  core::TaskRecord r;
  r.task = TaskId{1, index};
  r.state = state;
  r.attempt = attempt;
  r.worker = attempt ? 5 : 0;
  r.at = TimeFromMicros(1000 + index);
  if (state == TaskState::kAssigned) r.cores = {index};
  return r;
}

// Attempts that sent their task back to the queue are kept, survive a
// snapshot (folding the snapshot gives them back), and the snapshot still
// restores the same task states as the live scheduler's.
TEST(RecordFoldTest, PastAttemptsSurviveTheSnapshotAndItStillRestores) {
  using core::testing::JobBuilder;
  using core::testing::T;
  using core::testing::TaskBuilder;
  using core::testing::TestCluster;
  using core::testing::WorkerBuilder;
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Submit(JobBuilder(TaskBuilder().Retries(2)));
  c.Run(T(1, 0));
  c.Finish(T(1, 0), 3);
  c.Advance(Seconds(3600));
  c.Run(T(1, 0));
  core::TaskOutcome measured;
  measured.exit_code = 4;
  measured.usage.cpu = Seconds(2);
  c.FinishWith(T(1, 0), measured);
  c.Advance(Seconds(3600));
  c.Run(T(1, 0));
  c.Finish(T(1, 0));
  c.Take();

  RecordFold fold;
  for (const core::Record& r : c.journal()) fold.Add(r);
  const std::vector<RecordFold::PastAttempt> past = fold.PastAttempts(T(1, 0));
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
  EXPECT_TRUE(fold.PastAttempts(T(1, 1)).empty());

  RecordFold again;
  core::Scheduler restored;
  for (const core::Record& r : fold.Snapshot()) {
    again.Add(r);
    ASSERT_TRUE(restored.Restore(r).ok());
  }
  const std::vector<RecordFold::PastAttempt> kept = again.PastAttempts(T(1, 0));
  ASSERT_EQ(kept.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(kept[i].attempt, past[i].attempt);
    EXPECT_EQ(kept[i].worker, past[i].worker);
    EXPECT_EQ(kept[i].started_at, past[i].started_at);
    EXPECT_EQ(kept[i].ended_at, past[i].ended_at);
    EXPECT_EQ(kept[i].reason, past[i].reason);
    EXPECT_EQ(kept[i].outcome, past[i].outcome);
  }
  core::Outbox out;
  restored.FinishRestore(c.now(), out);
  const core::TaskInfo live = *c.scheduler().GetTask(T(1, 0));
  const core::TaskInfo back = *restored.GetTask(T(1, 0));
  EXPECT_EQ(back.state, core::TaskState::kSucceeded);
  EXPECT_EQ(back.attempt, live.attempt);
  EXPECT_EQ(back.reason, live.reason);
  EXPECT_EQ(back.outcome, live.outcome);
}

TEST(RecordFoldTest, SnapshotKeepsLatestStateAndTheRunningAllocation) {
  RecordFold fold;
  fold.Add(core::JobRecord{1, TwoTaskJob(), TimeFromMicros(1)});
  fold.Add(Task(0, TaskState::kQueued, 0));
  fold.Add(Task(0, TaskState::kAssigned, 1));
  fold.Add(Task(0, TaskState::kRunning, 1));
  fold.Add(Task(1, TaskState::kAssigned, 1));
  fold.Add(Task(1, TaskState::kRunning, 1));
  core::OutcomeRecord out{TaskId{1, 1}, 1, {}, TimeFromMicros(9)};
  out.outcome.result = "r";
  fold.Add(out);
  fold.Add(Task(1, TaskState::kSucceeded, 1));

  std::vector<core::Record> snap = fold.Snapshot();
  ASSERT_EQ(snap.size(), 5u);
  EXPECT_TRUE(std::holds_alternative<core::JobRecord>(snap[0]));
  EXPECT_EQ(std::get<core::TaskRecord>(snap[1]), Task(0, TaskState::kAssigned, 1));
  EXPECT_EQ(std::get<core::TaskRecord>(snap[2]), Task(0, TaskState::kRunning, 1));
  EXPECT_EQ(std::get<core::OutcomeRecord>(snap[3]), out);
  EXPECT_EQ(std::get<core::TaskRecord>(snap[4]), Task(1, TaskState::kSucceeded, 1));
  EXPECT_EQ(fold.Spec(1)->name, "j");
  EXPECT_EQ(fold.Spec(2), nullptr);

  // The snapshot restores into a scheduler with the same task states.
  core::Scheduler s;
  for (const core::Record& r : snap) ASSERT_TRUE(s.Restore(r).ok());
  core::Outbox out_box;
  s.FinishRestore(TimeFromMicros(100), out_box);
  EXPECT_EQ(s.GetTask(TaskId{1, 0})->state, TaskState::kRunning);
  EXPECT_EQ(s.GetTask(TaskId{1, 1})->state, TaskState::kSucceeded);
  EXPECT_EQ(s.GetTask(TaskId{1, 1})->outcome->result, "r");
}

}  // namespace
}  // namespace drover::server
