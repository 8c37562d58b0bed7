// `drover worker`: the agent that runs tasks on this machine, until SIGINT
// or SIGTERM (which kill the tasks it runs; the server reschedules them).
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <tuple>

#include "cli/cli11.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/connection.h"
#include "cli/discovery.h"
#include "cli/stop_signals.h"
#include "common/quantity.h"
#include "net/access_file.h"
#include "net/event_loop.h"
#include "net/fd_limit.h"
#include "worker/agent/agent.h"
#include "worker/desktop/input_source.h"
#include "worker/exec/container.h"
#include "worker/exec/host_features.h"
#include "worker/exec/isolator.h"
#include "worker/exec/task_account.h"

namespace drover::cli {

namespace {

struct WorkerFlags {
  std::string config;  // read by main.cc before the flags are parsed
  bool check = false;  // check the flags, start nothing
  std::vector<std::string> servers;
  std::string access;
  std::string token;
  std::string token_file;
  std::string fingerprint;
  bool no_tls = false;
  std::string workdir;
  bool discover = false;  // --discover: the server comes from a beacon
  uint16_t beacon_port = net::kDefaultBeaconPort;
  std::string discover_timeout = "0s";
  std::string reconnect_max = "30s";  // longest wait between reconnection attempts
  std::string log_cap = "64MiB";      // per task stream
  std::string log_rate = "8MiB";      // per second, all log transfers together
  std::string lifetime = "0";         // leave this long after the start (0: stay)
  std::string idle_timeout = "0";     // leave after this long idle (0: never)
  std::string checkpoint_every = "60s";  // save checkpoints while tasks run (0: at their end only)
  // Idle-desktop mode (--desktop): AgentConfig's desktop fields.
  std::string idle_after = "15m";
  std::string resume_after = "1m";
  std::string suspend_for = "10m";
  std::string min_available_mem = "0";  // memory pressure from other programs (0: off)
  // Health checks (AgentConfig::health_*): how often, how long a run may
  // take, the free-space floor ("0": the smaller of 1 GiB and 1%).
  std::string health_interval = "5m";
  std::string health_timeout = "60s";
  std::string min_free_disk = "0";
  // The data plane: cache size ("0": a quarter of the free disk) and the
  // cap on a task's outputs ("0": none).
  std::string cache_size = "0";
  std::string max_output = "0";
  std::string max_task_disk = "0";  // the most a task's directory may hold ("0": the task's `disk`)
  worker::AgentConfig agent;  // the overrides are parsed straight into it
};

// The default --workdir: the account's own state directory; for a root
// worker whose tasks run as other accounts, /var/lib/drover-worker (the
// Debian package's), which they can reach: root's home is private to root.
std::string DefaultWorkdir(const worker::AgentConfig& config) {
  if (::geteuid() == 0 && (worker::RunsTasksPerUser(config) || !config.task_user.empty())) {
    return "/var/lib/drover-worker";
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return std::string(home) + "/.local/state/drover/work";
  }
  return "/var/lib/drover/work";
}

// Fills servers / token / fingerprint / tls from the flags, or from the
// access file when no --server is given (a worker on the server's machine).
Status ResolveServers(const WorkerFlags& flags, worker::AgentConfig& config) {
  ASSIGN_OR_RETURN(std::string token, TokenFromFlags(flags.token, flags.token_file));
  if (flags.discover) {
    if (!flags.servers.empty()) return InvalidArgument("give --server or --discover, not both");
    config.token = token;
    ASSIGN_OR_RETURN(Duration timeout, ParseDuration(flags.discover_timeout));
    return DiscoverServer(flags.beacon_port, timeout, config);
  }
  if (!flags.servers.empty()) {
    config.servers = flags.servers;
    config.tls = !flags.no_tls;
    config.token = token;
    config.fingerprint = flags.fingerprint;
    if (config.token.empty()) return InvalidArgument("--server needs --token or --token-file");
    if (config.tls && config.fingerprint.empty()) {
      return InvalidArgument("--server needs --fingerprint (or --no-tls)");
    }
    return Status::Ok();
  }
  ASSIGN_OR_RETURN(std::string path, net::ResolveAccessFilePath(flags.access));
  Result<net::AccessInfo> access = net::ReadAccessFile(path);
  if (!access.ok()) {
    if (access.status().code() == StatusCode::kNotFound) {
      return NotFound("no --server given and no access file at " + path +
                      ": pass the join command the server printed");
    }
    return access.status();
  }
  config.servers = {access->address};
  config.tls = access->tls;
  config.token = token.empty() ? access->token : token;
  config.fingerprint = flags.fingerprint.empty() ? access->fingerprint : flags.fingerprint;
  return Status::Ok();
}

int RunWorker(WorkerFlags& flags) {
  BlockStopSignals();  // first: before any thread starts (stop_signals.h)
  // Many connections, tasks and log files: the soft limit on open files
  // (often 1,024) goes up to the hard one (fd_limit.h).
  if (Result<uint64_t> files = net::RaiseOpenFileLimit(); !files.ok()) {
    spdlog::warn("{}", files.status().message());
  }
  worker::AgentConfig config = flags.agent;
  // A check does not wait for a beacon (--discover).
  std::string no_server;  // --check: what it would lack to start
  if (!(flags.check && flags.discover)) {
    if (Status s = ResolveServers(flags, config); !s.ok()) {
      // A check of a config file that names no server yet (the packaged
      // one) is not wrong: it says what is missing instead of failing.
      if (!flags.check || flags.access.size() > 0 || s.code() != StatusCode::kNotFound) {
        return ReportError(s, /*usage_on_invalid=*/true);
      }
      no_server = s.message();
    }
  }
  {
    // Absolute: task directories and the life record are found by it.
    std::error_code ec;
    config.workdir =
        std::filesystem::absolute(flags.workdir.empty() ? DefaultWorkdir(config) : flags.workdir, ec)
            .lexically_normal()
            .string();
    if (ec) return ReportError(InvalidArgument("--workdir " + flags.workdir + ": " + ec.message()),
                               /*usage_on_invalid=*/true);
    if (config.workdir.size() > 1 && config.workdir.back() == '/') config.workdir.pop_back();
  }
  Result<Duration> reconnect_max = ParseDuration(flags.reconnect_max);
  if (!reconnect_max.ok() || *reconnect_max <= Duration::zero()) {
    return ReportError(InvalidArgument("--reconnect-max: not a positive duration: " +
                                       flags.reconnect_max),
                       /*usage_on_invalid=*/true);
  }
  config.reconnect.max = *reconnect_max;
  for (auto [flag, text, out] : {std::tuple{"--log-cap", &flags.log_cap, &config.log_cap_bytes},
                                 std::tuple{"--log-rate", &flags.log_rate,
                                            &config.log_rate_bytes_per_sec}}) {
    Result<uint64_t> bytes = ParseBytes(*text);
    if (!bytes.ok() || *bytes == 0) {
      return ReportError(
          InvalidArgument(std::string(flag) + ": " +
                          (bytes.ok() ? "must be above zero" : bytes.status().message())),
          /*usage_on_invalid=*/true);
    }
    *out = *bytes;
  }
  config.reconnect.initial = std::min(config.reconnect.initial, *reconnect_max);
  for (auto [flag, text, out] :
       {std::tuple{"--lifetime", &flags.lifetime, &config.lifetime},
        std::tuple{"--idle-timeout", &flags.idle_timeout, &config.idle_timeout},
        std::tuple{"--checkpoint-every", &flags.checkpoint_every, &config.checkpoint_every},
        std::tuple{"--health-interval", &flags.health_interval, &config.health_interval}}) {
    Result<Duration> d = ParseDuration(*text);  // "0" is none
    if (!d.ok() || *d < Duration::zero()) {
      return ReportError(InvalidArgument(std::string(flag) +
                                         ": not a duration (90s, 2h, 0 for "
                                         "none): " +
                                         *text),
                         /*usage_on_invalid=*/true);
    }
    *out = *d;
  }
  for (auto [flag, text, out] :
       {std::tuple{"--health-timeout", &flags.health_timeout, &config.health_timeout},
        std::tuple{"--idle-after", &flags.idle_after, &config.idle_after},
        std::tuple{"--resume-after", &flags.resume_after, &config.resume_after},
        std::tuple{"--suspend-for", &flags.suspend_for, &config.suspend_for}}) {
    Result<Duration> d = ParseDuration(*text);
    if (!d.ok() || *d < Duration::zero()) {
      return ReportError(
          InvalidArgument(std::string(flag) + ": not a duration (90s, 15m, 0): " + *text),
          /*usage_on_invalid=*/true);
    }
    *out = *d;
  }
  for (auto [flag, text, out] :
       {std::tuple{"--min-available-mem", &flags.min_available_mem, &config.min_available_bytes},
        std::tuple{"--min-free-disk", &flags.min_free_disk, &config.min_free_disk_bytes},
        std::tuple{"--cache-size", &flags.cache_size, &config.cache_bytes},
        std::tuple{"--max-output", &flags.max_output, &config.max_output_bytes},
        std::tuple{"--max-task-disk", &flags.max_task_disk, &config.max_task_disk_bytes}}) {
    Result<uint64_t> bytes = ParseBytes(*text);
    if (!bytes.ok())
      return ReportError(bytes.status().WithContext(flag), /*usage_on_invalid=*/true);
    *out = *bytes;
  }
  // Who tasks run as (the agent checks the rest: root, the accounts).
  if (Result<std::map<std::string, std::string>> map = worker::ParseUserMap(config.user_map);
      !map.ok()) {
    return ReportError(map.status(), /*usage_on_invalid=*/true);
  }
  if (!config.user_map.empty() && !config.task_user.empty()) {
    return ReportError(InvalidArgument("--user runs every task as one account, --user-map each "
                                       "task as its user's: give one of them"),
                       /*usage_on_invalid=*/true);
  }
  if (config.max_outside_load < 0) {
    return ReportError(InvalidArgument("--max-outside-load: must not be negative"),
                       /*usage_on_invalid=*/true);
  }
  if (flags.check) {
    // What it would offer here: the overrides checked against this machine.
    Result<worker::WorkerResources> offer = worker::DetectOffer(config);
    if (!offer.ok()) return ReportError(offer.status(), /*usage_on_invalid=*/true);
    std::cout << "drover: worker flags are valid; it would offer " << worker::FormatSummary(*offer)
              << std::endl;
    std::cout << "drover: tasks with network = \"none\" "
              << (worker::CanMakePrivateNetwork()
                      ? "run here (it may create network namespaces)"
                      : "are not placed here (it may not create network namespaces: it is not "
                        "root, and the kernel allows it no user namespace)")
              << std::endl;
    {
      // The isolation it would use decides whether containers can nest in
      // its cgroups: made and dropped again, as the worker would at start.
      worker::IsolatorOptions isolation;
      Result<worker::IsolationMode> mode = worker::ParseIsolationMode(config.isolation);
      if (mode.ok()) isolation.mode = *mode;
      Result<std::unique_ptr<worker::Isolator>> isolator = worker::MakeIsolator(isolation);
      Result<worker::ContainerRuntime> runtime =
          isolator.ok() ? worker::FindContainerRuntime((*isolator)->mode(), config.workdir,
                                                       /*check_only=*/true)
                        : Result<worker::ContainerRuntime>(isolator.status());
      std::cout << "drover: tasks with an image "
                << (runtime.ok() ? "run here through " + runtime->description +
                                       (runtime->gpus ? " (GPUs through CDI)"
                                                      : " (not with GPUs: no CDI spec)")
                                 : "are not placed here: " + runtime.status().message())
                << std::endl;
    }
    if (config.desktop) {
      Result<std::unique_ptr<worker::InputSource>> input =
          worker::MakeInputSource(config.idle_source);
      if (!input.ok()) {
        return ReportError(input.status().WithContext("--idle-source " + config.idle_source),
                           /*usage_on_invalid=*/true);
      }
      std::cout << "drover: idle-desktop mode: owner input from " << (*input)->Describe()
                << "; offers work after " << FormatDuration(config.idle_after) << " without input"
                << std::endl;
    }
    // Tasks that run as other accounts must reach their directories.
    Result<std::string> workdir = worker::CheckWorkdir(config);
    if (!workdir.ok()) return ReportError(workdir.status());
    if (!workdir->empty()) std::cout << "drover: at start it " << *workdir << std::endl;
    if (!no_server.empty())
      std::cout << "drover: to start it needs a server: " << no_server << std::endl;
    return kExitOk;
  }
  {
    // Its parents too: a fresh account (or a container) has no
    // ~/.local/state yet.
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(config.workdir).parent_path(), ec);
    if (ec) {
      return ReportError(Unavailable("cannot create the parent of --workdir " + config.workdir +
                                     ": " + ec.message()));
    }
  }
  net::EventLoop loop;
  std::string left;  // why it left by itself (--idle-timeout)
  config.on_leave = [&](const std::string& reason) {
    left = reason;
    loop.Stop();
  };
  Result<std::unique_ptr<worker::Agent>> agent = worker::Agent::Start(loop, config);
  if (!agent.ok()) return ReportError(agent.status().WithContext("worker did not start"));
  Result<std::unique_ptr<StopSignals>> signals = StopSignals::Watch(loop, [&](int signo) {
    spdlog::info("signal {}: stopping the worker and its tasks", signo);
    (*agent)->Stop();
    loop.Stop();
  });
  if (!signals.ok()) return ReportError(signals.status());
  std::cout << "drover: worker " << (config.name.empty() ? "(host name)" : config.name)
            << " offering " << (*agent)->summary() << ", connecting to " << config.servers[0]
            << std::endl;
  loop.Run();
  (*agent)->Stop();
  if (!left.empty()) std::cout << "drover: worker left: " << left << std::endl;
  return kExitOk;
}

}  // namespace

void AddWorkerCommand(CLI::App& root, int& exit_code) {
  auto flags = std::make_shared<WorkerFlags>();
  worker::AgentConfig& a = flags->agent;
  CLI::App* cmd = root.add_subcommand("worker", "Run tasks on this machine for a server");
  cmd->add_option("--config", flags->config,
                  "TOML file whose [worker] table sets flags (the command line wins; "
                  "docs/guide.md)");
  cmd->add_flag("--check", flags->check,
                "Check the flags and --config, then exit without starting");
  cmd->add_option("--server", flags->servers,
                  "Server HOST:PORT; repeat for fallbacks (default: the local access file)");
  cmd->add_option("--access", flags->access, "Access file to read when no --server is given");
  cmd->add_option("--token", flags->token, "Cluster token");
  cmd->add_option("--token-file", flags->token_file, "File holding the cluster token");
  cmd->add_option("--fingerprint", flags->fingerprint, "Pinned SHA-256 of the server certificate");
  cmd->add_flag("--no-tls", flags->no_tls, "Plain TCP (the server runs with --no-tls)");
  cmd->add_flag("--discover", flags->discover,
                "Join the first server whose LAN beacon verifies with the token (docs/lan.md)");
  cmd->add_option("--beacon-port", flags->beacon_port, "With --discover: UDP port to listen on")
      ->capture_default_str();
  cmd->add_option("--discover-timeout", flags->discover_timeout,
                  "With --discover: give up after this long (0s: wait forever)")
      ->capture_default_str();
  cmd->add_option("--reconnect-max", flags->reconnect_max,
                  "Longest wait between attempts to reach a lost server")
      ->capture_default_str();
  cmd->add_option("--name", a.name, "Worker name (default: host name); keeps its id across restarts");
  cmd->add_option("--workdir", flags->workdir,
                  "Task directories (default ~/.local/state/drover/work; as root running tasks as "
                  "other accounts, /var/lib/drover-worker)");
  cmd->add_option("--isolation", a.isolation, "auto, cgroup2, cgroup1, rlimit or none")
      ->capture_default_str();
  cmd->add_option("--cpus", a.cpus, "Cores to offer, as a list: 0-7,16");
  cmd->add_option("--mem", a.mem, "Memory to offer, e.g. 16GiB");
  cmd->add_option("--gpus", a.gpus, "GPU indices to offer (0,1 or none; default: detect)");
  cmd->add_option("--gpu-type", a.gpu_type, "GPU model, with --gpus");
  cmd->add_option("--gpu-mem", a.gpu_mem, "Memory per GPU, with --gpus");
  cmd->add_option("--label", a.labels, "Label key=value (repeatable)");
  cmd->add_option("--counter", a.counters, "Custom counter name=count (repeatable)");
  cmd->add_option("--user", a.task_user,
                  "As root: run every task as this account (without it, as root, each task runs "
                  "as the account of its job's user)");
  cmd->add_option("--user-map", a.user_map,
                  "As root without --user: run the tasks of job user USER as ACCOUNT, "
                  "USER=ACCOUNT (repeatable; unmapped users run as the account of their own "
                  "name)");
  cmd->add_option("--log-cap", flags->log_cap,
                  "Most bytes kept of each task's stdout and of its stderr")
      ->capture_default_str();
  cmd->add_option("--log-rate", flags->log_rate,
                  "Bytes per second for all log transfers to the server together")
      ->capture_default_str();
  cmd->add_flag("--run-as-root", a.run_as_root,
                "Allow tasks to run as root: alone, every task runs as root; with --user-map, "
                "a user whose account is root may run");
  cmd->add_option("--lifetime", flags->lifetime,
                  "Leave this long after starting (a Slurm allocation's time limit, e.g. 1h); "
                  "only tasks with a timeout that ends by then are placed here")
      ->capture_default_str();
  cmd->add_option("--idle-timeout", flags->idle_timeout,
                  "Leave after this long with nothing to do (e.g. 5m; 0: never)")
      ->capture_default_str();
  cmd->add_flag("--desktop", a.desktop,
                "Idle-desktop mode: offer work only while this machine's owner is away; "
                "suspend tasks at once when they return, vacate them if they stay");
  cmd->add_option("--idle-after", flags->idle_after,
                  "With --desktop: offer work after this long without keyboard or mouse input "
                  "and with little load from other programs")
      ->capture_default_str();
  cmd->add_option("--resume-after", flags->resume_after,
                  "With --desktop: resume suspended tasks after the owner is quiet this long")
      ->capture_default_str();
  cmd->add_option("--suspend-for", flags->suspend_for,
                  "With --desktop: vacate tasks (checkpoint signal, grace, kill, requeue) when "
                  "the owner stays this long")
      ->capture_default_str();
  cmd->add_option("--idle-source", a.idle_source,
                  "With --desktop: where owner input is read: auto (input devices, else "
                  "logind), evdev[:DIR], logind, or file:PATH (its modification time)")
      ->capture_default_str();
  cmd->add_option("--min-available-mem", flags->min_available_mem,
                  "When other programs leave less memory available than this (e.g. 2GiB), "
                  "suspend the youngest task, then vacate it, and so on; 0: off")
      ->capture_default_str();
  cmd->add_option("--health-check", a.health_check,
                  "A program (run with sh -c, as this worker's account) that says whether this "
                  "machine may take work: at start and every --health-interval; a non-zero exit "
                  "or a run past --health-timeout stops new work, its first line of output "
                  "the reason, until a run passes")
      ->capture_default_str();
  cmd->add_option("--health-interval", flags->health_interval,
                  "How often the health checks run (the program, and the work directory's "
                  "file system: read-only or below --min-free-disk stops new work); 0: never")
      ->capture_default_str();
  cmd->add_option("--health-timeout", flags->health_timeout,
                  "The longest a --health-check run may take; past it, it is killed with its "
                  "process group and counts as failed")
      ->capture_default_str();
  cmd->add_option("--min-free-disk", flags->min_free_disk,
                  "Take no new work while the work directory's file system has less free than "
                  "this (e.g. 5GiB); 0: the smaller of 1GiB and 1% of its size")
      ->capture_default_str();
  cmd->add_option("--cache-size", flags->cache_size,
                  "Largest size of this worker's file cache (inputs fetched from other workers, "
                  "outputs kept for them), e.g. 50GiB; 0: a quarter of the free disk")
      ->capture_default_str();
  cmd->add_option("--max-output", flags->max_output,
                  "Fail a task whose outputs ($DROVER_OUTPUT_DIR) pass this size, e.g. 100GiB; "
                  "0: no limit")
      ->capture_default_str();
  cmd->add_option("--max-task-disk", flags->max_task_disk,
                  "Stop, failed, a task whose directory holds more than this, e.g. 20GiB (a task's "
                  "own `disk`, when lower, wins); 0: only the task's")
      ->capture_default_str();
  cmd->add_option("--checkpoint-every", flags->checkpoint_every,
                  "Save each running task's $DROVER_CHECKPOINT_DIR to the server this often "
                  "(e.g. 60s, 500ms), and when an attempt ends, so a retry on another worker "
                  "resumes from it; 0: only when an attempt ends")
      ->capture_default_str();
  cmd->add_option("--files-port", a.files_port,
                  "TCP port of the file service other workers fetch outputs from; 0: any free "
                  "port")
      ->capture_default_str();
  cmd->add_option("--files-bind", a.files_bind, "Address the file service listens on")
      ->capture_default_str();
  cmd->add_option("--max-outside-load", a.max_outside_load,
                  "With --desktop: the owner counts as present while programs outside Drover "
                  "use more than this many cores")
      ->capture_default_str();
  cmd->callback([flags, &exit_code] { exit_code = RunWorker(*flags); });
}

}  // namespace drover::cli
