// Acceptance tests of the executor under real cgroup v1 isolation: OOM,
// CPU quota, pinning, GPUs, killing a double-forked grandchild, suspending
// with the freezer, cleanup.
// Skipped (not passed) where cgroup v1 is not writable.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <sstream>
#include <string_view>
#include <thread>

#include "common/quantity.h"
#include "worker/exec/cgroup_files.h"
#include "worker/exec/cgroup_v1.h"
#include "worker/exec/exec_test_util.h"
#include "worker/exec/executor.h"
#include "worker/exec/host_features.h"
#include "worker/exec/slots.h"

namespace drover::worker {
namespace {

using testing::Describe;
using testing::Harness;
using testing::ReadFile;
using testing::Task;

class CgroupV1Executor : public ::testing::Test {
 protected:
  void SetUp() override {
    auto isolator = MakeCgroupV1Isolator(CgroupV1Options{"/sys/fs/cgroup", /*gpu_count=*/2});
    if (!isolator.ok()) {
      GTEST_SKIP() << "cgroup v1 is not usable here: " << isolator.status().message();
    }
    h_ = std::make_unique<Harness>(std::move(isolator).value());
  }
  // The worker's directory in the memory hierarchy.
  static std::string MemoryBase() {
    auto current = CurrentCgroup("memory");
    std::string cur = current.ok() && *current != "/" ? *current : "";
    return "/sys/fs/cgroup/memory" + cur + "/drover/w" + std::to_string(getpid());
  }
  // The task cgroups there (kept for reuse, or still in use).
  static std::vector<std::string> MemoryCgroups() {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(MemoryBase(), ec)) {
      if (e.is_directory()) out.push_back(e.path().string());
    }
    return out;
  }
  // Once tasks have ended, no cgroup of this worker holds a process.
  static void ExpectAllCgroupsEmpty() {
    for (const std::string& dir : MemoryCgroups()) {
      EXPECT_EQ(ReadFile(dir + "/cgroup.procs"), "") << dir;
    }
  }
  // The freezer cgroup process `pid` is in.
  static std::string FreezerOf(pid_t pid) {
    std::istringstream lines(ReadFile("/proc/" + std::to_string(pid) + "/cgroup"));
    for (std::string line; std::getline(lines, line);) {
      const size_t at = line.find(":freezer:");
      if (at != std::string::npos) return "/sys/fs/cgroup/freezer" + line.substr(at + 9);
    }
    return "";
  }
  // The scheduling states (/proc/PID/stat: R, S, D, T...) of the members
  // of `cgroup`, one letter each.
  static std::string MemberStates(const std::string& cgroup) {
    std::string out;
    auto pids = ReadProcs(cgroup + "/cgroup.procs");
    for (pid_t pid : pids.ok() ? *pids : std::vector<pid_t>()) {
      const std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
      const size_t paren = stat.rfind(')');
      if (paren != std::string::npos && paren + 2 < stat.size()) out += stat[paren + 2];
    }
    return out;
  }
  // Waits (10 s at most) until no member of `cgroup` is in a state of
  // `states`; returns the states they were in last.
  static std::string WaitMembersLeave(const std::string& cgroup, std::string_view states) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (;;) {
      const std::string now = MemberStates(cgroup);
      if (now.find_first_of(states) == std::string::npos ||
          std::chrono::steady_clock::now() > deadline) {
        return now;
      }
      sched_yield();
    }
  }
  // Suspends task 7.`index`, which must be done with the freezer.
  void Freeze(uint32_t index) {
    Result<SuspendHow> how = h_->executor().Suspend(TaskId{7, index});
    ASSERT_TRUE(how.ok()) << how.status().ToString();
    ASSERT_EQ(*how, SuspendHow::kFreezer);
  }
  // Whether process `pidfd` ends within 10 s.
  static bool Ends(int pidfd) {
    pollfd p{pidfd, POLLIN, 0};
    return poll(&p, 1, 10000) == 1;
  }

  std::unique_ptr<Harness> h_;
};

TEST_F(CgroupV1Executor, TaskBeyondItsMemoryLimitIsReportedOomKilled) {
  TaskSpec spec = Task(1, {testing::Helper(), "alloc", "200"});
  spec.memory_bytes = 64ull << 20;
  TaskResult r = h_->Run(spec);
  EXPECT_EQ(r.outcome, TaskOutcome::kFailed);
  EXPECT_TRUE(r.oom_killed);
  EXPECT_EQ(r.signal, 9);
  EXPECT_GE(r.peak_memory, 60ull << 20);
  EXPECT_LE(r.peak_memory, 64ull << 20);
  ExpectAllCgroupsEmpty();
}

// The process made ahead of a prepared start is in the task's cgroup
// before its start, so the limits hold from its program's first step.
TEST_F(CgroupV1Executor, AProcessMadeAheadIsInItsCageBeforeItsStart) {
  if (!ParkSupported()) GTEST_SKIP() << "no parked starts on this architecture";
  TaskSpec spec = Task(9, {testing::Helper(), "alloc", "200"});
  spec.memory_bytes = 64ull << 20;
  ASSERT_TRUE(h_->executor().PrepareStart(spec).ok());
  ASSERT_TRUE(testing::WaitParked(h_->executor(), spec.id));
  const pid_t pid = h_->executor().ParkedProcessOf(spec.id)->pid;
  const std::string cgroups = ReadFile("/proc/" + std::to_string(pid) + "/cgroup");
  EXPECT_NE(cgroups.find(":memory:"), std::string::npos) << cgroups;
  EXPECT_NE(cgroups.find("/drover/w" + std::to_string(getpid()) + "/"), std::string::npos)
      << cgroups;
  TaskResult r = h_->Run(spec);
  EXPECT_EQ(r.outcome, TaskOutcome::kFailed);
  EXPECT_TRUE(r.oom_killed) << Describe(r);
  ExpectAllCgroupsEmpty();
}

// The trees a reaper or the worker's next life kills (reaper.h,
// life_record.h): the freezer's first, since it is the one to freeze.
TEST_F(CgroupV1Executor, ItsRootsListTheFreezerFirstAndTheOtherHierarchies) {
  auto isolator = MakeCgroupV1Isolator(CgroupV1Options{"/sys/fs/cgroup", 0});
  ASSERT_TRUE(isolator.ok()) << isolator.status().ToString();
  const std::vector<std::string> roots = (*isolator)->cgroup_roots();
  ASSERT_GE(roots.size(), 3u);
  EXPECT_EQ(roots[0].rfind("/sys/fs/cgroup/freezer", 0), 0u) << roots[0];
  EXPECT_TRUE(roots[0].ends_with("/drover/w" + std::to_string(getpid()))) << roots[0];
  EXPECT_NE(std::find(roots.begin(), roots.end(), MemoryBase()), roots.end());
}

TEST_F(CgroupV1Executor, HalfACpuBurningForTwoSecondsUsesAboutOneSecond) {
  // On a shared 2-core machine a dozen compilers can starve the task below
  // its quota: Drover's cpu cgroup competes with each of them as one nice-0
  // entity. For this test only, give Drover's cpu tree a large weight so the
  // task can use all its quota allows; the quota itself is what is tested.
  auto current = CurrentCgroup("cpu");
  ASSERT_TRUE(current.ok());
  const std::string drover =
      "/sys/fs/cgroup/cpu" + (*current == "/" ? std::string() : *current) + "/drover";
  const std::string worker = drover + "/w" + std::to_string(getpid());
  std::vector<std::pair<std::string, std::string>> restore;
  for (const std::string& dir : {drover, worker}) {
    auto old = ReadCgroupFile(dir + "/cpu.shares");
    if (old.ok() && WriteCgroupFile(dir + "/cpu.shares", "262144").ok()) {
      restore.emplace_back(dir + "/cpu.shares", *old);
    }
  }
  TaskSpec spec = Task(1, {testing::Helper(), "burn", "2"});
  spec.milli_cpus = 500;
  TaskResult r = h_->Run(spec);
  for (const auto& [file, value] : restore) EXPECT_TRUE(WriteCgroupFile(file, value).ok());
  ASSERT_EQ(r.outcome, TaskOutcome::kSucceeded) << Describe(r);
  EXPECT_GE(r.wall, Millis(1990));
  // The accounting (cpuacct of the whole tree) agrees with the task's own
  // measure, and both show the quota: about 1 s of CPU in 2 s of wall time.
  const Duration self(atoll(ReadFile(r.dirs.stdout_path).c_str()));
  EXPECT_NEAR(r.cpu.count(), self.count(), 50000 + self.count() / 10)
      << "accounted " << r.cpu.count() << " us, the task measured " << self.count() << " us";
  EXPECT_GE(r.cpu, Millis(750)) << r.cpu.count() << " us";
  EXPECT_LE(r.cpu, Millis(1250)) << r.cpu.count() << " us";
}

// A task pinned to as many cores as it asked CPUs needs no CPU quota (the
// cpuset caps it) and joins no cpu cgroup; a fractional request does.
TEST_F(CgroupV1Executor, QuotaCgroupOnlyWhenTheCpusetDoesNotCapTheTask) {
  auto cpu_line = [](const std::string& text) {
    for (size_t at = 0; at < text.size();) {
      size_t end = text.find('\n', at);
      if (end == std::string::npos) end = text.size();
      std::string line = text.substr(at, end - at);
      // "4:cpu:/path" (the cpu controller alone; "cpuacct", "cpuset" differ)
      const size_t colon = line.find(':');
      if (colon != std::string::npos && line.compare(colon, 5, ":cpu:") == 0) return line;
      at = end + 1;
    }
    return std::string();
  };
  TaskSpec whole = Task(1, {"cat", "/proc/self/cgroup"});
  whole.cores = {0};
  whole.milli_cpus = 1000;
  TaskResult r = h_->Run(whole);
  ASSERT_EQ(r.outcome, TaskOutcome::kSucceeded) << Describe(r);
  std::string line = cpu_line(ReadFile(r.dirs.stdout_path));
  ASSERT_FALSE(line.empty()) << ReadFile(r.dirs.stdout_path);
  EXPECT_EQ(line.find("/drover/w"), std::string::npos) << line;

  TaskSpec part = Task(2, {"cat", "/proc/self/cgroup"});
  part.cores = {0};
  part.milli_cpus = 500;
  r = h_->Run(part);
  ASSERT_EQ(r.outcome, TaskOutcome::kSucceeded) << Describe(r);
  line = cpu_line(ReadFile(r.dirs.stdout_path));
  EXPECT_NE(line.find("/drover/w"), std::string::npos) << line;
}

TEST_F(CgroupV1Executor, ConcurrentTasksSeeOnlyTheirOwnCore) {
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "needs two cores";
  for (uint32_t core : {0u, 1u}) {
    TaskSpec spec = Task(core, {"sh", "-c", "grep Cpus_allowed_list /proc/self/status; sleep 0.2"});
    spec.cores = {static_cast<int>(core)};
    ASSERT_TRUE(h_->Start(spec).ok());
  }
  EXPECT_EQ(h_->executor().running(), 2u);  // both started before either ended
  h_->WaitFor(2);
  for (uint32_t core : {0u, 1u}) {
    const TaskResult& r = h_->results()[core];
    EXPECT_EQ(r.outcome, TaskOutcome::kSucceeded) << Describe(r);
    EXPECT_EQ(ReadFile(r.dirs.stdout_path), "Cpus_allowed_list:\t" + std::to_string(core) + "\n");
  }
}

TEST_F(CgroupV1Executor, TwoOneGpuTasksOnTwoFakeGpusSeeDifferentDevices) {
  Slots slots(SlotCapacity{{0, 1}, 1ull << 30, {0, 1}});
  for (uint32_t i : {0u, 1u}) {
    ASSERT_TRUE(slots.Admit(TaskId{7, i}, {0, {}, 0, {{static_cast<int>(i), 100}}}).ok());
    TaskSpec spec = Task(i, {"sh", "-c", "echo $CUDA_VISIBLE_DEVICES $NVIDIA_VISIBLE_DEVICES"});
    spec.gpus = {static_cast<int>(i)};
    ASSERT_TRUE(h_->Start(spec).ok());
  }
  // A third one-GPU task has no GPU left.
  EXPECT_EQ(slots.Admit(TaskId{7, 2}, {0, {}, 0, {{0, 100}}}).code(),
            StatusCode::kResourceExhausted);
  h_->WaitFor(2);
  EXPECT_EQ(ReadFile(h_->results()[0].dirs.stdout_path), "0 0\n");
  EXPECT_EQ(ReadFile(h_->results()[1].dirs.stdout_path), "1 1\n");
}

TEST_F(CgroupV1Executor, UnassignedGpuDeviceNodeIsDenied) {
  // A device node with the NVIDIA major: the devices cgroup refuses to open
  // it (EPERM) for a task not given GPU 1; for the task that has GPU 1 the
  // open reaches the (absent) driver instead.
  testing::TempDir dev;
  std::string node = dev.path() + "/nvidia1";
  ASSERT_EQ(mknod(node.c_str(), S_IFCHR | 0666, makedev(195, 1)), 0) << strerror(errno);
  for (int gpu : {0, 1}) {
    TaskSpec spec = Task(gpu, {"sh", "-c", "head -c 1 " + node + " 2>&1; true"});
    spec.gpus = {gpu};
    TaskResult r = h_->Run(spec);
    bool denied = ReadFile(r.dirs.stdout_path).find("Operation not permitted") != std::string::npos;
    EXPECT_EQ(denied, gpu == 0) << ReadFile(r.dirs.stdout_path);
  }
}

TEST_F(CgroupV1Executor, KillLeavesNoProcessBehindEvenADoubleForkedOne) {
  testing::Fifo fifo;
  ASSERT_TRUE(h_->Start(Task(1, {testing::Helper(), "doublefork", fifo.path()})).ok());
  // The grandchild writes its pid once it runs in its own session.
  const pid_t grandchild = atoi(fifo.Read().c_str());
  ASSERT_GT(grandchild, 0);
  int gfd = PidfdOpen(grandchild);
  ASSERT_GE(gfd, 0) << "grandchild " << grandchild << " is not running";

  // The task ignores SIGTERM: the grace expires and everything in the cgroup
  // is killed, the grandchild outside the task's process group included.
  ASSERT_TRUE(h_->executor().Kill(TaskId{7, 1}, Millis(100)).ok());
  h_->WaitFor(1);
  const TaskResult& r = h_->results()[1];
  EXPECT_EQ(r.outcome, TaskOutcome::kCanceled);
  EXPECT_EQ(r.signal, 9);
  pollfd g{gfd, POLLIN, 0};
  EXPECT_EQ(poll(&g, 1, 10000), 1) << "grandchild survived the kill";
  close(gfd);
  ExpectAllCgroupsEmpty();
}

TEST_F(CgroupV1Executor, ProcessesLeftBehindByAFinishedTaskAreKilled) {
  testing::Fifo fifo;
  // setsid puts the daemon outside the task's process group, and it keeps
  // the task's stdout open; the task itself exits at once with success.
  std::string script = "setsid sh -c 'echo $$ > " + fifo.path() + "; exec sleep 100' &";
  ASSERT_TRUE(h_->Start(Task(1, {"sh", "-c", script})).ok());
  const pid_t daemon = atoi(fifo.Read().c_str());
  ASSERT_GT(daemon, 0);
  int gfd = PidfdOpen(daemon);
  ASSERT_GE(gfd, 0);
  h_->WaitFor(1);
  const TaskResult& r = h_->results()[1];
  EXPECT_EQ(r.outcome, TaskOutcome::kSucceeded) << Describe(r);
  EXPECT_EQ(r.leftovers_killed, 1u);
  pollfd g{gfd, POLLIN, 0};
  EXPECT_EQ(poll(&g, 1, 10000), 1) << "daemon survived its task";
  close(gfd);
  ExpectAllCgroupsEmpty();
}

TEST_F(CgroupV1Executor, AReusedCgroupStartsWithoutTheLastTasksLimitsOrCounts) {
  // The first task: a memory and a pids limit, 40 MiB touched, some CPU.
  TaskSpec first = Task(1, {"sh", "-c",
                            "cat /proc/self/cgroup | grep :memory: | cut -d: -f3; " +
                                std::string(testing::Helper()) + " alloc 40 >/dev/null; "
                                "i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done"});
  first.memory_bytes = 64ull << 20;
  first.max_pids = 50;
  TaskResult a = h_->Run(first);
  ASSERT_EQ(a.outcome, TaskOutcome::kSucceeded) << Describe(a) << ReadFile(a.dirs.stderr_path);
  EXPECT_GE(a.peak_memory, 40ull << 20);
  // The second, unlimited, runs in the same (reused) memory cgroup: no
  // limit, no process but its own, and counts of its own.
  TaskSpec second = Task(2, {"sh", "-c",
                             "g=$(cat /proc/self/cgroup | grep :memory: | cut -d: -f3); echo $g; "
                             "cat /sys/fs/cgroup/memory$g/memory.limit_in_bytes; n=0; "
                             "for p in $(cat /sys/fs/cgroup/memory$g/cgroup.procs); do "
                             "[ -r /proc/$p/stat ] || continue; set -- $(cat /proc/$p/stat); "
                             "[ \"$5\" = \"$$\" ] || n=$((n+1)); done; echo $n"});
  TaskResult b = h_->Run(second);
  ASSERT_EQ(b.outcome, TaskOutcome::kSucceeded) << Describe(b) << ReadFile(b.dirs.stderr_path);
  std::istringstream out(ReadFile(b.dirs.stdout_path));
  std::string group, limit, procs;
  out >> group >> limit >> procs;
  EXPECT_EQ(group, ReadFile(a.dirs.stdout_path).substr(0, group.size())) << "not reused";
  EXPECT_EQ(limit, "9223372036854771712");  // unlimited
  EXPECT_EQ(procs, "0");                    // members outside the task's process group
  EXPECT_LT(b.peak_memory, 20ull << 20);
  EXPECT_LT(b.cpu, a.cpu);
  EXPECT_FALSE(b.oom_killed);
  ExpectAllCgroupsEmpty();
}

TEST_F(CgroupV1Executor, ATaskAfterAnOomKilledOneIsNotReportedOomKilled) {
  TaskSpec oom = Task(1, {testing::Helper(), "alloc", "200"});
  oom.memory_bytes = 64ull << 20;
  TaskResult a = h_->Run(oom);
  ASSERT_TRUE(a.oom_killed) << Describe(a);
  // Same limit, so the same cgroup serves it unchanged; it fails on its own.
  TaskSpec next = Task(2, {"sh", "-c", "exit 3"});
  next.memory_bytes = 64ull << 20;
  TaskResult b = h_->Run(next);
  EXPECT_FALSE(b.oom_killed);
  EXPECT_EQ(b.exit_code, 3);
}

TEST_F(CgroupV1Executor, TwoIsolatorsInOneProcessDoNotCollide) {
  // `drover up --workers 2`: two workers, two isolators, one w<pid>.
  auto other = MakeCgroupV1Isolator(CgroupV1Options{"/sys/fs/cgroup", 0});
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  Harness h2(std::move(other).value());
  const size_t before = MemoryCgroups().size();  // left by an earlier test, if any
  for (int round = 0; round < 2; ++round) {
    TaskResult a = h_->Run(Task(1, {"true"}));
    EXPECT_EQ(a.outcome, TaskOutcome::kSucceeded) << Describe(a);
    TaskResult b = h2.Run(Task(2, {"true"}));
    EXPECT_EQ(b.outcome, TaskOutcome::kSucceeded) << Describe(b);
  }
  EXPECT_EQ(MemoryCgroups().size(), before + 2);  // one kept by each
}

// Suspend freezes the whole cage, a daemon outside the task's process
// group included; Resume thaws it and the task finishes as it would have.
TEST_F(CgroupV1Executor, SuspendFreezesEveryProcessOfTheTaskAndResumeLetsItFinish) {
  testing::Fifo fifo;
  const std::string script = "setsid sleep 1000 & sleep 1000 & echo ready > " + fifo.path() +
                             "; while [ ! -e $DROVER_OUTPUT_DIR/go ]; do sleep 0.01; done; exit 0";
  auto pid = h_->Start(Task(1, {"sh", "-c", script}));
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  ASSERT_EQ(fifo.Read(), "ready\n");
  const std::string cgroup = FreezerOf(*pid);
  ASSERT_NE(cgroup.find("/drover/w"), std::string::npos) << cgroup;
  const TaskId id{7, 1};

  Result<SuspendHow> how = h_->executor().Suspend(id);
  ASSERT_TRUE(how.ok()) << how.status().ToString();
  EXPECT_EQ(*how, SuspendHow::kFreezer);
  // Frozen when Suspend returns: the kernel shows frozen tasks as D.
  EXPECT_EQ(ReadFile(cgroup + "/freezer.state"), "FROZEN\n");
  const std::string frozen = MemberStates(cgroup);
  EXPECT_GE(std::count(frozen.begin(), frozen.end(), 'D'), 3) << frozen;  // sh, 2 sleeps
  EXPECT_EQ(frozen.find_first_not_of("DZ"), std::string::npos) << frozen;
  how = h_->executor().Suspend(id);
  ASSERT_TRUE(how.ok());
  EXPECT_EQ(*how, SuspendHow::kFreezer);

  ASSERT_TRUE(h_->executor().Resume(id).ok());
  EXPECT_EQ(ReadFile(cgroup + "/freezer.state"), "THAWED\n");
  const std::string thawed = WaitMembersLeave(cgroup, "D");
  EXPECT_EQ(thawed.find_first_not_of("SRZ"), std::string::npos) << thawed;
  testing::Put(h_->dir() + "/work/7/1.1/output/go", "");
  h_->WaitFor(1);
  const TaskResult& r = h_->results()[1];
  EXPECT_EQ(r.outcome, TaskOutcome::kSucceeded) << Describe(r);
  EXPECT_EQ(r.exit_code, 0);
  ExpectAllCgroupsEmpty();
}

// A kill's first signal reaches a frozen task at the thaw that follows it:
// the program's handler runs (and can checkpoint).
TEST_F(CgroupV1Executor, AFrozenTaskKilledWithSigusr1RunsItsHandlerAfterTheThaw) {
  testing::Fifo fifo;
  const std::string script =
      "trap 'echo got usr1 > $DROVER_OUTPUT_DIR/../x; exit 7' USR1; echo ready > " + fifo.path() +
      "; while :; do sleep 0.01; done";
  auto pid = h_->Start(Task(1, {"sh", "-c", script}));
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  ASSERT_EQ(fifo.Read(), "ready\n");
  ASSERT_NO_FATAL_FAILURE(Freeze(1));
  ASSERT_TRUE(h_->executor().Kill(TaskId{7, 1}, Seconds(30), SIGUSR1).ok());
  h_->WaitFor(1);
  const TaskResult& r = h_->results()[1];
  EXPECT_EQ(r.outcome, TaskOutcome::kCanceled);
  EXPECT_EQ(r.exit_code, 7) << Describe(r);
  EXPECT_EQ(ReadFile(r.dirs.task + "/x"), "got usr1\n");
  EXPECT_LT(r.wall, Seconds(20));  // the handler ended it, not the grace
  ExpectAllCgroupsEmpty();
}

// KillAll of a frozen cage: everything in it dies, a daemon outside the
// task's process group included.
TEST_F(CgroupV1Executor, AFrozenTaskKilledWithoutGraceLeavesNothingInItsCage) {
  testing::Fifo fifo;
  const std::string script =
      "setsid sh -c 'echo $$ > " + fifo.path() + "; exec sleep 1000' & sleep 1000";
  ASSERT_TRUE(h_->Start(Task(1, {"sh", "-c", script})).ok());
  const pid_t daemon = atoi(fifo.Read().c_str());
  ASSERT_GT(daemon, 0);
  const int fd = PidfdOpen(daemon);
  ASSERT_GE(fd, 0);
  ASSERT_NO_FATAL_FAILURE(Freeze(1));
  ASSERT_TRUE(h_->executor().Kill(TaskId{7, 1}, Duration(0)).ok());
  h_->WaitFor(1);
  const TaskResult& r = h_->results()[1];
  EXPECT_EQ(r.outcome, TaskOutcome::kCanceled);
  EXPECT_EQ(r.signal, 9) << Describe(r);
  EXPECT_TRUE(Ends(fd)) << "the frozen daemon survived";
  close(fd);
  ExpectAllCgroupsEmpty();
}

TEST_F(CgroupV1Executor, AFrozenTaskIgnoringTermIsKilledWhenItsGraceEnds) {
  testing::Fifo fifo;
  const std::string script =
      "trap '' TERM; echo ready > " + fifo.path() + "; while :; do sleep 0.01; done";
  ASSERT_TRUE(h_->Start(Task(1, {"sh", "-c", script})).ok());
  ASSERT_EQ(fifo.Read(), "ready\n");
  ASSERT_NO_FATAL_FAILURE(Freeze(1));
  ASSERT_TRUE(h_->executor().Kill(TaskId{7, 1}, Millis(200)).ok());
  h_->WaitFor(1);
  const TaskResult& r = h_->results()[1];
  EXPECT_EQ(r.outcome, TaskOutcome::kCanceled);
  EXPECT_EQ(r.signal, 9) << Describe(r);
  EXPECT_GE(r.wall, Millis(200));
  ExpectAllCgroupsEmpty();
}

TEST_F(CgroupV1Executor, DestroyingTheExecutorKillsAFrozenTask) {
  testing::Fifo fifo;
  const std::string script =
      "setsid sh -c 'echo $$ > " + fifo.path() + "; exec sleep 1000' & sleep 1000";
  auto pid = h_->Start(Task(1, {"sh", "-c", script}));
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  const pid_t daemon = atoi(fifo.Read().c_str());
  ASSERT_GT(daemon, 0);
  const int daemon_fd = PidfdOpen(daemon);
  const int task_fd = PidfdOpen(*pid);
  ASSERT_GE(daemon_fd, 0);
  ASSERT_GE(task_fd, 0);
  ASSERT_NO_FATAL_FAILURE(Freeze(1));
  h_.reset();
  EXPECT_TRUE(Ends(task_fd)) << "the frozen task survived its executor";
  EXPECT_TRUE(Ends(daemon_fd)) << "the frozen daemon survived its executor";
  close(task_fd);
  close(daemon_fd);
}

// Disk I/O limits are throttles of a blkio cgroup of the task's own, on
// the disk that holds the work directory; a later task without limits
// gets none (blkio cgroups are never reused).
TEST_F(CgroupV1Executor, DiskIoLimitsAreThrottlesOnTheWorkDirectorysDisk) {
  if (access("/sys/fs/cgroup/blkio", W_OK) != 0) GTEST_SKIP() << "no writable blkio hierarchy";
  Result<std::string> disk = BlockDeviceOf(h_->dir());
  if (!disk.ok()) GTEST_SKIP() << disk.status().message();
  const std::string script =
      "b=/sys/fs/cgroup/blkio$(grep :blkio: /proc/self/cgroup | cut -d: -f3); "
      "cat $b/blkio.throttle.read_bps_device $b/blkio.throttle.write_bps_device > "
      "\"$DROVER_RESULT\"";
  TaskSpec spec = Task(1, {"sh", "-c",
                           script + " && dd if=/dev/zero of=f bs=1M count=2 "
                                    "oflag=direct 2>/dev/null"});
  spec.io.write_bps = 10 << 20;
  TaskResult r = h_->Run(spec);
  ASSERT_EQ(r.outcome, TaskOutcome::kSucceeded) << Describe(r);
  EXPECT_EQ(r.result_text, *disk + " 10485760\n");
  // Its blkio cgroup counted what it wrote.
  ASSERT_TRUE(r.io_write_bytes.has_value());
  EXPECT_GE(*r.io_write_bytes, 2u << 20);
  EXPECT_TRUE(r.io_read_bytes.has_value());

  spec = Task(2, {"sh", "-c", script});
  spec.io.read_bps = 50 << 20;
  r = h_->Run(spec);
  ASSERT_EQ(r.outcome, TaskOutcome::kSucceeded) << Describe(r);
  EXPECT_EQ(r.result_text, *disk + " 52428800\n");

  // A weight needs BFQ's blkio.bfq.weight (or CFQ's blkio.weight): where
  // the kernel has neither, such a task does not start, saying why.
  spec = Task(4, {"true"});
  spec.io.weight = 200;
  const bool weighted = access("/sys/fs/cgroup/blkio/blkio.bfq.weight", F_OK) == 0 ||
                        access("/sys/fs/cgroup/blkio/blkio.weight", F_OK) == 0;
  Result<pid_t> started = h_->Start(spec);
  if (weighted) {
    EXPECT_TRUE(started.ok()) << started.status().ToString();
    h_->WaitFor(h_->results().size() + 1);
  } else {
    ASSERT_FALSE(started.ok());
    EXPECT_NE(started.status().message().find("io_weight: this worker's cgroup v1 blkio "
                                              "controller has no weight"),
              std::string::npos)
        << started.status().ToString();
  }

  r = h_->Run(Task(3, {"sh", "-c", script}));
  ASSERT_EQ(r.outcome, TaskOutcome::kSucceeded) << Describe(r);
  EXPECT_EQ(r.result_text, "");  // the worker's own blkio cgroup: no throttles
  EXPECT_FALSE(r.io_write_bytes.has_value());  // none of its own to count in
  ExpectAllCgroupsEmpty();
}

TEST_F(CgroupV1Executor, TheIsolatorRemovesTheCgroupsItKept) {
  // An earlier test of this process whose executor was destroyed with a
  // frozen task still dying may have left its cgroup (the same w<pid>).
  const std::vector<std::string> before = MemoryCgroups();
  ASSERT_EQ(h_->Run(Task(1, {"true"})).outcome, TaskOutcome::kSucceeded);
  EXPECT_EQ(MemoryCgroups().size(), before.size() + 1);  // kept for the next task
  h_.reset();
  if (before.empty()) {
    EXPECT_FALSE(std::filesystem::exists(MemoryBase()));
  } else {
    EXPECT_EQ(MemoryCgroups(), before);
  }
}

}  // namespace
}  // namespace drover::worker
