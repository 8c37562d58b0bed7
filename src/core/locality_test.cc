// Data locality: a ready task goes to the worker that holds the
// most of its input bytes when it fits there now and the policy ranks that
// worker equal within its tolerance; never a reason to wait. Jobs submitted
// --after a task receive its files too.
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

using testing::JobBuilder;
using testing::T;
using testing::TaskBuilder;
using testing::TestCluster;
using testing::WorkerBuilder;

TaskOutcome WithFile(const std::string& name, uint64_t size) {
  TaskOutcome o;
  o.outputs = {OutputFile{name, size, std::string(64, 'b')}};
  return o;
}

constexpr uint64_t kBig = 8ull << 20;

WorkerId WorkerOf(TestCluster& c, TaskId t) { return c.scheduler().GetTask(t)->worker.value_or(0); }

// Three idle one-core workers; prep is pinned to worker 2, which spread
// ranks after worker 1 when all are idle (the lower slot).
struct Pool {
  explicit Pool(TestCluster& c) {
    c.AddWorker(WorkerBuilder().Cpus(1));
    c.AddWorker(WorkerBuilder().Cpus(1).Label("at", "b"));
    c.AddWorker(WorkerBuilder().Cpus(1));
  }
};

JobBuilder PrepThenTrain() {
  JobBuilder job;
  job.Add(TaskBuilder("prep").Label("at", "b"));
  job.Add(TaskBuilder("train").DependsOn("prep"));
  return job;
}

TEST(LocalityTest, ADependentGoesWhereItsInputsAre) {
  TestCluster c;
  Pool pool(c);
  c.Submit(PrepThenTrain());
  ASSERT_EQ(WorkerOf(c, T(1, 0)), 2u);
  c.Run(T(1, 0));
  c.FinishWith(T(1, 0), WithFile("data.bin", kBig));
  ASSERT_EQ(c.scheduler().GetTask(T(1, 1))->state, TaskState::kAssigned);
  EXPECT_EQ(WorkerOf(c, T(1, 1)), 2u) << "spread alone picks worker 1";
}

TEST(LocalityTest, WithoutTheTermOrWithSmallInputsThePolicyDecides) {
  for (bool on : {false, true}) {
    SchedulerConfig config;
    config.locality = on;
    TestCluster c(config);
    Pool pool(c);
    c.Submit(PrepThenTrain());
    c.Run(T(1, 0));
    c.FinishWith(T(1, 0), WithFile("data.bin", on ? kLocalityMinBytes - 1 : kBig));
    EXPECT_EQ(WorkerOf(c, T(1, 1)), 1u) << (on ? "small input" : "locality off");
  }
}

TEST(LocalityTest, ABusyHolderIsNotWaitedFor) {
  TestCluster c;
  Pool pool(c);
  JobBuilder job = PrepThenTrain();
  job.Add(TaskBuilder("hog").Label("at", "b").DependsOn("prep"));
  c.Submit(job);
  c.Run(T(1, 0));
  // hog (submitted after train, same priority) would take worker 2 only
  // after train; make worker 2 full first with another job pinned there.
  c.Submit(JobBuilder(TaskBuilder("other").Label("at", "b")));
  c.FinishWith(T(1, 0), WithFile("data.bin", kBig));
  ASSERT_EQ(WorkerOf(c, T(2, 0)), 2u) << "worker 2 is full once prep ends";
  EXPECT_EQ(c.scheduler().GetTask(T(1, 1))->state, TaskState::kAssigned);
  EXPECT_NE(WorkerOf(c, T(1, 1)), 2u) << "train starts elsewhere at once";
}

TEST(LocalityTest, AHolderBusierThanTheToleranceIsPassedOver) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(4));
  c.AddWorker(WorkerBuilder().Cpus(4).Label("at", "b"));
  JobBuilder job;
  job.Add(TaskBuilder("prep").Label("at", "b"));
  job.Add(TaskBuilder("train").DependsOn("prep"));
  c.Submit(job);
  // Two long tasks pinned to worker 2 make it two tasks busier than
  // worker 1 once prep ends: beyond spread's tolerance of one.
  c.Submit(JobBuilder(TaskBuilder("a").Label("at", "b")));
  c.Submit(JobBuilder(TaskBuilder("b").Label("at", "b")));
  c.Run(T(1, 0));
  c.Run(T(2, 0));
  c.Run(T(3, 0));
  c.FinishWith(T(1, 0), WithFile("data.bin", kBig));
  EXPECT_EQ(WorkerOf(c, T(1, 1)), 1u);
}

// The claim in design.md's "Locality": a worker whose slot frees takes its
// queue's head whatever its inputs. train waits at the head while the
// holder of its input (worker 2) is busy; when worker 1 frees, train takes
// it rather than leaving it to a task behind it without inputs (and
// rather than waiting for worker 2).
TEST(LocalityTest, AFreedSlotTakesTheQueuesHeadWhateverItsInputs) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.AddWorker(WorkerBuilder().Cpus(1).Label("at", "b"));
  c.Submit(JobBuilder(TaskBuilder("long")));
  c.Submit(PrepThenTrain());
  c.Submit(JobBuilder(TaskBuilder("hog").Label("at", "b").Priority(5)));
  ASSERT_EQ(WorkerOf(c, T(1, 0)), 1u);
  ASSERT_EQ(WorkerOf(c, T(2, 0)), 2u);
  c.Run(T(1, 0));
  c.Run(T(2, 0));
  c.FinishWith(T(2, 0), WithFile("data.bin", kBig));
  ASSERT_EQ(WorkerOf(c, T(3, 0)), 2u) << "the higher priority takes the holder's freed slot";
  ASSERT_EQ(c.scheduler().GetTask(T(2, 1))->state, TaskState::kQueued);
  // filler arrives behind train (the queue is FIFO by arrival when ready).
  c.Submit(JobBuilder(TaskBuilder("filler")));
  c.Finish(T(1, 0));
  EXPECT_EQ(c.scheduler().GetTask(T(2, 1))->state, TaskState::kAssigned);
  EXPECT_EQ(WorkerOf(c, T(2, 1)), 1u) << "the head takes worker 1 though its input is on worker 2";
  EXPECT_EQ(c.scheduler().GetTask(T(4, 0))->state, TaskState::kQueued);
}

TEST(LocalityTest, PackDoesNotBreakAWholeGpuForLocality) {
  SchedulerConfig config;
  config.policy = PolicyKind::kPack;
  TestCluster c(config);
  c.AddWorker(WorkerBuilder().Cpus(4).Gpus(1));
  c.AddWorker(WorkerBuilder().Cpus(4).Gpus(2).Label("at", "b"));
  JobBuilder job;
  job.Add(TaskBuilder("prep").Label("at", "b"));
  job.Add(TaskBuilder("train").Gpus(1).DependsOn("prep"));
  c.Submit(job);
  c.Run(T(1, 0));
  c.FinishWith(T(1, 0), WithFile("data.bin", kBig));
  // Pack fills worker 1's one GPU; worker 2 would be left with one of two.
  EXPECT_EQ(WorkerOf(c, T(1, 1)), 1u);
}

TEST(LocalityTest, AJobAfterATaskReceivesItsFilesAndRunsNearThem) {
  TestCluster c;
  Pool pool(c);
  c.Submit(JobBuilder(TaskBuilder("prep").Label("at", "b")));
  c.Submit(JobBuilder(TaskBuilder("eval")).AfterTask(T(1, 0)));
  c.Run(T(1, 0));
  c.TakeRaw();
  c.FinishWith(T(1, 0), WithFile("model.bin", kBig));
  const AssignTask* assign = nullptr;
  std::vector<Command> commands = c.TakeRaw();
  for (const Command& cmd : commands) {
    if (const auto* a = std::get_if<AssignTask>(&cmd); a && a->task == T(2, 0)) assign = a;
  }
  // The assignment goes out at the grant.
  if (assign == nullptr) {
    c.Grant(T(2, 0));
    commands = c.TakeRaw();
    for (const Command& cmd : commands) {
      if (const auto* a = std::get_if<AssignTask>(&cmd); a && a->task == T(2, 0)) assign = a;
    }
  }
  ASSERT_NE(assign, nullptr);
  EXPECT_EQ(assign->worker, 2u);
  ASSERT_NE(assign->inputs, nullptr);
  ASSERT_EQ(assign->inputs->size(), 1u);
  EXPECT_EQ((*assign->inputs)[0].task, T(1, 0));
  EXPECT_EQ((*assign->inputs)[0].outputs_on, 2u);
  ASSERT_EQ((*assign->inputs)[0].outputs.size(), 1u);
  EXPECT_EQ((*assign->inputs)[0].outputs[0].name, "model.bin");
}

TEST(LocalityTest, AJobAfterATaskWhoseHolderIsLostRerunsIt) {
  SchedulerConfig config;
  config.start_timeout = Duration::zero();
  TestCluster c(config);
  c.AddWorker(WorkerBuilder().Cpus(1).Label("at", "a"));
  c.AddWorker(WorkerBuilder().Cpus(1).Label("at", "b"));
  c.Submit(JobBuilder(TaskBuilder("prep").Label("at", "a")));
  c.Submit(JobBuilder(TaskBuilder("eval").Label("at", "b")).AfterTask(T(1, 0)));
  c.Handle(WorkerDrained{2, true});  // eval cannot start yet
  c.Run(T(1, 0));
  c.FinishWith(T(1, 0), WithFile("model.bin", kBig));
  ASSERT_EQ(c.scheduler().GetTask(T(2, 0))->state, TaskState::kQueued);
  c.Handle(WorkerLost{1});
  c.Advance(Seconds(40));  // the lease bound: lease_ttl 30 s + grace 10 s
  EXPECT_EQ(c.scheduler().GetTask(T(1, 0))->reason, "rerun: outputs lost with worker 1");
  EXPECT_EQ(c.scheduler().GetTask(T(2, 0))->state, TaskState::kWaiting);
  c.AddWorker(WorkerBuilder().Cpus(1).Label("at", "a"));
  c.Run(T(1, 0));
  c.FinishWith(T(1, 0), WithFile("model.bin", kBig));
  c.Handle(WorkerDrained{2, false});
  EXPECT_EQ(c.scheduler().GetTask(T(2, 0))->state, TaskState::kAssigned);
  // Journal and snapshot restore alike.
  std::unique_ptr<Scheduler> from_journal = testing::RestoredFrom(c.journal(), c.now());
  std::unique_ptr<Scheduler> from_snapshot =
      testing::RestoredFrom(c.scheduler().Snapshot(), c.now());
  ASSERT_NE(from_journal, nullptr);
  ASSERT_NE(from_snapshot, nullptr);
  EXPECT_EQ(testing::FirstDifference(*from_journal, *from_snapshot), "");
}

TEST(LocalityTest, ATaskWithMoreProducersThanTheCapIsPlacedWithoutLooking) {
  for (uint32_t producers : {kLocalityMaxProducers, kLocalityMaxProducers + 1}) {
    TestCluster c;
    c.AddWorker(WorkerBuilder().Cpus(1));
    c.AddWorker(WorkerBuilder().Cpus(1).Label("at", "b"));
    JobBuilder job;
    job.Add(TaskBuilder("prep").Label("at", "b").Array(0, producers));
    job.Add(TaskBuilder("train").DependsOn("prep"));
    c.Submit(job);
    for (uint32_t i = 0; i < producers; ++i) {
      ASSERT_EQ(WorkerOf(c, T(1, i)), 2u);
      c.Run(T(1, i));
      c.FinishWith(T(1, i), WithFile("part.bin", kBig));
    }
    // Every input is on worker 2; past the cap spread's choice stands.
    EXPECT_EQ(WorkerOf(c, T(1, producers)), producers > kLocalityMaxProducers ? 1u : 2u)
        << producers << " producers";
  }
}

}  // namespace
}  // namespace drover::core
