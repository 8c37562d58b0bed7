#include "worker/exec/reaper.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <new>

namespace drover::worker {
namespace {

// One message on the socket (SOCK_SEQPACKET keeps them whole).
struct Message {
  char op;
  char pad[3];
  int32_t pid;
  int64_t ms;  // kDeadline: milliseconds from now
};
constexpr char kWatch = 'W';
constexpr char kForget = 'F';
constexpr char kBye = 'B';
constexpr char kDeadline = 'D';
// The reaper checks its deadline at least this often (ms), so a suspended
// machine's resume (CLOCK_BOOTTIME jumps, poll's timeout does not) is
// noticed within it.
constexpr int kCheckEveryMs = 1000;
constexpr int64_t kNoDeadline = INT64_MAX;

constexpr int kMaxRoots = 8;
constexpr size_t kMaxPath = 4096;
constexpr int kMaxThenArgs = 16;
constexpr int kMaxThenVars = 8;
// Process groups watched at once; more are not watched (a worker runs far
// fewer tasks at a time).
constexpr size_t kMaxWatched = 1 << 16;

// What the reaper needs, copied before the fork: the child reads only this
// and its own stack.
struct ChildArgs {
  int sock = -1;
  int keep_fd = -1;
  Reaper::Shared* shared = nullptr;  // MAP_SHARED with the worker
  int roots = 0;
  char root[kMaxRoots][kMaxPath] = {};
  int then_args = 0;
  char then[kMaxThenArgs][kMaxPath] = {};
  int then_vars = 0;
  char then_env[kMaxThenVars][kMaxPath] = {};
};

struct Watched {
  int32_t pid;
  int32_t pidfd;   // -1: could not be opened
  bool unchecked;  // no pidfds on this kernel (before 5.3): killed unchecked
};

// ---- the reaper's side: async-signal-safe only ---------------------------

int PidfdOpenRaw(pid_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }
int PidfdSignalRaw(int pidfd, int sig) {
  return static_cast<int>(syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0));
}

size_t Length(const char* s) {
  size_t n = 0;
  while (s[n] != '\0') ++n;
  return n;
}

// Appends `tail` to the path of length `len` in `path` (kMaxPath + 64
// bytes); false when it does not fit.
bool Append(char* path, size_t len, const char* tail) {
  const size_t t = Length(tail);
  if (len + t + 1 > kMaxPath + 64) return false;
  memcpy(path + len, tail, t + 1);
  return true;
}

bool Exists(const char* path) { return access(path, F_OK) == 0; }

bool WriteText(const char* path, const char* text) {
  const int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const ssize_t n = write(fd, text, Length(text));
  close(fd);
  return n == static_cast<ssize_t>(Length(text));
}

// Sends SIGKILL to every pid listed in a cgroup.procs file.
void KillListed(const char* procs) {
  const int fd = open(procs, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  char buf[4096];
  int64_t pid = -1;  // the number being read, across reads
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (ssize_t i = 0; i < n; ++i) {
      if (buf[i] >= '0' && buf[i] <= '9') {
        pid = (pid < 0 ? 0 : pid * 10) + (buf[i] - '0');
      } else {
        if (pid > 0) kill(static_cast<pid_t>(pid), SIGKILL);
        pid = -1;
      }
    }
  }
  if (pid > 0) kill(static_cast<pid_t>(pid), SIGKILL);
  close(fd);
}

struct LinuxDirent64 {
  uint64_t ino;
  int64_t off;
  unsigned short reclen;
  unsigned char type;
  char name[1];
};

// Calls `visit(child_len)` for each cgroup (directory) right below `path`
// (of length `len`), with `path` holding the child's path meanwhile
// (restored after each call); stops early when `visit` returns false.
// Returns false when it stopped early.
template <typename Visit>
bool ForEachChild(char* path, size_t len, Visit&& visit) {
  const int dir = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return true;
  bool going = true;
  alignas(8) char buf[4096];
  while (going) {
    const long n = syscall(SYS_getdents64, dir, buf, sizeof buf);
    if (n <= 0) break;
    for (long at = 0; at < n && going;) {
      const auto* e = reinterpret_cast<const LinuxDirent64*>(buf + at);
      at += e->reclen;
      if (e->type != DT_DIR || e->name[0] == '.') continue;
      if (!Append(path, len, "/") || !Append(path, len + 1, e->name)) continue;
      going = visit(len + 1 + Length(e->name));
      path[len] = '\0';
    }
  }
  close(dir);
  return going;
}

// Kills the members of every cgroup below `path` (of length `len`), and
// thaws each one frozen by itself (v1), depth first, at most `depth`
// levels down.
void KillBelow(char* path, size_t len, int depth) {
  ForEachChild(path, len, [&](size_t child) {
    if (Append(path, child, "/cgroup.procs")) KillListed(path);
    path[child] = '\0';
    // A task frozen on its own (idle-desktop mode's Suspend) stays so when
    // the tree above thaws: its kills take effect only at its own thaw.
    if (Append(path, child, "/freezer.state") && Exists(path)) WriteText(path, "THAWED");
    path[child] = '\0';
    if (depth > 1) KillBelow(path, child, depth - 1);
    return true;
  });
}

// Whether the cgroup at `path` (of length `len`) or one below it, at most
// `depth` levels down, lists a process.
bool AnyListed(char* path, size_t len, int depth) {
  if (Append(path, len, "/cgroup.procs")) {
    char c = 0;
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    path[len] = '\0';
    if (fd >= 0) {
      const ssize_t n = read(fd, &c, 1);
      close(fd);
      if (n > 0) return true;
    }
  }
  if (depth == 0) return false;
  return !ForEachChild(path, len, [&](size_t child) { return !AnyListed(path, child, depth - 1); });
}

// Removes the cgroups below `path` (of length `len`), deepest first, and
// `path` itself: only empty ones go (rmdir), whatever is left stays.
void RemoveTree(char* path, size_t len, int depth) {
  if (depth > 0) {
    ForEachChild(path, len, [&](size_t child) {
      RemoveTree(path, child, depth - 1);
      return true;
    });
  }
  rmdir(path);
}

// Kills every process in the cgroup tree at `root`.
void KillTree(const char* root) {
  char path[kMaxPath + 64];
  const size_t len = Length(root);
  memcpy(path, root, len + 1);
  // cgroup v2 (Linux 5.14+): one write kills the whole tree, forks in
  // flight included.
  if (Append(path, len, "/cgroup.kill") && Exists(path) && WriteText(path, "1")) return;
  path[len] = '\0';
  // cgroup v1: freeze the tree so that nothing forks between listing and
  // killing; the kills take effect at the thaw.
  bool frozen = false;
  char state[kMaxPath + 64];
  memcpy(state, root, len + 1);
  if (Append(state, len, "/freezer.state") && Exists(state) && WriteText(state, "FROZEN")) {
    frozen = true;
    for (int i = 0; i < 1000; ++i) {
      char now[16] = {};
      const int fd = open(state, O_RDONLY | O_CLOEXEC);
      if (fd < 0) break;
      const ssize_t n = read(fd, now, sizeof now - 1);
      close(fd);
      if (n >= 6 && memcmp(now, "FROZEN", 6) == 0) break;
      sched_yield();
    }
  }
  if (Append(path, len, "/cgroup.procs")) KillListed(path);
  path[len] = '\0';
  KillBelow(path, len, 8);
  if (frozen) WriteText(state, "THAWED");
}

// Closes every descriptor but 0-2 and the kept ones (each 3 or above;
// -1: none).
void CloseOthers(int a, int b) {
  if (a > b) {
    const int t = a;
    a = b;
    b = t;
  }
  const int keep[2] = {a, b};
  // close_range(2) (Linux 5.9) over the gaps; a loop where it is missing.
  bool ok = true;
  unsigned next = 3;
  for (int k : keep) {
    if (k < 3) continue;
    const unsigned fd = static_cast<unsigned>(k);
    if (fd > next) ok = ok && syscall(SYS_close_range, next, fd - 1, 0) == 0;
    next = fd + 1;
  }
  ok = ok && syscall(SYS_close_range, next, ~0u, 0) == 0;
  if (ok) return;
  rlimit rl{};
  getrlimit(RLIMIT_NOFILE, &rl);
  const int top = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > (1u << 20)
                      ? (1 << 20)
                      : static_cast<int>(rl.rlim_cur);
  for (int fd = 3; fd < top; ++fd) {
    if (fd != a && fd != b) close(fd);
  }
}

// `fd` moved to 3 or above (the reaper's 0-2 become /dev/null).
int AboveStdio(int fd) { return fd < 0 || fd > 2 ? fd : fcntl(fd, F_DUPFD_CLOEXEC, 3); }

int64_t BootMillis() {
  timespec ts{};
  clock_gettime(CLOCK_BOOTTIME, &ts);  // reads the system clock: a reaper process of its own
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

// SIGKILL to every watched group whose leader is still this task's, and to
// every process in the cgroup trees.
void KillAll(const ChildArgs& args, const Watched* watched, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    const Watched& w = watched[i];
    // A leader the pidfd still reaches (running, or a zombie not yet
    // reaped) holds its pid: the group number is still this task's. One
    // already reaped may have given its number away: leave that group.
    // A leader already gone when the reaper looked (its Forget follows)
    // has no pidfd: leave its group too. Only where the kernel has no
    // pidfds at all is the group killed by number, unchecked.
    if (w.pidfd >= 0) {
      if (PidfdSignalRaw(w.pidfd, SIGKILL) != 0) continue;
    } else if (!w.unchecked) {
      continue;
    }
    kill(-w.pid, SIGKILL);
  }
  for (int i = 0; i < args.roots; ++i) KillTree(args.root[i]);
}

[[noreturn]] void RunReaper(const ChildArgs& args) {
  setsid();
  prctl(PR_SET_NAME, "drover-reaper", 0, 0, 0);
  const int sock = AboveStdio(args.sock);
  const int keep_fd = AboveStdio(args.keep_fd);
  // Not the worker's stdout: a reader waiting for the end of the worker's
  // output must not wait for the reaper too.
  const int null = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null >= 0) {
    for (int fd = 0; fd < 3; ++fd) dup2(null, fd);
    if (null > 2) close(null);
  }
  CloseOthers(sock, keep_fd);

  void* area = mmap(nullptr, kMaxWatched * sizeof(Watched), PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  auto* watched = area == MAP_FAILED ? nullptr : static_cast<Watched*>(area);
  size_t count = 0;
  int64_t deadline = kNoDeadline;  // CLOCK_BOOTTIME ms
  for (;;) {
    if (deadline != kNoDeadline) {
      const int64_t left = deadline - BootMillis();
      pollfd p{sock, POLLIN, 0};
      const int ready = left <= 0 ? 0 : poll(&p, 1, left < kCheckEveryMs ? static_cast<int>(left)
                                                                         : kCheckEveryMs);
      if (ready < 0 && errno != EINTR) break;
      if (ready == 0) {
        if (BootMillis() < deadline) continue;
        // The worker said nothing before its deadline: it is stopped or
        // stalled, and its tasks' leases are about to expire. End them, as
        // the worker itself would have (fencing), and wait for the worker.
        deadline = kNoDeadline;
        // Counted first: whoever sees the tasks end sees the count.
        if (args.shared != nullptr) {
          __atomic_add_fetch(&args.shared->fences, 1, __ATOMIC_RELEASE);
        }
        KillAll(args, watched, count);
        continue;
      }
      if (ready < 0) continue;
    }
    Message m{};
    const ssize_t n = recv(sock, &m, sizeof m, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // end of file (or an error): the worker is gone
    if (n != sizeof m) continue;
    if (m.op == kBye) _exit(0);
    if (m.op == kDeadline) {
      deadline = m.ms < 0 ? kNoDeadline : BootMillis() + m.ms;
    } else if (m.op == kWatch && watched != nullptr && count < kMaxWatched && m.pid > 0) {
      const int pidfd = PidfdOpenRaw(m.pid);
      watched[count++] = Watched{m.pid, pidfd, pidfd < 0 && errno == ENOSYS};
    } else if (m.op == kForget && watched != nullptr) {
      for (size_t i = 0; i < count; ++i) {
        if (watched[i].pid != m.pid) continue;
        if (watched[i].pidfd >= 0) close(watched[i].pidfd);
        watched[i] = watched[--count];
        break;
      }
    }
  }
  KillAll(args, watched, count);
  // Once the killed have left the trees (at most ~5 s; the v1 hierarchies
  // have no event for a cgroup becoming empty), the trees go, and the last
  // program (a container runtime's cleanup) sees nothing running.
  for (int tries = 0; args.roots > 0 && tries < 500; ++tries) {
    bool any = false;
    for (int i = 0; i < args.roots && !any; ++i) {
      char path[kMaxPath + 64];
      const size_t len = Length(args.root[i]);
      memcpy(path, args.root[i], len + 1);
      any = AnyListed(path, len, 8);
    }
    if (!any) break;
    poll(nullptr, 0, 10);
  }
  for (int i = 0; i < args.roots; ++i) {
    char path[kMaxPath + 64];
    const size_t len = Length(args.root[i]);
    memcpy(path, args.root[i], len + 1);
    RemoveTree(path, len, 8);
  }
  if (args.then_args > 0) {
    char* argv[kMaxThenArgs + 1] = {};
    char* envp[kMaxThenVars + 1] = {};
    for (int i = 0; i < args.then_args; ++i) argv[i] = const_cast<char*>(args.then[i]);
    for (int i = 0; i < args.then_vars; ++i) envp[i] = const_cast<char*>(args.then_env[i]);
    execve(argv[0], argv, envp);
  }
  _exit(0);
}

}  // namespace

Result<std::unique_ptr<Reaper>> Reaper::Start(const std::vector<std::string>& cgroup_roots,
                                              int keep_fd, const std::vector<std::string>& then,
                                              const std::vector<std::string>& then_env) {
  if (cgroup_roots.size() > static_cast<size_t>(kMaxRoots)) {
    return InvalidArgument("the reaper takes at most " + std::to_string(kMaxRoots) +
                           " cgroup roots");
  }
  auto args = std::make_unique<ChildArgs>();
  for (const std::string& root : cgroup_roots) {
    if (root.size() >= 4000) return InvalidArgument("cgroup root too long: " + root);
    memcpy(args->root[args->roots++], root.c_str(), root.size() + 1);
  }
  if (then.size() > static_cast<size_t>(kMaxThenArgs) ||
      then_env.size() > static_cast<size_t>(kMaxThenVars)) {
    return InvalidArgument("the reaper's last program takes at most " +
                           std::to_string(kMaxThenArgs) + " arguments and " +
                           std::to_string(kMaxThenVars) + " variables");
  }
  for (const std::string& a : then) {
    if (a.size() >= 4000) return InvalidArgument("argument too long for the reaper: " + a);
    memcpy(args->then[args->then_args++], a.c_str(), a.size() + 1);
  }
  for (const std::string& v : then_env) {
    if (v.size() >= 4000) return InvalidArgument("variable too long for the reaper: " + v);
    memcpy(args->then_env[args->then_vars++], v.c_str(), v.size() + 1);
  }
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    return Unavailable(std::string("cannot make the reaper's socket pair: ") + strerror(errno));
  }
  args->sock = sv[1];
  args->keep_fd = keep_fd;
  void* shared = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                      -1, 0);
  if (shared == MAP_FAILED) {
    const int e = errno;
    close(sv[0]);
    close(sv[1]);
    return Unavailable(std::string("cannot map the reaper's shared page: ") + strerror(e));
  }
  args->shared = new (shared) Shared{};
  const pid_t pid = fork();
  if (pid < 0) {
    const int e = errno;
    close(sv[0]);
    close(sv[1]);
    munmap(shared, sizeof(Shared));
    return Unavailable(std::string("cannot fork the reaper: ") + strerror(e));
  }
  if (pid == 0) RunReaper(*args);
  close(sv[1]);
  return std::unique_ptr<Reaper>(new Reaper(pid, sv[0], args->shared));
}

Reaper::~Reaper() {
  Status bye = Send(kBye, 0);
  (void)bye;  // a reaper already gone is reaped all the same
  close(fd_);
  int status;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  munmap(shared_, sizeof(Shared));
}

Status Reaper::Watch(pid_t pid) { return Send(kWatch, pid); }
Status Reaper::Forget(pid_t pid) { return Send(kForget, pid); }
Status Reaper::SetDeadline(Duration from_now) {
  return Send(kDeadline, 0,
              std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(from_now).count()));
}
Status Reaper::ClearDeadline() { return Send(kDeadline, 0, -1); }

uint32_t Reaper::fences() const { return __atomic_load_n(&shared_->fences, __ATOMIC_ACQUIRE); }

Status Reaper::Send(char op, pid_t pid, int64_t ms) {
  Message m{};
  m.op = op;
  m.pid = pid;
  m.ms = ms;
  for (;;) {
    const ssize_t n = send(fd_, &m, sizeof m, MSG_NOSIGNAL);
    if (n == sizeof m) return Status::Ok();
    if (n < 0 && errno == EINTR) continue;
    return Unavailable("the reaper (pid " + std::to_string(pid_) +
                       ") cannot be told: " + (n < 0 ? strerror(errno) : "short write"));
  }
}

}  // namespace drover::worker
