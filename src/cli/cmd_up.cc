// `drover up`: a server and N local workers in one process on one event
// loop, for single-machine use. The workers reach the server like any other
// worker, over its local socket (api.sock: no TCP, no TLS; the token as
// always) or, with --no-local-socket, over loopback TCP; the machine's
// cores, memory and GPUs are split between them (core_split.h; GPUs in
// contiguous shares, the first workers one longer, so with fewer GPUs than
// workers the last workers offer none).
//
// `--config FILE` works as the server's: its [server] table gives up's
// flags (main.cc), its policy tables the quotas, re-read on SIGHUP.
//
// Running as root without --user, the local workers run tasks as root:
// `up` is an explicit single-machine mode where the person starting it
// already owns the machine. A one-line notice says so.
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>
#include <system_error>

#include "cli/cli11.h"
#include "cli/cli_common.h"
#include "cli/cluster_flags.h"
#include "cli/commands.h"
#include "cli/core_split.h"
#include "cli/stop_signals.h"
#include "net/event_loop.h"
#include "net/fd_limit.h"
#include "server/server_shell.h"
#include "worker/agent/agent.h"
#include "worker/agent/server_link.h"

namespace drover::cli {

namespace {

struct UpFlags {
  ServerFlags server;
  int workers = 2;
  std::string isolation = "auto";
  std::string user;
  std::string config;  // --config: read by main.cc ([server]) and here (the policy)
};

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "local";
  return name;
}

// Where this process reaches its own server over TCP (--no-local-socket).
std::string LocalAddress(const std::string& bind) {
  if (bind == "0.0.0.0") return "127.0.0.1";
  if (bind == "::") return "::1";
  return bind;
}

int RunUp(UpFlags& flags) {
  BlockStopSignals(/*reload=*/true);  // first: before any thread starts (stop_signals.h)
  // Many connections, tasks and log files: the soft limit on open files
  // (often 1,024) goes up to the hard one (fd_limit.h).
  if (Result<uint64_t> files = net::RaiseOpenFileLimit(); !files.ok()) {
    spdlog::warn("{}", files.status().message());
  }
  Result<server::ServerConfig> config = MakeServerConfig(flags.server);
  if (!config.ok()) return ReportError(config.status(), /*usage_on_invalid=*/true);
  // MakeServerConfig checked them; the file's tables go under them.
  const Quotas quota_flags = ParseQuotas(flags.server.quotas).value();
  if (!flags.config.empty()) {
    Result<core::UserPolicy> policy = ReadPolicy(flags.config, quota_flags);
    if (!policy.ok()) return ReportError(policy.status(), /*usage_on_invalid=*/true);
    config->scheduler.users = std::move(policy).value();
  }
  core::UserPolicy policy_in_force = config->scheduler.users;
  Result<std::vector<int>> cores = AvailableCores();
  if (!cores.ok()) return ReportError(cores.status());
  Result<std::vector<std::string>> split = SplitCores(*cores, flags.workers);
  if (!split.ok()) return ReportError(split.status(), /*usage_on_invalid=*/true);

  net::EventLoop loop;
  Result<std::unique_ptr<server::ServerShell>> shell = server::ServerShell::Start(loop, *config);
  if (!shell.ok()) return ReportError(shell.status().WithContext("server did not start"));

  const bool root = geteuid() == 0;
  if (root && flags.user.empty()) {
    std::cout << "drover: running as root with no --user: local workers run tasks as root "
                 "(drover up is single-machine mode)"
              << std::endl;
  }
  const uint64_t mem_bytes = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) *
                             static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  // The workers' directories live under <state-dir>/work/, which a fresh
  // state directory does not have yet (the executor makes only the last level).
  std::error_code ec;
  std::filesystem::create_directories(config->state_dir + "/work", ec);
  if (ec) {
    return ReportError(
        Unavailable("cannot create " + config->state_dir + "/work: " + ec.message()));
  }
  // Before the agents: each link outlives its agent.
  std::vector<std::unique_ptr<worker::InProcessLink>> links;
  std::vector<std::unique_ptr<worker::Agent>> agents;
  // "listening on" means ready: printed once every local worker is in, so a
  // script that waits for it and submits is not told "no workers are
  // connected" (the submission's warning).
  std::vector<bool> attached(static_cast<size_t>(std::max(flags.workers, 0)), false);
  size_t attached_count = 0;
  auto announce = [&] { PrintListening(**shell, *config); };
  for (int i = 0; i < flags.workers; ++i) {
    worker::AgentConfig a;
    a.on_attached = [&, i] {
      if (attached[static_cast<size_t>(i)]) return;  // a re-attach
      attached[static_cast<size_t>(i)] = true;
      if (++attached_count == attached.size()) announce();
    };
    a.servers = {LocalAddress(config->bind_address) + ":" + std::to_string((*shell)->port())};
    a.token = (*shell)->token();
    a.fingerprint = (*shell)->fingerprint();
    a.tls = config->tls;
    // In this process: its messages go to the server in memory; its other
    // requests (files, checkpoints) over the local socket when there is
    // one, without TCP and TLS.
    links.push_back(std::make_unique<worker::InProcessLink>(
        loop, [&shell](std::shared_ptr<net::WsSession> session) {
          (*shell)->AttachWorker(std::move(session));
        }));
    a.server_link = links.back().get();
    a.local_socket = (*shell)->local_socket();
    // Its file service is as local as the server: on loopback unless
    // --bind lets other machines in (they may then fetch outputs too).
    if (config->bind_address == "127.0.0.1" || config->bind_address == "::1") {
      a.files_bind = "127.0.0.1";
    }
    a.name = HostName() + "-" + std::to_string(i + 1);
    a.workdir = config->state_dir + "/work/" + a.name;
    a.isolation = flags.isolation;
    a.cpus = (*split)[static_cast<size_t>(i)];
    a.mem = std::to_string(mem_bytes / static_cast<uint64_t>(flags.workers));
    // Each local worker offers its own share of the GPUs, as of the cores:
    // two workers offering one GPU would each place a task on it.
    a.gpu_part = i;
    a.gpu_parts = flags.workers;
    a.task_user = flags.user;
    a.run_as_root = root && flags.user.empty();
    a.heartbeat_interval = config->heartbeat_interval;
    a.lease_ttl = config->scheduler.lease_ttl;
    Result<std::unique_ptr<worker::Agent>> agent = worker::Agent::Start(loop, a);
    if (!agent.ok()) {
      return ReportError(agent.status().WithContext("local worker " + a.name + " did not start"));
    }
    std::cout << "drover: worker " << a.name << " offering " << (*agent)->summary() << std::endl;
    agents.push_back(std::move(*agent));
  }

  Result<std::unique_ptr<StopSignals>> signals = StopSignals::Watch(
      loop,
      [&](int signo) {
        if (signo == SIGHUP) {
          ReloadPolicy(**shell, flags.config, quota_flags, policy_in_force);
          return;
        }
        spdlog::info("signal {}: stopping", signo);
        for (auto& agent : agents) agent->Stop();
        (*shell)->Stop();
        loop.Stop();
      },
      /*reload=*/true);
  if (!signals.ok()) return ReportError(signals.status());
  if (attached.empty()) announce();
  loop.Run();
  for (auto& agent : agents) agent->Stop();
  (*shell)->Stop();
  std::cout << "drover: stopped" << std::endl;
  return kExitOk;
}

}  // namespace

void AddUpCommand(CLI::App& root, int& exit_code) {
  auto flags = std::make_shared<UpFlags>();
  CLI::App* cmd = root.add_subcommand("up", "Run a server and local workers in one process");
  flags->server = UpServerFlags();
  AddServerFlags(*cmd, flags->server, /*with_bind=*/true);
  cmd->add_option("--workers", flags->workers, "Local workers (the cores are split between them)")
      ->capture_default_str();
  cmd->add_option("--isolation", flags->isolation, "auto, cgroup2, cgroup1, rlimit or none")
      ->capture_default_str();
  cmd->add_option("--user", flags->user, "Run tasks as this user (as root: default root)");
  cmd->add_option("--config", flags->config,
                  "TOML file whose [server] table sets flags (the command line wins) and "
                  "whose [quota.USER], [group.NAME] and [fairshare] tables set the user policy, "
                  "re-read on SIGHUP, as drover server's (docs/guide.md)");
  cmd->callback([flags, &exit_code] { exit_code = RunUp(*flags); });
}

}  // namespace drover::cli
