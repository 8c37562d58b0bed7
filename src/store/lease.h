// Lease value types shared by every Store: keys, owners, leases, outcomes.
//
// A lease is a key that exists while someone holds it, with an owner and a
// time-to-live (DESIGN.md section 4). The store knows nothing of the core's
// types: the server shell maps its resources to LeaseKeys (with the helpers
// below) and its tasks / server identity to Owner strings.
//
// Thread safety: plain values.
#ifndef DROVER_STORE_LEASE_H_
#define DROVER_STORE_LEASE_H_

#include <optional>
#include <string>
#include <vector>

#include "common/ids.h"
#include "common/time.h"

namespace drover::store {

// A lease key without the deployment prefix, e.g. "lease:3:gpu:0". The
// RedisStore puts its configured prefix ("drover:") in front.
using LeaseKey = std::string;
// Who holds a lease, e.g. "task:12.3@server-a" or "worker:3". Never empty.
using Owner = std::string;

// The key names of DESIGN.md section 4.
LeaseKey GpuLeaseKey(WorkerId worker, int gpu_index);        // lease:{worker}:gpu:{index}
LeaseKey SlotLeaseKey(WorkerId worker, const TaskId& task);  // lease:{worker}:slot:{task}
LeaseKey HeartbeatKey(WorkerId worker);                      // worker:{id}:hb
inline constexpr char kLeaderKey[] = "leader";

struct Lease {
  LeaseKey key;
  Owner owner;
  Time expires_at;
  Duration ttl;  // as last claimed or renewed
  friend bool operator==(const Lease&, const Lease&) = default;
};

// Why a lease stopped existing.
enum class FreeReason { kReleased, kExpired };
const char* FreeReasonName(FreeReason reason);  // "released" / "expired"

// Delivered to the free listener once per lease that ends. `owner`: who
// held it; empty where the store cannot know (a notification of a key it
// does not hold itself, as the bare Redis connection sees them).
struct FreeEvent {
  LeaseKey key;
  FreeReason reason;
  Owner owner;
  friend bool operator==(const FreeEvent&, const FreeEvent&) = default;
};

// The outcome of an all-or-nothing claim.
struct ClaimOutcome {
  bool claimed = false;
  // When claimed: when the leases expire unless renewed.
  Time expires_at;
  // When not claimed: one key that is held by someone else, and its holder.
  LeaseKey conflict_key;
  Owner conflict_owner;
};

// The outcome of a renew: keys the owner no longer holds (expired, released
// or taken by someone else). Every other key was renewed.
struct RenewOutcome {
  std::vector<LeaseKey> lost;
  Time expires_at;  // of the renewed keys
};

// The outcome of a compare-and-release: keys that were not deleted because
// the caller did not hold them (free already, or held by another owner).
struct ReleaseOutcome {
  std::vector<LeaseKey> not_held;
};

}  // namespace drover::store

#endif  // DROVER_STORE_LEASE_H_
