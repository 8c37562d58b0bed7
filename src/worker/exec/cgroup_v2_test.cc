// The cgroup v2 backend against a fake cgroupfs (a plain directory with the
// files a delegated root has), and for real where a v2 tree with the
// memory, cpu and pids controllers is writable.
#include "worker/exec/cgroup_v2.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "worker/exec/cgroup_files.h"
#include "worker/exec/exec_test_util.h"

extern char** environ;

namespace drover::worker {
namespace {

using testing::Put;
using testing::ReadFile;
using testing::TempDir;

class FakeCgroupV2 : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = dir_.path() + "/drover";
    std::filesystem::create_directory(root_);
    Put(root_ + "/cgroup.controllers", "cpuset cpu io memory hugetlb pids rdma misc\n");
  }
  std::string base() const { return root_ + "/w" + std::to_string(getpid()); }

  TempDir dir_;
  std::string root_;
};

TEST_F(FakeCgroupV2, WritesLimitsAndEnablesControllers) {
  auto isolator = MakeCgroupV2Isolator(root_);
  ASSERT_TRUE(isolator.ok()) << isolator.status().ToString();
  EXPECT_EQ((*isolator)->mode(), IsolationMode::kCgroup2);
  // The tree a reaper or the next life kills: the worker's own level.
  EXPECT_EQ((*isolator)->cgroup_roots(), std::vector<std::string>{base()});
  EXPECT_EQ(ReadFile(root_ + "/cgroup.subtree_control"), "+memory +cpu +pids +cpuset +io");
  EXPECT_EQ(ReadFile(base() + "/cgroup.subtree_control"), "+memory +cpu +pids +cpuset +io");

  CageSpec spec{"7.1.1", 500, 64ull << 20, 100, {0, 1}, {}};
  auto cage = (*isolator)->CreateCage(spec);
  ASSERT_TRUE(cage.ok()) << cage.status().ToString();
  const std::string dir = base() + "/7.1.1";
  EXPECT_EQ(ReadFile(dir + "/memory.max"), "67108864");
  EXPECT_EQ(ReadFile(dir + "/memory.swap.max"), "0");
  EXPECT_EQ(ReadFile(dir + "/cpu.max"), "50000 100000");
  EXPECT_EQ(ReadFile(dir + "/pids.max"), "100");
  EXPECT_EQ(ReadFile(dir + "/cpuset.cpus"), "0,1");
  ASSERT_EQ((*cage)->join_fds().size(), 1u);
  EXPECT_TRUE((*cage)->rlimits().empty());
  EXPECT_TRUE((*cage)->contains_tree());
  EXPECT_EQ((*cage)->memory_limit(), 64ull << 20);

  // The child joins by writing "0" into cgroup.procs.
  ASSERT_EQ(write((*cage)->join_fds()[0], "0", 1), 1);
  EXPECT_EQ(ReadFile(dir + "/cgroup.procs"), "0");
}

TEST_F(FakeCgroupV2, DiskIoLimitsGoToIoMaxAndIoWeightOnTheGivenDevice) {
  auto isolator = MakeCgroupV2Isolator(root_);
  ASSERT_TRUE(isolator.ok()) << isolator.status().ToString();
  CageSpec spec;
  spec.name = "8.0.1";
  spec.io.write_bps = 10 << 20;
  spec.io.weight = 300;
  spec.io_device = "254:0";
  auto cage = (*isolator)->CreateCage(spec);
  ASSERT_TRUE(cage.ok()) << cage.status().ToString();
  EXPECT_EQ(ReadFile(base() + "/8.0.1/io.max"), "254:0 rbps=max wbps=10485760");
  EXPECT_EQ(ReadFile(base() + "/8.0.1/io.weight"), "default 300");

  // Reads only, no weight: io.weight is left alone.
  spec.name = "8.1.1";
  spec.io = {};
  spec.io.read_bps = 50 << 20;
  cage = (*isolator)->CreateCage(spec);
  ASSERT_TRUE(cage.ok()) << cage.status().ToString();
  EXPECT_EQ(ReadFile(base() + "/8.1.1/io.max"), "254:0 rbps=52428800 wbps=max");
  EXPECT_FALSE(std::filesystem::exists(base() + "/8.1.1/io.weight"));
}

TEST_F(FakeCgroupV2, WithoutTheIoControllerATaskWithDiskLimitsFailsAndOthersRun) {
  Put(root_ + "/cgroup.controllers", "cpu memory pids\n");
  auto isolator = MakeCgroupV2Isolator(root_);
  ASSERT_TRUE(isolator.ok()) << isolator.status().ToString();
  EXPECT_EQ(ReadFile(root_ + "/cgroup.subtree_control"), "+memory +cpu +pids");
  CageSpec spec;
  spec.name = "9.0.1";
  spec.io.write_bps = 1 << 20;
  spec.io_device = "254:0";
  auto limited = (*isolator)->CreateCage(spec);
  ASSERT_FALSE(limited.ok());
  EXPECT_NE(limited.status().message().find("io controller"), std::string::npos)
      << limited.status().ToString();
  EXPECT_FALSE(std::filesystem::exists(base() + "/9.0.1"));  // nothing left behind
  spec.io = {};
  EXPECT_TRUE((*isolator)->CreateCage(spec).ok());
}

TEST_F(FakeCgroupV2, AHoldingCageHasNoLimitsAndAdoptMovesARunningProcessIn) {
  auto isolator = MakeCgroupV2Isolator(root_);
  ASSERT_TRUE(isolator.ok()) << isolator.status().ToString();
  CageSpec spec;
  spec.name = "warm";
  spec.holding = true;
  auto cage = (*isolator)->CreateCage(spec);
  ASSERT_TRUE(cage.ok()) << cage.status().ToString();
  const std::string dir = base() + "/warm";
  for (const char* limit : {"memory.max", "cpu.max", "pids.max", "cpuset.cpus"}) {
    EXPECT_FALSE(std::filesystem::exists(dir + "/" + limit)) << limit;
  }
  // A warm interpreter between calls: its pid, written as the kernel wants.
  ASSERT_TRUE((*cage)->Adopt(4242).ok());
  EXPECT_EQ(ReadFile(dir + "/cgroup.procs"), "4242");
}

TEST_F(FakeCgroupV2, ReadsAccountingAndOom) {
  auto isolator = MakeCgroupV2Isolator(root_);
  ASSERT_TRUE(isolator.ok());
  auto cage = (*isolator)->CreateCage(CageSpec{"7.2.1"});
  ASSERT_TRUE(cage.ok());
  const std::string dir = base() + "/7.2.1";
  // No limits asked: no limit files written.
  EXPECT_FALSE(std::filesystem::exists(dir + "/memory.max"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/cpu.max"));
  CageUsage none = (*cage)->Usage();
  EXPECT_FALSE(none.cpu.has_value());
  EXPECT_FALSE(none.peak_memory.has_value());
  EXPECT_FALSE(none.oom_killed);
  EXPECT_FALSE(none.io_read_bytes.has_value());  // no io.stat to read

  Put(dir + "/io.stat",
      "254:0 rbytes=4096 wbytes=209715200 rios=1 wios=200 dbytes=0 dios=0\n"
      "8:0 rbytes=1000 wbytes=0 rios=1 wios=0 dbytes=0 dios=0\n");
  Put(dir + "/cpu.stat", "usage_usec 1500000\nuser_usec 1000000\nsystem_usec 500000\n");
  Put(dir + "/memory.peak", "67108864\n");
  Put(dir + "/memory.events", "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 0\n");
  CageUsage u = (*cage)->Usage();
  EXPECT_EQ(u.cpu, Seconds(1) + Millis(500));
  EXPECT_EQ(u.peak_memory, 64ull << 20);
  EXPECT_TRUE(u.oom_killed);
  // Every device's bytes, added up.
  EXPECT_EQ(u.io_read_bytes, 5096u);
  EXPECT_EQ(u.io_write_bytes, 200ull << 20);
}

TEST_F(FakeCgroupV2, KillAllSignalsEveryListedMemberAndRemoveDeletesTheCgroup) {
  auto isolator = MakeCgroupV2Isolator(root_);
  ASSERT_TRUE(isolator.ok());
  auto cage = (*isolator)->CreateCage(CageSpec{"7.3.1"});
  ASSERT_TRUE(cage.ok());
  const std::string dir = base() + "/7.3.1";

  pid_t pid;
  const char* argv[] = {"sleep", "100", nullptr};
  ASSERT_EQ(posix_spawnp(&pid, "sleep", nullptr, nullptr, const_cast<char**>(argv), environ), 0);
  (*cage)->CloseJoinFds();
  Put(dir + "/cgroup.procs", std::to_string(pid) + "\n");
  auto fds = (*cage)->KillAll();
  ASSERT_TRUE(fds.ok());
  EXPECT_EQ(fds->size(), 1u);
  fds->clear();  // closes them
  EXPECT_EQ(ReadFile(dir + "/cgroup.kill"), "1");
  int status;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);

  // A real cgroup dir empties itself; the fake one has to be emptied.
  EXPECT_EQ((*cage)->Remove().code(), StatusCode::kUnavailable);
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::filesystem::remove(entry.path());
  }
  EXPECT_TRUE((*cage)->Remove().ok());
  EXPECT_FALSE(std::filesystem::exists(dir));
}

// Freeze writes cgroup.freeze and returns once cgroup.events says the
// kernel has stopped every member ("frozen 1"), which here a thread writes
// as the kernel would, once the freeze is asked for and Freeze waits (its
// thread asleep).
TEST_F(FakeCgroupV2, FreezeWaitsForCgroupEventsToSayFrozen) {
  auto isolator = MakeCgroupV2Isolator(root_);
  ASSERT_TRUE(isolator.ok());
  auto cage = (*isolator)->CreateCage(CageSpec{"7.4.1"});
  ASSERT_TRUE(cage.ok());
  const std::string dir = base() + "/7.4.1";
  Put(dir + "/cgroup.events", "populated 1\nfrozen 0\n");
  const std::string waiter = "/proc/self/task/" + std::to_string(gettid()) + "/stat";
  auto asleep = [&] {
    const std::string stat = ReadFile(waiter);
    const size_t paren = stat.rfind(')');
    return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'S';
  };
  std::atomic<bool> reported{false};
  std::thread kernel([&] {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while ((ReadFile(dir + "/cgroup.freeze") != "1" || !asleep()) &&
           std::chrono::steady_clock::now() < deadline) {
      sched_yield();
    }
    reported = true;
    Put(dir + "/cgroup.events", "populated 1\nfrozen 1\n");
  });
  Status frozen = (*cage)->Freeze(true);
  const bool reported_before_return = reported;
  kernel.join();
  ASSERT_TRUE(frozen.ok()) << frozen.ToString();
  EXPECT_TRUE(reported_before_return) << "Freeze returned before the cage was reported frozen";
  EXPECT_EQ(ReadFile(dir + "/cgroup.freeze"), "1");

  // Thawing does not wait.
  ASSERT_TRUE((*cage)->Freeze(false).ok());
  EXPECT_EQ(ReadFile(dir + "/cgroup.freeze"), "0");
}

TEST_F(FakeCgroupV2, FreezeFailsWhenTheCageDoesNotStopInTime) {
  auto isolator = MakeCgroupV2Isolator(root_);
  ASSERT_TRUE(isolator.ok());
  auto cage = (*isolator)->CreateCage(CageSpec{"7.5.1"});
  ASSERT_TRUE(cage.ok());
  const std::string dir = base() + "/7.5.1";
  Put(dir + "/cgroup.events", "populated 1\nfrozen 0\n");
  Status frozen = (*cage)->Freeze(true);
  EXPECT_EQ(frozen.code(), StatusCode::kUnavailable) << frozen.ToString();
  EXPECT_EQ(ReadFile(dir + "/cgroup.freeze"), "1");  // still freezing: Freeze(false) undoes it
}

TEST_F(FakeCgroupV2, RefusesATreeWithoutTheControllers) {
  Put(root_ + "/cgroup.controllers", "cpu io pids\n");
  auto isolator = MakeCgroupV2Isolator(root_);
  EXPECT_EQ(isolator.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(isolator.status().message().find("\"memory\""), std::string::npos)
      << isolator.status().message();
  EXPECT_EQ(MakeCgroupV2Isolator(dir_.path() + "/missing").status().code(),
            StatusCode::kFailedPrecondition);
}

TEST(RealCgroupV2, OomKilledTaskIsReported) {
  IsolatorOptions options;
  options.mode = IsolationMode::kCgroup2;
  auto isolator = MakeIsolator(options);
  if (!isolator.ok()) {
    GTEST_SKIP() << "no writable cgroup v2 tree with memory, cpu and pids here: "
                 << isolator.status().message();
  }
  testing::Harness h(std::move(isolator).value());
  TaskSpec spec = testing::Task(1, {testing::Helper(), "alloc", "200"});
  spec.memory_bytes = 64ull << 20;
  TaskResult r = h.Run(spec);
  EXPECT_TRUE(r.oom_killed);
  EXPECT_EQ(r.outcome, TaskOutcome::kFailed) << testing::Describe(r);
}

}  // namespace
}  // namespace drover::worker
