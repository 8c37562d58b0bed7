// Spawner: starts one child process with vfork semantics.
//
// The child shares the parent's memory (clone with CLONE_VM | CLONE_VFORK,
// as posix_spawn does), so starting a task costs the same whatever the
// worker's size; the parent is suspended until the child has called execve
// or failed. Everything the child needs (argv/envp arrays, paths, cgroup
// fds, rlimits, the CPU set, user ids) is prepared by the caller in a
// SpawnPlan; between clone and execve the child makes only async-signal-safe
// system calls, in this order:
//   read CLOCK_REALTIME into the parent's memory (SpawnedProcess::
//   spawned_at: the moment the process exists), reset every signal
//   disposition to default, setsid, join cgroups (write
//   "0" to each join fd), enter a network namespace of its own with
//   loopback up (SpawnPlan::private_network; in a user namespace of its
//   own where the worker is not root), set rlimits, set CPU
//   affinity, set up stdin/
//   stdout/stderr, setgroups/setgid/setuid, chdir, unblock signals, execve.
// A step that fails leaves (step, errno) in the memory it shares with the
// suspended parent (no error pipe: four system calls fewer per spawn) and
// the child exits 127; Spawn then reaps it and returns a Status
// whose message a person can act on ("command not found: trian.py",
// "permission denied: ./run.sh", "working directory missing: /x").
//
// Signal dispositions: the child resets to the default every signal the
// worker catches or ignores (an ignored one would survive the execve). The
// Spawner learns which those are from /proc/self/status at its first Spawn
// and keeps the list, so a process that uses a Spawner must set its
// dispositions before that and not change them later (Drover's processes
// install no handlers: their stop signals go through a signalfd). A
// disposition changed later is not reset in the child: an ignored signal
// would stay ignored in the task; a handler would stay installed until the
// execve resets it, where it could run only for a signal sent to the new
// process between the child's unblocking and its execve, before anyone but
// the suspended parent knows its pid (it is alone in a new session).
//
// Parked children (Park): a queued task's process is made ahead of its
// start, while its predecessor still runs, so that the start itself is one
// write to an eventfd. The child is cloned with CLONE_VM but without
// CLONE_VFORK: the parent goes on while the child does the same setup as
// above, then closes every fd but 0-2, its gate and its lifeline, and
// blocks on its gate, an eventfd. ParkedProcess::Release writes to it:
// the child unblocks signals and calls execve. (An eventfd rather than a
// pipe: a pipe's writer wakes its reader as a "sync" wakeup, on the
// writer's CPU, where it would wait for the worker's own work.) When the lifeline (a pipe whose
// only write end the worker holds) ends first, the worker is gone: the child exits 127 without
// running anything. Since such a child runs alongside the parent's threads in the same memory, it
// makes raw system calls only (no errno, nothing in the thread's TLS), on a stack of its own, and
// writes nothing of the parent's but its own ChildArgs; the ParkedProcess owns copies of everything
// the child reads and lives until the child has been reaped. Park is available on x86-64 and arm64
// (ParkSupported()).
//
// Threading: one Spawner per thread (it owns the child's stack). Spawn and
// Park block all signals in the calling thread for the few microseconds of
// the clone.
#ifndef DROVER_WORKER_EXEC_SPAWN_H_
#define DROVER_WORKER_EXEC_SPAWN_H_

#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "common/time.h"
#include "common/unique_fd.h"

namespace drover::worker {

struct ChildRlimit {
  int resource = 0;  // RLIMIT_*
  rlim_t soft = RLIM_INFINITY;
  rlim_t hard = RLIM_INFINITY;
};

struct UserSwitch {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
};

// All pointers must stay valid for the duration of the Spawn call.
struct SpawnPlan {
  const char* path = nullptr;   // executable to execve (already resolved)
  char* const* argv = nullptr;  // null-terminated
  char* const* envp = nullptr;  // null-terminated
  const char* cwd = nullptr;    // directory to chdir into; null: stay
  // What the child's fds 0, 1 and 2 become; -1 leaves the slot untouched.
  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
  std::vector<int> join_fds;  // open cgroup.procs files; child writes "0"
  std::vector<ChildRlimit> rlimits;
  std::optional<cpu_set_t> cpus;  // affinity; nullopt: inherit
  std::optional<UserSwitch> user;
  // A network namespace of its own, with only loopback, up (unshare needs
  // CAP_SYS_ADMIN: the worker's, before the user switch).
  bool private_network = false;
  // For a worker that is not root: the network namespace is made inside a
  // user namespace of the child's own, which maps only the worker's ids to
  // themselves (these are the lines written to /proc/self/uid_map and
  // gid_map, "1000 1000 1"; empty: no user namespace). The task keeps its
  // uid and gid; other ids show as the overflow id inside.
  std::string user_ns_uid_map;
  std::string user_ns_gid_map;
  // Name used in error messages, as the person wrote it ("./run.sh").
  std::string display_name;
};

struct SpawnedProcess {
  pid_t pid = -1;
  UniqueFd pidfd;  // O_CLOEXEC
  // Wall clock (CLOCK_REALTIME) read by the child as its very first step
  // after clone, before any of its setup and the execve: when the task's
  // process came into being.
  Time spawned_at;
};

// A child made by Spawner::Park, waiting before its execve.
class ParkedProcess {
 public:
  // Not released: kills the child and reaps it. Released: the caller reaps
  // it (pid()) before destroying this, which frees the child's stack.
  ~ParkedProcess();
  ParkedProcess(const ParkedProcess&) = delete;
  ParkedProcess& operator=(const ParkedProcess&) = delete;

  pid_t pid() const { return pid_; }
  // O_CLOEXEC pidfd; closed by the destructor unless taken.
  int pidfd() const { return pidfd_.fd(); }
  UniqueFd TakePidfd() { return std::move(pidfd_); }
  // The child has done its setup and waits at its gate.
  bool parked() const;
  // The child is gone (it failed a setup step, or was killed) before its
  // release: do not Release it; destroy it and start the task anew.
  bool Dead() const;
  // Waits (blocking, at most `max`) until the child has done its setup and
  // waits at its gate: true; false when it died first or `max` passed.
  // From then on its process group exists (setsid is part of the setup).
  bool WaitParked(Duration max);
  // Lets the child go on to its execve. Returns the wall-clock time of the
  // release: the task's start.
  Result<Time> Release();
  // Once the child has ended (its pidfd is readable): why it never ran the
  // program (a failed execve, or a setup step that failed after an early
  // release), as Spawn reports it; OK if it ran.
  Status Failure() const;

 private:
  friend class Spawner;
  ParkedProcess();
  struct Storage;
  std::unique_ptr<Storage> storage_;  // what the child reads and writes
  void* stack_ = nullptr;
  size_t stack_size_ = 0;
  pid_t pid_ = -1;
  UniqueFd pidfd_;
  UniqueFd gate_;      // eventfd: written to release the child
  UniqueFd lifeline_;  // the pipe's only write end: closing it ends an unreleased child
  bool released_ = false;
};

// Whether Spawner::Park works on this architecture.
bool ParkSupported();

class Spawner {
 public:
  // Fails if the child stack cannot be mapped.
  static Result<std::unique_ptr<Spawner>> Create();
  ~Spawner();
  Spawner(const Spawner&) = delete;
  Spawner& operator=(const Spawner&) = delete;

  // Starts the child. On success the child is running the new program in
  // its own session and process group (pgid == pid). On failure no child is
  // left behind and the Status says which step failed and why:
  // kNotFound for a missing command or working directory, kPermissionDenied
  // for EACCES/EPERM, kFailedPrecondition or kInternal otherwise.
  Result<SpawnedProcess> Spawn(const SpawnPlan& plan);

  // Makes the child of `plan` (copied: the plan's memory may go once this
  // returns) and leaves it waiting before its execve (see the header
  // comment). Fails if the child cannot be made; a setup step that fails
  // shows as the child's early death (ParkedProcess::Dead).
  Result<std::unique_ptr<ParkedProcess>> Park(const SpawnPlan& plan);

 private:
  void ReadSignals();
  Spawner(void* stack, size_t size) : stack_(stack), stack_size_(size) {}
  void* stack_;
  size_t stack_size_;
  // The signals the child resets (see the header comment), read at the
  // first Spawn.
  bool signals_read_ = false;
  int reset_[NSIG] = {};
  int reset_count_ = 0;
};

// 0 if `path` is a regular file this process may execute; ENOENT if it
// cannot be found (or stat fails), EACCES otherwise.
int CheckExecutable(const std::string& path);

// Finds `command` the way execvp would: a name with a '/' is taken as is
// (relative to `cwd` when not absolute), otherwise each directory of
// `path_env` is tried. Returns the path to execve. Fails with
// "command not found: NAME" (kNotFound) or "permission denied: NAME"
// (kPermissionDenied) when only non-executable candidates exist.
Result<std::string> ResolveCommand(const std::string& command, const std::string& path_env,
                                   const std::string& cwd);

}  // namespace drover::worker

#endif  // DROVER_WORKER_EXEC_SPAWN_H_
