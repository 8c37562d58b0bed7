// The reaper with real processes: a stand-in worker (a forked process)
// starts it, tells it of process groups, and is killed as kill -9 would;
// what the reaper must end, and what it must leave, is then checked on
// pidfds with deadlines. Cgroup trees are fake (plain directories shaped
// like cgroupfs), so both the v1 and the v2 paths run anywhere.
#include "worker/exec/reaper.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "worker/exec/exec_test_util.h"
#include "worker/exec/process_tree_test_util.h"

namespace drover::worker {
namespace {

using std::chrono::seconds;
using testing::EndsWithin;
using testing::FakeWorker;
using testing::KillAndReap;
using testing::Put;
using testing::ReadFile;
using testing::Running;
using testing::StartTaskGroup;
using testing::TaskGroup;
using testing::TempDir;

TEST(ReaperTest, TheWorkersDeathEndsEveryWatchedGroupAndNoForgottenOne) {
  TaskGroup watched = StartTaskGroup();
  TaskGroup forgotten = StartTaskGroup();
  ASSERT_GT(watched.member, 0);
  ASSERT_GT(forgotten.member, 0);
  pid_t reaper_pid = -1;
  {
    FakeWorker worker([&]() -> pid_t {
      auto reaper = Reaper::Start({}, -1);
      if (!reaper.ok()) return -1;
      if (!(*reaper)->Watch(watched.leader).ok()) return -1;
      if (!(*reaper)->Watch(forgotten.leader).ok()) return -1;
      if (!(*reaper)->Forget(forgotten.leader).ok()) return -1;
      return (*reaper).release()->pid();  // the worker will die, not stop
    });
    ASSERT_TRUE(worker.ready());
    reaper_pid = worker.reaper();
    EXPECT_TRUE(Running(watched.leader));
    EXPECT_TRUE(Running(watched.member));
    worker.Kill();
  }
  EXPECT_TRUE(EndsWithin(watched.leader, std::chrono::seconds(10)));
  EXPECT_TRUE(EndsWithin(watched.member, std::chrono::seconds(10)));
  EXPECT_TRUE(EndsWithin(reaper_pid, std::chrono::seconds(10)));  // and it left
  EXPECT_TRUE(Running(forgotten.leader));
  EXPECT_TRUE(Running(forgotten.member));
  KillAndReap(watched.leader);
  kill(-forgotten.leader, SIGKILL);
  KillAndReap(forgotten.leader);
}

// A group whose leader was already reaped when the reaper looked may carry
// a number the kernel has handed out again: the reaper leaves it. (Here the
// group's other member still holds it; a kill by number would reach it.)
TEST(ReaperTest, AGroupWhoseLeaderWasGoneWhenWatchedIsLeftAlone) {
  TaskGroup g = StartTaskGroup();
  ASSERT_GT(g.member, 0);
  KillAndReap(g.leader);  // the member lives on in the leader's group
  pid_t reaper_pid = -1;
  {
    FakeWorker worker([&]() -> pid_t {
      auto reaper = Reaper::Start({}, -1);
      if (!reaper.ok()) return -1;
      if (!(*reaper)->Watch(g.leader).ok()) return -1;
      return (*reaper).release()->pid();
    });
    ASSERT_TRUE(worker.ready());
    reaper_pid = worker.reaper();
    worker.Kill();
  }
  EXPECT_TRUE(EndsWithin(reaper_pid, std::chrono::seconds(10)));  // done killing
  EXPECT_TRUE(Running(g.member));
  kill(g.member, SIGKILL);
}

TEST(ReaperTest, AWorkerThatStopsCleanlyLeavesItsGroupsToItself) {
  TaskGroup g = StartTaskGroup();
  ASSERT_GT(g.member, 0);
  {
    auto reaper = Reaper::Start({}, -1);
    ASSERT_TRUE(reaper.ok()) << reaper.status().ToString();
    ASSERT_TRUE((*reaper)->Watch(g.leader).ok());
  }  // goodbye: the reaper exits without killing, and is reaped
  EXPECT_TRUE(Running(g.leader));
  EXPECT_TRUE(Running(g.member));
  kill(-g.leader, SIGKILL);
  KillAndReap(g.leader);
}

TEST(ReaperTest, ItRunsInItsOwnSessionAndHoldsOnlyWhatItKeeps) {
  int keep[2];
  ASSERT_EQ(pipe2(keep, O_CLOEXEC), 0);
  int other[2];
  ASSERT_EQ(pipe2(other, O_CLOEXEC), 0);
  auto reaper = Reaper::Start({}, keep[0]);
  ASSERT_TRUE(reaper.ok()) << reaper.status().ToString();
  const pid_t pid = (*reaper)->pid();
  // Its name and session may lag the fork by a moment; the descriptors
  // are what counts, and they are closed before it first reads, so wait
  // for the pipe ends it must not hold to read as closed... through the
  // other pipe: its write end is held by us only once the reaper let go.
  close(other[1]);
  pollfd p{other[0], POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 10000), 1);  // end of file: no one else holds the write end
  EXPECT_NE(getsid(pid), getsid(0));
  std::error_code ec;
  bool holds_keep = false;
  struct stat keep_st {};
  ASSERT_EQ(fstat(keep[0], &keep_st), 0);
  for (const auto& e : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
    struct stat st {};
    if (stat(e.path().c_str(), &st) == 0 && st.st_ino == keep_st.st_ino) holds_keep = true;
  }
  EXPECT_TRUE(holds_keep);
  EXPECT_EQ(ReadFile("/proc/" + std::to_string(pid) + "/comm"), "drover-reaper\n");
  reaper->reset();
  EXPECT_FALSE(Running(pid));  // reaped by the destructor
  close(keep[0]);
  close(keep[1]);
  close(other[0]);
}

// cgroup v1: the tree is frozen, every listed member killed, then thawed.
TEST(ReaperTest, TheWorkersDeathKillsEveryProcessInAV1Tree) {
  TempDir dir;
  const std::string root = dir.path() + "/w1";
  std::filesystem::create_directories(root + "/t0");
  std::filesystem::create_directories(root + "/t1/nested");
  Put(root + "/freezer.state", "THAWED\n");
  // t0 was suspended on its own (idle-desktop mode): it must be thawed too,
  // or its killed processes would never die.
  Put(root + "/t0/freezer.state", "FROZEN\n");
  TaskGroup a = StartTaskGroup();
  TaskGroup b = StartTaskGroup();
  Put(root + "/t0/cgroup.procs", std::to_string(a.leader) + "\n" + std::to_string(a.member) + "\n");
  Put(root + "/t1/nested/cgroup.procs", std::to_string(b.leader) + "\n");
  {
    FakeWorker worker([&]() -> pid_t {
      auto reaper = Reaper::Start({root}, -1);
      return reaper.ok() ? (*reaper).release()->pid() : -1;
    });
    ASSERT_TRUE(worker.ready());
  }
  EXPECT_TRUE(EndsWithin(a.leader, seconds(10)));
  EXPECT_TRUE(EndsWithin(a.member, seconds(10)));
  EXPECT_TRUE(EndsWithin(b.leader, seconds(10)));
  EXPECT_TRUE(Running(b.member));  // not listed: not in the tree
  // Frozen for the kills, thawed after (a fake file keeps the last write).
  EXPECT_EQ(ReadFile(root + "/freezer.state").substr(0, 6), "THAWED");
  EXPECT_EQ(ReadFile(root + "/t0/freezer.state").substr(0, 6), "THAWED");
  KillAndReap(a.leader);
  kill(-b.leader, SIGKILL);
  KillAndReap(b.leader);
}

// cgroup v2: one write to the root's cgroup.kill ends the whole tree.
TEST(ReaperTest, TheWorkersDeathWritesCgroupKillOfAV2Tree) {
  TempDir dir;
  const std::string root = dir.path() + "/w2";
  std::filesystem::create_directories(root + "/7.1.1");
  Put(root + "/cgroup.kill", "");
  pid_t reaper_pid = -1;
  {
    FakeWorker worker([&]() -> pid_t {
      auto reaper = Reaper::Start({root}, -1);
      return reaper.ok() ? (*reaper).release()->pid() : -1;
    });
    ASSERT_TRUE(worker.ready());
    reaper_pid = worker.reaper();
  }
  // The reaper exits once it has written.
  ASSERT_TRUE(EndsWithin(reaper_pid, seconds(10)));
  EXPECT_EQ(ReadFile(root + "/cgroup.kill"), "1");
}

// At the worker's death, once the trees are killed and empty, the reaper
// becomes its last program (a container runtime's cleanup) with only the
// environment it was given; a worker that stops cleanly runs nothing.
TEST(ReaperTest, TheWorkersDeathEndsInTheLastProgramAndACleanStopDoesNot) {
  TempDir dir;
  const std::string root = dir.path() + "/w2";
  std::filesystem::create_directories(root + "/7.1.1");
  Put(root + "/cgroup.kill", "");
  const std::string said = dir.path() + "/said";
  const std::vector<std::string> then = {"/bin/sh", "-c", "echo \"$WORD $0\" > \"$1\"", "cleaned",
                                         said};
  pid_t reaper_pid = -1;
  {
    FakeWorker worker([&]() -> pid_t {
      auto reaper = Reaper::Start({root}, -1, then, {"WORD=containers"});
      return reaper.ok() ? (*reaper).release()->pid() : -1;
    });
    ASSERT_TRUE(worker.ready());
    reaper_pid = worker.reaper();
  }
  ASSERT_TRUE(EndsWithin(reaper_pid, seconds(10)));
  EXPECT_EQ(ReadFile(root + "/cgroup.kill"), "1");
  EXPECT_EQ(ReadFile(said), "containers cleaned\n");
  // The emptied tree went before it (the root stays: a fake one holds a file).
  EXPECT_FALSE(std::filesystem::exists(root + "/7.1.1"));
  std::filesystem::create_directories(root + "/7.1.1");

  std::filesystem::remove(said);
  {
    auto reaper = Reaper::Start({root}, -1, then, {"WORD=containers"});
    ASSERT_TRUE(reaper.ok()) << reaper.status().ToString();
  }  // stopped cleanly: a goodbye, and the reaper exits without more
  EXPECT_FALSE(std::filesystem::exists(said));
  EXPECT_FALSE(Reaper::Start({root}, -1, std::vector<std::string>(17, "x")).ok());
}

TEST(ReaperTest, ADeadReaperIsReportedWhenTold) {
  auto reaper = Reaper::Start({}, -1);
  ASSERT_TRUE(reaper.ok());
  kill((*reaper)->pid(), SIGKILL);
  ASSERT_TRUE(EndsWithin((*reaper)->pid(), seconds(10)));
  Status s = (*reaper)->Watch(1);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("reaper"), std::string::npos) << s.message();
}

// The watchdog: a worker that stops renewing its deadline
// (SIGSTOP, a stall) has its tasks killed by then, as its own fencing would;
// the reaper stays for the worker and counts the fence.
TEST(ReaperTest, AWorkerSilentPastItsDeadlineHasItsTasksKilledAndTheReaperStays) {
  TaskGroup g = StartTaskGroup();
  ASSERT_GT(g.member, 0);
  auto reaper = Reaper::Start({}, -1);
  ASSERT_TRUE(reaper.ok()) << reaper.status().ToString();
  ASSERT_TRUE((*reaper)->Watch(g.leader).ok());
  EXPECT_EQ((*reaper)->fences(), 0u);
  ASSERT_TRUE((*reaper)->SetDeadline(Millis(100)).ok());
  EXPECT_TRUE(EndsWithin(g.member, seconds(10)));
  EXPECT_TRUE(EndsWithin(g.leader, seconds(10)));
  KillAndReap(g.leader);
  EXPECT_EQ((*reaper)->fences(), 1u);
  EXPECT_TRUE(Running((*reaper)->pid()));
  // Disarmed once fired: a task started after it runs on.
  TaskGroup later = StartTaskGroup();
  ASSERT_TRUE((*reaper)->Watch(later.leader).ok());
  ASSERT_TRUE((*reaper)->Forget(g.leader).ok());
  // And a renewed deadline replaces the one before it; a cleared one never
  // fires. Time passes on a process of its own (half a second).
  ASSERT_TRUE((*reaper)->SetDeadline(Millis(50)).ok());
  ASSERT_TRUE((*reaper)->SetDeadline(Seconds(3600)).ok());
  ASSERT_TRUE((*reaper)->ClearDeadline().ok());
  const pid_t timer = fork();
  if (timer == 0) {
    usleep(500'000);
    _exit(0);
  }
  EXPECT_TRUE(EndsWithin(timer, seconds(10)));
  KillAndReap(timer);
  EXPECT_TRUE(Running(later.leader));
  EXPECT_TRUE(Running(later.member));
  EXPECT_EQ((*reaper)->fences(), 1u);
  kill(-later.leader, SIGKILL);
  KillAndReap(later.leader);
}

}  // namespace
}  // namespace drover::worker
