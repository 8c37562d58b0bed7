// Unhealthy workers (docs/guide.md, "Unhealthy workers"), through real
// processes: a worker's health-check program that fails stops new work
// there, with its first line of output as the reason in `drover workers`
// and in the task's explanation, while what runs goes on; a passing run
// lets work in again; a program that hangs is killed at its timeout, its
// process group with it; a work directory whose file system fills up (a
// small tmpfs of the test's own) does the same; a GPU the (fake) NVML
// library reports sick leaves the offer while the other goes on. The checks' own words
// (a read-only file system among them): worker/agent/health_monitor_test.cc.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "cluster.h"

namespace drover::testing {
namespace {

void Touch(const std::string& path) { std::ofstream(path) << "ok\n"; }

TEST(HealthTest, AFailingCheckStopsNewWorkWithItsReasonAndAPassingOneLetsItIn) {
  Cluster c;
  Process& server = c.StartServer();
  const std::string mounted = c.dir() + "/scratch-mounted";
  Touch(mounted);
  c.StartWorker("w1", {"--health-check",
                       "test -e " + mounted + " || { echo /scratch not mounted; exit 1; }",
                       "--health-interval", "100ms"});
  RunResult first = c.Drover(Submit({"--wait"}, {"true"}));
  ASSERT_EQ(first.status, 0) << first.output;

  // The long task runs on while the worker is unhealthy.
  const std::string go = c.dir() + "/go";
  const uint64_t running = SubmittedJob(c.Drover(Submit(
      {}, {"sh", "-c", "while [ ! -e " + go + " ]; do sleep 0.05; done"})));
  EventTap tap(c.Api().options(), running);
  ASSERT_TRUE(tap.WaitForState(std::to_string(running) + ".0", "running"));

  ASSERT_EQ(unlink(mounted.c_str()), 0);
  ASSERT_TRUE(server.WaitForLine("worker 1 is unhealthy: /scratch not mounted", In(kJobTimeout)))
      << server.output();
  RunResult workers = c.Drover({"workers"});
  EXPECT_NE(workers.output.find("unhealthy (/scratch not mounted, since"), std::string::npos)
      << workers.output;
  const uint64_t waiting = SubmittedJob(c.Drover(Submit({}, {"true"})));
  const std::string task = std::to_string(waiting) + ".0";
  nlohmann::json info = c.Get("/api/v1/tasks/" + task);
  EXPECT_EQ(info["state"], "queued") << info.dump(2);
  EXPECT_NE(info.value("explain", "").find("all workers are unhealthy (/scratch not mounted)"),
            std::string::npos)
      << info.dump(2);
  nlohmann::json w = c.Get("/api/v1/workers")["workers"][0];
  EXPECT_EQ(w.value("unhealthy", ""), "/scratch not mounted") << w.dump(2);
  Result<std::string> metrics = c.Api().GetText("/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status().ToString();
  EXPECT_NE(metrics->find("drover_workers{state=\"unhealthy\"} 1\n"), std::string::npos)
      << *metrics;
  EXPECT_NE(metrics->find("drover_worker_health_failures_total{kind=\"program\"} 1\n"),
            std::string::npos)
      << *metrics;

  // Healthy again: the queued task runs; the long one ends as it would.
  Touch(mounted);
  ASSERT_TRUE(server.WaitForLine("worker 1 is healthy again", In(kJobTimeout)))
      << server.output();
  EventTap after(c.Api().options(), waiting);
  EXPECT_TRUE(after.WaitForState(task, "succeeded"));
  Touch(go);
  EXPECT_TRUE(tap.WaitForState(std::to_string(running) + ".0", "succeeded"));
}

TEST(HealthTest, ACheckThatHangsIsKilledWithItsProcessGroupAtItsTimeout) {
  Cluster c;
  Process& server = c.StartServer();
  const std::string pid_file = c.dir() + "/sleeper";
  c.StartWorker("w1", {"--health-check",
                       "sleep 1000 & echo $! > " + pid_file + ".tmp && mv " + pid_file + ".tmp " +
                           pid_file + "; wait",
                       "--health-timeout", "300ms", "--health-interval", "1h"});
  ASSERT_TRUE(server.WaitForLine(
      "worker 1 is unhealthy: the health check did not finish within 300ms", In(kJobTimeout)))
      << server.output();
  std::ifstream in(pid_file);
  pid_t sleeper = 0;
  ASSERT_TRUE(in >> sleeper) << "the check did not start its sleep";
  // Killed with the group before the verdict; gone (or a zombie its
  // parent has not reaped) once the signal has landed.
  const Deadline deadline = In(std::chrono::seconds(30));
  auto dead = [&] {
    std::ifstream stat("/proc/" + std::to_string(sleeper) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) return true;
    const size_t close = line.rfind(')');
    return close != std::string::npos && line.compare(close, 4, ") Z ") == 0;
  };
  while (!dead() && std::chrono::steady_clock::now() < deadline) sched_yield();
  EXPECT_TRUE(dead()) << "the health check's sleep " << sleeper << " still runs";
}

TEST(HealthTest, AWorkDirectoryThatFillsUpStopsNewWorkUntilThereIsRoomAgain) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to mount a small file system";
  Cluster c;
  const std::string disk = c.dir() + "/disk";
  ASSERT_EQ(mkdir(disk.c_str(), 0755), 0);
  if (mount("tmpfs", disk.c_str(), "tmpfs", 0, "size=4m") != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs here: " << strerror(errno);
  }
  struct Unmount {
    std::string at;
    ~Unmount() { umount2(at.c_str(), MNT_DETACH); }
  } unmount{disk};
  Process& server = c.StartServer();
  Process worker({c.binary(), "worker", "--access", c.access_file(), "--name", "w1", "--workdir",
                  disk + "/work", "--isolation", "none", "--run-as-root", "--min-free-disk",
                  "2MiB", "--health-interval", "100ms"});
  ASSERT_TRUE(worker.WaitForLine("attached as worker", In(kStartTimeout))) << worker.output();
  RunResult first = c.Drover(Submit({"--wait"}, {"true"}));
  ASSERT_EQ(first.status, 0) << first.output;

  // 3 of its 4 MiB taken: below the floor.
  {
    std::ofstream fill(disk + "/filler", std::ios::binary);
    const std::string mib(1 << 20, 'x');
    for (int i = 0; i < 3; ++i) fill << mib;
  }
  ASSERT_TRUE(server.WaitForLine("worker 1 is unhealthy: the work directory's file system has",
                                 In(kJobTimeout)))
      << server.output();
  EXPECT_NE(server.output().find("free, below 2 MiB (" + disk + "/work)"), std::string::npos)
      << server.output();
  Result<std::string> metrics = c.Api().GetText("/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status().ToString();
  EXPECT_NE(metrics->find("drover_worker_health_failures_total{kind=\"disk\"} 1\n"),
            std::string::npos)
      << *metrics;
  ASSERT_EQ(unlink((disk + "/filler").c_str()), 0);
  ASSERT_TRUE(server.WaitForLine("worker 1 is healthy again", In(kJobTimeout))) << server.output();
  RunResult after = c.Drover(Submit({"--wait"}, {"true"}));
  EXPECT_EQ(after.status, 0) << after.output;
}

}  // namespace
}  // namespace drover::testing

namespace drover::testing {
namespace {

// GPU health through NVML (the fake library's hooks): a GPU with
// uncorrectable ECC errors is out of the offer, said by the server and in
// `drover workers`, while the task on the other GPU runs on; a task that
// wants a GPU waits for that one; a critical Xid on it takes it out too.
TEST(HealthTest, ASickGpuIsOutOfTheOfferWhileTheTaskOnTheOtherRunsOn) {
  Cluster c;
  Process& server = c.StartServer();
  const std::string health = c.dir() + "/gpu-health";
  ASSERT_EQ(mkdir(health.c_str(), 0755), 0);
  c.StartWorker("w1", {"--health-interval", "100ms"},
                {"FAKE_NVML_DEVICES=2", "LD_LIBRARY_PATH=" + std::string(FAKE_NVML_DIR),
                 "FAKE_NVML_HEALTH_DIR=" + health, "DROVER_LOCK_DIR=" + c.dir()});
  const std::string go = c.dir() + "/go";
  const uint64_t holder = SubmittedJob(c.Drover(Submit(
      {"--gpus", "1"}, {"sh", "-c", "while [ ! -e " + go + " ]; do sleep 0.05; done"})));
  EventTap tap(c.Api().options(), holder);
  const std::string held_task = std::to_string(holder) + ".0";
  ASSERT_TRUE(tap.WaitForState(held_task, "running"));
  const int held = c.Get("/api/v1/tasks/" + held_task)["gpus"][0]["index"];
  const int other = 1 - held;

  // Written whole before the fake library can read it: into place by rename.
  {
    std::ofstream(health + "/ecc.tmp") << "2";
  }
  ASSERT_EQ(rename((health + "/ecc.tmp").c_str(),
                   (health + "/" + std::to_string(other) + ".ecc").c_str()),
            0);
  ASSERT_TRUE(server.WaitForLine("worker 1: GPU " + std::to_string(other) +
                                     " is sick: 2 uncorrectable ECC errors",
                                 In(kJobTimeout)))
      << server.output();
  RunResult workers = c.Drover({"workers"});
  EXPECT_NE(workers.output.find(std::to_string(other) +
                                ":NVIDIA A100-SXM4-80GB (sick: 2 uncorrectable ECC errors)"),
            std::string::npos)
      << workers.output;
  Result<std::string> metrics = c.Api().GetText("/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status().ToString();
  EXPECT_NE(metrics->find("drover_worker_health_failures_total{kind=\"gpu\"} 1\n"),
            std::string::npos)
      << *metrics;
  const uint64_t waiting = SubmittedJob(c.Drover(Submit({"--gpus", "1"}, {"true"})));
  const std::string waiting_task = std::to_string(waiting) + ".0";
  EXPECT_EQ(c.Get("/api/v1/tasks/" + waiting_task)["state"], "queued");

  // The holder ends as it would; the waiting task gets its GPU, not the sick one.
  Touch(go);
  EXPECT_TRUE(tap.WaitForState(held_task, "succeeded"));
  EventTap after(c.Api().options(), waiting);
  ASSERT_TRUE(after.WaitForState(waiting_task, "succeeded"));
  EXPECT_EQ(c.Get("/api/v1/tasks/" + waiting_task)["gpus"][0]["index"], held);

  // A critical Xid on the other one takes it out too.
  {
    std::ofstream(health + "/xid.tmp") << "79";
  }
  ASSERT_EQ(rename((health + "/xid.tmp").c_str(),
                   (health + "/" + std::to_string(held) + ".xid").c_str()),
            0);
  EXPECT_TRUE(server.WaitForLine("worker 1: GPU " + std::to_string(held) + " is sick: Xid 79",
                                 In(kJobTimeout)))
      << server.output();
}

}  // namespace
}  // namespace drover::testing

namespace drover::testing {
namespace {

// A black hole through real processes: every task fails at once on w1
// (its work directory gives it away) and succeeds on w2 and w3; w1 is
// quarantined with the evidence in `drover workers`, every task succeeds
// (the attempt that tipped it used no retry); after the server is killed
// and started again w1 rejoins still quarantined, until the same time; an
// undrain lifts it.
TEST(HealthTest, AWorkerWhoseTasksFailWhereTheySucceedElsewhereIsQuarantined) {
  Cluster c;
  c.StartServer();
  Process& w1 = c.StartWorker("w1");
  Process& w2 = c.StartWorker("w2");
  Process& w3 = c.StartWorker("w3");
  const uint64_t job =
      Post(c, {{"name", "black-hole"},
               {"task",
                {{{"id", "t"},
                  {"array", "0-29"},
                  {"command", {"sh", "-c", "case $PWD in */workers/w1/*) exit 1;; esac"}},
                  {"retries", 3},
                  {"retry_backoff", "100ms"}}}}});
  ASSERT_GT(job, 0u);
  RunResult run = c.Drover({"wait", std::to_string(job)});
  EXPECT_EQ(run.status, 0) << run.output;
  RunResult workers = c.Drover({"workers"});
  EXPECT_NE(workers.output.find("quarantined (until "), std::string::npos) << workers.output;
  EXPECT_NE(workers.output.find("attempts failed in under 30s where the same groups ran well on"),
            std::string::npos)
      << workers.output;
  nlohmann::json list = c.Get("/api/v1/workers")["workers"];
  std::vector<std::string> quarantined;
  nlohmann::json before;
  for (const nlohmann::json& w : list) {
    if (w.contains("quarantined")) {
      quarantined.push_back(std::to_string(w["id"].get<uint64_t>()));
      EXPECT_EQ(w["name"], "w1") << w.dump(2);
      before = w;
    }
  }
  ASSERT_EQ(quarantined.size(), 1u) << list.dump(2);
  Result<std::string> metrics = c.Api().GetText("/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status().ToString();
  EXPECT_NE(metrics->find("drover_workers{state=\"quarantined\"} 1\n"), std::string::npos)
      << *metrics;
  EXPECT_NE(metrics->find("drover_quarantines_total 1\n"), std::string::npos) << *metrics;

  c.KillServer(SIGKILL);
  Process& again = c.StartServer();
  for (Process* w : {&w1, &w2, &w3}) {
    ASSERT_TRUE(w->WaitForLine("attached as worker", In(kStartTimeout)))
        << w->output() << "\nserver:\n"
        << again.output();
  }
  // The server handles a worker's attach before its ack goes out (the
  // write is posted), so w1 is back in the list now.
  nlohmann::json after;
  const nlohmann::json now =
      c.Get("/api/v1/workers");  // kept: a range-for over a temporary's member would dangle
  for (const nlohmann::json& w : now["workers"]) {
    if (w["name"] == "w1" && !w.value("lost", true)) after = w;
  }
  ASSERT_FALSE(after.is_null()) << "w1 is not back: " << c.Get("/api/v1/workers").dump(2);
  EXPECT_EQ(after.value("quarantined", ""), before["quarantined"]) << after.dump(2);
  EXPECT_EQ(after.value("quarantined_until", ""), before["quarantined_until"]) << after.dump(2);
  RunResult undo = c.Drover({"drain", "--undo", quarantined[0]});
  EXPECT_EQ(undo.status, 0) << undo.output;
  const nlohmann::json lifted = c.Get("/api/v1/workers");
  for (const nlohmann::json& w : lifted["workers"]) {
    EXPECT_FALSE(w.contains("quarantined")) << w.dump(2);
  }
}

}  // namespace
}  // namespace drover::testing
