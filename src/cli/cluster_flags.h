// Flags shared by `drover server` and `drover up`, and how they become a
// server::ServerConfig.
//
// Thread safety: main thread only.
#ifndef DROVER_CLI_CLUSTER_FLAGS_H_
#define DROVER_CLI_CLUSTER_FLAGS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "cli/quota_flags.h"
#include "common/status.h"
#include "core/scheduler.h"
#include "server/server_shell.h"

namespace CLI {
class App;
}

namespace drover::cli {

struct ServerFlags {
  std::string state_dir;    // default: ~/.local/state/drover/server
  std::string bind = "0.0.0.0";
  uint16_t port = 7210;
  bool no_tls = false;
  std::string heartbeat = "2s";
  std::string lease_ttl = "30s";
  std::string restore_settle = "10s";
  std::string keep_finished = "7d";  // ServerConfig::keep_finished; "0": forever
  std::string keep_outputs = "1d";   // ServerConfig::keep_outputs; "0": until the job ends
  std::string cache_keep = "7d";     // ServerConfig::cache_keep
  std::string cache_max_size = "0";  // ServerConfig::cache_max_bytes: a quantity; "0": no cap
  bool worker_json = false;     // ServerConfig::worker_json
  bool worker_batches = true;   // ServerConfig::worker_batches
  std::string alloc_interval = "5s";  // ServerConfig::alloc_interval
  std::string policy = "spread";
  bool queue_ahead = true;  // SchedulerConfig::queue_ahead
  bool quarantine = true;   // SchedulerConfig::quarantine.enabled
  // SchedulerConfig::quarantine: min_failures, short_attempt, cooldown.
  uint32_t quarantine_after = 5;
  std::string quarantine_quick = "30s";
  std::string quarantine_for = "10m";
  std::string access_file;  // default: $DROVER_ACCESS, then net's default path
  bool no_local_socket = false;  // no <state dir>/api.sock
  bool hide_others = false;      // ServerConfig::hide_others
  std::vector<std::string> quotas;  // --quota USER:cpus=N,gpus=N,tasks=N (quota_flags.h)
  // Preemption by priority (SchedulerConfig::preempt_priority and the three
  // after it). An integer; empty: off.
  std::string preempt_priority;
  int32_t preempt_gap = 10;
  std::string preempt_cooldown = "10m";
  uint32_t max_preemptions = 3;
  // ServerConfig::max_output_bytes: a quantity ("64GiB"); "0": no limit.
  std::string max_output = "64GiB";
};

// Adds --state-dir --port --no-tls --heartbeat --lease-ttl --policy
// --keep-finished --keep-outputs --access-file --no-local-socket --hide-others --quota
// --preempt-priority --preempt-gap --preempt-cooldown --max-preemptions
// --max-output, and --bind when `with_bind`.
void AddServerFlags(CLI::App& app, ServerFlags& flags, bool with_bind);

// `drover up`'s own defaults: bound to 127.0.0.1 (one machine's cluster;
// --bind 0.0.0.0 lets others join).
ServerFlags UpServerFlags();

// Parses the durations and the policy; derives the scheduler's renew
// interval and expiry grace from the lease TTL (a third each, at most 10 s)
// so a short TTL still renews in time. kInvalidArgument names the flag.
Result<server::ServerConfig> MakeServerConfig(const ServerFlags& flags);

// Prints what `drover server` / `up` print once listening: the readiness
// line "drover: listening on ADDR:PORT (tls|plain tcp)" (tests and scripts
// wait for it), the dashboard URL with the token in its fragment, where the
// access file is, and the join command.
void PrintListening(const server::ServerShell& shell, const server::ServerConfig& config);

// The user policy of `config_file` (its [quota.USER], [group.NAME] and
// [fairshare] tables: policy_file.h) with the --quota lines over it.
Result<core::UserPolicy> ReadPolicy(const std::string& config_file, const Quotas& quota_flags);

// SIGHUP for `drover server` and `drover up`: the file's policy replaces
// `current` (the one in force), or, when the file is wrong now, the error
// is logged and nothing changes.
void ReloadPolicy(server::ServerShell& shell, const std::string& config_file,
                  const Quotas& quota_flags, core::UserPolicy& current);

}  // namespace drover::cli

#endif  // DROVER_CLI_CLUSTER_FLAGS_H_
