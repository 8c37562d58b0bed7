// Executor's stops: Kill (the signal to the group, a grace on a timerfd,
// then SIGKILL of everything in the cage), and Suspend / Resume (the
// freezer, or SIGSTOP / SIGCONT to the group) (executor.h).
#include <signal.h>
#include <sys/timerfd.h>
#include <time.h>

#include <optional>

#include "worker/exec/executor.h"
#include "worker/exec/executor_internal.h"

namespace drover::worker {

void Executor::OnGraceExpired(Task* task) {
  if (task->timer_fd.valid()) {
    reactor_->Unwatch(task->timer_fd.fd());
    task->timer_fd.Reset();
  }
  if (task->exited) return;
  killpg(task->pid, SIGKILL);
  (void)task->cage->KillAll();  // its pidfds close at once
  (void)Wake(task);             // the kills take effect
}

Status Executor::Wake(Task* task) {
  if (!task->suspended) return Status::Ok();
  if (*task->suspended == SuspendHow::kFreezer) {
    RETURN_IF_ERROR(task->cage->Freeze(false));
  } else {
    killpg(task->pid, SIGCONT);
  }
  task->suspended.reset();
  return Status::Ok();
}

Result<SuspendHow> Executor::Suspend(TaskId id) {
  auto it = tasks_.find(id);
  if (it == tasks_.end() || it->second->exited) {
    return NotFound("task " + id.ToString() + " is not running");
  }
  Task* task = it->second.get();
  if (task->suspended) return *task->suspended;
  if (task->cage->Freeze(true).ok()) {
    task->suspended = SuspendHow::kFreezer;
    return SuspendHow::kFreezer;
  }
  // No freezer, or one that failed: the process group can still be
  // stopped. A cage left partly frozen is thawed, so Resume has one thing
  // to undo.
  (void)task->cage->Freeze(false);
  killpg(task->pid, SIGSTOP);
  task->suspended = SuspendHow::kStopSignal;
  return SuspendHow::kStopSignal;
}

Status Executor::Resume(TaskId id) {
  auto it = tasks_.find(id);
  if (it == tasks_.end()) return NotFound("task " + id.ToString() + " is not running");
  return Wake(it->second.get());
}

Status Executor::Kill(TaskId id, std::optional<Duration> grace, int signal) {
  auto it = tasks_.find(id);
  if (it == tasks_.end()) return NotFound("task " + id.ToString() + " is not running");
  Task* task = it->second.get();
  if (task->exited) return Status::Ok();  // already ending
  task->canceled = true;
  const Duration g = grace.value_or(options_.default_grace);
  if (g <= Duration(0)) {
    OnGraceExpired(task);
    return Status::Ok();
  }
  killpg(task->pid, signal);
  // Sent first, so a stopped group sees it as it wakes; a frozen one gets
  // it at the thaw.
  (void)Wake(task);
  if (!task->timer_fd.valid()) {
    task->timer_fd.Reset(timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK));
    if (!task->timer_fd.valid()) {
      OnGraceExpired(task);  // no timer: no grace
      return Status::Ok();
    }
    RETURN_IF_ERROR(
        reactor_->Watch(task->timer_fd.fd(), [this, task] { OnGraceExpired(task); }));
  }
  itimerspec when{};
  when.it_value.tv_sec = g.count() / 1000000;
  when.it_value.tv_nsec = (g.count() % 1000000) * 1000;
  // A later Kill may only shorten the grace.
  itimerspec current{};
  timerfd_gettime(task->timer_fd.fd(), &current);
  const bool armed = current.it_value.tv_sec != 0 || current.it_value.tv_nsec != 0;
  const auto left_us = current.it_value.tv_sec * 1000000 + current.it_value.tv_nsec / 1000;
  if (!armed || left_us > g.count()) timerfd_settime(task->timer_fd.fd(), 0, &when, nullptr);
  return Status::Ok();
}

}  // namespace drover::worker
