// Isolator: how a task's limits are enforced, one implementation per OS
// mechanism, chosen once at worker start (`--isolation auto|cgroup2|cgroup1|
// rlimit|none`).
//
//   Isolator      one per worker; makes a TaskCage per task attempt.
//   TaskCage      one per running task: what the child must do before exec
//                 (cgroup.procs fds to write "0" to, rlimits to set), how to
//                 kill everything the task left behind, how to freeze and
//                 thaw it, the usage figures, and removal of the task's
//                 cgroups.
//
// Backends: cgroup_v2.cc, cgroup_v1.cc, rlimit.cc, and `none` here.
// With rlimit and none there is no container around the task's process
// tree: KillAll finds nothing, Freeze fails (the executor stops the task's
// process group with SIGSTOP instead), and the executor's killpg of the
// task's process group is all there is (a grandchild that called setsid
// escapes).
//
// Threading: an Isolator and its cages belong to the executor's thread.
#ifndef DROVER_WORKER_EXEC_ISOLATOR_H_
#define DROVER_WORKER_EXEC_ISOLATOR_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/time.h"
#include "common/unique_fd.h"
#include "core/model.h"
#include "worker/exec/spawn.h"

namespace drover::worker {

enum class IsolationMode { kAuto, kCgroup2, kCgroup1, kRlimit, kNone };

// "auto", "cgroup2", "cgroup1", "rlimit", "none"; anything else is an
// InvalidArgument naming the accepted words.
Result<IsolationMode> ParseIsolationMode(std::string_view text);
std::string_view IsolationModeName(IsolationMode mode);

// The limits of one task attempt. Zero means "no limit" for each field.
struct CageSpec {
  std::string name;           // unique among running tasks, e.g. "12.3.1"
  int64_t milli_cpus = 0;     // CPU quota
  uint64_t memory_bytes = 0;  // memory limit
  int64_t max_pids = 0;       // process/thread count limit
  std::vector<int> cores;     // cpuset (affinity is set by the executor too)
  std::vector<int> gpus;      // GPU indices the task may open
  // Disk I/O limits (zero: none) on the block device `io_device`
  // ("major:minor", a whole disk), which must be set when any limit is.
  core::IoLimits io;
  std::string io_device;
  // A cage for processes between tasks (warm interpreters): a cgroup in
  // every hierarchy the isolator uses, without limits (every core, every
  // GPU), so that a process moved in leaves every task cgroup it was in.
  // (The memory it holds stays charged where it was charged: kernels since
  // 6.x move no charges between cgroups.)
  bool holding = false;
  // A container runtime will make cgroups of its own under the cage's
  // (container.h): the cage has a cgroup in every hierarchy, its kill and
  // removal reach the cgroups below. Only where the isolator nests them
  // (cgroup v1); others refuse such a cage.
  bool container = false;
};

// How long TaskCage::Freeze waits for the kernel to report a cage stopped.
inline constexpr Duration kFreezeWait = Seconds(1);

// What the kernel accounted for a task; absent figures are unknown (the
// executor falls back to wait4's rusage for them).
struct CageUsage {
  std::optional<Duration> cpu;          // user + system of the whole tree
  std::optional<uint64_t> peak_memory;  // bytes
  bool oom_killed = false;
  // Bytes read from and written to block devices (io.stat, blkio).
  std::optional<uint64_t> io_read_bytes;
  std::optional<uint64_t> io_write_bytes;
};

class TaskCage {
 public:
  TaskCage() = default;
  TaskCage(const TaskCage&) = delete;
  TaskCage& operator=(const TaskCage&) = delete;
  // Closes the join fds. Does not remove cgroups: call Remove.
  virtual ~TaskCage();

  // cgroup.procs fds the child writes "0" to before exec.
  const std::vector<int>& join_fds() const { return join_fds_; }
  // Limits the child sets with setrlimit before exec.
  const std::vector<ChildRlimit>& rlimits() const { return rlimits_; }
  // Closes the join fds once the child has started (they are no longer
  // needed, and fds are a per-task cost).
  void CloseJoinFds();
  // Moves the running process `pid`, all its threads, into the cage, as a
  // child's write of "0" to the join fds does: a warm interpreter taking
  // its task's call (warm_interpreter.h). Call before CloseJoinFds. Ok
  // where there are no join fds (rlimit, none).
  Status Adopt(pid_t pid);

  // A process moved out of the cage (a warm interpreter after its call)
  // still holds memory charged to it: the cage is not emptied for reuse
  // by a later task when that is more than a little (cgroup v1 keeps
  // cages for reuse; the others need nothing).
  virtual void HolderLeft() {}

  // True when `pid` is the only process in the cage: a warm interpreter
  // may then wait in it after its call, and the cage serves its next call
  // refitted (Isolator::RefitCage) instead of the process being moved.
  // False where the isolation cannot tell or cannot refit (all but
  // cgroup v1).
  virtual bool HoldsOnly(pid_t /*pid*/) { return false; }

  // True when KillAll reaches every process the task made, daemonized
  // grandchildren included.
  virtual bool contains_tree() const = 0;

  // Sends SIGKILL to every process still in the cage, so that none can
  // fork away meanwhile (cgroup.kill, or freezer then kill then thaw).
  // Returns pidfds of the processes signalled, for the caller to wait on;
  // empty when the cage is empty or has no membership list. Fails only
  // when the membership cannot be read.
  virtual Result<std::vector<UniqueFd>> KillAll() = 0;

  // Stops (`frozen`) or lets go on every process in the cage, where it
  // is, with the cgroup freezer; a process that forks meanwhile is caught
  // with its child. Freezing waits, up to kFreezeWait, until the kernel
  // reports the whole cage stopped; thawing does not wait. Signals
  // sent to frozen processes, SIGKILL included, take effect at the thaw
  // (cgroup v1; v2 lets a SIGKILL through). Fails with FailedPrecondition
  // where the cage has no freezer (rlimit, none: this default), with
  // Unavailable when the cage is not frozen within the bound (it may
  // still be freezing: Freeze(false) undoes it), and with the file's error
  // when the freezer cannot be written.
  virtual Status Freeze(bool /*frozen*/) {
    return FailedPrecondition("this isolation has no freezer");
  }

  // Reads the accounting; call before Remove. Never fails: figures it
  // cannot read are left absent.
  virtual CageUsage Usage() = 0;

  // Removes the task's cgroups (cgroup v1 keeps empty ones for later
  // tasks, see cgroup_v1.h). Fails (kUnavailable) while a process is
  // still inside; the caller retries after KillAll's pidfds have fired.
  virtual Status Remove() = 0;

  // The memory limit the cage enforces (0: none), for the OOM message.
  uint64_t memory_limit() const { return memory_limit_; }

 protected:
  std::vector<int> join_fds_;
  // False when the backend keeps the join fds open beyond the task (a
  // cgroup reused by later tasks): CloseJoinFds then only forgets them.
  bool owns_join_fds_ = true;
  std::vector<ChildRlimit> rlimits_;
  uint64_t memory_limit_ = 0;
};

class Isolator {
 public:
  Isolator() = default;
  Isolator(const Isolator&) = delete;
  Isolator& operator=(const Isolator&) = delete;
  virtual ~Isolator() = default;

  virtual IsolationMode mode() const = 0;
  // The directories under which every cgroup of this isolator's cages
  // lies, one per hierarchy, the one to freeze and kill through first
  // (cgroup v1's freezer); empty without cgroups. The reaper and the next
  // life of the worker kill what is in these trees (reaper.h,
  // life_record.h).
  virtual std::vector<std::string> cgroup_roots() const { return {}; }
  // Creates the cage for one task. Fails with a message naming the file or
  // limit that could not be set; nothing is left behind on failure.
  virtual Result<std::unique_ptr<TaskCage>> CreateCage(const CageSpec& spec) = 0;
  // Makes `cage`, one of this isolator's in which a warm interpreter waits
  // (TaskCage::HoldsOnly), the cage of the task `spec` describes without
  // moving the process: its limits written where they differ, its figures
  // counted afresh, and what the process holds now left out of the
  // task's peak and added to its memory limit (it does not count against
  // the task, as it would not had the process moved). Its join fds are
  // the cage's again (a process that replaces the interpreter joins it).
  // FailedPrecondition where the cage cannot be the task's as it is (a
  // cgroup it lacks, another GPU set, a container); the cage is then unfit
  // for reuse and its process should leave it.
  virtual Status RefitCage(TaskCage& /*cage*/, const CageSpec& /*spec*/) {
    return FailedPrecondition("this isolation does not refit a cage");
  }
};

struct IsolatorOptions {
  IsolationMode mode = IsolationMode::kAuto;
  // cgroup v1: the directory holding one mount per controller.
  std::string cgroup1_mounts = "/sys/fs/cgroup";
  // cgroup v2: the delegated cgroup Drover may create children in. Empty:
  // DefaultCgroupV2Root(cgroup2_mount), a "drover" sibling of the worker's
  // own cgroup (see cgroup_v2.h).
  std::string cgroup2_root;
  std::string cgroup2_mount = "/sys/fs/cgroup/unified";
  // GPUs the machine has (indices 0..gpu_count-1): cgroup v1 denies the
  // device nodes (/dev/nvidiaN, major 195) of those not assigned.
  int gpu_count = 0;
};

// The isolator for `options.mode`; for kAuto: cgroup2 when a writable
// delegated v2 tree with the memory, cpu and pids controllers exists, else
// cgroup1 when its controllers are writable, else rlimit. An explicit mode
// whose mechanism is unusable fails with the reason (FailedPrecondition).
Result<std::unique_ptr<Isolator>> MakeIsolator(const IsolatorOptions& options);

// The `none` isolator: no limits, no accounting beyond rusage.
std::unique_ptr<Isolator> MakeNoIsolator();

}  // namespace drover::worker

#endif  // DROVER_WORKER_EXEC_ISOLATOR_H_
