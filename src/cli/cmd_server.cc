// `drover server`: the scheduler, API and journal in one process, until
// SIGINT or SIGTERM. SIGHUP re-reads the --config file's user policy
// (quotas, groups, fair share: cli/policy_file.h).
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <iostream>
#include <memory>

#include "cli/cli11.h"
#include "cli/cli_common.h"
#include "cli/cluster_flags.h"
#include "cli/commands.h"
#include "cli/discovery.h"
#include "cli/quota_flags.h"
#include "cli/stop_signals.h"
#include "common/quantity.h"
#include "net/access_file.h"
#include "net/event_loop.h"
#include "net/fd_limit.h"
#include "net/token.h"
#include "proto/api_json.h"
#include "server/server_shell.h"
#include "server/standby_server.h"
#include "store/redis_server_store.h"

namespace drover::cli {

namespace {

struct RedisFlags {
  std::string url;  // empty: the MemoryStore
  std::string reconcile_interval = "10s";
  std::string advertise;  // HOST:PORT; empty: from --bind (or the host name) and --port
  // Why this server stopped being the leader; empty while it is.
  std::shared_ptr<std::string> stepped_down = std::make_shared<std::string>();
};

// `--redis`: the server runs on the RedisStore (store/redis_server_store.h),
// with liveness keys for the workers the scheduler has not lost, as the
// leader among the servers sharing that Redis (a standby waits in Start
// until it is, serving reads meanwhile: server/standby_server.h; a leader
// that loses its lease stops the loop).
Status UseRedis(const RedisFlags& redis, server::ServerConfig& config) {
  if (redis.url.empty()) return Status::Ok();
  store::RedisServerStoreOptions options;
  options.redis.url = redis.url;
  RETURN_IF_ERROR(store::ParseRedisUrl(redis.url).status().WithContext("--redis"));
  Result<Duration> interval = ParseDuration(redis.reconcile_interval);
  if (!interval.ok()) return interval.status().WithContext("--reconcile-interval");
  options.reconcile_interval = *interval;
  options.liveness_interval = config.heartbeat_interval;
  options.liveness_ttl = 3 * config.heartbeat_interval;
  ASSIGN_OR_RETURN(std::string nonce, net::GenerateToken());
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  // The leader lease's owner carries the address writers and workers are
  // sent to ("HOST:PORT/host:pid:nonce"; StandbyServer::LeaderAddress).
  std::string advertise = redis.advertise;
  if (!advertise.empty()) {
    RETURN_IF_ERROR(net::SplitHostPort(advertise).status().WithContext("--advertise"));
  } else if (config.port != 0) {
    const bool any = config.bind_address == "0.0.0.0" || config.bind_address == "::";
    advertise = (any ? std::string(host) : config.bind_address) + ":" + std::to_string(config.port);
  }
  if (advertise.find('/') != std::string::npos) {
    return InvalidArgument("--advertise: \"" + advertise + "\" is not HOST:PORT");
  }
  const std::string self = (advertise.empty() ? "" : advertise + "/") + std::string(host) + ":";
  options.leader_id = self + std::to_string(::getpid()) + ":" + nonce.substr(0, 8);
  // A leader lease held by this address on this host under a process id
  // that no longer exists is this server's previous run (a crash or kill
  // -9): take it back at once rather than wait out its TTL as a standby.
  // A live process there (a standby or leader sharing the address) is
  // never taken from.
  options.previous_self = [self](const std::string& owner) {
    if (!owner.starts_with(self)) return false;
    const std::string rest = owner.substr(self.size());
    const size_t colon = rest.find(':');
    if (colon == 0 || colon == std::string::npos || colon > 9) return false;
    pid_t pid = 0;
    for (size_t i = 0; i < colon; ++i) {
      if (rest[i] < '0' || rest[i] > '9') return false;
      pid = pid * 10 + (rest[i] - '0');
    }
    return pid > 0 && pid != ::getpid() && ::kill(pid, 0) == -1 && errno == ESRCH;
  };
  // A third of the task lease TTL: a takeover (leader TTL + start) then
  // ends well before workers fence their tasks (TTL - 2 heartbeats), so a
  // leader change stops nothing (DESIGN.md section 4).
  options.leader_ttl = config.scheduler.lease_ttl / 3;
  server::StandbyOptions standby;
  standby.bind_address = config.bind_address;
  standby.port = config.port;
  standby.tls = config.tls;
  standby.cert_dir = config.state_dir;
  standby.users_file = config.state_dir + "/users.json";
  standby.hide_others = config.hide_others;
  standby.scheduler = config.scheduler;
  standby.version = server::kServerVersion;
  config.open_store = [options, standby, down = redis.stepped_down](
                          net::EventLoop& loop, const core::Scheduler& scheduler)
      -> Result<std::unique_ptr<store::Store>> {
    store::RedisServerStoreOptions o = options;
    // While Open waits for the leader lease, the standby serves reads on
    // the server's own address; it closes before the leader binds it.
    auto reads = std::make_shared<std::unique_ptr<server::StandbyServer>>();
    o.on_standby = [&loop, standby, reads](const std::string& leader) {
      std::cout << "drover: standby; the leader is " << leader << std::endl;
      server::StandbyOptions so = standby;
      Result<std::string> token = net::LoadOrCreateToken(so.cert_dir + "/token");
      if (token.ok()) so.token = *token;
      Result<std::unique_ptr<server::StandbyServer>> started =
          token.ok() ? server::StandbyServer::Start(loop, so)
                     : Result<std::unique_ptr<server::StandbyServer>>(token.status());
      if (!started.ok()) {
        spdlog::error("standby: not serving reads: {}", started.status().ToString());
        return;
      }
      *reads = std::move(started).value();
      std::cout << "drover: standby serving reads on port " << (*reads)->port() << std::endl;
    };
    o.on_standby_update = [reads](Result<store::StandbyUpdate> update) {
      if (*reads == nullptr) return;
      if (!update.ok()) return (*reads)->ReadFailed(update.status());
      (*reads)->Apply(update->reset, update->records, update->leader, std::move(update->workers));
    };
    o.worker_view = [&scheduler] {
      std::vector<core::WorkerInfo> workers;
      for (WorkerId id : scheduler.Workers()) {
        Result<core::WorkerInfo> info = scheduler.GetWorker(id);
        if (info.ok()) workers.push_back(std::move(*info));
      }
      return proto::EncodeWorkerList(workers);
    };
    o.on_lost_leadership = [&loop, down](const std::string& why) {
      *down = why;
      loop.Stop();
    };
    o.live_workers = [&scheduler] {
      std::vector<WorkerId> live;
      for (WorkerId id : scheduler.Workers()) {
        Result<core::WorkerInfo> info = scheduler.GetWorker(id);
        if (info.ok() && !info->lost) live.push_back(id);
      }
      return live;
    };
    Result<std::unique_ptr<store::RedisServerStore>> s =
        store::RedisServerStore::Open(loop, std::move(o));
    reads->reset();  // the leader (or nobody, on error) takes the port now
    if (!s.ok()) return s.status();
    return std::unique_ptr<store::Store>(std::move(s).value());
  };
  return Status::Ok();
}

int RunServer(const ServerFlags& flags, const RedisFlags& redis, const BeaconFlags& beacon,
              const std::string& config_file, bool check) {
  BlockStopSignals(/*reload=*/true);  // first: before any thread starts (stop_signals.h)
  // Many connections, tasks and log files: the soft limit on open files
  // (often 1,024) goes up to the hard one (fd_limit.h).
  if (Result<uint64_t> files = net::RaiseOpenFileLimit(); !files.ok()) {
    spdlog::warn("{}", files.status().message());
  }
  Result<server::ServerConfig> config = MakeServerConfig(flags);
  if (!config.ok()) return ReportError(config.status(), /*usage_on_invalid=*/true);
  // MakeServerConfig checked them; the file's tables go under them.
  const Quotas quota_flags = ParseQuotas(flags.quotas).value();
  if (!config_file.empty()) {
    Result<core::UserPolicy> policy = ReadPolicy(config_file, quota_flags);
    if (!policy.ok()) return ReportError(policy.status(), /*usage_on_invalid=*/true);
    config->scheduler.users = std::move(policy).value();
  }
  core::UserPolicy policy_in_force = config->scheduler.users;
  if (Status s = UseRedis(redis, *config); !s.ok()) {
    return ReportError(s, /*usage_on_invalid=*/true);
  }
  if (check) {
    std::cout << "drover: server flags are valid" << std::endl;
    return kExitOk;
  }
  net::EventLoop loop;
  Result<std::unique_ptr<server::ServerShell>> shell = server::ServerShell::Start(loop, *config);
  if (!shell.ok()) return ReportError(shell.status().WithContext("server did not start"));
  Result<std::unique_ptr<StopSignals>> signals = StopSignals::Watch(
      loop,
      [&](int signo) {
        if (signo == SIGHUP) {
          ReloadPolicy(**shell, config_file, quota_flags, policy_in_force);
          return;
        }
        spdlog::info("signal {}: stopping", signo);
        (*shell)->Stop();
        loop.Stop();
      },
      /*reload=*/true);
  if (!signals.ok()) return ReportError(signals.status());
  PrintListening(**shell, *config);
  Clock& clock = SystemClock();
  Result<std::unique_ptr<net::BeaconSender>> beacon_sender =
      StartBeacon(loop, beacon, **shell, *config, clock);
  if (!beacon_sender.ok()) return ReportError(beacon_sender.status(), /*usage_on_invalid=*/true);
  loop.Run();
  beacon_sender->reset();
  (*shell)->Stop();
  if (!redis.stepped_down->empty()) {
    std::cerr << "drover: no longer the leader (" << *redis.stepped_down << "); stepped down"
              << std::endl;
    return kExitFailure;
  }
  std::cout << "drover: server stopped" << std::endl;
  return kExitOk;
}

}  // namespace

void AddServerCommand(CLI::App& root, int& exit_code) {
  auto flags = std::make_shared<ServerFlags>();
  CLI::App* cmd = root.add_subcommand("server", "Run the server (scheduler, API, journal)");
  AddServerFlags(*cmd, *flags, /*with_bind=*/true);
  auto redis = std::make_shared<RedisFlags>();
  cmd->add_option("--redis", redis->url,
                  "Keep leases and the journal in Redis: redis://[:password@]host:port/db "
                  "(see docs/redis.md)");
  cmd->add_option("--reconcile-interval", redis->reconcile_interval,
                  "With --redis: how often leases are compared with Redis (0s = only after "
                  "a reconnection)")
      ->capture_default_str();
  cmd->add_option("--advertise", redis->advertise,
                  "With --redis: the HOST:PORT standbys send writers and workers to while this "
                  "server leads (default: --bind, or this host's name, and --port)");
  auto beacon = std::make_shared<BeaconFlags>();
  AddBeaconFlags(*cmd, *beacon);
  // --config is read by main.cc before the flags are parsed.
  auto config = std::make_shared<std::string>();
  cmd->add_option("--config", *config,
                  "TOML file whose [server] table sets flags (the command line wins) and "
                  "whose [quota.USER], [group.NAME] and [fairshare] tables set the user policy, "
                  "re-read on SIGHUP (docs/guide.md)");
  auto check = std::make_shared<bool>(false);
  cmd->add_flag("--check", *check, "Check the flags and --config, then exit without starting");
  // The callback owns what the options write to (config too).
  cmd->callback([flags, redis, beacon, config, check, &exit_code] {
    exit_code = RunServer(*flags, *redis, *beacon, *config, *check);
  });
}

}  // namespace drover::cli
