// Tasks in container images, through real `drover` processes, rootful
// podman and an image built here with buildah (tests/container_test_image.sh:
// Debian's sh and coreutils, no registry): a task sees the image's root file
// system, its own cores, its account and its directory; its output reaches
// a dependent on another worker; a memory hog is OOM-killed and reported
// so; a timeout, a cancel and a desktop owner's freeze reach the processes
// inside; a worker killed with kill -9 leaves no container running.
// Skips, saying why, where rootful podman cannot run containers.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <thread>

#include "cluster.h"

namespace drover::testing {
namespace {

const std::string& Image() {
  static const std::string image =
      "localhost/drover-container-test-" + std::to_string(getpid()) + ":1";
  return image;
}

// Why containers cannot run here; empty when the image was built and a
// container of it ran.
std::string& Unusable() {
  static std::string why;
  return why;
}

// Polls `pred` until it holds or `timeout` passes.
bool Eventually(const std::function<bool()>& pred,
                std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return pred();
}

// The host pids of the processes whose command line is exactly `argv`.
std::vector<pid_t> ProcessesRunning(const std::vector<std::string>& argv) {
  std::string want;
  for (const std::string& a : argv) want += a + '\0';
  std::vector<pid_t> out;
  DIR* d = opendir("/proc");
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    const pid_t pid = static_cast<pid_t>(atoi(e->d_name));
    if (pid <= 0) continue;
    std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline");
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (cmdline == want) out.push_back(pid);
  }
  closedir(d);
  return out;
}

// What the v1 freezer says of the cgroup `pid` is in ("FROZEN", "THAWED").
std::string FreezerState(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    const size_t at = line.find(":freezer:");
    if (at == std::string::npos) continue;
    std::ifstream state("/sys/fs/cgroup/freezer" + line.substr(at + 9) + "/freezer.state");
    std::string s;
    state >> s;
    return s;
  }
  return "";
}

// The v1 freezer cgroup a worker of pid `pid` started in this process's
// cgroup makes for its tasks (cgroup_v1.cc: <current>/drover/w<pid>).
std::string FreezerTreeOf(pid_t pid) {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    const size_t at = line.find(":freezer:");
    if (at == std::string::npos) continue;
    std::string current = line.substr(at + 9);
    if (current == "/") current.clear();
    return "/sys/fs/cgroup/freezer" + current + "/drover/w" + std::to_string(pid);
  }
  return "";
}

class ContainerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (geteuid() != 0) {
      Unusable() = "rootful podman needs root";
      return;
    }
    for (const char* tool : {"/usr/bin/podman", "/usr/bin/buildah"}) {
      if (access(tool, X_OK) != 0) {
        Unusable() = std::string(tool) + " is not installed (scripts/install-deps.sh installs it)";
        return;
      }
    }
    if (access("/sys/fs/cgroup/freezer", W_OK) != 0) {
      Unusable() = "containers run in task cgroups on cgroup v1 workers only";
      return;
    }
    RunResult built =
        RunToEnd({std::string(SOURCE_DIR) + "/tests/container_test_image.sh", Image()},
                 In(std::chrono::seconds(120)));
    if (built.status != 0) {
      Unusable() = "the test image could not be built: " + built.output;
      return;
    }
    // The runtime and settings a worker uses (its containers.conf keeps
    // the caller's rlimits).
    const std::string conf = "/tmp/drover-container-test-" + std::to_string(getpid()) + ".conf";
    std::ofstream(conf) << "[containers]\ndefault_ulimits = []\n";
    RunResult ran = RunToEnd({"/usr/bin/podman", "--runtime", "runc", "run", "--rm", Image(), "cat",
                              "/etc/drover-test-image"},
                             In(std::chrono::seconds(120)), {"CONTAINERS_CONF=" + conf});
    unlink(conf.c_str());
    if (ran.status != 0 || ran.output.find("image-root") == std::string::npos) {
      Unusable() = "rootful podman cannot run a container here: " + ran.output;
    }
  }
  static void TearDownTestSuite() {
    RunToEnd({"/usr/bin/podman", "rmi", "--force", Image()}, In(std::chrono::seconds(60)));
  }
  void SetUp() override {
    if (!Unusable().empty()) GTEST_SKIP() << Unusable();
  }

  // A worker on cgroup v1 (containers nest in its task cgroups), running
  // tasks as nobody.
  Process& StartWorker(Cluster& c, const std::string& name, std::vector<std::string> extra = {}) {
    // Its tasks' account passes through the cluster's directory (root's).
    EXPECT_EQ(chmod(c.dir().c_str(), 0711), 0);
    std::vector<std::string> argv = {
        c.binary(),    "worker",  "--access",  c.access_file(),
        "--name",      name,      "--workdir", c.dir() + "/work-" + name,
        "--isolation", "cgroup1", "--user",    "nobody"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    workers_.push_back(std::make_unique<Process>(argv));
    Process& w = *workers_.back();
    EXPECT_TRUE(w.WaitForLine("attached as worker", In(kStartTimeout))) << w.output();
    EXPECT_NE(w.output().find("runs tasks with an image through podman"), std::string::npos)
        << w.output();
    return w;
  }

  std::vector<std::unique_ptr<Process>> workers_;
};

TEST_F(ContainerTest, ATaskSeesTheImagesRootItsCoresItsAccountAndItsFilesAndItsOutputsTravel) {
  Cluster c;
  c.StartServer();
  StartWorker(c, "a", {"--label", "side=a"});
  ASSERT_FALSE(HasFailure());
  StartWorker(c, "b", {"--label", "side=b"});
  ASSERT_FALSE(HasFailure());
  const std::string seed = c.WriteFile("seed.txt", "from the client\n");
  // "make" runs in the image on worker a, pinned to one core; "use", on
  // worker b, gets make's output in $DROVER_INPUTS.
  const std::string file = c.WriteFile("image.toml", R"(name = "image"

[[task]]
id = "make"
image = ")" + Image() + R"("
image_pull = "never"
resources = { cpus = 1, labels = { side = "a" } }
input_files = ["seed.txt"]
command = ["sh", "-c", "echo made-inside > $DROVER_OUTPUT_DIR/made.txt && echo kept > $DROVER_CHECKPOINT_DIR/step && echo said-inside && echo root=$(cat /etc/drover-test-image) cpus=$(nproc) uid=$(id -u) seed=$(cat seed.txt) ckpt=$(cat $DROVER_CHECKPOINT_DIR/step) path=$PATH pwd=$(pwd) > $DROVER_RESULT"]

[[task]]
id = "use"
image = ")" + Image() + R"("
image_pull = "never"
depends_on = ["make"]
resources = { cpus = 1, labels = { side = "b" } }
command = ["sh", "-c", "cat $DROVER_INPUTS/*/made.txt > $DROVER_RESULT"]
)");
  (void)seed;
  RunResult run = c.Drover({"run", "--plain", file});
  ASSERT_EQ(run.status, 0) << run.output;
  const std::string j = std::to_string(RunJobId(run.output));
  const nlohmann::json made = c.Get("/api/v1/tasks/" + j + ".0");
  const std::string result = made["outcome"]["result"];
  // The image's PATH, not the worker's.
  EXPECT_NE(result.find("root=image-root cpus=1 uid=65534 seed=from the client ckpt=kept "
                        "path=/usr/bin:/bin pwd=/"),
            std::string::npos)
      << result;
  RunResult logs = c.Drover({"logs", j + ".0"});
  EXPECT_NE(logs.output.find("said-inside"), std::string::npos) << logs.output;
  EXPECT_NE(result.find("/work-a/"), std::string::npos) << result;  // its directory, same path
  const nlohmann::json used = c.Get("/api/v1/tasks/" + j + ".1");
  EXPECT_EQ(used["outcome"]["result"], "made-inside\n");
  EXPECT_NE(made["worker"], used["worker"]);
  // The image and the digest it ran show with the task.
  const std::string digest = made["outcome"]["image_digest"];
  EXPECT_EQ(digest.rfind("sha256:", 0), 0u) << digest;
  EXPECT_EQ(made["image"], Image());
  // The workers say what runs their containers.
  const nlohmann::json workers = c.Get("/api/v1/workers")["workers"];
  ASSERT_EQ(workers.size(), 2u) << workers.dump();
  EXPECT_EQ(workers[0]["container_runtime"].get<std::string>().rfind("podman ", 0), 0u)
      << workers.dump();
  RunResult check =
      c.Drover({"worker", "--access", c.access_file(), "--workdir", c.dir() + "/work-check",
                "--isolation", "cgroup1", "--user", "nobody", "--check"});
  EXPECT_NE(check.output.find("tasks with an image run here through podman"), std::string::npos)
      << check.output;
  RunResult status = c.Drover({"status", j + ".0"});
  EXPECT_NE(status.output.find("image      " + Image() + " (" + digest + ")"), std::string::npos)
      << status.output;
}

TEST_F(ContainerTest, AMemoryHogInAContainerIsOomKilledAndReportedSo) {
  Cluster c;
  c.StartServer();
  StartWorker(c, "w");
  ASSERT_FALSE(HasFailure());
  // dd reads 200 MiB of zeros into one buffer: past 64 MiB.
  const uint64_t job = SubmittedJob(c.Drover(
      Submit({"--name", "hog", "--mem", "64MiB", "--image", Image(), "--image-pull", "never"},
             {"dd", "if=/dev/zero", "of=/dev/null", "bs=200M", "count=1"})));
  ASSERT_GT(job, 0u);
  RunResult waited = c.Drover({"wait", std::to_string(job)});
  EXPECT_NE(waited.status, 0) << waited.output;
  const nlohmann::json task = c.Get("/api/v1/tasks/" + std::to_string(job) + ".0");
  EXPECT_TRUE(task["outcome"]["oom_killed"].get<bool>()) << task.dump();
  EXPECT_EQ(task["reason"].get<std::string>().rfind("OOM-killed (limit 64 MiB", 0), 0u)
      << task.dump();
}

TEST_F(ContainerTest, ATimeoutACancelAndAnOwnersFreezeReachTheProcessesInside) {
  Cluster c;
  c.StartServer();
  const std::string owner = c.dir() + "/owner";
  Process& ws =
      StartWorker(c, "ws",
                  {"--desktop", "--idle-source", "file:" + owner, "--idle-after", "1s",
                   "--resume-after", "500ms", "--suspend-for", "1h", "--max-outside-load", "1000"});
  ASSERT_FALSE(HasFailure());
  ASSERT_TRUE(ws.WaitForLine("owner away for 1s: offering work", In(kStartTimeout))) << ws.output();

  // A timeout: the stop signal reaches the program inside (podman's init
  // passes it on), well before the 10 s kill.
  const uint64_t timed = SubmittedJob(c.Drover(
      Submit({"--name", "timed", "--timeout", "1s", "--image", Image(), "--image-pull", "never"},
             {"sleep", "1001"})));
  ASSERT_GT(timed, 0u);
  EXPECT_NE(c.Drover({"wait", std::to_string(timed)}).status, 0);
  nlohmann::json task = c.Get("/api/v1/tasks/" + std::to_string(timed) + ".0");
  EXPECT_EQ(task["reason"], "timed out after 1s") << task.dump();
  EXPECT_LT(task["outcome"]["wall_ms"].get<int64_t>(), 9000) << task.dump();
  EXPECT_TRUE(ProcessesRunning({"sleep", "1001"}).empty());

  // The owner's return freezes the container's processes (the task's
  // freezer cgroup holds the container's); a quiet owner thaws them.
  const uint64_t frozen = SubmittedJob(c.Drover(Submit(
      {"--name", "frozen", "--image", Image(), "--image-pull", "never"}, {"sleep", "1002"})));
  ASSERT_GT(frozen, 0u);
  std::vector<pid_t> inside;
  ASSERT_TRUE(Eventually([&] {
    inside = ProcessesRunning({"sleep", "1002"});
    return !inside.empty();
  }));
  ASSERT_TRUE(Eventually([&] {
    std::ofstream(owner) << "typing\n";
    return FreezerState(inside[0]) == "FROZEN";
  })) << FreezerState(inside[0]);
  ASSERT_TRUE(ws.WaitForLine("tasks frozen", In(kStartTimeout))) << ws.output();
  ASSERT_TRUE(Eventually([&] { return FreezerState(inside[0]) == "THAWED"; }))
      << FreezerState(inside[0]);

  // A cancel ends them, and podman's list keeps no record of them.
  RunResult canceled = c.Drover({"cancel", std::to_string(frozen)});
  EXPECT_EQ(canceled.status, 0) << canceled.output;
  EXPECT_TRUE(Eventually([&] { return ProcessesRunning({"sleep", "1002"}).empty(); }));
  EXPECT_TRUE(Eventually([&] {
    task = c.Get("/api/v1/tasks/" + std::to_string(frozen) + ".0");
    return task["state"] == "canceled";
  })) << task.dump();
  EXPECT_TRUE(Eventually([&] {
    return RunToEnd({"/usr/bin/podman", "ps", "--all", "--quiet", "--filter",
                     "label=drover.workdir=" + c.dir() + "/work-ws"},
                    In(kStartTimeout))
        .output.empty();
  }));
}

TEST_F(ContainerTest, AWorkerKilledWithKillNineLeavesNoContainerRunning) {
  Cluster c;
  c.StartServer();
  Process& w = StartWorker(c, "w");
  ASSERT_FALSE(HasFailure());
  const uint64_t job = SubmittedJob(c.Drover(
      Submit({"--name", "long", "--image", Image(), "--image-pull", "never"}, {"sleep", "1003"})));
  ASSERT_GT(job, 0u);
  ASSERT_TRUE(Eventually([&] { return !ProcessesRunning({"sleep", "1003"}).empty(); }));
  const std::string label = "label=drover.workdir=" + c.dir() + "/work-w";
  auto listed = [&] {
    return RunToEnd({"/usr/bin/podman", "ps", "--all", "--quiet", "--filter", label},
                    In(kStartTimeout))
        .output;
  };
  EXPECT_FALSE(listed().empty());
  w.Signal(SIGKILL);
  ASSERT_TRUE(w.Wait(In(kStartTimeout)).has_value());
  // The reaper kills the container's processes with the task's cgroups,
  // then has podman forget it.
  EXPECT_TRUE(Eventually([&] { return ProcessesRunning({"sleep", "1003"}).empty(); }));
  EXPECT_TRUE(Eventually([&] { return listed().empty(); })) << listed();
  // And removes the worker's cgroups, the container's below them.
  EXPECT_TRUE(Eventually([&] { return access(FreezerTreeOf(w.pid()).c_str(), F_OK) != 0; }))
      << FreezerTreeOf(w.pid());
}

TEST_F(ContainerTest, AnImageTheWorkerLacksFailsTheAttemptAndNoRuntimeMeansNotPlaced) {
  Cluster c;
  c.StartServer();
  StartWorker(c, "w");
  ASSERT_FALSE(HasFailure());
  const uint64_t job = SubmittedJob(c.Drover(
      Submit({"--name", "absent", "--image", "localhost/drover-absent:1", "--image-pull", "never"},
             {"true"})));
  ASSERT_GT(job, 0u);
  EXPECT_NE(c.Drover({"wait", std::to_string(job)}).status, 0);
  const nlohmann::json task = c.Get("/api/v1/tasks/" + std::to_string(job) + ".0");
  EXPECT_EQ(task["reason"],
            "image localhost/drover-absent:1: not on this worker, and image_pull = \"never\" "
            "fetches nothing")
      << task.dump();

  // `network = "none"`: the container's network has only loopback; with
  // the default it has the worker's.
  const uint64_t nets = Post(c, {{"name", "nets"},
                                 {"task",
                                  {{{"id", "none"},
                                    {"command", {"ls", "/sys/class/net"}},
                                    {"image", Image()},
                                    {"image_pull", "never"},
                                    {"network", "none"}},
                                   {{"id", "host"},
                                    {"command", {"ls", "/sys/class/net"}},
                                    {"image", Image()},
                                    {"image_pull", "never"}}}}});
  ASSERT_GT(nets, 0u);
  EXPECT_EQ(c.Drover({"wait", std::to_string(nets)}).status, 0);
  EXPECT_EQ(c.Drover({"logs", std::to_string(nets) + ".0"}).output, "lo\n");
  EXPECT_NE(c.Drover({"logs", std::to_string(nets) + ".1"}).output, "lo\n");

  // A cluster whose only worker has no container runtime (isolation none):
  // the task waits, and says why.
  Cluster bare;
  bare.StartServer();
  bare.StartWorker("plain");
  const uint64_t waiting = SubmittedJob(bare.Drover(
      Submit({"--name", "waits", "--image", Image(), "--image-pull", "never"}, {"true"})));
  ASSERT_GT(waiting, 0u);
  RunResult status = bare.Drover({"status", std::to_string(waiting) + ".0"});
  EXPECT_NE(status.output.find("no worker can run containers"), std::string::npos) << status.output;
  RunResult check =
      bare.Drover({"worker", "--access", bare.access_file(), "--workdir",
                   bare.dir() + "/work-check", "--isolation", "none", "--run-as-root", "--check"});
  EXPECT_NE(check.output.find("tasks with an image are not placed here: isolation is none"),
            std::string::npos)
      << check.output;
}

}  // namespace
}  // namespace drover::testing
