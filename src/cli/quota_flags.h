// --quota on `drover server` and `drover up`: per-user limits on what one
// user may run at once (core::UserQuota), as people type them:
//
//   --quota ana:cpus=8,gpus=2,tasks=10   ana's own limits
//   --quota '*:gpus=4'                   everyone without a line of their own
//
// Each key may be left out (no limit on it); cpus and gpus take the job
// file's quantities ("0.5", "500m"; "0.25"). A user named twice, an unknown
// key or a bad number is an error naming the flag and the text.
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
  core::UserQuota everyone;  // "*"; zeros (no limit) when not given
};

// Parses every --quota value. kInvalidArgument: "--quota ana:gpu=2: unknown
// limit \"gpu\" (cpus, gpus or tasks)".
Result<Quotas> ParseQuotas(const std::vector<std::string>& flags);

}  // namespace drover::cli

#endif  // DROVER_CLI_QUOTA_FLAGS_H_
