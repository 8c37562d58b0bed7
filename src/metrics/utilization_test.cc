#include "metrics/utilization.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/testing/test_cluster.h"

namespace drover::metrics {
namespace {

using core::testing::JobBuilder;
using core::testing::T;
using core::testing::TaskBuilder;
using core::testing::TestCluster;
using core::testing::WorkerBuilder;

UtilizationSample At(int64_t t_ms) {
  UtilizationSample s;
  s.t_ms = t_ms;
  return s;
}

TEST(UtilizationRingTest, KeepsTheNewestUpToCapacity) {
  UtilizationRing ring(3);
  EXPECT_TRUE(ring.Since(INT64_MIN).empty());
  for (int64_t t = 1; t <= 5; ++t) ring.Add(At(t));
  EXPECT_EQ(ring.size(), 3u);
  std::vector<UtilizationSample> all = ring.Since(INT64_MIN);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].t_ms, 3);
  EXPECT_EQ(all[2].t_ms, 5);
  std::vector<UtilizationSample> after = ring.Since(4);
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after[0].t_ms, 5);
  EXPECT_TRUE(ring.Since(5).empty());
}

TEST(UtilizationTest, SampleAddsWorkersAllocationsAndHeartbeats) {
  TestCluster c;
  const WorkerId a = c.AddWorker(WorkerBuilder().Cpus(4).Mem(16 * kGiB).Gpus(2));
  const WorkerId b = c.AddWorker(WorkerBuilder().Cpus(2).Mem(8 * kGiB));
  core::WorkerUtilization ua;
  ua.cpu_percent = 50;
  ua.mem_used_bytes = 3 * kGiB;
  ua.gpus = {{0, 80, 1 * kGiB}, {1, 20, 0}};
  c.Handle(core::WorkerHeartbeat{a, ua});
  core::WorkerUtilization ub;
  ub.cpu_percent = 20;
  ub.mem_used_bytes = 1 * kGiB;
  c.Handle(core::WorkerHeartbeat{b, ub});
  // One GPU task (a quarter GPU, 2 cpus, 4 GiB) running; one CPU task queued
  // behind a 6-cpu request nobody fits; one waiting on it.
  const JobId job = c.Submit(JobBuilder()
                                 .Add(TaskBuilder("g").Cpus(2).Mem(4 * kGiB).Gpus(0.25))
                                 .Add(TaskBuilder("big").Cpus(6))
                                 .Add(TaskBuilder("after").DependsOn("big")));
  c.Run(T(job, 0));

  const UtilizationSample s = SampleUtilization(c.scheduler(), TimeFromMicros(1'234'567'000));
  EXPECT_EQ(s.t_ms, 1'234'567);
  EXPECT_EQ(s.workers, 2u);
  EXPECT_EQ(s.cpus_total, 6u);
  EXPECT_EQ(s.cpus_allocated, 2u);
  EXPECT_DOUBLE_EQ(s.cpu_busy_percent, (50.0 * 4 + 20.0 * 2) / 6);
  EXPECT_EQ(s.mem_total_bytes, 24 * kGiB);
  EXPECT_EQ(s.mem_allocated_bytes, 4 * kGiB);
  EXPECT_EQ(s.mem_used_bytes, 4 * kGiB);
  EXPECT_EQ(s.gpus_total, 2u);
  EXPECT_DOUBLE_EQ(s.gpus_allocated, 0.25);
  EXPECT_DOUBLE_EQ(s.gpu_util_percent, 50.0);
  EXPECT_EQ(s.tasks_running, 1u);
  EXPECT_EQ(s.tasks_queued, 1u);
  EXPECT_EQ(s.tasks_waiting, 1u);

  // A lost worker no longer counts.
  c.Handle(core::WorkerLost{b});
  const UtilizationSample after = SampleUtilization(c.scheduler(), c.now());
  EXPECT_EQ(after.workers, 1u);
  EXPECT_EQ(after.cpus_total, 4u);
}

TEST(UtilizationTest, JsonShape) {
  UtilizationSample s = At(42);
  s.cpus_total = 8;
  const nlohmann::json j = UtilizationJson(Seconds(1), 3600, {s});
  EXPECT_EQ(j["interval_ms"], 1000);
  EXPECT_EQ(j["capacity"], 3600);
  ASSERT_EQ(j["samples"].size(), 1u);
  for (const char* key :
       {"t_ms", "cpus_total", "cpus_allocated", "cpu_busy_percent", "mem_total_bytes",
        "mem_allocated_bytes", "mem_used_bytes", "gpus_total", "gpus_allocated",
        "gpu_util_percent", "tasks_running", "tasks_queued"}) {
    EXPECT_TRUE(j["samples"][0].contains(key)) << key;
  }
  EXPECT_EQ(j["samples"][0]["t_ms"], 42);
  EXPECT_EQ(j["samples"][0]["cpus_total"], 8);
}

}  // namespace
}  // namespace drover::metrics
