#include "store/memory_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <vector>

#include "store/memory_env.h"
#include "store/store_conformance.h"

namespace drover::store {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr char kDir[] = "/state";

// Runs the MemoryStore through the conformance suite: time is a simulated
// clock, files live in a MemoryEnv, and every call completes synchronously.
class MemoryHarness final : public StoreHarness {
 public:
  explicit MemoryHarness(bool durable) : durable_(durable) {
    if (durable_) {
      EXPECT_TRUE(Restart().ok());
    } else {
      store_ = std::make_unique<MemoryStore>(clock_);
    }
  }

  Store& store() override { return *store_; }
  Duration ttl() const override { return Seconds(30); }
  void Pass(Duration d) override {
    clock_.Advance(d);
    store_->ExpireDue(clock_.Now());
  }
  bool RunUntil(const std::function<bool()>& done) override { return done(); }
  bool durable() const override { return durable_; }
  Status Restart() override {
    store_.reset();
    ASSIGN_OR_RETURN(store_, MemoryStore::Open(clock_, env_, kDir));
    return Status::Ok();
  }

 private:
  bool durable_;
  SimulatedClock clock_;
  MemoryEnv env_;
  std::unique_ptr<MemoryStore> store_;
};

INSTANTIATE_TEST_SUITE_P(
    Memory, StoreConformanceTest,
    ::testing::Values(
        StoreConformanceParam{"journaled", [] { return std::make_unique<MemoryHarness>(true); }},
        StoreConformanceParam{"ephemeral", [] { return std::make_unique<MemoryHarness>(false); }}),
    StoreConformanceParamName);

// ---- What only the MemoryStore does: the expiry timer, and its journal ----

class MemoryStoreTest : public ::testing::Test {
 protected:
  MemoryStoreTest() { Reopen(); }

  void Reopen() {
    store_.reset();
    auto opened = MemoryStore::Open(clock_, env_, kDir);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    store_ = std::move(opened).value();
    store_->Subscribe([this](const FreeEvent& e) { frees_.push_back(e); }, [](Status) {});
  }

  ClaimOutcome Claim(std::vector<LeaseKey> keys, const Owner& owner, Duration ttl) {
    std::optional<Result<ClaimOutcome>> out;
    store_->Claim(std::move(keys), owner, ttl, [&out](Result<ClaimOutcome> r) { out.emplace(r); });
    EXPECT_TRUE(out.has_value() && out->ok());
    return out && out->ok() ? **out : ClaimOutcome{};
  }
  void Release(std::vector<LeaseKey> keys, const Owner& owner) {
    store_->Release(std::move(keys), owner, [](Result<ReleaseOutcome> r) { ASSERT_TRUE(r.ok()); });
  }
  std::vector<std::string> Holdings() {
    std::vector<std::string> out;
    store_->ListLeases([&out](Result<std::vector<Lease>> r) {
      ASSERT_TRUE(r.ok());
      for (const auto& l : *r) out.push_back(l.key + "=" + l.owner);
    });
    return out;
  }
  Recovered Take() {
    Recovered out;
    store_->TakeRecovered([&out](Result<Recovered> r) {
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      out = std::move(r).value();
    });
    return out;
  }
  Status AppendAndFlush(std::string record) {
    std::optional<Status> result;
    store_->Append(std::move(record), [&result](Status s) { result = s; });
    store_->Flush();
    return result.value_or(Internal("append never completed"));
  }

  SimulatedClock clock_;
  MemoryEnv env_;
  std::unique_ptr<MemoryStore> store_;
  std::vector<FreeEvent> frees_;
};

TEST_F(MemoryStoreTest, BackgroundFlushCompletesThroughPostAndSurvivesARestart) {
  // `post` queues the reaping; the test plays the owner's loop.
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::function<void()>> posted;
  store_->SyncInBackground([&](std::function<void()> fn) {
    std::lock_guard<std::mutex> lock(mu);
    posted.push_back(std::move(fn));
    cv.notify_all();
  });
  Claim({"gpu0"}, "a", Seconds(30));
  std::optional<Status> result;
  store_->Append("job", [&result](Status s) { result = s; });
  store_->Flush();
  EXPECT_FALSE(result.has_value()) << "completes on the owner's thread, not in Flush()";
  std::vector<std::function<void()>> run;
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return !posted.empty(); }));
    run.swap(posted);
  }
  for (auto& fn : run) fn();
  ASSERT_TRUE(result.has_value());
  EXPECT_TRUE(result->ok()) << result->ToString();

  // Appended but never flushed: a clean stop (the destructor) writes it.
  store_->Append("last", [](Status) {});
  Reopen();
  EXPECT_THAT(Take().records, ElementsAre("job", "last"));
  EXPECT_THAT(Holdings(), ElementsAre("gpu0=a"));
}

TEST_F(MemoryStoreTest, NextExpiryArmsOneTimerForTheEarliestLease) {
  const Time t0 = clock_.Now();
  EXPECT_EQ(store_->NextExpiry(), std::nullopt);
  Claim({"late"}, "a", Seconds(30));
  Claim({"early"}, "b", Seconds(10));
  EXPECT_EQ(store_->NextExpiry(), t0 + Seconds(10));

  // Releasing the earliest moves the timer to the next one.
  Release({"early"}, "b");
  EXPECT_EQ(store_->NextExpiry(), t0 + Seconds(30));

  // Firing just before the deadline expires nothing; at it, exactly it.
  clock_.Advance(Seconds(30) - Micros(1));
  store_->ExpireDue(clock_.Now());
  EXPECT_THAT(Holdings(), ElementsAre("late=a"));
  clock_.Advance(Micros(1));
  store_->ExpireDue(clock_.Now());
  EXPECT_THAT(frees_, ElementsAre(FreeEvent{"early", FreeReason::kReleased, "b"},
                                  FreeEvent{"late", FreeReason::kExpired, "a"}));
  EXPECT_EQ(store_->NextExpiry(), std::nullopt);
  EXPECT_EQ(store_->lease_count(), 0u);
}

TEST_F(MemoryStoreTest, RenewalMovesTheDeadline) {
  const Time t0 = clock_.Now();
  Claim({"k"}, "a", Seconds(10));
  clock_.Advance(Seconds(4));
  store_->Renew({"k"}, "a", Seconds(10), [](Result<RenewOutcome> r) {
    ASSERT_TRUE(r.ok());
    EXPECT_THAT(r->lost, IsEmpty());
  });
  EXPECT_EQ(store_->NextExpiry(), t0 + Seconds(14));
  // The stale deadline at t0+10 fires nothing.
  clock_.Advance(Seconds(6));
  store_->ExpireDue(clock_.Now());
  EXPECT_THAT(frees_, IsEmpty());
}

TEST_F(MemoryStoreTest, LateTimerStillNeverReportsAnExpiredLeaseAsHeld) {
  Claim({"gpu"}, "a", Seconds(10));
  clock_.Advance(Seconds(11));  // the shell's timer has not fired yet
  ClaimOutcome b = Claim({"gpu"}, "b", Seconds(10));
  EXPECT_TRUE(b.claimed);
  EXPECT_THAT(frees_, ElementsAre(FreeEvent{"gpu", FreeReason::kExpired, "a"}));
  store_->ExpireDue(clock_.Now());  // the late timer finds nothing more
  EXPECT_EQ(frees_.size(), 1u);
}

TEST_F(MemoryStoreTest, ManyClaimReleaseCyclesKeepNoStaleDeadlinesAlive) {
  for (int i = 0; i < 10000; ++i) {
    Claim({"lease:1:slot:" + std::to_string(i)}, "t", Seconds(30));
    Release({"lease:1:slot:" + std::to_string(i)}, "t");
  }
  EXPECT_EQ(store_->lease_count(), 0u);
  EXPECT_EQ(store_->NextExpiry(), std::nullopt);
  EXPECT_EQ(frees_.size(), 10000u);
}

TEST_F(MemoryStoreTest, RestartRestoresLeasesForAFullTtlFromTheRestart) {
  ASSERT_TRUE(AppendAndFlush("x").ok());
  Claim({"gpu"}, "task", Seconds(30));
  ASSERT_TRUE(AppendAndFlush("assigned").ok());
  clock_.Advance(Seconds(25));  // down for a while: the lease had 5 s left
  Reopen();
  EXPECT_THAT(Take().records, ElementsAre("x", "assigned"));
  EXPECT_EQ(store_->NextExpiry(), clock_.Now() + Seconds(30));
  EXPECT_FALSE(Claim({"gpu"}, "other", Seconds(30)).claimed);
}

TEST_F(MemoryStoreTest, TtlChangeOnRenewIsJournaled) {
  Claim({"k"}, "a", Seconds(10));
  store_->Renew({"k"}, "a", Seconds(60), [](Result<RenewOutcome> r) { ASSERT_TRUE(r.ok()); });
  ASSERT_TRUE(AppendAndFlush("sync").ok());
  Reopen();
  EXPECT_EQ(store_->NextExpiry(), clock_.Now() + Seconds(60));
}

TEST_F(MemoryStoreTest, UnflushedChangesAreLostInACrashAndFlushedOnesKept) {
  Claim({"kept"}, "a", Seconds(30));
  ASSERT_TRUE(AppendAndFlush("durable").ok());
  Claim({"lost"}, "a", Seconds(30));
  bool ran = false;
  store_->Append("not flushed", [&ran](Status) { ran = true; });
  env_.SimulateCrash();
  Reopen();
  EXPECT_FALSE(ran);
  EXPECT_THAT(Take().records, ElementsAre("durable"));
  EXPECT_THAT(Holdings(), ElementsAre("kept=a"));
}

TEST_F(MemoryStoreTest, ExpiryIsJournaledSoARestartFreesAtOnce) {
  Claim({"k"}, "a", Seconds(10));
  clock_.Advance(Seconds(10));
  store_->ExpireDue(clock_.Now());
  ASSERT_TRUE(AppendAndFlush("sync").ok());
  Reopen();
  EXPECT_THAT(Holdings(), IsEmpty());
}

TEST_F(MemoryStoreTest, TornJournalTailIsReportedInRecovered) {
  ASSERT_TRUE(AppendAndFlush("one").ok());
  ASSERT_TRUE(AppendAndFlush("two").ok());
  store_.reset();
  std::string file = env_.ReadFile("/state/journal").value();
  env_.SetFile("/state/journal", file.substr(0, file.size() - 3));
  Reopen();
  Recovered recovered = Take();
  EXPECT_THAT(recovered.records, ElementsAre("one"));
  const size_t frame = file.size() / 2;  // both records frame to the same size
  EXPECT_EQ(recovered.discarded_bytes, frame - 3);
}

TEST_F(MemoryStoreTest, FullDiskReachesTheAppenderAsAStatus) {
  ASSERT_TRUE(AppendAndFlush("fits").ok());
  env_.SetFreeSpace(4);
  Status s = AppendAndFlush("does not fit");
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  env_.SetFreeSpace(std::nullopt);
  ASSERT_TRUE(AppendAndFlush("fits again").ok());
  Reopen();
  EXPECT_THAT(Take().records, ElementsAre("fits", "fits again"));
}

TEST_F(MemoryStoreTest, LeaseChangesLostToAFullDiskAreJournaledAgain) {
  Claim({"before"}, "a", Seconds(30));
  ASSERT_TRUE(AppendAndFlush("ok").ok());
  env_.SetFreeSpace(4);
  Claim({"during"}, "a", Seconds(30));
  Release({"before"}, "a");
  EXPECT_EQ(AppendAndFlush("lost").code(), StatusCode::kResourceExhausted);
  env_.SetFreeSpace(std::nullopt);
  ASSERT_TRUE(AppendAndFlush("later").ok());
  env_.SimulateCrash();
  Reopen();
  EXPECT_THAT(Take().records, ElementsAre("ok", "later"));
  EXPECT_THAT(Holdings(), ElementsAre("during=a"));
}

TEST_F(MemoryStoreTest, UnknownRecordKindRefusesToOpen) {
  store_.reset();
  std::string file;
  Journal::EncodeRecord("Zfuture", &file);
  env_.SetFile("/state/journal", file);
  auto opened = MemoryStore::Open(clock_, env_, kDir);
  EXPECT_EQ(opened.status().code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace drover::store
