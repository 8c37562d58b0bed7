// Executor: runs tasks as isolated child processes on the worker's event
// loop and reports how each one ended.
//
// Per task attempt it
//   - books nothing (admission is Slots' job) and creates the task's
//     directories under <workdir>/<job>/ (see TaskDirs): only the task
//     directory, its output/ and the index's checkpoint directory; inputs/
//     only for a task that has inputs; stdout and stderr only with the
//     stream's first byte. Directory creation is most of what a task costs
//     the worker beyond the spawn itself (hundreds of µs each on some file
//     systems), so nothing is made that the task may not need;
//   - resolves a command without a '/' on PATH in the parent, so that a
//     typo reads "command not found: trian.py" (a path is left to execve,
//     whose error reads the same);
//   - makes the task's cage (Isolator), its stdout/stderr captures, its
//     environment (DESIGN.md section 5), and starts it with Spawner (vfork
//     semantics, own session and process group, pinned to its cores, as the
//     configured user);
//   - for a queued task (PrepareStart), makes all of that ahead, the
//     process included (Spawner::Park: it waits before its execve), so
//     that the start after its predecessor's exit is one write;
//   - watches the task's pidfd and output pipes on the Reactor: no SIGCHLD,
//     no sleeping, no polling;
//   - on exit: kills whatever the task left behind (the process group, and
//     with cgroups everything in the cage, daemonized grandchildren
//     included), waits for those to die, reads the accounting, removes the
//     cage, reads the task's result file and calls the task's callback.
//
// Kill: SIGTERM (or the signal asked for) to the task's process group,
// then after the grace period SIGKILL to the group and to everything in
// the cage. With rlimit/none isolation a grandchild that left the process
// group (setsid) is out of reach; cgroup isolation has no such hole.
//
// Suspend and Resume (a workstation's owner is back, then gone again):
// the cage's freezer stops every process of the task where it is; without
// one (rlimit, none) SIGSTOP to the task's process group does, which a
// grandchild that left the group escapes and a program can notice (a
// SIGCONT handler of its runs at the resume). Any ending of a suspended
// task (Kill, its grace, the executor's destruction, its own exit) lets
// it go on first, so that its signals are delivered and it dies.
//
// Who tasks run as (task_account.h): one account (`task_user`; root with
// `run_as_root`; the worker's own when it is not root), or per user
// (`per_user`: each task as its TaskSpec::user's account, looked up when
// its directories are made, a refusal failing that call and so the
// start). A worker running as root with none of the three is a
// configuration error at Create.
//
// Threading: single-threaded. Every call, and every callback, happens on
// the thread that runs the Reactor.
#ifndef DROVER_WORKER_EXEC_EXECUTOR_H_
#define DROVER_WORKER_EXEC_EXECUTOR_H_

#include <signal.h>
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/ids.h"
#include "common/status.h"
#include "common/time.h"
#include "common/unique_fd.h"
#include "worker/exec/command_cache.h"
#include "worker/exec/container.h"
#include "worker/exec/event_loop.h"
#include "worker/exec/isolator.h"
#include "worker/exec/spare_dirs.h"
#include "worker/exec/spawn.h"
#include "worker/exec/task_account.h"

namespace drover::worker {

struct WarmInterpreter;

// Told of each task's process group, so that something outside the worker
// can end it should the worker die (reaper.h) or its next life find it
// (life_record.h). Called on the executor's thread; must not call back
// into the executor.
class ProcessWatch {
 public:
  virtual ~ProcessWatch() = default;
  // The task `name` ("12.3.1") runs in the process group led by `pid`: the
  // process exists (made by Spawn, or made ahead and about to be released).
  virtual void Started(pid_t pid, const std::string& name) = 0;
  // The group has been sent SIGKILL and its leader is about to be reaped
  // (until then its number cannot be given to another group).
  virtual void Ended(pid_t pid) = 0;
};

struct ExecutorOptions {
  std::string workdir;                      // task directories go under here
  std::string task_user;                    // unix user tasks run as when the worker is root
  bool run_as_root = false;                 // allow tasks to run as root (no task_user)
  uint64_t output_cap_bytes = 64ull << 20;  // per stream, default for tasks
  uint64_t result_cap_bytes = 64 << 10;     // DROVER_RESULT read-back cap
  Duration default_grace = Seconds(10);     // TERM -> KILL
  bool inherit_environment = true;          // start from the worker's env
  // Per-user mode (root only, without task_user): each task runs as the
  // account of its TaskSpec::user, the same name or user_map's
  // (UserAccounts); run_as_root then allows an account that is root.
  bool per_user = false;
  // Job user -> account, for per_user.
  std::map<std::string, std::string> user_map;
  // This worker's name, for per-user refusals ("... on worker w1").
  std::string worker_name;
  // PrepareStart also makes the task's process, waiting before its execve
  // (Spawner::Park), so that Start is one write to a pipe.
  bool park_prepared = true;
  // Not owned; must outlive the executor. Null: nobody is told.
  ProcessWatch* watch = nullptr;
  // Warm interpreters (warm_interpreter.h): a task with DROVER_WARM=1 in
  // its environment runs as a call in an interpreter kept from an earlier
  // task of the same key, in the task's cage (its own, refitted, or one
  // it is moved into) and on its cores for the call. Off: such a task starts its own process like
  // any other.
  bool warm_interpreters = true;
  // How often the directories of tasks with a `disk` limit are measured
  // (a walk of each; at most a tenth of the time goes to a walk).
  Duration disk_check_every = Seconds(2);
  Duration warm_idle = Seconds(300);  // an idle interpreter is ended after this
  size_t warm_max_idle = 8;           // idle ones kept; the oldest is ended first
  // What runs tasks with an `image` (FindContainerRuntime); none: such a
  // task fails to start, saying why.
  std::optional<ContainerRuntime> container;
};

struct TaskSpec {
  TaskId id;
  uint32_t attempt = 1;
  int64_t task_index = -1;  // DROVER_TASK_INDEX (array index); -1: id.index
  std::vector<std::string> argv;
  std::vector<std::pair<std::string, std::string>> env;  // added/overridden
  std::string user;                                      // the job's user (per-user mode)
  std::string working_dir;                               // empty: the task directory
  int64_t milli_cpus = 0;
  uint64_t memory_bytes = 0;
  int64_t max_pids = 0;
  std::vector<int> cores;         // pinned cores (affinity + cpuset)
  std::vector<int> gpus;          // assigned GPU indices
  uint64_t output_cap_bytes = 0;  // 0: ExecutorOptions::output_cap_bytes
  // A network namespace of its own with only loopback up (`network =
  // "none"`); such a task never runs in a warm interpreter.
  bool private_network = false;
  // Disk I/O limits on the block device of the work directory; a task
  // with any fails to start where the isolation cannot enforce them.
  core::IoLimits io;
  // The most its directory may hold (0: no limit): measured while it runs
  // (ExecutorOptions::disk_check_every), and a task found holding more is
  // killed and fails with TaskResult::disk_error saying so.
  uint64_t disk_bytes = 0;
  // The OCI image it runs in (empty: the worker's own system), through
  // the container runtime of ExecutorOptions::container; never in a warm
  // interpreter.
  std::string image;
  core::ImagePull image_pull = core::ImagePull::kMissing;
};

// The directories of one task attempt. Every directory named here exists
// when the task starts; the files appear when written.
struct TaskDirs {
  std::string task;  // <workdir>/<job>/<index>.<attempt>   (cwd)
  // DROVER_INPUTS: <task>/inputs for a task with inputs; otherwise
  // <workdir>/.no-inputs, one empty directory shared by all such tasks
  // (read-only to a task user).
  std::string inputs;
  std::string output;       // <task>/output    DROVER_OUTPUT_DIR
  std::string checkpoint;   // <workdir>/<job>/<index>.checkpoint (kept across retries)
  std::string result;       // <task>/result    DROVER_RESULT
  std::string stdout_path;  // <task>/stdout, made with the stream's first byte
  std::string stderr_path;  // <task>/stderr, likewise; absent: the task wrote nothing
};

// A task's checkpoint directory under `workdir`, the same for every
// attempt: <workdir>/<job>/<index>.checkpoint (TaskDirs::checkpoint).
std::string CheckpointDirOf(const std::string& workdir, TaskId id);

// When Start made a task's process, on the wall clock (microseconds).
struct StartTimes {
  // The child process existed: its first step after clone reads
  // CLOCK_REALTIME (SpawnedProcess::spawned_at), before its setup and the
  // execve. This is what the worker reports as `started_at`. For a process
  // made ahead (PrepareStart), the moment Start released it.
  Time spawned;
  // Spawn returned in the parent: the child's setup (session, cgroup,
  // rlimits, affinity, stdio, user, chdir) was done and execve succeeded.
  // For a process made ahead, the release too (its execve follows).
  Time exec_done;
};

enum class TaskOutcome { kSucceeded, kFailed, kCanceled };

// How Executor::Suspend stopped a task.
enum class SuspendHow {
  kFreezer,     // the cage's cgroup freezer: every process, wherever it is
  kStopSignal,  // SIGSTOP to the task's process group (no freezer)
};

struct TaskResult {
  TaskId id;
  uint32_t attempt = 0;
  TaskOutcome outcome = TaskOutcome::kFailed;
  // Facts only: the core words the reason people read ("exit code 3",
  // "OOM-killed (limit 64 MiB, peak 64 MiB)") from these fields.
  // What the exit code does not tell, for the server: output the worker
  // could not save, or a full task file system ("stdout not saved: no space
  // left on device (PATH)"). Such an attempt failed even when the task
  // exited 0.
  std::string disk_error;
  // The executor itself stopped it for what disk_error says (it held more
  // than its `disk`): its signal is the worker's SIGKILL, not the program's
  // doing, and the reason alone says why it ended.
  bool stopped_for_disk = false;
  int exit_code = -1;  // when the task exited
  int signal = 0;      // when a signal ended it
  bool oom_killed = false;
  Duration wall{0};
  Duration cpu{0};           // user + system of the task's tree
  uint64_t peak_memory = 0;  // bytes
  // Bytes read from and written to block devices, where the cage counts
  // them (CageUsage).
  std::optional<uint64_t> io_read_bytes;
  std::optional<uint64_t> io_write_bytes;
  std::string result_text;   // DROVER_RESULT contents, capped
  // The program never ran: the execve of the process made ahead
  // (PrepareStart) failed after Start, "command not found: X" as Start
  // reports it for a process it makes itself; exit_code is -1.
  std::string start_error;
  // The digest of the container image it ran in ("sha256:..."); empty:
  // no image, or not known.
  std::string image_digest;
  bool stdout_truncated = false;
  bool stderr_truncated = false;
  size_t leftovers_killed = 0;  // processes killed after the task exited
  TaskDirs dirs;
};

class DirectorySizer;

class Executor {
 public:
  using DoneCallback = std::function<void(const TaskResult&)>;

  // Fails with FailedPrecondition when the worker runs as root with none of
  // task_user, per_user and run_as_root, when task_user does not exist,
  // when a user switch (task_user, per_user) is asked for without root, or
  // when both task_user and per_user are; with Unavailable when workdir
  // cannot be created.
  // Also FailedPrecondition when tasks that run as other accounts
  // (task_user, per_user) could not reach workdir (workdir_access.h).
  static Result<std::unique_ptr<Executor>> Create(ExecutorOptions options, Reactor* reactor,
                                                  std::unique_ptr<Isolator> isolator);
  // What Create changed so that task accounts reach workdir, for the log
  // ("gave /var/w1 the search bit ..."); empty when nothing.
  const std::string& workdir_note() const { return workdir_note_; }
  // Kills every running task with SIGKILL (no grace) and removes their
  // cages; callbacks are not called.
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Creates the task's directories (idempotent), so the caller can put
  // dependency results into `inputs` (made only `with_inputs`) before
  // Start. Start uses the directories of the last PrepareDirs of the same
  // task attempt, or makes them itself (without inputs/). The directories
  // belong to the task's account: in per-user mode that of `user` (the
  // job's, TaskSpec::user), whose refusal (UserAccounts::For: "user ana
  // has no account on worker w1 (...)") is this call's error, as it is
  // Start's and PrepareStart's.
  Result<TaskDirs> PrepareDirs(TaskId id, uint32_t attempt, bool with_inputs = false,
                               const std::string& user = {});

  // PrepareDirs, and also what Start would do before the task's program
  // runs: its environment, its program found on PATH, and (park_prepared)
  // its cage, output pipes and process, which does all its setup and
  // waits before its execve (Spawner::Park). A later Start of the same
  // attempt with the same spec only lets that process go on (queue-ahead:
  // the start that follows a predecessor's exit); with a different spec,
  // or when the process died meanwhile, Start makes one as usual. Fails as
  // PrepareDirs does, or as Start would for the command ("command not
  // found: X", "permission denied: X"); then the directories stay
  // prepared, the command does not. A process that cannot be made is no
  // error here: Start makes it, and reports what fails.
  Result<TaskDirs> PrepareStart(const TaskSpec& spec, bool with_inputs = false);

  // The process PrepareStart made for the task's next start: its pid, and
  // whether it has done its setup and waits (for tests and diagnostics).
  struct ParkedInfo {
    pid_t pid = -1;
    bool waiting = false;
  };
  std::optional<ParkedInfo> ParkedProcessOf(TaskId id) const;

  // Starts the task; `done` is called once, from the event loop, when it
  // has ended and everything it left has been killed. Returns the pid, and
  // when `times` is given, when the process was made (StartTimes).
  // Fails (and `done` is never called) with:
  //   AlreadyExists      the task is already running here;
  //   NotFound           "command not found: X", "working directory missing: /x";
  //   PermissionDenied   "permission denied: ./run.sh";
  //   other codes        cage, directory or pipe failures, named.
  // The caller reports the message as the task's failure reason.
  Result<pid_t> Start(const TaskSpec& spec, DoneCallback done, StartTimes* times = nullptr);

  // Forgets the directories PrepareDirs made for an attempt that will not
  // start (canceled while queued), ends the process PrepareStart made for
  // it (it never ran the program), and removes what it made there: the
  // inputs (files and directory), output/ and the task directory, each
  // only when nothing else is in it. The checkpoint directory is kept (it
  // belongs to every attempt). Best effort: a directory that cannot be
  // removed stays, and nothing is reported.
  void DiscardPrepared(TaskId id, uint32_t attempt);

  // A succeeded attempt's `output/` and checkpoint directory, when empty,
  // kept for later tasks of the same account (spare_dirs.h) where the work
  // directory is on ext4 without a journal: the caller has taken what it
  // needed from them. Nothing while an attempt of the task is prepared or
  // runs here.
  void Recycle(TaskId id, const TaskDirs& dirs);

  // Cancels a running task: `signal` (SIGTERM, or one the program
  // catches to checkpoint, such as SIGUSR1) to its process group now, and
  // after `grace` (nullopt: the default) SIGKILL to the group and the cage;
  // a grace of zero sends SIGKILL at once instead of `signal`. A suspended
  // task is resumed right after the signal, so it is delivered and the
  // grace runs while the task does. The task ends as kCanceled. NotFound
  // when the task is not running; a second Kill with a shorter grace
  // shortens it (and sends its signal too).
  Status Kill(TaskId id, std::optional<Duration> grace = std::nullopt, int signal = SIGTERM);

  // Stops every process of the running task where it is: the cage's
  // freezer (Isolator's TaskCage::Freeze) when it has one, else SIGSTOP
  // to the task's process group; also when the freezer fails (it is
  // thawed again first), so that a task can always be stopped. Returns how
  // it stopped the task; a task already suspended stays so and the answer
  // is how it was. NotFound when no such task runs (or it has exited and
  // its leftovers are being killed). The wall time of a suspended task
  // goes on counting.
  Result<SuspendHow> Suspend(TaskId id);

  // Undoes Suspend: thaws the cage, or SIGCONT to the process group. Ok
  // when the task is not suspended; NotFound when no such task runs; the
  // freezer's error when the cage cannot be thawed (the task stays
  // suspended).
  Status Resume(TaskId id);

  // Makes a running task's stdout and stderr files exist now (they are
  // otherwise made with the first byte), for a reader that wants to follow
  // them. NotFound when the task is not running; else the file's error.
  Status OpenOutputFiles(TaskId id);

  size_t running() const { return tasks_.size(); }
  IsolationMode isolation() const { return isolator_->mode(); }

 private:
  struct Task;
  struct Launch;
  struct Parked;
  Executor(ExecutorOptions options, Reactor* reactor, std::unique_ptr<Isolator> isolator,
           std::unique_ptr<Spawner> spawner, UniqueFd dev_null);

  void OnOutput(Task* task, int which);
  void OnExit(Task* task);
  void OnGraceExpired(Task* task);
  // Lets a suspended task go on (thaw, or SIGCONT to its group) once it
  // has been sent what should end it; nothing for one not suspended.
  Status Wake(Task* task);
  void OnLeftoverExit(Task* task, int pidfd);
  void Finish(Task* task);
  std::vector<std::string> BuildEnvironment(const TaskSpec& spec, const TaskDirs& dirs,
                                            const TaskAccount* account) const;
  // The environment and the path to execve for `spec` (Start's rules).
  struct Command {
    std::vector<std::string> argv;  // what it was made for
    std::vector<std::pair<std::string, std::string>> env;
    std::string working_dir;
    std::vector<std::string> environment;  // "K=V", what the task gets
    std::string exe;
    // What the process execs when not spec.argv: a container's start
    // (container.h), whose argv[0] is exe.
    std::vector<std::string> run_argv;
    std::string image;  // what it was made for
  };
  Result<Command> MakeCommand(const TaskSpec& spec, const TaskDirs& dirs,
                              const TaskAccount* account) const;
  // MakeCommand's answer for a task with an image: `c` (its environment
  // built) becomes the container's start (container.h).
  Result<Command> MakeContainerCommand(const TaskSpec& spec, const TaskDirs& dirs,
                                       const TaskAccount* account, Command c) const;
  // The name of `spec`'s container: unique on the machine.
  std::string ContainerName(const TaskSpec& spec) const;
  // The cage, output captures and spawn plan of a start of `spec` as
  // `account` (null: the worker's own); a cage already in `launch` is
  // used as it is.
  Status MakeLaunch(const TaskSpec& spec, const TaskDirs& dirs, const Command& command,
                    const TaskAccount* account, Launch& launch);
  // What the isolator is asked for `spec`'s cage.
  Result<CageSpec> CageSpecOf(const TaskSpec& spec, const Command& command) const;
  // PrepareStart's process; nullptr if it cannot be made.
  std::unique_ptr<Parked> Park(const TaskSpec& spec, const TaskDirs& dirs, const Command& command,
                               const TaskAccount* account);
  // The account tasks of the job user `user` run as: the one account
  // (null: the worker's own), or per user UserAccounts::For's answer.
  Result<std::shared_ptr<const TaskAccount>> AccountFor(const std::string& user) const;
  // Watches a started task; on failure undoes its start.
  Result<pid_t> Register(std::unique_ptr<Task> task);
  // What OnExit does once the task's process is reaped, and a warm call's
  // end: kills what the task left in its cage, then Finish.
  void KillLeftovers(Task* task);

  // Warm interpreters (executor_warm.cc).
  Result<pid_t> StartWarm(const TaskSpec& spec, const TaskDirs& dirs, const Command& command,
                          const TaskAccount* account, std::unique_ptr<Task> task,
                          StartTimes* times);
  // The task's interpreter replied: the call has ended. False when no
  // reply is there (yet, or ever: the interpreter died).
  bool OnWarmReply(Task* task);
  // An idle interpreter of `key`, out of the idle list (one whose last
  // call had `cores` first); null when none.
  std::unique_ptr<WarmInterpreter> TakeIdle(const std::string& key, const std::vector<int>& cores);
  // An idle interpreter for `spec`'s call: in its own cage, refitted for
  // the call and moved to `cage`, or waiting in the warm cage (moved out
  // of its own where that cannot be refitted); null when none.
  std::unique_ptr<WarmInterpreter> TakeIdleFor(const std::string& key, const TaskSpec& spec,
                                               const Command& command,
                                               std::unique_ptr<TaskCage>& cage);
  // `cage`'s removal, or kept to be tried again later.
  void RemoveCage(std::unique_ptr<TaskCage> cage);
  // An idle interpreter, or one that will exit, back under watch.
  void ReturnWarm(std::unique_ptr<WarmInterpreter> w);
  void OnIdleExit(WarmInterpreter* w);
  void OnIdleTimer();
  void ArmIdleTimer();
  // SIGKILL to the interpreter's group, and its reaping (it is not watched).
  void EndWarm(WarmInterpreter& w);
  // The cage idle interpreters live in between calls (cgroups only).
  Result<TaskCage*> WarmHome();
  Status MakeTaskDir(const std::string& job, const std::string& task);

  // Tasks with a `disk` limit (executor_disk.cc): their directories are
  // measured on the sizer's thread, asked on a timer while any runs; one
  // over its limit is killed.
  void WatchDisk();
  void OnDiskTimer();
  void OnDiskMeasured();

  ExecutorOptions options_;
  Reactor* reactor_;
  std::unique_ptr<Isolator> isolator_;
  bool cgroups_;  // the isolator's cages are cgroups (it has cgroup roots)
  std::unique_ptr<Spawner> spawner_;
  UniqueFd dev_null_;
  // One-account mode: the account every task runs as (null: the worker's
  // own). Per-user mode: accounts_ instead.
  std::shared_ptr<const TaskAccount> account_;
  std::optional<UserAccounts> accounts_;
  std::vector<std::pair<std::string, std::string>> base_env_;
  std::map<TaskId, std::unique_ptr<Task>> tasks_;
  // Directories made by PrepareDirs (and the command by PrepareStart) not
  // yet used by Start (one entry per task; a later PrepareDirs replaces it).
  struct Prepared {
    uint32_t attempt = 0;
    TaskDirs dirs;
    std::string user;                            // the job user they were made for
    std::shared_ptr<const TaskAccount> account;  // who owns them (null: the worker)
    std::optional<Command> command;
    std::shared_ptr<Parked> parked;  // PrepareStart's process
  };
  std::map<TaskId, Prepared> prepared_;
  // Programs found on PATH, for the tasks that follow (an array's tasks
  // search once).
  mutable CommandCache commands_;
  std::string no_inputs_;  // <workdir>/.no-inputs
  // <workdir>/.spare, where new inodes are dear (spare_dirs.h); else null.
  std::unique_ptr<SpareDirs> spare_dirs_;
  std::string workdir_note_;  // Create's change to workdir, if any
  // Cages whose removal failed (a dying process still inside); retried
  // whenever a task finishes.
  std::vector<std::unique_ptr<TaskCage>> stale_cages_;
  // Warm interpreters between calls, oldest first (one that is retiring
  // stays until reaped); the cage they wait in; the timer that ends those
  // idle for warm_idle; the cores a call without pinned cores may use.
  std::vector<std::unique_ptr<WarmInterpreter>> idle_;
  std::unique_ptr<TaskCage> warm_home_;
  UniqueFd idle_timer_;
  UniqueFd disk_timer_;  // armed while a task with a `disk` limit runs
  std::unique_ptr<DirectorySizer> sizer_;  // made for the first such task
  cpu_set_t all_cpus_;
};

}  // namespace drover::worker

#endif  // DROVER_WORKER_EXEC_EXECUTOR_H_
