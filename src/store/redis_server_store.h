// RedisServerStore: the RedisStore as `drover server --redis` runs on it. A
// Store decorator that opens the RedisStore before the server's loop runs,
// so the server's synchronous startup (subscribe, recover, list leases)
// works unchanged; keeps workers' liveness keys; elects a leader among
// servers sharing one Redis; and reconciles the leases the server holds
// with those in Redis, both ways. What each does, seen from outside:
// docs/redis.md ("What happens when…", "Several servers", "Fencing"); the
// lease rules it serves: docs/design.md section 4.
//
// What its users see:
// - A lease is "held" from the Claim that took it until its Release, and
//   stays so while the server keeps renewing it (touched within its TTL).
//   The listener gets the `expired` of a held lease (the lease ran out: the
//   task must stop), never a `del` the server did not cause (someone ran
//   DEL, or a reconciler elsewhere): that one is repaired at once by the
//   reconciler's re-claim. A held lease found to be someone else's reaches
//   the listener as FreeEvent{key, kExpired}. Only `lease:...` keys are
//   reconciled, never liveness keys nor the leader key.
// - Claims and releases wait through an outage: one made while Redis is
//   unreachable, or lost in flight with the connection, is sent (again)
//   once reconnected, releases first (both are idempotent), so an outage
//   turns neither into a storm of rejected claims nor into a claim that
//   took effect unseen.
//
// Thread safety: none; the loop's thread, like every Store.
#ifndef DROVER_STORE_REDIS_SERVER_STORE_H_
#define DROVER_STORE_REDIS_SERVER_STORE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/ids.h"
#include "common/status.h"
#include "common/time.h"
#include "net/event_loop.h"
#include "store/redis_store.h"
#include "store/store.h"

namespace drover::store {

// One standby read (RedisServerStoreOptions::on_standby_update).
struct StandbyUpdate {
  // The records are the whole journal (the first read, or a compaction
  // replaced the stream): forget what came before.
  bool reset = false;
  std::vector<std::string> records;  // journal records after the last read, in order
  std::string leader;                // the leader key's owner; empty: none now
  std::string workers;               // the leader's worker_view; empty: none
};

// The Redis key (under the prefix) of the leader's published worker list.
inline constexpr char kWorkerViewKey[] = "view:workers";

struct RedisServerStoreOptions {
  RedisStoreOptions redis;
  // How often the leases are compared with Redis; zero = never (a
  // reconnection still triggers a pass).
  Duration reconcile_interval = Seconds(10);
  // Liveness keys: every liveness_interval, each worker that live_workers
  // names gets `worker:{id}:hb` claimed or extended for liveness_ttl (owner
  // "server"); a worker no longer named is not refreshed and its key
  // expires by itself. No keys without `live_workers`.
  std::function<std::vector<WorkerId>()> live_workers;
  Duration liveness_interval = Seconds(2);
  Duration liveness_ttl = Seconds(6);
  // How long Open waits for Redis (connect and the startup reads).
  Duration open_timeout = Seconds(20);

  // Leader election among servers sharing this Redis and prefix; empty
  // leader_id: none (one server). The server holding the `leader` key
  // (owner leader_id, TTL leader_ttl, renewed every third of it) leads.
  // Open claims it before reading anything; a standby blocks in Open
  // (subscribed first, then claiming, then waiting for the key's
  // `del`/`expired` event or a third of the TTL, and claiming again) until
  // it holds the key, and only then reads the journal. As leader, every
  // lease claim, journal append and compaction checks the leader key in the
  // same atomic step (RedisStore::SetFence). docs/redis.md, "Several
  // servers" and "Fencing".
  std::string leader_id;
  Duration leader_ttl = Seconds(10);
  // Called once, on the loop, when this server finds it is no longer the
  // leader: a fenced call refused, a renewal that finds the key someone
  // else's, a free of the key, or no successful renewal for a whole
  // leader_ttl. It must stop serving (the process steps down).
  std::function<void(const std::string& why)> on_lost_leadership;
  // True when `owner` (the leader key's holder) is this server's own
  // previous run, known to be gone (same address and host, a process that
  // no longer exists: cmd_server.cc). Open then takes the lease over at
  // once instead of waiting a leader TTL for it to expire. Null: never.
  std::function<bool(const std::string& owner)> previous_self;
  // Called once when Open finds another leader and waits as a standby.
  std::function<void(const std::string& leader)> on_standby;
  // Standby reads: while Open waits, every standby_poll, what the leader
  // wrote: the journal entries after the last one read (the whole stream
  // at first, and again after a compaction, seen as a change of the
  // stream's first entry), the leader key's owner and the leader's
  // worker_view. A failed read is handed on as the error; the standby
  // decides how stale it may serve (server/standby_server.h,
  // docs/redis.md "What a standby serves"). Null: the standby reads nothing.
  std::function<void(Result<StandbyUpdate>)> on_standby_update;
  Duration standby_poll = Millis(250);
  // The leader's worker list (JSON) to publish for standbys under
  // kWorkerViewKey, refreshed with the liveness keys and living 3 of their
  // intervals; null: none.
  std::function<std::string()> worker_view;
};

struct ReconcileStats {
  uint64_t passes = 0;
  uint64_t released = 0;   // leases in Redis without a holder here
  uint64_t reclaimed = 0;  // held here, missing from Redis, taken again
  uint64_t conflicts = 0;  // held here, someone else's in Redis: killed
};

class RedisServerStore final : public Store {
 public:
  // Connects, subscribes, reads the journal and the leases, blocking the
  // calling thread by running `loop` until done (at most open_timeout).
  // Must be called before the loop runs (kFailedPrecondition from inside
  // it). Errors: those of RedisStore::Start (unreachable: kUnavailable,
  // wrong password, CONFIG refused with what to put in redis.conf), or
  // kDeadlineExceeded.
  static Result<std::unique_ptr<RedisServerStore>> Open(net::EventLoop& loop,
                                                        RedisServerStoreOptions options);
  ~RedisServerStore() override;

  // Answers at once (the subscription is in place since Open); frees that
  // came before are delivered, posted, after this call.
  void Subscribe(FreeListener listener, DoneCallback subscribed) override;
  void Claim(std::vector<LeaseKey> keys, Owner owner, Duration ttl,
             Callback<ClaimOutcome> done) override;
  void Renew(std::vector<LeaseKey> keys, Owner owner, Duration ttl,
             Callback<RenewOutcome> done) override;
  void Release(std::vector<LeaseKey> keys, Owner owner, Callback<ReleaseOutcome> done) override;
  // The first call answers at once with the leases read by Open; later
  // calls go to Redis.
  void ListLeases(Callback<std::vector<Lease>> done) override;
  // Answers at once with the records read by Open.
  void TakeRecovered(Callback<Recovered> done) override;
  void Append(std::string record, DoneCallback done) override;
  void Flush() override;
  void Compact(std::vector<std::string> snapshot, DoneCallback done) override;
  uint64_t LogBytes() const override;

  // Runs one reconciliation pass now; `done` (optional) once its repairs
  // were sent.
  void Reconcile(std::function<void()> done = nullptr);

  const ReconcileStats& stats() const { return stats_; }
  RedisStore& redis() { return *redis_; }

 private:
  struct Held {
    Owner owner;
    Duration ttl;
    Time touched;  // last claim or renew sent
    bool pending;  // the claim has not been answered
    Time claimed;  // when the claim that took it was sent
  };

  struct PendingClaim {
    std::vector<LeaseKey> keys;
    Owner owner;
    Duration ttl;
    Time sent;
    Callback<ClaimOutcome> done;
  };

  RedisServerStore(net::EventLoop& loop, RedisServerStoreOptions options,
                   std::unique_ptr<RedisStore> redis);
  bool Live(const Held& held, Time now) const {
    return !held.pending && held.touched + held.ttl > now;
  }
  struct PendingRelease {
    std::vector<LeaseKey> keys;
    Owner owner;
    Callback<ReleaseOutcome> done;
  };
  void SendClaim(std::shared_ptr<PendingClaim> claim);
  void SendRelease(std::shared_ptr<PendingRelease> release);
  void SendDeferredClaims();
  void OnFree(const FreeEvent& free);
  void Deliver(const FreeEvent& free);
  // Claims `keys` again for `owner`; on a conflict the task is told its
  // lease is gone (kExpired).
  void Repair(std::vector<LeaseKey> keys, Owner owner);
  void RefreshLiveness();
  // Blocks (running the loop) until this server holds the leader key.
  Status AcquireLeadership();
  void ArmLeaderRenewal();
  void RenewLeader();
  void LostLeadership(const std::string& why);
  // Notes a store answer that says we are not the leader.
  void CheckFenced(const Status& s);
  void ArmReconcile();
  void ArmLiveness();
  // Standby reads: one poll, and the timer that repeats it.
  void PollAsStandby();
  void ArmStandbyPoll(Duration after);

  net::EventLoop& loop_;
  RedisServerStoreOptions options_;
  std::unique_ptr<RedisStore> redis_;
  Clock& clock_;  // options.redis.clock, or the system clock
  std::map<LeaseKey, Held> held_;
  // Keys released while renewals were in flight, with release_seq_ at their
  // release: a renewal sent before a release must not put the key back in
  // held_ when its answer comes after (the key's "del" event would then look
  // like someone else's delete and be repaired, re-creating the lease).
  uint64_t release_seq_ = 0;
  uint32_t renews_in_flight_ = 0;
  std::map<LeaseKey, uint64_t> released_;
  // When this server last released each key: the `del` event of that
  // release can come after a new claim of the same key (a GPU handed from
  // one task to the next), and must not pass for someone else's delete.
  // Entries older than kOwnReleaseMemory are dropped by Reconcile.
  struct OwnRelease {
    Time last;          // the latest release sent
    uint32_t unseen;    // releases whose `del` has not come yet
    Owner owner;        // who released it last, for its FreeEvent
  };
  std::map<LeaseKey, OwnRelease> own_releases_;
  FreeListener listener_;
  std::deque<FreeEvent> early_frees_;                               // before Subscribe
  std::vector<std::shared_ptr<PendingClaim>> deferred_claims_;      // until reconnected
  std::vector<std::shared_ptr<PendingRelease>> deferred_releases_;  // sent first
  std::optional<Recovered> recovered_;
  std::optional<std::vector<Lease>> initial_leases_;
  bool reconciling_ = false;
  ReconcileStats stats_;
  net::Timer reconcile_timer_;
  net::Timer liveness_timer_;
  net::Timer leader_timer_;
  bool leader_ = false;
  bool lost_leadership_ = false;
  Time leader_renewed_;
  std::function<void(bool)> leader_waiter_;  // Open waiting for a free of `leader`
  net::Timer standby_timer_;
  std::string follow_last_id_;   // the last journal entry read; empty: none yet
  std::string follow_first_id_;  // the stream's first entry when it was read
  bool follow_reset_ = true;     // the next update starts from scratch
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace drover::store

#endif  // DROVER_STORE_REDIS_SERVER_STORE_H_
