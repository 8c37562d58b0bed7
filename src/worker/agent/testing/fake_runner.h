// FakeRunner: a TaskRunner that starts nothing. It remembers each start,
// kill, suspend and resume, and ends a task when the test says (Exit), so
// an agent's shell runs on its seams with no process (agent_shell_test, the
// in-process cluster harness).
//
// Thread safety: none; it belongs to the agent's loop thread.
#ifndef DROVER_WORKER_AGENT_TESTING_FAKE_RUNNER_H_
#define DROVER_WORKER_AGENT_TESTING_FAKE_RUNNER_H_

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/time.h"
#include "net/event_loop.h"
#include "worker/agent/task_runner.h"

namespace drover::worker::testing {

class FakeRunner final : public TaskRunner {
 public:
  explicit FakeRunner(const Clock& clock) : clock_(clock) {}

  Result<TaskDirs> PrepareDirs(TaskId id, uint32_t attempt, bool, const std::string&) override {
    TaskDirs dirs;
    dirs.task = "/nowhere/" + id.ToString() + "." + std::to_string(attempt);
    return dirs;
  }
  Result<TaskDirs> PrepareStart(const TaskSpec& spec, bool with_inputs) override {
    return PrepareDirs(spec.id, spec.attempt, with_inputs, spec.user);
  }
  Result<pid_t> Start(const TaskSpec& spec, DoneCallback done, StartTimes* times) override {
    started.push_back(spec.id);
    done_[spec.id] = std::move(done);
    attempts_[spec.id] = spec.attempt;
    if (times) times->spawned = times->exec_done = clock_.Now();
    return 4242;
  }
  void DiscardPrepared(TaskId, uint32_t) override {}
  void Recycle(TaskId id, const TaskDirs&) override { recycled.push_back(id); }
  Status Kill(TaskId id, std::optional<Duration>, int signal) override {
    killed.push_back(id);
    kill_signals.push_back(signal);
    if (exit_on_kill_ != nullptr && Running(id)) {
      // As a process does: it ends a moment later, by the signal.
      exit_on_kill_->Post([this, id, attempt = attempts_[id], signal] {
        if (Running(id) && attempts_[id] == attempt) Signaled(id, signal);
      });
    }
    return Status::Ok();
  }
  // From now on a killed task ends by its signal on a later turn of `loop`
  // (a harness's tasks; agent_shell_test ends them itself).
  void ExitOnKill(net::EventLoop& loop) { exit_on_kill_ = &loop; }
  Result<SuspendHow> Suspend(TaskId id) override {
    suspended.push_back(id);
    return SuspendHow::kFreezer;
  }
  Status Resume(TaskId id) override {
    resumed.push_back(id);
    return Status::Ok();
  }
  Status OpenOutputFiles(TaskId) override { return Status::Ok(); }

  // True while attempt `attempt` of `id` runs here (started, not ended).
  bool Running(TaskId id) const { return done_.count(id) != 0; }
  uint32_t AttemptOf(TaskId id) const {
    auto it = attempts_.find(id);
    return it == attempts_.end() ? 0 : it->second;
  }

  // Every task died with its worker (kill -9): none will be reported.
  void Forget() {
    done_.clear();
    attempts_.clear();
  }

  // Task `id` is ended by `signal`.
  void Signaled(TaskId id, int signal) {
    TaskResult r;
    r.id = id;
    r.attempt = attempts_[id];
    r.outcome = TaskOutcome::kFailed;
    r.signal = signal;
    DoneCallback done = std::move(done_[id]);
    done_.erase(id);
    done(r);
  }

  // Task `id` exits with `exit_code`, having written `result`.
  void Exit(TaskId id, int exit_code, std::string result) {
    TaskResult r;
    r.id = id;
    r.attempt = attempts_[id];
    r.outcome = exit_code == 0 ? TaskOutcome::kSucceeded : TaskOutcome::kFailed;
    r.exit_code = exit_code;
    r.result_text = std::move(result);
    DoneCallback done = std::move(done_[id]);
    done_.erase(id);
    done(r);
  }

  std::vector<TaskId> started;
  std::vector<TaskId> killed;
  std::vector<int> kill_signals;  // the first signal of each Kill
  std::vector<TaskId> suspended;
  std::vector<TaskId> resumed;
  std::vector<TaskId> recycled;  // tasks whose directories were offered for reuse

 private:
  const Clock& clock_;
  net::EventLoop* exit_on_kill_ = nullptr;
  std::map<TaskId, DoneCallback> done_;
  std::map<TaskId, uint32_t> attempts_;
};

}  // namespace drover::worker::testing

#endif  // DROVER_WORKER_AGENT_TESTING_FAKE_RUNNER_H_
