// Executor's starts: a process parked ahead of its start (Park), and Start
// itself: the released parked process, or a cage, output captures and a
// spawn (MakeLaunch), then the task watched on the reactor (Register)
// (executor.h).
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "worker/exec/executor.h"
#include "worker/exec/executor_internal.h"
#include "worker/exec/host_features.h"

namespace drover::worker {
namespace {

// "12.3.1": the task and its attempt, naming its cage and its record.
std::string CageName(const TaskSpec& spec) {
  return spec.id.ToString() + "." + std::to_string(spec.attempt);
}

// Whether a process parked for `made` may serve a start of `spec` (the
// command is compared separately).
bool SameLimits(const TaskSpec& made, const TaskSpec& spec) {
  return made.milli_cpus == spec.milli_cpus && made.memory_bytes == spec.memory_bytes &&
         made.max_pids == spec.max_pids && made.cores == spec.cores && made.gpus == spec.gpus &&
         made.output_cap_bytes == spec.output_cap_bytes && made.task_index == spec.task_index &&
         made.private_network == spec.private_network && made.io == spec.io &&
         made.disk_bytes == spec.disk_bytes && made.image == spec.image &&
         made.image_pull == spec.image_pull;
}

}  // namespace

std::unique_ptr<Executor::Parked> Executor::Park(const TaskSpec& spec, const TaskDirs& dirs,
                                                 const Command& command,
                                                 const TaskAccount* account) {
  if (!ParkSupported()) return nullptr;
  Launch launch;
  if (!MakeLaunch(spec, dirs, command, account, launch).ok()) return nullptr;  // Start reports it
  Result<std::unique_ptr<ParkedProcess>> process = spawner_->Park(launch.plan);
  // The child has its own copies (no CLONE_FILES).
  launch.cage->CloseJoinFds();
  for (auto& out : launch.out) out->CloseWriteEnd();
  auto parked = std::make_unique<Parked>();
  parked->cage = std::move(launch.cage);
  if (!process.ok()) return nullptr;  // the cage goes with `parked`
  parked->process = std::move(process).value();
  for (int i = 0; i < 2; ++i) parked->out[i] = std::move(launch.out[i]);
  parked->spec = spec;
  return parked;
}

[[gnu::hot]] Result<pid_t> Executor::Start(const TaskSpec& spec, DoneCallback done,
                                           StartTimes* times) {
  if (tasks_.count(spec.id) != 0) {
    return AlreadyExists("task " + spec.id.ToString() + " is already running");
  }
  if (spec.argv.empty()) return InvalidArgument("task " + spec.id.ToString() + " has no command");
  TaskDirs dirs;
  std::optional<Command> command;
  std::shared_ptr<Parked> parked;
  std::shared_ptr<const TaskAccount> account;
  // Prepared for this attempt and user (one account: any user).
  if (auto p = prepared_.find(spec.id); p != prepared_.end() && p->second.attempt == spec.attempt &&
                                        (!accounts_ || p->second.user == spec.user)) {
    dirs = std::move(p->second.dirs);
    account = std::move(p->second.account);
    // Made by PrepareStart for this very command: no PATH walk now.
    if (p->second.command && p->second.command->argv == spec.argv &&
        p->second.command->env == spec.env && p->second.command->working_dir == spec.working_dir) {
      command = std::move(p->second.command);
      if (p->second.parked && SameLimits(p->second.parked->spec, spec)) {
        parked = std::move(p->second.parked);
      }
    }
    prepared_.erase(p);
  } else {
    ASSIGN_OR_RETURN(dirs, PrepareDirs(spec.id, spec.attempt, false, spec.user));
    auto made = prepared_.find(spec.id);  // PrepareDirs' entry: its account
    account = std::move(made->second.account);
    prepared_.erase(made);
  }

  auto task = std::make_unique<Task>();
  task->id = spec.id;
  task->attempt = spec.attempt;
  task->done = std::move(done);
  task->dirs = dirs;
  task->disk_limit = spec.disk_bytes;
  if (!spec.image.empty()) {
    task->container = ContainerName(spec);
    task->image = spec.image;
  }

  // A warm interpreter lives in the worker's network: a task that asked
  // for a network of its own starts its own process.
  if (options_.warm_interpreters && !spec.private_network && spec.image.empty() &&
      WantsWarm(spec)) {
    if (!command) {
      ASSIGN_OR_RETURN(Command made, MakeCommand(spec, dirs, account.get()));
      command = std::move(made);
    }
    return StartWarm(spec, dirs, *command, account.get(), std::move(task), times);
  }

  // Without cgroup trees for the reaper to kill, the process group it is
  // told of is all that ends this task should the worker die; a Spawn
  // returns only after the execve, so the program could run (and the
  // worker die) before the reaper knows. Such a start is made parked too,
  // and released once the reaper has been told. A setup step that fails
  // is then reported by the exit (TaskResult::start_error), not here.
  if (!parked && options_.watch != nullptr && !cgroups_) {
    if (!command) {
      ASSIGN_OR_RETURN(Command made, MakeCommand(spec, dirs, account.get()));
      command = std::move(made);
    }
    parked = Park(spec, dirs, *command, account.get());
    // Released only once parked: its setsid done, the group the reaper is
    // told of exists, and a kill of that group reaches it. A child that
    // died in its setup is started anew below, which reports why.
    if (parked && !parked->process->WaitParked(Seconds(10))) parked.reset();
  }

  // Made ahead and still waiting: the start is one write to its gate. One
  // that died (a setup step failed, or it was killed) is dropped, and the
  // task starts as any other, which reports what fails.
  if (parked && !parked->process->Dead()) {
    task->started = Stopwatch();
    // Told before the release: from then on the program may run.
    const pid_t pid = parked->process->pid();
    if (options_.watch != nullptr) options_.watch->Started(pid, CageName(spec));
    Result<Time> released = parked->process->Release();
    if (!released.ok() && options_.watch != nullptr) options_.watch->Ended(pid);
    if (released.ok()) {
      if (times != nullptr) times->spawned = times->exec_done = *released;
      task->pid = parked->process->pid();
      task->pidfd = parked->process->TakePidfd();
      task->parked = std::move(parked->process);
      task->cage = std::move(parked->cage);
      for (int i = 0; i < 2; ++i) task->out[i] = std::move(parked->out[i]);
      return Register(std::move(task));
    }
  }
  parked.reset();

  if (!command) {
    ASSIGN_OR_RETURN(Command made, MakeCommand(spec, dirs, account.get()));
    command = std::move(made);
  }
  Launch launch;
  RETURN_IF_ERROR(MakeLaunch(spec, dirs, *command, account.get(), launch));
  task->cage = std::move(launch.cage);
  for (int i = 0; i < 2; ++i) task->out[i] = std::move(launch.out[i]);

  task->started = Stopwatch();
  Result<SpawnedProcess> proc = spawner_->Spawn(launch.plan);
  if (!proc.ok()) {
    task->cage->CloseJoinFds();
    Status r = task->cage->Remove();
    (void)r;  // nothing ran in it
    return proc.status();
  }
  if (times != nullptr) {
    times->spawned = proc->spawned_at;
    times->exec_done = SystemClock().Now();
  }
  task->pid = proc->pid;
  task->pidfd = std::move(proc->pidfd);
  if (options_.watch != nullptr) options_.watch->Started(task->pid, CageName(spec));
  task->cage->CloseJoinFds();
  for (auto& out : task->out) out->CloseWriteEnd();
  return Register(std::move(task));
}

Result<CageSpec> Executor::CageSpecOf(const TaskSpec& spec, const Command& command) const {
  CageSpec cage_spec;
  cage_spec.name = CageName(spec);
  cage_spec.milli_cpus = spec.milli_cpus;
  cage_spec.memory_bytes = spec.memory_bytes;
  cage_spec.max_pids = spec.max_pids;
  cage_spec.cores = spec.cores;
  cage_spec.gpus = spec.gpus;
  cage_spec.container = !command.image.empty();
  if (spec.io.Any()) {
    Result<std::string> device = BlockDeviceOf(options_.workdir);
    if (!device.ok()) {
      return FailedPrecondition("disk I/O limits on this worker: " + device.status().message());
    }
    cage_spec.io = spec.io;
    cage_spec.io_device = *device;
  }
  return cage_spec;
}

Status Executor::MakeLaunch(const TaskSpec& spec, const TaskDirs& dirs, const Command& command,
                            const TaskAccount* account, Launch& launch) {
  const uint64_t cap =
      spec.output_cap_bytes > 0 ? spec.output_cap_bytes : options_.output_cap_bytes;
  const std::string* paths[2] = {&dirs.stdout_path, &dirs.stderr_path};
  std::optional<std::pair<uid_t, gid_t>> owner;
  if (account != nullptr) owner.emplace(account->ids.uid, account->ids.gid);
  for (int i = 0; i < 2; ++i) {
    Result<std::unique_ptr<OutputCapture>> out =
        OutputCapture::CreateDeferred(*paths[i], cap, kPrivateFile, owner);
    if (!out.ok()) return out.status();
    launch.out[i] = std::move(out).value();
  }
  if (!launch.cage) {
    ASSIGN_OR_RETURN(CageSpec cage_spec, CageSpecOf(spec, command));
    ASSIGN_OR_RETURN(launch.cage, isolator_->CreateCage(cage_spec));
  }

  const std::vector<std::string>& argv = command.run_argv.empty() ? spec.argv : command.run_argv;
  launch.argv.reserve(argv.size() + 1);
  for (const std::string& a : argv) launch.argv.push_back(const_cast<char*>(a.c_str()));
  launch.argv.push_back(nullptr);
  launch.envp.reserve(command.environment.size() + 1);
  for (const std::string& e : command.environment) {
    launch.envp.push_back(const_cast<char*>(e.c_str()));
  }
  launch.envp.push_back(nullptr);
  // A container's start runs where podman is at home; the working
  // directory is the container's (--workdir).
  launch.cwd = !command.image.empty()     ? "/"
               : spec.working_dir.empty() ? dirs.task
                                          : spec.working_dir;

  SpawnPlan& plan = launch.plan;
  plan.path = command.exe.c_str();
  plan.argv = launch.argv.data();
  plan.envp = launch.envp.data();
  plan.cwd = launch.cwd.c_str();
  plan.stdin_fd = dev_null_.fd();
  plan.stdout_fd = launch.out[0]->write_fd();
  plan.stderr_fd = launch.out[1]->write_fd();
  plan.join_fds = launch.cage->join_fds();
  plan.rlimits = launch.cage->rlimits();
  if (!spec.cores.empty()) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int c : spec.cores) {
      if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &set);
    }
    plan.cpus = set;
  }
  if (!command.image.empty()) {
    // Rootful podman starts it; the program inside runs as the account
    // (--user) in a network of its own where asked (--network none).
    plan.display_name = "podman (image " + spec.image + ")";
    return Status::Ok();
  }
  if (account != nullptr) plan.user = account->ids;
  plan.private_network = spec.private_network;
  if (spec.private_network && geteuid() != 0) {
    // Not root: in a user namespace of its own (spawn.h), as itself.
    plan.user_ns_uid_map = SelfIdMap(geteuid());
    plan.user_ns_gid_map = SelfIdMap(getegid());
  }
  plan.display_name = spec.argv[0];
  return Status::Ok();
}

Result<pid_t> Executor::Register(std::unique_ptr<Task> task) {
  Task* t = task.get();
  const TaskId id = t->id;
  tasks_[id] = std::move(task);
  if (t->disk_limit > 0) WatchDisk();
  // Registration can fail only on fd exhaustion in epoll; then the task is
  // killed at once and reported through `done` like any other ending.
  Status watched = reactor_->Watch(t->pidfd.fd(), [this, t] { OnExit(t); });
  for (int i = 0; i < 2 && watched.ok(); ++i) {
    watched = reactor_->Watch(t->out[i]->read_fd(), [this, t, i] { OnOutput(t, i); });
  }
  if (!watched.ok()) {
    // Undo everything: the caller gets the error and no callback.
    reactor_->Unwatch(t->pidfd.fd());
    for (auto& out : t->out) reactor_->Unwatch(out->read_fd());
    killpg(t->pid, SIGKILL);
    (void)t->cage->KillAll();  // its pidfds close at once
    if (options_.watch != nullptr) options_.watch->Ended(t->pid);
    int status;
    while (waitpid(t->pid, &status, 0) < 0 && errno == EINTR) {
    }
    Status r = t->cage->Remove();
    (void)r;
    tasks_.erase(id);
    return watched;
  }
  return t->pid;
}

}  // namespace drover::worker
