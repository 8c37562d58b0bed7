#include "cli/cluster_flags.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <tuple>

#include "cli/cli11.h"
#include "cli/policy_file.h"
#include "cli/quota_flags.h"
#include "common/quantity.h"
#include "core/placement.h"
#include "net/access_file.h"

namespace drover::cli {

namespace {

std::string DefaultStateDir() {
  if (const char* xdg = std::getenv("XDG_STATE_HOME"); xdg != nullptr && *xdg != '\0') {
    return std::string(xdg) + "/drover/server";
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return std::string(home) + "/.local/state/drover/server";
  }
  return "/var/lib/drover";
}

Result<Duration> FlagDuration(const std::string& flag, const std::string& text) {
  Result<Duration> d = ParseDuration(text);
  if (!d.ok()) return d.status().WithContext(flag);
  if (*d <= Duration::zero()) return InvalidArgument(flag + ": must be above zero");
  return *d;
}

// A duration flag where 0 means "at once" or "none".
Result<Duration> NonNegativeDuration(const std::string& flag, const std::string& text) {
  Result<Duration> d = ParseDuration(text);
  if (!d.ok()) return d.status().WithContext(flag);
  if (*d < Duration::zero()) return InvalidArgument(flag + ": must not be negative");
  return *d;
}

}  // namespace

void AddServerFlags(CLI::App& app, ServerFlags& flags, bool with_bind) {
  app.add_option("--state-dir", flags.state_dir,
                 "Journal, token and certificate (default ~/.local/state/drover/server)");
  if (with_bind) app.add_option("--bind", flags.bind, "Address to listen on")->capture_default_str();
  app.add_option("--port", flags.port, "Port to listen on (0 picks a free one)")
      ->capture_default_str();
  app.add_flag("--no-tls", flags.no_tls, "Plain TCP instead of TLS (trusted networks only)");
  app.add_option("--heartbeat", flags.heartbeat, "Worker heartbeat interval")
      ->capture_default_str();
  app.add_option("--lease-ttl", flags.lease_ttl,
                 "Lease time-to-live: how long a silent worker's tasks stay its own")
      ->capture_default_str();
  app.add_option("--restore-settle", flags.restore_settle,
                 "After a restart, hold placement this long (0 for not at all) or until every "
                 "worker that was attached before has re-attached")
      ->capture_default_str();
  app.add_option("--alloc-interval", flags.alloc_interval,
                 "How often allocation queues (drover alloc) ask Slurm and submit")
      ->capture_default_str();
  app.add_option("--keep-finished", flags.keep_finished,
                 "Forget a finished job this long after its last change (0 keeps every job "
                 "forever); a forgotten job's id then answers 404 \"expired\"")
      ->capture_default_str();
  app.add_option("--keep-outputs", flags.keep_outputs,
                 "Workers keep a job's output files (for dependents and drover get) until this "
                 "long after the job ended, then they may be evicted from the worker's cache "
                 "(0: as soon as it ended); never longer than --keep-finished")
      ->capture_default_str();
  app.add_option("--cache-keep", flags.cache_keep,
                 "A job whose results the result cache may reuse (cache = true) keeps its "
                 "output files this long after it ended, at least --keep-outputs, never longer "
                 "than --keep-finished; its entries last as long")
      ->capture_default_str();
  app.add_option(
         "--cache-max-size", flags.cache_max_size,
         "The most output bytes the result cache keeps entries for (a size: 500GiB); past it "
         "the oldest entries go and their outputs are kept only --keep-outputs (0: no cap)")
      ->capture_default_str();
  app.add_flag("--worker-batches,!--no-worker-batches", flags.worker_batches,
               "Messages to and from a worker that go out in one burst share one frame: less "
               "server CPU per task at thousands of tasks a second (on by default; "
               "--no-worker-batches sends one message per frame)");
  app.add_flag("--worker-json", flags.worker_json,
               "Messages to and from workers stay JSON text: no binary frames (to read a "
               "capture of the traffic; costs server and worker CPU per task)");
  app.add_option("--policy", flags.policy, "Placement policy: spread, pack or round-robin")
      ->capture_default_str();
  app.add_flag("--queue-ahead,!--no-queue-ahead", flags.queue_ahead,
               "Assign a waiting CPU task to a worker behind a running one whose cores it fits, "
               "so the worker starts it the moment that one exits (default on)");
  app.add_flag("--quarantine,!--no-quarantine", flags.quarantine,
               "Quarantine a worker whose attempts fail quickly where the same task groups "
               "succeed on other workers: nothing new goes there for a cool-down (default on)");
  app.add_option("--quarantine-after", flags.quarantine_after,
                 "Quarantine after this many quick failures of groups that ran well elsewhere "
                 "(within 30m, and 70% of the worker's endings there)")
      ->capture_default_str();
  app.add_option("--quarantine-quick", flags.quarantine_quick,
                 "A failure quicker than this is a black hole's kind of failure")
      ->capture_default_str();
  app.add_option("--quarantine-for", flags.quarantine_for,
                 "The first quarantine's length; each repeat doubles it (at most 8h)")
      ->capture_default_str();
  app.add_option("--access-file", flags.access_file,
                 "Where to write the access file for local clients (default $DROVER_ACCESS, "
                 "then ~/.local/state/drover/access.json; \"-\" for none)");
  app.add_flag("--no-local-socket", flags.no_local_socket,
               "Do not serve local clients on <state dir>/api.sock (they use TCP then)");
  app.add_flag("--hide-others", flags.hide_others,
               "Users (role user) see only their own jobs; admins and viewers see all");
  app.add_option("--quota", flags.quotas,
                 "Most one user may run at once, USER:cpus=N,gpus=N,tasks=N (any of them); "
                 "USER * for everyone without a line of their own (repeatable)");
  app.add_option("--preempt-priority", flags.preempt_priority,
                 "Preemption by priority: a waiting task of at least this priority that fits "
                 "no worker stops tasks of lower priority on one worker to make room (default "
                 "off)")
      ->type_name("INT");
  app.add_option("--preempt-gap", flags.preempt_gap,
                 "With --preempt-priority: only tasks at least this much below the preemptor's "
                 "priority are stopped")
      ->capture_default_str();
  app.add_option("--max-preemptions", flags.max_preemptions,
                 "With --preempt-priority: a task preempted this many times is not preempted "
                 "again until --preempt-cooldown has passed since the last time")
      ->capture_default_str();
  app.add_option("--preempt-cooldown", flags.preempt_cooldown,
                 "With --preempt-priority: see --max-preemptions (0 for none)")
      ->capture_default_str();
  app.add_option("--max-output", flags.max_output,
                 "The most a task's outputs may add up to when its job file sets no max_output "
                 "(0 for no limit); over it the task fails with a reason. A worker's own "
                 "--max-output, when lower, wins")
      ->capture_default_str();
}

ServerFlags UpServerFlags() {
  ServerFlags flags;
  flags.bind = "127.0.0.1";
  return flags;
}

Result<server::ServerConfig> MakeServerConfig(const ServerFlags& flags) {
  server::ServerConfig config;
  // Absolute: the access file names the local socket inside it, for
  // clients started anywhere.
  std::error_code ec;
  config.state_dir = std::filesystem::absolute(
                         flags.state_dir.empty() ? DefaultStateDir() : flags.state_dir, ec)
                         .lexically_normal()
                         .string();
  if (ec) return InvalidArgument("--state-dir " + flags.state_dir + ": " + ec.message());
  if (config.state_dir.size() > 1 && config.state_dir.back() == '/') config.state_dir.pop_back();
  config.bind_address = flags.bind;
  config.port = flags.port;
  config.tls = !flags.no_tls;
  config.local_socket = !flags.no_local_socket;
  config.hide_others = flags.hide_others;
  ASSIGN_OR_RETURN(config.heartbeat_interval, FlagDuration("--heartbeat", flags.heartbeat));
  ASSIGN_OR_RETURN(Duration ttl, FlagDuration("--lease-ttl", flags.lease_ttl));
  if (ttl <= 2 * config.heartbeat_interval) {
    return InvalidArgument("--lease-ttl (" + FormatDuration(ttl) +
                           ") must be longer than two heartbeats (--heartbeat " +
                           FormatDuration(config.heartbeat_interval) + ")");
  }
  ASSIGN_OR_RETURN(config.scheduler.restore_settle,
                   NonNegativeDuration("--restore-settle", flags.restore_settle));
  ASSIGN_OR_RETURN(config.alloc_interval, FlagDuration("--alloc-interval", flags.alloc_interval));
  if (flags.keep_finished == "0") {
    config.keep_finished = Duration::zero();
  } else {
    ASSIGN_OR_RETURN(config.keep_finished, FlagDuration("--keep-finished", flags.keep_finished));
  }
  ASSIGN_OR_RETURN(config.keep_outputs, NonNegativeDuration("--keep-outputs", flags.keep_outputs));
  ASSIGN_OR_RETURN(config.cache_keep, NonNegativeDuration("--cache-keep", flags.cache_keep));
  Result<uint64_t> cache_max = ParseBytes(flags.cache_max_size);
  if (!cache_max.ok()) return cache_max.status().WithContext("--cache-max-size");
  config.cache_max_bytes = *cache_max;
  config.worker_batches = flags.worker_batches;
  config.worker_json = flags.worker_json;
  Result<core::PolicyKind> policy = core::ParsePolicy(flags.policy);
  if (!policy.ok()) return policy.status().WithContext("--policy");
  config.scheduler.policy = *policy;
  config.scheduler.queue_ahead = flags.queue_ahead;
  config.scheduler.quarantine.enabled = flags.quarantine;
  if (flags.quarantine_after < 1) return InvalidArgument("--quarantine-after: must be at least 1");
  config.scheduler.quarantine.min_failures = flags.quarantine_after;
  for (auto [flag, text, out] :
       {std::tuple{"--quarantine-quick", &flags.quarantine_quick,
                   &config.scheduler.quarantine.short_attempt},
        std::tuple{"--quarantine-for", &flags.quarantine_for,
                   &config.scheduler.quarantine.cooldown}}) {
    Result<Duration> d = ParseDuration(*text);
    if (!d.ok()) return d.status().WithContext(flag);
    if (*d <= Duration::zero()) return InvalidArgument(std::string(flag) + ": must be positive");
    *out = *d;
  }
  ASSIGN_OR_RETURN(Quotas quotas, ParseQuotas(flags.quotas));
  config.scheduler.users.quotas = std::move(quotas.per_user);
  config.scheduler.users.default_quota = quotas.everyone;
  if (!flags.preempt_priority.empty()) {
    const std::string& text = flags.preempt_priority;
    int32_t priority = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), priority);
    if (ec != std::errc() || end != text.data() + text.size()) {
      return InvalidArgument("--preempt-priority: \"" + text + "\" is not a whole number");
    }
    config.scheduler.preempt_priority = priority;
  }
  if (flags.preempt_gap < 1) {
    // A gap of 0 would let two tasks of one priority take turns stopping each other.
    return InvalidArgument("--preempt-gap: must be at least 1");
  }
  config.scheduler.preempt_gap = flags.preempt_gap;
  if (flags.max_preemptions < 1) return InvalidArgument("--max-preemptions: must be at least 1");
  config.scheduler.max_preemptions = flags.max_preemptions;
  Result<Duration> cooldown = ParseDuration(flags.preempt_cooldown);
  if (!cooldown.ok()) return cooldown.status().WithContext("--preempt-cooldown");
  if (*cooldown < Duration::zero()) {
    return InvalidArgument("--preempt-cooldown: must not be negative");
  }
  config.scheduler.preempt_cooldown = *cooldown;
  Result<uint64_t> max_output = ParseBytes(flags.max_output);
  if (!max_output.ok()) return max_output.status().WithContext("--max-output");
  config.max_output_bytes = *max_output;
  config.scheduler.lease_ttl = ttl;
  config.scheduler.renew_interval = std::min<Duration>(Seconds(10), ttl / 3);
  config.scheduler.expiry_grace = std::min<Duration>(Seconds(10), ttl / 3);
  if (flags.access_file == "-") {
    config.access_file = "-";
  } else {
    ASSIGN_OR_RETURN(config.access_file, net::ResolveAccessFilePath(flags.access_file));
  }
  return config;
}

void PrintListening(const server::ServerShell& shell, const server::ServerConfig& config) {
  const std::string host = config.bind_address == "0.0.0.0" || config.bind_address == "::"
                               ? "127.0.0.1"
                               : config.bind_address;
  std::cout << "drover: listening on " << host << ":" << shell.port() << " ("
            << (config.tls ? "tls" : "plain tcp") << "), state in " << config.state_dir << "\n";
  // The token rides in the fragment, which browsers never send to the
  // server; the page keeps it in sessionStorage and drops it from the URL.
  std::cout << "drover: dashboard at " << (config.tls ? "https" : "http") << "://" << host << ":"
            << shell.port() << "/#token=" << shell.token() << "\n";
  if (shell.discarded_bytes() > 0) {
    std::cout << "drover: the journal had a torn tail: " << shell.discarded_bytes()
              << " bytes discarded\n";
  }
  if (config.access_file != "-") {
    std::cout << "drover: local clients read " << config.access_file << "\n";
  }
  if (!shell.local_socket().empty()) {
    std::cout << "drover: local socket " << shell.local_socket() << " (the token is still needed)\n";
  }
  const std::string& bind = config.bind_address;
  if (bind.rfind("127.", 0) == 0 || bind == "::1" || bind == "localhost") {
    // A join line naming a loopback address works on no other machine.
    std::cout << "drover: no other machine can join: the server listens on " << bind
              << " only (--bind 0.0.0.0 to let them)" << std::endl;
    return;
  }
  std::cout << "drover: to add a machine, run there:\n  " << shell.JoinCommand() << std::endl;
}

Result<core::UserPolicy> ReadPolicy(const std::string& config_file, const Quotas& quota_flags) {
  ASSIGN_OR_RETURN(core::UserPolicy policy, ReadPolicyFile(config_file));
  return WithQuotaFlags(std::move(policy), quota_flags);
}

void ReloadPolicy(server::ServerShell& shell, const std::string& config_file,
                  const Quotas& quota_flags, core::UserPolicy& current) {
  if (config_file.empty()) {
    spdlog::warn("SIGHUP: no --config file to reload quotas from");
    return;
  }
  Result<core::UserPolicy> policy = ReadPolicy(config_file, quota_flags);
  if (!policy.ok()) {
    spdlog::error("quotas not reloaded: {} (the quotas in force stay)", policy.status().message());
    return;
  }
  spdlog::info("quotas reloaded from {}: {}", config_file, DescribePolicy(current, *policy));
  current = *policy;
  shell.SetUserPolicy(std::move(policy).value());
}

}  // namespace drover::cli
