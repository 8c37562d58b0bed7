// Executor's endings: output drained as it comes, the exit of a task's
// process (reaped with its usage, what it left behind killed and waited
// for) and its TaskResult (the result file, the outcome, output lost to a
// full disk) handed to `done` (executor.h).
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/quantity.h"
#include "worker/exec/executor.h"
#include "worker/exec/executor_internal.h"

namespace drover::worker {
namespace {

Duration FromTimeval(const timeval& tv) {
  return Duration(static_cast<int64_t>(tv.tv_sec) * 1000000 + tv.tv_usec);
}

// A result over `cap` bytes cut there, saying so.
std::string CapResult(std::string text, uint64_t cap) {
  if (text.size() > cap) {
    text.resize(cap);
    text += "\n[drover: result truncated at " + FormatBytes(cap) + "]\n";
  }
  return text;
}

// Reads the task's result file, refusing anything but a regular file (a
// task could point a symlink at a file only the worker may read).
std::string ReadResult(const std::string& path, uint64_t cap) {
  const UniqueFd fd(open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  if (!fd.valid()) return "";
  struct stat st;
  std::string text;
  if (fstat(fd.fd(), &st) == 0 && S_ISREG(st.st_mode)) {
    text.resize(cap + 1);
    size_t got = 0;
    while (got < text.size()) {
      ssize_t n = read(fd.fd(), text.data() + got, text.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += n;
    }
    text.resize(got);
  }
  return CapResult(std::move(text), cap);
}

// "stdout not saved: no space left on device (PATH)" when the capture
// could not write its file; empty otherwise.
std::string OutputLossNote(const OutputCapture& out, const std::string& path) {
  if (out.write_error().empty()) return "";
  // strerror's "No space left on device", in the lower case of a reason.
  std::string error = out.write_error();
  if (const size_t at = error.find("No space"); at != std::string::npos) error[at] = 'n';
  const std::string stream = path.ends_with("stderr") ? "stderr" : "stdout";
  return stream + " not saved: " + error + " (" + path + ")";
}

// A note when the file system holding `dir` has no block left for the task.
std::string FullDiskNote(const std::string& dir) {
  struct statvfs fs {};
  if (statvfs(dir.c_str(), &fs) != 0 || fs.f_bavail > 0) return "";
  return "the task directory's file system is full (no space left on device)";
}

}  // namespace

void Executor::OnOutput(Task* task, int which) {
  OutputCapture& out = *task->out[which];
  if (out.Drain()) reactor_->Unwatch(out.read_fd());
}

[[gnu::hot]] void Executor::OnExit(Task* task) {
  // A warm interpreter that replied and then exited (its last call): the
  // reply says how the call ended.
  if (task->warm && OnWarmReply(task)) return;
  reactor_->Unwatch(task->pidfd.fd());
  task->exited = true;
  task->result.wall = task->started.Elapsed();
  // While the leader is an unreaped zombie its pid cannot be reused, so this
  // reaches exactly the task's own group: background jobs it left running.
  killpg(task->pid, SIGKILL);
  // Suspended (its leader killed from outside): what is left of it must be
  // able to die, and a cgroup reused later must not be frozen.
  (void)Wake(task);
  if (options_.watch != nullptr) options_.watch->Ended(task->pid);
  int status = 0;
  struct rusage ru {};
  while (wait4(task->pid, &status, 0, &ru) < 0 && errno == EINTR) {
  }
  for (auto& out : task->out) {
    if (out->Drain()) reactor_->Unwatch(out->read_fd());
  }

  TaskResult& r = task->result;
  if (task->parked) {
    // Made ahead and released: did it reach its execve?
    Status failed = task->parked->Failure();
    if (!failed.ok()) r.start_error = failed.message();
  }
  CageUsage usage = task->cage->Usage();
  r.cpu = usage.cpu.value_or(FromTimeval(ru.ru_utime) + FromTimeval(ru.ru_stime));
  r.peak_memory = usage.peak_memory.value_or(static_cast<uint64_t>(ru.ru_maxrss) * 1024);
  r.io_read_bytes = usage.io_read_bytes;
  r.io_write_bytes = usage.io_write_bytes;
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  r.oom_killed = usage.oom_killed && r.exit_code != 0;
  if (!task->container.empty() && options_.container) {
    ContainerEnd end =
        CollectContainerEnd(*options_.container, task->container, task->image, r.exit_code);
    r.image_digest = std::move(end.digest);
    if (r.start_error.empty()) r.start_error = std::move(end.start_error);
    // Killed before podman removed it (`--rm`): its record would stay.
    // Forgotten once nothing of it is left running (Finish).
    task->forget_container = r.signal != 0 || task->canceled;
  }
  if (task->warm) {
    // Died in the call: the interpreter is replaced by the next call.
    reactor_->Unwatch(task->warm->socket.fd());
    task->warm.reset();
  }
  KillLeftovers(task);
}

void Executor::KillLeftovers(Task* task) {
  if (!task->cage) {  // a warm interpreter's, waiting in it alone
    Finish(task);
    return;
  }
  Result<std::vector<UniqueFd>> left = task->cage->KillAll();
  if (left.ok()) task->leftovers = std::move(left).value();
  task->result.leftovers_killed = task->leftovers.size();
  std::vector<UniqueFd> waiting;
  for (UniqueFd& fd : task->leftovers) {
    const int raw = fd.fd();
    // One that cannot be watched is closed here: do not hold the task back.
    if (reactor_->Watch(raw, [this, task, raw] { OnLeftoverExit(task, raw); }).ok()) {
      waiting.push_back(std::move(fd));
    }
  }
  task->leftovers = std::move(waiting);
  if (task->leftovers.empty()) Finish(task);
}

void Executor::OnLeftoverExit(Task* task, int pidfd) {
  reactor_->Unwatch(pidfd);
  auto& v = task->leftovers;
  v.erase(std::remove_if(v.begin(), v.end(), [&](const UniqueFd& fd) { return fd.fd() == pidfd; }),
          v.end());  // closes it
  if (v.empty() && task->exited) Finish(task);
}

Status Executor::OpenOutputFiles(TaskId id) {
  auto it = tasks_.find(id);
  if (it == tasks_.end()) return NotFound("task " + id.ToString() + " is not running");
  for (auto& out : it->second->out) RETURN_IF_ERROR(out->OpenFile());
  return Status::Ok();
}

void Executor::Finish(Task* task) {
  TaskResult& r = task->result;
  if (task->timer_fd.valid()) {
    reactor_->Unwatch(task->timer_fd.fd());
    task->timer_fd.Reset();
  }
  for (auto& out : task->out) {
    reactor_->Unwatch(out->read_fd());
    out->Drain();
  }
  task->pidfd.Reset();
  r.id = task->id;
  r.attempt = task->attempt;
  r.dirs = task->dirs;
  r.stdout_truncated = task->out[0]->truncated();
  r.stderr_truncated = task->out[1]->truncated();
  r.result_text = task->inline_result
                      ? CapResult(std::move(*task->inline_result), options_.result_cap_bytes)
                      : ReadResult(task->dirs.result, options_.result_cap_bytes);

  if (!r.start_error.empty()) {
    r.outcome = task->canceled ? TaskOutcome::kCanceled : TaskOutcome::kFailed;
    r.exit_code = -1;
  } else if (r.oom_killed) {
    r.outcome = TaskOutcome::kFailed;
  } else if (r.exit_code == 0 && !task->canceled) {
    r.outcome = TaskOutcome::kSucceeded;
  } else {
    r.outcome = task->canceled ? TaskOutcome::kCanceled : TaskOutcome::kFailed;
  }
  // Output the worker could not save (its file system is full) makes the
  // attempt incomplete, so it does not count as a success; a task that
  // failed on a full disk by itself gets told why.
  // Killed for holding more than its `disk`: failed, and that is why.
  std::string disk_note = task->over_disk;
  if (!disk_note.empty()) {
    r.outcome = TaskOutcome::kFailed;
    r.stopped_for_disk = true;
  }
  if (disk_note.empty()) disk_note = OutputLossNote(*task->out[0], task->dirs.stdout_path);
  if (disk_note.empty()) disk_note = OutputLossNote(*task->out[1], task->dirs.stderr_path);
  if (disk_note.empty() && r.outcome == TaskOutcome::kFailed && !r.oom_killed) {
    disk_note = FullDiskNote(task->dirs.task);
  }
  if (!disk_note.empty()) {
    r.disk_error = disk_note;
    if (r.outcome == TaskOutcome::kSucceeded) r.outcome = TaskOutcome::kFailed;
  }

  // Erase before the callback so that it may start the next attempt. The
  // cage is recycled after it: the result reaches the server first (the
  // recycling reads and resets counters, a few system calls), and the next
  // task's cage can only be asked for once the server has heard.
  if (task->forget_container && options_.container) {
    ForgetContainer(*options_.container, task->container);
  }
  std::unique_ptr<TaskCage> cage = std::move(task->cage);
  DoneCallback done = std::move(task->done);
  TaskResult result = std::move(r);
  tasks_.erase(task->id);
  if (done) done(result);

  if (cage) RemoveCage(std::move(cage));
  for (auto it = stale_cages_.begin(); it != stale_cages_.end();) {
    it = (*it)->Remove().ok() ? stale_cages_.erase(it) : it + 1;
  }
}

}  // namespace drover::worker
