// Explain: the first thing that keeps a task from running, in words.
#include <gtest/gtest.h>

#include "core/scheduler.h"
#include "core/testing/test_cluster.h"

namespace drover::core {
namespace {

using testing::JobBuilder;
using testing::T;
using testing::TaskBuilder;
using testing::TestCluster;
using testing::WorkerBuilder;

TEST(ExplainTest, SaysWhatIsMissing) {
  TestCluster c;
  EXPECT_FALSE(c.scheduler().Explain(T(9, 0)).ok());
  c.Submit(JobBuilder(TaskBuilder()));
  EXPECT_EQ(*c.scheduler().Explain(T(1, 0)), "no workers are connected");
  c.AddWorker(WorkerBuilder().Cpus(4).Mem(32 * kGiB).Gpus(1, "NVIDIA A100", 40 * kGiB));
  c.Run(T(1, 0));
  EXPECT_EQ(*c.scheduler().Explain(T(1, 0)), "running on worker 1 (attempt 1)");
  c.Submit(JobBuilder(TaskBuilder().Label("os", "linux")));
  EXPECT_EQ(*c.scheduler().Explain(T(2, 0)), "no worker has label os=linux");
  c.Submit(JobBuilder(TaskBuilder().Gpus(1).GpuMem(80 * kGiB)));
  EXPECT_EQ(*c.scheduler().Explain(T(3, 0)), "no worker has a GPU with 80 GiB of memory");
  c.Submit(JobBuilder(TaskBuilder().Gpus(2)));
  EXPECT_EQ(*c.scheduler().Explain(T(4, 0)), "no worker is large enough for cpus=1 gpus=2");
  c.Submit(JobBuilder(TaskBuilder().Mem(20 * kGiB).Array(0, 2)));
  EXPECT_EQ(*c.scheduler().Explain(T(5, 1)), "needs 20 GiB memory, largest free is 12 GiB");
  c.Finish(T(1, 0), 3);
  EXPECT_EQ(*c.scheduler().Explain(T(1, 0)), "failed: exit code 3");
  c.Handle(CancelTask{T(5, 1)});
  EXPECT_EQ(*c.scheduler().Explain(T(5, 1)), "canceled: canceled by user");
}

TEST(ExplainTest, UnrunnableNamesTheGroupsNoWorkerCouldRun) {
  TestCluster c;
  EXPECT_FALSE(c.scheduler().Unrunnable(9).ok());
  c.Submit(JobBuilder(TaskBuilder()));
  EXPECT_EQ(*c.scheduler().Unrunnable(1), std::vector<std::string>{"no workers are connected"});
  c.AddWorker(WorkerBuilder().Cpus(4).Mem(32 * kGiB).Gpus(1, "NVIDIA A100", 40 * kGiB));
  EXPECT_EQ(*c.scheduler().Unrunnable(1), std::vector<std::string>{});
  // A group that fits only when the worker is free is not unrunnable.
  c.Submit(JobBuilder(TaskBuilder("ok").Cpus(4))
               .Add(TaskBuilder("big").Gpus(2))
               .Add(TaskBuilder("h100").Gpus(1).GpuType("H100")));
  EXPECT_EQ(*c.scheduler().Unrunnable(2),
            (std::vector<std::string>{"task group big: no worker is large enough for cpus=1 gpus=2",
                                      "task group h100: no worker offers gpu_type H100"}));
  c.Handle(WorkerDrained{1, true});
  EXPECT_EQ(*c.scheduler().Unrunnable(1), std::vector<std::string>{"all workers are drained"});
}

}  // namespace
}  // namespace drover::core
