// Tasks run as the Unix account of their job's user (docs/guide.md, "Who
// tasks run as"): a root worker in per-user mode (--user-map) runs ana's tasks
// as ana's account and bob's as bob's, so bob's task cannot touch what
// ana's wrote, and a user with no account here fails with the reason.
// Real accounts, made for the test with useradd and deleted at its end.
#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "cluster.h"
#include "test_accounts.h"

namespace drover::testing {
namespace {

// The job id `drover submit --wait` printed first, whether or not the job
// then succeeded; 0 when there is none.
uint64_t JobOf(const RunResult& r) { return std::strtoull(r.output.c_str(), nullptr, 10); }

uid_t OwnerOf(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 ? st.st_uid : static_cast<uid_t>(-1);
}

TEST(RunAsTest, EachTaskRunsAsItsUsersAccount) {
  if (!CanMakeAccounts()) {
    GTEST_SKIP() << "needs root (the worker switches to other accounts), " << kUseradd << " and "
                 << kUserdel;
  }
  const std::string ana = "drvana" + std::to_string(getpid());
  const std::string bob = "drvbob" + std::to_string(getpid());
  TestAccounts accounts;
  ASSERT_TRUE(accounts.Add({ana, bob}));

  Cluster c;
  // The accounts pass through the test's directory to their task
  // directories (mkdtemp made it 0700), and share one directory, like /tmp.
  ASSERT_EQ(chmod(c.dir().c_str(), 0711), 0);
  const std::string shared = c.dir() + "/shared";
  ASSERT_EQ(mkdir(shared.c_str(), 0700), 0);
  ASSERT_EQ(chmod(shared.c_str(), 01777), 0);
  c.StartServer();
  // Cluster workers carry --run-as-root: with --user-map that only lets a
  // user whose account is root run; every task still runs as its user's.
  Process& w = c.StartWorker("w1", {"--user-map", "ana=" + ana, "--user-map", "bob=" + bob});
  EXPECT_NE(w.output().find("runs each task as its user's account (2 mapped by --user-map)"),
            std::string::npos)
      << w.output();

  // ana's task runs as ana's account and writes a file in the shared
  // directory (umask 022: others may read it, not write it).
  const std::string file = shared + "/ana.txt";
  RunResult first = c.Drover(Submit({"--user", "ana", "--retries", "0", "--wait"},
                                    {"sh", "-c", "umask 022; id -un; echo from ana > " + file}));
  ASSERT_EQ(first.status, 0) << first.output;
  const std::string a = std::to_string(SubmittedJob(first)) + ".0";
  RunResult ana_out = c.Drover({"logs", a});
  EXPECT_EQ(ana_out.output, ana + "\n");
  EXPECT_EQ(OwnerOf(file), UidOf(ana));
  // Its task directory and output are the account's too.
  const std::string task_dir =
      c.dir() + "/workers/w1/work/" + std::to_string(SubmittedJob(first)) + "/0.1";
  EXPECT_EQ(OwnerOf(task_dir), UidOf(ana));
  EXPECT_EQ(OwnerOf(task_dir + "/stdout"), UidOf(ana));

  // bob's task runs as bob's account, which may not append to ana's file.
  RunResult second = c.Drover(Submit({"--user", "bob", "--retries", "0", "--wait"},
                                     {"sh", "-c", "id -un; echo from bob >> " + file}));
  EXPECT_EQ(second.status, 1) << second.output;
  const std::string b = std::to_string(JobOf(second)) + ".0";
  EXPECT_EQ(c.Drover({"logs", b}).output, bob + "\n");
  RunResult bob_err = c.Drover({"logs", "--stderr", b});
  EXPECT_NE(bob_err.output.find("Permission denied"), std::string::npos) << bob_err.output;
  nlohmann::json bob_task = c.Get("/api/v1/tasks/" + b);
  EXPECT_EQ(bob_task["state"], "failed") << bob_task.dump(2);
  EXPECT_EQ(OwnerOf(task_dir), UidOf(ana));
  {
    RunResult cat = RunToEnd({"/bin/cat", file}, In(kStartTimeout));
    EXPECT_EQ(cat.output, "from ana\n");
  }

  // carol has no account on w1: her task fails, saying so, and runs nothing.
  RunResult third = c.Drover(
      Submit({"--user", "carol", "--retries", "0", "--wait"}, {"sh", "-c", "touch " + file}));
  EXPECT_EQ(third.status, 1) << third.output;
  const std::string t = std::to_string(JobOf(third)) + ".0";
  nlohmann::json carol = c.Get("/api/v1/tasks/" + t);
  EXPECT_EQ(carol["state"], "failed") << carol.dump(2);
  EXPECT_EQ(carol.value("reason", ""),
            "user carol has no account on worker w1 (map it with --user-map carol=ACCOUNT, or "
            "run every task as one account with --user)")
      << carol.dump(2);
  EXPECT_NE(third.output.find("user carol has no account on worker w1"), std::string::npos)
      << third.output;
}

// A per-user worker whose --workdir lies under a directory other accounts
// cannot pass (mkdtemp's 0700 test directory, as a private /tmp or /root
// would be) refuses to start, naming it and its mode, and --check says the
// same; a work directory of its own that lacks the bit is given it.
TEST(RunAsTest, APerUserWorkerRefusesAWorkdirItsTasksCannotReach) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root: per-user mode is a root worker's";
  Cluster c;
  c.StartServer();
  struct stat st {};
  ASSERT_EQ(stat(c.dir().c_str(), &st), 0);
  ASSERT_EQ(st.st_mode & 07777, 0700u) << "mkdtemp makes it private";
  const std::string workdir = c.dir() + "/w1";
  const std::vector<std::string> flags = {
      c.binary(),  "worker",       "--access",   c.access_file(), "--name",        "w1",
      "--workdir", workdir,        "--isolation", "none",          "--run-as-root", "--user-map",
      "ana=nobody"};
  const std::string refusal = "tasks run as other accounts cannot reach --workdir " + workdir +
                              ": " + c.dir() + " (mode 0700, owner root) does not let them pass";
  std::vector<std::string> check = flags;
  check.push_back("--check");
  RunResult checked = RunToEnd(check, In(kStartTimeout));
  EXPECT_EQ(checked.status, 1) << checked.output;
  EXPECT_NE(checked.output.find(refusal), std::string::npos) << checked.output;
  Process worker(flags);
  std::optional<int> exited = worker.Wait(In(kStartTimeout));
  ASSERT_TRUE(exited.has_value()) << worker.output();
  EXPECT_NE(*exited, 0) << worker.output();
  EXPECT_NE(worker.output().find(refusal), std::string::npos) << worker.output();

  // Passable above, a private work directory of its own: given the bit.
  ASSERT_EQ(chmod(c.dir().c_str(), 0711), 0);
  ASSERT_EQ(mkdir(workdir.c_str(), 0700), 0);
  ASSERT_EQ(chmod(workdir.c_str(), 0700), 0);
  RunResult fine = RunToEnd(check, In(kStartTimeout));
  EXPECT_EQ(fine.status, 0) << fine.output;
  EXPECT_NE(fine.output.find("at start it would give " + workdir +
                             " the search bit for other accounts (mode 0700 -> 0711)"),
            std::string::npos)
      << fine.output;
  Process started(flags);
  EXPECT_TRUE(started.WaitForLine("gave " + workdir + " the search bit for other accounts",
                                  In(kStartTimeout)))
      << started.output();
  EXPECT_TRUE(started.WaitForLine("attached as worker", In(kStartTimeout))) << started.output();
  ASSERT_EQ(stat(workdir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0711u);
}

}  // namespace
}  // namespace drover::testing
