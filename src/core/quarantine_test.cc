// Black-hole quarantine (quarantine.h) on the simulated clock: a worker
// whose attempts fail in a second where the same group succeeds elsewhere
// is quarantined, with the evidence in explain and GetWorker, takes
// nothing new, and the attempt that tipped it uses no retry; the cool-down
// ends on time and doubles on a repeat; an undrain lifts it; a job that
// fails everywhere, or failures that are not quick, condemn nobody; off,
// nothing happens.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/scheduler.h"
#include "core/testing/test_cluster.h"

namespace drover::core {
namespace {

using testing::JobBuilder;
using testing::T;
using testing::TaskBuilder;
using testing::TestCluster;
using testing::WorkerBuilder;

// Runs job `job`'s `n` tasks to their ends: every claimed attempt is
// granted and started, runs `run_for`, and ends with the exit code
// `exit_of(worker)`; one simulated second passes between rounds. Returns
// the attempts that ran on each worker.
std::map<WorkerId, int> Drive(TestCluster& c, JobId job, uint32_t n,
                              const std::function<int(WorkerId)>& exit_of,
                              Duration run_for = Seconds(1), int max_rounds = 400) {
  std::map<WorkerId, int> ran;
  for (int round = 0; round < max_rounds; ++round) {
    std::vector<TaskId> claimed;
    for (const Command& cmd : c.TakeRaw()) {
      if (const auto* claim = std::get_if<ClaimLeases>(&cmd)) claimed.push_back(claim->task);
    }
    for (const TaskId& t : claimed) c.Run(t);
    c.Advance(run_for);
    bool all_done = true;
    for (uint32_t i = 0; i < n; ++i) {
      Result<TaskInfo> info = c.scheduler().GetTask(T(job, i));
      if (!info.ok()) continue;
      if (info->state == TaskState::kRunning) {
        const WorkerId w = info->worker.value_or(0);
        ++ran[w];
        c.Finish(T(job, i), exit_of(w));
      }
      info = c.scheduler().GetTask(T(job, i));
      all_done = all_done && (info->state == TaskState::kSucceeded ||
                              info->state == TaskState::kFailed);
    }
    if (all_done) break;
    c.Advance(Seconds(1));
  }
  return ran;
}

SchedulerConfig Fast() {
  SchedulerConfig config;
  config.max_retry_backoff = Seconds(1);
  return config;
}

// One group of `n` tasks (an array), each with `retries` (1 s backoff).
JobBuilder Array(uint32_t n, uint32_t retries) {
  return JobBuilder(TaskBuilder("g").Array(0, n).Retries(retries, Seconds(1)));
}

TEST(QuarantineTest, ABlackHoleIsQuarantinedWithItsEvidenceAndItsLastFailureUsesNoRetry) {
  TestCluster c(Fast());
  c.AddWorker(WorkerBuilder().Cpus(1));  // 1: every attempt fails at once
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.AddWorker(WorkerBuilder().Cpus(1));
  const JobId job = c.Submit(Array(30, 3));
  std::map<WorkerId, int> ran = Drive(c, job, 30, [](WorkerId w) { return w == 1 ? 1 : 0; });
  Result<WorkerInfo> bad = c.scheduler().GetWorker(1);
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->quarantine_why,
            "5 attempts failed in under 30s where the same groups ran well on 2 other "
            "workers; 0 ended otherwise (in 30m)")
      << "attempts on w1: " << ran[1];
  EXPECT_EQ(ran[1], 5);  // nothing more went there
  // Every task succeeded: no retry ran out on the black hole.
  for (uint32_t i = 0; i < 30; ++i) {
    EXPECT_EQ(c.scheduler().GetTask(T(job, i))->state, TaskState::kSucceeded) << i;
  }
  // The cool-down ends on time; a second quarantine lasts twice as long.
  const Time until = bad->quarantined_until;
  c.Advance(until - c.now() - Seconds(1));
  EXPECT_FALSE(c.scheduler().GetWorker(1)->quarantine_why.empty());
  c.Advance(Seconds(1));
  EXPECT_TRUE(c.scheduler().GetWorker(1)->quarantine_why.empty());
  const JobId again = c.Submit(Array(30, 3));
  Drive(c, again, 30, [](WorkerId w) { return w == 1 ? 1 : 0; });
  Result<WorkerInfo> second = c.scheduler().GetWorker(1);
  ASSERT_FALSE(second->quarantine_why.empty());
  EXPECT_GT(second->quarantined_until - c.now(), Seconds(10 * 60));
  // Quarantined, with nobody else: explain says why; an undrain lifts it.
  c.Handle(WorkerDrained{2, true});
  c.Handle(WorkerDrained{3, true});
  const JobId waiting = c.Submit(JobBuilder(TaskBuilder("w")));
  EXPECT_THAT(*c.scheduler().Explain(T(waiting, 0)),
              ::testing::HasSubstr("quarantined (1 attempt failed in under 30s"));
  c.Handle(WorkerDrained{1, false});
  EXPECT_TRUE(c.scheduler().GetWorker(1)->quarantine_why.empty());
}

TEST(QuarantineTest, AJobThatFailsEverywhereCondemnsNoWorker) {
  TestCluster c(Fast());
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.AddWorker(WorkerBuilder().Cpus(1));
  const JobId job = c.Submit(Array(20, 1));
  Drive(c, job, 20, [](WorkerId) { return 1; });
  EXPECT_TRUE(c.scheduler().GetWorker(1)->quarantine_why.empty());
  EXPECT_TRUE(c.scheduler().GetWorker(2)->quarantine_why.empty());
}

TEST(QuarantineTest, FailuresThatAreNotQuickAreNoEvidence) {
  TestCluster c(Fast());
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.AddWorker(WorkerBuilder().Cpus(1));
  const JobId job = c.Submit(Array(20, 3));
  Drive(c, job, 20, [](WorkerId w) { return w == 1 ? 1 : 0; }, Seconds(60));
  EXPECT_TRUE(c.scheduler().GetWorker(1)->quarantine_why.empty());
}

TEST(QuarantineTest, OffNothingIsQuarantined) {
  SchedulerConfig config = Fast();
  config.quarantine.enabled = false;
  TestCluster c(config);
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.AddWorker(WorkerBuilder().Cpus(1));
  const JobId job = c.Submit(Array(20, 3));
  Drive(c, job, 20, [](WorkerId w) { return w == 1 ? 1 : 0; });
  EXPECT_TRUE(c.scheduler().GetWorker(1)->quarantine_why.empty());
}

}  // namespace
}  // namespace drover::core
