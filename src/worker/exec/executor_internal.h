// The executor's private types, shared by its .cc files and no one else:
// Executor::Task (a started task), Executor::Launch (what one spawn needs)
// and Executor::Parked (a process made ahead by PrepareStart), and the
// modes of task directories and files. Only the executor's files include
// it (executor.cc: Create and the destructor; executor_prepare.cc: task
// directories, command and environment; executor_start.cc: parking and
// starting; executor_exit.cc: output, exit, reaping and the result;
// executor_kill.cc: kill, suspend and resume).
//
// Threading: executor.h's (the reactor's thread).
#ifndef DROVER_WORKER_EXEC_EXECUTOR_INTERNAL_H_
#define DROVER_WORKER_EXEC_EXECUTOR_INTERNAL_H_

#include <sys/stat.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/unique_fd.h"
#include "worker/exec/executor.h"
#include "worker/exec/isolator.h"
#include "worker/exec/output_capture.h"
#include "worker/exec/spawn.h"
#include "worker/exec/warm_interpreter.h"

namespace drover::worker {

struct Executor::Task {
  TaskId id;
  uint32_t attempt = 0;
  DoneCallback done;
  TaskDirs dirs;
  pid_t pid = -1;
  UniqueFd pidfd;
  std::unique_ptr<OutputCapture> out[2];  // stdout, stderr
  std::unique_ptr<TaskCage> cage;
  Stopwatch started;
  UniqueFd timer_fd;  // the grace period of a stop, once one was asked
  // How Suspend stopped it, until Resume (or its ending) let it go on.
  std::optional<SuspendHow> suspended;
  bool canceled = false;
  bool exited = false;
  // `disk`: the most its directory may hold (0: none); once it held more,
  // why it was killed (its failure's reason) and, between checks, what a
  // walk of its directory last cost.
  uint64_t disk_limit = 0;
  std::string over_disk;
  bool disk_measuring = false;  // a walk of its directory was asked for
  Duration disk_walk = Duration::zero();
  Stopwatch disk_checked;
  std::vector<UniqueFd> leftovers;  // pidfds of processes killed after exit
  TaskResult result;
  // Made ahead by PrepareStart: kept until the process is reaped (it owns
  // the memory the child used before its execve).
  std::unique_ptr<ParkedProcess> parked;
  // The warm interpreter running this task's call (pid and pidfd are its
  // own for the call's length); null for a task of its own process.
  std::unique_ptr<WarmInterpreter> warm;
  // Its result as the warm interpreter sent it with its reply, in place of
  // the result file; nullopt: read the file.
  std::optional<std::string> inline_result;
  // Run in a container image: its name (ContainerRun::name) and image,
  // whose digest and fetch error are read at its end; empty: none.
  std::string container;
  std::string image;
  bool forget_container = false;  // killed: its record in podman's store stays
};

// The cage, output captures and spawn plan of one start; the plan points
// into the spec, the command and this.
struct Executor::Launch {
  std::unique_ptr<TaskCage> cage;
  std::unique_ptr<OutputCapture> out[2];
  std::vector<char*> argv;
  std::vector<char*> envp;
  std::string cwd;
  SpawnPlan plan;
};

// A process made ahead of its start (PrepareStart), with its cage and
// output pipes, and the limits it was made with.
struct Executor::Parked {
  std::unique_ptr<ParkedProcess> process;
  std::unique_ptr<TaskCage> cage;
  std::unique_ptr<OutputCapture> out[2];
  TaskSpec spec;
  ~Parked() {
    process.reset();  // not released: killed and reaped
    if (cage) {
      Status s = cage->Remove();
      (void)s;  // nothing ran in it
    }
  }
};

// Task data is the task user's alone: its directories 0700 and its output
// files 0600, owned by that user when tasks run as one. The work directory
// and the job directories above them are 0711: passable, not listable.
constexpr mode_t kPrivateDir = 0700;
constexpr mode_t kPrivateFile = 0600;
constexpr mode_t kPassDir = 0711;

}  // namespace drover::worker

#endif  // DROVER_WORKER_EXEC_EXECUTOR_INTERNAL_H_
