// Executor's watch over tasks with a `disk` limit: while any runs, a
// timer walks each one's directory (its inputs aside) and adds up what
// its files hold on disk; a task that holds more than its limit is killed
// at once and fails saying so (executor.h, TaskSpec::disk_bytes).
#include <ftw.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <set>
#include <string>
#include <utility>

#include "common/quantity.h"
#include "worker/exec/executor.h"
#include "worker/exec/executor_internal.h"

namespace drover::worker {
namespace {

// nftw has no context argument: the walk on this thread adds up here.
struct Walk {
  std::string skip;  // a directory not counted (the task's inputs)
  uint64_t bytes = 0;
  std::set<std::pair<dev_t, ino_t>> linked;  // inodes with several names, counted once
};
thread_local Walk* walk = nullptr;

int Visit(const char* path, const struct stat* st, int type, FTW*) {
  if (type == FTW_D && walk->skip == path) return FTW_SKIP_SUBTREE;
  if (type == FTW_NS || type == FTW_DNR) return FTW_CONTINUE;  // gone meanwhile, or unreadable
  if (st->st_nlink > 1 && type != FTW_D && !walk->linked.emplace(st->st_dev, st->st_ino).second) {
    return FTW_CONTINUE;
  }
  walk->bytes += static_cast<uint64_t>(st->st_blocks) * 512;
  return FTW_CONTINUE;
}

// What the files under `dir` (not under `skip`) hold on disk: their
// allocated blocks, so a sparse file counts what it uses. Symbolic links
// are not followed, nor other file systems mounted inside.
uint64_t DirectoryBytes(const std::string& dir, const std::string& skip) {
  Walk w;
  w.skip = skip;
  walk = &w;
  nftw(dir.c_str(), Visit, 64, FTW_PHYS | FTW_MOUNT | FTW_ACTIONRETVAL);
  walk = nullptr;
  return w.bytes;
}

}  // namespace

void Executor::WatchDisk() {
  if (disk_timer_.valid()) return;  // armed: it runs while any such task does
  disk_timer_.Reset(timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK));
  if (!disk_timer_.valid()) return;  // such tasks then run unmeasured
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
  std::vector<TaskId> over;
  bool any = false;
  for (auto& [id, task] : tasks_) {
    if (task->disk_limit == 0 || task->exited || !task->over_disk.empty()) continue;
    any = true;
    // A directory of many files costs a long walk: measured at most a
    // tenth of the time.
    if (task->disk_checked.Elapsed() < task->disk_walk * 10) continue;
    Stopwatch took;
    const uint64_t held = DirectoryBytes(task->dirs.task, task->dirs.inputs);
    task->disk_walk = took.Elapsed();
    task->disk_checked = Stopwatch();
    if (held <= task->disk_limit) continue;
    task->over_disk = "disk: " + FormatBytes(held) +
                      " written under its directory, more than disk " +
                      FormatBytes(task->disk_limit);
    over.push_back(id);
  }
  for (const TaskId& id : over) (void)Kill(id, Duration::zero());
  if (!any) {
    reactor_->Unwatch(disk_timer_.fd());
    disk_timer_.Reset();
  }
}

}  // namespace drover::worker
