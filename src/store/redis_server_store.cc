#include "store/redis_server_store.h"

#include <spdlog/spdlog.h>

#include <set>
#include <utility>

namespace drover::store {
namespace {

constexpr char kLivenessOwner[] = "server";

bool IsLeaseKey(const LeaseKey& key) { return key.rfind("lease:", 0) == 0; }

// Runs `call(callback)` and the loop until the callback ran or `timeout`
// passed; nullopt on timeout. Only from outside the loop.
template <typename T>
std::optional<T> Await(net::EventLoop& loop, Duration timeout,
                       const std::function<void(std::function<void(T)>)>& call) {
  auto out = std::make_shared<std::optional<T>>();
  auto running = std::make_shared<bool>(false);
  call([out, running, &loop](T value) {
    out->emplace(std::move(value));
    if (*running) loop.Stop();
  });
  if (out->has_value()) return std::move(*out);
  bool timed_out = false;
  net::Timer timer(loop);
  timer.ArmAfter(timeout, [&] {
    timed_out = true;
    loop.Stop();
  });
  *running = true;
  while (!out->has_value() && !timed_out) loop.Run();
  *running = false;
  if (!out->has_value()) return std::nullopt;
  return std::move(*out);
}

Status TimedOut(const std::string& what, const std::string& url) {
  return Status(StatusCode::kDeadlineExceeded, "redis at " + url + ": no answer to " + what);
}

}  // namespace

Result<std::unique_ptr<RedisServerStore>> RedisServerStore::Open(net::EventLoop& loop,
                                                                 RedisServerStoreOptions options) {
  if (loop.InLoopThread()) {
    return FailedPrecondition("the redis store must be opened before the event loop runs");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<RedisStore> redis, RedisStore::Create(loop, options.redis));
  const std::string url = ParseRedisUrl(options.redis.url)->Redacted();
  const Duration timeout = options.open_timeout;
  std::unique_ptr<RedisServerStore> s(
      new RedisServerStore(loop, std::move(options), std::move(redis)));
  RedisStore& r = *s->redis_;

  std::optional<Status> started =
      Await<Status>(loop, timeout, [&r](std::function<void(Status)> done) { r.Start(done); });
  if (!started) return TimedOut("the connection", url);
  RETURN_IF_ERROR(*started);

  // Subscribed before anything is read, so no free after the reads is missed.
  RedisServerStore* self = s.get();
  std::optional<Status> subscribed = Await<Status>(loop, timeout, [&](auto done) {
    r.Subscribe([self](const FreeEvent& free) { self->OnFree(free); }, done);
  });
  if (!subscribed) return TimedOut("SUBSCRIBE", url);
  RETURN_IF_ERROR(*subscribed);

  std::optional<Result<Recovered>> recovered = Await<Result<Recovered>>(
      loop, timeout, [&r](auto done) { r.TakeRecovered(done); });
  if (!recovered) return TimedOut("reading the journal", url);
  if (!recovered->ok()) return recovered->status();
  s->recovered_ = std::move(**recovered);

  std::optional<Result<std::vector<Lease>>> leases = Await<Result<std::vector<Lease>>>(
      loop, timeout, [&r](auto done) { r.ListLeases(done); });
  if (!leases) return TimedOut("listing the leases", url);
  if (!leases->ok()) return leases->status();
  // Leases found at start count as held for one TTL: the server renews
  // those it still needs, and the rest become reconciliation's to release.
  const Time now = s->clock_.Now();
  for (const Lease& lease : **leases) {
    if (IsLeaseKey(lease.key)) s->held_[lease.key] = Held{lease.owner, lease.ttl, now, false};
  }
  s->initial_leases_ = std::move(**leases);

  std::weak_ptr<bool> alive = s->alive_;
  r.SetOnReconnected([self, alive] {
    if (alive.expired()) return;
    spdlog::info("redis: reconnected; reconciling leases");
    self->SendDeferredClaims();
    self->Reconcile();
    self->RefreshLiveness();
  });
  s->ArmReconcile();
  s->ArmLiveness();
  spdlog::info("redis store at {} open: {} records, {} leases", url,
               s->recovered_->records.size(), s->initial_leases_->size());
  return s;
}

RedisServerStore::RedisServerStore(net::EventLoop& loop, RedisServerStoreOptions options,
                                   std::unique_ptr<RedisStore> redis)
    : loop_(loop),
      options_(std::move(options)),
      redis_(std::move(redis)),
      reconcile_timer_(loop),
      liveness_timer_(loop) {}

RedisServerStore::~RedisServerStore() {
  *alive_ = false;
  reconcile_timer_.Cancel();
  liveness_timer_.Cancel();
  for (auto& claim : std::exchange(deferred_claims_, {})) {
    claim->done(Unavailable("the redis store was destroyed"));
  }
}

// ---- Frees ----

void RedisServerStore::Subscribe(FreeListener listener, DoneCallback subscribed) {
  listener_ = std::move(listener);
  subscribed(Status::Ok());
  if (early_frees_.empty()) return;
  std::weak_ptr<bool> alive = alive_;
  loop_.Post([this, alive] {
    if (alive.expired()) return;
    while (!early_frees_.empty() && listener_) {
      FreeEvent free = std::move(early_frees_.front());
      early_frees_.pop_front();
      listener_(free);
    }
  });
}

void RedisServerStore::Deliver(const FreeEvent& free) {
  if (!listener_) {
    early_frees_.push_back(free);
    return;
  }
  FreeListener listener = listener_;  // it may replace itself
  listener(free);
}

void RedisServerStore::OnFree(const FreeEvent& free) {
  auto it = held_.find(free.key);
  if (it == held_.end() || !IsLeaseKey(free.key)) return Deliver(free);
  Held& held = it->second;
  if (free.reason == FreeReason::kReleased && !held.pending && Live(held, clock_.Now())) {
    // Deleted under a live task, and not by us (our releases forget the key
    // first): take it back.
    spdlog::warn("redis: lease {} of {} was deleted by someone else; claiming it again", free.key,
                 held.owner);
    return Repair({free.key}, held.owner);
  }
  if (!held.pending) held_.erase(it);
  Deliver(free);
}

// ---- Leases ----

void RedisServerStore::Claim(std::vector<LeaseKey> keys, Owner owner, Duration ttl,
                             Callback<ClaimOutcome> done) {
  const Time now = clock_.Now();
  for (const LeaseKey& key : keys) {
    if (IsLeaseKey(key)) held_[key] = Held{owner, ttl, now, true};
  }
  SendClaim(std::make_shared<PendingClaim>(PendingClaim{std::move(keys), std::move(owner), ttl,
                                                        now, std::move(done)}));
}

void RedisServerStore::SendClaim(std::shared_ptr<PendingClaim> claim) {
  if (!redis_->connected()) {
    deferred_claims_.push_back(std::move(claim));
    return;
  }
  std::weak_ptr<bool> alive = alive_;
  redis_->Claim(claim->keys, claim->owner, claim->ttl, [this, alive, claim](Result<ClaimOutcome> r) {
    if (alive.expired()) return claim->done(std::move(r));
    if (!r.ok() && r.status().code() == StatusCode::kUnavailable) {
      // Lost with the connection, taken or not: a claim by the same owner
      // is idempotent, so it is sent again once Redis is back (the drop
      // comes before the reconnection that sends it).
      deferred_claims_.push_back(claim);
      return;
    }
    const bool claimed = r.ok() && r->claimed;
    for (const LeaseKey& key : claim->keys) {
      auto it = held_.find(key);
      if (it == held_.end() || it->second.owner != claim->owner) continue;
      if (claimed) {
        it->second.pending = false;
        it->second.touched = claim->sent;
      } else {
        held_.erase(it);
      }
    }
    claim->done(std::move(r));
  });
}

void RedisServerStore::SendDeferredClaims() {
  for (auto& claim : std::exchange(deferred_claims_, {})) SendClaim(std::move(claim));
}

void RedisServerStore::Renew(std::vector<LeaseKey> keys, Owner owner, Duration ttl,
                             Callback<RenewOutcome> done) {
  const Time now = clock_.Now();
  for (const LeaseKey& key : keys) {
    if (!IsLeaseKey(key)) continue;
    auto [it, inserted] = held_.try_emplace(key, Held{owner, ttl, now, false});
    if (!inserted && it->second.owner == owner && !it->second.pending) {
      it->second.ttl = ttl;
      it->second.touched = now;
    }
  }
  redis_->Renew(std::move(keys), std::move(owner), ttl, std::move(done));
}

void RedisServerStore::Release(std::vector<LeaseKey> keys, Owner owner,
                               Callback<ReleaseOutcome> done) {
  for (const LeaseKey& key : keys) {
    auto it = held_.find(key);
    if (it != held_.end() && it->second.owner == owner) held_.erase(it);
  }
  redis_->Release(std::move(keys), std::move(owner), std::move(done));
}

void RedisServerStore::ListLeases(Callback<std::vector<Lease>> done) {
  if (initial_leases_) {
    std::vector<Lease> leases = std::move(*initial_leases_);
    initial_leases_.reset();
    return done(std::move(leases));
  }
  redis_->ListLeases(std::move(done));
}

void RedisServerStore::Repair(std::vector<LeaseKey> keys, Owner owner) {
  Duration ttl = Seconds(30);
  if (auto it = held_.find(keys.front()); it != held_.end()) ttl = it->second.ttl;
  std::weak_ptr<bool> alive = alive_;
  const Time sent = clock_.Now();
  redis_->Claim(keys, owner, ttl, [this, alive, keys, owner, sent](Result<ClaimOutcome> r) {
    if (alive.expired()) return;
    if (!r.ok()) {
      spdlog::warn("redis: could not claim {} again for {}: {}", keys.front(), owner,
                   r.status().ToString());
      return;  // the next pass tries again
    }
    for (const LeaseKey& key : keys) {
      auto it = held_.find(key);
      if (it == held_.end() || it->second.owner != owner) continue;
      if (r->claimed) {
        it->second.touched = std::max(it->second.touched, sent);
        ++stats_.reclaimed;
        continue;
      }
      // Someone else holds it: the task may no longer run.
      held_.erase(it);
      ++stats_.conflicts;
      Deliver(FreeEvent{key, FreeReason::kExpired});
    }
    if (!r->claimed) {
      spdlog::warn("redis: {} is held by {}; stopping the task of {}", r->conflict_key,
                   r->conflict_owner, owner);
    }
  });
}

void RedisServerStore::Reconcile(std::function<void()> done) {
  if (reconciling_ || !redis_->connected()) {
    if (done) done();
    return;
  }
  reconciling_ = true;
  const Time sent = clock_.Now();
  std::weak_ptr<bool> alive = alive_;
  redis_->ListLeases([this, alive, sent, done = std::move(done)](Result<std::vector<Lease>> r) {
    if (alive.expired()) return;
    reconciling_ = false;
    if (!r.ok()) {
      spdlog::warn("redis: reconciliation could not list leases: {}", r.status().ToString());
      if (done) done();
      return;
    }
    ++stats_.passes;
    const Time now = clock_.Now();
    std::set<LeaseKey> matched;
    for (const Lease& lease : *r) {
      if (!IsLeaseKey(lease.key)) continue;
      auto it = held_.find(lease.key);
      if (it != held_.end()) {
        Held& held = it->second;
        if (held.owner == lease.owner) {
          matched.insert(lease.key);
          continue;
        }
        // Changed since the listing was made: the listing is stale here.
        if (held.pending || held.touched >= sent) continue;
        if (Live(held, now)) {
          spdlog::warn("redis: lease {} of {} is held by {}; stopping the task", lease.key,
                       held.owner, lease.owner);
          held_.erase(it);
          ++stats_.conflicts;
          Deliver(FreeEvent{lease.key, FreeReason::kExpired});
          continue;  // the other holder's lease is released by a later pass
        }
        held_.erase(it);
      }
      spdlog::warn("redis: lease {} held by {} belongs to no task here; releasing it", lease.key,
                   lease.owner);
      ++stats_.released;
      redis_->Release({lease.key}, lease.owner, [](Result<ReleaseOutcome>) {});
    }
    std::map<Owner, std::vector<LeaseKey>> missing;
    for (auto it = held_.begin(); it != held_.end();) {
      const Held& held = it->second;
      if (matched.count(it->first) || held.pending || held.touched >= sent) {
        ++it;
        continue;
      }
      if (!Live(held, now)) {
        it = held_.erase(it);
        continue;
      }
      spdlog::warn("redis: lease {} of {} is missing; claiming it again", it->first, held.owner);
      missing[held.owner].push_back(it->first);
      ++it;
    }
    for (auto& [owner, keys] : missing) Repair(std::move(keys), owner);
    if (done) done();
  });
}

// ---- Timers ----

void RedisServerStore::ArmReconcile() {
  if (options_.reconcile_interval <= Duration::zero()) return;
  reconcile_timer_.ArmAfter(options_.reconcile_interval, [this] {
    Reconcile();
    ArmReconcile();
  });
}

void RedisServerStore::RefreshLiveness() {
  if (!options_.live_workers || !redis_->connected()) return;
  for (WorkerId worker : options_.live_workers()) {
    redis_->Claim({HeartbeatKey(worker)}, kLivenessOwner, options_.liveness_ttl,
                  [](Result<ClaimOutcome>) {});
  }
}

void RedisServerStore::ArmLiveness() {
  if (!options_.live_workers || options_.liveness_interval <= Duration::zero()) return;
  liveness_timer_.ArmAfter(options_.liveness_interval, [this] {
    RefreshLiveness();
    ArmLiveness();
  });
}

// ---- Record log ----

void RedisServerStore::TakeRecovered(Callback<Recovered> done) {
  if (!recovered_) return done(FailedPrecondition("the recovered records were already taken"));
  Recovered recovered = std::move(*recovered_);
  recovered_.reset();
  done(std::move(recovered));
}

void RedisServerStore::Append(std::string record, DoneCallback done) {
  redis_->Append(std::move(record), std::move(done));
}

void RedisServerStore::Flush() { redis_->Flush(); }

void RedisServerStore::Compact(std::vector<std::string> snapshot, DoneCallback done) {
  redis_->Compact(std::move(snapshot), std::move(done));
}

uint64_t RedisServerStore::LogBytes() const { return redis_->LogBytes(); }

}  // namespace drover::store
