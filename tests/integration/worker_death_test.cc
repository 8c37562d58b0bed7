// A worker killed with kill -9 leaves no task running:
// its reaper ends the task's process tree at once; with the reaper killed
// too, the worker's next start ends the tree before it takes any work.
// Both with cgroup isolation (v1, where this machine has it) and without
// (none: process groups and the pid + start time record).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <gtest/gtest.h>

#include "cluster.h"

namespace drover::testing {
namespace {

using Clock = std::chrono::steady_clock;

int PidfdOf(pid_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }

// Whether the process behind `pidfd` has ended within `timeout`.
bool Ended(int pidfd, std::chrono::milliseconds timeout) {
  pollfd p{pidfd, POLLIN, 0};
  int r;
  do {
    r = poll(&p, 1, static_cast<int>(timeout.count()));
  } while (r < 0 && errno == EINTR);
  return r == 1;
}

// The worker's reaper: its child named drover-reaper.
pid_t ReaperOf(pid_t worker) {
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(e.path() / "stat");
    std::string line;
    std::getline(stat, line);
    const size_t paren = line.rfind(')');
    if (paren == std::string::npos || line.find("(drover-reaper)") == std::string::npos) continue;
    std::istringstream rest(line.substr(paren + 1));
    char state;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid == worker) return static_cast<pid_t>(std::stoi(name));
  }
  return -1;
}

bool CgroupV1Usable() {
  return geteuid() == 0 && access("/sys/fs/cgroup/freezer", W_OK) == 0 &&
         access("/sys/fs/cgroup/memory", W_OK) == 0 && access("/sys/fs/cgroup/cpuacct", W_OK) == 0;
}

class WorkerDeathTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "cgroup1" && !CgroupV1Usable()) {
      GTEST_SKIP() << "no writable cgroup v1 freezer, memory and cpuacct hierarchies";
    }
    c_.StartServer();
    StartWorker();
  }

  // `drover worker` named "w" with the isolation under test, on the same
  // work directory each time (its next life is the same worker).
  Process& StartWorker() {
    worker_ = std::make_unique<Process>(std::vector<std::string>{
        c_.binary(), "worker", "--access", c_.access_file(), "--name", "w", "--workdir",
        c_.dir() + "/work-w", "--isolation", GetParam(), "--run-as-root"});
    EXPECT_TRUE(worker_->WaitForLine("attached as worker", In(kStartTimeout)))
        << worker_->output();
    return *worker_;
  }

  // Submits a task whose process tree is a shell and a sleep it started
  // in the background; returns pidfds of both once they run.
  void StartTree(int* leader, int* child) {
    const std::string pids = c_.dir() + "/pids";
    const uint64_t job = SubmittedJob(c_.Drover(Submit(
        {"--name", "tree"},
        {"sh", "-c", "sleep 1000 & echo $$ $! > " + pids + ".tmp && mv " + pids + ".tmp " + pids +
                         "; wait"})));
    ASSERT_GT(job, 0u);
    ASSERT_TRUE(WaitForFile(c_.dir(), pids, In(kStartTimeout))) << worker_->output();
    std::ifstream in(pids);
    pid_t a = 0, b = 0;
    in >> a >> b;
    ASSERT_GT(a, 0);
    ASSERT_GT(b, 0);
    *leader = PidfdOf(a);
    *child = PidfdOf(b);
    ASSERT_GE(*leader, 0);
    ASSERT_GE(*child, 0);
    ASSERT_FALSE(Ended(*leader, std::chrono::milliseconds(0)));
    ASSERT_FALSE(Ended(*child, std::chrono::milliseconds(0)));
  }

  Cluster c_{kFastLoss};
  std::unique_ptr<Process> worker_;
};

TEST_P(WorkerDeathTest, KillingTheWorkerEndsItsTasksTreeAtOnce) {
  int leader = -1, child = -1;
  ASSERT_NO_FATAL_FAILURE(StartTree(&leader, &child));
  ASSERT_GT(ReaperOf(worker_->pid()), 0) << "no drover-reaper child of the worker";

  const auto killed = Clock::now();
  worker_->Signal(SIGKILL);
  const bool leader_ended = Ended(leader, std::chrono::seconds(10));
  const bool child_ended = Ended(child, std::chrono::seconds(10));
  const auto gone = Clock::now();
  EXPECT_TRUE(leader_ended);
  EXPECT_TRUE(child_ended);
  const auto ms = std::chrono::duration_cast<std::chrono::microseconds>(gone - killed).count() / 1e3;
  std::cout << "[ figure ] isolation " << GetParam() << ": task tree gone " << ms
            << " ms after the worker's kill -9" << std::endl;
  RecordProperty("tree_gone_ms", std::to_string(ms));
  close(leader);
  close(child);
  EXPECT_TRUE(worker_->Wait(In(kStartTimeout)).has_value());
}

TEST_P(WorkerDeathTest, WithItsReaperKilledTooTheNextStartEndsTheTreeBeforeTakingWork) {
  int leader = -1, child = -1;
  ASSERT_NO_FATAL_FAILURE(StartTree(&leader, &child));
  const pid_t reaper = ReaperOf(worker_->pid());
  ASSERT_GT(reaper, 0) << "no drover-reaper child of the worker";
  const int reaper_fd = PidfdOf(reaper);
  ASSERT_GE(reaper_fd, 0);
  kill(reaper, SIGKILL);
  ASSERT_TRUE(Ended(reaper_fd, std::chrono::seconds(10)));
  close(reaper_fd);
  worker_->Signal(SIGKILL);
  ASSERT_TRUE(worker_->Wait(In(kStartTimeout)).has_value());
  // Nobody is left to end the tree: it runs on.
  EXPECT_FALSE(Ended(leader, std::chrono::milliseconds(0)));
  EXPECT_FALSE(Ended(child, std::chrono::milliseconds(0)));

  const auto restarted = Clock::now();
  Process& again = StartWorker();
  // Attached means the scan is over: the tree is gone by then.
  EXPECT_TRUE(Ended(leader, std::chrono::milliseconds(0)));
  EXPECT_TRUE(Ended(child, std::chrono::milliseconds(0)));
  const auto ms =
      std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - restarted).count() / 1e3;
  std::cout << "[ figure ] isolation " << GetParam() << ": restart to attached (leftovers killed) "
            << ms << " ms" << std::endl;
  const std::string& out = again.output();
  const size_t scan = out.find("its previous life left running");
  const size_t attached = out.find("attached as worker");
  EXPECT_NE(scan, std::string::npos) << out;
  EXPECT_LT(scan, attached) << out;
  close(leader);
  close(child);
}

// A worker that is alive but does not run (SIGSTOP here; a stall or a
// suspended machine alike) cannot fence its tasks: its reaper's watchdog
// kills them before their leases expire, so the attempt the server then
// places on another worker never runs beside the first copy. The worker,
// continued, comes back and takes work again.
TEST_P(WorkerDeathTest, AStoppedWorkersTasksEndBeforeTheRetryStartsElsewhere) {
  int leader = -1, child = -1;
  ASSERT_NO_FATAL_FAILURE(StartTree(&leader, &child));
  const std::string pids = c_.dir() + "/pids";
  std::filesystem::remove(pids);
  Process& other = c_.StartWorker("w2");  // attached on return
  worker_->Signal(SIGSTOP);
  // Attempt 2 starts on w2 once the server gave up on w (its lease
  // expired): by then the first copy must be gone.
  ASSERT_TRUE(WaitForFile(c_.dir(), pids, In(kJobTimeout))) << other.output();
  EXPECT_TRUE(Ended(leader, std::chrono::milliseconds(0))) << "two copies ran at once\n" << other.output() << worker_->output();
  EXPECT_TRUE(Ended(child, std::chrono::milliseconds(0))) << "two copies ran at once";
  close(leader);
  close(child);
  worker_->Signal(SIGCONT);
  EXPECT_TRUE(worker_->WaitForLine("attached as worker", In(kStartTimeout))) << worker_->output();
  EXPECT_EQ(worker_->output().find("cannot be told"), std::string::npos) << worker_->output();
}

INSTANTIATE_TEST_SUITE_P(Isolation, WorkerDeathTest, ::testing::Values("none", "cgroup1"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace drover::testing
