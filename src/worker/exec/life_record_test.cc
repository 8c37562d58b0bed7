// The life record and the restart scan with real processes: what a
// previous life recorded is killed only when it is provably that life's
// (a recycled pid is never killed), cgroup trees (fake, v1 and v2 shaped)
// are emptied, and the lock keeps a second worker off the directory.
#include "worker/exec/life_record.h"

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
using testing::KillAndReap;
using testing::Put;
using testing::ReadFile;
using testing::Running;
using testing::StartTaskGroup;
using testing::TaskGroup;
using testing::TempDir;

uint64_t StartOf(pid_t pid) {
  std::optional<ProcStat> st = ReadProcStat(pid);
  return st ? st->start_ticks : 0;
}

// A record opened for a new life, with the previous one ended.
std::unique_ptr<LifeRecord> NewLife(const std::string& dir, LeftoverReport* report = nullptr) {
  auto life = LifeRecord::Open(dir, Seconds(0));
  EXPECT_TRUE(life.ok()) << life.status().ToString();
  if (!life.ok()) return nullptr;
  Result<LeftoverReport> r = (*life)->EndPreviousLife(Seconds(10));
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (report != nullptr && r.ok()) *report = *r;
  return std::move(life).value();
}

TEST(ProcStatTest, ReadsThisProcesssGroupAndStartTime) {
  std::optional<ProcStat> st = ReadProcStat(getpid());
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->pgrp, getpgrp());
  EXPECT_GT(st->start_ticks, 0u);
  EXPECT_FALSE(ReadProcStat(-5).has_value());
}

TEST(LifeRecordTest, ANewLifeKillsTheGroupsItsPreviousLifeLeftRunningAndNoEndedOne) {
  TempDir dir;
  const std::string state = dir.path() + "/state";
  TaskGroup left = StartTaskGroup();
  TaskGroup ended = StartTaskGroup();
  ASSERT_GT(left.member, 0);
  ASSERT_GT(ended.member, 0);
  {
    std::unique_ptr<LifeRecord> first = NewLife(state);
    ASSERT_NE(first, nullptr);
    ASSERT_TRUE(first->TaskStarted(left.leader, "7.1.1").ok());
    ASSERT_TRUE(first->TaskStarted(ended.leader, "7.2.1").ok());
    ASSERT_TRUE(first->TaskEnded(ended.leader).ok());
  }  // the first life dies (its lock goes with it)
  LeftoverReport report;
  std::unique_ptr<LifeRecord> second = NewLife(state, &report);
  ASSERT_NE(second, nullptr);
  EXPECT_TRUE(EndsWithin(left.leader, seconds(0)));  // EndPreviousLife waited
  EXPECT_TRUE(EndsWithin(left.member, seconds(10)));
  EXPECT_EQ(report.processes_killed, 2u);
  EXPECT_EQ(report.tasks, std::vector<std::string>{"7.1.1"});
  EXPECT_TRUE(Running(ended.leader));
  EXPECT_TRUE(Running(ended.member));
  // The records start empty: a third life finds nothing.
  second.reset();
  LeftoverReport third;
  NewLife(state, &third);
  EXPECT_EQ(third.processes_killed, 0u);
  KillAndReap(left.leader);
  kill(-ended.leader, SIGKILL);
  KillAndReap(ended.leader);
}

TEST(LifeRecordTest, ARecycledPidIsNeverKilled) {
  TempDir dir;
  const std::string state = dir.path() + "/state";
  TaskGroup other = StartTaskGroup();  // holds the pid a dead task had
  ASSERT_GT(other.member, 0);
  std::filesystem::create_directories(state);
  // The previous life's task had this pid, but started a tick earlier.
  Put(state + "/tasks", "+ " + std::to_string(other.leader) + " " +
                            std::to_string(StartOf(other.leader) - 1) + " 7.1.1\n");
  LeftoverReport report;
  NewLife(state, &report);
  EXPECT_EQ(report.processes_killed, 0u);
  ASSERT_EQ(report.notes.size(), 1u);
  EXPECT_NE(report.notes[0].find("now belongs to another process"), std::string::npos)
      << report.notes[0];
  EXPECT_TRUE(Running(other.leader));
  EXPECT_TRUE(Running(other.member));
  kill(-other.leader, SIGKILL);
  KillAndReap(other.leader);
}

TEST(LifeRecordTest, MembersOfAGroupWhoseLeaderExitedAreKilled) {
  TempDir dir;
  const std::string state = dir.path() + "/state";
  TaskGroup g = StartTaskGroup();
  ASSERT_GT(g.member, 0);
  std::filesystem::create_directories(state);
  Put(state + "/tasks", "+ " + std::to_string(g.leader) + " " + std::to_string(StartOf(g.leader)) +
                            " 7.1.1\n");
  KillAndReap(g.leader);  // the leader is gone; its member runs on in its group
  ASSERT_TRUE(Running(g.member));
  LeftoverReport report;
  NewLife(state, &report);
  EXPECT_TRUE(EndsWithin(g.member, seconds(10)));
  EXPECT_EQ(report.processes_killed, 1u);
}

TEST(LifeRecordTest, EveryProcessInThePreviousLifesCgroupTreesIsKilled) {
  TempDir dir;
  const std::string state = dir.path() + "/state";
  // A v1-shaped tree (freezer.state at its root) and a v2-shaped one
  // (cgroup.kill), each with a task cgroup holding a real process group.
  const std::string v1 = dir.path() + "/freezer/drover/w1";
  const std::string v2 = dir.path() + "/unified/drover/w1";
  std::filesystem::create_directories(v1 + "/t4");
  std::filesystem::create_directories(v2 + "/7.3.1");
  Put(v1 + "/freezer.state", "THAWED\n");
  Put(v1 + "/t4/freezer.state", "FROZEN\n");  // suspended on its own (--desktop)
  Put(v2 + "/cgroup.kill", "");
  TaskGroup a = StartTaskGroup();
  TaskGroup b = StartTaskGroup();
  ASSERT_GT(a.member, 0);
  ASSERT_GT(b.member, 0);
  Put(v1 + "/t4/cgroup.procs", std::to_string(a.leader) + "\n" + std::to_string(a.member) + "\n");
  Put(v2 + "/7.3.1/cgroup.procs", std::to_string(b.leader) + "\n");
  // Written as a previous process recorded them (the roots this process
  // records are left alone, see the next test).
  std::filesystem::create_directories(state);
  Put(state + "/cgroups", v1 + "\n" + v2 + "\n");
  LeftoverReport report;
  NewLife(state, &report);
  EXPECT_TRUE(EndsWithin(a.leader, seconds(0)));
  EXPECT_TRUE(EndsWithin(a.member, seconds(0)));
  EXPECT_TRUE(EndsWithin(b.leader, seconds(0)));
  EXPECT_TRUE(Running(b.member));  // not in any tree
  EXPECT_EQ(report.processes_killed, 3u);
  EXPECT_EQ(report.tasks, (std::vector<std::string>{"t4", "7.3.1"}));
  EXPECT_EQ(ReadFile(v2 + "/cgroup.kill"), "1");
  EXPECT_EQ(ReadFile(v1 + "/freezer.state").substr(0, 6), "THAWED");
  EXPECT_EQ(ReadFile(v1 + "/t4/freezer.state").substr(0, 6), "THAWED");
  KillAndReap(a.leader);
  kill(-b.leader, SIGKILL);
  KillAndReap(b.leader);
}

TEST(LifeRecordTest, RootsThisProcessRecordedAreLeftToTheirLife) {
  TempDir dir;
  const std::string root = dir.path() + "/freezer/drover/w1";
  std::filesystem::create_directories(root + "/t0");
  TaskGroup g = StartTaskGroup();
  ASSERT_GT(g.member, 0);
  Put(root + "/t0/cgroup.procs", std::to_string(g.leader) + "\n");
  // A sibling worker of this process (`drover up`) uses the root now.
  std::unique_ptr<LifeRecord> sibling = NewLife(dir.path() + "/sibling");
  ASSERT_TRUE(sibling->RecordCgroupRoots({root}).ok());
  std::filesystem::create_directories(dir.path() + "/state");
  Put(dir.path() + "/state/cgroups", root + "\n");
  LeftoverReport report;
  NewLife(dir.path() + "/state", &report);
  EXPECT_EQ(report.processes_killed, 0u);
  EXPECT_TRUE(Running(g.leader));
  kill(-g.leader, SIGKILL);
  KillAndReap(g.leader);
}

TEST(LifeRecordTest, ASecondWorkerOnTheDirectoryIsRefusedNamingTheHolder) {
  TempDir dir;
  auto first = LifeRecord::Open(dir.path() + "/state", Seconds(0));
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto second = LifeRecord::Open(dir.path() + "/state", Millis(50));
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(second.status().message().find("in use by another worker (pid " +
                                           std::to_string(getpid()) + ")"),
            std::string::npos)
      << second.status().message();
  struct stat st {};
  ASSERT_EQ(stat((dir.path() + "/state").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  first->reset();
  EXPECT_TRUE(LifeRecord::Open(dir.path() + "/state", Seconds(0)).ok());
}

TEST(LifeRecordTest, TheTasksLogStaysSmallUnderManyTasks) {
  TempDir dir;
  TaskGroup g = StartTaskGroup();
  ASSERT_GT(g.member, 0);
  std::unique_ptr<LifeRecord> life = NewLife(dir.path() + "/state");
  ASSERT_NE(life, nullptr);
  for (int i = 0; i < 20000; ++i) {
    ASSERT_TRUE(life->TaskStarted(g.leader, "7.1." + std::to_string(i)).ok());
    ASSERT_TRUE(life->TaskEnded(g.leader).ok());
  }
  EXPECT_LT(std::filesystem::file_size(dir.path() + "/state/tasks"), 512u << 10);
  ASSERT_TRUE(life->TaskStarted(g.leader, "7.1.last").ok());
  life.reset();
  LeftoverReport report;
  NewLife(dir.path() + "/state", &report);
  EXPECT_EQ(report.tasks, std::vector<std::string>{"7.1.last"});
  EXPECT_TRUE(EndsWithin(g.member, seconds(10)));
  KillAndReap(g.leader);
}

}  // namespace
}  // namespace drover::worker
