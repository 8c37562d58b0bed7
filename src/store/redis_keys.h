// RedisKeys: how a RedisStore names its Redis keys and notification
// channels (DESIGN.md section 4).
//
// Every key lives under one prefix (default "drover:"), so several Drover
// deployments can share a Redis database:
//   <prefix><lease key>    a lease: a hash {owner, ttl} with a PX expiry,
//                          e.g. drover:lease:3:gpu:0, drover:worker:3:hb
//   <prefix>journal        the record log (a stream)
// "journal" is therefore reserved and refused as a lease key.
//
// Thread safety: immutable after construction.
#ifndef DROVER_STORE_REDIS_KEYS_H_
#define DROVER_STORE_REDIS_KEYS_H_

#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "store/lease.h"

namespace drover::store {

inline constexpr char kDefaultRedisPrefix[] = "drover:";

class RedisKeys {
 public:
  RedisKeys(std::string prefix, int db);

  const std::string& prefix() const { return prefix_; }

  // The Redis key of a lease.
  std::string Lease(const LeaseKey& key) const { return prefix_ + key; }
  // The record log's stream.
  const std::string& journal() const { return journal_; }

  // A SCAN MATCH pattern for every key under the prefix (glob characters of
  // the prefix escaped).
  std::string ScanPattern() const;

  // The keyevent channels of this database: "__keyevent@<db>__:del" and
  // "__keyevent@<db>__:expired".
  std::string DelChannel() const;
  std::string ExpiredChannel() const;

  // The lease a notified Redis key stands for; nullopt when the key is not
  // under the prefix or is not a lease (the journal).
  std::optional<LeaseKey> LeaseOf(std::string_view redis_key) const;

  // kInvalidArgument for an empty key or a reserved name.
  static Status CheckLeaseKey(const LeaseKey& key);

 private:
  std::string prefix_;
  int db_;
  std::string journal_;
};

}  // namespace drover::store

#endif  // DROVER_STORE_REDIS_KEYS_H_
