// --quota on `drover server` and `drover up`: per-user limits on what one
// user may run at once (core::UserQuota), as people type them:
//
//   --quota ana:cpus=8,gpus=2,tasks=10   ana's own limits
//   --quota ana:mem=64GiB,queued=1000    memory; tasks queued at once
//   --quota '*:gpus=4'                   everyone without a line of their own
//
// Each key may be left out (no limit on it); cpus, gpus and mem take the
// job file's quantities ("0.5", "500m"; "0.25"; "64GiB"). A user named
// twice, an unknown key or a bad number is an error naming the flag and the
// text. The same limits in a config file: policy_file.h (these lines win
// over its tables for the users they name).
//
// Thread safety: pure functions.
#ifndef DROVER_CLI_QUOTA_FLAGS_H_
#define DROVER_CLI_QUOTA_FLAGS_H_

#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "core/scheduler.h"

namespace drover::cli {

struct Quotas {
  std::map<std::string, core::UserQuota> per_user;
  core::UserQuota everyone;   // "*"; zeros (no limit) when not given
  bool everyone_set = false;  // a "*" line was given
};

// Parses every --quota value. kInvalidArgument: "--quota ana:gpu=2: unknown
// limit \"gpu\" (cpus, gpus, mem, tasks or queued)".
Result<Quotas> ParseQuotas(const std::vector<std::string>& flags);

}  // namespace drover::cli

#endif  // DROVER_CLI_QUOTA_FLAGS_H_
