// TaskRunner: what the agent's shell (agent.cc) asks of whatever runs its
// tasks, and nothing more. The real one is the Executor (ExecutorRunner
// below, which owns it); a test can put a fake in its place and drive the
// shell without processes.
//
// The operations mean what the Executor's of the same name mean
// (executor.h): a task's directories, a queued task made ahead (process
// included) and released by Start, a kill with a chosen first signal and a
// grace period, a suspend and resume (idle-desktop mode: the workstation's
// owner is back), the output files opened for a reader that follows.
// Results come back through the DoneCallback given to Start, on the
// runner's loop, once per started task.
//
// Threading: everything on the loop the runner was made for.
#ifndef DROVER_WORKER_AGENT_TASK_RUNNER_H_
#define DROVER_WORKER_AGENT_TASK_RUNNER_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "common/ids.h"
#include "common/status.h"
#include "common/time.h"
#include "worker/exec/executor.h"

namespace drover::worker {

class TaskRunner {
 public:
  using DoneCallback = Executor::DoneCallback;

  virtual ~TaskRunner() = default;
  TaskRunner() = default;
  TaskRunner(const TaskRunner&) = delete;
  TaskRunner& operator=(const TaskRunner&) = delete;

  // The attempt's directories (inputs/ too with `with_inputs`), owned by
  // the account tasks of the job user `user` run as; fails when they cannot
  // be made or that user is refused (per-user mode, task_account.h).
  virtual Result<TaskDirs> PrepareDirs(TaskId id, uint32_t attempt, bool with_inputs,
                                       const std::string& user) = 0;
  // A queued task made ahead, up to its process waiting before its execve;
  // its later Start releases it. Fails as the start would (bad user, no
  // such command, no cage).
  virtual Result<TaskDirs> PrepareStart(const TaskSpec& spec, bool with_inputs) = 0;
  // Starts the task (or releases the one PrepareStart made); `done` is
  // called once when it has ended. Fails without calling `done` ("command
  // not found: x"). `times`, when not null, receives when it began.
  virtual Result<pid_t> Start(const TaskSpec& spec, DoneCallback done, StartTimes* times) = 0;
  // Drops what PrepareStart made for the attempt (its process is killed);
  // nothing if there is none.
  virtual void DiscardPrepared(TaskId id, uint32_t attempt) = 0;
  // A succeeded attempt's empty directories kept for reuse; nothing when
  // the runner keeps none.
  virtual void Recycle(TaskId id, const TaskDirs& dirs) {
    (void)id;
    (void)dirs;
  }
  // Ends the task: `signal` (SIGTERM, or one it catches to checkpoint),
  // then KILL after `grace` (nullopt: the runner's default); a suspended
  // task is resumed to receive them. NotFound when no such task runs.
  virtual Status Kill(TaskId id, std::optional<Duration> grace, int signal) = 0;
  // Stops every process of the task where it is (freezer, or SIGSTOP to
  // its process group) and says how; a suspended task stays so. NotFound
  // when no such task runs.
  virtual Result<SuspendHow> Suspend(TaskId id) = 0;
  // Undoes Suspend. Ok when the task is not suspended; NotFound when no
  // such task runs.
  virtual Status Resume(TaskId id) = 0;
  // Makes the running task's output files now, for a reader that follows.
  virtual Status OpenOutputFiles(TaskId id) = 0;
};

// The real runner: owns the Executor and passes each call on. Destroying it
// destroys the Executor (every task killed at once, no callback called).
class ExecutorRunner final : public TaskRunner {
 public:
  explicit ExecutorRunner(std::unique_ptr<Executor> executor) : executor_(std::move(executor)) {}

  Result<TaskDirs> PrepareDirs(TaskId id, uint32_t attempt, bool with_inputs,
                               const std::string& user) override {
    return executor_->PrepareDirs(id, attempt, with_inputs, user);
  }
  Result<TaskDirs> PrepareStart(const TaskSpec& spec, bool with_inputs) override {
    return executor_->PrepareStart(spec, with_inputs);
  }
  Result<pid_t> Start(const TaskSpec& spec, DoneCallback done, StartTimes* times) override {
    return executor_->Start(spec, std::move(done), times);
  }
  void DiscardPrepared(TaskId id, uint32_t attempt) override {
    executor_->DiscardPrepared(id, attempt);
  }
  void Recycle(TaskId id, const TaskDirs& dirs) override { executor_->Recycle(id, dirs); }
  Status Kill(TaskId id, std::optional<Duration> grace, int signal) override {
    return executor_->Kill(id, grace, signal);
  }
  Result<SuspendHow> Suspend(TaskId id) override { return executor_->Suspend(id); }
  Status Resume(TaskId id) override { return executor_->Resume(id); }
  Status OpenOutputFiles(TaskId id) override { return executor_->OpenOutputFiles(id); }

 private:
  std::unique_ptr<Executor> executor_;
};

}  // namespace drover::worker

#endif  // DROVER_WORKER_AGENT_TASK_RUNNER_H_
