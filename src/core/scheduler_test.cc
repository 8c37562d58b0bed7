// Placement: concrete cores and GPUs, policies, GPU sharing, constraints,
// quotas, drain, priorities, resource classes and backfill reservations.
#include "core/scheduler.h"

#include <algorithm>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

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

TEST(PlacementTest, GivesConcreteCoresAndGpusAndAssignsOnlyAfterGrant) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(4).Gpus(2));
  JobId j = c.Submit(TaskBuilder().Cpus(2).Gpus(1).Mem(4 * kGiB));
  EXPECT_THAT(c.Take(), ElementsAre("claim 1.0#1 on w1 [lease:1:slot:1.0 lease:1:gpu:0]",
                                    "state 1.0 queued->assigned #1"));
  c.Grant(T(j, 0));
  EXPECT_THAT(c.Take(),
              ElementsAre("assign 1.0#1 on w1 cores=[0,1] gpus=[0:100/80 GiB] mem=4 GiB"));
  c.Start(T(j, 0));
  EXPECT_THAT(c.Take(), ElementsAre("state 1.0 assigned->running #1"));
  c.Finish(T(j, 0));
  EXPECT_THAT(c.Take(),
              ElementsAre("release 1.0#1 on w1 [lease:1:slot:1.0 lease:1:gpu:0]",
                          "state 1.0 running->succeeded #1"));
}

TEST(PlacementTest, NeverGivesACoreOrWholeGpuTwice) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(3).Gpus(2));
  c.Submit(JobBuilder(TaskBuilder().Cpus(1.5).Gpus(1).Array(0, 3)));
  EXPECT_THAT(c.Take(), ElementsAre("claim 1.0#1 on w1 [lease:1:slot:1.0 lease:1:gpu:0]",
                                    "state 1.0 queued->assigned #1"));
  c.Grant(T(1, 0));
  EXPECT_THAT(c.Take(), ElementsAre("assign 1.0#1 on w1 cores=[0,1] gpus=[0:100/80 GiB]"));
  // 1.1 needs 2 cores but only core 2 is free: it waits although a GPU is free.
  EXPECT_EQ(*c.scheduler().Explain(T(1, 1)), "needs 2 cpus, largest free is 1");
  c.Start(T(1, 0));
  c.Finish(T(1, 0));
  EXPECT_THAT(c.Take(), ElementsAre("state 1.0 assigned->running #1",
                                    "release 1.0#1 on w1 [lease:1:slot:1.0 lease:1:gpu:0]",
                                    "state 1.0 running->succeeded #1",
                                    "claim 1.1#1 on w1 [lease:1:slot:1.1 lease:1:gpu:0]",
                                    "state 1.1 queued->assigned #1"));
  c.Grant(T(1, 1));
  EXPECT_THAT(c.Take(), ElementsAre("assign 1.1#1 on w1 cores=[0,1] gpus=[0:100/80 GiB]"));
}

SchedulerConfig WithPolicy(PolicyKind kind) {
  SchedulerConfig config;
  config.policy = kind;
  return config;
}

TEST(PolicyTest, SpreadPutsTasksOnTheLeastLoadedWorker) {
  TestCluster c(WithPolicy(PolicyKind::kSpread));
  c.AddWorker(WorkerBuilder().Cpus(4));
  c.AddWorker(WorkerBuilder().Cpus(4));
  c.Submit(JobBuilder(TaskBuilder().Array(0, 3)));
  EXPECT_THAT(c.Take(), ElementsAre("claim 1.0#1 on w1 [lease:1:slot:1.0]",
                                    "state 1.0 queued->assigned #1",
                                    "claim 1.1#1 on w2 [lease:2:slot:1.1]",
                                    "state 1.1 queued->assigned #1",
                                    "claim 1.2#1 on w1 [lease:1:slot:1.2]",
                                    "state 1.2 queued->assigned #1"));
}

TEST(PolicyTest, PackFillsOneWorkerFirst) {
  TestCluster c(WithPolicy(PolicyKind::kPack));
  c.AddWorker(WorkerBuilder().Cpus(2));
  c.AddWorker(WorkerBuilder().Cpus(2));
  c.Submit(JobBuilder(TaskBuilder().Array(0, 3)));
  EXPECT_THAT(c.Take(), ElementsAre("claim 1.0#1 on w1 [lease:1:slot:1.0]",
                                    "state 1.0 queued->assigned #1",
                                    "claim 1.1#1 on w1 [lease:1:slot:1.1]",
                                    "state 1.1 queued->assigned #1",
                                    "claim 1.2#1 on w2 [lease:2:slot:1.2]",
                                    "state 1.2 queued->assigned #1"));
}

TEST(PolicyTest, PackKeepsWholeGpusFreeBySharingTheUsedOne) {
  TestCluster c(WithPolicy(PolicyKind::kPack));
  c.AddWorker(WorkerBuilder().Cpus(8).Gpus(2));
  c.Submit(JobBuilder(TaskBuilder().Cpus(1).Gpus(0.25).Array(0, 2)));
  c.Run(T(1, 0));
  c.Take();
  c.Grant(T(1, 1));
  EXPECT_THAT(c.Take(), ElementsAre("assign 1.1#1 on w1 cores=[1] gpus=[0:25]"));
  c.Submit(JobBuilder(TaskBuilder().Cpus(1).Gpus(1)));
  EXPECT_THAT(c.Take(), ElementsAre("claim 2.0#1 on w1 [lease:1:slot:2.0 lease:1:gpu:1]",
                                    "state 2.0 queued->assigned #1"));
}

// Spread keeps whole GPUs free for whole-GPU tasks, as pack does: a second
// share goes to the GPU the first one uses (two 0.5-GPU tasks on two GPUs
// would leave a 1-GPU task waiting beside two half-free GPUs).
TEST(PolicyTest, SpreadPacksSharesOntoTheUsedGpu) {
  TestCluster c(WithPolicy(PolicyKind::kSpread));
  c.AddWorker(WorkerBuilder().Cpus(8).Gpus(2));
  c.Submit(JobBuilder(TaskBuilder().Cpus(1).Gpus(0.25).Array(0, 2)));
  c.Grant(T(1, 0));
  c.Grant(T(1, 1));
  EXPECT_THAT(c.Take(), ElementsAre("claim 1.0#1 on w1 [lease:1:slot:1.0 lease:1:gpu:0:share:1.0]",
                                    "state 1.0 queued->assigned #1",
                                    "claim 1.1#1 on w1 [lease:1:slot:1.1 lease:1:gpu:0:share:1.1]",
                                    "state 1.1 queued->assigned #1",
                                    "assign 1.0#1 on w1 cores=[0] gpus=[0:25]",
                                    "assign 1.1#1 on w1 cores=[1] gpus=[0:25]"));
}

// Round-robin still spreads shares over the GPUs (the comparison policy).
TEST(PolicyTest, RoundRobinPutsSharesOnTheLeastUsedGpu) {
  TestCluster c(WithPolicy(PolicyKind::kRoundRobin));
  c.AddWorker(WorkerBuilder().Cpus(8).Gpus(2));
  c.Submit(JobBuilder(TaskBuilder().Cpus(1).Gpus(0.25).Array(0, 2)));
  c.Grant(T(1, 0));
  c.Grant(T(1, 1));
  EXPECT_THAT(c.Take(), ElementsAre("claim 1.0#1 on w1 [lease:1:slot:1.0 lease:1:gpu:0:share:1.0]",
                                    "state 1.0 queued->assigned #1",
                                    "claim 1.1#1 on w1 [lease:1:slot:1.1 lease:1:gpu:1:share:1.1]",
                                    "state 1.1 queued->assigned #1",
                                    "assign 1.0#1 on w1 cores=[0] gpus=[0:25]",
                                    "assign 1.1#1 on w1 cores=[1] gpus=[1:25]"));
}

TEST(PolicyTest, RoundRobinCyclesThroughWorkers) {
  TestCluster c(WithPolicy(PolicyKind::kRoundRobin));
  c.AddWorker(WorkerBuilder().Cpus(4));
  c.AddWorker(WorkerBuilder().Cpus(4));
  c.AddWorker(WorkerBuilder().Cpus(4));
  c.Submit(JobBuilder(TaskBuilder().Array(0, 4)));
  std::vector<std::string> claims;
  for (const std::string& line : c.Take()) {
    if (line.rfind("claim", 0) == 0) claims.push_back(line);
  }
  EXPECT_THAT(claims, ElementsAre("claim 1.0#1 on w1 [lease:1:slot:1.0]",
                                  "claim 1.1#1 on w2 [lease:2:slot:1.1]",
                                  "claim 1.2#1 on w3 [lease:3:slot:1.2]",
                                  "claim 1.3#1 on w1 [lease:1:slot:1.3]"));
}

TEST(GpuShareTest, SharesNeverExceedOneGpuNorItsMemory) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(8).Gpus(1, "NVIDIA A100", 40 * kGiB));
  // Three 0.25 shares fit by share but only two by memory (2 x 16 GiB of 40).
  c.Submit(JobBuilder(TaskBuilder().Gpus(0.25).GpuMem(16 * kGiB).Array(0, 3)));
  EXPECT_THAT(c.Take(), ElementsAre("claim 1.0#1 on w1 [lease:1:slot:1.0 lease:1:gpu:0:share:1.0]",
                                    "state 1.0 queued->assigned #1",
                                    "claim 1.1#1 on w1 [lease:1:slot:1.1 lease:1:gpu:0:share:1.1]",
                                    "state 1.1 queued->assigned #1"));
  EXPECT_EQ(*c.scheduler().Explain(T(1, 2)), "needs 0.25 of a GPU, largest free share is 0");
  // A whole-GPU task never lands on a shared GPU.
  c.Submit(JobBuilder(TaskBuilder().Gpus(1)));
  EXPECT_THAT(c.Take(), IsEmpty());
  EXPECT_EQ(*c.scheduler().Explain(T(2, 0)), "needs 1 GPU, largest free is 0");
  Result<WorkerInfo> w = c.scheduler().GetWorker(1);
  EXPECT_EQ(w->gpu_free_share[0], 50);
  EXPECT_EQ(w->gpu_free_mem_bytes[0], 8 * kGiB);
}

// Four 0.25-CPU tasks on a one-core worker run at once, on that core.
TEST(CoreShareTest, QuarterCpuTasksShareOneCore) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Submit(JobBuilder(TaskBuilder().Cpus(0.25).Array(0, 5)));
  std::vector<std::string> lines = c.Take();
  EXPECT_EQ(std::count_if(lines.begin(), lines.end(),
                          [](const std::string& l) { return l.rfind("claim", 0) == 0; }),
            4)
      << ::testing::PrintToString(lines);
  for (uint32_t i = 0; i < 4; ++i) c.Grant(T(1, i));
  EXPECT_THAT(c.Take(), ElementsAre("assign 1.0#1 on w1 cores=[0]", "assign 1.1#1 on w1 cores=[0]",
                                    "assign 1.2#1 on w1 cores=[0]", "assign 1.3#1 on w1 cores=[0]"));
  EXPECT_EQ(c.scheduler().GetTask(T(1, 4))->state, TaskState::kQueued);
  c.Start(T(1, 0));
  c.Finish(T(1, 0));
  EXPECT_THAT(c.Take(), ::testing::Contains("claim 1.4#1 on w1 [lease:1:slot:1.4]"));
}

TEST(GpuShareTest, SharesFillAGpuUpToExactlyOne) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(8).Gpus(1));
  c.Submit(JobBuilder(TaskBuilder().Cpus(0).Gpus(0.5).Array(0, 3)));
  std::vector<std::string> lines = c.Take();
  EXPECT_THAT(lines, ElementsAre("claim 1.0#1 on w1 [lease:1:slot:1.0 lease:1:gpu:0:share:1.0]",
                                 "state 1.0 queued->assigned #1",
                                 "claim 1.1#1 on w1 [lease:1:slot:1.1 lease:1:gpu:0:share:1.1]",
                                 "state 1.1 queued->assigned #1"));
}

TEST(ConstraintTest, GpuTypeLabelsAndCountersChooseTheWorker) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(4).Gpus(1, "NVIDIA GeForce RTX 3090", 24 * kGiB));
  c.AddWorker(WorkerBuilder().Cpus(4).Gpus(1, "NVIDIA A100-SXM4-80GB").Label("os", "linux"));
  c.AddWorker(WorkerBuilder().Cpus(4).Counter("licenses", 2));
  c.Submit(JobBuilder(TaskBuilder().Gpus(1).GpuType("a100")));
  c.Submit(JobBuilder(TaskBuilder().Label("os", "linux")));
  c.Submit(JobBuilder(TaskBuilder().Counter("licenses", 2).Array(0, 2)));
  c.Submit(JobBuilder(TaskBuilder().Gpus(1).GpuType("H100")));
  EXPECT_THAT(c.Take(), ElementsAre("claim 1.0#1 on w2 [lease:2:slot:1.0 lease:2:gpu:0]",
                                    "state 1.0 queued->assigned #1",
                                    "claim 2.0#1 on w2 [lease:2:slot:2.0]",
                                    "state 2.0 queued->assigned #1",
                                    "claim 3.0#1 on w3 [lease:3:slot:3.0]",
                                    "state 3.0 queued->assigned #1"));
  EXPECT_EQ(*c.scheduler().Explain(T(3, 1)), "needs 2 licenses, largest free is 0");
  EXPECT_EQ(*c.scheduler().Explain(T(4, 0)), "no worker offers gpu_type H100");
  c.Run(T(3, 0));
  c.Take();
  c.Finish(T(3, 0));
  EXPECT_THAT(c.Take(), ElementsAre("release 3.0#1 on w3 [lease:3:slot:3.0]",
                                    "state 3.0 running->succeeded #1",
                                    "claim 3.1#1 on w3 [lease:3:slot:3.1]",
                                    "state 3.1 queued->assigned #1"));
}

TEST(QuotaTest, UserQuotaHoldsTasksBackUntilTheirOwnTasksEnd) {
  SchedulerConfig config;
  config.users.quotas["u1"] = UserQuota{0, 200, 0};
  TestCluster c(config);
  c.AddWorker(WorkerBuilder().Cpus(8).Gpus(4));
  c.Submit(JobBuilder(TaskBuilder().Gpus(1).Array(0, 3)).User("u1"));
  c.Submit(JobBuilder(TaskBuilder().Gpus(1)).User("u2"));
  EXPECT_THAT(c.Take(), ElementsAre("claim 1.0#1 on w1 [lease:1:slot:1.0 lease:1:gpu:0]",
                                    "state 1.0 queued->assigned #1",
                                    "claim 1.1#1 on w1 [lease:1:slot:1.1 lease:1:gpu:1]",
                                    "state 1.1 queued->assigned #1",
                                    "claim 2.0#1 on w1 [lease:1:slot:2.0 lease:1:gpu:2]",
                                    "state 2.0 queued->assigned #1"));
  EXPECT_EQ(*c.scheduler().Explain(T(1, 2)), "quota: gpus 2/2 for u1");
  c.Run(T(1, 0));
  c.Take();
  c.Finish(T(1, 0));
  EXPECT_THAT(c.Take(), ElementsAre("release 1.0#1 on w1 [lease:1:slot:1.0 lease:1:gpu:0]",
                                    "state 1.0 running->succeeded #1",
                                    "claim 1.2#1 on w1 [lease:1:slot:1.2 lease:1:gpu:0]",
                                    "state 1.2 queued->assigned #1"));
}

TEST(DrainTest, DrainedWorkerTakesNoNewTasksUntilUndrained) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Handle(WorkerDrained{1, true});
  c.Submit(JobBuilder(TaskBuilder()));
  EXPECT_THAT(c.Take(), IsEmpty());
  EXPECT_EQ(*c.scheduler().Explain(T(1, 0)), "all workers are drained");
  c.Handle(WorkerDrained{1, false});
  EXPECT_THAT(c.Take(), ElementsAre("claim 1.0#1 on w1 [lease:1:slot:1.0]",
                                    "state 1.0 queued->assigned #1"));
}

TEST(PriorityTest, HigherPriorityRunsFirstThenFifo) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Submit(JobBuilder(TaskBuilder()));            // 1.0 runs
  c.Submit(JobBuilder(TaskBuilder().Array(0, 2)));  // 2.0, 2.1 queue
  c.Submit(JobBuilder(TaskBuilder().Priority(5)));  // 3.0 jumps ahead
  c.Take();
  EXPECT_EQ(*c.scheduler().Explain(T(2, 1)), "behind 2 tasks of its class");
  c.Run(T(1, 0));
  c.Take();
  c.Finish(T(1, 0));
  EXPECT_THAT(c.Take(), ElementsAre("release 1.0#1 on w1 [lease:1:slot:1.0]",
                                    "state 1.0 running->succeeded #1",
                                    "claim 3.0#1 on w1 [lease:1:slot:3.0]",
                                    "state 3.0 queued->assigned #1"));
  c.Run(T(3, 0));
  c.Take();
  c.Finish(T(3, 0));
  EXPECT_THAT(c.Take(), ElementsAre("release 3.0#1 on w1 [lease:1:slot:3.0]",
                                    "state 3.0 running->succeeded #1",
                                    "claim 2.0#1 on w1 [lease:1:slot:2.0]",
                                    "state 2.0 queued->assigned #1"));
}

TEST(ResourceClassTest, ABlockedGpuTaskDoesNotBlockCpuTasks) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(4).Gpus(1));
  c.Submit(JobBuilder(TaskBuilder().Gpus(1).Array(0, 2)));
  c.Submit(JobBuilder(TaskBuilder()));
  EXPECT_THAT(c.Take(), ElementsAre("claim 1.0#1 on w1 [lease:1:slot:1.0 lease:1:gpu:0]",
                                    "state 1.0 queued->assigned #1",
                                    "claim 2.0#1 on w1 [lease:1:slot:2.0]",
                                    "state 2.0 queued->assigned #1"));
}

TEST(BackfillTest, AStreamOfOneGpuTasksDoesNotStarveAFourGpuTask) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(16).Gpus(4));
  c.Submit(JobBuilder(TaskBuilder().Gpus(1).Array(0, 4)));  // 1.0-1.3 take all GPUs
  c.Submit(JobBuilder(TaskBuilder().Gpus(4)));              // 2.0 waits for all four
  c.Submit(JobBuilder(TaskBuilder().Gpus(1).Array(0, 8)));  // 3.x stream of small ones
  for (uint32_t i = 0; i < 4; ++i) c.Run(T(1, i));
  c.Take();
  // As each GPU frees, the small tasks behind may not take it: it is held
  // for 2.0, which gets all four once they are free.
  for (uint32_t i = 0; i < 3; ++i) {
    c.Finish(T(1, i));
    std::vector<std::string> lines = c.Take();
    EXPECT_EQ(lines.size(), 2u) << ::testing::PrintToString(lines);
    EXPECT_EQ(*c.scheduler().Explain(T(3, 0)), "held back: reservation for 2.0");
  }
  c.Finish(T(1, 3));
  EXPECT_THAT(c.Take(),
              ElementsAre("release 1.3#1 on w1 [lease:1:slot:1.3 lease:1:gpu:3]",
                          "state 1.3 running->succeeded #1",
                          "claim 2.0#1 on w1 [lease:1:slot:2.0 lease:1:gpu:0 lease:1:gpu:1 "
                          "lease:1:gpu:2 lease:1:gpu:3]",
                          "state 2.0 queued->assigned #1"));
}

TEST(BackfillTest, SmallTasksStillBackfillWhatTheReservedTaskDoesNotNeed) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(8).Gpus(2));
  c.Submit(JobBuilder(TaskBuilder().Cpus(1).Gpus(1)));  // 1.0 takes GPU 0
  c.Submit(JobBuilder(TaskBuilder().Cpus(1).Gpus(2)));  // 2.0 needs both
  c.Submit(JobBuilder(TaskBuilder().Cpus(1).Gpus(1)));  // 3.0 would take GPU 1
  c.Submit(JobBuilder(TaskBuilder().Cpus(2)));          // 4.0 only cores: fine
  EXPECT_THAT(c.Take(), ElementsAre("claim 1.0#1 on w1 [lease:1:slot:1.0 lease:1:gpu:0]",
                                    "state 1.0 queued->assigned #1",
                                    "claim 4.0#1 on w1 [lease:1:slot:4.0]",
                                    "state 4.0 queued->assigned #1"));
  EXPECT_EQ(*c.scheduler().Explain(T(3, 0)), "held back: reservation for 2.0");
}

// Tasks held back by a reservation fit nowhere else; when the reservation
// ends without a free on its worker (here the reserved task is canceled),
// that worker must be offered to them again, or its GPU idles for nothing.
TEST(BackfillTest, EndingAReservationOffersItsWorkerAgain) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(8).Gpus(2));
  c.Submit(JobBuilder(TaskBuilder().Cpus(1).Gpus(1)));  // 1.0 takes GPU 0
  c.Submit(JobBuilder(TaskBuilder().Cpus(1).Gpus(2)));  // 2.0 needs both
  c.Submit(JobBuilder(TaskBuilder().Cpus(1).Gpus(1)));  // 3.0 held for 2.0
  c.Take();
  ASSERT_EQ(*c.scheduler().Explain(T(3, 0)), "held back: reservation for 2.0");
  c.Handle(CancelTask{T(2, 0)});
  EXPECT_THAT(c.Take(), ElementsAre("state 2.0 queued->canceled #0: canceled by user",
                                    "claim 3.0#1 on w1 [lease:1:slot:3.0 lease:1:gpu:1]",
                                    "state 3.0 queued->assigned #1"));
}

// Found by `drover sim` at 100,000 tasks: a higher-priority task of the
// reserved task's own class arrived and became its class head. The
// reservation still named the old head, so when the reserved worker freed,
// the new head was held back for a task that was not at the head, and the
// reserved task was never tried: nothing ran. Here that is the whole
// cluster, stuck for good.
TEST(BackfillTest, AHigherPriorityTaskOfTheReservedClassMayUseTheReservation) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(16).Gpus(4));
  c.Submit(JobBuilder(TaskBuilder().Gpus(1)));              // 1.0 takes GPU 0
  c.Submit(JobBuilder(TaskBuilder().Gpus(4)));              // 2.0 waits for all four
  c.Submit(JobBuilder(TaskBuilder().Gpus(1)));              // 3.0: reservation for 2.0
  c.Submit(JobBuilder(TaskBuilder().Gpus(4).Priority(1)));  // 4.0 ahead of 2.0
  c.Run(T(1, 0));
  c.Take();
  ASSERT_EQ(*c.scheduler().Explain(T(3, 0)), "held back: reservation for 2.0");
  ASSERT_EQ(*c.scheduler().Explain(T(2, 0)), "behind 1 task of its class");
  c.Finish(T(1, 0));
  EXPECT_THAT(c.Take(),
              ElementsAre("release 1.0#1 on w1 [lease:1:slot:1.0 lease:1:gpu:0]",
                          "state 1.0 running->succeeded #1",
                          "claim 4.0#1 on w1 [lease:1:slot:4.0 lease:1:gpu:0 lease:1:gpu:1 "
                          "lease:1:gpu:2 lease:1:gpu:3]",
                          "state 4.0 queued->assigned #1"));
  // The reservation still protects 2.0 from the small task behind it.
  c.Run(T(4, 0));
  c.Take();
  c.Finish(T(4, 0));
  std::vector<std::string> lines = c.Take();
  ASSERT_EQ(lines.size(), 4u) << ::testing::PrintToString(lines);
  EXPECT_EQ(lines[2],
            "claim 2.0#1 on w1 [lease:1:slot:2.0 lease:1:gpu:0 lease:1:gpu:1 lease:1:gpu:2 "
            "lease:1:gpu:3]");
  c.Run(T(2, 0));
  c.Take();
  c.Finish(T(2, 0));
  lines = c.Take();
  ASSERT_EQ(lines.size(), 4u) << ::testing::PrintToString(lines);
  EXPECT_EQ(lines[2], "claim 3.0#1 on w1 [lease:1:slot:3.0 lease:1:gpu:0]");
}

// Time limits (EASY backfill): on the reserved worker a task may take what
// the reserved task waits for if its limit ends before the reserved task
// could start there anyway (when the running tasks' limits end). Longer or
// unlimited tasks stay held back, and the reserved task starts on time.
// (Each small task has its own shape here: within one class the order stays
// FIFO, so a limit helps only the class head.)
TEST(BackfillTest, ATaskWhoseLimitEndsBeforeTheReservedTaskCouldStartBackfills) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(16).Gpus(4));
  c.Submit(JobBuilder(TaskBuilder().Gpus(1).Timeout(Seconds(100))));  // 1.0 ends by 100 s
  c.Run(T(1, 0));
  c.Submit(JobBuilder(TaskBuilder().Gpus(4)));                        // 2.0 can start at 100 s
  c.Submit(JobBuilder(TaskBuilder().Gpus(1).Cpus(2).Timeout(Seconds(200))));  // 3.0 would delay it
  c.Submit(JobBuilder(TaskBuilder().Gpus(1).Cpus(3)));  // 4.0 no limit: may never end
  c.Take();
  EXPECT_EQ(*c.scheduler().Explain(T(3, 0)), "held back: reservation for 2.0");
  EXPECT_EQ(*c.scheduler().Explain(T(4, 0)), "held back: reservation for 2.0");
  c.Advance(Seconds(40));
  c.Take();  // renewals
  c.Submit(JobBuilder(TaskBuilder().Gpus(1).Timeout(Seconds(60))));   // 5.0 ends by 100 s: fits
  EXPECT_THAT(c.Take(), ElementsAre("claim 5.0#1 on w1 [lease:1:slot:5.0 lease:1:gpu:1]",
                                    "state 5.0 queued->assigned #1"));
  c.Run(T(5, 0));
  c.Submit(JobBuilder(TaskBuilder().Gpus(1).Cpus(4).Timeout(Seconds(61))));  // 6.0: a second late
  c.Take();
  EXPECT_EQ(*c.scheduler().Explain(T(6, 0)), "held back: reservation for 2.0");
  // Both end by their limits; 2.0 gets all four GPUs before anything else.
  c.Advance(Seconds(50));
  c.Take();
  c.Finish(T(5, 0));
  c.Finish(T(1, 0));
  EXPECT_THAT(c.Take(),
              ElementsAre("release 5.0#1 on w1 [lease:1:slot:5.0 lease:1:gpu:1]",
                          "state 5.0 running->succeeded #1",
                          "release 1.0#1 on w1 [lease:1:slot:1.0 lease:1:gpu:0]",
                          "state 1.0 running->succeeded #1",
                          "claim 2.0#1 on w1 [lease:1:slot:2.0 lease:1:gpu:0 lease:1:gpu:1 "
                          "lease:1:gpu:2 lease:1:gpu:3]",
                          "state 2.0 queued->assigned #1"));
}

// The reservation goes to the worker where the task can start first by the
// limits of what runs there, not to the first worker that could hold it:
// w1 is busy for up to 1,000 s, w2 for up to 10 s.
TEST(BackfillTest, TheReservationGoesToTheWorkerWhoseLimitsEndFirst) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(16).Gpus(4));
  c.AddWorker(WorkerBuilder().Cpus(16).Gpus(4));
  c.Submit(JobBuilder(TaskBuilder().Gpus(1).Timeout(Seconds(1000))));  // 1.0 on w1
  c.Submit(JobBuilder(TaskBuilder().Gpus(1).Timeout(Seconds(10))));    // 2.0 on w2
  c.Run(T(1, 0));
  c.Run(T(2, 0));
  c.Submit(JobBuilder(TaskBuilder().Gpus(4)));                         // 3.0 waits
  c.Submit(JobBuilder(TaskBuilder().Gpus(1)));                         // 4.0 overtakes it
  std::vector<std::string> lines = c.Take();
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines[lines.size() - 2], "claim 4.0#1 on w1 [lease:1:slot:4.0 lease:1:gpu:1]");
  c.Advance(Seconds(10));
  c.Finish(T(2, 0));
  lines = c.Take();
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines[lines.size() - 2],
            "claim 3.0#1 on w2 [lease:2:slot:3.0 lease:2:gpu:0 lease:2:gpu:1 lease:2:gpu:2 "
            "lease:2:gpu:3]");
}


// EASY backfill past the class head: 3.0 (limit 200 s) heads its class and
// would delay the reserved 2.0, which can start at 100 s. 3.1 of the same
// shape (limit 50 s) is behind it, but it ends before 2.0 could start, so it
// takes a GPU on the reserved worker at once; 3.0, which could not have used
// that GPU before 2.0 anyway, keeps its place, and 2.0 starts on time.
TEST(BackfillTest, AShortTaskBehindItsClassHeadBackfillsTheReservedWorker) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(16).Gpus(4));
  c.Submit(JobBuilder(TaskBuilder().Gpus(1).Timeout(Seconds(100))));  // 1.0 ends by 100 s
  c.Run(T(1, 0));
  c.Submit(JobBuilder(TaskBuilder().Gpus(4)));                        // 2.0 can start at 100 s
  c.Take();
  c.Submit(JobBuilder(TaskBuilder("long").Gpus(1).Timeout(Seconds(200)))
               .Add(TaskBuilder("short").Gpus(1).Timeout(Seconds(50))));  // 3.0, 3.1
  EXPECT_THAT(c.Take(), ElementsAre("claim 3.1#1 on w1 [lease:1:slot:3.1 lease:1:gpu:1]",
                                    "state 3.1 queued->assigned #1"));
  EXPECT_EQ(*c.scheduler().Explain(T(3, 0)), "held back: reservation for 2.0");
  c.Run(T(3, 1));
  c.Take();
  c.Advance(Seconds(50));
  c.Take();  // renewals
  c.Finish(T(3, 1));
  c.Take();
  c.Advance(Seconds(10));
  c.Take();
  c.Finish(T(1, 0));
  EXPECT_THAT(c.Take(),
              ElementsAre("release 1.0#1 on w1 [lease:1:slot:1.0 lease:1:gpu:0]",
                          "state 1.0 running->succeeded #1",
                          "claim 2.0#1 on w1 [lease:1:slot:2.0 lease:1:gpu:0 lease:1:gpu:1 "
                          "lease:1:gpu:2 lease:1:gpu:3]",
                          "state 2.0 queued->assigned #1"));
  c.Run(T(2, 0));
  c.Finish(T(2, 0));
  std::vector<std::string> lines = c.Take();
  ASSERT_EQ(lines.size(), 6u) << ::testing::PrintToString(lines);
  EXPECT_EQ(lines[4], "claim 3.0#1 on w1 [lease:1:slot:3.0 lease:1:gpu:0]");
}

// A task placed from behind its class head leaves its queue entry behind.
// If it comes back (its lease is refused), it takes that place again, behind
// the head it was behind (not the front, where a refused head goes), as one
// entry, and runs once.
TEST(BackfillTest, ABackfilledTaskThatComesBackTakesItsOldPlaceInTheQueue) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(16).Gpus(4));
  c.Submit(JobBuilder(TaskBuilder().Gpus(1).Timeout(Seconds(100))));  // 1.0
  c.Run(T(1, 0));
  c.Submit(JobBuilder(TaskBuilder().Gpus(4)));                        // 2.0 reserved
  c.Take();
  c.Submit(JobBuilder(TaskBuilder("long").Gpus(1).Timeout(Seconds(200)))
               .Add(TaskBuilder("short").Gpus(1).Timeout(Seconds(50))));
  EXPECT_THAT(c.Take(), ElementsAre("claim 3.1#1 on w1 [lease:1:slot:3.1 lease:1:gpu:1]",
                                    "state 3.1 queued->assigned #1"));
  // Refused at 60 s: 50 s more would end after 2.0's planned start.
  c.Advance(Seconds(60));
  c.Take();
  c.Reject(T(3, 1));
  EXPECT_THAT(c.Take(), ElementsAre("state 3.1 assigned->queued #1: lease claim rejected"));
  EXPECT_EQ(*c.scheduler().Explain(T(3, 1)), "behind 1 task of its class");
  c.Finish(T(1, 0));
  c.Take();
  c.Run(T(2, 0));
  c.Finish(T(2, 0));
  std::vector<std::string> lines = c.Take();
  EXPECT_EQ(std::count(lines.begin(), lines.end(),
                       "claim 3.0#1 on w1 [lease:1:slot:3.0 lease:1:gpu:0]"), 1)
      << ::testing::PrintToString(lines);
  EXPECT_EQ(std::count(lines.begin(), lines.end(),
                       "claim 3.1#2 on w1 [lease:1:slot:3.1 lease:1:gpu:1]"), 1)
      << ::testing::PrintToString(lines);
  c.Run(T(3, 1));
  c.Finish(T(3, 1));
  lines = c.Take();
  for (const std::string& l : lines) EXPECT_EQ(l.find("claim"), std::string::npos) << l;
  EXPECT_EQ(c.scheduler().GetTask(T(3, 1))->state, TaskState::kSucceeded);
}

}  // namespace
}  // namespace drover::core
