#include "worker/exec/spawn.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "worker/exec/exec_test_util.h"

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
  EXPECT_TRUE(p->pidfd.valid());
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

// A parked child: `sh -c 'echo ran > MARK'` run from `dir`.
struct ParkedShell {
  explicit ParkedShell(const std::string& dir)
      : mark(dir + "/mark"), argv({"sh", "-c", "echo ran > " + mark}), cwd(dir) {
    plan.path = "/bin/sh";
    plan.argv = argv.ptrs.data();
    plan.envp = envp;
    plan.cwd = cwd.c_str();
    plan.display_name = "sh";
  }
  std::string mark;
  Argv argv;
  std::string cwd;
  char* envp[1] = {nullptr};
  SpawnPlan plan;
};

// Waits (30 s at most) until the parked child has done its setup.
bool WaitParked(const ParkedProcess& p) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!p.parked() && !p.Dead()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    sched_yield();
  }
  return p.parked();
}

// Waits (30 s at most) for a process's end through its pidfd.
bool WaitEnded(int pidfd) {
  pollfd p{pidfd, POLLIN, 0};
  return poll(&p, 1, 30000) == 1;
}

// Made ahead, the child has done its setup but runs nothing until its
// release; then it runs the program, and the plan's memory was not needed
// after Park.
TEST(ParkedProcessTest, RunsTheProgramOnlyOnceReleased) {
  if (!ParkSupported()) GTEST_SKIP() << "no parked starts on this architecture";
  TempDir dir;
  auto spawner = Spawner::Create();
  ASSERT_TRUE(spawner.ok());
  auto shell = std::make_unique<ParkedShell>(dir.path());
  const std::string mark = shell->mark;
  auto parked = (*spawner)->Park(shell->plan);
  ASSERT_TRUE(parked.ok()) << parked.status().ToString();
  shell.reset();
  ParkedProcess& p = **parked;
  ASSERT_TRUE(WaitParked(p));
  // Its setup is done (it is in its working directory), its program not run.
  EXPECT_EQ(std::filesystem::read_symlink("/proc/" + std::to_string(p.pid()) + "/cwd"),
            dir.path());
  EXPECT_FALSE(std::filesystem::exists(mark));
  EXPECT_FALSE(p.Dead());
  EXPECT_EQ(testing::ReadFile("/proc/" + std::to_string(p.pid()) + "/comm"), "drover:queued\n");

  ASSERT_TRUE(p.Release().ok());
  ASSERT_TRUE(WaitEnded(p.pidfd()));
  int status = -1;
  ASSERT_EQ(waitpid(p.pid(), &status, 0), p.pid());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_TRUE(p.Failure().ok()) << p.Failure().ToString();
  EXPECT_EQ(testing::ReadFile(mark), "ran\n");
}

// Destroyed unreleased (the task was canceled while queued): the child is
// killed and reaped, and its program never ran.
TEST(ParkedProcessTest, DestroyedUnreleasedItIsEndedWithoutRunning) {
  if (!ParkSupported()) GTEST_SKIP() << "no parked starts on this architecture";
  TempDir dir;
  auto spawner = Spawner::Create();
  ASSERT_TRUE(spawner.ok());
  ParkedShell shell(dir.path());
  auto parked = (*spawner)->Park(shell.plan);
  ASSERT_TRUE(parked.ok()) << parked.status().ToString();
  const pid_t pid = (*parked)->pid();
  ASSERT_TRUE(WaitParked(**parked));
  parked->reset();
  EXPECT_EQ(kill(pid, 0), -1);  // reaped: no such process
  EXPECT_EQ(errno, ESRCH);
  EXPECT_FALSE(std::filesystem::exists(shell.mark));
}

// The worker dies with the child parked: its lifeline ends, and it exits
// 127 without running the program (no orphan waits forever).
TEST(ParkedProcessTest, ExitsWithoutRunningWhenItsWorkerIsGone) {
  if (!ParkSupported()) GTEST_SKIP() << "no parked starts on this architecture";
  TempDir dir;
  ParkedShell shell(dir.path());
  // The orphan comes to this process, which can then wait for it.
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  int report[2];
  ASSERT_EQ(pipe(report), 0);
  const pid_t worker = fork();
  ASSERT_GE(worker, 0);
  if (worker == 0) {
    // The "worker": parks the child, says its pid once it waits, and dies
    // without destroying anything.
    auto spawner = Spawner::Create();
    if (!spawner.ok()) _exit(2);
    auto parked = (*spawner)->Park(shell.plan);
    if (!parked.ok() || !WaitParked(**parked)) _exit(3);
    const pid_t pid = (*parked)->pid();
    if (write(report[1], &pid, sizeof pid) != sizeof pid) _exit(4);
    _exit(0);
  }
  close(report[1]);
  pid_t child = -1;
  ASSERT_EQ(read(report[0], &child, sizeof child), static_cast<ssize_t>(sizeof child));
  close(report[0]);
  int status = -1;
  ASSERT_EQ(waitpid(worker, &status, 0), worker);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, child, 0));
  ASSERT_GE(pidfd, 0);
  const bool ended = WaitEnded(pidfd);
  EXPECT_TRUE(ended) << "the parked child outlived its worker";
  if (!ended) syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0);
  close(pidfd);
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 127) << status;
  EXPECT_FALSE(std::filesystem::exists(shell.mark));
  prctl(PR_SET_CHILD_SUBREAPER, 0);
}

// A setup step that fails shows as the child's death before any release;
// an execve that fails after it is named as Spawn names it.
TEST(ParkedProcessTest, FailuresAreNamedAsSpawnNamesThem) {
  if (!ParkSupported()) GTEST_SKIP() << "no parked starts on this architecture";
  TempDir dir;
  auto spawner = Spawner::Create();
  ASSERT_TRUE(spawner.ok());
  ParkedShell shell(dir.path());
  shell.plan.cwd = "/nonexistent-drover-dir";
  auto parked = (*spawner)->Park(shell.plan);
  ASSERT_TRUE(parked.ok()) << parked.status().ToString();
  ASSERT_TRUE(WaitEnded((*parked)->pidfd()));
  EXPECT_TRUE((*parked)->Dead());
  EXPECT_EQ((*parked)->Failure().message(), "working directory missing: /nonexistent-drover-dir");
  parked->reset();  // reaps it

  std::string script = dir.path() + "/run.sh";
  close(open(script.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
  shell.plan.cwd = dir.path().c_str();
  shell.plan.path = script.c_str();
  shell.plan.display_name = "./run.sh";
  parked = (*spawner)->Park(shell.plan);
  ASSERT_TRUE(parked.ok()) << parked.status().ToString();
  ASSERT_TRUE(WaitParked(**parked));
  ASSERT_TRUE((*parked)->Release().ok());
  ASSERT_TRUE(WaitEnded((*parked)->pidfd()));
  int status = -1;
  ASSERT_EQ(waitpid((*parked)->pid(), &status, 0), (*parked)->pid());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 127) << status;
  EXPECT_EQ((*parked)->Failure().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ((*parked)->Failure().message(), "permission denied: ./run.sh");
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
