#include "worker/exec/spawn.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

namespace drover::worker {
namespace {

constexpr size_t kStackSize = 256 * 1024;
// A parked child's own stack: its code makes system calls and little else.
constexpr size_t kParkedStackSize = 64 * 1024;
// What ps and top show for a parked child (at most 15 characters).
constexpr char kParkedName[] = "drover:queued";

// System calls that touch nothing but registers: no errno (it lives in the
// calling thread's TLS, which a parked child shares with a running parent
// thread). They return -errno on failure.
#if defined(__x86_64__)
constexpr bool kRawSyscalls = true;
long Sys(long n, long a1 = 0, long a2 = 0, long a3 = 0, long a4 = 0) {
  long ret;
  register long r10 asm("r10") = a4;
  asm volatile("syscall"
               : "=a"(ret)
               : "a"(n), "D"(a1), "S"(a2), "d"(a3), "r"(r10)
               : "rcx", "r11", "memory");
  return ret;
}
#elif defined(__aarch64__)
constexpr bool kRawSyscalls = true;
long Sys(long n, long a1 = 0, long a2 = 0, long a3 = 0, long a4 = 0) {
  register long x8 asm("x8") = n;
  register long x0 asm("x0") = a1;
  register long x1 asm("x1") = a2;
  register long x2 asm("x2") = a3;
  register long x3 asm("x3") = a4;
  asm volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3) : "memory", "cc");
  return x0;
}
#else
// Elsewhere only Spawn's vfork children use these (the parent is suspended,
// so errno may be written); Park is refused.
constexpr bool kRawSyscalls = false;
long Sys(long n, long a1 = 0, long a2 = 0, long a3 = 0, long a4 = 0) {
  long r = syscall(n, a1, a2, a3, a4);
  return r < 0 ? -errno : r;
}
#endif

// Where the child failed; left with errno in ChildArgs::error.
enum class Step : int {
  kSession = 1,
  kCgroup,
  kNetwork,
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
  const SpawnPlan* plan = nullptr;
  // Where a failing child leaves (step, errno) before it exits: the parent
  // shares this memory and resumes only once the child has exec'd or
  // exited (CLONE_VM | CLONE_VFORK), so no pipe is needed (posix_spawn
  // does the same). Stays {0, 0} when execve succeeds.
  ChildError error{0, 0};
  // Signals whose disposition is not the default in the parent (caught or
  // ignored); only these are reset in the child, a handful instead of 64
  // system calls (each costs microseconds on a VM, all before the exec).
  const int* reset = nullptr;
  int reset_count = 0;
  // Written by the child (it shares this memory) as its first step.
  timespec spawned_at{0, 0};
  // Parked children only: the gate, an eventfd the parent writes to
  // release the child (-1: exec at once); the lifeline, the read end of a
  // pipe whose write end only the parent holds (its end of file: the
  // worker is gone); and `parked`, set once the child waits.
  int gate_fd = -1;
  int lifeline_fd = -1;
  std::atomic<int> parked{0};
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

[[noreturn]] void Exit(int code) {
  for (;;) Sys(SYS_exit_group, code);
}

// `result` is a raw system call's return value (-errno).
[[noreturn]] void Fail(ChildArgs* args, Step step, long result) {
  args->error = ChildError{static_cast<int>(step), static_cast<int>(-result)};
  Exit(127);
}

// Runs `call` until it is not interrupted; fails the child at `step` if it
// returns an error.
#define DROVER_CHILD_STEP(args, step, call) \
  do {                                      \
    long r_;                                \
    do {                                    \
      r_ = (call);                          \
    } while (r_ == -EINTR);                 \
    if (r_ < 0) Fail(args, step, r_);       \
  } while (0)

// Writes `len` bytes of `text` to the file `path` in one write (the way
// /proc/self/uid_map wants it); a failure fails the child at kNetwork.
void WriteProcFile(ChildArgs* args, const char* path, const char* text, long len) {
  long fd = Sys(SYS_openat, AT_FDCWD, reinterpret_cast<long>(path), O_WRONLY | O_CLOEXEC);
  if (fd < 0) Fail(args, Step::kNetwork, fd);
  long n = Sys(SYS_write, fd, reinterpret_cast<long>(text), len);
  Sys(SYS_close, fd);
  if (n != len) Fail(args, Step::kNetwork, n < 0 ? n : -EIO);
}

// Runs in the child, on a stack of its own, sharing the parent's memory:
// raw system calls only (Sys: no errno, no TLS), no allocation, no locks.
int ChildMain(void* arg) {
  auto* args = static_cast<ChildArgs*>(arg);
  // First of all: the moment the process exists (one vDSO call, async-
  // signal-safe), for the handoff figure (SpawnedProcess::spawned_at).
  if (args->gate_fd < 0) {
    clock_gettime(CLOCK_REALTIME, &args->spawned_at);  // reads the system clock: the child
  }
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
    Sys(SYS_rt_sigaction, args->reset[i], reinterpret_cast<long>(&dfl), 0, sizeof(uint64_t));
  }

  DROVER_CHILD_STEP(args, Step::kSession, Sys(SYS_setsid));
  for (int fd : p.join_fds) {
    long n = Sys(SYS_write, fd, reinterpret_cast<long>("0"), 1);
    if (n != 1) Fail(args, Step::kCgroup, n < 0 ? n : -EIO);
  }
  if (p.private_network) {
    if (!p.user_ns_uid_map.empty()) {
      // Not root: a user namespace first, in which the child may make the
      // network namespace and configure it; it maps the worker's own ids
      // to themselves, which an unprivileged process may write for itself
      // (setgroups denied first, as the kernel asks of an unprivileged
      // gid_map).
      DROVER_CHILD_STEP(args, Step::kNetwork, Sys(SYS_unshare, CLONE_NEWUSER));
      WriteProcFile(args, "/proc/self/setgroups", "deny", 4);
      WriteProcFile(args, "/proc/self/uid_map", p.user_ns_uid_map.data(),
                    static_cast<long>(p.user_ns_uid_map.size()));
      WriteProcFile(args, "/proc/self/gid_map", p.user_ns_gid_map.data(),
                    static_cast<long>(p.user_ns_gid_map.size()));
    }
    // A new namespace has only loopback, and that down: up it goes, so the
    // task's own services still reach each other on 127.0.0.1.
    DROVER_CHILD_STEP(args, Step::kNetwork, Sys(SYS_unshare, CLONE_NEWNET));
    long sock = Sys(SYS_socket, AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (sock < 0) Fail(args, Step::kNetwork, sock);
    struct ifreq ifr {};
    ifr.ifr_name[0] = 'l';
    ifr.ifr_name[1] = 'o';
    DROVER_CHILD_STEP(args, Step::kNetwork,
                      Sys(SYS_ioctl, sock, SIOCGIFFLAGS, reinterpret_cast<long>(&ifr)));
    ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP | IFF_RUNNING);
    DROVER_CHILD_STEP(args, Step::kNetwork,
                      Sys(SYS_ioctl, sock, SIOCSIFFLAGS, reinterpret_cast<long>(&ifr)));
    Sys(SYS_close, sock);
  }
  for (const ChildRlimit& r : p.rlimits) {
    struct rlimit lim {
      r.soft, r.hard
    };
    DROVER_CHILD_STEP(args, Step::kRlimit,
                      Sys(SYS_prlimit64, 0, r.resource, reinterpret_cast<long>(&lim), 0));
  }
  if (p.cpus) {
    DROVER_CHILD_STEP(args, Step::kAffinity,
                      Sys(SYS_sched_setaffinity, 0, sizeof(cpu_set_t),
                          reinterpret_cast<long>(&*p.cpus)));
  }
  const int targets[3] = {p.stdin_fd, p.stdout_fd, p.stderr_fd};
  for (int i = 0; i < 3; ++i) {
    if (targets[i] < 0) continue;
    if (targets[i] == i) {
      // dup3 onto itself is an error; clear O_CLOEXEC instead.
      DROVER_CHILD_STEP(args, Step::kStdio, Sys(SYS_fcntl, i, F_SETFD, 0));
    } else {
      DROVER_CHILD_STEP(args, Step::kStdio, Sys(SYS_dup3, targets[i], i, 0));
    }
  }
  if (p.user) {
    DROVER_CHILD_STEP(args, Step::kGroups,
                      Sys(SYS_setgroups, static_cast<long>(p.user->groups.size()),
                          reinterpret_cast<long>(p.user->groups.data())));
    DROVER_CHILD_STEP(args, Step::kGid,
                      Sys(SYS_setresgid, p.user->gid, p.user->gid, p.user->gid));
    DROVER_CHILD_STEP(args, Step::kUid,
                      Sys(SYS_setresuid, p.user->uid, p.user->uid, p.user->uid));
  }
  if (p.cwd != nullptr) {
    DROVER_CHILD_STEP(args, Step::kChdir, Sys(SYS_chdir, reinterpret_cast<long>(p.cwd)));
  }
  if (args->gate_fd >= 0) {
    // Named for ps and top while it waits (its command line is still the
    // worker's: it shares the worker's memory until its execve).
    Sys(SYS_prctl, PR_SET_NAME, reinterpret_cast<long>(kParkedName));
    // Parked: hold nothing of the worker's while waiting (its sockets would
    // not close, other tasks' pipes would not end), only 0-2, the gate and
    // the lifeline (the parent keeps both above 2).
    const int low = args->gate_fd < args->lifeline_fd ? args->gate_fd : args->lifeline_fd;
    const int high = args->gate_fd < args->lifeline_fd ? args->lifeline_fd : args->gate_fd;
    if (low > 3) Sys(SYS_close_range, 3, low - 1, 0);
    if (high > low + 1) Sys(SYS_close_range, low + 1, high - 1, 0);
    Sys(SYS_close_range, high + 1, ~0U, 0);
    args->parked.store(1, std::memory_order_release);
    // Wakes a parent waiting for this (ParkedProcess::WaitParked).
    Sys(SYS_futex, reinterpret_cast<long>(&args->parked), FUTEX_WAKE, 1, 0);
    // An eventfd, not a pipe: a pipe's write wakes its reader on the
    // writer's CPU (a "sync" wakeup, for a writer about to sleep), where it
    // waits for the worker's own work after the release; an eventfd's
    // wakeup may take an idle CPU.
    pollfd waits[2] = {{args->gate_fd, POLLIN, 0}, {args->lifeline_fd, POLLIN, 0}};
    for (;;) {
      long n = Sys(SYS_ppoll, reinterpret_cast<long>(waits), 2, 0, 0);
      if (n == -EINTR) continue;
      if (n < 0) Exit(127);
      if (waits[0].revents & POLLIN) break;
      // The lifeline ended: the worker is gone without releasing this task.
      if (waits[1].revents != 0) Exit(127);
    }
    Sys(SYS_close, args->gate_fd);
    Sys(SYS_close, args->lifeline_fd);
  } else {
    // Nothing of the worker's (sockets, epoll, other tasks' pipes) may leak
    // into the task, even an fd someone opened without O_CLOEXEC.
    Sys(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC);
  }
  uint64_t none = 0;
  Sys(SYS_rt_sigprocmask, SIG_SETMASK, reinterpret_cast<long>(&none), 0, sizeof none);
  Fail(args, Step::kExec,
       Sys(SYS_execve, reinterpret_cast<long>(p.path), reinterpret_cast<long>(p.argv),
           reinterpret_cast<long>(p.envp)));
}

std::string Errno(int err) { return strerror(err); }

// An anonymous stack of `size` bytes with one guard page below it (an
// overflow faults instead of silently corrupting the parent's memory).
// Returns the mapping's start and whole length.
Result<std::pair<void*, size_t>> MapStack(size_t size) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* mem = mmap(nullptr, size + page, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (mem == MAP_FAILED) return Internal("cannot map a child's stack: " + Errno(errno));
  mprotect(mem, page, PROT_NONE);
  return std::make_pair(mem, size + page);
}

// Parked children's stacks, kept for the next Park once their child is
// reaped: a new one costs an mmap and an mprotect, and its end a munmap,
// whose TLB flush reaches every core the worker's threads ran on (together
// 3-4% of `drover up`'s CPU per task in B2). At most kKept are kept; all of
// one size (kParkedStackSize). Any thread.
class ParkedStacks {
 public:
  static ParkedStacks& Get() {
    static ParkedStacks* pool = new ParkedStacks();  // never destroyed: no exit order
    return *pool;
  }
  Result<std::pair<void*, size_t>> Take() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!kept_.empty()) {
        std::pair<void*, size_t> stack = kept_.back();
        kept_.pop_back();
        return stack;
      }
    }
    return MapStack(kParkedStackSize);
  }
  void Give(void* stack, size_t length) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (kept_.size() < kKept) {
        kept_.emplace_back(stack, length);
        return;
      }
    }
    munmap(stack, length);
  }

 private:
  static constexpr size_t kKept = 16;
  std::mutex mu_;
  std::vector<std::pair<void*, size_t>> kept_;
};

// clone(ChildMain) on the stack [stack, stack + length) with every signal
// blocked in the calling thread for its duration (the child inherits that
// mask and unblocks only before its execve). Returns the pid, or -errno.
pid_t CloneChild(void* stack, size_t length, int flags, ChildArgs* args, int* pidfd) {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  char* top = static_cast<char*>(stack) + length;
  pid_t pid = clone(ChildMain, top, flags | CLONE_VM | CLONE_PIDFD | SIGCHLD, args, pidfd);
  const int clone_errno = errno;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return pid < 0 ? -clone_errno : pid;
}

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
    case Step::kNetwork:
      return FailedPrecondition("cannot give the task a network of its own (network = \"none\"): " +
                                Errno(err));
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
  ASSIGN_OR_RETURN(auto stack, MapStack(kStackSize));
  return std::unique_ptr<Spawner>(new Spawner(stack.first, stack.second));
}

Spawner::~Spawner() { munmap(stack_, stack_size_); }

void Spawner::ReadSignals() {
  // The worker's dispositions are read once (header: they are set at start
  // and not changed after): the read cost an open, a read and a close of
  // /proc/self/status, ~25 us on a VM, before every task.
  if (!signals_read_) {
    if (!ReadNonDefaultSignals(reset_, reset_count_)) ResetAllSignals(reset_, reset_count_);
    signals_read_ = true;
  }
}

Result<SpawnedProcess> Spawner::Spawn(const SpawnPlan& plan) {
  ReadSignals();
  ChildArgs args;
  args.plan = &plan;
  args.reset = reset_;
  args.reset_count = reset_count_;

  int raw_pidfd = -1;
  const pid_t pid = CloneChild(stack_, stack_size_, CLONE_VFORK, &args, &raw_pidfd);
  if (pid < 0) return Unavailable("cannot start a process: " + Errno(-pid));
  UniqueFd pidfd(raw_pidfd);
  // CLONE_VFORK: the child has exec'd or exited by now; a failed step left
  // its error in args (a child killed before its execve reads as started,
  // and its pidfd then reports the signal).
  if (args.error.step != 0) {
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return DescribeFailure(plan, args.error);
  }
  // The child wrote spawned_at before the parent resumed (CLONE_VFORK).
  Time spawned_at = TimeFromMicros(static_cast<int64_t>(args.spawned_at.tv_sec) * 1000000 +
                                   args.spawned_at.tv_nsec / 1000);
  if (args.spawned_at.tv_sec == 0) {
    spawned_at = SystemClock().Now();
  }
  return SpawnedProcess{pid, std::move(pidfd), spawned_at};
}

bool ParkSupported() { return kRawSyscalls; }

namespace {

// `fd` itself if it is above 2, else a copy above 2 (closing `fd`); -1 if
// `fd` is -1 or cannot be copied (errno says why).
int AboveStdio(int fd) {
  if (fd < 0 || fd > 2) return fd;
  const int moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  const int err = errno;
  close(fd);
  errno = err;
  return moved;
}

}  // namespace

// Everything a parked child reads or writes, owned by its ParkedProcess.
struct ParkedProcess::Storage {
  std::string path;
  std::vector<std::string> argv_text, envp_text;
  std::vector<char*> argv, envp;
  std::string cwd;
  SpawnPlan plan;
  int reset[NSIG] = {};
  ChildArgs args;
};

ParkedProcess::ParkedProcess() : storage_(std::make_unique<Storage>()) {}

ParkedProcess::~ParkedProcess() {
  if (pid_ > 0 && !released_) {
    // Not started: nothing of the task's ran; end the child and reap it
    // before its stack goes.
    if (pidfd_.valid()) {
      syscall(SYS_pidfd_send_signal, pidfd_.fd(), SIGKILL, nullptr, 0);
    } else {
      kill(pid_, SIGKILL);
    }
    int status;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  // The descriptors close with their owners, after this; the child is
  // reaped, so its stack may serve the next one.
  if (stack_ != nullptr) ParkedStacks::Get().Give(stack_, stack_size_);
}

bool ParkedProcess::parked() const {
  return storage_->args.parked.load(std::memory_order_acquire) != 0;
}

bool ParkedProcess::WaitParked(Duration max) {
  const Deadline deadline(max);
  auto* word = reinterpret_cast<int*>(&storage_->args.parked);
  while (!parked()) {
    if (Dead()) return false;
    if (deadline.Passed()) return false;
    // Woken by the child once parked; a child that dies during its setup
    // never wakes us, so look again each millisecond.
    timespec wait{0, 1000000};
    syscall(SYS_futex, word, FUTEX_WAIT, 0, &wait, nullptr, 0);
  }
  return true;
}

bool ParkedProcess::Dead() const {
  pollfd p{pidfd_.fd(), POLLIN, 0};
  return poll(&p, 1, 0) != 0;  // readable, or an error: not to be released
}

[[gnu::hot]] Result<Time> ParkedProcess::Release() {
  if (released_) return FailedPrecondition("released twice");
  const Time at = SystemClock().Now();
  const uint64_t one = 1;
  ssize_t n;
  do {
    n = write(gate_.fd(), &one, sizeof one);
  } while (n < 0 && errno == EINTR);
  if (n != sizeof one) return Internal("cannot release the prepared process: " + Errno(errno));
  released_ = true;
  gate_.Reset();
  lifeline_.Reset();
  return at;
}

Status ParkedProcess::Failure() const {
  const ChildError& e = storage_->args.error;
  if (e.step == 0) return Status::Ok();
  return DescribeFailure(storage_->plan, e);
}

Result<std::unique_ptr<ParkedProcess>> Spawner::Park(const SpawnPlan& plan) {
  if (!kRawSyscalls) return FailedPrecondition("parked starts are not supported on this architecture");
  ReadSignals();
  std::unique_ptr<ParkedProcess> parked(new ParkedProcess());
  ParkedProcess::Storage& st = *parked->storage_;
  st.path = plan.path;
  for (char* const* a = plan.argv; *a != nullptr; ++a) st.argv_text.emplace_back(*a);
  for (char* const* e = plan.envp; *e != nullptr; ++e) st.envp_text.emplace_back(*e);
  for (std::string& a : st.argv_text) st.argv.push_back(a.data());
  st.argv.push_back(nullptr);
  for (std::string& e : st.envp_text) st.envp.push_back(e.data());
  st.envp.push_back(nullptr);
  st.plan = plan;
  st.plan.path = st.path.c_str();
  st.plan.argv = st.argv.data();
  st.plan.envp = st.envp.data();
  if (plan.cwd != nullptr) {
    st.cwd = plan.cwd;
    st.plan.cwd = st.cwd.c_str();
  }
  std::copy(reset_, reset_ + reset_count_, st.reset);
  ChildArgs& args = st.args;
  args.plan = &st.plan;
  args.reset = st.reset;
  args.reset_count = reset_count_;

  // The gate and the lifeline, above 2 (the child's stdio lands on 0-2).
  parked->gate_.Reset(AboveStdio(eventfd(0, EFD_CLOEXEC)));
  if (!parked->gate_.valid()) return Unavailable("cannot make an eventfd: " + Errno(errno));
  int life[2];
  if (pipe2(life, O_CLOEXEC) != 0) return Unavailable("cannot make a pipe: " + Errno(errno));
  parked->lifeline_.Reset(life[1]);
  // The parent's copy of the lifeline's read end goes once the child has
  // its own (the parent never reads it): at the end of this call.
  const UniqueFd lifeline_read(AboveStdio(life[0]));
  if (!lifeline_read.valid()) return Unavailable("cannot make a pipe: " + Errno(errno));
  args.gate_fd = parked->gate_.fd();
  args.lifeline_fd = lifeline_read.fd();

  ASSIGN_OR_RETURN(auto stack, ParkedStacks::Get().Take());
  parked->stack_ = stack.first;
  parked->stack_size_ = stack.second;
  int pidfd = -1;
  // No CLONE_VFORK: the parent goes on while the child sets itself up and
  // waits at the gate.
  const pid_t pid = CloneChild(stack.first, stack.second, 0, &args, &pidfd);
  if (pid < 0) return Unavailable("cannot start a process: " + Errno(-pid));
  parked->pid_ = pid;
  parked->pidfd_.Reset(pidfd);
  return parked;
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
