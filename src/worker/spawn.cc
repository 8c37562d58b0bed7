#include "worker/spawn.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace drover::worker {
namespace {

constexpr size_t kStackSize = 256 * 1024;

// Where the child failed; left with errno in ChildArgs::error.
enum class Step : int {
  kSession = 1,
  kCgroup,
  kRlimit,
  kAffinity,
  kStdio,
  kGroups,
  kGid,
  kUid,
  kChdir,
  kExec,
};

struct ChildError {
  int step;
  int err;
};

// The kernel's struct sigaction for rt_sigaction(2) on x86-64 and arm64.
struct KernelSigaction {
  void (*handler)(int);
  unsigned long flags;
  void (*restorer)();
  uint64_t mask;
};

struct ChildArgs {
  const SpawnPlan* plan;
  // Where a failing child leaves (step, errno) before it exits: the parent
  // shares this memory and resumes only once the child has exec'd or
  // exited (CLONE_VM | CLONE_VFORK), so no pipe is needed (posix_spawn
  // does the same). Stays {0, 0} when execve succeeds.
  ChildError error;
  // Signals whose disposition is not the default in the parent (caught or
  // ignored); only these are reset in the child, a handful instead of 64
  // system calls (each costs microseconds on a VM, all before the exec).
  const int* reset;
  int reset_count;
  // Written by the child (it shares this memory) as its first step.
  timespec spawned_at;
};

// Reads the caught and ignored signal sets from /proc/self/status (one
// small read instead of 64 sigaction queries) into reset[]/reset_count.
// Returns false if that file cannot be read or parsed; the caller then
// resets every signal.
bool ReadNonDefaultSignals(int* reset, int& reset_count) {
  int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[4096];
  size_t len = 0;
  ssize_t n;
  while (len < sizeof buf - 1 && (n = read(fd, buf + len, sizeof buf - 1 - len)) != 0) {
    if (n < 0) {
      if (errno == EINTR) continue;
      close(fd);
      return false;
    }
    len += static_cast<size_t>(n);
  }
  close(fd);
  buf[len] = '\0';
  unsigned long long masks[2];
  const char* names[2] = {"\nSigIgn:", "\nSigCgt:"};
  for (int i = 0; i < 2; ++i) {
    const char* at = strstr(buf, names[i]);
    if (at == nullptr) return false;
    char* end = nullptr;
    masks[i] = strtoull(at + strlen(names[i]), &end, 16);
    if (end == at + strlen(names[i])) return false;
  }
  const unsigned long long non_default = masks[0] | masks[1];
  reset_count = 0;
  for (int sig = 1; sig < NSIG && sig <= 64; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    if (non_default & (1ULL << (sig - 1))) reset[reset_count++] = sig;
  }
  return true;
}

void ResetAllSignals(int* reset, int& reset_count) {
  reset_count = 0;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    reset[reset_count++] = sig;
  }
}

[[noreturn]] void Fail(ChildArgs* args, Step step) {
  args->error = ChildError{static_cast<int>(step), errno};
  _exit(127);
}

// Runs in the child, on the Spawner's stack, sharing the parent's memory:
// only async-signal-safe calls, no allocation, no locks, and the raw
// set*id system calls (glibc's wrappers would try to broadcast the change
// to the parent's threads).
int ChildMain(void* arg) {
  auto* args = static_cast<ChildArgs*>(arg);
  // First of all: the moment the process exists (one vDSO call, async-
  // signal-safe), for the handoff figure (SpawnedProcess::spawned_at).
  clock_gettime(CLOCK_REALTIME, &args->spawned_at);
  const SpawnPlan& p = *args->plan;

  // Handlers installed by the worker must not run in the child (they would
  // run on the parent's memory once signals are unblocked before execve);
  // ignored signals are reset too, so a task starts with the dispositions a
  // shell would give it. The parent listed the signals that need it.
  // The raw system call: glibc's sigaction refuses its reserved signals (32
  // and 33), which an ancestor may have left ignored; the child has its own
  // dispositions (no CLONE_SIGHAND), so resetting them touches nothing of
  // the worker's.
  KernelSigaction dfl{};
  dfl.handler = SIG_DFL;
  for (int i = 0; i < args->reset_count; ++i) {
    syscall(SYS_rt_sigaction, args->reset[i], &dfl, nullptr, sizeof(uint64_t));
  }

  if (setsid() < 0) Fail(args, Step::kSession);
  for (int fd : p.join_fds) {
    if (write(fd, "0", 1) != 1) Fail(args, Step::kCgroup);
  }
  for (const ChildRlimit& r : p.rlimits) {
    struct rlimit lim {
      r.soft, r.hard
    };
    if (setrlimit(r.resource, &lim) != 0) Fail(args, Step::kRlimit);
  }
  if (p.cpus && sched_setaffinity(0, sizeof(cpu_set_t), &*p.cpus) != 0) {
    Fail(args, Step::kAffinity);
  }
  const int targets[3] = {p.stdin_fd, p.stdout_fd, p.stderr_fd};
  for (int i = 0; i < 3; ++i) {
    if (targets[i] < 0) continue;
    if (targets[i] == i) {
      // dup2 onto itself would keep O_CLOEXEC; clear it instead.
      if (fcntl(i, F_SETFD, 0) != 0) Fail(args, Step::kStdio);
    } else if (dup2(targets[i], i) < 0) {
      Fail(args, Step::kStdio);
    }
  }
  if (p.user) {
    if (syscall(SYS_setgroups, p.user->groups.size(), p.user->groups.data()) != 0) {
      Fail(args, Step::kGroups);
    }
    if (syscall(SYS_setresgid, p.user->gid, p.user->gid, p.user->gid) != 0) {
      Fail(args, Step::kGid);
    }
    if (syscall(SYS_setresuid, p.user->uid, p.user->uid, p.user->uid) != 0) {
      Fail(args, Step::kUid);
    }
  }
  if (p.cwd != nullptr && chdir(p.cwd) != 0) Fail(args, Step::kChdir);
  // Nothing of the worker's (sockets, epoll, other tasks' pipes) may leak
  // into the task, even an fd someone opened without O_CLOEXEC.
  syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  execve(p.path, p.argv, p.envp);
  Fail(args, Step::kExec);
}

std::string Errno(int err) { return strerror(err); }

Status DescribeFailure(const SpawnPlan& plan, const ChildError& e) {
  const std::string& name = plan.display_name;
  const int err = e.err;
  switch (static_cast<Step>(e.step)) {
    case Step::kExec:
      if (err == ENOENT) return NotFound("command not found: " + name);
      if (err == EACCES || err == EPERM) return PermissionDenied("permission denied: " + name);
      if (err == ENOEXEC) return FailedPrecondition("exec format error: " + name);
      return FailedPrecondition("cannot execute " + name + ": " + Errno(err));
    case Step::kChdir: {
      std::string dir = plan.cwd ? plan.cwd : "";
      if (err == ENOENT || err == ENOTDIR) return NotFound("working directory missing: " + dir);
      if (err == EACCES) return PermissionDenied("permission denied: working directory " + dir);
      return FailedPrecondition("cannot enter working directory " + dir + ": " + Errno(err));
    }
    case Step::kSession:
      return Internal("setsid failed: " + Errno(err));
    case Step::kCgroup:
      return FailedPrecondition("cannot join the task's cgroup: " + Errno(err));
    case Step::kRlimit:
      return FailedPrecondition("cannot set resource limits: " + Errno(err));
    case Step::kAffinity:
      return FailedPrecondition("cannot pin to the assigned cores: " + Errno(err));
    case Step::kStdio:
      return Internal("cannot set up stdin/stdout/stderr: " + Errno(err));
    case Step::kGroups:
    case Step::kGid:
    case Step::kUid:
      return PermissionDenied("cannot switch to the task user: " + Errno(err));
  }
  return Internal("child failed at unknown step " + std::to_string(e.step));
}

}  // namespace

Result<std::unique_ptr<Spawner>> Spawner::Create() {
  // One guard page below the stack turns an overflow into a fault instead of
  // silent corruption of the parent's memory.
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* mem = mmap(nullptr, kStackSize + page, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (mem == MAP_FAILED) return Internal("cannot map the spawn stack: " + Errno(errno));
  mprotect(mem, page, PROT_NONE);
  return std::unique_ptr<Spawner>(new Spawner(mem, kStackSize + page));
}

Spawner::~Spawner() { munmap(stack_, stack_size_); }

Result<SpawnedProcess> Spawner::Spawn(const SpawnPlan& plan) {
  // The worker's dispositions are read once (header: they are set at start
  // and not changed after): the read cost an open, a read and a close of
  // /proc/self/status, ~25 us on a VM, before every task.
  if (!signals_read_) {
    if (!ReadNonDefaultSignals(reset_, reset_count_)) ResetAllSignals(reset_, reset_count_);
    signals_read_ = true;
  }
  ChildArgs args;
  args.plan = &plan;
  args.error = ChildError{0, 0};
  args.reset = reset_;
  args.reset_count = reset_count_;
  args.spawned_at = timespec{0, 0};

  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int pidfd = -1;
  char* top = static_cast<char*>(stack_) + stack_size_;
  pid_t pid = clone(ChildMain, top, CLONE_VM | CLONE_VFORK | CLONE_PIDFD | SIGCHLD, &args, &pidfd);
  const int clone_errno = errno;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);

  if (pid < 0) return Unavailable("cannot start a process: " + Errno(clone_errno));
  // CLONE_VFORK: the child has exec'd or exited by now; a failed step left
  // its error in args (a child killed before its execve reads as started,
  // and its pidfd then reports the signal).
  if (args.error.step != 0) {
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    close(pidfd);
    return DescribeFailure(plan, args.error);
  }
  // The child wrote spawned_at before the parent resumed (CLONE_VFORK).
  Time spawned_at = TimeFromMicros(static_cast<int64_t>(args.spawned_at.tv_sec) * 1000000 +
                                   args.spawned_at.tv_nsec / 1000);
  if (args.spawned_at.tv_sec == 0) {
    spawned_at = std::chrono::time_point_cast<Duration>(std::chrono::system_clock::now());
  }
  return SpawnedProcess{pid, pidfd, spawned_at};
}

int CheckExecutable(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return ENOENT;
  if (!S_ISREG(st.st_mode)) return EACCES;
  return access(path.c_str(), X_OK) == 0 ? 0 : EACCES;
}

Result<std::string> ResolveCommand(const std::string& command, const std::string& path_env,
                                   const std::string& cwd) {
  if (command.empty()) return InvalidArgument("empty command");
  const auto check = CheckExecutable;
  if (command.find('/') != std::string::npos) {
    std::string path = command[0] == '/' || cwd.empty() ? command : cwd + "/" + command;
    int err = check(path);
    if (err == ENOENT) return NotFound("command not found: " + command);
    if (err == EACCES) return PermissionDenied("permission denied: " + command);
    return path;
  }
  bool denied = false;
  size_t start = 0;
  while (start <= path_env.size()) {
    size_t end = path_env.find(':', start);
    if (end == std::string::npos) end = path_env.size();
    std::string dir = path_env.substr(start, end - start);
    if (dir.empty()) dir = ".";
    std::string path = dir + "/" + command;
    int err = check(path);
    if (err == 0) return path;
    if (err == EACCES) denied = true;
    start = end + 1;
  }
  if (denied) return PermissionDenied("permission denied: " + command);
  return NotFound("command not found: " + command);
}

}  // namespace drover::worker
