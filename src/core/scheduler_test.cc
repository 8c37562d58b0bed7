// Placement: concrete cores and GPUs, policies, GPU sharing, constraints,
// quotas, drain, priorities, resource classes and backfill reservations.
#include "core/scheduler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/testing/test_cluster.h"

namespace drover::core {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using testing::JobBuilder;
using testing::kGiB;
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

}  // namespace
}  // namespace drover::core
