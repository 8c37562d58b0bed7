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

// Runs job `job`'s `n` tasks to their ends: every assigned attempt is
// granted and started, runs `run_for`, and ends with the exit code
// `exit_of(worker)`; one simulated second passes between rounds, unless
// `stop` says to stop (after a round's endings). Returns the attempts that
// ran on each worker.
std::map<WorkerId, int> Drive(TestCluster& c, JobId job, uint32_t n,
                              const std::function<int(WorkerId)>& exit_of,
                              Duration run_for = Seconds(1), int max_rounds = 400,
                              const std::function<bool()>& stop = {}) {
  std::map<WorkerId, int> ran;
  for (int round = 0; round < max_rounds; ++round) {
    c.TakeRaw();
    for (uint32_t i = 0; i < n; ++i) {
      if (c.scheduler().GetTask(T(job, i))->state == TaskState::kAssigned) c.Run(T(job, i));
    }
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
    if (all_done || (stop && stop())) break;
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

// The thresholds: five quick failures of groups that ran well elsewhere,
// and at least 70% of the worker's endings. Worker 1 first succeeds three
// times (w2 and w3 drained), then fails every attempt in a second: 5 of 8
// and 6 of 9 are not enough, 7 of 10 is.
TEST(QuarantineTest, TheEvidenceMustBeFiveQuickFailuresAndSeventyPercentOfTheEndings) {
  TestCluster c(Fast());
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Handle(WorkerDrained{2, true});
  c.Handle(WorkerDrained{3, true});
  const JobId job = c.Submit(Array(40, 3));
  Drive(
      c, job, 40, [](WorkerId) { return 0; }, Seconds(1), 3);
  // Now the group runs well on w2 and w3 too, and fails quickly on w1.
  c.Handle(WorkerDrained{2, false});
  c.Handle(WorkerDrained{3, false});
  int failed_on_w1 = 0;
  for (int round = 0; round < 40 && c.scheduler().GetWorker(1)->quarantine_why.empty(); ++round) {
    std::map<WorkerId, int> ran = Drive(
        c, job, 40, [](WorkerId w) { return w == 1 ? 1 : 0; }, Seconds(1), 1);
    failed_on_w1 += ran[1];
  }
  EXPECT_EQ(failed_on_w1, 7);
  EXPECT_THAT(c.scheduler().GetWorker(1)->quarantine_why,
              ::testing::StartsWith("7 attempts failed in under 30s"));
  EXPECT_THAT(c.scheduler().GetWorker(1)->quarantine_why,
              ::testing::EndsWith("; 3 ended otherwise (in 30m)"));
}

// A cool-down doubles on each repeat; a worker released is on probation
// (its first quick failure quarantines it again); each quiet stretch of
// twice its last cool-down forgets one doubling.
TEST(QuarantineTest, TheCoolDownDoublesOnRepeatsAndDecaysWhenQuiet) {
  TestCluster c(Fast());
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.AddWorker(WorkerBuilder().Cpus(1));
  auto black_hole = [](WorkerId w) { return w == 1 ? 1 : 0; };
  auto cool_down = [&] {
    Result<WorkerInfo> w = c.scheduler().GetWorker(1);
    return w->quarantine_why.empty() ? Duration::zero() : w->quarantined_until - c.now();
  };
  auto wait_out = [&] { c.Advance(c.scheduler().GetWorker(1)->quarantined_until - c.now()); };
  auto held = [&] { return !c.scheduler().GetWorker(1)->quarantine_why.empty(); };
  // One long job, driven until w1 is quarantined each time.
  const JobId job = c.Submit(Array(300, 3));
  auto until_held = [&] { return Drive(c, job, 300, black_hole, Seconds(1), 400, held); };
  until_held();
  EXPECT_EQ(cool_down(), Seconds(10 * 60));
  wait_out();
  ASSERT_EQ(cool_down(), Duration::zero());
  // On probation: one quick failure, and twice as long.
  EXPECT_EQ(until_held()[1], 1);
  EXPECT_EQ(cool_down(), Seconds(20 * 60));
  wait_out();
  // Quiet for 45 minutes (at least twice the last 20): one doubling is
  // forgotten, so the next lasts 20 minutes, not 40.
  c.Advance(Seconds(45 * 60));
  until_held();
  EXPECT_EQ(cool_down(), Seconds(20 * 60));
  wait_out();
  // Quiet for long enough to forget both: back to 10 minutes.
  c.Advance(Seconds(2 * 60 * 60));
  until_held();
  EXPECT_EQ(cool_down(), Seconds(10 * 60));
}

// A quarantine and its evidence survive a server restart, restored from
// the journal or from a snapshot: a worker quarantined before rejoins
// quarantined, with the same reason and end, and takes nothing new.
TEST(QuarantineTest, AQuarantineSurvivesARestart) {
  for (const bool from_snapshot : {false, true}) {
    SCOPED_TRACE(from_snapshot ? "from a snapshot" : "from the journal");
    TestCluster c(Fast());
    c.AddWorker(WorkerBuilder().Cpus(1));
    c.AddWorker(WorkerBuilder().Cpus(1));
    c.AddWorker(WorkerBuilder().Cpus(1));
    auto black_hole = [](WorkerId w) { return w == 1 ? 1 : 0; };
    Drive(c, c.Submit(Array(30, 3)), 30, black_hole);
    const WorkerInfo before = *c.scheduler().GetWorker(1);
    ASSERT_FALSE(before.quarantine_why.empty());
    c.Advance(Seconds(60));
    c.Restart(from_snapshot);
    for (WorkerId w : {1, 2, 3}) c.Rejoin(w);
    const WorkerInfo after = *c.scheduler().GetWorker(1);
    EXPECT_EQ(after.quarantine_why, before.quarantine_why);
    EXPECT_EQ(after.quarantined_until, before.quarantined_until);
    EXPECT_EQ(c.scheduler().QuarantineCount(), 0u);  // a replay's are not counted again
    std::map<WorkerId, int> ran = Drive(c, c.Submit(Array(30, 3)), 30, black_hole);
    EXPECT_EQ(ran[1], 0);
    // It ends on time, and the worker is on probation as it would have been.
    c.Advance(after.quarantined_until - c.now());
    EXPECT_TRUE(c.scheduler().GetWorker(1)->quarantine_why.empty());
    ran = Drive(c, c.Submit(Array(30, 3)), 30, black_hole, Seconds(1), 400,
                [&] { return !c.scheduler().GetWorker(1)->quarantine_why.empty(); });
    EXPECT_EQ(ran[1], 1);
    EXPECT_EQ(c.scheduler().GetWorker(1)->quarantined_until - c.now(), Seconds(20 * 60));
  }
}

// Evidence gathered before a restart counts after it: four quick failures
// before, one after, and the worker is quarantined on five.
TEST(QuarantineTest, EvidenceBeforeARestartCountsAfterIt) {
  for (const bool from_snapshot : {false, true}) {
    SCOPED_TRACE(from_snapshot ? "from a snapshot" : "from the journal");
    TestCluster c(Fast());
    c.AddWorker(WorkerBuilder().Cpus(1));
    c.AddWorker(WorkerBuilder().Cpus(1));
    c.AddWorker(WorkerBuilder().Cpus(1));
    auto black_hole = [](WorkerId w) { return w == 1 ? 1 : 0; };
    const JobId job = c.Submit(Array(30, 3));
    std::map<WorkerId, int> ran = Drive(c, job, 30, black_hole, Seconds(1), 4);
    ASSERT_EQ(ran[1], 4);
    ASSERT_TRUE(c.scheduler().GetWorker(1)->quarantine_why.empty());
    c.Restart(from_snapshot);
    for (WorkerId w : {1, 2, 3}) c.Rejoin(w);
    ran = Drive(c, job, 30, black_hole);
    EXPECT_EQ(ran[1], 1);
    EXPECT_THAT(c.scheduler().GetWorker(1)->quarantine_why,
                ::testing::StartsWith("5 attempts failed in under 30s"));
    for (uint32_t i = 0; i < 30; ++i) {
      EXPECT_EQ(c.scheduler().GetTask(T(job, i))->state, TaskState::kSucceeded) << i;
    }
  }
}

}  // namespace
}  // namespace drover::core
