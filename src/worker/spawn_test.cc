#include "worker/spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "worker/exec_test_util.h"

namespace drover::worker {
namespace {

using testing::TempDir;

struct Argv {
  explicit Argv(std::vector<std::string> a) : args(std::move(a)) {
    for (auto& s : args) ptrs.push_back(s.data());
    ptrs.push_back(nullptr);
  }
  std::vector<std::string> args;
  std::vector<char*> ptrs;
};

int Reap(const SpawnedProcess& p) {
  int status = -1;
  EXPECT_EQ(waitpid(p.pid, &status, 0), p.pid);
  close(p.pidfd);
  return status;
}

// The child reads the wall clock as its first step: after the parent
// called Spawn, before Spawn returned, and before the new program ran.
TEST(SpawnerTest, ReportsWhenTheChildProcessCameToBe) {
  TempDir dir;
  auto spawner = Spawner::Create();
  ASSERT_TRUE(spawner.ok());
  std::string out = dir.path() + "/out";
  int fd = open(out.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  // The program prints its own wall clock in microseconds.
  Argv argv({"sh", "-c", "date +%s%6N"});
  char* envp[] = {nullptr};
  SpawnPlan plan;
  plan.path = "/bin/sh";
  plan.argv = argv.ptrs.data();
  plan.envp = envp;
  plan.stdout_fd = fd;
  plan.display_name = "sh";
  const auto now = [] {
    return std::chrono::time_point_cast<Duration>(std::chrono::system_clock::now());
  };
  const Time before = now();
  auto p = (*spawner)->Spawn(plan);
  const Time after = now();
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  close(fd);
  ASSERT_EQ(Reap(*p), 0);
  EXPECT_LE(before, p->spawned_at);
  EXPECT_LE(p->spawned_at, after);
  const int64_t program_us = std::stoll(testing::ReadFile(out));
  EXPECT_LE(ToMicros(p->spawned_at), program_us);
}

TEST(SpawnerTest, StartsInItsOwnSessionWithStdoutRedirected) {
  TempDir dir;
  auto spawner = Spawner::Create();
  ASSERT_TRUE(spawner.ok());
  std::string out = dir.path() + "/out";
  int fd = open(out.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  // $$ is the shell's pid; its session id must be the same (setsid).
  Argv argv({"sh", "-c", "echo $$ $(cut -d' ' -f6 /proc/$$/stat) $PWD $FOO"});
  char env0[] = "FOO=bar";
  char* envp[] = {env0, nullptr};
  SpawnPlan plan;
  plan.path = "/bin/sh";
  plan.argv = argv.ptrs.data();
  plan.envp = envp;
  plan.cwd = dir.path().c_str();
  plan.stdout_fd = fd;
  plan.display_name = "sh";
  auto p = (*spawner)->Spawn(plan);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  close(fd);
  EXPECT_GE(p->pidfd, 0);
  int status = Reap(*p);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  std::string pid = std::to_string(p->pid);
  EXPECT_EQ(testing::ReadFile(out), pid + " " + pid + " " + dir.path() + " bar\n");
}

void IgnoreSignal(int) {}

// The child resets only the signals the parent catches or ignores (read
// from /proc/self/status): the task must start with every disposition at
// its default, as from a shell, whatever the worker installed.
TEST(SpawnerTest, TaskStartsWithDefaultSignalDispositions) {
  TempDir dir;
  auto spawner = Spawner::Create();
  ASSERT_TRUE(spawner.ok());
  struct sigaction ignore {}, catcher {}, old_pipe {}, old_usr1 {}, old_hup {};
  ignore.sa_handler = SIG_IGN;
  catcher.sa_handler = IgnoreSignal;
  ASSERT_EQ(sigaction(SIGPIPE, &ignore, &old_pipe), 0);
  ASSERT_EQ(sigaction(SIGUSR1, &catcher, &old_usr1), 0);
  ASSERT_EQ(sigaction(SIGHUP, &ignore, &old_hup), 0);
  // glibc's reserved signal 33 ignored, as an ancestor may leave it (glibc's
  // sigaction refuses it: the raw system call).
  struct RawSigaction {
    void (*handler)(int);
    unsigned long flags;
    void (*restorer)();
    uint64_t mask;
  } raw_ignore{}, old_33{};
  raw_ignore.handler = SIG_IGN;
  ASSERT_EQ(syscall(SYS_rt_sigaction, 33, &raw_ignore, &old_33, sizeof(uint64_t)), 0);
  // Twice: the first Spawn reads the worker's dispositions, the second
  // resets them from what the first learned.
  std::string texts[2];
  for (std::string& text : texts) {
    std::string out = dir.path() + "/status";
    int fd = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    Argv argv({"cat", "/proc/self/status"});
    char* envp[] = {nullptr};
    SpawnPlan plan;
    plan.path = "/bin/cat";
    plan.argv = argv.ptrs.data();
    plan.envp = envp;
    plan.stdout_fd = fd;
    plan.display_name = "cat";
    auto p = (*spawner)->Spawn(plan);
    close(fd);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    int status = Reap(*p);
    ASSERT_TRUE(WIFEXITED(status));
    text = testing::ReadFile(out);
  }
  sigaction(SIGPIPE, &old_pipe, nullptr);
  sigaction(SIGUSR1, &old_usr1, nullptr);
  sigaction(SIGHUP, &old_hup, nullptr);
  syscall(SYS_rt_sigaction, 33, &old_33, nullptr, sizeof(uint64_t));
  for (const std::string& text : texts) {
    EXPECT_NE(text.find("\nSigIgn:\t0000000000000000\n"), std::string::npos) << text;
    EXPECT_NE(text.find("\nSigCgt:\t0000000000000000\n"), std::string::npos) << text;
    EXPECT_NE(text.find("\nSigBlk:\t0000000000000000\n"), std::string::npos) << text;
  }
}

TEST(SpawnerTest, ChildSideFailuresComeBackToTheParent) {
  TempDir dir;
  auto spawner = Spawner::Create();
  ASSERT_TRUE(spawner.ok());
  Argv argv({"x"});
  char* envp[] = {nullptr};

  SpawnPlan plan;
  plan.argv = argv.ptrs.data();
  plan.envp = envp;
  plan.path = "/bin/true";
  plan.cwd = "/nonexistent-drover-dir";
  plan.display_name = "true";
  auto p = (*spawner)->Spawn(plan);
  EXPECT_EQ(p.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(p.status().message(), "working directory missing: /nonexistent-drover-dir");

  // Not executable: execve fails with EACCES in the child.
  std::string script = dir.path() + "/run.sh";
  int fd = open(script.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  close(fd);
  plan.cwd = dir.path().c_str();
  plan.path = script.c_str();
  plan.display_name = "./run.sh";
  p = (*spawner)->Spawn(plan);
  EXPECT_EQ(p.status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(p.status().message(), "permission denied: ./run.sh");

  plan.path = "/nonexistent-drover-bin/trian.py";
  plan.display_name = "trian.py";
  p = (*spawner)->Spawn(plan);
  EXPECT_EQ(p.status().message(), "command not found: trian.py");
  // No child was left behind: all were reaped by Spawn.
  EXPECT_EQ(waitpid(-1, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

TEST(ResolveCommandTest, SearchesPathAndNamesTheProblem) {
  TempDir dir;
  std::string script = dir.path() + "/run.sh";
  int fd = open(script.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  close(fd);
  auto r = ResolveCommand("sh", "/nonexistent:/usr/bin:/bin", "/");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, "/usr/bin/sh");
  EXPECT_EQ(ResolveCommand("trian.py", "/usr/bin:/bin", "/").status().message(),
            "command not found: trian.py");
  EXPECT_EQ(ResolveCommand("./run.sh", "/usr/bin", dir.path()).status().message(),
            "permission denied: ./run.sh");
  EXPECT_EQ(ResolveCommand("run.sh", dir.path(), "/").status().message(),
            "permission denied: run.sh");
  chmod(script.c_str(), 0755);
  r = ResolveCommand("./run.sh", "/usr/bin", dir.path());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, dir.path() + "/./run.sh");
}

}  // namespace
}  // namespace drover::worker
