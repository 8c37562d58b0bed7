// Executor's making (Create: the accounts, the work directory, the spawner)
// and its destructor (every task still running killed and reaped). The
// rest is defined by concept, on the private types of executor_internal.h:
// executor_prepare.cc (task directories, command, environment),
// executor_start.cc (parking and starting), executor_exit.cc (output,
// exit, reaping, the result), executor_kill.cc (kill, suspend, resume), executor_warm.cc (calls in warm
// interpreters).
#include "worker/exec/executor.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "worker/exec/cgroup_files.h"
#include "worker/exec/directory_sizer.h"
#include "worker/exec/executor_internal.h"
#include "worker/exec/workdir_access.h"

extern char** environ;

namespace drover::worker {

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
  if (InodesDearAfterDeletes(e->options_.workdir)) {
    e->spare_dirs_ = std::make_unique<SpareDirs>(e->options_.workdir + "/.spare");
    RETURN_IF_ERROR(e->spare_dirs_->Open());
  }
  e->workdir_note_ = std::move(fixed.note);
  return e;
}

Executor::Executor(ExecutorOptions options, Reactor* reactor, std::unique_ptr<Isolator> isolator,
                   std::unique_ptr<Spawner> spawner, UniqueFd dev_null)
    : options_(std::move(options)),
      reactor_(reactor),
      isolator_(std::move(isolator)),
      cgroups_(!isolator_->cgroup_roots().empty()),
      spawner_(std::move(spawner)),
      dev_null_(std::move(dev_null)) {
  // A warm call without pinned cores may use what the worker may.
  if (sched_getaffinity(0, sizeof(all_cpus_), &all_cpus_) != 0) {
    CPU_ZERO(&all_cpus_);
    for (int c = 0; c < CPU_SETSIZE; ++c) CPU_SET(c, &all_cpus_);
  }
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
    if (task->warm) reactor_->Unwatch(task->warm->socket.fd());
    for (const UniqueFd& fd : task->leftovers) reactor_->Unwatch(fd.fd());
    if (task->cage) {
      // The killed members may still be dying; removal is best effort.
      Status s = task->cage->Remove();
      (void)s;
    }
  }
  for (auto& w : idle_) {
    reactor_->Unwatch(w->pidfd.fd());
    EndWarm(*w);
  }
  idle_.clear();
  if (idle_timer_.valid()) reactor_->Unwatch(idle_timer_.fd());
  if (disk_timer_.valid()) reactor_->Unwatch(disk_timer_.fd());
  if (sizer_) reactor_->Unwatch(sizer_->done_fd());
  if (warm_home_) (void)warm_home_->Remove();
  for (auto& cage : stale_cages_) {
    Status s = cage->Remove();
    (void)s;
  }
}

}  // namespace drover::worker
