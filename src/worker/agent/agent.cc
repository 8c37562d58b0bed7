#include "worker/agent/agent.h"

#include <fcntl.h>
#include <pwd.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <type_traits>
#include <utility>
#include <variant>

#include "common/quantity.h"
#include "net/client_options.h"
#include "net/token.h"
#include "net/ws_session.h"
#include "proto/messages.h"
#include "worker/agent/agent_logs.h"
#include "worker/agent/asio_reactor.h"
#include "worker/agent/file_plane.h"
#include "worker/agent/server_link.h"
#include "worker/agent/task_runner.h"
#include "worker/desktop/input_source.h"
#include "worker/desktop/outside_load.h"
#include "worker/exec/executor.h"
#include "worker/exec/fencing.h"
#include "worker/exec/isolator.h"
#include "worker/exec/life_record.h"
#include "worker/exec/reaper.h"
#include "worker/exec/task_account.h"
#include "worker/exec/workdir_access.h"
#include "worker/resources/gpu_lock.h"
#include "worker/resources/resources.h"
#include "worker/resources/resources_host.h"
#include "worker/state/agent_convert.h"
#include "worker/state/worker_state.h"

namespace drover::worker {
namespace {

constexpr char kAgentVersion[] = "0.1.0";
// How many finished tasks' log locations are remembered for `drover logs`.
constexpr size_t kMaxKnownLogs = 4096;

// Writes `text` to `path` (created or truncated, mode 0644).
Status WriteFile(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Unavailable("cannot create " + path + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string error = std::strerror(errno);
      ::close(fd);
      return Unavailable("cannot write " + path + ": " + error);
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return Status::Ok();
}

// How long a new life waits for the previous life's reaper to let go of
// the work directory's lock, and for the leftovers it kills to die.
constexpr Duration kLockWait = Seconds(5);
constexpr Duration kLeftoverWait = Seconds(10);

// Tells the reaper and the life record of each task's process group, for
// isolation without cgroups (with cgroups, the trees are the record).
class TaskGuard final : public ProcessWatch {
 public:
  TaskGuard(LifeRecord& record, Reaper& reaper, std::string worker)
      : record_(record), reaper_(reaper), worker_(std::move(worker)) {}
  void Started(pid_t pid, const std::string& name) override {
    Note(record_.TaskStarted(pid, name));
    Note(reaper_.Watch(pid));
  }
  void Ended(pid_t pid) override {
    Note(reaper_.Forget(pid));
    Note(record_.TaskEnded(pid));
  }

 private:
  void Note(const Status& s) {
    if (s.ok() || warned_) return;
    warned_ = true;
    spdlog::error("worker {}: {}; tasks may outlive this worker if it dies", worker_, s.ToString());
  }
  LifeRecord& record_;
  Reaper& reaper_;
  std::string worker_;
  bool warned_ = false;
};

}  // namespace

class Agent::Impl {
 public:
  Impl(net::EventLoop& loop, AgentConfig config)
      : loop_(loop),
        config_(std::move(config)),
        clock_(config_.clock ? *config_.clock : own_clock_),
        backoff_(config_.reconnect,
                 [rng = std::make_shared<std::mt19937_64>(std::random_device{}())] {
                   return std::uniform_real_distribution<double>(0.0, 1.0)(*rng);
                 }),
        reconnect_timer_(loop),
        heartbeat_timer_(loop),
        fence_timer_(loop),
        watchdog_timer_(loop),
        owner_timer_(loop),
        checkpoint_timer_(loop) {}

  ~Impl() { Stop(); }

  Status Init();
  void Stop();
  WorkerId worker_id() const { return worker_id_.load(); }
  const std::string& summary() const { return summary_; }

 private:
  struct KnownLog {
    uint32_t attempt = 0;
    TaskDirs dirs;
    OutputCap max_output;  // from its assignment (file_plane.h)
  };

  // Hands one event to the state machine (worker_state.h) at the clock's
  // now and carries out its commands in order. An answer a command owes
  // (TaskStarted, TaskStartFailed, TaskPrepareFailed) is handled at once,
  // before the commands after it, as the state machine expects.
  void Run(const WorkerEvent& event);
  void Execute(const WorkerCommand& command);

  // Connection.
  void Connect();
  void OnConnected(uint64_t gen, Result<std::shared_ptr<net::WsSession>> session);
  void OnText(uint64_t gen, const std::string& text);
  void OnClosed(uint64_t gen, const Status& why);
  void ScheduleReconnect();
  void Send(const proto::WorkerMessage& message);

  // Tasks: carrying out the state machine's commands.
  void StartTask(const proto::Assignment& assignment, bool prepared);
  void PrepareQueued(const proto::Assignment& assignment);
  void KillTask(const worker::KillTask& kill);
  void OnTaskDone(const TaskResult& result);
  // Reports an ended attempt (after its outputs were collected).
  void ReportDone(const TaskResult& result, core::TaskOutcome outcome);
  // Takes out of `assign` the attempts whose input files must be fetched
  // first; each goes to the state machine once fetched, or is refused.
  void HoldForInputs(proto::Assign& assign);
  // A copy of another worker's outputs (replicas): fetched, kept under its
  // job, then reported; a failure only logged (the server counts no copy).
  void OnReplicate(const proto::Replicate& copy);
  // The task's directories and $DROVER_INPUTS files; `queued`: also its
  // environment and program (Executor::PrepareStart), for a start later.
  Result<TaskDirs> Prepare(const proto::Assignment& assignment, bool queued);
  TaskSpec SpecOf(const proto::Assignment& assignment) const;
  void OnLogRequest(const proto::LogRequest& request);
  void ArmTimer(WorkerTimer timer, Time at);
  net::Timer& TimerOf(WorkerTimer timer);
  // Idle-desktop mode: one OwnerSample for the state machine, then again
  // after owner_poll.
  void PollOwner();
  void SendOwner(const worker::SendOwner& command);
  // Checkpoints (file_plane.h): every running attempt's directory saved
  // every checkpoint_every; an ended attempt's saved before its report.
  void SaveCheckpoints();
  void ReportAfterCheckpoint(const TaskResult& result, core::TaskOutcome outcome);
  void SendCheckpoint(TaskId task, uint32_t attempt,
                      Result<std::optional<std::vector<core::OutputFile>>> saved);

  net::EventLoop& loop_;
  AgentConfig config_;
  RealClock own_clock_;  // used when config_.clock is null
  Clock& clock_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  bool stopped_ = false;

  // Resources and execution.
  std::vector<ServerAddress> servers_;
  std::string name_;
  std::string summary_;
  std::unique_ptr<UtilizationSampler> sampler_;
  GpuLocks gpu_locks_;  // held for the agent's life
  std::unique_ptr<AsioReactor> reactor_;
  // What outlives this life if it dies (life_record.h, reaper.h); the
  // executor tells them of each task (declared first: they outlive it).
  std::unique_ptr<LifeRecord> life_;
  std::unique_ptr<Reaper> reaper_;
  std::unique_ptr<TaskGuard> guard_;
  std::unique_ptr<TaskRunner> own_runner_;  // the Executor, when config_.task_runner is null
  TaskRunner* runner_ = nullptr;
  std::unique_ptr<LogSender> logs_;
  bool reaper_gone_ = false;

  // Idle-desktop mode (config_.desktop): where the owner's input is read,
  // and the load outside the tasks' cgroups (none: not measured).
  std::unique_ptr<InputSource> input_;
  std::unique_ptr<OutsideLoad> outside_;
  std::vector<std::string> task_cgroups_;
  Duration tasks_cpu_ = Duration::zero();  // CgroupCpuTime at the last load sample
  double outside_load_ = 0;
  Time next_load_at_;

  // The protocol: running, queued and unacknowledged tasks, fencing.
  std::optional<WorkerState> state_;
  // Outboxes kept for the next Run (one per level of nesting: a command's
  // answer is handled while the outer outbox is still being carried out),
  // so that the handoff's path allocates none.
  std::vector<WorkerOutbox> spare_outboxes_;
  // What PrepareTask made for each queued attempt, until it starts or is
  // discarded.
  std::map<proto::TaskAttempt, TaskDirs> prepared_;
  std::map<TaskId, KnownLog> known_logs_;
  // The data plane (config_.files): cache, file service, fetches.
  std::unique_ptr<FilePlane> files_;

  // The server link.
  std::unique_ptr<ServerLink> own_link_;  // when config_.server_link is null
  ServerLink* link_ = nullptr;
  net::Backoff backoff_;
  net::Timer reconnect_timer_;
  net::Timer heartbeat_timer_;
  net::Timer fence_timer_;
  net::Timer watchdog_timer_;
  net::Timer owner_timer_;
  net::Timer checkpoint_timer_;
  // How to reach the server of the connection in progress over HTTP (the
  // file store), and who a restored checkpoint's files belong to.
  net::ClientOptions server_options_;
  std::optional<std::pair<uid_t, gid_t>> task_owner_;
  // Per-user mode: whose a restored checkpoint is, task by task.
  std::optional<UserAccounts> accounts_;
  size_t next_server_ = 0;
  // The leader a standby named (proto::Error::leader): the next attempt
  // goes there, once; then the list goes on.
  std::optional<ServerAddress> redirect_;
  ServerAddress current_;  // the address of the attempt in progress
  uint64_t gen_ = 0;  // bumps with each connection attempt; stale callbacks check it
  std::shared_ptr<net::WsSession> session_;
  std::atomic<WorkerId> worker_id_{0};
};

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
  state_config.capacity.cores = resources.cpu_ids;
  state_config.capacity.memory_bytes = resources.memory_bytes;
  for (const GpuInfo& gpu : resources.gpus) state_config.capacity.gpus.push_back(gpu.index);
  state_config.heartbeat_interval = config_.heartbeat_interval;
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
    Result<std::unique_ptr<InputSource>> input = MakeInputSource(config_.idle_source);
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
  // One tree suffices for the reaper: cgroup v1 lists the same processes
  // in each hierarchy, and the first (freezer) can be frozen.
  ASSIGN_OR_RETURN(reaper_, Reaper::Start(roots.empty() ? roots : std::vector<std::string>{roots[0]},
                                          life_->lock_fd()));

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
  logs_ = std::make_unique<LogSender>(
      loop_, clock_, log_options,
      LogSender::Sink{[this](std::string text) {
                        if (session_) session_->SendText(std::move(text));
                      },
                      [this](std::string bytes) {
                        if (session_) session_->SendBinary(std::move(bytes));
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
  reconnect_timer_.Cancel();
  heartbeat_timer_.Cancel();
  fence_timer_.Cancel();
  watchdog_timer_.Cancel();
  owner_timer_.Cancel();
  checkpoint_timer_.Cancel();
  ++gen_;
  if (session_) {
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

// ---- the state machine's commands ------------------------------------------

[[gnu::hot]] void Agent::Impl::Run(const WorkerEvent& event) {
  if (stopped_ || !state_) return;
  WorkerOutbox out;
  if (!spare_outboxes_.empty()) {
    out = std::move(spare_outboxes_.back());
    spare_outboxes_.pop_back();
  }
  state_->Handle(clock_.Now(), event, out);
  for (const WorkerCommand& command : out) {
    if (stopped_) return;  // a callback (on_attached) may have stopped the agent
    Execute(command);
  }
  out.clear();
  spare_outboxes_.push_back(std::move(out));
}

[[gnu::hot]] void Agent::Impl::Execute(const WorkerCommand& command) {
  // A start first, outside the visit's table (WorkerState::Handle says why).
  if (const auto* start = std::get_if<worker::StartTask>(&command)) {
    return StartTask(start->assignment, start->prepared);
  }
  std::visit(
      [&](const auto& c) {
        using T = std::decay_t<decltype(c)>;
        if constexpr (std::is_same_v<T, SendMessage>) {
          Send(c.message);
        } else if constexpr (std::is_same_v<T, worker::StartTask>) {
          StartTask(c.assignment, c.prepared);
        } else if constexpr (std::is_same_v<T, PrepareTask>) {
          PrepareQueued(c.assignment);
        } else if constexpr (std::is_same_v<T, DiscardPrepared>) {
          prepared_.erase(proto::TaskAttempt{c.task, c.attempt});
          runner_->DiscardPrepared(c.task, c.attempt);
        } else if constexpr (std::is_same_v<T, worker::KillTask>) {
          KillTask(c);
        } else if constexpr (std::is_same_v<T, worker::ArmTimer>) {
          ArmTimer(c.timer, c.at);
        } else if constexpr (std::is_same_v<T, CancelTimer>) {
          TimerOf(c.timer).Cancel();
        } else if constexpr (std::is_same_v<T, SetReaperDeadline>) {
          Status told = reaper_->SetDeadline(c.after);
          if (!told.ok() && !reaper_gone_) {
            reaper_gone_ = true;  // said once: it does not come back
            spdlog::warn("worker {}: {}", name_, told.ToString());
          }
        } else if constexpr (std::is_same_v<T, LogLine>) {
          static constexpr spdlog::level::level_enum kLevels[] = {
              spdlog::level::debug, spdlog::level::info, spdlog::level::warn,
              spdlog::level::err};
          spdlog::log(kLevels[static_cast<int>(c.level)], "worker {}: {}", name_, c.text);
        } else if constexpr (std::is_same_v<T, Leave>) {
          spdlog::info("worker {}: leaving: {}", name_, c.reason);
          if (config_.on_leave) config_.on_leave(c.reason);
        } else if constexpr (std::is_same_v<T, SuspendTask>) {
          Result<SuspendHow> how = runner_->Suspend(c.task);
          if (!how.ok()) {
            spdlog::warn("worker {}: cannot suspend {}: {}", name_, c.task.ToString(),
                         how.status().ToString());
          }
        } else if constexpr (std::is_same_v<T, ResumeTask>) {
          if (Status resumed = runner_->Resume(c.task); !resumed.ok()) {
            spdlog::warn("worker {}: cannot resume {}: {}", name_, c.task.ToString(),
                         resumed.ToString());
          }
        } else if constexpr (std::is_same_v<T, worker::SendOwner>) {
          SendOwner(c);
        } else if constexpr (std::is_same_v<T, ScheduleFlush>) {
          std::weak_ptr<bool> alive = alive_;
          loop_.Post([this, alive] {
            if (alive.expired() || !*alive.lock()) return;
            Run(FlushDue{});
          });
        }
      },
      command);
}

net::Timer& Agent::Impl::TimerOf(WorkerTimer timer) {
  switch (timer) {
    case WorkerTimer::kHeartbeat: return heartbeat_timer_;
    case WorkerTimer::kFence: return fence_timer_;
    case WorkerTimer::kWatchdog: return watchdog_timer_;
  }
  return heartbeat_timer_;
}

void Agent::Impl::ArmTimer(WorkerTimer timer, Time at) {
  // `at` is on the agent's clock (AgentConfig::clock); the loop's timers
  // count real time, so they are armed for the distance from that clock's
  // now.
  const Duration after = at - clock_.Now();
  switch (timer) {
    case WorkerTimer::kHeartbeat:
      heartbeat_timer_.ArmAfter(after, [this] {
        HeartbeatDue due;
        if (sampler_) {
          Result<Utilization> sample = sampler_->SampleUtilization();
          if (sample.ok()) due.utilization = ToCoreUtilization(*sample);
        }
        if (config_.min_available_bytes > 0) {
          Result<HostMemory> memory = ReadHostMemory("/proc");
          if (memory.ok()) due.available_bytes = memory->available_bytes;
        }
        Run(due);
      });
      return;
    case WorkerTimer::kFence:
      fence_timer_.ArmAfter(after, [this] { Run(FenceDue{}); });
      return;
    case WorkerTimer::kWatchdog:
      watchdog_timer_.ArmAfter(after, [this] { Run(WatchdogDue{}); });
      return;
  }
}

// ---- connection ----------------------------------------------------------

void Agent::Impl::Connect() {
  if (stopped_) return;
  current_ = redirect_ ? *redirect_ : servers_[next_server_ % servers_.size()];
  redirect_.reset();
  const ServerAddress& address = current_;
  const Duration heartbeat = state_->heartbeat_interval();
  net::ClientOptions options;
  options.host = address.host;
  options.port = address.port;
  options.tls = config_.tls;
  options.fingerprint = config_.fingerprint;
  options.local_socket = config_.local_socket;
  options.token = config_.token;
  // A server that accepts the connection but never finishes the handshake
  // (paused: SIGSTOP, a stalled host) must not hold the worker past its
  // fencing deadline while another server could take it: an attempt gets
  // 4 heartbeats (at least 1 s, at most connect_timeout).
  options.timeout =
      std::min<Duration>(config_.connect_timeout, std::max<Duration>(Seconds(1), 4 * heartbeat));
  options.max_ws_message_bytes = proto::kMaxMessageBytes;
  // Pings every heartbeat interval; a server silent for two intervals is
  // gone (see the fencing note in agent.h).
  options.ws_idle_timeout = 2 * heartbeat;
  server_options_ = options;
  server_options_.timeout = Seconds(30);  // file transfers: without progress
  const uint64_t gen = ++gen_;
  std::weak_ptr<bool> alive = alive_;
  link_->Connect(options, [this, alive, gen](Result<std::shared_ptr<net::WsSession>> session) {
    if (alive.expired() || !*alive.lock()) {
      if (session.ok()) (*session)->Close("worker stopped");
      return;
    }
    OnConnected(gen, std::move(session));
  });
}

void Agent::Impl::OnConnected(uint64_t gen, Result<std::shared_ptr<net::WsSession>> session) {
  if (gen != gen_) {
    if (session.ok()) (*session)->Close("superseded");
    return;
  }
  const ServerAddress& address = current_;
  if (!session.ok()) {
    spdlog::warn("worker {}: cannot reach server {}:{}: {}", name_, address.host, address.port,
                 session.status().ToString());
    ++next_server_;  // try the next one
    ScheduleReconnect();
    return;
  }
  session_ = std::move(session).value();
  std::weak_ptr<bool> alive = alive_;
  session_->OnText([this, alive, gen](std::string text) {
    if (!alive.expired() && *alive.lock()) OnText(gen, text);
  });
  session_->OnBinary([](std::string) {});
  session_->OnClose([this, alive, gen](const Status& why) {
    if (!alive.expired() && *alive.lock()) OnClosed(gen, why);
  });
  Run(LinkUp{});  // the Hello
}

void Agent::Impl::OnText(uint64_t gen, const std::string& text) {
  if (gen != gen_ || !session_) return;
  Result<proto::ServerMessage> decoded = proto::DecodeServerMessage(text);
  if (!decoded.ok()) {
    spdlog::error("worker {}: malformed message from the server, reconnecting: {}", name_,
                  decoded.status().ToString());
    session_->Close("malformed message");
    return;
  }
  const bool was_established = state_->established();
  if (const auto* request = std::get_if<proto::LogRequest>(&*decoded)) {
    // Contact first (the state machine counts every message), then the
    // transfer, which is the shell's.
    proto::LogRequest copy = *request;
    Run(FromServer{std::move(*decoded)});
    return OnLogRequest(copy);
  }
  if (const auto* drain = std::get_if<proto::Drain>(&*decoded)) {
    spdlog::info("worker {}: {} by the server{}{}", name_, drain->drain ? "drained" : "undrained",
                 drain->reason.empty() ? "" : ": ", drain->reason);
  } else if (const auto* error = std::get_if<proto::Error>(&*decoded)) {
    spdlog::error("worker {}: the server refused the session: {}: {}", name_, error->code,
                  error->message);
    if (!error->leader.empty() && !was_established) {
      // A standby: its close follows; connect to the leader it named.
      Result<ServerAddress> leader = ParseServerAddress(error->leader);
      if (leader.ok()) redirect_ = *leader;
    }
  }
  if (const auto* ack = std::get_if<proto::HelloAck>(&*decoded); ack && files_) {
    files_->Attached(ack->grant_key, ack->worker);
    files_->SetServer(server_options_);
  }
  if (const auto* release = std::get_if<proto::ReleaseOutputs>(&*decoded); release && files_) {
    std::string jobs;
    for (JobId job : release->jobs) jobs += (jobs.empty() ? "" : ", ") + std::to_string(job);
    spdlog::info("worker {}: released the outputs of job(s) {}: they may be evicted now", name_,
                 jobs);
    files_->ReleaseOutputs(release->jobs);
  }
  if (const auto* copy = std::get_if<proto::Replicate>(&*decoded)) return OnReplicate(*copy);
  if (auto* assign = std::get_if<proto::Assign>(&*decoded); assign && !assign->tasks.empty()) {
    // An attempt whose input files are not all here yet reaches the state
    // machine once they are (or is refused): only then can it start.
    HoldForInputs(*assign);
    if (assign->tasks.empty()) return;
  }
  const bool hello_ack = std::holds_alternative<proto::HelloAck>(*decoded);
  Run(FromServer{std::move(*decoded)});
  if (hello_ack && !stopped_) {
    worker_id_ = state_->worker_id();
    backoff_.Reset();
    // The jobs whose outputs this cache keeps (maybe from a previous run):
    // the server releases those it no longer needs kept.
    if (files_) {
      if (std::vector<JobId> kept = files_->KeptJobs(); !kept.empty()) {
        Send(proto::OutputsKept{std::move(kept)});
      }
    }
    if (config_.on_attached) config_.on_attached();
  }
}

void Agent::Impl::OnClosed(uint64_t gen, const Status& why) {
  if (gen != gen_) return;
  const bool was_established = state_->established();
  spdlog::warn("worker {}: connection to the server lost ({}); {} tasks keep running", name_,
               why.ToString(), state_->running());
  // Refused before the HelloAck (a standby, or a server that turned this
  // worker away): go on to the leader it named, or to the next server.
  if (!was_established && !redirect_) ++next_server_;
  session_.reset();
  Run(LinkDown{});
  logs_->Reset();
  ScheduleReconnect();
}

void Agent::Impl::ScheduleReconnect() {
  if (stopped_) return;
  // A leader a standby named, or the next server of the list, is tried at
  // once; the backoff grows only when a whole round of the list failed, so
  // that cycling through a dead leader and a standby during a takeover does
  // not push the next attempt past the new leader's start.
  const bool mid_round = redirect_.has_value() || next_server_ % servers_.size() != 0;
  reconnect_timer_.ArmAfter(mid_round ? Millis(50) : backoff_.Next(), [this] { Connect(); });
}

void Agent::Impl::Send(const proto::WorkerMessage& message) {
  if (session_) session_->SendText(proto::Encode(message));
}

// ---- tasks ---------------------------------------------------------------

[[gnu::hot]] TaskSpec Agent::Impl::SpecOf(const proto::Assignment& a) const {
  TaskSpec spec = ToTaskSpec(a);
  spec.output_cap_bytes = config_.log_cap_bytes;
  return spec;
}

Result<TaskDirs> Agent::Impl::Prepare(const proto::Assignment& a, bool queued) {
  const bool with_inputs = !a.inputs.empty() || !a.files.empty();
  ASSIGN_OR_RETURN(TaskDirs dirs,
                   queued ? runner_->PrepareStart(SpecOf(a), with_inputs)
                          : runner_->PrepareDirs(a.task, a.attempt, with_inputs, a.user));
  // A dependency's result is $DROVER_INPUTS/<id>; one that also left files
  // has them in $DROVER_INPUTS/<id>/ and its result in <id>.result.
  std::set<TaskId> with_files;
  for (const proto::InputFile& f : a.files) with_files.insert(f.from);
  for (const auto& [from, text] : a.inputs) {
    const std::string name = from.ToString() + (with_files.count(from) ? ".result" : "");
    RETURN_IF_ERROR(WriteFile(dirs.inputs + "/" + name, text));
  }
  if (!a.files.empty() || !a.uploads.empty()) {
    if (!files_)
      return FailedPrecondition("this worker does not fetch files (started without them)");
    RETURN_IF_ERROR(files_->LinkInputs(a, dirs.inputs));
    RETURN_IF_ERROR(files_->LinkUploads(a, dirs.task));
  }
  return dirs;
}

void Agent::Impl::PrepareQueued(const proto::Assignment& a) {
  // Everything but the spawn is done now, so that nothing but the spawn
  // stands between the predecessor's exit and this start.
  Result<TaskDirs> dirs = Prepare(a, /*queued=*/true);
  if (!dirs.ok()) {
    return Run(TaskPrepareFailed{a.task, a.attempt, dirs.status().message()});
  }
  prepared_[proto::TaskAttempt{a.task, a.attempt}] = std::move(dirs).value();
}

[[gnu::hot]] void Agent::Impl::StartTask(const proto::Assignment& a, bool prepared) {
  // Made ahead (PrepareTask): nothing but the spawn stands before the start,
  // and what PrepareQueued kept is taken after it. Otherwise the
  // directories and inputs are made now.
  std::optional<TaskDirs> dirs;
  if (!prepared) {
    Result<TaskDirs> made = Prepare(a, /*queued=*/false);
    if (!made.ok()) return Run(TaskStartFailed{a.task, a.attempt, made.status().message()});
    dirs = std::move(made).value();
  }
  StartTimes times;
  Result<pid_t> pid = runner_->Start(
      SpecOf(a), [this](const TaskResult& result) { OnTaskDone(result); }, &times);
  if (prepared) {
    if (auto it = prepared_.find(proto::TaskAttempt{a.task, a.attempt}); it != prepared_.end()) {
      dirs = std::move(it->second);
      prepared_.erase(it);
    }
  }
  if (!pid.ok()) return Run(TaskStartFailed{a.task, a.attempt, pid.status().message()});
  if (known_logs_.size() >= kMaxKnownLogs && known_logs_.count(a.task) == 0) {
    known_logs_.erase(known_logs_.begin());  // the oldest job's first task
  }
  // Without directories (a PrepareTask the state machine never asked for)
  // the task runs, and its logs are not served from here.
  if (dirs) known_logs_[a.task] = KnownLog{a.attempt, *dirs, OutputCapOf(a)};
  spdlog::debug("worker {}: started {}#{} (pid {}): process made at {} us, exec done {} us later",
                name_, a.task.ToString(), a.attempt, *pid, ToMicros(times.spawned),
                (times.exec_done - times.spawned).count());
  Run(TaskStarted{a.task, a.attempt, times.spawned, reaper_->fences()});
}

void Agent::Impl::PollOwner() {
  OwnerSample sample;
  sample.last_input = input_->LastInput();
  const Time now = clock_.Now();
  if (!task_cgroups_.empty() && now >= next_load_at_) {
    next_load_at_ = now + Seconds(1);
    const Duration tasks_cpu = CgroupCpuTime(task_cgroups_);
    Result<double> load = outside_->Sample(std::max(Duration::zero(), tasks_cpu - tasks_cpu_));
    tasks_cpu_ = tasks_cpu;
    if (load.ok()) outside_load_ = *load;
  }
  sample.outside_load = outside_load_;
  Run(sample);
  if (stopped_) return;
  owner_timer_.ArmAfter(config_.owner_poll, [this] { PollOwner(); });
}

void Agent::Impl::SendOwner(const worker::SendOwner& command) {
  proto::Owner owner = command.owner;
  if (command.input_at) {
    // The suspensions before this command are done: every task is frozen.
    owner.freeze_us = std::max<int64_t>(1, (clock_.Now() - *command.input_at).count());
    spdlog::info("worker {}: tasks frozen {:.1f} ms after the owner's input", name_,
                 static_cast<double>(owner.freeze_us) / 1000);
  }
  Send(owner);
}

void Agent::Impl::KillTask(const worker::KillTask& kill) {
  Status killed = runner_->Kill(kill.task, kill.grace, kill.signal);
  if (!killed.ok()) {
    spdlog::warn("worker {}: cannot {} {}: {}", name_, kill.fenced ? "kill" : "stop",
                 kill.task.ToString(), killed.ToString());
  }
}

[[gnu::hot]] void Agent::Impl::OnTaskDone(const TaskResult& result) {
  // The exit as this worker saw it is the `now` of TaskExited: the handoff
  // (BENCH.md B3) runs from there to the successor's spawn, which comes out
  // of it; what the task left is read and reported after that start.
  Run(TaskExited{result.id, result.attempt, reaper_->fences()});
  if (files_) files_->Release(result.id, result.attempt);
  core::TaskOutcome outcome = ToOutcome(result);
  auto known = known_logs_.find(result.id);
  if (files_ && result.outcome == TaskOutcome::kSucceeded && outcome.reason.empty() &&
      known != known_logs_.end() && known->second.attempt == result.attempt &&
      HasEntries(known->second.dirs.output)) {
    // Its outputs are hashed and taken into the cache off the loop; the
    // result goes out once they are listed.
    std::weak_ptr<bool> alive = alive_;
    files_->CollectOutputs(
        known->second.dirs.output, result.id.job, known->second.max_output,
        [this, alive, result, outcome](Result<std::vector<core::OutputFile>> outputs) mutable {
          if (alive.expired() || !*alive.lock()) return;
          if (outputs.ok()) {
            outcome.outputs = std::move(outputs).value();
          } else {
            outcome.reason = "outputs refused: " + outputs.status().message();
            spdlog::warn("worker {}: {} {}", name_, result.id.ToString(), outcome.reason);
          }
          ReportAfterCheckpoint(result, std::move(outcome));
        });
    return;
  }
  ReportAfterCheckpoint(result, std::move(outcome));
}

void Agent::Impl::ReportDone(const TaskResult& result, core::TaskOutcome outcome) {
  Run(TaskReported{result.id, result.attempt, std::move(outcome)});
  // `finished` goes out before the log transfers' eof: the server ends a
  // follower on eof only once it knows the attempt is over, and a posted
  // flush would come after the eof.
  Run(FlushDue{});
  if (logs_) logs_->TaskEnded(result.id, result.attempt);
}

void Agent::Impl::SaveCheckpoints() {
  for (const auto& [task, known] : known_logs_) {
    // Without a connection there is no server to save to (the first round
    // after the reconnect saves what changed).
    if (!session_ || state_->RunningAttempt(task) != known.attempt ||
        !HasEntries(known.dirs.checkpoint)) {
      continue;
    }
    std::weak_ptr<bool> alive = alive_;
    files_->SaveCheckpoint(task, known.attempt, known.dirs.checkpoint, /*final=*/false,
                           [this, alive, task = task, attempt = known.attempt](
                               Result<std::optional<std::vector<core::OutputFile>>> saved) {
                             if (alive.expired() || !*alive.lock()) return;
                             SendCheckpoint(task, attempt, std::move(saved));
                           });
  }
  checkpoint_timer_.ArmAfter(config_.checkpoint_every, [this] { SaveCheckpoints(); });
}

void Agent::Impl::SendCheckpoint(TaskId task, uint32_t attempt,
                                 Result<std::optional<std::vector<core::OutputFile>>> saved) {
  if (!saved.ok()) {
    spdlog::warn("worker {}: checkpoint of {}#{} not saved: {}", name_, task.ToString(), attempt,
                 saved.status().ToString());
    return;
  }
  if (!*saved) return;
  spdlog::info("worker {}: checkpoint of {}#{} saved ({} files)", name_, task.ToString(), attempt,
               (*saved)->size());
  Send(proto::CheckpointSaved{task, attempt, std::move(**saved)});
}

void Agent::Impl::ReportAfterCheckpoint(const TaskResult& result, core::TaskOutcome outcome) {
  // An attempt that ended otherwise than in success while this worker
  // lives (failed, timed out, canceled, vacated, drained) leaves its
  // checkpoint to the next one: saved, and reported before its end, so the
  // server has it before it places the retry.
  auto known = known_logs_.find(result.id);
  const bool succeeded = result.outcome == TaskOutcome::kSucceeded && outcome.reason.empty();
  if (!files_ || succeeded || !session_ || known == known_logs_.end() ||
      known->second.attempt != result.attempt || !HasEntries(known->second.dirs.checkpoint)) {
    if (files_) files_->ForgetCheckpoint(result.id);
    return ReportDone(result, std::move(outcome));
  }
  std::weak_ptr<bool> alive = alive_;
  files_->SaveCheckpoint(result.id, result.attempt, known->second.dirs.checkpoint, /*final=*/true,
                         [this, alive, result, outcome = std::move(outcome)](
                             Result<std::optional<std::vector<core::OutputFile>>> saved) mutable {
                           if (alive.expired() || !*alive.lock()) return;
                           SendCheckpoint(result.id, result.attempt, std::move(saved));
                           files_->ForgetCheckpoint(result.id);
                           ReportDone(result, std::move(outcome));
                         });
}

void Agent::Impl::OnReplicate(const proto::Replicate& copy) {
  const std::string what =
      "a copy of the outputs of " + copy.task.ToString() + "#" + std::to_string(copy.attempt);
  if (!files_) {
    spdlog::warn("worker {}: no {}: this worker keeps no files", name_, what);
    return;
  }
  spdlog::info("worker {}: fetching {} ({} file(s))", name_, what, copy.files.size());
  const uint64_t gen = gen_;
  std::weak_ptr<bool> alive = alive_;
  files_->FetchCopy(copy.task.job, copy.files,
                    [this, alive, gen, what, task = copy.task, attempt = copy.attempt](Status s) {
                      if (alive.expired() || !*alive.lock()) return;
                      if (!s.ok()) {
                        spdlog::warn("worker {}: no {}: {}", name_, what, s.message());
                        return;
                      }
                      spdlog::info("worker {}: holds {}", name_, what);
                      // Said on the connection that asked; a later one finds
                      // the core asking again when a holder is lost.
                      if (gen == gen_ && session_) Send(proto::OutputsReplicated{task, attempt});
                    });
}

void Agent::Impl::HoldForInputs(proto::Assign& assign) {
  std::vector<proto::Assignment> now;
  for (proto::Assignment& a : assign.tasks) {
    // The checkpoint an earlier attempt saved is restored first, unless
    // this worker saved it and its own directory for the task still holds
    // something (at least as new as what it saved).
    const bool own = a.checkpoint_from == worker_id_.load() &&
                     HasEntries(CheckpointDirOf(config_.workdir, a.task));
    const bool restore = files_ && !a.checkpoint.empty() && !own;
    if ((a.files.empty() || (files_ && files_->HasInputs(a))) &&
        (a.uploads.empty() || (files_ && files_->HasUploads(a))) && !restore) {
      now.push_back(std::move(a));
      continue;
    }
    if (!files_) {
      Send(proto::Refused{a.task, a.attempt, "this worker does not fetch input files"});
      continue;
    }
    spdlog::info("worker {}: fetching {} input file(s){} of {}#{} before it starts", name_,
                 a.files.size() + a.uploads.size(),
                 restore ? " and " + std::to_string(a.checkpoint.size()) + " checkpoint file(s)"
                         : std::string(),
                 a.task.ToString(), a.attempt);
    const uint64_t gen = gen_;
    std::weak_ptr<bool> alive = alive_;
    auto held = std::make_shared<proto::Assignment>(std::move(a));
    // The state machine knows the attempt from now on: a stop that comes
    // during the fetch drops it there, and its end is then ignored.
    Run(InputsFetching{held->task, held->attempt});
    // Both steps answer the same way: refused on failure (the attempt goes
    // elsewhere without using a retry), else handed to the state machine.
    auto then = [this, alive, gen, held](Status status, std::function<void()> next) {
      if (alive.expired() || !*alive.lock()) return;
      // A new connection: the server took the attempt back at its hello.
      if (gen != gen_ || !session_) return;
      if (!status.ok()) {
        spdlog::warn("worker {}: {}#{} not started: {}", name_, held->task.ToString(),
                     held->attempt, status.message());
        return Run(InputsFetched{*held, status.message()});
      }
      next();
    };
    auto start = [this, held] { Run(InputsFetched{*held, ""}); };
    files_->Fetch(*held, [this, then, start, held, restore](Status fetched) {
      then(fetched, [this, then, start, held, restore] {
        files_->FetchUploads(*held, [this, then, start, held, restore](Status uploaded) {
          then(uploaded, [this, then, start, held, restore] {
            if (!restore) return start();
            std::optional<std::pair<uid_t, gid_t>> owner = task_owner_;
            if (accounts_) {
              // A refused user: the start refuses it, with the reason.
              Result<std::shared_ptr<const TaskAccount>> account = accounts_->For(held->user);
              if (!account.ok()) return start();
              owner = std::pair((*account)->ids.uid, (*account)->ids.gid);
            }
            files_->RestoreCheckpoint(
                held->checkpoint, CheckpointDirOf(config_.workdir, held->task), owner,
                [this, then, start, held](Status restored) {
                  if (restored.code() == StatusCode::kNotFound) {
                    // Gone from the server for good: refusing would only move
                    // the attempt from worker to worker.
                    spdlog::warn("worker {}: {}#{} starts without its checkpoint: {}", name_,
                                 held->task.ToString(), held->attempt, restored.message());
                    restored = Status::Ok();
                  }
                  then(restored, start);
                });
          });
        });
      });
    });
  }
  assign.tasks = std::move(now);
}

void Agent::Impl::OnLogRequest(const proto::LogRequest& request) {
  Result<LogTarget> target = NotFound("no such task on this worker: " + request.task.ToString());
  if (auto it = known_logs_.find(request.task); it != known_logs_.end()) {
    const KnownLog& known = it->second;
    if (request.attempt != 0 && request.attempt != known.attempt) {
      target = NotFound("attempt " + std::to_string(request.attempt) + " of " +
                        request.task.ToString() + " did not run on this worker");
    } else {
      LogTarget t;
      t.attempt = known.attempt;
      t.path = request.stream == proto::LogStream::kStdout ? known.dirs.stdout_path
                                                           : known.dirs.stderr_path;
      t.running = state_->RunningAttempt(request.task) == known.attempt;
      if (t.running) {
        // The executor makes output files with their first byte; a reader
        // that follows needs the file now.
        Status opened = runner_->OpenOutputFiles(request.task);
        if (!opened.ok()) {
          spdlog::warn("worker {}: {}", name_, opened.message());
        }
      }
      target = std::move(t);
    }
  }
  logs_->Request(request, target);
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
