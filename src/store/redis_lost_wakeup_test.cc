// The race DESIGN.md section 4 closes with "subscribe, then claim, then
// retry on each free", reproduced on a real Redis: a holder frees a GPU right
// between a waiter's failed claim and its subscription. Redis's pub/sub keeps
// nothing for late subscribers, so a waiter that subscribes after checking
// never hears of that free (a lost wake-up) and waits while the GPU is idle;
// a waiter that subscribed first hears it and claims the GPU.
//
// The free is injected through HookedStore, a test-only Store decorator, so
// the production store has no test branch.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "store/redis_store.h"
#include "store/redis_store_test_util.h"
#include "tests/redis/loop_runner.h"
#include "tests/redis/redis_server.h"

namespace drover::store {
namespace {

using ::drover::testing::RunLoopUntil;
using testing::AwaitOn;
using testing::kWait;
using testing::StartStore;

// Forwards every call to `inner`, with two seams where a test may act
// before the waiter goes on: before its Subscribe reaches the store, and
// after a claim that lost, before the waiter learns it lost. It also records
// every free it passes to the waiter's listener.
class HookedStore final : public Store {
 public:
  using Hook = std::function<void(std::function<void()> then)>;

  explicit HookedStore(Store& inner) : inner_(inner) {}

  Hook before_subscribe;
  Hook after_lost_claim;
  std::vector<FreeEvent> delivered;
  bool subscription_confirmed = false;  // Redis confirmed the SUBSCRIBE

  void Subscribe(FreeListener listener, DoneCallback subscribed) override {
    auto forward = [this, listener = std::move(listener), subscribed = std::move(subscribed)] {
      inner_.Subscribe(
          [this, listener](const FreeEvent& e) {
            delivered.push_back(e);
            listener(e);
          },
          [this, subscribed](Status s) {
            subscription_confirmed = s.ok();
            subscribed(std::move(s));
          });
    };
    if (before_subscribe) return std::exchange(before_subscribe, nullptr)(forward);
    forward();
  }
  void Claim(std::vector<LeaseKey> keys, Owner owner, Duration ttl,
             Callback<ClaimOutcome> done) override {
    inner_.Claim(std::move(keys), std::move(owner), ttl,
                 [this, done = std::move(done)](Result<ClaimOutcome> r) {
                   if (r.ok() && !r->claimed && after_lost_claim) {
                     return std::exchange(after_lost_claim, nullptr)(
                         [done, r = std::move(r)] { done(r); });
                   }
                   done(std::move(r));
                 });
  }
  void Renew(std::vector<LeaseKey> keys, Owner owner, Duration ttl,
             Callback<RenewOutcome> done) override {
    inner_.Renew(std::move(keys), std::move(owner), ttl, std::move(done));
  }
  void Release(std::vector<LeaseKey> keys, Owner owner, Callback<ReleaseOutcome> done) override {
    inner_.Release(std::move(keys), std::move(owner), std::move(done));
  }
  void ListLeases(Callback<std::vector<Lease>> done) override { inner_.ListLeases(std::move(done)); }
  void TakeRecovered(Callback<Recovered> done) override { inner_.TakeRecovered(std::move(done)); }
  void Append(std::string record, DoneCallback done) override {
    inner_.Append(std::move(record), std::move(done));
  }
  void Flush() override { inner_.Flush(); }
  void Compact(std::vector<std::string> snapshot, DoneCallback done) override {
    inner_.Compact(std::move(snapshot), std::move(done));
  }
  uint64_t LogBytes() const override { return inner_.LogBytes(); }

 private:
  Store& inner_;
};

// The wrong order: claim; when that loses, subscribe and retry on a free.
class CheckThenSubscribeWaiter {
 public:
  CheckThenSubscribeWaiter(Store& store, LeaseKey key) : store_(store), key_(std::move(key)) {}
  void Start() { TryClaim(); }
  bool claimed() const { return claimed_; }

 private:
  void TryClaim() {
    store_.Claim({key_}, "waiter", Seconds(30), [this](Result<ClaimOutcome> r) {
      if (r.ok() && r->claimed) {
        claimed_ = true;
      } else if (!subscribed_) {
        subscribed_ = true;
        store_.Subscribe(
            [this](const FreeEvent& e) {
              if (e.key == key_ && !claimed_) TryClaim();
            },
            [](Status) {});
      }
    });
  }

  Store& store_;
  LeaseKey key_;
  bool subscribed_ = false;
  bool claimed_ = false;
};

// DESIGN.md's order: subscribe, then claim, then retry on each free —
// including a free that arrives while a claim is on its way.
class SubscribeThenClaimWaiter {
 public:
  SubscribeThenClaimWaiter(Store& store, LeaseKey key) : store_(store), key_(std::move(key)) {}
  void Start() {
    store_.Subscribe(
        [this](const FreeEvent& e) {
          if (e.key != key_ || claimed_) return;
          if (claiming_) {
            freed_while_claiming_ = true;
          } else {
            TryClaim();
          }
        },
        [this](Status s) {
          if (s.ok()) TryClaim();
        });
  }
  bool claimed() const { return claimed_; }

 private:
  void TryClaim() {
    claiming_ = true;
    freed_while_claiming_ = false;
    store_.Claim({key_}, "waiter", Seconds(30), [this](Result<ClaimOutcome> r) {
      claiming_ = false;
      if (r.ok() && r->claimed) {
        claimed_ = true;
      } else if (freed_while_claiming_) {
        TryClaim();
      }
    });
  }

  Store& store_;
  LeaseKey key_;
  bool claiming_ = false;
  bool freed_while_claiming_ = false;
  bool claimed_ = false;
};

class LostWakeupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto url = drover::testing::SharedTestRedisUrl();
    ASSERT_TRUE(url.ok()) << url.status().ToString();
    const std::string prefix = testing::UniquePrefix();
    // Two servers sharing one pool: one holds the GPU, the other waits.
    auto holder = StartStore(loop_, {.url = *url, .prefix = prefix});
    auto waiter = StartStore(loop_, {.url = *url, .prefix = prefix});
    ASSERT_TRUE(holder.ok()) << holder.status().ToString();
    ASSERT_TRUE(waiter.ok()) << waiter.status().ToString();
    holder_ = std::move(holder).value();
    waiter_ = std::move(waiter).value();
    hooked_ = std::make_unique<HookedStore>(*waiter_);
    ASSERT_TRUE(Claim(*holder_, "gpu")->claimed);
    ASSERT_TRUE(Claim(*holder_, "marker")->claimed);
  }

  Result<ClaimOutcome> Claim(Store& store, const LeaseKey& key) {
    return *AwaitOn<Result<ClaimOutcome>>(
        loop_, [&](auto done) { store.Claim({key}, "holder", Seconds(30), done); });
  }

  // The holder frees the GPU; `then` runs once Redis has deleted the key
  // (and so has published its "del" event to whoever subscribed by then).
  HookedStore::Hook FreeTheGpu() {
    return [this](std::function<void()> then) {
      holder_->Release({"gpu"}, "holder", [then](Result<ReleaseOutcome> r) {
        EXPECT_TRUE(r.ok() && r->not_held.empty());
        then();
      });
    };
  }

  bool Delivered(const LeaseKey& key) const {
    return std::any_of(hooked_->delivered.begin(), hooked_->delivered.end(),
                       [&key](const FreeEvent& e) { return e.key == key; });
  }

  net::EventLoop loop_;
  std::unique_ptr<RedisStore> holder_;
  std::unique_ptr<RedisStore> waiter_;
  std::unique_ptr<HookedStore> hooked_;
};

TEST_F(LostWakeupTest, CheckingBeforeSubscribingLosesAFreeInBetween) {
  hooked_->before_subscribe = FreeTheGpu();
  CheckThenSubscribeWaiter waiter(*hooked_, "gpu");
  waiter.Start();
  ASSERT_TRUE(RunLoopUntil(loop_, [&] { return hooked_->subscription_confirmed; }, kWait));
  EXPECT_EQ(hooked_->before_subscribe, nullptr) << "the free was injected before the subscription";
  // Now free a marker lease: notifications arrive in order on one
  // connection, so once the marker's free is delivered the GPU's free would
  // have been too — it never will be.
  ASSERT_TRUE(AwaitOn<Result<ReleaseOutcome>>(loop_, [&](auto done) {
                holder_->Release({"marker"}, "holder", done);
              })->ok());
  ASSERT_TRUE(RunLoopUntil(loop_, [&] { return Delivered("marker"); }, kWait));

  EXPECT_FALSE(Delivered("gpu")) << "the free before the subscription was not lost?";
  EXPECT_FALSE(waiter.claimed()) << "the waiter should still be waiting";
  // ... although the GPU is free: a lost wake-up.
  auto list = AwaitOn<Result<std::vector<Lease>>>(loop_, [&](auto done) { waiter_->ListLeases(done); });
  ASSERT_TRUE(list && list->ok());
  EXPECT_TRUE((*list)->empty());
}

TEST_F(LostWakeupTest, SubscribingBeforeCheckingClosesTheRace) {
  hooked_->after_lost_claim = FreeTheGpu();
  SubscribeThenClaimWaiter waiter(*hooked_, "gpu");
  waiter.Start();
  ASSERT_TRUE(RunLoopUntil(loop_, [&] { return waiter.claimed(); }, kWait));
  EXPECT_TRUE(Delivered("gpu"));
  EXPECT_EQ(hooked_->after_lost_claim, nullptr) << "the free was injected after a lost claim";
}

}  // namespace
}  // namespace drover::store
