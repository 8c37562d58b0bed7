#include "worker/agent/agent.h"

#include <pwd.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <utility>

#include "common/quantity.h"
#include "net/token.h"
#include "worker/agent/agent_impl.h"
#include "worker/exec/container.h"
#include "worker/exec/fencing.h"
#include "worker/exec/host_features.h"
#include "worker/exec/isolator.h"
#include "worker/exec/workdir_access.h"
#include "worker/state/agent_convert.h"

namespace drover::worker {
namespace {

constexpr char kAgentVersion[] = "0.1.0";

// How long a new life waits for the previous life's reaper to let go of
// the work directory's lock, and for the leftovers it kills to die.
constexpr Duration kLockWait = Seconds(5);
constexpr Duration kLeftoverWait = Seconds(10);

}  // namespace

bool RunsTasksPerUser(const AgentConfig& config) {
  return ::geteuid() == 0 && config.task_user.empty() &&
         (!config.run_as_root || !config.user_map.empty());
}

Result<std::string> CheckWorkdir(const AgentConfig& config) {
  std::optional<TaskAccount> one;
  if (::geteuid() == 0 && !config.task_user.empty()) {
    Result<TaskAccount> found = LookUpAccount(config.task_user);
    if (!found.ok()) return found.status().WithContext("--user " + config.task_user);
    one = std::move(found).value();
  } else if (!RunsTasksPerUser(config)) {
    return std::string();  // tasks run as the worker's own account
  }
  ASSIGN_OR_RETURN(WorkdirFix fix, CheckWorkdirReachable(config.workdir,
                                                         one ? &one->ids : nullptr,
                                                         /*fix=*/false));
  return fix.note;
}

Result<WorkerResources> DetectOffer(const AgentConfig& config,
                                    std::unique_ptr<UtilizationSampler>* sampler) {
  DetectOptions detect;
  detect.cpus = config.cpus;
  detect.labels = config.labels;
  detect.counters = config.counters;
  detect.gpus = config.gpus;
  detect.gpu_part = config.gpu_part;
  detect.gpu_parts = config.gpu_parts;
  detect.gpu_type = config.gpu_type;
  detect.gpu_mem = config.gpu_mem;
  detect.nvml_library = config.nvml_library;
  detect.nvidia_smi = config.nvidia_smi;
  ASSIGN_OR_RETURN(WorkerResources resources, DetectResources(detect, sampler));
  if (!config.mem.empty()) {
    Result<uint64_t> mem = ParseBytes(config.mem);
    if (!mem.ok()) return mem.status().WithContext("--mem");
    resources.memory_bytes = *mem;
  }
  return resources;
}

Status Agent::Impl::Init() {
  if (config_.servers.empty()) return InvalidArgument("no server given (--server host:port)");
  for (const std::string& list : config_.servers) {
    // "a:7210,b:7210" (one flag, or an access file's address) counts as
    // several servers.
    size_t start = 0;
    while (start <= list.size()) {
      size_t comma = list.find(',', start);
      if (comma == std::string::npos) comma = list.size();
      ASSIGN_OR_RETURN(ServerAddress address, ParseServerAddress(list.substr(start, comma - start)));
      servers_.push_back(std::move(address));
      start = comma + 1;
    }
  }
  if (config_.tls && config_.fingerprint.empty()) {
    return FailedPrecondition(
        "TLS needs the server's certificate fingerprint (--fingerprint, printed by `drover "
        "server`), or --no-tls for a trusted network");
  }
  if (config_.workdir.empty()) return InvalidArgument("no work directory given (--workdir)");
  if (config_.heartbeat_interval <= Duration::zero()) {
    return InvalidArgument("heartbeat interval must be positive");
  }
  // The fencing timing is checked here, before anything is detected or
  // started; the state machine made below applies it.
  RETURN_IF_ERROR(
      FencingPolicy::Create(config_.lease_ttl, config_.heartbeat_interval, clock_.Now()).status());
  // Who tasks run as (agent.h): one account, or each task's user's.
  using UserMap = std::map<std::string, std::string>;  // one macro argument
  ASSIGN_OR_RETURN(UserMap user_map, ParseUserMap(config_.user_map));
  if (!user_map.empty() && !config_.task_user.empty()) {
    return InvalidArgument(
        "--user runs every task as one account, --user-map each task as its user's: give one "
        "of them");
  }
  if (!user_map.empty() && ::geteuid() != 0) {
    return FailedPrecondition(
        "--user-map needs a worker running as root (one that is not runs every task as "
        "itself)");
  }
  const bool per_user = RunsTasksPerUser(config_);
  ASSIGN_OR_RETURN(IsolationMode mode, ParseIsolationMode(config_.isolation));

  ASSIGN_OR_RETURN(WorkerResources resources, DetectOffer(config_, &sampler_));
  {
    // One worker per GPU on this machine (gpu_lock.h).
    std::vector<GpuInfo> kept;
    std::vector<std::string> refused;
    ASSIGN_OR_RETURN(gpu_locks_, GpuLocks::Acquire(config_.gpu_lock_dir.empty()
                                                       ? GpuLocks::DefaultDir()
                                                       : config_.gpu_lock_dir,
                                                   resources.gpus, &kept, &refused));
    for (const std::string& line : refused) spdlog::warn("worker: {}", line);
    resources.gpus = std::move(kept);
  }
  for (const std::string& note : resources.notes) spdlog::info("worker: {}", note);
  name_ = config_.name.empty() ? resources.hostname : config_.name;
  summary_ = FormatSummary(resources);
  WorkerStateConfig state_config;
  state_config.name = name_;
  state_config.agent_version = kAgentVersion;
  state_config.resources = ToCoreResources(resources, name_);
  // Tasks with `network = "none"` are placed only where this is true.
  state_config.resources.private_network = CanMakePrivateNetwork();
  // Tasks with `disk` are placed only where it fits (heartbeats update it).
  state_config.resources.disk_free_bytes = FreeDiskBytes(config_.workdir).value_or(0);
  state_config.capacity.cores = resources.cpu_ids;
  state_config.capacity.memory_bytes = resources.memory_bytes;
  for (const GpuInfo& gpu : resources.gpus) {
    state_config.capacity.gpus.push_back(gpu.index);
    health_gpus_.push_back(gpu.index);
  }
  state_config.heartbeat_interval = config_.heartbeat_interval;
  state_config.argv_ids = true;  // OnFrame resolves them
  state_config.binary = true;
  state_config.lease_ttl = config_.lease_ttl;
  state_config.kill_grace = config_.kill_grace;
  state_config.idle_timeout = config_.idle_timeout;
  state_config.min_available_bytes = config_.min_available_bytes;
  if (config_.desktop) {
    state_config.desktop.enabled = true;
    state_config.desktop.idle_after = config_.idle_after;
    state_config.desktop.resume_after = config_.resume_after;
    state_config.desktop.suspend_for = config_.suspend_for;
    state_config.desktop.max_outside_load = config_.max_outside_load;
    InputSourceEnv input_env;
    input_env.clock = &clock_;
    Result<std::unique_ptr<InputSource>> input = MakeInputSource(config_.idle_source, input_env);
    if (!input.ok())
      return input.status().WithContext("--desktop: --idle-source " + config_.idle_source);
    input_ = std::move(input).value();
    outside_ = std::make_unique<OutsideLoad>();
  }
  if (config_.lifetime > Duration::zero()) {
    state_config.resources.ends_at = clock_.Now() + config_.lifetime;
  }

  // Before any work: end what a previous life of this worker left running
  // (its work directory holds the record), then fork the reaper that ends
  // this life's tasks should it die (DESIGN.md section 4, the timing rule).
  // Before anything is made there: tasks that run as other accounts must
  // reach it (the executor gives the directory itself what it lacks).
  RETURN_IF_ERROR(CheckWorkdir(config_).status());
  if (::mkdir(config_.workdir.c_str(), 0711) != 0 && errno != EEXIST) {
    return Unavailable("cannot create " + config_.workdir + ": " + std::strerror(errno));
  }
  ASSIGN_OR_RETURN(life_, LifeRecord::Open(config_.workdir + "/.worker", kLockWait));
  ASSIGN_OR_RETURN(LeftoverReport left, life_->EndPreviousLife(kLeftoverWait));
  if (left.processes_killed > 0) {
    std::string tasks;
    for (const std::string& t : left.tasks) tasks += (tasks.empty() ? "" : ", ") + t;
    spdlog::warn(
        "worker {}: killed {} process(es) its previous life left running ({}); their attempts "
        "are lost and not reported as running",
        name_, left.processes_killed, tasks);
  }
  for (const std::string& note : left.notes) spdlog::warn("worker {}: {}", name_, note);

  IsolatorOptions isolator_options;
  isolator_options.mode = mode;
  isolator_options.gpu_count = static_cast<int>(resources.gpus.size());
  ASSIGN_OR_RETURN(std::unique_ptr<Isolator> isolator, MakeIsolator(isolator_options));
  const std::vector<std::string> roots = isolator->cgroup_roots();
  RETURN_IF_ERROR(life_->RecordCgroupRoots(roots));
  if (config_.desktop) {
    task_cgroups_ = roots;
    tasks_cpu_ = CgroupCpuTime(task_cgroups_);
    spdlog::info(
        "worker {}: idle-desktop mode: owner input from {}; offers work after {} without "
        "input{}",
        name_, input_->Describe(), FormatDuration(config_.idle_after),
        roots.empty() ? " (the load of other programs is not measured without cgroups)"
                      : " and with other programs below " +
                            std::to_string(config_.max_outside_load).substr(0, 4) + " cores");
  }
  // Tasks with an `image` are placed only where a runtime was found; the
  // reaper removes this worker's containers from podman's list once it
  // has killed them.
  std::vector<std::string> cleanup, cleanup_env;
  if (Result<ContainerRuntime> runtime = FindContainerRuntime(isolator->mode(), config_.workdir);
      runtime.ok()) {
    state_config.resources.container_runtime = runtime->description;
    state_config.resources.container_gpus = runtime->gpus;
    spdlog::info("worker {}: runs tasks with an image through {}{}", name_, runtime->description,
                 runtime->gpus ? ", GPUs through CDI" : "");
    cleanup = ContainerCleanupCommand(*runtime, &cleanup_env);
    container_ = std::move(runtime).value();
  } else {
    spdlog::info("worker {}: runs no tasks with an image: {}", name_, runtime.status().message());
  }
  // Every hierarchy's tree: the reaper kills what each lists (cgroup v1
  // lists the same processes in each; the freezer's is frozen first), then
  // removes them all once empty.
  ASSIGN_OR_RETURN(reaper_, Reaper::Start(roots, life_->lock_fd(), cleanup, cleanup_env));

  ExecutorOptions options;
  options.workdir = config_.workdir;
  options.task_user = config_.task_user;
  options.run_as_root = config_.run_as_root;
  options.per_user = per_user;
  options.user_map = user_map;
  options.worker_name = name_;
  if (per_user) {
    accounts_.emplace(user_map, config_.run_as_root, name_);
    spdlog::info("worker {}: runs each task as its user's account{}{}", name_,
                 user_map.empty()
                     ? std::string()
                     : " (" + std::to_string(user_map.size()) + " mapped by --user-map)",
                 config_.run_as_root ? "; root allowed" : "");
  } else if (!config_.task_user.empty()) {
    spdlog::info("worker {}: runs every task as {}", name_, config_.task_user);
  }
  options.output_cap_bytes = config_.log_cap_bytes;
  options.default_grace = config_.kill_grace;
  if (roots.empty()) {
    guard_ = std::make_unique<TaskGuard>(*life_, *reaper_, name_);
    options.watch = guard_.get();
  }
  const IsolationMode isolation = isolator->mode();
  if (container_) options.container = *container_;
  if (config_.task_runner) {
    runner_ = config_.task_runner;
  } else {
    reactor_ = std::make_unique<AsioReactor>(loop_);
    ASSIGN_OR_RETURN(std::unique_ptr<Executor> executor,
                     Executor::Create(options, reactor_.get(), std::move(isolator)));
    if (!executor->workdir_note().empty()) {
      spdlog::info("worker {}: {}", name_, executor->workdir_note());
    }
    own_runner_ = std::make_unique<ExecutorRunner>(std::move(executor));
    runner_ = own_runner_.get();
  }
  // The identity the server binds this worker's name to (made on first start).
  const std::string key_file =
      config_.key_file.empty() ? config_.workdir + "/worker.key" : config_.key_file;
  Result<std::string> key = net::LoadOrCreateToken(key_file);
  if (!key.ok()) return key.status().WithContext("worker identity key " + key_file);
  state_config.key = std::move(key).value();
  // (No token: a test's fake link; peers could not be checked either.)
  if (config_.files && !config_.token.empty()) {
    FilePlaneOptions files;
    files.cache_dir = config_.workdir + "/.cache";
    files.tls_dir = config_.workdir + "/.files-tls";
    files.cache_bytes = config_.cache_bytes;
    files.bind_address = config_.files_bind;
    files.port = config_.files_port;
    files.token = config_.token;
    files.max_output_bytes = config_.max_output_bytes;
    files.clock = &clock_;
    ASSIGN_OR_RETURN(files_, FilePlane::Start(loop_, std::move(files)));
    state_config.files_port = files_->port();
    state_config.files_fingerprint = files_->fingerprint();
    spdlog::info("worker {}: file service on port {} (cache {}/.cache)", name_, files_->port(),
                 config_.workdir);
    if (::geteuid() == 0 && !config_.task_user.empty()) {
      if (const passwd* pw = ::getpwnam(config_.task_user.c_str())) {
        task_owner_ = std::pair(pw->pw_uid, pw->pw_gid);
      }
    }
  }

  LogSenderOptions log_options;
  log_options.rate_bytes_per_sec = config_.log_rate_bytes_per_sec;
  logs_ =
      std::make_unique<LogSender>(loop_, clock_, log_options,
                                  // Messages kept for a batch go first: the server reads in order.
                                  LogSender::Sink{[this](std::string text) {
                                                    FlushBatch();
                                                    if (session_)
                                                      session_->SendText(std::move(text));
                                                  },
                                                  [this](std::string bytes) {
                                                    FlushBatch();
                                                    if (session_)
                                                      session_->SendBinary(std::move(bytes));
                                                  }});

  spdlog::info("worker {}: {}, isolation {}, work directory {}", name_, summary_,
               IsolationModeName(isolation), config_.workdir);
  ASSIGN_OR_RETURN(WorkerState state, WorkerState::Create(std::move(state_config), clock_.Now()));
  state_.emplace(std::move(state));
  if (config_.server_link) {
    link_ = config_.server_link;
  } else {
    own_link_ = std::make_unique<WebSocketLink>(loop_);
    link_ = own_link_.get();
  }
  Run(AgentBegan{});
  if (input_) PollOwner();
  if (config_.health_interval > Duration::zero()) {
    HealthOptions health;
    health.program = config_.health_check;
    health.interval = config_.health_interval;
    health.timeout = config_.health_timeout;
    health.workdir = config_.workdir;
    health.min_free_bytes = config_.min_free_disk_bytes;
    health.nvml_library = config_.nvml_library;
    health.gpus = health_gpus_;
    health_ = std::make_unique<HealthMonitor>(
        std::move(health), loop_, [this](HealthVerdict verdict) {
          if (!stopped_) {
            Run(HealthChecked{std::move(verdict.unhealthy), std::move(verdict.sick_gpus),
                              std::move(verdict.kind)});
          }
        });
  }
  Connect();
  if (files_ && config_.checkpoint_every > Duration::zero()) {
    checkpoint_timer_.ArmAfter(config_.checkpoint_every, [this] { SaveCheckpoints(); });
  }
  return Status::Ok();
}

void Agent::Impl::Stop() {
  if (stopped_) return;
  stopped_ = true;
  *alive_ = false;
  health_.reset();
  reconnect_timer_.Cancel();
  heartbeat_timer_.Cancel();
  fence_timer_.Cancel();
  watchdog_timer_.Cancel();
  owner_timer_.Cancel();
  checkpoint_timer_.Cancel();
  ++gen_;
  if (session_) {
    FlushBatch();
    session_->Close("worker stopping");
    session_.reset();
  }
  logs_.reset();
  files_.reset();
  // Queued successors never start (their parked processes go with the
  // executor); nothing is left to report them to. Kills every task at
  // once; their callbacks are not called. Then the reaper leaves without
  // killing, and the work directory is free.
  prepared_.clear();
  runner_ = nullptr;
  own_runner_.reset();
  guard_.reset();
  reaper_.reset();
  life_.reset();
  reactor_.reset();
  state_.reset();
}

// ---- Agent ---------------------------------------------------------------

Result<std::unique_ptr<Agent>> Agent::Start(net::EventLoop& loop, AgentConfig config) {
  auto impl = std::make_unique<Impl>(loop, std::move(config));
  RETURN_IF_ERROR(impl->Init());
  return std::unique_ptr<Agent>(new Agent(std::move(impl)));
}

Agent::Agent(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Agent::~Agent() = default;
void Agent::Stop() { impl_->Stop(); }
WorkerId Agent::worker_id() const { return impl_->worker_id(); }
const std::string& Agent::summary() const { return impl_->summary(); }

}  // namespace drover::worker
