// The lease requests of a RedisStore, apart from any I/O: checking and
// normalising a request, and reading the lease scripts' replies
// (redis_scripts.h) back into the Store's outcomes.
//
// Expiry times: Redis keeps the real deadline (PX / PTTL, on its clock); the
// outcomes here report `now` (the store's clock when the reply arrived) plus
// the TTL or the PTTL Redis answered, which is at most a round trip later
// than Redis's own deadline as the store's clock sees it.
//
// Thread safety: pure functions.
#ifndef DROVER_STORE_REDIS_LEASES_H_
#define DROVER_STORE_REDIS_LEASES_H_

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/time.h"
#include "store/lease.h"
#include "store/redis_connection.h"
#include "store/redis_keys.h"

namespace drover::store {

// Checks a request as every Store does (non-empty keys and owner, positive
// TTL, no reserved key) and drops repeated keys, keeping the first
// occurrence's position. kInvalidArgument otherwise.
Result<std::vector<LeaseKey>> NormaliseLeaseRequest(std::vector<LeaseKey> keys,
                                                    const Owner& owner,
                                                    std::optional<Duration> ttl);

// The TTL as whole milliseconds for PX, rounded up (at least 1).
std::string TtlMillisArg(Duration ttl);

// The claim script's reply. kInternal when it has an unexpected shape.
Result<ClaimOutcome> ParseClaimReply(const RedisReply& reply, const std::vector<LeaseKey>& keys,
                                     Time now, Duration ttl);

// The renew and release scripts' replies: the 1-based indices into `keys`
// of those not renewed / not released, as keys.
Result<std::vector<LeaseKey>> ParseKeyIndexReply(const RedisReply& reply,
                                                 const std::vector<LeaseKey>& keys,
                                                 std::string_view what);

// One page of the list script: the cursor to continue from ("0" when done)
// and the leases on this page.
struct LeasePage {
  std::string next_cursor;
  std::vector<Lease> leases;
};
Result<LeasePage> ParseListReply(const RedisReply& reply, const RedisKeys& keys, Time now);

}  // namespace drover::store

#endif  // DROVER_STORE_REDIS_LEASES_H_
