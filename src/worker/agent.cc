#include "worker/agent.h"

#include <fcntl.h>
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
#include <utility>
#include <variant>

#include <spdlog/spdlog.h>

#include "common/quantity.h"
#include "net/client_options.h"
#include "net/token.h"
#include "net/ws_client.h"
#include "net/ws_session.h"
#include "proto/messages.h"
#include "worker/agent_convert.h"
#include "worker/agent_logs.h"
#include "worker/asio_reactor.h"
#include "worker/executor.h"
#include "worker/fencing.h"
#include "worker/gpu_lock.h"
#include "worker/isolator.h"
#include "worker/life_record.h"
#include "worker/reaper.h"
#include "worker/resources.h"
#include "worker/slots.h"

namespace drover::worker {
namespace {

constexpr char kAgentVersion[] = "0.1.0";
constexpr char kWorkerPath[] = "/api/v1/worker";
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
        heartbeat_(config_.heartbeat_interval),
        lease_ttl_(config_.lease_ttl),
        backoff_(config_.reconnect, [rng = std::make_shared<std::mt19937_64>(std::random_device{}())] {
          return std::uniform_real_distribution<double>(0.0, 1.0)(*rng);
        }),
        reconnect_timer_(loop),
        heartbeat_timer_(loop),
        fence_timer_(loop),
        watchdog_timer_(loop) {}

  ~Impl() { Stop(); }

  Status Init();
  void Stop();
  WorkerId worker_id() const { return worker_id_.load(); }
  const std::string& summary() const { return summary_; }

 private:
  struct Running {
    uint32_t attempt = 0;
    std::string fence_reason;  // set when the agent fenced the attempt
    std::vector<uint32_t> cores;         // as assigned: a restarted server
    std::vector<core::GpuGrant> gpus;    // may adopt the attempt with them
    Time started_at;                     // as reported in Started (agent.h)
    uint32_t reaper_fences = 0;          // Reaper::fences() when it started
  };
  // An attempt assigned `after` one running here (queue-ahead): not
  // started, its directories and inputs made, waiting for that exit.
  struct Queued {
    proto::Assignment assignment;  // `after` names the predecessor
    TaskDirs dirs;
  };
  struct KnownLog {
    uint32_t attempt = 0;
    TaskDirs dirs;
  };

  // Connection.
  void Connect();
  void OnConnected(uint64_t gen, Result<std::shared_ptr<net::WsSession>> session);
  void OnText(uint64_t gen, const std::string& text);
  void OnClosed(uint64_t gen, const Status& why);
  void ScheduleReconnect();
  void SendHello();
  void OnHelloAck(const proto::HelloAck& ack);
  void SendHeartbeat();
  void Send(const proto::WorkerMessage& message);

  // Tasks.
  void OnAssignment(const proto::Assignment& assignment);
  void Enqueue(const proto::Assignment& assignment);
  void StartNow(const proto::Assignment& assignment, std::optional<TaskDirs> prepared);
  // The task's directories and $DROVER_INPUTS files; `queued`: also its
  // environment and program (Executor::PrepareStart), for a start later.
  Result<TaskDirs> Prepare(const proto::Assignment& assignment, bool queued);
  TaskSpec SpecOf(const proto::Assignment& assignment) const;
  std::map<TaskId, Queued>::iterator FindQueued(TaskId successor);
  void DropQueued(const Queued& queued, std::string reason);
  // Server's Withdraw: drops the attempt if it is still queued here.
  void OnWithdraw(TaskId task, uint32_t attempt, const std::string& reason);
  void OnStopRequest(TaskId task, uint32_t attempt, Duration grace, const std::string& reason);
  void OnTaskDone(const TaskResult& result);
  void RecordFinished(proto::FinishedTask finished);
  void OnLogRequest(const proto::LogRequest& request);
  void PostFlush();
  void Flush();

  // Fencing.
  void Contact(Time when);
  void ArmFence();
  void OnFenceTimer();
  // Renews the reaper's watchdog (reaper.h) on a timer of its own.
  void TellReaper();

  std::vector<proto::TaskAttempt> RunningAttempts() const;
  std::vector<proto::RunningTask> RunningTasks() const;  // with resources, for Hello

  net::EventLoop& loop_;
  AgentConfig config_;
  RealClock clock_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  bool stopped_ = false;

  // Resources and execution.
  std::vector<ServerAddress> servers_;
  core::WorkerResources offered_;
  std::string name_;
  std::string key_;  // this worker's identity (AgentConfig::key_file), sent in Hello
  std::string summary_;
  std::unique_ptr<UtilizationSampler> sampler_;
  GpuLocks gpu_locks_;  // held for the agent's life
  std::optional<Slots> slots_;
  std::unique_ptr<AsioReactor> reactor_;
  // What outlives this life if it dies (life_record.h, reaper.h); the
  // executor tells them of each task (declared first: they outlive it).
  std::unique_ptr<LifeRecord> life_;
  std::unique_ptr<Reaper> reaper_;
  std::unique_ptr<TaskGuard> guard_;
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<LogSender> logs_;

  // The server link.
  Duration heartbeat_;
  Duration lease_ttl_;
  net::Backoff backoff_;
  net::Timer reconnect_timer_;
  net::Timer heartbeat_timer_;
  size_t next_server_ = 0;
  // The leader a standby named (proto::Error::leader): the next attempt
  // goes there, once; then the list goes on.
  std::optional<ServerAddress> redirect_;
  ServerAddress current_;  // the address of the attempt in progress
  uint64_t gen_ = 0;  // bumps with each connection attempt; stale callbacks check it
  std::shared_ptr<net::WsSession> session_;
  bool established_ = false;  // HelloAck received on session_
  std::atomic<WorkerId> worker_id_{0};

  // Fencing.
  std::optional<FencingPolicy> fence_;
  Time last_contact_{};
  net::Timer fence_timer_;
  net::Timer watchdog_timer_;
  Time last_watchdog_tick_{};
  bool reaper_gone_ = false;

  // Tasks and their results.
  std::map<TaskId, Running> running_;
  // Queue-ahead successors by their predecessor's task (at most one each;
  // the predecessor's attempt is the one in running_).
  std::map<TaskId, Queued> queued_;
  std::map<TaskId, KnownLog> known_logs_;
  std::map<proto::TaskAttempt, proto::FinishedTask> unacked_;
  std::set<proto::TaskAttempt> sent_this_session_;
  std::vector<proto::StartedTask> started_out_;
  std::vector<proto::FinishedTask> finished_out_;
  bool flush_posted_ = false;
};

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
  ASSIGN_OR_RETURN(FencingPolicy fence,
                   FencingPolicy::Create(config_.lease_ttl, config_.heartbeat_interval,
                                         clock_.Now()));
  fence_.emplace(fence);
  if (::geteuid() == 0 && config_.task_user.empty() && !config_.run_as_root) {
    return FailedPrecondition(
        "the worker runs as root: name the user tasks run as (--user NAME), or allow running "
        "them as root (--run-as-root)");
  }
  ASSIGN_OR_RETURN(IsolationMode mode, ParseIsolationMode(config_.isolation));

  DetectOptions detect;
  detect.cpus = config_.cpus;
  detect.labels = config_.labels;
  detect.counters = config_.counters;
  detect.gpus = config_.gpus;
  detect.gpu_part = config_.gpu_part;
  detect.gpu_parts = config_.gpu_parts;
  detect.gpu_type = config_.gpu_type;
  detect.gpu_mem = config_.gpu_mem;
  detect.nvml_library = config_.nvml_library;
  detect.nvidia_smi = config_.nvidia_smi;
  ASSIGN_OR_RETURN(WorkerResources resources, DetectResources(detect, &sampler_));
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
  if (!config_.mem.empty()) {
    Result<uint64_t> mem = ParseBytes(config_.mem);
    if (!mem.ok()) return mem.status().WithContext("--mem");
    resources.memory_bytes = *mem;
  }
  for (const std::string& note : resources.notes) spdlog::info("worker: {}", note);
  name_ = config_.name.empty() ? resources.hostname : config_.name;
  summary_ = FormatSummary(resources);
  offered_ = ToCoreResources(resources, name_);

  SlotCapacity capacity;
  capacity.cores = resources.cpu_ids;
  capacity.memory_bytes = resources.memory_bytes;
  for (const GpuInfo& gpu : resources.gpus) capacity.gpus.push_back(gpu.index);
  slots_.emplace(std::move(capacity));

  // Before any work: end what a previous life of this worker left running
  // (its work directory holds the record), then fork the reaper that ends
  // this life's tasks should it die (DESIGN.md section 4, the timing rule).
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
  // One tree suffices for the reaper: cgroup v1 lists the same processes
  // in each hierarchy, and the first (freezer) can be frozen.
  ASSIGN_OR_RETURN(reaper_, Reaper::Start(roots.empty() ? roots : std::vector<std::string>{roots[0]},
                                          life_->lock_fd()));

  ExecutorOptions options;
  options.workdir = config_.workdir;
  options.task_user = config_.task_user;
  options.run_as_root = config_.run_as_root;
  options.output_cap_bytes = config_.log_cap_bytes;
  options.default_grace = config_.kill_grace;
  if (roots.empty()) {
    guard_ = std::make_unique<TaskGuard>(*life_, *reaper_, name_);
    options.watch = guard_.get();
  }
  reactor_ = std::make_unique<AsioReactor>(loop_);
  ASSIGN_OR_RETURN(executor_, Executor::Create(options, reactor_.get(), std::move(isolator)));
  // The identity the server binds this worker's name to (made on first start).
  const std::string key_file =
      config_.key_file.empty() ? config_.workdir + "/worker.key" : config_.key_file;
  Result<std::string> key = net::LoadOrCreateToken(key_file);
  if (!key.ok()) return key.status().WithContext("worker identity key " + key_file);
  key_ = std::move(key).value();

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
               IsolationModeName(executor_->isolation()), config_.workdir);
  last_contact_ = clock_.Now();
  ArmFence();
  last_watchdog_tick_ = clock_.Now();
  TellReaper();
  Connect();
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
  ++gen_;
  if (session_) {
    session_->Close("worker stopping");
    session_.reset();
  }
  established_ = false;
  logs_.reset();
  // Queued successors never start; nothing is left to report them to.
  queued_.clear();
  // Kills every task at once; their callbacks are not called. Then the
  // reaper leaves without killing, and the work directory is free.
  executor_.reset();
  guard_.reset();
  reaper_.reset();
  life_.reset();
  reactor_.reset();
  running_.clear();
}

// ---- connection ----------------------------------------------------------

void Agent::Impl::Connect() {
  if (stopped_) return;
  current_ = redirect_ ? *redirect_ : servers_[next_server_ % servers_.size()];
  redirect_.reset();
  const ServerAddress& address = current_;
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
      std::min<Duration>(config_.connect_timeout, std::max<Duration>(Seconds(1), 4 * heartbeat_));
  options.max_ws_message_bytes = proto::kMaxMessageBytes;
  // Pings every heartbeat interval; a server silent for two intervals is
  // gone (see the fencing note in agent.h).
  options.ws_idle_timeout = 2 * heartbeat_;
  const uint64_t gen = ++gen_;
  std::weak_ptr<bool> alive = alive_;
  net::ConnectWebSocket(loop_, options, kWorkerPath,
                        [this, alive, gen](Result<std::shared_ptr<net::WsSession>> session) {
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
  SendHello();
}

void Agent::Impl::SendHello() {
  proto::Hello hello;
  hello.worker_name = name_;
  hello.previous_id = worker_id_.load();
  hello.agent_version = kAgentVersion;
  hello.key = key_;
  hello.resources = offered_;
  hello.running = RunningTasks();
  sent_this_session_.clear();
  for (const auto& [attempt, finished] : unacked_) {
    hello.finished.push_back(finished);
    sent_this_session_.insert(attempt);
  }
  Send(proto::WorkerMessage{std::move(hello)});
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
  if (established_) Contact(clock_.Now());
  std::visit(
      [&](auto& m) {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, proto::HelloAck>) {
          OnHelloAck(m);
        } else if constexpr (std::is_same_v<T, proto::Assign>) {
          for (const proto::Assignment& a : m.tasks) OnAssignment(a);
        } else if constexpr (std::is_same_v<T, proto::Ack>) {
          for (const proto::TaskAttempt& a : m.tasks) {
            unacked_.erase(a);
            sent_this_session_.erase(a);
          }
        } else if constexpr (std::is_same_v<T, proto::Cancel>) {
          OnStopRequest(m.task, m.attempt, config_.kill_grace, m.reason);
        } else if constexpr (std::is_same_v<T, proto::Kill>) {
          OnStopRequest(m.task, m.attempt, Duration::zero(), m.reason);
        } else if constexpr (std::is_same_v<T, proto::Withdraw>) {
          OnWithdraw(m.task, m.attempt, m.reason);
        } else if constexpr (std::is_same_v<T, proto::LogRequest>) {
          OnLogRequest(m);
        } else if constexpr (std::is_same_v<T, proto::Drain>) {
          spdlog::info("worker {}: {} by the server{}{}", name_,
                       m.drain ? "drained" : "undrained", m.reason.empty() ? "" : ": ",
                       m.reason);
        } else if constexpr (std::is_same_v<T, proto::Error>) {
          spdlog::error("worker {}: the server refused the session: {}: {}", name_, m.code,
                        m.message);
          if (!m.leader.empty() && !established_) {
            // A standby: its close follows; connect to the leader it named.
            Result<ServerAddress> leader = ParseServerAddress(m.leader);
            if (leader.ok()) redirect_ = *leader;
          }
        }
      },
      *decoded);
}

void Agent::Impl::OnHelloAck(const proto::HelloAck& ack) {
  established_ = true;
  worker_id_ = ack.worker;
  backoff_.Reset();
  const Time now = clock_.Now();
  Result<FencingPolicy> fence = FencingPolicy::Create(ack.lease_ttl, ack.heartbeat_interval, now);
  if (fence.ok()) {
    heartbeat_ = ack.heartbeat_interval;
    lease_ttl_ = ack.lease_ttl;
    fence_.emplace(*fence);
    // The timer may still be set for the start-up timing's later deadline
    // (a 30 s lease): a link lost now must fence by the server's TTL.
    ArmFence();
  } else {
    spdlog::warn("worker {}: ignoring the server's timing ({}); keeping heartbeat {} ms, lease "
                 "{} ms",
                 name_, fence.status().message(), heartbeat_.count() / 1000,
                 lease_ttl_.count() / 1000);
  }
  Contact(now);
  // The server's timing replaces the start-up one (a 30 s lease): the
  // reaper's deadline and the tick move with it now, not a tick later.
  watchdog_timer_.Cancel();
  TellReaper();
  spdlog::info(
      "worker {}: attached as worker {} (server {}), {} running, {} queued, {} results to report",
      name_, ack.worker, ack.server_instance, running_.size(), queued_.size(), unacked_.size());
  // Results that ended between the Hello and now were not in it.
  for (const auto& [attempt, finished] : unacked_) {
    if (sent_this_session_.insert(attempt).second) finished_out_.push_back(finished);
  }
  PostFlush();
  heartbeat_timer_.ArmAfter(heartbeat_, [this] { SendHeartbeat(); });
  if (config_.on_attached) config_.on_attached();
}

void Agent::Impl::SendHeartbeat() {
  if (!established_) return;
  proto::Heartbeat heartbeat;
  if (sampler_) {
    Result<Utilization> sample = sampler_->SampleUtilization();
    if (sample.ok()) heartbeat.utilization = ToCoreUtilization(*sample);
  }
  heartbeat.running = RunningAttempts();
  Send(proto::WorkerMessage{std::move(heartbeat)});
  heartbeat_timer_.ArmAfter(heartbeat_, [this] { SendHeartbeat(); });
}

void Agent::Impl::OnClosed(uint64_t gen, const Status& why) {
  if (gen != gen_) return;
  if (established_) {
    // The link was alive (pings answered) until at most one idle timeout
    // before it was declared dead.
    Contact(clock_.Now() - 2 * heartbeat_);
  }
  spdlog::warn("worker {}: connection to the server lost ({}); {} tasks keep running", name_,
               why.ToString(), running_.size());
  // Refused before the HelloAck (a standby, or a server that turned this
  // worker away): go on to the leader it named, or to the next server.
  if (!established_ && !redirect_) ++next_server_;
  session_.reset();
  established_ = false;
  sent_this_session_.clear();
  heartbeat_timer_.Cancel();
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

std::vector<proto::TaskAttempt> Agent::Impl::RunningAttempts() const {
  std::vector<proto::TaskAttempt> out;
  for (const auto& [task, run] : running_) {
    // A fenced attempt is being killed and is reported as finished instead.
    if (run.fence_reason.empty()) out.push_back(proto::TaskAttempt{task, run.attempt});
  }
  return out;
}

std::vector<proto::RunningTask> Agent::Impl::RunningTasks() const {
  std::vector<proto::RunningTask> out;
  for (const auto& [task, run] : running_) {
    if (run.fence_reason.empty()) out.push_back(proto::RunningTask{task, run.attempt, run.cores, run.gpus});
  }
  // Queued successors too, so the server can confirm (or kill) each one.
  for (const auto& [predecessor, queued] : queued_) {
    const proto::Assignment& a = queued.assignment;
    out.push_back(proto::RunningTask{a.task, a.attempt, a.cores, a.gpus, /*queued=*/true});
  }
  return out;
}

// ---- tasks ---------------------------------------------------------------

void Agent::Impl::OnAssignment(const proto::Assignment& a) {
  const proto::TaskAttempt key{a.task, a.attempt};
  if (auto it = running_.find(a.task); it != running_.end()) {
    if (it->second.attempt == a.attempt) {
      // Sent again after a re-attach: it runs; say so again.
      started_out_.push_back(proto::StartedTask{a.task, a.attempt, it->second.started_at});
      PostFlush();
    } else {
      Send(proto::Refused{a.task, a.attempt,
                          "attempt " + std::to_string(it->second.attempt) +
                              " of this task is still running here"});
    }
    return;
  }
  if (auto q = FindQueued(a.task); q != queued_.end()) {
    // The same attempt sent again after a re-attach stays queued as it is.
    if (q->second.assignment.attempt != a.attempt) {
      Send(proto::Refused{a.task, a.attempt,
                          "attempt " + std::to_string(q->second.assignment.attempt) +
                              " of this task is queued here"});
    }
    return;
  }
  if (unacked_.count(key) > 0) return;  // ended already; its Finished is on the way
  if (a.after) {
    auto predecessor = running_.find(a.after->task);
    if (predecessor != running_.end() && predecessor->second.attempt == a.after->attempt &&
        predecessor->second.fence_reason.empty()) {
      return Enqueue(a);
    }
    // The predecessor already ended here (or never ran here): the room it
    // held is free, or Slots refuses below.
  }
  StartNow(a, std::nullopt);
}

void Agent::Impl::Enqueue(const proto::Assignment& a) {
  const proto::TaskAttempt& predecessor = *a.after;
  if (auto q = queued_.find(predecessor.task); q != queued_.end()) {
    const std::string reason = "a task is already queued behind " +
                               predecessor.task.ToString() + "#" +
                               std::to_string(predecessor.attempt) + " (" +
                               q->second.assignment.task.ToString() + ")";
    spdlog::warn("worker {}: refused {}#{}: {}", name_, a.task.ToString(), a.attempt, reason);
    Send(proto::Refused{a.task, a.attempt, reason});
    return;
  }
  // Everything but the spawn is done now, so that nothing but the spawn
  // stands between the predecessor's exit and this start.
  Result<TaskDirs> dirs = Prepare(a, /*queued=*/true);
  if (!dirs.ok()) {
    spdlog::warn("worker {}: {}#{} could not be prepared: {}", name_, a.task.ToString(),
                 a.attempt, dirs.status().message());
    RecordFinished(proto::FinishedTask{a.task, a.attempt,
                                       FailureOutcome(dirs.status().message()), clock_.Now()});
    return;
  }
  spdlog::debug("worker {}: {}#{} queued behind {}#{}", name_, a.task.ToString(), a.attempt,
                predecessor.task.ToString(), predecessor.attempt);
  queued_[predecessor.task] = Queued{a, std::move(dirs).value()};
}

TaskSpec Agent::Impl::SpecOf(const proto::Assignment& a) const {
  TaskSpec spec = ToTaskSpec(a);
  spec.output_cap_bytes = config_.log_cap_bytes;
  return spec;
}

Result<TaskDirs> Agent::Impl::Prepare(const proto::Assignment& a, bool queued) {
  const bool with_inputs = !a.inputs.empty();
  ASSIGN_OR_RETURN(TaskDirs dirs, queued ? executor_->PrepareStart(SpecOf(a), with_inputs)
                                         : executor_->PrepareDirs(a.task, a.attempt, with_inputs));
  for (const auto& [from, text] : a.inputs) {
    RETURN_IF_ERROR(WriteFile(dirs.inputs + "/" + from.ToString(), text));
  }
  return dirs;
}

void Agent::Impl::StartNow(const proto::Assignment& a, std::optional<TaskDirs> prepared) {
  Status admitted = slots_->Admit(a.task, ToSlotRequest(a));
  if (!admitted.ok()) {
    spdlog::warn("worker {}: refused {}#{}: {}", name_, a.task.ToString(), a.attempt,
                 admitted.message());
    if (prepared) executor_->DiscardPrepared(a.task, a.attempt);
    Send(proto::Refused{a.task, a.attempt, admitted.message()});
    return;
  }
  auto fail = [&](const Status& why) {
    (void)slots_->Release(a.task);
    spdlog::warn("worker {}: {}#{} could not start: {}", name_, a.task.ToString(), a.attempt,
                 why.message());
    RecordFinished(proto::FinishedTask{a.task, a.attempt, FailureOutcome(why.message()),
                                       clock_.Now()});
  };
  if (!prepared) {
    Result<TaskDirs> dirs = Prepare(a, /*queued=*/false);
    if (!dirs.ok()) return fail(dirs.status());
    prepared = std::move(dirs).value();
  }
  const TaskSpec spec = SpecOf(a);
  StartTimes times;
  Result<pid_t> pid = executor_->Start(
      spec, [this](const TaskResult& result) { OnTaskDone(result); }, &times);
  if (!pid.ok()) return fail(pid.status());
  running_[a.task] = Running{a.attempt, "", a.cores, a.gpus, times.spawned, reaper_->fences()};
  if (known_logs_.size() >= kMaxKnownLogs && known_logs_.count(a.task) == 0) {
    known_logs_.erase(known_logs_.begin());  // the oldest job's first task
  }
  known_logs_[a.task] = KnownLog{a.attempt, *prepared};
  spdlog::debug("worker {}: started {}#{} (pid {}): process made at {} us, exec done {} us later",
                name_, a.task.ToString(), a.attempt, *pid, ToMicros(times.spawned),
                (times.exec_done - times.spawned).count());
  started_out_.push_back(proto::StartedTask{a.task, a.attempt, times.spawned});
  PostFlush();
}

std::map<TaskId, Agent::Impl::Queued>::iterator Agent::Impl::FindQueued(TaskId successor) {
  // At most one successor per running task: a short scan.
  return std::find_if(queued_.begin(), queued_.end(), [&](const auto& entry) {
    return entry.second.assignment.task == successor;
  });
}

void Agent::Impl::DropQueued(const Queued& queued, std::string reason) {
  const proto::Assignment& a = queued.assignment;
  executor_->DiscardPrepared(a.task, a.attempt);
  RecordFinished(proto::FinishedTask{a.task, a.attempt, FailureOutcome(std::move(reason)),
                                     clock_.Now(), /*never_started=*/true});
}

void Agent::Impl::OnWithdraw(TaskId task, uint32_t attempt, const std::string& reason) {
  auto q = FindQueued(task);
  if (q == queued_.end() || q->second.assignment.attempt != attempt) {
    // Started already (its Started report says so), or ended: it stays.
    spdlog::debug("worker {}: {}#{} not queued here; withdrawal ignored", name_, task.ToString(),
                  attempt);
    return;
  }
  spdlog::info("worker {}: withdrawing queued {}#{}: {}", name_, task.ToString(), attempt, reason);
  const Queued dropped = std::move(q->second);
  queued_.erase(q);
  DropQueued(dropped, "withdrawn before it started: " + reason);
}

void Agent::Impl::OnStopRequest(TaskId task, uint32_t attempt, Duration grace,
                                const std::string& reason) {
  if (auto q = FindQueued(task); q != queued_.end() && q->second.assignment.attempt == attempt) {
    spdlog::info("worker {}: dropping queued {}#{}: {}", name_, task.ToString(), attempt, reason);
    const Queued dropped = std::move(q->second);
    queued_.erase(q);
    DropQueued(dropped, "canceled before it started: " + reason);
    return;
  }
  auto it = running_.find(task);
  if (it == running_.end() || it->second.attempt != attempt) return;  // ended or never ran here
  spdlog::info("worker {}: stopping {}#{}: {}", name_, task.ToString(), attempt, reason);
  Status killed = executor_->Kill(task, grace);
  if (!killed.ok()) {
    spdlog::warn("worker {}: cannot stop {}: {}", name_, task.ToString(), killed.ToString());
  }
}

void Agent::Impl::OnTaskDone(const TaskResult& result) {
  // The exit as this worker saw it, read before anything else: the handoff
  // (BENCH.md B3) runs from here to the successor's spawn.
  const Time exited_at = clock_.Now();
  std::string fence_reason;
  if (auto it = running_.find(result.id); it != running_.end()) {
    fence_reason = std::move(it->second.fence_reason);
    if (fence_reason.empty() && reaper_->fences() != it->second.reaper_fences) {
      // Killed by the reaper's watchdog while this worker did not run.
      fence_reason =
          "fenced: the worker was stopped or stalled past its fencing deadline, so its reaper "
          "killed the task before its lease could expire";
    }
    running_.erase(it);
  }
  (void)slots_->Release(result.id);
  // Queue-ahead: the successor starts on the room just freed, before
  // anything slow (the report, log transfers) happens.
  if (auto q = queued_.find(result.id); q != queued_.end()) {
    Queued next = std::move(q->second);
    queued_.erase(q);
    if (fence_reason.empty() && next.assignment.after->attempt == result.attempt) {
      StartNow(next.assignment, std::move(next.dirs));
    } else {
      // Fencing drops the queue before it kills (OnFenceTimer); this is
      // only a guard.
      DropQueued(next, fence_reason.empty() ? "canceled before it started: attempt " +
                                                  std::to_string(result.attempt) + " of " +
                                                  result.id.ToString() + " ended instead"
                                            : fence_reason);
    }
  }
  core::TaskOutcome outcome = ToOutcome(result);
  if (!fence_reason.empty()) outcome.reason = fence_reason;
  RecordFinished(proto::FinishedTask{result.id, result.attempt, std::move(outcome), exited_at});
  // `finished` goes out before the log transfers' eof: the server ends a
  // follower on eof only once it knows the attempt is over, and a posted
  // flush would come after the eof.
  Flush();
  logs_->TaskEnded(result.id, result.attempt);
}

void Agent::Impl::RecordFinished(proto::FinishedTask finished) {
  const proto::TaskAttempt key{finished.task, finished.attempt};
  unacked_[key] = finished;
  if (established_ && sent_this_session_.insert(key).second) {
    finished_out_.push_back(std::move(finished));
    PostFlush();
  }
}

void Agent::Impl::PostFlush() {
  if (flush_posted_) return;
  flush_posted_ = true;
  std::weak_ptr<bool> alive = alive_;
  loop_.Post([this, alive] {
    if (alive.expired() || !*alive.lock()) return;
    Flush();
  });
}

void Agent::Impl::Flush() {
  flush_posted_ = false;
  std::vector<proto::StartedTask> started = std::exchange(started_out_, {});
  std::vector<proto::FinishedTask> finished = std::exchange(finished_out_, {});
  // Finished before Started: the server books a queue-ahead successor on
  // its predecessor's freed room only once it knows that one ended, and
  // HandoffStats pairs each start with an exit that arrived before it. An
  // attempt that started and ended within this batch is still reported
  // started first: its Finished goes last.
  auto started_here = [&](const proto::FinishedTask& f) {
    return std::any_of(started.begin(), started.end(), [&](const proto::StartedTask& s) {
      return s.task == f.task && s.attempt == f.attempt;
    });
  };
  auto later = std::stable_partition(finished.begin(), finished.end(),
                                     [&](const proto::FinishedTask& f) { return !started_here(f); });
  std::vector<proto::FinishedTask> after_start(std::make_move_iterator(later),
                                               std::make_move_iterator(finished.end()));
  finished.erase(later, finished.end());
  // If the connection dropped meanwhile, finished ones stay in unacked_ and
  // go out in the next Hello.
  if (!finished.empty()) Send(proto::Finished{std::move(finished)});
  if (!started.empty()) Send(proto::Started{std::move(started)});
  if (!after_start.empty()) Send(proto::Finished{std::move(after_start)});
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
      auto run = running_.find(request.task);
      t.running = run != running_.end() && run->second.attempt == known.attempt;
      if (t.running) {
        // The executor makes output files with their first byte; a reader
        // that follows needs the file now.
        Status opened = executor_->OpenOutputFiles(request.task);
        if (!opened.ok()) {
          spdlog::warn("worker {}: {}", name_, opened.message());
        }
      }
      target = std::move(t);
    }
  }
  logs_->Request(request, target);
}

// ---- fencing -------------------------------------------------------------

void Agent::Impl::Contact(Time when) {
  fence_->OnServerContact(when);
  last_contact_ = std::max(last_contact_, when);
  if (!fence_timer_.armed()) ArmFence();
}

void Agent::Impl::ArmFence() {
  fence_timer_.ArmAt(fence_->deadline() + Millis(1), [this] { OnFenceTimer(); });
}

void Agent::Impl::OnFenceTimer() {
  const Time now = clock_.Now();
  if (established_) {
    // An open, answered connection is contact (agent.h).
    Contact(now);
    return ArmFence();
  }
  if (!fence_->ShouldFence(now)) return ArmFence();
  const std::string reason = FenceReason(now - last_contact_);
  // Queued successors first, so that no fenced predecessor's exit can
  // start one: they never run, and are reported finished with the reason.
  if (!queued_.empty()) {
    spdlog::error("worker {}: {}; dropping {} queued tasks", name_, reason, queued_.size());
    std::map<TaskId, Queued> dropped = std::exchange(queued_, {});
    for (const auto& [predecessor, queued] : dropped) DropQueued(queued, reason);
  }
  std::vector<TaskId> victims;
  for (auto& [task, run] : running_) {
    if (run.fence_reason.empty()) victims.push_back(task);
  }
  if (victims.empty()) return;  // re-armed by the next contact
  spdlog::error("worker {}: {}; killing {} running tasks (their leases are about to expire)",
                name_, reason, victims.size());
  for (const TaskId& task : victims) {
    running_[task].fence_reason = reason;
    Status killed = executor_->Kill(task, Duration::zero());
    if (!killed.ok()) {
      spdlog::warn("worker {}: cannot kill {}: {}", name_, task.ToString(), killed.ToString());
    }
  }
}

// The reaper's watchdog deadline is half a heartbeat after where this
// worker would fence (so a running worker fences first, with its own
// reason, and the reaper still acts 1.5 heartbeats before the lease can
// expire): while an
// answered connection is open (contact, see OnFenceTimer), one budget from
// now; without one, the fencing deadline. A tick that comes late (the
// worker did not run for a while: SIGSTOP, a stall, swap) proves nothing
// about the link, so it does not move the deadline: the reaper may fire
// meanwhile, which is the point.
void Agent::Impl::TellReaper() {
  const Time now = clock_.Now();
  const Duration budget = fence_->budget();
  const Duration tick = std::max<Duration>(Millis(20), std::min<Duration>(heartbeat_, budget / 4));
  const bool late = now - last_watchdog_tick_ > std::max<Duration>(2 * tick, budget / 2);
  last_watchdog_tick_ = now;
  if (!late) {
    const Time deadline = (established_ ? now + budget : fence_->deadline()) + heartbeat_ / 2;
    Status told = reaper_->SetDeadline(deadline - now);
    if (!told.ok() && !reaper_gone_) {
      reaper_gone_ = true;  // said once: it does not come back
      spdlog::warn("worker {}: {}", name_, told.ToString());
    }
  }
  watchdog_timer_.ArmAfter(tick, [this] { TellReaper(); });
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
