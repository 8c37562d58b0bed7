#include "worker/exec/executor.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "common/quantity.h"
#include "worker/exec/cgroup_files.h"
#include "worker/exec/output_capture.h"
#include "worker/exec/workdir_access.h"

extern char** environ;

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
  std::chrono::steady_clock::time_point started;
  UniqueFd timer_fd;  // the grace period of a stop, once one was asked
  // How Suspend stopped it, until Resume (or its ending) let it go on.
  std::optional<SuspendHow> suspended;
  bool canceled = false;
  bool exited = false;
  std::vector<UniqueFd> leftovers;  // pidfds of processes killed after exit
  TaskResult result;
  // Made ahead by PrepareStart: kept until the process is reaped (it owns
  // the memory the child used before its execve).
  std::unique_ptr<ParkedProcess> parked;
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

namespace {

// "12.3.1": the task and its attempt, naming its cage and its record.
std::string CageName(const TaskSpec& spec) {
  return spec.id.ToString() + "." + std::to_string(spec.attempt);
}

std::string JoinInts(const std::vector<int>& v) {
  std::string s;
  for (int x : v) {
    if (!s.empty()) s += ',';
    s += std::to_string(x);
  }
  return s;
}

// Task data is the task user's alone: its directories 0700 and its output
// files 0600, owned by that user when tasks run as one. The work directory
// and the job directories above them are 0711: passable, not listable.
constexpr mode_t kPrivateDir = 0700;
constexpr mode_t kPrivateFile = 0600;
constexpr mode_t kPassDir = 0711;

Duration FromTimeval(const timeval& tv) {
  return Duration(static_cast<int64_t>(tv.tv_sec) * 1000000 + tv.tv_usec);
}

Status ChownPath(const std::string& path, const TaskAccount* account) {
  if (account == nullptr) return Status::Ok();
  if (chown(path.c_str(), account->ids.uid, account->ids.gid) != 0) {
    return Unavailable("cannot hand " + path + " to the task's account " + account->name + ": " +
                       strerror(errno));
  }
  return Status::Ok();
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
    if (got > cap) {
      text.resize(cap);
      text += "\n[drover: result truncated at " + FormatBytes(cap) + "]\n";
    }
  }
  return text;
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

Result<std::unique_ptr<Executor>> Executor::Create(ExecutorOptions options, Reactor* reactor,
                                                   std::unique_ptr<Isolator> isolator) {
  std::shared_ptr<const TaskAccount> account;
  std::optional<UserAccounts> accounts;
  const bool root = geteuid() == 0;
  if (options.per_user && !options.task_user.empty()) {
    return FailedPrecondition("running tasks as one user (task_user \"" + options.task_user +
                              "\") and as each task's user (per_user) exclude each other");
  }
  if (options.per_user) {
    if (!root) {
      return FailedPrecondition(
          "running each task as its user's account (per_user) needs a worker running as root");
    }
    accounts.emplace(options.user_map, options.run_as_root, options.worker_name);
  } else if (!options.task_user.empty()) {
    if (!root) {
      return FailedPrecondition("running tasks as user \"" + options.task_user +
                                "\" needs a worker running as root");
    }
    Result<TaskAccount> found = LookUpAccount(options.task_user);
    if (found.status().code() == StatusCode::kNotFound) {
      return FailedPrecondition("task user \"" + options.task_user + "\" does not exist");
    }
    if (!found.ok()) return found.status();
    account = std::make_shared<const TaskAccount>(std::move(found).value());
  } else if (root && !options.run_as_root) {
    return FailedPrecondition(
        "the worker runs as root: name a task user (task_user) to run tasks as, run each task as "
        "its user's account (per_user), or allow running them as root explicitly (run_as_root)");
  }
  if (options.workdir.empty()) return InvalidArgument("workdir is empty");
  // Tasks that run as other accounts must reach their directories (checked
  // before anything is made: a refused start leaves nothing behind).
  WorkdirFix fixed;
  if (options.per_user || account) {
    ASSIGN_OR_RETURN(fixed, CheckWorkdirReachable(options.workdir,
                                                  account ? &account->ids : nullptr, /*fix=*/true));
  }
  RETURN_IF_ERROR(MakeDir(options.workdir, kPassDir));
  // DROVER_INPUTS of every task without inputs: empty, and read-only to a
  // task user, so that no task can leave files there for another.
  const std::string no_inputs = options.workdir + "/.no-inputs";
  RETURN_IF_ERROR(MakeDir(no_inputs, 0555));
  if (chmod(no_inputs.c_str(), 0555) != 0) {
    return Unavailable("cannot make " + no_inputs + " read-only: " + strerror(errno));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Spawner> spawner, Spawner::Create());
  UniqueFd dev_null(open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!dev_null.valid()) {
    return Unavailable(std::string("cannot open /dev/null: ") + strerror(errno));
  }
  std::unique_ptr<Executor> e(new Executor(std::move(options), reactor, std::move(isolator),
                                           std::move(spawner), std::move(dev_null)));
  e->account_ = std::move(account);
  e->accounts_ = std::move(accounts);
  e->no_inputs_ = no_inputs;
  e->workdir_note_ = std::move(fixed.note);
  return e;
}

Executor::Executor(ExecutorOptions options, Reactor* reactor, std::unique_ptr<Isolator> isolator,
                   std::unique_ptr<Spawner> spawner, UniqueFd dev_null)
    : options_(std::move(options)),
      reactor_(reactor),
      isolator_(std::move(isolator)),
      spawner_(std::move(spawner)),
      dev_null_(std::move(dev_null)) {
  if (options_.inherit_environment) {
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
      std::string_view kv(*e);
      size_t eq = kv.find('=');
      if (eq == std::string_view::npos) continue;
      base_env_.emplace_back(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
    }
  }
}

Executor::~Executor() {
  for (auto& [id, task] : tasks_) {
    if (!task->exited) {
      killpg(task->pid, SIGKILL);
      if (task->cage) (void)task->cage->KillAll();  // its pidfds close at once
      (void)Wake(task.get());                       // a frozen task dies at its thaw
      if (options_.watch != nullptr) options_.watch->Ended(task->pid);
      int status;
      while (waitpid(task->pid, &status, 0) < 0 && errno == EINTR) {
      }
    }
    // Unwatched here; closed with the task.
    reactor_->Unwatch(task->pidfd.fd());
    for (auto& out : task->out) {
      if (out) reactor_->Unwatch(out->read_fd());
    }
    if (task->timer_fd.valid()) reactor_->Unwatch(task->timer_fd.fd());
    for (const UniqueFd& fd : task->leftovers) reactor_->Unwatch(fd.fd());
    if (task->cage) {
      // The killed members may still be dying; removal is best effort.
      Status s = task->cage->Remove();
      (void)s;
    }
  }
  for (auto& cage : stale_cages_) {
    Status s = cage->Remove();
    (void)s;
  }
}

Status Executor::MakeTaskDir(const std::string& job, const std::string& task) {
  // The job directory exists for every task but a job's first here: try
  // the task directory alone, and make the job's only when it is missing.
  if (mkdir(task.c_str(), kPrivateDir) == 0 || errno == EEXIST) return Status::Ok();
  if (errno != ENOENT) return Unavailable("cannot create " + task + ": " + strerror(errno));
  RETURN_IF_ERROR(MakeDir(options_.workdir, kPassDir));
  RETURN_IF_ERROR(MakeDir(job, kPassDir));
  return MakeDir(task, kPrivateDir);
}

std::string CheckpointDirOf(const std::string& workdir, TaskId id) {
  return workdir + "/" + std::to_string(id.job) + "/" + std::to_string(id.index) + ".checkpoint";
}

Result<std::shared_ptr<const TaskAccount>> Executor::AccountFor(const std::string& user) const {
  if (!accounts_) return account_;  // one account: nothing to look up
  return accounts_->For(user);
}

Result<TaskDirs> Executor::PrepareDirs(TaskId id, uint32_t attempt, bool with_inputs,
                                       const std::string& user) {
  // Refused before anything is made for it.
  ASSIGN_OR_RETURN(std::shared_ptr<const TaskAccount> account, AccountFor(user));
  const TaskAccount* owner = account.get();
  TaskDirs d;
  const std::string job = options_.workdir + "/" + std::to_string(id.job);
  const std::string index = std::to_string(id.index);
  d.task = job + "/" + index + "." + std::to_string(attempt);
  d.inputs = with_inputs ? d.task + "/inputs" : no_inputs_;
  d.output = d.task + "/output";
  d.checkpoint = CheckpointDirOf(options_.workdir, id);
  d.result = d.task + "/result";
  d.stdout_path = d.task + "/stdout";
  d.stderr_path = d.task + "/stderr";
  RETURN_IF_ERROR(MakeTaskDir(job, d.task));
  RETURN_IF_ERROR(ChownPath(d.task, owner));
  for (const std::string* dir : {&d.output, &d.checkpoint}) {
    RETURN_IF_ERROR(MakeDir(*dir, kPrivateDir));
    RETURN_IF_ERROR(ChownPath(*dir, owner));
  }
  if (with_inputs) {
    RETURN_IF_ERROR(MakeDir(d.inputs, kPrivateDir));
    RETURN_IF_ERROR(ChownPath(d.inputs, owner));
  }
  if (prepared_.size() >= 1024) prepared_.erase(prepared_.begin());  // never started
  prepared_[id] = Prepared{attempt, d, user, std::move(account), std::nullopt, nullptr};
  return d;
}

Result<TaskDirs> Executor::PrepareStart(const TaskSpec& spec, bool with_inputs) {
  ASSIGN_OR_RETURN(TaskDirs dirs, PrepareDirs(spec.id, spec.attempt, with_inputs, spec.user));
  Prepared& prepared = prepared_[spec.id];
  ASSIGN_OR_RETURN(Command command, MakeCommand(spec, dirs, prepared.account.get()));
  if (options_.park_prepared) prepared.parked = Park(spec, dirs, command, prepared.account.get());
  prepared.command = std::move(command);
  return dirs;
}

std::optional<Executor::ParkedInfo> Executor::ParkedProcessOf(TaskId id) const {
  auto p = prepared_.find(id);
  if (p == prepared_.end() || !p->second.parked) return std::nullopt;
  const ParkedProcess& process = *p->second.parked->process;
  return ParkedInfo{process.pid(), process.parked()};
}

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

Result<Executor::Command> Executor::MakeCommand(const TaskSpec& spec, const TaskDirs& dirs,
                                                const TaskAccount* account) const {
  if (spec.argv.empty()) return InvalidArgument("task " + spec.id.ToString() + " has no command");
  Command c;
  c.argv = spec.argv;
  c.env = spec.env;
  c.working_dir = spec.working_dir;
  // A missing working directory is reported by the child's chdir
  // ("working directory missing: /x"), as a missing command with a '/' is
  // by its execve ("command not found: ./x"): no parent-side checks.
  const std::string& cwd = spec.working_dir.empty() ? dirs.task : spec.working_dir;
  c.environment = BuildEnvironment(spec, dirs, account);
  c.exe = spec.argv[0];
  if (c.exe.find('/') == std::string::npos) {
    std::string path_env = "/usr/local/bin:/usr/bin:/bin";
    for (const std::string& kv : c.environment) {
      if (kv.rfind("PATH=", 0) == 0) path_env = kv.substr(5);
    }
    ASSIGN_OR_RETURN(c.exe, commands_.Resolve(spec.argv[0], path_env, cwd));
  }
  return c;
}

void Executor::DiscardPrepared(TaskId id, uint32_t attempt) {
  auto p = prepared_.find(id);
  if (p == prepared_.end() || p->second.attempt != attempt) return;
  const TaskDirs dirs = std::move(p->second.dirs);
  prepared_.erase(p);
  if (dirs.inputs != no_inputs_) {
    if (DIR* d = opendir(dirs.inputs.c_str())) {
      while (dirent* e = readdir(d)) {
        const std::string name = e->d_name;
        if (name != "." && name != "..") unlink((dirs.inputs + "/" + name).c_str());
      }
      closedir(d);
    }
    rmdir(dirs.inputs.c_str());
  }
  rmdir(dirs.output.c_str());
  rmdir(dirs.task.c_str());
}

std::vector<std::string> Executor::BuildEnvironment(const TaskSpec& spec, const TaskDirs& dirs,
                                                    const TaskAccount* account) const {
  std::vector<std::pair<std::string, std::string>> vars = base_env_;
  auto set = [&vars](const std::string& key, std::string value) {
    for (auto& kv : vars) {
      if (kv.first == key) {
        kv.second = std::move(value);
        return;
      }
    }
    vars.emplace_back(key, std::move(value));
  };
  if (account != nullptr) {
    set("HOME", account->home);
    set("USER", account->name);
    set("LOGNAME", account->name);
  }
  for (const auto& [k, v] : spec.env) set(k, v);
  set("DROVER_JOB_ID", std::to_string(spec.id.job));
  set("DROVER_TASK_ID", spec.id.ToString());
  set("DROVER_TASK_INDEX",
      std::to_string(spec.task_index >= 0 ? spec.task_index : int64_t{spec.id.index}));
  set("DROVER_ATTEMPT", std::to_string(spec.attempt));
  set("DROVER_CPUS", JoinInts(spec.cores));
  int64_t threads = !spec.cores.empty()   ? static_cast<int64_t>(spec.cores.size())
                    : spec.milli_cpus > 0 ? (spec.milli_cpus + 999) / 1000
                                          : 1;
  set("OMP_NUM_THREADS", std::to_string(threads));
  set("DROVER_OUTPUT_DIR", dirs.output);
  set("DROVER_CHECKPOINT_DIR", dirs.checkpoint);
  set("DROVER_RESULT", dirs.result);
  set("DROVER_INPUTS", dirs.inputs);
  // A task without GPUs must not see any: an empty CUDA_VISIBLE_DEVICES
  // hides them from CUDA, "void" from the NVIDIA container runtime.
  set("CUDA_VISIBLE_DEVICES", JoinInts(spec.gpus));
  // The indices are NVML's, which count GPUs in PCI bus order; CUDA counts
  // fastest first unless told otherwise, so on a machine with two models
  // index 0 could be another GPU than the one assigned (gpu.h).
  set("CUDA_DEVICE_ORDER", "PCI_BUS_ID");
  set("NVIDIA_VISIBLE_DEVICES", spec.gpus.empty() ? "void" : JoinInts(spec.gpus));
  std::vector<std::string> out;
  out.reserve(vars.size());
  for (auto& [k, v] : vars) out.push_back(k + "=" + v);
  return out;
}

namespace {

// Whether a process parked for `made` may serve a start of `spec` (the
// command is compared separately).
bool SameLimits(const TaskSpec& made, const TaskSpec& spec) {
  return made.milli_cpus == spec.milli_cpus && made.memory_bytes == spec.memory_bytes &&
         made.max_pids == spec.max_pids && made.cores == spec.cores && made.gpus == spec.gpus &&
         made.output_cap_bytes == spec.output_cap_bytes && made.task_index == spec.task_index;
}

}  // namespace

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

  // Without cgroup trees for the reaper to kill, the process group it is
  // told of is all that ends this task should the worker die; a Spawn
  // returns only after the execve, so the program could run (and the
  // worker die) before the reaper knows. Such a start is made parked too,
  // and released once the reaper has been told. A setup step that fails
  // is then reported by the exit (TaskResult::start_error), not here.
  if (!parked && options_.watch != nullptr && isolator_->cgroup_roots().empty()) {
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
    task->started = std::chrono::steady_clock::now();
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

  task->started = std::chrono::steady_clock::now();
  Result<SpawnedProcess> proc = spawner_->Spawn(launch.plan);
  if (!proc.ok()) {
    task->cage->CloseJoinFds();
    Status r = task->cage->Remove();
    (void)r;  // nothing ran in it
    return proc.status();
  }
  if (times != nullptr) {
    times->spawned = proc->spawned_at;
    times->exec_done = std::chrono::time_point_cast<Duration>(std::chrono::system_clock::now());
  }
  task->pid = proc->pid;
  task->pidfd = std::move(proc->pidfd);
  if (options_.watch != nullptr) options_.watch->Started(task->pid, CageName(spec));
  task->cage->CloseJoinFds();
  for (auto& out : task->out) out->CloseWriteEnd();
  return Register(std::move(task));
}

Status Executor::MakeLaunch(const TaskSpec& spec, const TaskDirs& dirs, const Command& command,
                            const TaskAccount* account, Launch& launch) {
  CageSpec cage_spec;
  cage_spec.name = CageName(spec);
  cage_spec.milli_cpus = spec.milli_cpus;
  cage_spec.memory_bytes = spec.memory_bytes;
  cage_spec.max_pids = spec.max_pids;
  cage_spec.cores = spec.cores;
  cage_spec.gpus = spec.gpus;
  ASSIGN_OR_RETURN(launch.cage, isolator_->CreateCage(cage_spec));

  const uint64_t cap =
      spec.output_cap_bytes > 0 ? spec.output_cap_bytes : options_.output_cap_bytes;
  const std::string* paths[2] = {&dirs.stdout_path, &dirs.stderr_path};
  std::optional<std::pair<uid_t, gid_t>> owner;
  if (account != nullptr) owner.emplace(account->ids.uid, account->ids.gid);
  for (int i = 0; i < 2; ++i) {
    Result<std::unique_ptr<OutputCapture>> out =
        OutputCapture::CreateDeferred(*paths[i], cap, kPrivateFile, owner);
    if (!out.ok()) {
      launch.cage->CloseJoinFds();
      Status r = launch.cage->Remove();
      (void)r;  // nothing ran in it
      return out.status();
    }
    launch.out[i] = std::move(out).value();
  }

  launch.argv.reserve(spec.argv.size() + 1);
  for (const std::string& a : spec.argv) launch.argv.push_back(const_cast<char*>(a.c_str()));
  launch.argv.push_back(nullptr);
  launch.envp.reserve(command.environment.size() + 1);
  for (const std::string& e : command.environment) {
    launch.envp.push_back(const_cast<char*>(e.c_str()));
  }
  launch.envp.push_back(nullptr);
  launch.cwd = spec.working_dir.empty() ? dirs.task : spec.working_dir;

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
  if (account != nullptr) plan.user = account->ids;
  plan.display_name = spec.argv[0];
  return Status::Ok();
}

Result<pid_t> Executor::Register(std::unique_ptr<Task> task) {
  Task* t = task.get();
  const TaskId id = t->id;
  tasks_[id] = std::move(task);
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

void Executor::OnOutput(Task* task, int which) {
  OutputCapture& out = *task->out[which];
  if (out.Drain()) reactor_->Unwatch(out.read_fd());
}

[[gnu::hot]] void Executor::OnExit(Task* task) {
  reactor_->Unwatch(task->pidfd.fd());
  task->exited = true;
  task->result.wall =
      std::chrono::duration_cast<Duration>(std::chrono::steady_clock::now() - task->started);
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
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  r.oom_killed = usage.oom_killed && r.exit_code != 0;

  Result<std::vector<UniqueFd>> left = task->cage->KillAll();
  if (left.ok()) task->leftovers = std::move(left).value();
  r.leftovers_killed = task->leftovers.size();
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
  r.result_text = ReadResult(task->dirs.result, options_.result_cap_bytes);

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
  std::string disk_note = OutputLossNote(*task->out[0], task->dirs.stdout_path);
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
  std::unique_ptr<TaskCage> cage = std::move(task->cage);
  DoneCallback done = std::move(task->done);
  TaskResult result = std::move(r);
  tasks_.erase(task->id);
  if (done) done(result);

  if (!cage->Remove().ok()) stale_cages_.push_back(std::move(cage));
  for (auto it = stale_cages_.begin(); it != stale_cages_.end();) {
    it = (*it)->Remove().ok() ? stale_cages_.erase(it) : it + 1;
  }
}

}  // namespace drover::worker
