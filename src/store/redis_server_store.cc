#include "store/redis_server_store.h"

#include <spdlog/spdlog.h>

#include <algorithm>
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
  if (!s->options_.leader_id.empty()) RETURN_IF_ERROR(s->AcquireLeadership());

  std::optional<Result<Recovered>> recovered =
      Await<Result<Recovered>>(loop, timeout, [&r](auto done) { r.TakeRecovered(done); });
  if (!recovered) return TimedOut("reading the journal", url);
  if (!recovered->ok()) return recovered->status();
  s->recovered_ = std::move(**recovered);

  std::optional<Result<std::vector<Lease>>> leases =
      Await<Result<std::vector<Lease>>>(loop, timeout, [&r](auto done) { r.ListLeases(done); });
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
  spdlog::info("redis store at {} open: {} records, {} leases", url, s->recovered_->records.size(),
               s->initial_leases_->size());
  return s;
}

RedisServerStore::RedisServerStore(net::EventLoop& loop, RedisServerStoreOptions options,
                                   std::unique_ptr<RedisStore> redis)
    : loop_(loop),
      options_(std::move(options)),
      redis_(std::move(redis)),
      clock_(options_.redis.clock ? *options_.redis.clock : SystemClock()),
      reconcile_timer_(loop),
      liveness_timer_(loop),
      leader_timer_(loop),
      standby_timer_(loop) {}

RedisServerStore::~RedisServerStore() {
  *alive_ = false;
  reconcile_timer_.Cancel();
  liveness_timer_.Cancel();
  leader_timer_.Cancel();
  standby_timer_.Cancel();
  for (auto& claim : std::exchange(deferred_claims_, {})) {
    claim->done(Unavailable("the redis store was destroyed"));
  }
  for (auto& release : std::exchange(deferred_releases_, {})) {
    release->done(Unavailable("the redis store was destroyed"));
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
  if (free.key == kLeaderKey) {
    if (leader_waiter_) std::exchange(leader_waiter_, nullptr)(true);
    // Possibly stale (the previous leader's key, expired by our own claim's
    // access, notified on the other connection after our claim's answer):
    // a renewal says whether the key is still ours.
    if (leader_) RenewLeader();
    return;
  }
  auto it = held_.find(free.key);
  if (it == held_.end() || !IsLeaseKey(free.key)) {
    FreeEvent named = free;
    if (free.reason == FreeReason::kReleased) {
      // Our own release: we know who held it.
      if (auto own = own_releases_.find(free.key); own != own_releases_.end()) {
        named.owner = own->second.owner;
        if (--own->second.unseen == 0) own_releases_.erase(own);
      }
    }
    return Deliver(named);
  }
  Held& held = it->second;
  if (free.reason == FreeReason::kReleased) {
    auto own = own_releases_.find(free.key);
    if (own != own_releases_.end() && own->second.last <= held.claimed) {
      // The `del` of our own release of the previous holder, notified after
      // the next holder's claim: nothing happened to the lease held now.
      if (--own->second.unseen == 0) own_releases_.erase(own);
      return;
    }
  }
  if (free.reason == FreeReason::kReleased && !held.pending && Live(held, clock_.Now())) {
    // Deleted under a live task, and not by us (our releases forget the key
    // first): take it back.
    spdlog::warn("redis: lease {} of {} was deleted by someone else; claiming it again", free.key,
                 held.owner);
    return Repair({free.key}, held.owner);
  }
  FreeEvent named = free;
  named.owner = held.owner;
  if (!held.pending) held_.erase(it);
  Deliver(named);
}

// ---- Leases ----

void RedisServerStore::Claim(std::vector<LeaseKey> keys, Owner owner, Duration ttl,
                             Callback<ClaimOutcome> done) {
  const Time now = clock_.Now();
  for (const LeaseKey& key : keys) {
    if (IsLeaseKey(key)) held_[key] = Held{owner, ttl, now, true, now};
  }
  SendClaim(std::make_shared<PendingClaim>(
      PendingClaim{std::move(keys), std::move(owner), ttl, now, std::move(done)}));
}

void RedisServerStore::SendClaim(std::shared_ptr<PendingClaim> claim) {
  if (!redis_->connected()) {
    deferred_claims_.push_back(std::move(claim));
    return;
  }
  std::weak_ptr<bool> alive = alive_;
  redis_->Claim(claim->keys, claim->owner, claim->ttl,
                [this, alive, claim](Result<ClaimOutcome> r) {
                  if (alive.expired()) return claim->done(std::move(r));
                  if (!r.ok() && r.status().code() == StatusCode::kUnavailable) {
                    // Lost with the connection, taken or not: a claim by the same owner
                    // is idempotent, so it is sent again once Redis is back (the drop
                    // comes before the reconnection that sends it).
                    deferred_claims_.push_back(claim);
                    return;
                  }
                  if (!r.ok()) CheckFenced(r.status());
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
  for (auto& release : std::exchange(deferred_releases_, {})) SendRelease(std::move(release));
  for (auto& claim : std::exchange(deferred_claims_, {})) SendClaim(std::move(claim));
}

void RedisServerStore::Renew(std::vector<LeaseKey> keys, Owner owner, Duration ttl,
                             Callback<RenewOutcome> done) {
  // A lease counts as renewed once Redis said so, not when asked: during an
  // outage the leases age, and reconciliation must see that.
  const Time sent = clock_.Now();
  const uint64_t seq = release_seq_;
  ++renews_in_flight_;
  std::weak_ptr<bool> alive = alive_;
  redis_->Renew(
      keys, owner, ttl,
      [this, alive, keys, owner, ttl, sent, seq, done = std::move(done)](Result<RenewOutcome> r) {
        if (alive.expired()) return done(std::move(r));
        --renews_in_flight_;
        if (r.ok()) {
          std::set<LeaseKey> lost(r->lost.begin(), r->lost.end());
          for (const LeaseKey& key : keys) {
            if (!IsLeaseKey(key) || lost.count(key)) continue;
            if (auto rel = released_.find(key); rel != released_.end() && rel->second > seq) {
              continue;  // released after this renewal was sent
            }
            auto [it, inserted] = held_.try_emplace(key, Held{owner, ttl, sent, false});
            if (!inserted && it->second.owner == owner && !it->second.pending) {
              it->second.ttl = ttl;
              it->second.touched = std::max(it->second.touched, sent);
            }
          }
        }
        if (renews_in_flight_ == 0) released_.clear();
        done(std::move(r));
      });
}

void RedisServerStore::Release(std::vector<LeaseKey> keys, Owner owner,
                               Callback<ReleaseOutcome> done) {
  ++release_seq_;
  const Time now = clock_.Now();
  for (const LeaseKey& key : keys) {
    auto it = held_.find(key);
    if (it != held_.end() && it->second.owner == owner) held_.erase(it);
    if (IsLeaseKey(key)) {
      OwnRelease& own = own_releases_[key];
      own.last = now;
      ++own.unseen;
      own.owner = owner;
    }
    if (renews_in_flight_ > 0) released_[key] = release_seq_;
  }
  SendRelease(std::make_shared<PendingRelease>(
      PendingRelease{std::move(keys), std::move(owner), std::move(done)}));
}

void RedisServerStore::SendRelease(std::shared_ptr<PendingRelease> release) {
  if (!redis_->connected()) {
    deferred_releases_.push_back(std::move(release));
    return;
  }
  std::weak_ptr<bool> alive = alive_;
  redis_->Release(release->keys, release->owner, [this, alive, release](Result<ReleaseOutcome> r) {
    if (!alive.expired() && !r.ok() && r.status().code() == StatusCode::kUnavailable) {
      // Compare-and-delete is idempotent: sent again once Redis is back,
      // before the claims that may wait for these keys.
      deferred_releases_.push_back(release);
      return;
    }
    release->done(std::move(r));
  });
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
      const Owner holder = it->second.owner;
      held_.erase(it);
      ++stats_.conflicts;
      Deliver(FreeEvent{key, FreeReason::kExpired, holder});
    }
    if (!r->claimed) {
      spdlog::warn("redis: {} is held by {}; stopping the task of {}", r->conflict_key,
                   r->conflict_owner, owner);
    }
  });
}

void RedisServerStore::Reconcile(std::function<void()> done) {
  if (reconciling_ || lost_leadership_ || !redis_->connected()) {
    if (done) done();
    return;
  }
  reconciling_ = true;
  const Time sent = clock_.Now();
  // A release whose `del` never came (the key had expired first) is no
  // longer worth remembering: its event would have come within moments.
  constexpr Duration kOwnReleaseMemory = Seconds(60);
  std::erase_if(own_releases_,
                [&](const auto& entry) { return sent - entry.second.last > kOwnReleaseMemory; });
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
    // Delivered at the end: the listener may claim and release (held_).
    std::vector<FreeEvent> gone;
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
          gone.push_back(FreeEvent{lease.key, FreeReason::kExpired, held.owner});
          held_.erase(it);
          ++stats_.conflicts;
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
        // Expired while its notification could not reach us (an outage):
        // the task must stop, as if the event had come.
        gone.push_back(FreeEvent{it->first, FreeReason::kExpired, held.owner});
        it = held_.erase(it);
        continue;
      }
      spdlog::warn("redis: lease {} of {} is missing; claiming it again", it->first, held.owner);
      missing[held.owner].push_back(it->first);
      ++it;
    }
    for (auto& [owner, keys] : missing) Repair(std::move(keys), owner);
    for (const FreeEvent& free : gone) Deliver(free);
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
  if (options_.worker_view && redis_->connected() && !lost_leadership_) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
        3 * std::max<Duration>(options_.liveness_interval, Millis(1)));
    redis_->Command({"SET", redis_->keys().prefix() + kWorkerViewKey, options_.worker_view(), "PX",
                     std::to_string(ms.count())},
                    [](Result<RedisReply>) {});
  }
  if (!options_.live_workers || !redis_->connected()) return;
  for (WorkerId worker : options_.live_workers()) {
    redis_->Claim({HeartbeatKey(worker)}, kLivenessOwner, options_.liveness_ttl,
                  [](Result<ClaimOutcome>) {});
  }
}

void RedisServerStore::ArmLiveness() {
  if ((!options_.live_workers && !options_.worker_view) || options_.liveness_interval <= Duration::zero()) return;
  liveness_timer_.ArmAfter(options_.liveness_interval, [this] {
    RefreshLiveness();
    ArmLiveness();
  });
}

// ---- Leader ----

Status RedisServerStore::AcquireLeadership() {
  const std::string& me = options_.leader_id;
  bool announced = false;
  while (true) {
    std::optional<Result<ClaimOutcome>> claimed = Await<Result<ClaimOutcome>>(
        loop_, options_.open_timeout,
        [&](auto done) { redis_->Claim({kLeaderKey}, me, options_.leader_ttl, done); });
    if (claimed && claimed->ok() && (*claimed)->claimed) break;
    if (claimed && claimed->ok() && options_.previous_self &&
        options_.previous_self((*claimed)->conflict_owner)) {
      // Our own previous run, gone: nobody renews that lease, and waiting
      // for it to expire would only hold every task of the pool (18.7).
      const std::string old_owner = (*claimed)->conflict_owner;
      std::optional<Result<bool>> taken = Await<Result<bool>>(
          loop_, options_.open_timeout, [&](auto done) {
            redis_->TakeOver(kLeaderKey, old_owner, me, options_.leader_ttl, done);
          });
      if (taken && taken->ok() && **taken) {
        spdlog::info("leader: took the leader lease back from {} (this server's previous run, "
                     "no longer running)",
                     old_owner);
        break;
      }
      if (taken && taken->ok()) continue;  // it changed hands meanwhile: claim again
    }
    if (claimed && claimed->ok() && !announced) {
      announced = true;
      spdlog::info("standby: the leader is {}; waiting for its lease to end",
                   (*claimed)->conflict_owner);
      if (options_.on_standby) options_.on_standby((*claimed)->conflict_owner);
      if (options_.on_standby_update) ArmStandbyPoll(Duration::zero());
    } else if (!claimed || !claimed->ok()) {
      spdlog::warn("standby: cannot claim the leader lease: {}",
                   claimed ? claimed->status().ToString() : "no answer");
    }
    // Subscribed since before the claim: a free after it is not missed. The
    // timeout covers frees lost in a reconnection.
    Await<bool>(loop_, options_.leader_ttl / 3,
                [this](std::function<void(bool)> done) { leader_waiter_ = std::move(done); });
    leader_waiter_ = nullptr;
  }
  standby_timer_.Cancel();
  leader_ = true;
  leader_renewed_ = clock_.Now();
  early_frees_.clear();  // of the previous leader's leases; we read state after this
  redis_->SetFence(me);
  spdlog::info("leader: {} holds the leader lease (ttl {} ms)", me,
               std::chrono::duration_cast<std::chrono::milliseconds>(options_.leader_ttl).count());
  ArmLeaderRenewal();
  return Status::Ok();
}

void RedisServerStore::ArmLeaderRenewal() {
  leader_timer_.ArmAfter(options_.leader_ttl / 3, [this] {
    RenewLeader();
    ArmLeaderRenewal();
  });
}

void RedisServerStore::RenewLeader() {
  if (!leader_) return;
  const Time sent = clock_.Now();
  std::weak_ptr<bool> alive = alive_;
  redis_->Renew({kLeaderKey}, options_.leader_id, options_.leader_ttl,
                [this, alive, sent](Result<RenewOutcome> r) {
                  if (alive.expired() || !leader_) return;
                  if (r.ok() && r->lost.empty()) {
                    leader_renewed_ = std::max(leader_renewed_, sent);
                  } else if (r.ok()) {
                    LostLeadership("the leader lease is no longer ours");
                  } else if (clock_.Now() - leader_renewed_ >= options_.leader_ttl) {
                    LostLeadership("the leader lease could not be renewed for a TTL (" +
                                   r.status().ToString() + ")");
                  }
                });
}

void RedisServerStore::CheckFenced(const Status& s) {
  if (leader_ && s.code() == StatusCode::kFailedPrecondition &&
      s.ToString().find("not the leader") != std::string::npos) {
    LostLeadership(s.ToString());
  }
}

void RedisServerStore::LostLeadership(const std::string& why) {
  if (lost_leadership_) return;
  lost_leadership_ = true;
  leader_ = false;
  leader_timer_.Cancel();
  reconcile_timer_.Cancel();
  liveness_timer_.Cancel();
  spdlog::error("leader: no longer the leader ({}); stepping down", why);
  if (options_.on_lost_leadership) options_.on_lost_leadership(why);
}

// ---- Standby reads ----

void RedisServerStore::ArmStandbyPoll(Duration after) {
  std::weak_ptr<bool> alive = alive_;
  standby_timer_.ArmAfter(after, [this, alive] {
    if (!alive.expired() && !leader_) PollAsStandby();
  });
}

void RedisServerStore::PollAsStandby() {
  constexpr int kPage = 5000;
  const std::string& prefix = redis_->keys().prefix();
  const std::string& journal = redis_->keys().journal();
  const bool reset = follow_reset_;
  struct Poll {
    std::optional<Result<RedisReply>> tail, first, leader, workers;
  };
  auto poll = std::make_shared<Poll>();
  std::weak_ptr<bool> alive = alive_;
  auto fail = [this](const Status& s) {
    options_.on_standby_update(s);
    ArmStandbyPoll(options_.standby_poll);
  };
  // Pipelined on one connection, so Redis runs them in this order: the
  // first-entry check after the tail read sees any compaction that the
  // tail read may have straddled.
  auto finish = [this, alive, poll, reset, fail] {
    if (alive.expired() || leader_) return;
    if (!poll->tail || !poll->first || !poll->leader || !poll->workers) return;
    for (const auto* r : {&*poll->tail, &*poll->first, &*poll->leader, &*poll->workers}) {
      if (!r->ok()) return fail(r->status());
      if ((*r)->is_error()) return fail(StatusFromErrorReply(**r, "a standby read"));
    }
    const RedisReply& first = **poll->first;
    const std::string first_id =
        first.elements.empty() || first.elements[0].elements.empty() ? ""
                                                                     : first.elements[0].elements[0].str;
    if (!reset && first_id != follow_first_id_) {
      // Compacted since the last read: read the whole stream again.
      follow_last_id_.clear();
      follow_first_id_.clear();
      follow_reset_ = true;
      return ArmStandbyPoll(Duration::zero());
    }
    StandbyUpdate update;
    update.reset = reset;
    for (const RedisReply& entry : (*poll->tail)->elements) {
      if (entry.elements.size() != 2) return fail(Internal("a standby read: malformed stream entry"));
      const auto& fields = entry.elements[1].elements;
      for (size_t i = 0; i + 1 < fields.size(); i += 2) {
        if (fields[i].str == "r") update.records.push_back(fields[i + 1].str);
      }
      follow_last_id_ = entry.elements[0].str;
    }
    if (reset) follow_first_id_ = first_id;
    follow_reset_ = false;
    update.leader = (*poll->leader)->str;
    update.workers = (*poll->workers)->str;
    const bool more = (*poll->tail)->elements.size() == static_cast<size_t>(kPage);
    options_.on_standby_update(std::move(update));
    ArmStandbyPoll(more ? Duration::zero() : options_.standby_poll);
  };
  auto into = [finish](std::optional<Result<RedisReply>>& slot) {
    return [&slot, finish](Result<RedisReply> r) {
      slot = std::move(r);
      finish();
    };
  };
  redis_->Command({"XRANGE", journal, follow_last_id_.empty() ? "-" : "(" + follow_last_id_, "+", "COUNT",
                   std::to_string(kPage)},
                  into(poll->tail));
  redis_->Command({"XRANGE", journal, "-", "+", "COUNT", "1"}, into(poll->first));
  redis_->Command({"HGET", prefix + kLeaderKey, "owner"}, into(poll->leader));
  redis_->Command({"GET", prefix + kWorkerViewKey}, into(poll->workers));
}

// ---- Record log ----

void RedisServerStore::TakeRecovered(Callback<Recovered> done) {
  if (!recovered_) return done(FailedPrecondition("the recovered records were already taken"));
  Recovered recovered = std::move(*recovered_);
  recovered_.reset();
  done(std::move(recovered));
}

void RedisServerStore::Append(std::string record, DoneCallback done) {
  std::weak_ptr<bool> alive = alive_;
  redis_->Append(std::move(record), [this, alive, done = std::move(done)](Status s) {
    if (!alive.expired()) CheckFenced(s);
    done(std::move(s));
  });
}

void RedisServerStore::Flush() { redis_->Flush(); }

void RedisServerStore::Compact(std::vector<std::string> snapshot, DoneCallback done) {
  std::weak_ptr<bool> alive = alive_;
  redis_->Compact(std::move(snapshot), [this, alive, done = std::move(done)](Status s) {
    if (!alive.expired()) CheckFenced(s);
    done(std::move(s));
  });
}

uint64_t RedisServerStore::LogBytes() const { return redis_->LogBytes(); }

}  // namespace drover::store
