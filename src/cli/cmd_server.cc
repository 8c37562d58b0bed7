// `drover server`: the scheduler, API and journal in one process, until
// SIGINT or SIGTERM.
#include <unistd.h>

#include <iostream>
#include <memory>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "cli/cli_common.h"
#include "cli/cluster_flags.h"
#include "cli/commands.h"
#include "cli/stop_signals.h"
#include "common/quantity.h"
#include "net/event_loop.h"
#include "net/token.h"
#include "server/server_shell.h"
#include "store/redis_server_store.h"

namespace drover::cli {

namespace {

struct RedisFlags {
  std::string url;  // empty: the MemoryStore
  std::string reconcile_interval = "10s";
  // Why this server stopped being the leader; empty while it is.
  std::shared_ptr<std::string> stepped_down = std::make_shared<std::string>();
};

// `--redis`: the server runs on the RedisStore (store/redis_server_store.h),
// with liveness keys for the workers the scheduler has not lost, as the
// leader among the servers sharing that Redis (a standby waits in Start
// until it is; a leader that loses its lease stops the loop).
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
  options.leader_id = std::string(host) + ":" + std::to_string(::getpid()) + ":" + nonce.substr(0, 8);
  // A third of the task lease TTL: a takeover (leader TTL + start) then
  // ends well before workers fence their tasks (TTL - 2 heartbeats), so a
  // leader change stops nothing (DESIGN.md section 4).
  options.leader_ttl = config.scheduler.lease_ttl / 3;
  options.on_standby = [](const std::string& leader) {
    std::cout << "drover: standby; the leader is " << leader << std::endl;
  };
  config.open_store = [options, down = redis.stepped_down](
                          net::EventLoop& loop, const core::Scheduler& scheduler)
      -> Result<std::unique_ptr<store::Store>> {
    store::RedisServerStoreOptions o = options;
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
    ASSIGN_OR_RETURN(std::unique_ptr<store::RedisServerStore> s,
                     store::RedisServerStore::Open(loop, std::move(o)));
    return std::unique_ptr<store::Store>(std::move(s));
  };
  return Status::Ok();
}

int RunServer(const ServerFlags& flags, const RedisFlags& redis) {
  Result<server::ServerConfig> config = MakeServerConfig(flags);
  if (!config.ok()) return ReportError(config.status(), /*usage_on_invalid=*/true);
  if (Status s = UseRedis(redis, *config); !s.ok()) {
    return ReportError(s, /*usage_on_invalid=*/true);
  }
  net::EventLoop loop;
  Result<std::unique_ptr<server::ServerShell>> shell = server::ServerShell::Start(loop, *config);
  if (!shell.ok()) return ReportError(shell.status().WithContext("server did not start"));
  Result<std::unique_ptr<StopSignals>> signals = StopSignals::Watch(loop, [&](int signo) {
    spdlog::info("signal {}: stopping", signo);
    (*shell)->Stop();
    loop.Stop();
  });
  if (!signals.ok()) return ReportError(signals.status());
  PrintListening(**shell, *config);
  loop.Run();
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
  cmd->callback([flags, redis, &exit_code] { exit_code = RunServer(*flags, *redis); });
}

}  // namespace drover::cli
