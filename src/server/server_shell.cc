#include "server/server_shell.h"

#include <pwd.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "net/access_file.h"
#include "net/local_socket.h"
#include "net/server.h"
#include "net/sha256.h"
#include "net/token.h"
#include "server/access.h"
#include "server/alloc.h"
#include "server/audit_log.h"
#include "server/core_driver.h"
#include "server/dashboard.h"
#include "server/event_stream.h"
#include "server/file_relay.h"
#include "server/file_store.h"
#include "server/freezable_store.h"
#include "server/lease_book.h"
#include "server/log_relay.h"
#include "server/observability.h"
#include "server/output_retention.h"
#include "server/quota_api.h"
#include "server/rest_api.h"
#include "server/retention.h"
#include "server/user_api.h"
#include "server/user_book.h"
#include "server/worker_channel.h"
#include "server/worker_registry.h"
#include "store/memory_store.h"
#include "store/posix_env.h"

namespace drover::server {

// Everything the shell owns, in construction order (destroyed in reverse).
struct ServerShell::Parts : CommandSink {
  Parts(net::EventLoop& l, ServerConfig c)
      : loop(l), config(std::move(c)), clock(l.virtual_time() ? l.clock() : *config.clock) {}

  void Assign(const core::AssignTask& a) override { channel->Assign(a); }
  void Replicate(const core::ReplicateOutputs& copy) override { channel->Replicate(copy); }
  void Kill(const core::KillTask& k) override { channel->Kill(k); }
  void StateChanged(const core::TaskStateChanged& c, Time at) override {
    events->Publish(c, at);
    if (observability) observability->OnStateChanged(c, at);
  }

  // The MemoryStore expiry hook: one timer at the earliest lease expiry.
  // This is the only place that knows the store is a MemoryStore.
  void RearmExpiry() {
    if (memory == nullptr || stopped) return;
    std::optional<Time> next = memory->NextExpiry();
    if (!next) {
      expiry->Cancel();
      return;
    }
    expiry->ArmAt(*next, [this] {
      memory->ExpireDue(clock.Now());
      RearmExpiry();
    });
  }

  // Forgets the finished jobs that are due, then again after the
  // retention interval (at once, from a post, while more are due).
  void PruneFinished() {
    if (stopped) return;
    const Retention::Pass pass = retention->Prune(clock.Now());
    retention_timer->ArmAfter(pass.more ? Duration::zero() : retention->interval(),
                              [this] { PruneFinished(); });
  }

  // Releases the outputs of jobs past --keep-outputs, then again after its
  // interval.
  void ReleaseOutputs() {
    if (stopped) return;
    outputs->Release(clock.Now());
    outputs_timer->ArmAfter(outputs->interval(), [this] { ReleaseOutputs(); });
  }

  net::EventLoop& loop;
  ServerConfig config;
  Clock& clock;  // config.clock
  Time started_at;
  std::string token;
  std::string server_id;
  std::string server_instance;
  std::unique_ptr<store::PosixEnv> env;
  std::unique_ptr<store::Store> store;
  store::MemoryStore* memory = nullptr;  // the same object as `store`
  std::unique_ptr<core::Scheduler> scheduler;
  std::unique_ptr<LeaseBook> book;
  std::unique_ptr<WorkerRegistry> registry;
  std::unique_ptr<CoreDriver> driver;
  std::unique_ptr<WorkerChannel> channel;
  std::unique_ptr<FileStore> files;
  std::unique_ptr<FileRelay> relay;
  std::unique_ptr<EventStream> events;
  std::unique_ptr<LogRelay> logs;
  std::unique_ptr<Observability> observability;
  std::unique_ptr<net::Timer> expiry;
  std::unique_ptr<Retention> retention;
  std::unique_ptr<net::Timer> retention_timer;
  std::unique_ptr<OutputRetention> outputs;
  std::unique_ptr<net::Timer> outputs_timer;
  std::unique_ptr<AllocManager> allocs;
  std::unique_ptr<UserBook> users;
  std::unique_ptr<AuditLog> audit;
  std::unique_ptr<Access> access;
  std::unique_ptr<net::Server> server;
  // Claimed first thing, handed to `server` once it exists.
  std::optional<net::LocalSocketListener> local_socket;
  std::string local_socket_path;
  uint16_t port = 0;
  std::string fingerprint;
  bool stopped = false;
};

namespace {

std::string HostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') return "127.0.0.1";
  return buf;
}

}  // namespace

Result<std::unique_ptr<ServerShell>> ServerShell::Start(net::EventLoop& loop,
                                                        ServerConfig config) {
  if (config.state_dir.empty()) return InvalidArgument("server: state_dir is required");
  std::error_code ec;
  std::filesystem::create_directories(config.state_dir, ec);
  if (ec) return Internal("cannot create state directory " + config.state_dir + ": " + ec.message());
  std::filesystem::permissions(config.state_dir, std::filesystem::perms::owner_all,
                               std::filesystem::perm_options::replace, ec);

  auto p = std::make_unique<Parts>(loop, std::move(config));
  const ServerConfig& cfg = p->config;
  const std::string& dir = cfg.state_dir;
  // Before anything in the state directory is read or written: a second
  // server on the same directory stops here, naming the socket. With
  // another store (Redis) the directory holds no state of its own and is
  // shared by design (a standby taking over from a leader that is paused,
  // not dead, on the same directory): there a claim that fails only costs
  // the socket, never the start.
  if (cfg.local_socket) {
    Result<net::LocalSocketListener> local =
        net::LocalSocketListener::Claim(dir + "/" + net::kLocalSocketName);
    if (local.ok()) {
      p->local_socket_path = local->path();
      p->local_socket.emplace(std::move(*local));
    } else if (local.status().code() == StatusCode::kInvalidArgument || cfg.open_store) {
      spdlog::warn("no local socket: {}; local clients use TCP", local.status().message());
    } else {
      return local.status();
    }
  }
  p->started_at = p->clock.Now();
  ASSIGN_OR_RETURN(p->token, net::LoadOrCreateToken(dir + "/token"));
  ASSIGN_OR_RETURN(std::string id, net::LoadOrCreateToken(dir + "/server-id"));
  p->server_id = id.substr(0, 16);
  ASSIGN_OR_RETURN(std::string instance, net::GenerateToken());
  p->server_instance = instance.substr(0, 16);

  core::SchedulerConfig scheduler_config = cfg.scheduler;
  // The result cache's keys are SHA-256 (core/result_cache.h); its entries
  // last as long as the workers hold their outputs (OutputRetention's
  // cache_keep, the same bound).
  scheduler_config.result_cache.digest = [](std::string_view bytes) {
    net::Sha256 sha;
    sha.Update(bytes);
    return sha.HexDigest();
  };
  Duration cache_keep = std::max(cfg.keep_outputs, cfg.cache_keep);
  if (cfg.keep_finished > Duration::zero()) cache_keep = std::min(cache_keep, cfg.keep_finished);
  scheduler_config.result_cache.keep_outputs = cache_keep;
  scheduler_config.result_cache.max_bytes = cfg.cache_max_bytes;
  p->scheduler = std::make_unique<core::Scheduler>(scheduler_config);
  if (cfg.open_store) {
    ASSIGN_OR_RETURN(p->store, cfg.open_store(loop, *p->scheduler));
  } else {
    p->env = std::make_unique<store::PosixEnv>();
    ASSIGN_OR_RETURN(std::unique_ptr<store::MemoryStore> memory,
                     store::MemoryStore::Open(p->clock, *p->env, dir + "/store"));
    // The journal's fsync (milliseconds on some disks) runs off the loop:
    // the loop goes on placing and assigning while a batch becomes durable,
    // and what waits for durability (job submission answers, result acks)
    // still waits.
    // (On virtual time it stays on the loop: a write in flight on another
    // thread would land at whatever simulated time the loop reached.)
    net::EventLoop* l = &loop;
    if (!loop.virtual_time()) {
      memory->SyncInBackground([l](std::function<void()> fn) { l->Post(std::move(fn)); });
    }
    p->memory = memory.get();
    p->store = std::move(memory);
  }
  p->book = std::make_unique<LeaseBook>(p->server_id);
  ASSIGN_OR_RETURN(p->registry, WorkerRegistry::Open(dir + "/workers.json"));

  DriverOptions dopts;
  dopts.tick_interval = std::min<Duration>(cfg.scheduler.renew_interval, Seconds(1));
  dopts.compact_bytes = cfg.compact_bytes;
  if (const char* freeze = std::getenv("DROVER_TEST_FREEZE_JOURNAL")) {
    // A test hook (freezable_store.h), wrapped around the store only here.
    spdlog::warn("DROVER_TEST_FREEZE_JOURNAL is set (a test hook): the journal stops once {} "
                 "exists",
                 freeze);
    p->store = std::make_unique<FreezableStore>(std::move(p->store), freeze);
  }
  p->driver = std::make_unique<CoreDriver>(loop, p->clock, *p->scheduler, *p->store, *p->book,
                                           *p, dopts);
  ASSIGN_OR_RETURN(p->files, FileStore::Open(dir + "/files"));
  {
    // The store's references follow the journal: each task's latest
    // checkpoint, each job's files uploaded from its client (held under a
    // task index no task has), and the tombstones of forgotten jobs.
    FileStore* files = p->files.get();
    const core::Scheduler* sched = p->scheduler.get();
    p->driver->SetRecordObserver([files, sched](const core::Record& record) {
      if (const auto* c = std::get_if<core::CheckpointRecord>(&record)) {
        std::vector<std::string> shas;
        for (const core::OutputFile& f : c->checkpoint.files) shas.push_back(f.sha256);
        files->SetTaskFiles(c->task, shas);
        // A checkpoint is its job's user's to read, as the job's outputs.
        if (Result<core::JobInfo> job = sched->GetJob(c->task.job); job.ok()) {
          for (const std::string& sha : shas) files->AddHolder(sha, job->user);
        }
      } else if (const auto* j = std::get_if<core::JobRecord>(&record); j && !j->spec) {
        files->ForgetJob(j->job);
      } else if (j && j->spec) {
        std::vector<std::string> shas;
        for (const core::TaskGroupSpec& g : j->spec->groups) {
          for (const core::OutputFile& f : g.input_files) shas.push_back(f.sha256);
        }
        if (!shas.empty()) files->SetTaskFiles(TaskId{j->job, UINT32_MAX}, shas);
        for (const std::string& sha : shas) files->AddHolder(sha, j->spec->user);
      }
    });
  }
  WorkerChannelOptions wopts;
  wopts.server_instance = p->server_instance;
  wopts.files = p->files.get();
  wopts.heartbeat_interval = cfg.heartbeat_interval;
  wopts.max_output_bytes = cfg.max_output_bytes;
  wopts.lease_ttl = cfg.scheduler.lease_ttl;
  wopts.batches = cfg.worker_batches;
  wopts.binary = !cfg.worker_json;
  wopts.clock = &p->clock;
  wopts.lost_grace =
      cfg.lost_grace > Duration::zero() ? cfg.lost_grace : 3 * cfg.heartbeat_interval;
  p->channel = std::make_unique<WorkerChannel>(loop, *p->driver, *p->registry, wopts);
  p->outputs = std::make_unique<OutputRetention>(
      *p->scheduler, cfg.keep_outputs, cfg.keep_finished,
      [channel = p->channel.get()](WorkerId w, const proto::ServerMessage& m) {
        return channel->Send(w, m);
      },
      cfg.cache_keep);
  p->channel->SetOutputsKeptHandler([parts = p.get()](WorkerId w, const std::vector<JobId>& jobs) {
    parts->outputs->Kept(w, jobs, parts->clock.Now());
  });
  p->events = std::make_unique<EventStream>(*p->scheduler, loop, p->clock);
  p->logs = std::make_unique<LogRelay>(loop, *p->scheduler, *p->channel, cfg.log_fetch_timeout);
  p->logs->Install();
  p->expiry = std::make_unique<net::Timer>(loop);
  Parts* parts = p.get();
  // At the end of each core turn: the turn's assignments first (a worker
  // waits for them), then the event stream, then the expiry timer.
  p->driver->SetAfterTurn([parts] {
    parts->channel->FlushAssigns();
    parts->events->Flush();
    parts->RearmExpiry();
  });

  // An active worker (attached and not declared lost since) may run an
  // assignment the journal never saw: the restored core holds placement
  // until they are back (restore_settle, --restore-settle).
  p->scheduler->ExpectWorkers(p->registry->Active());
  p->files->SetReplaying(true);
  RETURN_IF_ERROR(p->driver->Recover());
  p->files->SetReplaying(false);
  // Blobs no checkpoint names: superseded during the replay, or uploaded
  // by a save that never reported (an hour's grace for saves in flight).
  if (const size_t swept = p->files->Sweep(p->clock.Now() - Seconds(3600)); swept > 0) {
    spdlog::info("file store: deleted {} file(s) no checkpoint names", swept);
  }

  // Users, their roles and the audit log.
  std::string first_admin = cfg.first_admin;
  if (first_admin.empty()) {
    if (const passwd* pw = getpwuid(geteuid()); pw != nullptr) first_admin = pw->pw_name;
  }
  ASSIGN_OR_RETURN(p->users,
                   UserBook::Open(dir + "/users.json", first_admin, p->token, p->clock.Now()));
  ASSIGN_OR_RETURN(p->audit, AuditLog::Open(dir + "/audit.log", &loop));
  AccessOptions access;
  access.hide_others = cfg.hide_others;
  access.owner_of = [sched = p->scheduler.get()](JobId job) -> std::optional<std::string> {
    Result<core::JobInfo> j = sched->GetJob(job);
    if (!j.ok()) return std::nullopt;
    return j->user;
  };
  access.shares_contents = [sched = p->scheduler.get()](const std::string& reader,
                                                       const std::string& owner) {
    return SharesContents(sched->config().users, reader, owner);
  };
  p->access = std::make_unique<Access>(std::move(access));

  net::ServerOptions sopts;
  sopts.bind_address = cfg.bind_address;
  sopts.port = cfg.port;
  sopts.tls = cfg.tls;
  sopts.cert_dir = dir;
  sopts.token = p->token;
  sopts.authenticate = [parts](std::string_view token) {
    return parts->users->Authenticate(token);
  };
  sopts.authorize = [parts](const net::Request& r) { return parts->access->Authorize(r); };
  sopts.on_write = [parts](const net::Request& r, const net::Response& answer) {
    // The cluster's own machinery (a worker's uploads and pulls) is not a
    // person's write.
    if (r.identity && r.identity->role == net::Role::kWorker && answer.status < 400) return;
    parts->audit->Append(AuditEntryFor(r, answer, parts->clock.Now()));
  };
  p->server = std::make_unique<net::Server>(loop, sopts);
  if (p->local_socket) {
    p->server->ServeLocalSocket(std::move(*p->local_socket));
    p->local_socket.reset();
  }
  p->server->WebSocketRoute("/api/v1/worker",
                            [parts](std::shared_ptr<net::WsSession> s, const net::Request&) {
                              parts->channel->Attach(std::move(s));
                            });
  // The dashboard's WebSockets: a browser can only send the token in the
  // URL there. The worker channel above takes it in the header only.
  p->server->WebSocketRoute(
      "/api/v1/events",
      [parts](std::shared_ptr<net::WsSession> s, const net::Request& r) {
        parts->events->Attach(std::move(s), r);
      },
      net::WsToken::kHeaderOrQuery);
  p->server->WebSocketRoute(
      "/api/v1/tasks/{id}/logs/follow",
      [parts](std::shared_ptr<net::WsSession> s, const net::Request& r) {
        parts->logs->Follow(std::move(s), r);
      },
      net::WsToken::kHeaderOrQuery);
  p->server->Route("GET", "/api/v1/tasks/{id}/logs",
                   [parts](const net::Request& r, net::Responder done) {
                     parts->logs->Fetch(r, std::move(done));
                   });
  StatusSource status;
  status.version = kServerVersion;
  status.started_at = p->started_at;
  status.journal_bytes = [parts] { return parts->store->LogBytes(); };
  status.connections = [parts] { return parts->server->connection_count(); };
  status.keep_finished = cfg.keep_finished;
  status.outputs_released = [parts](TaskId task, Time now) {
    return parts->outputs->ReleasedNote(task, now);
  };
  status.access = p->access.get();
  p->events->SetVisibility(
      {[parts](const net::Identity& who) { return parts->access->Filters(who); },
       [parts](const net::Identity& who, JobId job) {
         return parts->access->MaySeeJob(who, job);
       },
       [parts](const net::Identity& who, JobId job) {
         return parts->access->MayReadContentsOfJob(who, job);
       }});
  AddRestRoutes(*p->server, *p->driver, *p->channel, status);
  AddQuotaRoutes(*p->server, *p->driver);
  AddFileRoutes(*p->server, *p->files, cfg.max_upload_bytes,
                [parts](const net::Identity& who) { return parts->access->ContentsReader(who); });
  FileRelayOptions ropts;
  ropts.token = p->token;
  ropts.clock = &p->clock;
  p->relay = std::make_unique<FileRelay>(loop, *p->scheduler, *p->channel, *p->files, ropts);
  p->relay->AddRoutes(*p->server);
  AllocOptions aopts;
  aopts.state_dir = dir;
  aopts.interval = cfg.alloc_interval;
  aopts.server_id = p->server_id;
  aopts.launch = [parts] {
    const ServerConfig& c = parts->config;
    std::error_code ec;
    const std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
    const std::string host =
        c.bind_address == "0.0.0.0" || c.bind_address == "::" ? HostName() : c.bind_address;
    return WorkerLaunch{self, host + ":" + std::to_string(parts->port), c.state_dir + "/token",
                        c.tls ? parts->fingerprint : std::string()};
  };
  ASSIGN_OR_RETURN(
      p->allocs, AllocManager::Start(loop, p->clock, *p->scheduler, RealSlurm(), std::move(aopts)));
  p->allocs->AddRoutes(*p->server);
  ObservabilityOptions oopts;
  oopts.started_at = p->started_at;
  oopts.journal_bytes = status.journal_bytes;
  oopts.body_bytes_sent = [parts] { return parts->server->body_bytes_sent(); };
  oopts.body_bytes_received = [parts] { return parts->server->body_bytes_received(); };
  oopts.relayed_bytes = [parts] { return parts->relay->stats().relayed_bytes; };
  oopts.relayed_files = [parts] { return parts->relay->stats().relayed_files; };
  p->observability = std::make_unique<Observability>(loop, *p->driver, *p->channel, oopts);
  p->observability->AddRoutes(*p->server);
  AddDashboardRoutes(*p->server);
  AddUserRoutes(*p->server, *p->users, *p->audit, p->clock);
  RETURN_IF_ERROR(p->server->Start());
  p->port = p->server->port();
  p->retention = std::make_unique<Retention>(*p->driver, cfg.keep_finished);
  p->retention_timer = std::make_unique<net::Timer>(loop);
  if (cfg.keep_finished > Duration::zero()) p->PruneFinished();
  p->outputs_timer = std::make_unique<net::Timer>(loop);
  p->ReleaseOutputs();
  p->fingerprint = p->server->fingerprint();

  if (cfg.access_file != "-") {
    Result<std::string> path = cfg.access_file.empty() ? net::DefaultAccessFilePath()
                                                       : Result<std::string>(cfg.access_file);
    const std::string host = cfg.bind_address == "0.0.0.0" || cfg.bind_address == "::"
                                 ? "127.0.0.1"
                                 : cfg.bind_address;
    Status written =
        path.ok() ? net::WriteAccessFile(*path, net::AccessInfo{host + ":" + std::to_string(p->port),
                                                                p->token, p->fingerprint, cfg.tls,
                                                                p->local_socket_path})
                  : path.status();
    if (!written.ok()) spdlog::warn("access file not written: {}", written.ToString());
  }
  spdlog::info("drover server {} listening on {}:{} ({}), state in {}; {} records restored",
               kServerVersion, cfg.bind_address, p->port, cfg.tls ? "tls" : "plain tcp", dir,
               p->driver->stats().restored_records);
  return std::unique_ptr<ServerShell>(new ServerShell(std::move(p)));
}

ServerShell::ServerShell(std::unique_ptr<Parts> parts) : parts_(std::move(parts)) {}

ServerShell::~ServerShell() { Stop(); }

void ServerShell::Stop() {
  Parts& p = *parts_;
  if (p.stopped) return;
  p.stopped = true;
  p.driver->Stop();
  p.observability->Stop();
  p.expiry->Cancel();
  p.retention_timer->Cancel();
  p.outputs_timer->Cancel();
  p.allocs->Stop();
  p.logs->Stop();
  p.events->Stop();
  p.channel->Stop();
  p.relay->Stop();
  p.server->Stop();
}

void ServerShell::AttachWorker(std::shared_ptr<net::WsSession> session) {
  parts_->channel->Attach(std::move(session));
}

CoreDriver& ServerShell::driver() { return *parts_->driver; }

void ServerShell::SetUserPolicy(core::UserPolicy policy) {
  parts_->driver->Handle(
      core::UserPolicyChanged{std::make_shared<const core::UserPolicy>(std::move(policy))});
}

uint16_t ServerShell::port() const { return parts_->port; }
const std::string& ServerShell::local_socket() const { return parts_->local_socket_path; }
const std::string& ServerShell::token() const { return parts_->token; }
const std::string& ServerShell::fingerprint() const { return parts_->fingerprint; }
const std::string& ServerShell::server_id() const { return parts_->server_id; }
uint64_t ServerShell::discarded_bytes() const { return parts_->driver->stats().discarded_bytes; }

std::string ServerShell::JoinCommand() const {
  const ServerConfig& cfg = parts_->config;
  const std::string host =
      cfg.bind_address == "0.0.0.0" || cfg.bind_address == "::" ? HostName() : cfg.bind_address;
  std::string cmd = "drover worker --server " + host + ":" + std::to_string(parts_->port) +
                    " --token " + parts_->token;
  cmd += cfg.tls ? " --fingerprint " + parts_->fingerprint : std::string(" --no-tls");
  return cmd;
}

}  // namespace drover::server
