#include "store/store_conformance.h"

#include <gmock/gmock.h>

#include <algorithm>
#include <utility>

namespace drover::store {
namespace {

Status NeverCompleted(const std::string& what) {
  return Status(StatusCode::kDeadlineExceeded, "the store never completed " + what);
}

}  // namespace

using ::testing::ElementsAre;
using ::testing::IsEmpty;

void PrintTo(const StoreConformanceParam& param, std::ostream* os) { *os << param.name; }

std::string StoreConformanceParamName(const ::testing::TestParamInfo<StoreConformanceParam>& info) {
  return info.param.name;
}

void StoreConformanceTest::SetUp() {
  harness_ = GetParam().make();
  ASSERT_NE(harness_, nullptr);
}

template <typename T>
Result<T> StoreConformanceTest::Await(const std::function<void(Store::Callback<T>)>& call) {
  std::optional<Result<T>> result;
  int calls = 0;
  call([&result, &calls](Result<T> r) {
    ++calls;
    result.emplace(std::move(r));
  });
  if (!harness_->RunUntil([&result] { return result.has_value(); })) {
    return NeverCompleted("the call");
  }
  EXPECT_EQ(calls, 1) << "a callback must run exactly once";
  return std::move(*result);
}

Result<ClaimOutcome> StoreConformanceTest::Claim(std::vector<LeaseKey> keys, const Owner& owner) {
  return Claim(std::move(keys), owner, ttl());
}

Result<ClaimOutcome> StoreConformanceTest::Claim(std::vector<LeaseKey> keys, const Owner& owner,
                                                 Duration lease_ttl) {
  return Await<ClaimOutcome>([&](Store::Callback<ClaimOutcome> done) {
    store().Claim(std::move(keys), owner, lease_ttl, std::move(done));
  });
}

Result<RenewOutcome> StoreConformanceTest::Renew(std::vector<LeaseKey> keys, const Owner& owner) {
  return Await<RenewOutcome>([&](Store::Callback<RenewOutcome> done) {
    store().Renew(std::move(keys), owner, ttl(), std::move(done));
  });
}

Result<ReleaseOutcome> StoreConformanceTest::Release(std::vector<LeaseKey> keys,
                                                     const Owner& owner) {
  return Await<ReleaseOutcome>([&](Store::Callback<ReleaseOutcome> done) {
    store().Release(std::move(keys), owner, std::move(done));
  });
}

Result<std::vector<Lease>> StoreConformanceTest::List() {
  return Await<std::vector<Lease>>(
      [&](Store::Callback<std::vector<Lease>> done) { store().ListLeases(std::move(done)); });
}

std::vector<std::string> StoreConformanceTest::Holdings() {
  auto leases = List();
  EXPECT_TRUE(leases.ok()) << leases.status().ToString();
  std::vector<std::string> out;
  if (!leases.ok()) return out;
  for (const auto& lease : *leases) out.push_back(lease.key + "=" + lease.owner);
  return out;
}

Result<Recovered> StoreConformanceTest::TakeRecovered() {
  return Await<Recovered>(
      [&](Store::Callback<Recovered> done) { store().TakeRecovered(std::move(done)); });
}

std::vector<Status> StoreConformanceTest::AppendAndFlush(const std::vector<std::string>& records) {
  std::vector<std::optional<Status>> results(records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    store().Append(records[i], [&results, i](Status s) { results[i] = std::move(s); });
  }
  store().Flush();
  harness_->RunUntil([&results] {
    for (const auto& r : results) {
      if (!r) return false;
    }
    return true;
  });
  std::vector<Status> out;
  for (auto& r : results) out.push_back(r ? *r : NeverCompleted("an append"));
  return out;
}

Status StoreConformanceTest::Compact(std::vector<std::string> snapshot) {
  std::optional<Status> result;
  store().Compact(std::move(snapshot), [&result](Status s) { result = std::move(s); });
  if (!harness_->RunUntil([&result] { return result.has_value(); })) {
    return NeverCompleted("a compaction");
  }
  return *result;
}

void StoreConformanceTest::SubscribeRecorder() {
  std::optional<Status> subscribed;
  store().Subscribe([this](const FreeEvent& e) { frees_.push_back(e); },
                    [&subscribed](Status s) { subscribed = std::move(s); });
  ASSERT_TRUE(harness_->RunUntil([&subscribed] { return subscribed.has_value(); }));
  ASSERT_TRUE(subscribed->ok()) << subscribed->ToString();
}

namespace {

void ExpectAllOk(const std::vector<Status>& statuses) {
  for (const auto& s : statuses) EXPECT_TRUE(s.ok()) << s.ToString();
}

// ---- Claims ----

TEST_P(StoreConformanceTest, ClaimTakesFreeKeysAndReportsTheHolderOnConflict) {
  auto a = Claim({"lease:1:gpu:0", "lease:1:gpu:1"}, "task-a");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_TRUE(a->claimed);

  auto b = Claim({"lease:1:gpu:1", "lease:1:gpu:2"}, "task-b");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_FALSE(b->claimed);
  EXPECT_EQ(b->conflict_key, "lease:1:gpu:1");
  EXPECT_EQ(b->conflict_owner, "task-a");

  EXPECT_THAT(Holdings(), ElementsAre("lease:1:gpu:0=task-a", "lease:1:gpu:1=task-a"));
}

TEST_P(StoreConformanceTest, MultiKeyClaimIsAllOrNothing) {
  ASSERT_TRUE(Claim({"k2"}, "holder")->claimed);
  auto r = Claim({"k1", "k2", "k3"}, "greedy");
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->claimed);
  EXPECT_EQ(r->conflict_key, "k2");
  EXPECT_EQ(r->conflict_owner, "holder");
  // Neither free key was taken by the failed claim.
  EXPECT_THAT(Holdings(), ElementsAre("k2=holder"));
  EXPECT_TRUE(Claim({"k1", "k3"}, "other")->claimed);
}

TEST_P(StoreConformanceTest, SameOwnerMayClaimWhatItHoldsAgain) {
  ASSERT_TRUE(Claim({"k1"}, "a")->claimed);
  auto again = Claim({"k1", "k2"}, "a");
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->claimed);
  EXPECT_THAT(Holdings(), ElementsAre("k1=a", "k2=a"));
}

TEST_P(StoreConformanceTest, DuplicateKeysCountOnce) {
  auto r = Claim({"k1", "k1", "k1"}, "a");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->claimed);
  EXPECT_THAT(Holdings(), ElementsAre("k1=a"));
}

TEST_P(StoreConformanceTest, MalformedRequestsAreInvalidArguments) {
  EXPECT_EQ(Claim({}, "a").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Claim({"k1"}, "").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Claim({""}, "a").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Claim({"k1"}, "a", Duration::zero()).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Renew({}, "a").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Release({"k1"}, "").status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(Holdings(), IsEmpty());
}

// ---- Renew and release ----

TEST_P(StoreConformanceTest, OnlyTheOwnerRenewsAndRenewNeverClaims) {
  ASSERT_TRUE(Claim({"k1"}, "a")->claimed);
  auto by_other = Renew({"k1"}, "b");
  ASSERT_TRUE(by_other.ok());
  EXPECT_THAT(by_other->lost, ElementsAre("k1"));

  auto by_owner = Renew({"k1", "k9"}, "a");
  ASSERT_TRUE(by_owner.ok());
  EXPECT_THAT(by_owner->lost, ElementsAre("k9"));
  EXPECT_THAT(Holdings(), ElementsAre("k1=a"));
}

TEST_P(StoreConformanceTest, ReleaseIsCompareAndDelete) {
  SubscribeRecorder();
  ASSERT_TRUE(Claim({"k1", "k2"}, "a")->claimed);

  auto by_other = Release({"k1"}, "b");
  ASSERT_TRUE(by_other.ok());
  EXPECT_THAT(by_other->not_held, ElementsAre("k1"));
  EXPECT_THAT(Holdings(), ElementsAre("k1=a", "k2=a"));

  auto by_owner = Release({"k1", "k2", "k3"}, "a");
  ASSERT_TRUE(by_owner.ok());
  EXPECT_THAT(by_owner->not_held, ElementsAre("k3"));
  ASSERT_TRUE(harness_->RunUntil([this] { return frees_.size() >= 2; }));
  std::vector<FreeEvent> frees = frees_;
  std::sort(frees.begin(), frees.end(),
            [](const FreeEvent& x, const FreeEvent& y) { return x.key < y.key; });
  ASSERT_EQ(frees.size(), 2u);
  for (FreeEvent& e : frees) {
    // The holder, where the store knows it (the bare Redis connection does not).
    EXPECT_TRUE(e.owner == "a" || e.owner.empty()) << e.owner;
    e.owner.clear();
  }
  EXPECT_THAT(frees, ElementsAre(FreeEvent{"k1", FreeReason::kReleased, ""},
                                 FreeEvent{"k2", FreeReason::kReleased, ""}));
  EXPECT_THAT(Holdings(), IsEmpty());
  EXPECT_TRUE(Claim({"k1"}, "b")->claimed);
}

// ---- Expiry ----

TEST_P(StoreConformanceTest, UnrenewedLeaseExpiresWithOneFreeEvent) {
  SubscribeRecorder();
  ASSERT_TRUE(Claim({"k1"}, "a")->claimed);
  const Duration quarter = ttl() / 4;

  // Renewing keeps it: three renewals half a TTL apart outlive the first TTL.
  for (int i = 0; i < 3; ++i) {
    harness_->Pass(2 * quarter);
    auto renewed = Renew({"k1"}, "a");
    ASSERT_TRUE(renewed.ok());
    EXPECT_THAT(renewed->lost, IsEmpty()) << "renewal " << i;
  }
  harness_->Pass(3 * quarter);
  EXPECT_THAT(Holdings(), ElementsAre("k1=a"));
  EXPECT_THAT(frees_, IsEmpty());

  // Without renewal it ends, with exactly one expired event.
  harness_->Pass(2 * quarter);
  ASSERT_TRUE(harness_->RunUntil([this] { return !frees_.empty(); }));
  ASSERT_EQ(frees_.size(), 1u);
  EXPECT_TRUE(frees_[0].owner == "a" || frees_[0].owner.empty()) << frees_[0].owner;
  EXPECT_EQ(frees_[0].key, "k1");
  EXPECT_EQ(frees_[0].reason, FreeReason::kExpired);
  EXPECT_THAT(Holdings(), IsEmpty());
  harness_->Pass(ttl());
  auto late = Renew({"k1"}, "a");
  ASSERT_TRUE(late.ok());
  EXPECT_THAT(late->lost, ElementsAre("k1"));
  EXPECT_THAT(Release({"k1"}, "a")->not_held, ElementsAre("k1"));
  EXPECT_EQ(frees_.size(), 1u) << "a lease ends once";
}

TEST_P(StoreConformanceTest, ExpiredKeyCanBeClaimedByAnother) {
  ASSERT_TRUE(Claim({"k1"}, "a")->claimed);
  harness_->Pass(ttl() + ttl() / 2);
  auto r = Claim({"k1"}, "b");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->claimed) << "held by " << r->conflict_owner;
  EXPECT_THAT(Holdings(), ElementsAre("k1=b"));
}

TEST_P(StoreConformanceTest, ListShowsOwnersAndExpiries) {
  ASSERT_TRUE(Claim({"b", "a"}, "x")->claimed);
  ASSERT_TRUE(Claim({"c"}, "y", 2 * ttl())->claimed);
  auto leases = List();
  ASSERT_TRUE(leases.ok());
  ASSERT_EQ(leases->size(), 3u);
  EXPECT_EQ((*leases)[0].key, "a");
  EXPECT_EQ((*leases)[2].owner, "y");
  EXPECT_LT((*leases)[0].expires_at, (*leases)[2].expires_at);
  EXPECT_EQ((*leases)[2].ttl, 2 * ttl());
}

TEST_P(StoreConformanceTest, ListenerMayClaimTheFreedKeyAtOnce) {
  // The shell's pattern: a waiter is placed the moment its GPU frees.
  std::optional<Result<ClaimOutcome>> waiter;
  std::optional<Status> subscribed;
  store().Subscribe(
      [this, &waiter](const FreeEvent& e) {
        if (e.key != "gpu" || waiter) return;
        store().Claim({"gpu"}, "waiter", ttl(),
                      [&waiter](Result<ClaimOutcome> r) { waiter.emplace(std::move(r)); });
      },
      [&subscribed](Status s) { subscribed = std::move(s); });
  ASSERT_TRUE(harness_->RunUntil([&] { return subscribed.has_value(); }));
  ASSERT_TRUE(Claim({"gpu"}, "holder")->claimed);
  ASSERT_FALSE(Claim({"gpu"}, "waiter")->claimed);
  ASSERT_TRUE(Release({"gpu"}, "holder").ok());
  ASSERT_TRUE(harness_->RunUntil([&] { return waiter.has_value(); }));
  ASSERT_TRUE(waiter->ok());
  EXPECT_TRUE((*waiter)->claimed);
  EXPECT_THAT(Holdings(), ElementsAre("gpu=waiter"));
}

// ---- Record log ----

TEST_P(StoreConformanceTest, AppendedRecordsAreAcknowledgedAtFlush) {
  auto first = TakeRecovered();
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_THAT(first->records, IsEmpty());
  EXPECT_EQ(TakeRecovered().status().code(), StatusCode::kFailedPrecondition);
  ExpectAllOk(AppendAndFlush({"job 1 submitted", "", std::string("\0\1\2", 3)}));
}

TEST_P(StoreConformanceTest, RecordsAndLeasesSurviveARestart) {
  if (!harness_->durable()) GTEST_SKIP() << "this store keeps nothing across a restart";
  ASSERT_TRUE(TakeRecovered().ok());
  ASSERT_TRUE(Claim({"k1", "k2"}, "a")->claimed);
  ASSERT_TRUE(Claim({"k3"}, "b")->claimed);
  ASSERT_TRUE(Release({"k2"}, "a").ok());
  const std::vector<std::string> records = {"one", "two", std::string(3000, 'z')};
  ExpectAllOk(AppendAndFlush(records));

  ASSERT_TRUE(harness_->Restart().ok());
  auto recovered = TakeRecovered();
  ASSERT_TRUE(recovered.ok()) << recovered.status().ToString();
  EXPECT_EQ(recovered->records, records);
  EXPECT_EQ(recovered->discarded_bytes, 0u);
  EXPECT_THAT(Holdings(), ElementsAre("k1=a", "k3=b"));
  EXPECT_FALSE(Claim({"k1"}, "c")->claimed);
  // Restored leases still expire when nobody renews them.
  harness_->Pass(ttl() + ttl() / 2);
  EXPECT_THAT(Holdings(), IsEmpty());
}

TEST_P(StoreConformanceTest, CompactionReplacesRecordsAndKeepsLeases) {
  if (!harness_->durable()) GTEST_SKIP() << "this store keeps nothing across a restart";
  ASSERT_TRUE(TakeRecovered().ok());
  ASSERT_TRUE(Claim({"k1"}, "a")->claimed);
  ExpectAllOk(AppendAndFlush({"a", "b", "c"}));
  ASSERT_TRUE(Compact({"snapshot"}).ok());
  ExpectAllOk(AppendAndFlush({"d"}));

  ASSERT_TRUE(harness_->Restart().ok());
  auto recovered = TakeRecovered();
  ASSERT_TRUE(recovered.ok());
  EXPECT_EQ(recovered->records, (std::vector<std::string>{"snapshot", "d"}));
  EXPECT_THAT(Holdings(), ElementsAre("k1=a"));
}

}  // namespace
}  // namespace drover::store
