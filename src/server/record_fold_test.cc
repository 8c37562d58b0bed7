#include "server/record_fold.h"

#include <gtest/gtest.h>

#include "core/scheduler.h"

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
