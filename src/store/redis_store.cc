#include "store/redis_store.h"

#include <algorithm>
#include <random>
#include <utility>

#include "store/redis_connection.h"
#include "store/redis_leases.h"
#include "store/redis_scripts.h"

namespace drover::store {
namespace {

constexpr char kNotifyHelp[] =
    "notify-keyspace-events must include E, g and x: add 'notify-keyspace-events Egx' to "
    "redis.conf";
constexpr char kListPageSize[] = "500";

std::function<double()> JitterSource() {
  auto gen = std::make_shared<std::mt19937_64>(std::random_device{}());
  return [gen] { return std::uniform_real_distribution<double>(0.0, 1.0)(*gen); };
}

// The flags to add to `current` so that it includes E, g and x ('A' stands
// for every class, g and x included).
std::string MissingNotifyFlags(const std::string& current) {
  auto has = [&current](char c) { return current.find(c) != std::string::npos; };
  std::string missing;
  if (!has('E')) missing += 'E';
  if (!has('g') && !has('A')) missing += 'g';
  if (!has('x') && !has('A')) missing += 'x';
  return missing;
}

}  // namespace

// A ListLeases in progress: pages of SCAN until the cursor comes back to 0.
struct RedisStore::ListState {
  std::string cursor = "0";
  Time sent;
  std::vector<Lease> leases;
  Callback<std::vector<Lease>> done;
};

Result<std::unique_ptr<RedisStore>> RedisStore::Create(net::EventLoop& loop,
                                                       RedisStoreOptions options) {
  ASSIGN_OR_RETURN(RedisUrl url, ParseRedisUrl(options.url));
  if (options.prefix.empty()) {
    return InvalidArgument("redis key prefix must not be empty (the default is \"drover:\")");
  }
  if (options.connect_timeout <= Duration::zero()) {
    return InvalidArgument("redis connect timeout must be positive");
  }
  return std::unique_ptr<RedisStore>(new RedisStore(loop, std::move(options), std::move(url)));
}

RedisStore::RedisStore(net::EventLoop& loop, RedisStoreOptions options, RedisUrl url)
    : loop_(loop),
      options_(std::move(options)),
      url_(std::move(url)),
      keys_(options_.prefix, url_.db),
      clock_(options_.clock ? *options_.clock : SystemClock()),
      backoff_(options_.reconnect, JitterSource()),
      timer_(loop),
      journal_(keys_.journal()) {}

RedisStore::~RedisStore() {
  state_ = State::kStopped;
  timer_.Cancel();
  TearDown(Unavailable("the redis store was destroyed"));
  journal_.FailAll(Unavailable("the redis store was destroyed"));
  if (started_) std::exchange(started_, nullptr)(Unavailable("the redis store was destroyed"));
}

Status RedisStore::NotConnected() const {
  return Unavailable("redis at " + url_.Endpoint() + " is not connected" +
                     (state_ == State::kStopped ? " (store not started)" : ""));
}

// ---- Connection lifecycle ----

void RedisStore::Start(DoneCallback started) {
  if (state_ != State::kStopped) {
    return started(FailedPrecondition("the redis store is already started"));
  }
  started_ = std::move(started);
  Connect();
}

void RedisStore::Connect() {
  state_ = State::kConnecting;
  const uint64_t attempt = ++attempt_;
  cmd_set_up_ = false;
  sub_authed_ = false;
  subscribe_sent_ = false;
  subscribe_confirmations_ = 0;
  timer_.ArmAfter(options_.connect_timeout, [this, attempt] {
    AttemptFailed(attempt, Unavailable("redis at " + url_.Endpoint() + ": no connection within " +
                                       std::to_string(options_.connect_timeout.count() / 1000) +
                                       " ms"));
  });
  auto connected = [this, attempt](Status s) {
    if (!s.ok()) AttemptFailed(attempt, s);
  };
  auto lost = [this, attempt](Status s) { OnLost(attempt, s); };
  cmd_ = RedisConnection::Connect(loop_, url_.host, url_.port, connected, lost);
  sub_ = RedisConnection::Connect(loop_, url_.host, url_.port, connected, lost);
  // hiredis sends these once the connection is up.
  SetUpCommands(attempt);
  SetUpSubscriber(attempt);
}

namespace {

std::vector<std::string> AuthCommand(const RedisUrl& url) {
  if (url.user.empty()) return {"AUTH", url.password};
  return {"AUTH", url.user, url.password};
}

}  // namespace

void RedisStore::SetUpCommands(uint64_t attempt) {
  if (!url_.password.empty()) {
    cmd_->Command(AuthCommand(url_), [this, attempt](Result<RedisReply> r) {
      if (attempt != attempt_) return;
      if (!r.ok()) return AttemptFailed(attempt, r.status());
      if (r->is_error()) {
        AttemptFailed(attempt, Status(StatusCode::kUnauthenticated,
                                      "redis at " + url_.Endpoint() + " refused AUTH: " + r->str));
      }
    });
  }
  cmd_->Command({"SELECT", std::to_string(url_.db)}, [this, attempt](Result<RedisReply> r) {
    if (attempt != attempt_) return;
    if (!r.ok()) return AttemptFailed(attempt, r.status());
    if (r->is_error()) {
      return AttemptFailed(attempt, FailedPrecondition("redis at " + url_.Endpoint() +
                                                       " refused SELECT " +
                                                       std::to_string(url_.db) + ": " + r->str));
    }
    CheckNotifications(attempt);
  });
}

void RedisStore::CheckNotifications(uint64_t attempt) {
  auto refused = [this](const std::string& what) {
    return FailedPrecondition("redis at " + url_.Endpoint() + " refused " + what + ": " +
                              kNotifyHelp);
  };
  cmd_->Command({"CONFIG", "GET", "notify-keyspace-events"}, [this, attempt, refused](
                                                                 Result<RedisReply> r) {
    if (attempt != attempt_) return;
    if (!r.ok()) return AttemptFailed(attempt, r.status());
    if (r->is_error()) return AttemptFailed(attempt, refused("CONFIG GET (" + r->str + ")"));
    if (r->type != RedisReply::Type::kArray || r->elements.size() != 2) {
      return AttemptFailed(attempt, refused("CONFIG GET (no notify-keyspace-events setting)"));
    }
    const std::string current = r->elements[1].str;
    const std::string missing = MissingNotifyFlags(current);
    if (missing.empty()) return LoadScripts(attempt);
    cmd_->Command({"CONFIG", "SET", "notify-keyspace-events", current + missing},
                  [this, attempt, refused](Result<RedisReply> set) {
                    if (attempt != attempt_) return;
                    if (!set.ok()) return AttemptFailed(attempt, set.status());
                    if (set->is_error()) {
                      return AttemptFailed(attempt, refused("CONFIG SET (" + set->str + ")"));
                    }
                    LoadScripts(attempt);
                  });
  });
}

void RedisStore::LoadScripts(uint64_t attempt) {
  auto scripts = AllScripts();
  auto remaining = std::make_shared<size_t>(scripts.size());
  for (const RedisScript* script : scripts) {
    cmd_->Command({"SCRIPT", "LOAD", script->body}, [this, attempt, remaining, script](
                                                        Result<RedisReply> r) {
      if (attempt != attempt_) return;
      if (!r.ok()) return AttemptFailed(attempt, r.status());
      if (r->is_error() || r->str != script->sha1) {
        return AttemptFailed(attempt,
                             Internal("redis at " + url_.Endpoint() + " did not load the " +
                                      script->name + " script: " + r->str));
      }
      if (--*remaining == 0) {
        cmd_set_up_ = true;
        MaybeReady(attempt);
      }
    });
  }
}

void RedisStore::SetUpSubscriber(uint64_t attempt) {
  auto authed = [this, attempt] {
    sub_authed_ = true;
    if (listener_) SendSubscribe();
    MaybeReady(attempt);
  };
  if (url_.password.empty()) {
    // Nothing to wait for: a subscriber needs no SELECT (channels name the db).
    return authed();
  }
  sub_->Command(AuthCommand(url_), [this, attempt, authed](Result<RedisReply> r) {
    if (attempt != attempt_) return;
    if (!r.ok()) return AttemptFailed(attempt, r.status());
    if (r->is_error()) {
      return AttemptFailed(attempt, Status(StatusCode::kUnauthenticated,
                                           "redis at " + url_.Endpoint() +
                                               " refused AUTH: " + r->str));
    }
    authed();
  });
}

void RedisStore::SendSubscribe() {
  if (subscribe_sent_ || !sub_authed_ || !sub_) return;
  subscribe_sent_ = true;
  sub_->Subscribe({keys_.DelChannel(), keys_.ExpiredChannel()},
                  [this](const RedisReply& push) { OnPush(push); });
}

void RedisStore::OnPush(const RedisReply& push) {
  if (push.type != RedisReply::Type::kArray || push.elements.size() != 3) return;
  const std::string& kind = push.elements[0].str;
  const std::string& channel = push.elements[1].str;
  if (kind == "subscribe") {
    if (++subscribe_confirmations_ < 2) return;
    if (state_ == State::kConnecting) return MaybeReady(attempt_);
    for (auto& waiter : std::exchange(subscribe_waiters_, {})) waiter(Status::Ok());
    return;
  }
  if (kind != "message" || !listener_) return;
  auto key = keys_.LeaseOf(push.elements[2].str);
  if (!key) return;
  FreeReason reason =
      channel == keys_.DelChannel() ? FreeReason::kReleased : FreeReason::kExpired;
  // Copied: the listener may replace itself.
  FreeListener listener = listener_;
  listener(FreeEvent{std::move(*key), reason, Owner()});  // the holder is not in the event
}

void RedisStore::MaybeReady(uint64_t attempt) {
  if (attempt != attempt_ || state_ != State::kConnecting) return;
  if (!cmd_set_up_ || !sub_authed_) return;
  if (listener_ && subscribe_confirmations_ < 2) return;
  timer_.Cancel();
  state_ = State::kReady;
  backoff_.Reset();
  for (auto& waiter : std::exchange(subscribe_waiters_, {})) waiter(Status::Ok());
  // Records appended during an outage, or lost in flight with it.
  journal_.Flush(cmd_.get());
  if (!started_once_) {
    started_once_ = true;
    if (started_) std::exchange(started_, nullptr)(Status::Ok());
  } else if (on_reconnected_) {
    on_reconnected_();
  }
}

void RedisStore::AttemptFailed(uint64_t attempt, Status why) {
  if (attempt != attempt_ || state_ != State::kConnecting) return;
  timer_.Cancel();
  TearDown(why);
  if (!started_once_) {
    state_ = State::kStopped;
    if (started_) std::exchange(started_, nullptr)(std::move(why));
    return;
  }
  ScheduleReconnect();
}

void RedisStore::OnLost(uint64_t attempt, Status why) {
  if (attempt != attempt_) return;
  if (state_ == State::kConnecting) return AttemptFailed(attempt, std::move(why));
  if (state_ != State::kReady) return;
  TearDown(why);
  ScheduleReconnect();
}

void RedisStore::TearDown(const Status& why) {
  // Stale callbacks of this attempt (they run while the connections close)
  // must see that it is over.
  ++attempt_;
  if (state_ == State::kReady) state_ = State::kBackoff;
  auto cmd = std::move(cmd_);
  auto sub = std::move(sub_);
  for (auto& waiter : std::exchange(subscribe_waiters_, {})) waiter(why);
  // Destroying them completes what was in flight with kUnavailable.
  cmd.reset();
  sub.reset();
}

void RedisStore::Command(const std::vector<std::string>& argv,
                         std::function<void(Result<RedisReply>)> done) {
  RedisConnection* conn = ReadyConnection();
  if (conn == nullptr) return done(NotConnected());
  conn->Command(argv, std::move(done));
}

void RedisStore::ScheduleReconnect() {
  state_ = State::kBackoff;
  timer_.ArmAfter(backoff_.Next(), [this] { Connect(); });
}

// ---- Leases ----

void RedisStore::SetFence(std::string leader) {
  journal_.SetFence(keys_.Lease(kLeaderKey), leader);
  fence_ = std::move(leader);
}

void RedisStore::Subscribe(FreeListener listener, DoneCallback subscribed) {
  listener_ = std::move(listener);
  switch (state_) {
    case State::kStopped:
    case State::kBackoff:
      return subscribed(NotConnected());
    case State::kConnecting:
      subscribe_waiters_.push_back(std::move(subscribed));
      SendSubscribe();
      return;
    case State::kReady:
      if (subscribe_confirmations_ >= 2) return subscribed(Status::Ok());
      subscribe_waiters_.push_back(std::move(subscribed));
      SendSubscribe();
      return;
  }
}

void RedisStore::Claim(std::vector<LeaseKey> keys, Owner owner, Duration ttl,
                       Callback<ClaimOutcome> done) {
  auto normalised = NormaliseLeaseRequest(std::move(keys), owner, ttl);
  if (!normalised.ok()) return done(normalised.status());
  RedisConnection* conn = ReadyConnection();
  if (conn == nullptr) return done(NotConnected());
  std::vector<std::string> redis_keys;
  std::vector<std::string> args = {owner, TtlMillisArg(ttl)};
  if (!fence_.empty()) {
    redis_keys.push_back(keys_.Lease(kLeaderKey));
    args.push_back(fence_);
  }
  for (const auto& key : *normalised) redis_keys.push_back(keys_.Lease(key));
  const Time sent = clock_.Now();
  RunScript(*conn, fence_.empty() ? ClaimScript() : ClaimFencedScript(), redis_keys, args,
            [keys = std::move(*normalised), sent, ttl, done = std::move(done)](
                Result<RedisReply> r) {
              if (!r.ok()) return done(r.status());
              if (r->is_error() && r->str.starts_with("NOTLEADER")) {
                return done(FailedPrecondition("not the leader: claim refused (" + r->str + ")"));
              }
              done(ParseClaimReply(*r, keys, sent, ttl));
            });
}

void RedisStore::TakeOver(const LeaseKey& key, Owner from, Owner to, Duration ttl,
                          Callback<bool> done) {
  RedisConnection* conn = ReadyConnection();
  if (conn == nullptr) return done(NotConnected());
  RunScript(*conn, TakeOverScript(), {keys_.Lease(key)}, {from, to, TtlMillisArg(ttl)},
            [done = std::move(done)](Result<RedisReply> r) {
              if (!r.ok()) return done(r.status());
              if (r->is_error()) return done(Internal("take_over: " + r->str));
              done(r->integer == 1);
            });
}

void RedisStore::Renew(std::vector<LeaseKey> keys, Owner owner, Duration ttl,
                       Callback<RenewOutcome> done) {
  auto normalised = NormaliseLeaseRequest(std::move(keys), owner, ttl);
  if (!normalised.ok()) return done(normalised.status());
  RedisConnection* conn = ReadyConnection();
  if (conn == nullptr) return done(NotConnected());
  std::vector<std::string> redis_keys;
  for (const auto& key : *normalised) redis_keys.push_back(keys_.Lease(key));
  const Time sent = clock_.Now();
  RunScript(*conn, RenewScript(), redis_keys, {owner, TtlMillisArg(ttl)},
            [keys = std::move(*normalised), sent, ttl, done = std::move(done)](
                Result<RedisReply> r) {
              if (!r.ok()) return done(r.status());
              auto lost = ParseKeyIndexReply(*r, keys, "renew");
              if (!lost.ok()) return done(lost.status());
              done(RenewOutcome{std::move(*lost), sent + ttl});
            });
}

void RedisStore::Release(std::vector<LeaseKey> keys, Owner owner, Callback<ReleaseOutcome> done) {
  auto normalised = NormaliseLeaseRequest(std::move(keys), owner, std::nullopt);
  if (!normalised.ok()) return done(normalised.status());
  RedisConnection* conn = ReadyConnection();
  if (conn == nullptr) return done(NotConnected());
  std::vector<std::string> redis_keys;
  for (const auto& key : *normalised) redis_keys.push_back(keys_.Lease(key));
  RunScript(*conn, ReleaseScript(), redis_keys, {owner},
            [keys = std::move(*normalised), done = std::move(done)](Result<RedisReply> r) {
              if (!r.ok()) return done(r.status());
              auto not_held = ParseKeyIndexReply(*r, keys, "release");
              if (!not_held.ok()) return done(not_held.status());
              done(ReleaseOutcome{std::move(*not_held)});
            });
}

void RedisStore::ListLeases(Callback<std::vector<Lease>> done) {
  if (ReadyConnection() == nullptr) return done(NotConnected());
  auto list = std::make_shared<ListState>();
  list->sent = clock_.Now();
  list->done = std::move(done);
  ListPage(std::move(list));
}

void RedisStore::ListPage(std::shared_ptr<ListState> list) {
  RedisConnection* conn = ReadyConnection();
  if (conn == nullptr) return list->done(NotConnected());
  RunScript(*conn, ListScript(), {}, {list->cursor, keys_.ScanPattern(), kListPageSize},
            [this, list](Result<RedisReply> r) {
              if (!r.ok()) return list->done(r.status());
              auto page = ParseListReply(*r, keys_, list->sent);
              if (!page.ok()) return list->done(page.status());
              for (auto& lease : page->leases) list->leases.push_back(std::move(lease));
              list->cursor = page->next_cursor;
              if (list->cursor != "0") return ListPage(list);
              auto& leases = list->leases;
              std::sort(leases.begin(), leases.end(),
                        [](const Lease& a, const Lease& b) { return a.key < b.key; });
              // SCAN may return a key twice.
              leases.erase(std::unique(leases.begin(), leases.end(),
                                       [](const Lease& a, const Lease& b) { return a.key == b.key; }),
                           leases.end());
              list->done(std::move(leases));
            });
}

// ---- Record log ----

void RedisStore::TakeRecovered(Callback<Recovered> done) {
  journal_.TakeRecovered(ReadyConnection(), std::move(done));
}

void RedisStore::Append(std::string record, DoneCallback done) {
  journal_.Append(std::move(record), std::move(done));
}

void RedisStore::Flush() { journal_.Flush(ReadyConnection()); }

void RedisStore::Compact(std::vector<std::string> snapshot, DoneCallback done) {
  journal_.Compact(ReadyConnection(), std::move(snapshot), std::move(done));
}

uint64_t RedisStore::LogBytes() const { return journal_.LogBytes(); }

}  // namespace drover::store
