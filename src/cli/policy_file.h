// The server's user policy in its config file (`drover server --config
// FILE`): per-user and per-group quotas and fair share, as core::UserPolicy.
// Read at start (an error stops the server) and again on SIGHUP (an error
// keeps the policy in force).
//
//   [quota."*"]          # every user without a table of their own
//   gpus = 4
//   [quota.ana]
//   cpus = 8             # or "500m", 0.5
//   gpus = 2             # or 0.5
//   mem = "64GiB"        # the job file's units: "64G" is refused as ambiguous
//   tasks = 10           # assigned or running at once
//   queued = 1000        # waiting or queued at once: a job past it is refused
//   [group.vision]
//   members = ["ana", "bob"]
//   gpus = 6             # the members together
//   share_outputs = true # members read each other's logs, results, files
//   [fairshare]
//   half_life = "1d"
//   gpu_weight = 10.0
//   enabled = true
//   [fairshare.shares]
//   ana = 2
//   vision = 1
//
// A limit left out, or 0, is no limit. Errors name the file, line and
// column: an unknown table or key, a value of the wrong kind or one the
// job file's rules refuse, keys straight under [quota] or [group], a group
// without members, a user in two groups, a share that is not above 0.
//
// --quota flags (quota_flags.h) apply on top of the file: a user (or `*`)
// named by --quota takes the flag's limits instead of its table, at start
// and at each reload.
//
// Thread safety: pure functions.
#ifndef DROVER_CLI_POLICY_FILE_H_
#define DROVER_CLI_POLICY_FILE_H_

#include <string>
#include <vector>

#include "cli/quota_flags.h"
#include "common/status.h"
#include "core/scheduler.h"
#include "proto/config_file.h"

namespace drover::cli {

// The tables a config file may hold for the policy (beside [server] and
// [worker]).
inline constexpr const char* kPolicyTables[] = {"quota", "group", "fairshare"};
bool IsPolicyTable(const std::string& name);

// The policy the [quota], [group] and [fairshare] sections of `file` give
// (other sections are left alone); defaults where the file has none.
Result<core::UserPolicy> PolicyFromSections(const std::vector<proto::ConfigSection>& sections,
                                            const std::string& file);

// Reads and parses `file`, then PolicyFromSections. Errors: the file cannot
// be read, its TOML, and those above.
Result<core::UserPolicy> ReadPolicyFile(const std::string& file);

// `policy` with the --quota lines in force over it (see above). `flags`
// with no "*" line leaves the file's "*".
core::UserPolicy WithQuotaFlags(core::UserPolicy policy, const Quotas& flags);

// What a reload changed, for the server's log: "3 users, 1 group;
// changed: ana, group vision" (or "; nothing changed").
std::string DescribePolicy(const core::UserPolicy& before, const core::UserPolicy& after);

}  // namespace drover::cli

#endif  // DROVER_CLI_POLICY_FILE_H_
