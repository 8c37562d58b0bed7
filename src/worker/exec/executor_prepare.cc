// Executor's preparation of a start: the task's directories (PrepareDirs,
// PrepareStart's part), their owner, the command and its environment, and
// a prepared attempt discarded (executor.h).
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "worker/exec/cgroup_files.h"
#include "worker/exec/executor.h"
#include "worker/exec/executor_internal.h"

namespace drover::worker {
namespace {

std::string JoinInts(const std::vector<int>& v) {
  std::string s;
  for (int x : v) {
    if (!s.empty()) s += ',';
    s += std::to_string(x);
  }
  return s;
}

Status ChownPath(const std::string& path, const TaskAccount* account) {
  if (account == nullptr) return Status::Ok();
  if (chown(path.c_str(), account->ids.uid, account->ids.gid) != 0) {
    return Unavailable("cannot hand " + path + " to the task's account " + account->name + ": " +
                       strerror(errno));
  }
  return Status::Ok();
}

}  // namespace

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
  const uid_t uid = owner != nullptr ? owner->ids.uid : geteuid();
  for (const std::string* dir : {&d.output, &d.checkpoint}) {
    RETURN_IF_ERROR(spare_dirs_ ? spare_dirs_->Make(*dir, kPrivateDir, uid)
                                : MakeDir(*dir, kPrivateDir));
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
  // A warm call's process is its interpreter, found at the start.
  const bool warm = options_.warm_interpreters && WantsWarm(spec);
  if (options_.park_prepared && !warm) prepared.parked = Park(spec, dirs, command, prepared.account.get());
  prepared.command = std::move(command);
  return dirs;
}

std::optional<Executor::ParkedInfo> Executor::ParkedProcessOf(TaskId id) const {
  auto p = prepared_.find(id);
  if (p == prepared_.end() || !p->second.parked) return std::nullopt;
  const ParkedProcess& process = *p->second.parked->process;
  return ParkedInfo{process.pid(), process.parked()};
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
  if (!spec.image.empty()) return MakeContainerCommand(spec, dirs, account, std::move(c));
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

Result<Executor::Command> Executor::MakeContainerCommand(const TaskSpec& spec, const TaskDirs& dirs,
                                                         const TaskAccount* account,
                                                         Command c) const {
  if (!options_.container) {
    return FailedPrecondition("task " + spec.id.ToString() + " has an image, and this worker " +
                              "runs no containers");
  }
  const ContainerRuntime& runtime = *options_.container;
  if (!spec.gpus.empty() && !runtime.gpus) {
    return FailedPrecondition(
        "this worker cannot give a container only its own GPUs (no CDI "
        "spec of the NVIDIA container toolkit)");
  }
  ContainerRun run;
  run.name = ContainerName(spec);
  run.image = spec.image;
  run.pull = spec.image_pull;
  run.argv = spec.argv;
  run.cwd = spec.working_dir.empty() ? dirs.task : spec.working_dir;
  run.env = ContainerEnvironment(c.environment, base_env_, spec.gpus.size());
  run.mounts = {dirs.task, dirs.checkpoint};
  if (dirs.inputs.rfind(dirs.task + "/", 0) != 0) run.read_only_mounts.push_back(dirs.inputs);
  if (account != nullptr) run.user.emplace(account->ids.uid, account->ids.gid);
  run.gpus = spec.gpus;
  run.private_network = spec.private_network;
  ASSIGN_OR_RETURN(c.run_argv, ContainerCommand(runtime, run));
  c.exe = c.run_argv[0];
  c.image = spec.image;
  // The start step and podman run as the worker, in its environment, with
  // the worker's containers.conf.
  c.environment.clear();
  for (const auto& [k, v] : base_env_) {
    if (k != "CONTAINERS_CONF" || runtime.conf.empty()) c.environment.push_back(k + "=" + v);
  }
  if (!runtime.conf.empty()) c.environment.push_back("CONTAINERS_CONF=" + runtime.conf);
  return c;
}

std::string Executor::ContainerName(const TaskSpec& spec) const {
  return "drover-" + std::to_string(getpid()) + "-" + spec.id.ToString() + "." +
         std::to_string(spec.attempt);
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

void Executor::Recycle(TaskId id, const TaskDirs& dirs) {
  if (!spare_dirs_ || tasks_.count(id) != 0 || prepared_.count(id) != 0) return;  // in use
  spare_dirs_->Recycle(dirs.output);
  spare_dirs_->Recycle(dirs.checkpoint);
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

}  // namespace drover::worker
