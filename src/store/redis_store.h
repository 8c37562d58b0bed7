// RedisStore: the Store kept in Redis, for one or several servers sharing a
// pool (DESIGN.md sections 4 and 6): leases are Redis keys with a PX expiry,
// changed only by Lua scripts; frees arrive as keyspace notifications; the
// record log is a Redis stream (redis_journal.h). Key names: redis_keys.h.
//
//   auto store = RedisStore::Create(loop, {.url = "redis://10.0.0.5:6379/0"});
//   (*store)->Start([](Status s) { ... });   // then use it as any Store
//   loop.Run();
//
// I/O: two hiredis asynchronous connections on the net::EventLoop
// (redis_connection.h): one for commands, one subscribed to
// `__keyevent@<db>__:del` and `:expired`. No Redis call blocks the loop,
// except that hiredis resolves a host name (not an address) with a blocking
// lookup when it connects.
//
// Start: connects both, AUTHs, SELECTs the database, makes sure
// `notify-keyspace-events` includes E, g and x (reading it with CONFIG GET
// and adding what is missing with CONFIG SET), and loads the Lua scripts.
// Where CONFIG is refused, Start fails with kFailedPrecondition saying what
// to put in redis.conf. A server that cannot be reached: kUnavailable; a
// refused password: kUnauthenticated. Calls before Start succeeded fail with
// kUnavailable.
//
// Leases: see redis_scripts.h for the scripts and redis_leases.h for the
// expiry times reported (the caller's clock when the call was sent, plus the
// TTL or Redis's PTTL — never later than Redis's own deadline). A lease ends
// in Redis by itself; its free event (kExpired) comes when Redis expires the
// key, which is within about 100 ms of its deadline when nobody touches it.
// The listener sees frees of this prefix's leases only.
//
// Subscribe(listener, subscribed): `subscribed` runs once Redis has
// confirmed the SUBSCRIBE (pub/sub keeps nothing for late subscribers, hence
// DESIGN.md's order: subscribe, then claim, then retry on each free).
//
// Outages: when a connection drops, every call in flight completes with
// kUnavailable (a claim, renew or release may or may not have taken
// effect), calls fail with kUnavailable at once while it is down, and the
// store reconnects with exponential backoff (net::Backoff), redoing Start's
// steps and the subscription. Free events of the outage are lost for good:
// the callback given to SetOnReconnected runs once the store works again,
// and the server must then reconcile (ListLeases) rather than wait for them.
// Appends are the exception: they wait through an outage and are sent (or
// sent again, idempotently) once reconnected, so their callbacks run only
// when the record is stored (see redis_journal.h).
//
// Destruction: calls in flight complete with kUnavailable from inside the
// destructor (their callbacks must not use the store any more). Destroy the
// store before its EventLoop.
//
// Thread safety: none; the EventLoop's thread owns the store and runs every
// callback. Create() and Start() may be called before the loop runs.
#ifndef DROVER_STORE_REDIS_STORE_H_
#define DROVER_STORE_REDIS_STORE_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/time.h"
#include "net/backoff.h"
#include "net/event_loop.h"
#include "store/redis_journal.h"
#include "store/redis_keys.h"
#include "store/redis_url.h"
#include "store/store.h"

namespace drover::store {

class RedisConnection;

struct RedisStoreOptions {
  std::string url = "redis://127.0.0.1:6379/0";  // see redis_url.h
  std::string prefix = kDefaultRedisPrefix;     // of every key (redis_keys.h)
  // Reconnection delays after a drop.
  net::BackoffOptions reconnect{Millis(100), Seconds(10), 2.0, 0.5};
  // An attempt to connect (connect + setup) that takes longer fails.
  Duration connect_timeout = Seconds(5);
  // Reads "now" for expiry times; null: the system clock. Must outlive the
  // store.
  Clock* clock = nullptr;
};

class RedisStore final : public Store {
 public:
  // Checks the options (kInvalidArgument for a bad URL or an empty prefix);
  // does no I/O. `loop` must outlive the store.
  static Result<std::unique_ptr<RedisStore>> Create(net::EventLoop& loop,
                                                    RedisStoreOptions options);
  ~RedisStore() override;

  // Connects (see the top of this file); `started` runs once, on the loop.
  // A failed start leaves the store stopped; Start may be called again. A
  // second Start while started or starting fails with kFailedPrecondition.
  void Start(DoneCallback started);

  // `fn` runs each time the store works again after a drop; see Outages.
  void SetOnReconnected(std::function<void()> fn) { on_reconnected_ = std::move(fn); }

  // Fencing for a leader (redis_server_store.h): from now on every Claim and
  // every journal append checks, in the same atomic step, that the leader
  // key is held by `leader`; when it is not, they fail with
  // kFailedPrecondition ("not the leader") and change nothing.
  void SetFence(std::string leader);

  // Hands lease `key` from owner `from` to owner `to` for `ttl`, in one
  // atomic step (the leader key of a server's own previous run:
  // redis_server_store.h). true: done; false: `from` does not hold it (nothing
  // changed). kUnavailable while not connected.
  void TakeOver(const LeaseKey& key, Owner from, Owner to, Duration ttl, Callback<bool> done);

  // True while calls reach Redis (started and not in an outage).
  bool connected() const { return state_ == State::kReady; }

  const RedisKeys& keys() const { return keys_; }

  // Sends one plain command (full key names: keys().prefix() + ...) on the
  // command connection; kUnavailable at once while not connected. For
  // reads beside the Store interface (a standby following the journal).
  void Command(const std::vector<std::string>& argv,
               std::function<void(Result<RedisReply>)> done);

  void Subscribe(FreeListener listener, DoneCallback subscribed) override;
  void Claim(std::vector<LeaseKey> keys, Owner owner, Duration ttl,
             Callback<ClaimOutcome> done) override;
  void Renew(std::vector<LeaseKey> keys, Owner owner, Duration ttl,
             Callback<RenewOutcome> done) override;
  void Release(std::vector<LeaseKey> keys, Owner owner, Callback<ReleaseOutcome> done) override;
  void ListLeases(Callback<std::vector<Lease>> done) override;

  void TakeRecovered(Callback<Recovered> done) override;
  void Append(std::string record, DoneCallback done) override;
  void Flush() override;
  void Compact(std::vector<std::string> snapshot, DoneCallback done) override;
  uint64_t LogBytes() const override;

 private:
  enum class State { kStopped, kConnecting, kReady, kBackoff };
  struct ListState;

  RedisStore(net::EventLoop& loop, RedisStoreOptions options, RedisUrl url);

  Status NotConnected() const;
  RedisConnection* ReadyConnection() { return state_ == State::kReady ? cmd_.get() : nullptr; }

  // Connection lifecycle.
  void Connect();
  void SetUpCommands(uint64_t attempt);
  void CheckNotifications(uint64_t attempt);
  void LoadScripts(uint64_t attempt);
  void SetUpSubscriber(uint64_t attempt);
  void SendSubscribe();
  void OnPush(const RedisReply& push);
  void MaybeReady(uint64_t attempt);
  void AttemptFailed(uint64_t attempt, Status why);
  void OnLost(uint64_t attempt, Status why);
  void TearDown(const Status& why);
  void ScheduleReconnect();

  void ListPage(std::shared_ptr<ListState> list);

  net::EventLoop& loop_;
  RedisStoreOptions options_;
  RedisUrl url_;
  RedisKeys keys_;
  Clock& clock_;
  net::Backoff backoff_;
  net::Timer timer_;  // the connect timeout, or the reconnect delay
  RedisJournal journal_;

  State state_ = State::kStopped;
  bool started_once_ = false;
  uint64_t attempt_ = 0;  // ids the current connection attempt's callbacks
  DoneCallback started_;
  std::function<void()> on_reconnected_;
  std::unique_ptr<RedisConnection> cmd_;
  std::unique_ptr<RedisConnection> sub_;
  bool cmd_set_up_ = false;
  bool sub_authed_ = false;
  bool subscribe_sent_ = false;
  int subscribe_confirmations_ = 0;  // of the current connection; 2 = both channels

  FreeListener listener_;
  std::vector<DoneCallback> subscribe_waiters_;
  std::string fence_;  // the leader whose lease claims need; empty: none
};

}  // namespace drover::store

#endif  // DROVER_STORE_REDIS_STORE_H_
