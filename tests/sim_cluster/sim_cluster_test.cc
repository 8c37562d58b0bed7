// Scenarios that span leases, fencing deadlines, timeouts and retention
// windows, on the in-process cluster (sim_cluster.h): the real server shell
// and agents on one simulated clock, so each runs in milliseconds whatever
// span of time it covers. Their real-process counterparts, fewer and
// shorter, are in tests/integration.
#include "sim_cluster/sim_cluster.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "net/net_test_util.h"
#include "server/core_driver.h"

namespace drover::testing {
namespace {

using core::TaskState;

// One task that fills a worker (two cores).
constexpr std::string_view kOneBigTask = R"(
name = "big"
[[task]]
id = "t"
command = "train"
resources = { cpus = 2 }
)";

TaskId T(JobId job, uint32_t index) { return TaskId{job, index}; }

// A worker killed with its task (no goodbye) is declared lost after its
// grace, its lease expires, and the task runs again on the other worker,
// without using a retry; it ends once.
TEST(SimClusterTest, AKilledWorkersTaskRunsAgainElsewhereOnceItsLeaseExpires) {
  SimCluster c;
  Result<JobId> job = c.Submit(kOneBigTask);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  ASSERT_TRUE(c.WaitForState(T(*job, 0), TaskState::kRunning, Seconds(5)));
  const int first = c.RunningOn(T(*job, 0));
  ASSERT_GE(first, 0);
  const Time killed_at = c.clock().Now();
  c.Kill(first);
  ASSERT_TRUE(c.RunUntil([&] { return c.RunningOn(T(*job, 0)) == 1 - first; }, Seconds(120)));
  const core::TaskInfo info = *c.Task(T(*job, 0));
  EXPECT_EQ(info.attempt, 2u);
  EXPECT_EQ(info.state, TaskState::kRunning);
  // Not before the lease could have expired: the dead worker may still have
  // been running it as far as the server knew.
  EXPECT_GE(c.clock().Now() - killed_at, Seconds(30));
  ASSERT_EQ(c.scheduler().PastAttempts(T(*job, 0)).size(), 1u);
  EXPECT_EQ(c.scheduler().PastAttempts(T(*job, 0))[0].kind, core::EndKind::kWorkerLost);
  c.Exit(T(*job, 0));
  ASSERT_TRUE(c.WaitForState(T(*job, 0), TaskState::kSucceeded, Seconds(5)));
  EXPECT_EQ(c.runner(1 - first).started.size(), 1u);
}

// A worker cut off from the server stops its own task at its fencing
// deadline, before the server gives the task's lease to anyone else: never
// two attempts at once.
TEST(SimClusterTest, APartitionedWorkerFencesItsTaskBeforeItRunsElsewhere) {
  SimCluster c;
  Result<JobId> job = c.Submit(kOneBigTask);
  ASSERT_TRUE(job.ok());
  ASSERT_TRUE(c.WaitForState(T(*job, 0), TaskState::kRunning, Seconds(5)));
  const int first = c.RunningOn(T(*job, 0));
  const int other = 1 - first;
  c.Partition(first);
  // Watch every moment: the task never runs on both.
  bool overlap = false;
  ASSERT_TRUE(c.RunUntil(
      [&] {
        if (c.runner(first).Running(T(*job, 0)) && c.runner(other).Running(T(*job, 0))) {
          overlap = true;
        }
        return c.runner(other).Running(T(*job, 0));
      },
      Seconds(180)));
  EXPECT_FALSE(overlap);
  EXPECT_EQ(c.runner(first).killed, (std::vector<TaskId>{T(*job, 0)}));
  // Healed, the fenced worker comes back and takes work again.
  c.Heal(first);
  c.Exit(T(*job, 0));
  ASSERT_TRUE(c.WaitForState(T(*job, 0), TaskState::kSucceeded, Seconds(5)));
  ASSERT_TRUE(c.RunUntil(
      [&] {
        for (WorkerId w : c.scheduler().Workers()) {
          Result<core::WorkerInfo> info = c.scheduler().GetWorker(w);
          if (!info.ok() || info->lost) return false;
        }
        return true;
      },
      Seconds(60)));
}

// A connection that drops for a moment is not a lost worker: it
// re-attaches with its task still running, which ends once, on its first
// attempt.
TEST(SimClusterTest, ABriefDisconnectReattachesWithTheTaskStillRunning) {
  SimCluster c;
  Result<JobId> job = c.Submit(kOneBigTask);
  ASSERT_TRUE(job.ok());
  ASSERT_TRUE(c.WaitForState(T(*job, 0), TaskState::kRunning, Seconds(5)));
  const int on = c.RunningOn(T(*job, 0));
  c.Partition(on);
  c.RunFor(Seconds(2));
  c.Heal(on);
  c.RunFor(Seconds(60));
  EXPECT_EQ(c.StateOf(T(*job, 0)), TaskState::kRunning);
  EXPECT_EQ(c.RunningOn(T(*job, 0)), on);
  EXPECT_TRUE(c.runner(on).killed.empty());
  c.Exit(T(*job, 0), 0, "42");
  ASSERT_TRUE(c.WaitForState(T(*job, 0), TaskState::kSucceeded, Seconds(5)));
  const core::TaskInfo info = *c.Task(T(*job, 0));
  EXPECT_EQ(info.attempt, 1u);
  ASSERT_TRUE(info.outcome.has_value());
  EXPECT_EQ(info.outcome->result, "42");
}

// A task past its timeout is stopped and fails with the reason, two hours
// of simulated time later.
TEST(SimClusterTest, ATaskPastItsTimeoutIsStoppedAndFailsSayingWhy) {
  SimCluster c;
  Result<JobId> job = c.Submit(R"(
name = "slow"
[[task]]
id = "t"
command = "train"
timeout = "2h"
)");
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  ASSERT_TRUE(c.WaitForState(T(*job, 0), TaskState::kRunning, Seconds(5)));
  const Time started = c.clock().Now();
  ASSERT_TRUE(c.WaitForState(T(*job, 0), TaskState::kFailed, Seconds(3 * 3600)));
  EXPECT_GE(c.clock().Now() - started, Seconds(2 * 3600));
  const core::TaskInfo info = *c.Task(T(*job, 0));
  EXPECT_EQ(info.reason, "timed out after 2h");
  EXPECT_EQ(info.reason_kind, core::EndKind::kTimedOut);
}

// A task of high priority takes the room of a running low-priority one,
// which is vacated and runs again later without using a retry.
TEST(SimClusterTest, AHighPriorityTaskPreemptsALowOneWhichRunsAgainLater) {
  SimClusterOptions o;
  o.workers = 1;
  o.server = [](server::ServerConfig& config) { config.scheduler.preempt_priority = 50; };
  SimCluster c(o);
  Result<JobId> low = c.Submit(R"(
name = "low"
[[task]]
id = "sweep"
command = "sweep"
priority = 0
resources = { cpus = 2 }
)");
  ASSERT_TRUE(low.ok()) << low.status().ToString();
  ASSERT_TRUE(c.WaitForState(T(*low, 0), TaskState::kRunning, Seconds(5)));
  Result<JobId> urgent = c.Submit(R"(
name = "urgent"
[[task]]
id = "now"
command = "now"
priority = 90
resources = { cpus = 2 }
)");
  ASSERT_TRUE(urgent.ok());
  ASSERT_TRUE(c.WaitForState(T(*urgent, 0), TaskState::kRunning, Seconds(60)));
  EXPECT_EQ(c.runner(0).killed, (std::vector<TaskId>{T(*low, 0)}));
  const core::TaskInfo victim = *c.Task(T(*low, 0));
  EXPECT_EQ(victim.state, TaskState::kQueued);
  EXPECT_EQ(victim.reason_kind, core::EndKind::kPreempted);
  EXPECT_FALSE(victim.retry_at.has_value());
  c.Exit(T(*urgent, 0));
  ASSERT_TRUE(c.WaitForState(T(*low, 0), TaskState::kRunning, Seconds(5)));
  c.Exit(T(*low, 0));
  ASSERT_TRUE(c.WaitForState(T(*low, 0), TaskState::kSucceeded, Seconds(5)));
  EXPECT_EQ(c.Task(T(*low, 0))->attempt, 2u);
}

// A finished job is kept for --keep-finished (two days here), then
// forgotten and answered as expired; a running one is never forgotten.
TEST(SimClusterTest, AFinishedJobIsForgottenAfterTheKeepWindowAndNotBefore) {
  SimClusterOptions o;
  o.server = [](server::ServerConfig& config) {
    config.keep_finished = Seconds(2 * 24 * 3600);
    config.keep_outputs = Seconds(3600);
    // Two days of heartbeats every 2 s are 170,000 events: beat every five
    // minutes, with leases to match.
    config.heartbeat_interval = Seconds(300);
    config.scheduler.lease_ttl = Seconds(3000);
  };
  SimCluster c(o);
  Result<JobId> done = c.Submit(kOneBigTask);
  Result<JobId> running = c.Submit(kOneBigTask);
  ASSERT_TRUE(done.ok() && running.ok());
  ASSERT_TRUE(c.RunUntil([&] { return c.RunningOn(T(*done, 0)) >= 0; }, Seconds(5)));
  ASSERT_TRUE(c.RunUntil([&] { return c.RunningOn(T(*running, 0)) >= 0; }, Seconds(5)));
  c.Exit(T(*done, 0));
  ASSERT_TRUE(c.WaitForState(T(*done, 0), TaskState::kSucceeded, Seconds(5)));
  const Time ended = c.clock().Now();
  c.RunFor(Seconds(47 * 3600));
  EXPECT_TRUE(c.scheduler().GetJob(*done).ok());
  ASSERT_TRUE(c.RunUntil([&] { return c.server().driver().Expired(*done); }, Seconds(86400)));
  EXPECT_GE(c.clock().Now() - ended, Seconds(2 * 24 * 3600));
  EXPECT_FALSE(c.scheduler().GetJob(*done).ok());
  EXPECT_TRUE(c.scheduler().GetJob(*running).ok());
  EXPECT_EQ(c.StateOf(T(*running, 0)), TaskState::kRunning);
}

// The server restarts while a task runs: the worker re-attaches to the new
// server and reports it, and the task ends once, on its first attempt.
TEST(SimClusterTest, AServerRestartKeepsTheRunningTaskOnItsWorker) {
  SimCluster c;
  Result<JobId> job = c.Submit(kOneBigTask);
  ASSERT_TRUE(job.ok());
  ASSERT_TRUE(c.WaitForState(T(*job, 0), TaskState::kRunning, Seconds(5)));
  const int on = c.RunningOn(T(*job, 0));
  c.RestartServer();
  ASSERT_TRUE(c.RunUntil(
      [&] {
        std::optional<core::TaskInfo> t = c.Task(T(*job, 0));
        return t && t->state == TaskState::kRunning &&
               c.scheduler().Workers().size() == 2;
      },
      Seconds(60)));
  c.RunFor(Seconds(60));
  EXPECT_EQ(c.RunningOn(T(*job, 0)), on);
  EXPECT_TRUE(c.runner(on).killed.empty());
  c.Exit(T(*job, 0));
  ASSERT_TRUE(c.WaitForState(T(*job, 0), TaskState::kSucceeded, Seconds(10)));
  EXPECT_EQ(c.Task(T(*job, 0))->attempt, 1u);
  EXPECT_EQ(c.runner(on).started.size(), 1u);
}

// The owner's input as the file: input source reads it: the file's mtime,
// set to a simulated time.
void OwnerInputAt(const std::string& path, Time at) {
  std::ofstream(path, std::ios::app).close();
  const int64_t us = ToMicros(at);
  const timespec times[2] = {{us / 1000000, (us % 1000000) * 1000},
                             {us / 1000000, (us % 1000000) * 1000}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0) << path;
}

// A lent workstation (idle-desktop mode): its owner comes back while a task
// runs there; the task is frozen at once, and vacated when the owner stays
// past --suspend-for; it goes back to the queue without using a retry and
// runs again once the owner has been away for --idle-after. Minutes of an
// owner's presence, in simulated time.
TEST(SimClusterTest, AnOwnerWhoStaysGetsTheTaskFrozenThenVacatedAndItRunsAgainLater) {
  net::testing::TempDir owner_dir;
  const std::string owner = owner_dir / "owner";
  SimClusterOptions o;
  o.workers = 1;
  o.worker = [&](worker::AgentConfig& config) {
    config.desktop = true;
    config.idle_source = "file:" + owner;
    config.idle_after = Seconds(15 * 60);
    config.resume_after = Seconds(3600);
    config.suspend_for = Seconds(10 * 60);
    config.max_outside_load = 1000;  // the machine's real load is not an owner
    config.owner_poll = Seconds(1);
  };
  // Away for an hour before the worker starts (the simulated clock's start).
  OwnerInputAt(owner, SimulatedClock().Now() - Seconds(3600));
  SimCluster c(o);
  Result<JobId> job = c.Submit(kOneBigTask);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  // A worker counts its owner present until it has seen --idle-after
  // without input since it started.
  ASSERT_TRUE(c.WaitForState(T(*job, 0), TaskState::kRunning, Seconds(20 * 60)));

  OwnerInputAt(owner, c.clock().Now());
  ASSERT_TRUE(c.RunUntil([&] { return !c.runner(0).suspended.empty(); }, Seconds(5)));
  EXPECT_EQ(c.StateOf(T(*job, 0)), TaskState::kRunning);  // frozen, not ended
  // The owner stays (input every minute): vacated after --suspend-for.
  const Time returned = c.clock().Now();
  Time last_input = returned;
  ASSERT_TRUE(c.RunUntil(
      [&] {
        if (c.clock().Now() - last_input >= Seconds(60)) {
          last_input = c.clock().Now();
          OwnerInputAt(owner, last_input);
        }
        return c.StateOf(T(*job, 0)) == TaskState::kQueued;
      },
      Seconds(20 * 60)));
  EXPECT_GE(c.clock().Now() - returned, Seconds(10 * 60));
  const core::TaskInfo vacated = *c.Task(T(*job, 0));
  EXPECT_EQ(vacated.reason, "preempted: owner returned on w0");
  EXPECT_EQ(vacated.reason_kind, core::EndKind::kVacated);
  EXPECT_FALSE(vacated.retry_at.has_value());
  // Away again (no input since): it runs there once more, its second
  // attempt, --idle-after after the last input.
  ASSERT_TRUE(c.WaitForState(T(*job, 0), TaskState::kRunning, Seconds(30 * 60)));
  EXPECT_GE(c.clock().Now() - last_input, Seconds(15 * 60));
  c.Exit(T(*job, 0));
  ASSERT_TRUE(c.WaitForState(T(*job, 0), TaskState::kSucceeded, Seconds(5)));
  EXPECT_EQ(c.Task(T(*job, 0))->attempt, 2u);
  ASSERT_EQ(c.scheduler().PastAttempts(T(*job, 0)).size(), 1u);
  EXPECT_EQ(c.scheduler().PastAttempts(T(*job, 0))[0].kind, core::EndKind::kVacated);
}

}  // namespace
}  // namespace drover::testing
