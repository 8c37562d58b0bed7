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

// A task with an image is placed only on a worker with a container
// runtime, and with GPUs only where the runtime can hand a container only
// those; until one joins, explain says what is missing.
TEST(ExplainTest, AnImageTaskWaitsForAWorkerThatRunsContainers) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(4).Gpus(1));
  c.Submit(JobBuilder(TaskBuilder("boxed").Image("debian:12")).Add(TaskBuilder("bare")));
  const std::string none =
      "no worker can run containers (a task with an image needs a worker where podman runs; "
      "`drover worker --check` says what a machine has)";
  EXPECT_EQ(*c.scheduler().Explain(T(1, 0)), none);
  c.Run(T(1, 1));
  const WorkerId boxes = c.AddWorker(WorkerBuilder().Cpus(4).Gpus(1).Containers());
  c.Run(T(1, 0));
  EXPECT_EQ(*c.scheduler().Explain(T(1, 0)),
            "running on worker " + std::to_string(boxes) + " (attempt 1)");

  c.Submit(JobBuilder(TaskBuilder("boxed-gpu").Image("debian:12").Gpus(1)));
  EXPECT_EQ(*c.scheduler().Explain(T(2, 0)),
            "no worker can give a container only its own GPUs (a task with an image and GPUs "
            "needs the NVIDIA container toolkit's CDI spec, /etc/cdi/nvidia.yaml, on the worker)");
  const WorkerId cdi = c.AddWorker(WorkerBuilder().Cpus(4).Gpus(1).Containers(/*gpus=*/true));
  c.Run(T(2, 0));
  EXPECT_EQ(*c.scheduler().Explain(T(2, 0)),
            "running on worker " + std::to_string(cdi) + " (attempt 1)");
}

// `network = "none"` is placed only where a worker can make a network
// namespace; until one joins, explain says what is missing.
TEST(ExplainTest, ANetworkNoneTaskWaitsForAWorkerThatCanGiveItANetworkOfItsOwn) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(4));
  c.Submit(JobBuilder(TaskBuilder("offline").NetworkNone()).Add(TaskBuilder("online")));
  const std::string missing =
      "no worker can give a task a private network (network = \"none\" needs a worker that may "
      "create network namespaces: root, or one whose kernel allows unprivileged user namespaces)";
  EXPECT_EQ(*c.scheduler().Explain(T(1, 0)), missing);
  EXPECT_EQ(*c.scheduler().Unrunnable(1),
            std::vector<std::string>{"task group offline: " + missing});
  c.Run(T(1, 1));
  EXPECT_EQ(*c.scheduler().Explain(T(1, 1)), "running on worker 1 (attempt 1)");
  const WorkerId able = c.AddWorker(WorkerBuilder().Cpus(4).PrivateNetwork());
  c.Run(T(1, 0));
  EXPECT_EQ(*c.scheduler().Explain(T(1, 0)),
            "running on worker " + std::to_string(able) + " (attempt 1)");
}

// A task with `disk` goes only where that much is free, as the worker last
// said; a heartbeat that says more is free lets it be placed.
TEST(ExplainTest, ATaskWithDiskIsPlacedOnlyWhereThatMuchIsFree) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(4).DiskFree(5 * kGiB));
  c.Submit(JobBuilder(TaskBuilder("big").Disk(20 * kGiB)).Add(TaskBuilder("small").Disk(kGiB)));
  EXPECT_EQ(*c.scheduler().Explain(T(1, 0)),
            "no worker has 20 GiB free for its directory (disk; the most free is 5 GiB)");
  c.Run(T(1, 1));
  EXPECT_EQ(*c.scheduler().Explain(T(1, 1)), "running on worker 1 (attempt 1)");
  WorkerUtilization more;
  more.disk_free_bytes = 30 * kGiB;
  c.Handle(WorkerHeartbeat{1, more});
  c.Run(T(1, 0));  // claimed at the heartbeat: a Grant without a claim fails
  EXPECT_EQ(*c.scheduler().Explain(T(1, 0)), "running on worker 1 (attempt 1)");
  EXPECT_EQ(TaskBuilder().Disk(20 * kGiB).Build().resources.ToString(), "cpus=1 disk=20 GiB");
}

// One core; alice's job 1 (three tasks) ran an hour before bob's job 2
// arrives; with no half-life alice's hour stays whole.
void AliceRanAnHourThenBobSubmits(TestCluster& c) {
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Submit(JobBuilder(TaskBuilder().Array(0, 3)).User("alice"));
  c.Run(T(1, 0));
  c.Advance(Seconds(3600));
  c.Submit(JobBuilder(TaskBuilder()).User("bob"));
  c.Advance(Seconds(1));  // the standings as of now
}

TEST(ExplainTest, NamesTheFairShareThatPutsAnotherUserFirst) {
  SchedulerConfig config;
  config.users.fair_share.half_life = Duration(0);
  TestCluster c(config);
  AliceRanAnHourThenBobSubmits(c);
  EXPECT_EQ(*c.scheduler().Explain(T(1, 1)),
            "behind 1 task of its class; fair share: alice has used 1 CPU-h (share 1), bob 0 "
            "CPU-h goes first");
  EXPECT_EQ(*c.scheduler().Explain(T(1, 2)),
            "behind 2 tasks of its class; fair share: alice has used 1 CPU-h (share 1), bob 0 "
            "CPU-h goes first");
  // Bob's own task is first in its class: it waits for the core.
  EXPECT_EQ(*c.scheduler().Explain(T(2, 0)), "needs 1 cpu, largest free is 0");
}

TEST(ExplainTest, NamesGroupsAndSharesAndOnlyUsersAheadByStanding) {
  SchedulerConfig config;
  config.users.fair_share.half_life = Duration(0);
  config.users.groups["lab"] = {"bob", "cid"};
  config.users.fair_share.shares["lab"] = 2;
  config.users.fair_share.shares["alice"] = 4;
  TestCluster c(config);
  AliceRanAnHourThenBobSubmits(c);
  c.Submit(JobBuilder(TaskBuilder()).User("cid"));  // job 3: the lab's, once
  c.Submit(JobBuilder(TaskBuilder()).User("dan"));  // job 4
  c.Advance(Seconds(1));
  EXPECT_EQ(*c.scheduler().Explain(T(1, 1)),
            "behind 3 tasks of its class; fair share: alice has used 1 CPU-h (share 4), group lab "
            "0 CPU-h (share 2) and dan 0 CPU-h go first");
  // cid is behind bob of the same party: by arrival, not by standing.
  EXPECT_EQ(*c.scheduler().Explain(T(3, 0)), "behind 1 task of its class");
  // A higher priority goes first whatever the standings.
  c.Submit(JobBuilder(TaskBuilder().Priority(5)).User("alice"));  // job 5
  c.Advance(Seconds(1));
  EXPECT_EQ(*c.scheduler().Explain(T(2, 0)), "behind 1 task of its class");
}

TEST(ExplainTest, SaysNothingOfFairShareWhenItIsOff) {
  SchedulerConfig config;
  config.users.fair_share.enabled = false;
  TestCluster c(config);
  AliceRanAnHourThenBobSubmits(c);
  EXPECT_EQ(*c.scheduler().Explain(T(2, 0)), "behind 2 tasks of its class");
}

}  // namespace
}  // namespace drover::core
