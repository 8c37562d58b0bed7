// Executor's watch over tasks with a `disk` limit: while any runs, a timer
// asks the DirectorySizer's thread to measure each one's directory (its
// inputs aside); a task found holding more than its limit is killed at once
// and fails saying so (executor.h, TaskSpec::disk_bytes). The walks run off
// the loop: a directory of many files never holds up other tasks' starts.
#include <sys/timerfd.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "common/quantity.h"
#include "worker/exec/directory_sizer.h"
#include "worker/exec/executor.h"
#include "worker/exec/executor_internal.h"

namespace drover::worker {

void Executor::WatchDisk() {
  if (!sizer_) {
    Result<std::unique_ptr<DirectorySizer>> sizer = DirectorySizer::Create();
    if (!sizer.ok()) return;  // such tasks then run unmeasured
    if (!reactor_->Watch((*sizer)->done_fd(), [this] { OnDiskMeasured(); }).ok()) return;
    sizer_ = std::move(sizer).value();
  }
  if (disk_timer_.valid()) return;  // armed: it runs while any such task does
  disk_timer_.Reset(timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK));
  if (!disk_timer_.valid()) return;
  if (!reactor_->Watch(disk_timer_.fd(), [this] { OnDiskTimer(); }).ok()) {
    disk_timer_.Reset();
    return;
  }
  const Duration every = std::max(options_.disk_check_every, Millis(10));
  itimerspec when{};
  when.it_value.tv_sec = when.it_interval.tv_sec = every.count() / 1000000;
  when.it_value.tv_nsec = when.it_interval.tv_nsec = (every.count() % 1000000) * 1000;
  timerfd_settime(disk_timer_.fd(), 0, &when, nullptr);
}

void Executor::OnDiskTimer() {
  uint64_t expirations;
  (void)!read(disk_timer_.fd(), &expirations, sizeof(expirations));
  bool any = false;
  for (auto& [id, task] : tasks_) {
    if (task->disk_limit == 0 || task->exited || !task->over_disk.empty()) continue;
    any = true;
    // One walk at a time per task; a directory whose walk is long is
    // measured at most a tenth of the time.
    if (task->disk_measuring || task->disk_checked.Elapsed() < task->disk_walk * 10) continue;
    task->disk_measuring = true;
    sizer_->Measure(id, task->attempt, task->dirs.task, task->dirs.inputs);
  }
  if (!any) {
    reactor_->Unwatch(disk_timer_.fd());
    disk_timer_.Reset();
  }
}

void Executor::OnDiskMeasured() {
  std::vector<TaskId> over;
  for (const DirectorySizer::Done& done : sizer_->TakeDone()) {
    auto it = tasks_.find(done.task);
    if (it == tasks_.end() || it->second->attempt != done.attempt) continue;  // ended meanwhile
    Task& task = *it->second;
    task.disk_measuring = false;
    task.disk_walk = done.took;
    task.disk_checked = Stopwatch();
    if (task.exited || !task.over_disk.empty() || done.bytes <= task.disk_limit) continue;
    task.over_disk = "disk: " + FormatBytes(done.bytes) +
                     " written under its directory, more than disk " + FormatBytes(task.disk_limit);
    over.push_back(done.task);
  }
  for (const TaskId& id : over) (void)Kill(id, Duration::zero());
}

}  // namespace drover::worker
