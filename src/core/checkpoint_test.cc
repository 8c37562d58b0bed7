// Checkpoints that follow a task (core/checkpoint.h): the latest manifest a
// task's current attempt saved is kept, journaled, restored, and carried by
// the next attempt's assignment wherever it goes; stale saves are ignored.
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

std::vector<OutputFile> Files(const std::string& step) {
  return {OutputFile{"step", step.size(), std::string(64, step.back())}};
}

// Commands described, task records and state lines left out.
std::vector<std::string> Lines(TestCluster& c) {
  std::vector<std::string> out;
  for (const std::string& line : c.Take()) {
    if (!line.starts_with("state ") && !line.starts_with("persist task")) out.push_back(line);
  }
  return out;
}

TEST(CheckpointTest, TheRunningAttemptsSaveGoesToTheNextAttempt) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Submit(JobBuilder(TaskBuilder().Retries(1, Seconds(1))));
  c.Run(T(1, 0));
  c.Take();
  c.Handle(CheckpointSaved{T(1, 0), 1, 1, Files("1")});
  c.Handle(CheckpointSaved{T(1, 0), 1, 1, Files("2")});
  EXPECT_THAT(Lines(c), ElementsAre("persist checkpoint 1.0#1 (1 files)",
                                    "persist checkpoint 1.0#1 (1 files)"));
  std::shared_ptr<const Checkpoint> kept = c.scheduler().GetTask(T(1, 0))->checkpoint;
  ASSERT_NE(kept, nullptr);
  EXPECT_EQ(kept->files, Files("2"));
  EXPECT_EQ(kept->worker, 1u);
  EXPECT_EQ(kept->saved_at, c.now());

  c.Finish(T(1, 0), 1);
  // The last save of an attempt comes with (just before) its end; one
  // arriving after it, before the retry is placed, still counts.
  c.Handle(CheckpointSaved{T(1, 0), 1, 1, Files("3")});
  c.Advance(Seconds(2));
  c.Grant(T(1, 0));
  const std::vector<std::string> lines = Lines(c);
  EXPECT_THAT(lines,
              ::testing::Contains("assign 1.0#2 on w1 cores=[0] checkpoint of #1 (1 files)"));
  EXPECT_EQ(c.scheduler().GetTask(T(1, 0))->checkpoint->files, Files("3"));
}

TEST(CheckpointTest, StaleOrForeignOrEmptySavesAreIgnored) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Submit(JobBuilder(TaskBuilder().Retries(2, Seconds(1))));
  c.Run(T(1, 0));
  const WorkerId on = *c.scheduler().GetTask(T(1, 0))->worker;
  const WorkerId other = on == 1 ? 2 : 1;
  c.Take();
  EXPECT_FALSE(c.TryHandle(CheckpointSaved{T(1, 0), 1, other, Files("1")}).ok());
  EXPECT_FALSE(c.TryHandle(CheckpointSaved{T(1, 0), 1, on, {}}).ok());
  EXPECT_FALSE(c.TryHandle(CheckpointSaved{T(1, 0), 2, on, Files("1")}).ok());
  EXPECT_FALSE(c.TryHandle(CheckpointSaved{T(9, 0), 1, on, Files("1")}).ok());
  EXPECT_THAT(Lines(c), IsEmpty());
  c.Handle(CheckpointSaved{T(1, 0), 1, on, Files("1")});
  c.Finish(T(1, 0), 1);
  c.Advance(Seconds(2));
  c.Grant(T(1, 0));
  c.Take();
  // Attempt 2 was assigned: attempt 1's late save is stale.
  EXPECT_FALSE(c.TryHandle(CheckpointSaved{T(1, 0), 1, on, Files("9")}).ok());
  EXPECT_EQ(c.scheduler().GetTask(T(1, 0))->checkpoint->files, Files("1"));
  EXPECT_THAT(Lines(c), IsEmpty());
}

TEST(CheckpointTest, JournalAndSnapshotBringTheLatestCheckpointBack) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Submit(JobBuilder(TaskBuilder().Retries(1, Seconds(1))));
  c.Run(T(1, 0));
  c.Handle(CheckpointSaved{T(1, 0), 1, 1, Files("1")});
  c.Advance(Seconds(1));
  c.Handle(CheckpointSaved{T(1, 0), 1, 1, Files("2")});
  c.Finish(T(1, 0), 1);
  c.Take();

  Scheduler replayed{SchedulerConfig{}};
  for (const Record& r : c.journal()) ASSERT_TRUE(replayed.Restore(r).ok());
  std::shared_ptr<const Checkpoint> back = replayed.GetTask(T(1, 0))->checkpoint;
  ASSERT_NE(back, nullptr);
  EXPECT_EQ(*back, *c.scheduler().GetTask(T(1, 0))->checkpoint);

  Scheduler from_snapshot{SchedulerConfig{}};
  for (const Record& r : c.scheduler().Snapshot()) ASSERT_TRUE(from_snapshot.Restore(r).ok());
  ASSERT_NE(from_snapshot.GetTask(T(1, 0))->checkpoint, nullptr);
  EXPECT_EQ(*from_snapshot.GetTask(T(1, 0))->checkpoint, *back);
}

TEST(CheckpointTest, AForgottenJobTakesItsCheckpointsAlong) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Submit(JobBuilder(TaskBuilder()));
  c.Run(T(1, 0));
  c.Handle(CheckpointSaved{T(1, 0), 1, 1, Files("1")});
  c.Finish(T(1, 0), 0);
  c.Take();
  ASSERT_TRUE(c.scheduler().ForgetJob(1).ok());
  for (const Record& r : c.scheduler().Snapshot()) {
    EXPECT_FALSE(std::holds_alternative<CheckpointRecord>(r));
  }
}

}  // namespace
}  // namespace drover::core
