// Executor's warm interpreters (warm_interpreter.h): a task's call handed
// to an interpreter kept from an earlier task of the same key, in the
// task's cage and on its cores; the idle ones watched, aged and ended.
// An interpreter left alone in its call's cage (cgroup v1) waits there,
// and the cage, refitted, is its next call's; else it waits in the warm
// cage and is moved into each call's cage.
//
// Between calls an interpreter is stopped (SIGSTOP): nothing of a call runs
// once it has replied, outside its task's cage.
//
// A call's task is an ordinary Task whose pid and pidfd are its
// interpreter's for the call's length, so a kill, a suspend, a timeout or
// an OOM kill reaches the interpreter as it would a task's own process;
// one that dies in a call is reaped by OnExit and not reused.
#include <signal.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "worker/exec/executor.h"
#include "worker/exec/executor_internal.h"
#include "worker/exec/warm_interpreter.h"

namespace drover::worker {

Result<TaskCage*> Executor::WarmHome() {
  if (!warm_home_) {
    CageSpec spec;
    spec.name = "warm";
    spec.holding = true;
    ASSIGN_OR_RETURN(warm_home_, isolator_->CreateCage(spec));
  }
  return warm_home_.get();
}

Result<pid_t> Executor::StartWarm(const TaskSpec& spec, const TaskDirs& dirs,
                                  const Command& command, const TaskAccount* account,
                                  std::unique_ptr<Task> task, StartTimes* times) {
  const uid_t uid = account != nullptr ? account->ids.uid : geteuid();
  const std::string key = WarmKey(spec, command.exe, uid, /*limits=*/!cgroups_);
  // An idle one: refitted in the cage it waits in, or moved into the
  // task's new cage and onto its cores; one that cannot be (it died
  // meanwhile) is ended, and a new one started.
  Launch launch;
  std::unique_ptr<WarmInterpreter> w = TakeIdleFor(key, spec, command, launch.cage);
  const bool refitted = launch.cage != nullptr;
  if (Status made = MakeLaunch(spec, dirs, command, account, launch); !made.ok()) {
    if (w) {
      if (refitted) w->cage = std::move(launch.cage);
      ReturnWarm(std::move(w));
    }
    return made;
  }
  task->cage = std::move(launch.cage);
  for (int i = 0; i < 2; ++i) task->out[i] = std::move(launch.out[i]);
  auto undo = [&](Status why) {
    task->cage->CloseJoinFds();
    Status r = task->cage->Remove();
    (void)r;  // emptied: the interpreter, if any, was ended
    return why;
  };
  const cpu_set_t cpus = launch.plan.cpus.value_or(all_cpus_);

  task->started = Stopwatch();
  const Time began = SystemClock().Now();
  if (w) {
    Status moved = refitted ? Status::Ok() : task->cage->Adopt(w->pid);
    if (moved.ok()) moved = PinThreads(w->pid, cpus);
    if (!moved.ok() || killpg(w->pid, SIGCONT) != 0) {
      EndWarm(*w);
      w.reset();
    }
  }
  if (!w) {
    // A new one, made as the task's own process would be, serving calls on
    // its stdin.
    Result<std::pair<UniqueFd, UniqueFd>> socket = MakeWarmSocket();
    if (!socket.ok()) return undo(socket.status());
    static char kServe[] = "DROVER_WARM_SERVE=1";
    launch.envp.insert(launch.envp.end() - 1, kServe);
    launch.plan.envp = launch.envp.data();
    launch.plan.stdin_fd = socket->second.fd();
    Result<SpawnedProcess> proc = spawner_->Spawn(launch.plan);
    if (!proc.ok()) return undo(proc.status());
    w = std::make_unique<WarmInterpreter>();
    w->key = key;
    w->pid = proc->pid;
    w->pidfd = std::move(proc->pidfd);
    w->socket = std::move(socket->first);
    if (options_.watch != nullptr) {
      options_.watch->Started(w->pid, spec.id.ToString() + "." + std::to_string(spec.attempt));
    }
  }
  task->cage->CloseJoinFds();
  Status sent = SendCall(w->socket.fd(), launch.cwd, command.environment, task->out[0]->write_fd(),
                         task->out[1]->write_fd(),
                         /*reply_result=*/true);
  for (auto& out : task->out) out->CloseWriteEnd();
  if (!sent.ok()) {
    EndWarm(*w);
    return undo(sent);
  }
  if (times != nullptr) times->spawned = times->exec_done = began;
  w->cores = spec.cores;
  task->pid = w->pid;
  task->pidfd = std::move(w->pidfd);
  const int socket = w->socket.fd();
  task->warm = std::move(w);
  Task* t = task.get();
  ASSIGN_OR_RETURN(pid_t pid, Register(std::move(task)));
  Status watched = reactor_->Watch(socket, [this, t] { (void)OnWarmReply(t); });
  if (!watched.ok()) {
    // Ended like a task whose process died: reported through `done`.
    killpg(pid, SIGKILL);
  }
  return pid;
}

bool Executor::OnWarmReply(Task* task) {
  WarmInterpreter& w = *task->warm;
  Result<WarmReply> reply = ReadReply(w.socket.fd());
  if (!reply.ok()) {
    if (reply.status().code() == StatusCode::kUnavailable) return false;
    // Closed, or nonsense: the interpreter is ended and the call with it;
    // OnExit reports how.
    reactor_->Unwatch(w.socket.fd());
    killpg(task->pid, SIGKILL);
    return false;
  }
  reactor_->Unwatch(w.socket.fd());
  reactor_->Unwatch(task->pidfd.fd());
  task->exited = true;
  TaskResult& r = task->result;
  r.wall = task->started.Elapsed();
  r.exit_code = reply->exit_code;
  r.signal = reply->signal;
  task->inline_result = std::move(reply->result);
  // Stopped until its next call: code of the call that goes on after its
  // reply (a thread, or a reply sent early on purpose) must not run outside
  // a task's cage and cores. Where it is the only process left in the
  // task's cage (cgroup v1), it waits there, and the cage, refitted, is
  // its next call's: no move either way. Else it leaves the task's cage
  // before its accounting is read and what the call left in it is killed.
  // One that cannot be stopped or moved is not reused.
  bool keep = !reply->last && !task->canceled && killpg(w.pid, SIGSTOP) == 0;
  bool stays = false;
  if (cgroups_) {
    stays = keep && task->cage->HoldsOnly(w.pid);
    if (!stays) {
      Result<TaskCage*> home = WarmHome();
      keep = keep && home.ok() && (*home)->Adopt(w.pid).ok();
      // What it holds stays charged to the task's memory cgroup.
      task->cage->HolderLeft();
    }
  }
  for (auto& out : task->out) {
    if (out->Drain()) reactor_->Unwatch(out->read_fd());
  }
  CageUsage usage = task->cage->Usage();
  r.cpu = usage.cpu.value_or(reply->cpu);
  r.peak_memory = usage.peak_memory.value_or(reply->peak_memory);
  r.io_read_bytes = usage.io_read_bytes;
  r.io_write_bytes = usage.io_write_bytes;
  r.oom_killed = usage.oom_killed && (r.exit_code != 0 || r.signal != 0);

  std::unique_ptr<WarmInterpreter> back = std::move(task->warm);
  back->pidfd = std::move(task->pidfd);
  back->calls++;
  if (stays) back->cage = std::move(task->cage);  // nothing of the call's is left to kill
  if (!keep) {
    back->retiring = true;
    killpg(back->pid, SIGKILL);
  }
  ReturnWarm(std::move(back));
  KillLeftovers(task);
  return true;
}

std::unique_ptr<WarmInterpreter> Executor::TakeIdle(const std::string& key,
                                                    const std::vector<int>& cores) {
  // One whose last call was on these cores first (its cage's cpuset need
  // not change), then the most recently used: its caches are the warmest.
  auto pick = idle_.rend();
  for (auto it = idle_.rbegin(); it != idle_.rend(); ++it) {
    if ((*it)->retiring || (*it)->key != key) continue;
    if (pick == idle_.rend()) pick = it;
    if ((*it)->cores == cores) {
      pick = it;
      break;
    }
  }
  if (pick == idle_.rend()) return nullptr;
  std::unique_ptr<WarmInterpreter> w = std::move(*pick);
  idle_.erase(std::next(pick).base());
  reactor_->Unwatch(w->pidfd.fd());
  return w;
}

std::unique_ptr<WarmInterpreter> Executor::TakeIdleFor(const std::string& key, const TaskSpec& spec,
                                                       const Command& command,
                                                       std::unique_ptr<TaskCage>& cage) {
  std::unique_ptr<WarmInterpreter> w;
  std::optional<Result<CageSpec>> cage_spec;  // made for the first one with a cage
  while ((w = TakeIdle(key, spec.cores)) != nullptr) {
    if (!w->cage) return w;
    if (!cage_spec) cage_spec = CageSpecOf(spec, command);
    if (cage_spec->ok() && isolator_->RefitCage(*w->cage, **cage_spec).ok()) {
      cage = std::move(w->cage);
      return w;
    }
    // Out to the warm cage, to be moved into the task's; its own cage,
    // left with what it holds charged, goes.
    Result<TaskCage*> home = WarmHome();
    if (home.ok() && (*home)->Adopt(w->pid).ok()) {
      w->cage->HolderLeft();
      RemoveCage(std::move(w->cage));
      return w;
    }
    EndWarm(*w);
  }
  return nullptr;
}

void Executor::RemoveCage(std::unique_ptr<TaskCage> cage) {
  if (!cage->Remove().ok()) stale_cages_.push_back(std::move(cage));
}

void Executor::ReturnWarm(std::unique_ptr<WarmInterpreter> w) {
  WarmInterpreter* raw = w.get();
  if (!reactor_->Watch(raw->pidfd.fd(), [this, raw] { OnIdleExit(raw); }).ok()) {
    EndWarm(*raw);
    return;
  }
  raw->idle_since = Stopwatch();
  idle_.push_back(std::move(w));
  // Too many waiting: the one idle longest goes.
  size_t waiting = 0;
  for (const auto& i : idle_) waiting += i->retiring ? 0 : 1;
  for (auto& i : idle_) {
    if (waiting <= options_.warm_max_idle) break;
    if (i->retiring) continue;
    i->retiring = true;
    killpg(i->pid, SIGKILL);
    --waiting;
  }
  ArmIdleTimer();
}

void Executor::OnIdleExit(WarmInterpreter* w) {
  auto it = std::find_if(idle_.begin(), idle_.end(), [w](const auto& i) { return i.get() == w; });
  if (it == idle_.end()) return;
  reactor_->Unwatch(w->pidfd.fd());
  EndWarm(*w);
  idle_.erase(it);
}

void Executor::EndWarm(WarmInterpreter& w) {
  killpg(w.pid, SIGKILL);
  if (options_.watch != nullptr) options_.watch->Ended(w.pid);
  int status;
  while (waitpid(w.pid, &status, 0) < 0 && errno == EINTR) {
  }
  w.pid = -1;
  if (w.cage) {
    (void)w.cage->KillAll();  // what it started and left; they die at once
    RemoveCage(std::move(w.cage));
  }
}

void Executor::ArmIdleTimer() {
  if (!idle_timer_.valid()) {
    idle_timer_.Reset(timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK));
    if (!idle_timer_.valid()) return;  // idle ones then wait for the next call or the end
    if (!reactor_->Watch(idle_timer_.fd(), [this] { OnIdleTimer(); }).ok()) {
      idle_timer_.Reset();
      return;
    }
  }
  itimerspec current{};
  timerfd_gettime(idle_timer_.fd(), &current);
  if (current.it_value.tv_sec != 0 || current.it_value.tv_nsec != 0) return;  // armed
  Duration soonest = options_.warm_idle;
  for (const auto& i : idle_) {
    if (!i->retiring) soonest = std::min(soonest, options_.warm_idle - i->idle_since.Elapsed());
  }
  soonest = std::max(soonest, Duration(1000));
  itimerspec when{};
  when.it_value.tv_sec = soonest.count() / 1000000;
  when.it_value.tv_nsec = (soonest.count() % 1000000) * 1000;
  timerfd_settime(idle_timer_.fd(), 0, &when, nullptr);
}

void Executor::OnIdleTimer() {
  uint64_t expirations;
  (void)!read(idle_timer_.fd(), &expirations, sizeof(expirations));
  bool left = false;
  for (auto& i : idle_) {
    if (i->retiring) continue;
    if (i->idle_since.Elapsed() >= options_.warm_idle) {
      i->retiring = true;
      killpg(i->pid, SIGKILL);
    } else {
      left = true;
    }
  }
  if (left) ArmIdleTimer();
}

}  // namespace drover::worker
