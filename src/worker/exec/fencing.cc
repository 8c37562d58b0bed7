#include "worker/exec/fencing.h"

#include "common/quantity.h"

namespace drover::worker {

Result<FencingPolicy> FencingPolicy::Create(Duration lease_ttl, Duration heartbeat, Time start) {
  if (heartbeat <= Duration(0)) return InvalidArgument("heartbeat interval must be positive");
  if (lease_ttl <= 2 * heartbeat) {
    return InvalidArgument("lease TTL " + FormatDuration(lease_ttl) +
                           " must exceed two heartbeat intervals (" +
                           FormatDuration(2 * heartbeat) + ")");
  }
  return FencingPolicy(lease_ttl - 2 * heartbeat, start);
}

void FencingPolicy::OnServerContact(Time now) {
  if (now > last_contact_) last_contact_ = now;
}

}  // namespace drover::worker
