// Isolation beyond cores, memory and GPUs, through real `drover` processes:
// a task with `network = "none"` reaches neither the server nor another
// task's socket on 127.0.0.1 but has its own loopback, and a task with
// `io_write_bps` writes no faster than that beside one without a limit.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>

#include "cluster.h"
#include "worker/exec/host_features.h"

namespace drover::testing {
namespace {

// Python that reports "server=X task=Y own=Z", each reached or refused:
// the server's port, the port written in `port_file`, and a socket of its
// own on 127.0.0.1. Without a port file: "uid=N server=X own=Z", its uid
// in place of another task's socket.
std::string ProbeScript(uint16_t server_port, const std::string& port_file = "") {
  const std::string server = "reach(" + std::to_string(server_port) + ")";
  const std::string report = port_file.empty()
                                 ? "text = 'uid=%d server=%s own=%s' % (os.getuid(), " + server +
                                       ", reach(own.getsockname()[1]))\n"
                                 : "task = int(open('" + port_file + "').read())\n" +
                                       "text = 'server=%s task=%s own=%s' % (" + server +
                                       ", reach(task), reach(own.getsockname()[1]))\n";
  return "import os, socket\n"
         "def reach(port):\n"
         "    try:\n"
         "        socket.create_connection(('127.0.0.1', port), timeout=10).close()\n"
         "        return 'reached'\n"
         "    except OSError:\n"
         "        return 'refused'\n"
         "own = socket.socket()\n"
         "own.bind(('127.0.0.1', 0))\n"
         "own.listen(1)\n" +
         report + "open(os.environ['DROVER_RESULT'], 'w').write(text)\n";
}

TEST(IsolationTest, ATaskWithNetworkNoneReachesOnlyItsOwnLoopback) {
  if (!worker::CanMakePrivateNetwork()) GTEST_SKIP() << "may not create network namespaces";
  Cluster c;
  c.StartServer();
  c.StartWorker("w");
  // Another task, in the worker's network, listening on 127.0.0.1: it
  // writes its port, then takes one connection (the host probe's).
  const std::string port_file = c.dir() + "/listener.port";
  const std::string listener =
      "import os, socket\n"
      "s = socket.socket()\n"
      "s.bind(('127.0.0.1', 0))\n"
      "s.listen(8)\n"
      "open('" +
      port_file +
      ".tmp', 'w').write(str(s.getsockname()[1]))\n"
      "os.rename('" +
      port_file + ".tmp', '" + port_file +
      "')\n"
      "s.accept()\n";
  const uint64_t listening = SubmittedJob(
      c.Drover(Submit({"--name", "listener", "--cpus", "0.1"}, {"python3", "-c", listener})));
  ASSERT_GT(listening, 0u);
  ASSERT_TRUE(WaitForFile(c.dir(), port_file, In(kJobTimeout)));

  nlohmann::json probe = {{"id", "offline"},
                          {"command", {"python3", "-c", ProbeScript(c.port(), port_file)}},
                          {"resources", {{"cpus", 0.1}}},
                          {"network", "none"}};
  nlohmann::json host = probe;
  host["id"] = "online";
  host.erase("network");
  const uint64_t job = Post(c, {{"name", "probes"}, {"task", {probe, host}}});
  ASSERT_GT(job, 0u);
  RunResult waited = c.Drover({"wait", std::to_string(job)});
  ASSERT_EQ(waited.status, 0) << waited.output;
  const std::string j = std::to_string(job);
  EXPECT_EQ(c.Get("/api/v1/tasks/" + j + ".0")["outcome"]["result"],
            "server=refused task=refused own=reached");
  EXPECT_EQ(c.Get("/api/v1/tasks/" + j + ".1")["outcome"]["result"],
            "server=reached task=reached own=reached");
  RunResult listened = c.Drover({"wait", std::to_string(listening)});
  EXPECT_EQ(listened.status, 0) << listened.output;

  // A worker's check says whether such tasks may run there.
  RunResult check = c.Drover({"worker", "--access", c.access_file(), "--workdir",
                              c.dir() + "/work-check", "--isolation", "none", "--run-as-root",
                              "--check"});
  EXPECT_EQ(check.status, 0) << check.output;
  EXPECT_NE(check.output.find("tasks with network = \"none\" run here"), std::string::npos)
      << check.output;

  // What it asked for shows with the task.
  RunResult status = c.Drover({"status", j + ".0"});
  EXPECT_NE(status.output.find("network none (loopback only)"), std::string::npos) << status.output;
}

// A worker that is not root (a laptop's `drover up`) gives a task with
// `network = "none"` its network inside a user namespace of its own: the
// task still runs as the worker's account, reaches only its loopback.
TEST(IsolationTest, AWorkerThatIsNotRootGivesNetworkNoneTasksTheirOwnNetworkToo) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to start a worker as another account";
  Cluster c;
  c.StartServer();
  // Its own directory, which it can reach (the cluster's is root's: 0700).
  ASSERT_EQ(chmod(c.dir().c_str(), 0711), 0);
  const std::string home = c.dir() + "/unprivileged";
  std::filesystem::create_directories(home);
  std::filesystem::copy_file(c.access_file(), home + "/access.json");
  for (const std::string& path : {home, home + "/access.json"}) {
    ASSERT_EQ(chown(path.c_str(), 4321, 4321), 0) << path;
  }
  const std::vector<std::string> as_4321 = {"/usr/bin/setpriv", "--reuid=4321", "--regid=4321",
                                            "--clear-groups"};
  std::vector<std::string> check = as_4321;
  check.insert(check.end(), {c.binary(), "worker", "--access", home + "/access.json", "--workdir",
                             home + "/check", "--isolation", "none", "--check"});
  RunResult checked = RunToEnd(check, In(kStartTimeout));
  ASSERT_EQ(checked.status, 0) << checked.output;
  if (checked.output.find("are not placed here") != std::string::npos) {
    GTEST_SKIP() << "this kernel allows no unprivileged user namespaces: " << checked.output;
  }
  std::vector<std::string> argv = as_4321;
  argv.insert(argv.end(), {c.binary(), "worker", "--access", home + "/access.json", "--name", "u",
                           "--workdir", home + "/work", "--isolation", "none"});
  Process worker(argv, {"HOME=" + home});
  ASSERT_TRUE(worker.WaitForLine("attached as worker", In(kStartTimeout))) << worker.output();
  const std::string probe = ProbeScript(c.port());
  const uint64_t job = SubmittedJob(
      c.Drover(Submit({"--name", "offline", "--network", "none"}, {"python3", "-c", probe})));
  ASSERT_GT(job, 0u);
  RunResult waited = c.Drover({"wait", std::to_string(job)});
  ASSERT_EQ(waited.status, 0) << waited.output << worker.output();
  EXPECT_EQ(c.Get("/api/v1/tasks/" + std::to_string(job) + ".0")["outcome"]["result"],
            "uid=4321 server=refused own=reached");
}

// 200 MiB written with O_DIRECT at 10 MiB/s takes at least 18 s; the same
// without a limit, beside it on the same disk, does not.
TEST(IsolationTest, ATaskWithAWriteLimitWritesNoFasterThanItWhileAnotherWritesFreely) {
  if (geteuid() != 0 || access("/sys/fs/cgroup/blkio", W_OK) != 0) {
    GTEST_SKIP() << "no writable cgroup v1 blkio hierarchy";
  }
  Cluster c;
  Result<std::string> disk = worker::BlockDeviceOf(c.dir());
  if (!disk.ok()) GTEST_SKIP() << disk.status().message();
  c.StartServer();
  Process worker({c.binary(), "worker", "--access", c.access_file(), "--name", "w", "--workdir",
                  c.dir() + "/work-w", "--isolation", "cgroup1", "--run-as-root"});
  ASSERT_TRUE(worker.WaitForLine("attached as worker", In(kStartTimeout))) << worker.output();
  const std::string file = c.WriteFile("io.toml", R"(name = "io"

[[task]]
id = "limited"
command = "dd if=/dev/zero of=out.bin bs=1M count=200 oflag=direct"
io_write_bps = "10MiB"

[[task]]
id = "free"
command = "dd if=/dev/zero of=out.bin bs=1M count=200 oflag=direct"
)");
  RunResult run = c.Drover({"run", "--plain", file});
  ASSERT_EQ(run.status, 0) << run.output;
  const std::string j = std::to_string(RunJobId(run.output));
  const int64_t limited = c.Get("/api/v1/tasks/" + j + ".0")["outcome"]["wall_ms"];
  const int64_t free = c.Get("/api/v1/tasks/" + j + ".1")["outcome"]["wall_ms"];
  std::cout << "200 MiB O_DIRECT on " << *disk << ": io_write_bps 10MiB " << limited
            << " ms, no limit " << free << " ms\n";
  EXPECT_GE(limited, 18'000);
  EXPECT_LT(free, 18'000);
  RunResult status = c.Drover({"status", j + ".0"});
  EXPECT_NE(status.output.find("disk writes 10 MiB/s"), std::string::npos) << status.output;
  // What it wrote, as its blkio cgroup counted it: in its status and the
  // job's report (the free one has no blkio cgroup on v1: not counted).
  EXPECT_NE(status.output.find(", written 200 MiB"), std::string::npos) << status.output;
  const nlohmann::json report = c.Get("/api/v1/jobs/" + j + "/report");
  EXPECT_EQ(report["tasks"][0]["io_write_bytes"], 200 << 20) << report.dump();
  EXPECT_TRUE(report["tasks"][1]["io_write_bytes"].is_null()) << report.dump();
}

// A task whose directory holds more than its `disk` (or the worker's
// --max-task-disk, when lower) is stopped and fails saying so; one whose
// `disk` is more than any worker has free is not placed, and both the
// submit and the task's status say why.
TEST(IsolationTest, ATaskPastItsDiskIsStoppedAndOneLargerThanTheFreeSpaceWaits) {
  Cluster c;
  c.StartServer();
  c.StartWorker("w", {"--max-task-disk", "10MiB"});
  const uint64_t filler = SubmittedJob(
      c.Drover(Submit({"--name", "filler", "--disk", "20MiB"},
                      {"sh", "-c", "head -c 31457280 /dev/zero > big && exec sleep 60"})));
  ASSERT_GT(filler, 0u);
  RunResult waited = c.Drover({"wait", std::to_string(filler)});
  EXPECT_NE(waited.status, 0) << waited.output;
  const nlohmann::json task = c.Get("/api/v1/tasks/" + std::to_string(filler) + ".0");
  EXPECT_EQ(task["state"], "failed");
  const std::string reason = task["reason"];
  EXPECT_EQ(reason.rfind("disk: 30", 0), 0u) << reason;  // the reason alone, no signal
  EXPECT_NE(reason.find(" MiB written under its directory, more than disk 10 MiB"),
            std::string::npos)
      << reason;

  RunResult huge = c.Drover(Submit({"--name", "huge", "--disk", "100TiB"}, {"true"}));
  const uint64_t job = SubmittedJob(huge);
  ASSERT_GT(job, 0u) << huge.output;
  EXPECT_NE(huge.output.find("no worker has 100 TiB free for its directory"), std::string::npos)
      << huge.output;
  RunResult status = c.Drover({"status", std::to_string(job) + ".0"});
  EXPECT_NE(status.output.find("no worker has 100 TiB free for its directory (disk; the most "
                               "free is "),
            std::string::npos)
      << status.output;
  EXPECT_NE(status.output.find("directory at most 100 TiB"), std::string::npos) << status.output;
  EXPECT_EQ(c.Get("/api/v1/tasks/" + std::to_string(job) + ".0")["state"], "queued");
}

}  // namespace
}  // namespace drover::testing
