// RedisServerStore against a real redis-server: startup answers, repair of
// deleted leases, release of leases without a holder, conflicts, and the
// journal's idempotent resend across a Redis restart.
#include "store/redis_server_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <future>
#include <thread>

#include "store/redis_connection.h"
#include "store/redis_store_test_util.h"
#include "tests/redis/loop_runner.h"
#include "tests/redis/redis_server.h"

namespace drover::store {
namespace {

using ::drover::testing::RunLoopUntil;
using ::drover::testing::TestRedisServer;
using testing::AwaitOn;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using testing::kWait;
using testing::UniquePrefix;

class RedisServerStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto url = drover::testing::SharedTestRedisUrl();
    ASSERT_TRUE(url.ok()) << url.status().ToString();
    url_ = *url;
    prefix_ = UniquePrefix();
  }

  std::unique_ptr<RedisServerStore> Open(std::string url = "") {
    RedisServerStoreOptions o;
    o.redis.url = url.empty() ? url_ : url;
    o.redis.prefix = prefix_;
    o.redis.reconnect = {Millis(20), Millis(200), 2.0, 0.5};
    o.reconcile_interval = Duration::zero();  // passes run when the test says
    auto s = RedisServerStore::Open(loop_, std::move(o));
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (!s.ok()) return nullptr;
    auto store = std::move(s).value();
    store->Subscribe([this](const FreeEvent& e) { frees_.push_back(e); }, [](Status) {});
    return store;
  }

  Result<RedisReply> Raw(std::vector<std::string> argv, std::string url = "") {
    auto parsed = ParseRedisUrl(url.empty() ? url_ : url);
    auto conn = RedisConnection::Connect(
        loop_, parsed->host, parsed->port, [](Status) {}, [](Status) {});
    auto r = AwaitOn<Result<RedisReply>>(loop_, [&](auto done) { conn->Command(argv, done); });
    return r ? *r : Result<RedisReply>(Status(StatusCode::kDeadlineExceeded, "no answer"));
  }

  bool Claim(Store& s, std::vector<LeaseKey> keys, const Owner& owner) {
    auto r = AwaitOn<Result<ClaimOutcome>>(
        loop_, [&](auto done) { s.Claim(keys, owner, Seconds(30), done); });
    return r && r->ok() && (*r)->claimed;
  }

  void Reconcile(RedisServerStore& s) {
    bool done = false;
    s.Reconcile([&done] { done = true; });
    ASSERT_TRUE(RunLoopUntil(
        loop_, [&] { return done; }, kWait));
  }

  std::string OwnerOf(const std::string& key) {
    auto r = Raw({"HGET", prefix_ + key, "owner"});
    return r.ok() ? r->str : "";
  }

  net::EventLoop loop_;
  std::string url_;
  std::string prefix_;
  std::vector<FreeEvent> frees_;
};

TEST_F(RedisServerStoreTest, StartupCallsAnswerAtOnceWithWhatOpenRead) {
  {
    auto first = Open();
    ASSERT_NE(first, nullptr);
    ASSERT_TRUE(Claim(*first, {"lease:1:gpu:0"}, "t#1@s"));
    std::optional<Status> appended;
    first->Append("record one", [&](Status s) { appended = s; });
    first->Flush();
    ASSERT_TRUE(RunLoopUntil(
        loop_, [&] { return appended.has_value(); }, kWait));
  }
  auto store = Open();
  ASSERT_NE(store, nullptr);
  std::optional<Result<Recovered>> recovered;
  store->TakeRecovered([&](Result<Recovered> r) { recovered = std::move(r); });
  ASSERT_TRUE(recovered.has_value());
  ASSERT_TRUE(recovered->ok());
  EXPECT_THAT((*recovered)->records, ElementsAre("record one"));
  std::optional<Result<std::vector<Lease>>> leases;
  store->ListLeases([&](Result<std::vector<Lease>> r) { leases = std::move(r); });
  ASSERT_TRUE(leases.has_value());
  ASSERT_EQ((*leases)->size(), 1u);
  EXPECT_EQ((**leases)[0].owner, "t#1@s");
}

TEST_F(RedisServerStoreTest, DeletedLeaseIsClaimedAgainNotReportedFree) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(Claim(*store, {"lease:1:slot:1.0", "lease:1:gpu:0"}, "t#1@s"));
  ASSERT_EQ(Raw({"DEL", prefix_ + "lease:1:gpu:0"})->integer, 1);
  ASSERT_TRUE(RunLoopUntil(
      loop_, [&] { return store->stats().reclaimed == 1; }, kWait));
  EXPECT_EQ(OwnerOf("lease:1:gpu:0"), "t#1@s");
  EXPECT_THAT(frees_, IsEmpty());

  // Unseen (notifications off): the next pass finds it missing.
  ASSERT_TRUE(Raw({"CONFIG", "SET", "notify-keyspace-events", ""}).ok());
  ASSERT_EQ(Raw({"DEL", prefix_ + "lease:1:gpu:0"})->integer, 1);
  ASSERT_TRUE(Raw({"CONFIG", "SET", "notify-keyspace-events", "Egx"}).ok());
  Reconcile(*store);
  ASSERT_TRUE(RunLoopUntil(
      loop_, [&] { return store->stats().reclaimed == 2; }, kWait));
  EXPECT_EQ(OwnerOf("lease:1:gpu:0"), "t#1@s");
  EXPECT_THAT(frees_, IsEmpty());
}

TEST_F(RedisServerStoreTest, LeaseWithoutHolderIsReleasedAndOursAreKept) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(Claim(*store, {"lease:1:slot:1.0"}, "t#1@s"));
  ASSERT_TRUE(Raw({"HSET", prefix_ + "lease:9:gpu:0", "owner", "ghost", "ttl", "60000"}).ok());
  ASSERT_TRUE(Raw({"PEXPIRE", prefix_ + "lease:9:gpu:0", "60000"}).ok());
  // Not a lease: never touched.
  ASSERT_TRUE(Raw({"HSET", prefix_ + "worker:9:hb", "owner", "server", "ttl", "60000"}).ok());
  ASSERT_TRUE(Raw({"PEXPIRE", prefix_ + "worker:9:hb", "60000"}).ok());
  Reconcile(*store);
  ASSERT_TRUE(RunLoopUntil(
      loop_, [&] { return OwnerOf("lease:9:gpu:0").empty(); }, kWait));
  EXPECT_EQ(store->stats().released, 1u);
  EXPECT_EQ(OwnerOf("lease:1:slot:1.0"), "t#1@s");
  EXPECT_EQ(OwnerOf("worker:9:hb"), "server");
  // Its release's `del` is passed on (nobody here held it).
  ASSERT_TRUE(RunLoopUntil(
      loop_, [&] { return !frees_.empty(); }, kWait));
  // Released by the reconciliation, for nobody here: no holder named.
  EXPECT_THAT(frees_, ElementsAre(FreeEvent{"lease:9:gpu:0", FreeReason::kReleased, ""}));
}

TEST_F(RedisServerStoreTest, LeaseNowSomeoneElsesStopsTheTask) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(Claim(*store, {"lease:1:slot:1.0"}, "t#1@s"));
  ASSERT_TRUE(Raw({"HSET", prefix_ + "lease:1:slot:1.0", "owner", "intruder"}).ok());
  Reconcile(*store);
  // The task's lease, named by its holder here.
  EXPECT_THAT(frees_, ElementsAre(FreeEvent{"lease:1:slot:1.0", FreeReason::kExpired, "t#1@s"}));
  EXPECT_EQ(store->stats().conflicts, 1u);
  // The intruder's lease now has no holder here: the next pass releases it.
  Reconcile(*store);
  ASSERT_TRUE(RunLoopUntil(
      loop_, [&] { return OwnerOf("lease:1:slot:1.0").empty(); }, kWait));
}

TEST_F(RedisServerStoreTest, ReleasedLeaseIsForgotten) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(Claim(*store, {"lease:1:slot:1.0"}, "t#1@s"));
  auto released = AwaitOn<Result<ReleaseOutcome>>(
      loop_, [&](auto done) { store->Release({"lease:1:slot:1.0"}, "t#1@s", done); });
  ASSERT_TRUE(released && released->ok());
  ASSERT_TRUE(RunLoopUntil(
      loop_, [&] { return !frees_.empty(); }, kWait));
  EXPECT_THAT(frees_, ElementsAre(FreeEvent{"lease:1:slot:1.0", FreeReason::kReleased, "t#1@s"}));
  Reconcile(*store);
  EXPECT_TRUE(OwnerOf("lease:1:slot:1.0").empty());
  EXPECT_EQ(store->stats().reclaimed, 0u);
}

// A GPU handed from one task to the next: release, then claim of the same
// key by the next task. The release's `del` event, notified after the new
// claim's answer, is not someone else's delete: no second claim, no repair,
// and the key stays the new holder's.
TEST_F(RedisServerStoreTest, HandoffOfAKeyClaimsItOnce) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  for (int task = 1; task <= 5; ++task) {
    const Owner prev = "t#" + std::to_string(task) + "@s";
    const Owner next = "t#" + std::to_string(task + 1) + "@s";
    if (task == 1) {
      ASSERT_TRUE(Claim(*store, {"lease:1:gpu:0"}, prev));
    }
    store->Release({"lease:1:gpu:0"}, prev, [](Result<ReleaseOutcome>) {});
    ASSERT_TRUE(Claim(*store, {"lease:1:gpu:0"}, next));
  }
  // Frees arrive in order on one subscription: once a later delete of
  // another key is seen, every handoff's `del` has been handled.
  ASSERT_TRUE(Raw({"HSET", prefix_ + "lease:9:slot:9.0", "owner", "x"}).ok());
  ASSERT_EQ(Raw({"DEL", prefix_ + "lease:9:slot:9.0"})->integer, 1);
  ASSERT_TRUE(RunLoopUntil(
      loop_, [&] { return !frees_.empty(); }, kWait));
  // Someone else's delete of a key nobody here held: no owner known.
  EXPECT_THAT(frees_, ElementsAre(FreeEvent{"lease:9:slot:9.0", FreeReason::kReleased, ""}));
  EXPECT_EQ(store->stats().reclaimed, 0u);
  EXPECT_EQ(OwnerOf("lease:1:gpu:0"), "t#6@s");
  // A real delete afterwards is still repaired.
  ASSERT_EQ(Raw({"DEL", prefix_ + "lease:1:gpu:0"})->integer, 1);
  ASSERT_TRUE(RunLoopUntil(
      loop_, [&] { return store->stats().reclaimed == 1; }, kWait));
  EXPECT_EQ(OwnerOf("lease:1:gpu:0"), "t#6@s");
}

// A renewal sent before a release and answered after it (they are
// pipelined on one connection) must not make the released key look held:
// the release's `del` would then pass for someone else's delete and the
// key be claimed again, a lease without a task until its TTL.
TEST_F(RedisServerStoreTest, ARenewalAnsweredAfterAReleaseDoesNotBringTheLeaseBack) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(Claim(*store, {"lease:1:slot:1.0"}, "t#1@s"));
  bool renewed = false;
  bool released = false;
  store->Renew({"lease:1:slot:1.0"}, "t#1@s", Seconds(30),
               [&](Result<RenewOutcome>) { renewed = true; });
  store->Release({"lease:1:slot:1.0"}, "t#1@s", [&](Result<ReleaseOutcome>) { released = true; });
  ASSERT_TRUE(RunLoopUntil(
      loop_, [&] { return renewed && released && !frees_.empty(); }, kWait));
  EXPECT_THAT(frees_, ElementsAre(FreeEvent{"lease:1:slot:1.0", FreeReason::kReleased, "t#1@s"}));
  Reconcile(*store);  // the pass also answers after anything the del caused
  EXPECT_TRUE(OwnerOf("lease:1:slot:1.0").empty());
  EXPECT_EQ(store->stats().reclaimed, 0u);
}

// A record whose XADD was cut off with the connection is sent again after
// the restart; when Redis had stored it, the resend is refused as a
// duplicate and counts as stored: the stream holds it once.
TEST_F(RedisServerStoreTest, JournalResendAfterARedisRestartStoresEachRecordOnce) {
  auto redis = TestRedisServer::Start({"--appendonly", "yes", "--appendfsync", "always"});
  ASSERT_TRUE(redis.ok()) << redis.status().ToString();
  const std::string url = (*redis)->url();
  auto store = Open(url);
  ASSERT_NE(store, nullptr);
  // The id the journal gives its first record, already in the stream: as
  // if stored just before the connection dropped.
  ASSERT_TRUE(Raw({"XADD", prefix_ + "journal", "1-0", "r", "first"}, url).ok());
  std::optional<Status> first;
  std::optional<Status> second;
  store->Append("first", [&](Status s) { first = s; });
  store->Flush();  // queued on the connection, not yet written
  (*redis)->Kill();
  store->Append("second", [&](Status s) { second = s; });
  store->Flush();
  ASSERT_TRUE(RunLoopUntil(
      loop_, [&] { return !store->redis().connected(); }, kWait));
  EXPECT_FALSE(first.has_value());
  ASSERT_TRUE((*redis)->Restart().ok());
  ASSERT_TRUE(RunLoopUntil(
      loop_, [&] { return first && second; }, kWait));
  EXPECT_TRUE(first->ok()) << first->ToString();
  EXPECT_TRUE(second->ok()) << second->ToString();
  auto range = Raw({"XRANGE", prefix_ + "journal", "-", "+"}, url);
  ASSERT_TRUE(range.ok());
  ASSERT_EQ(range->elements.size(), 2u);
  EXPECT_EQ(range->elements[0].elements[1].elements[1].str, "first");
  EXPECT_EQ(range->elements[1].elements[1].elements[1].str, "second");
}

// A leader restarted after a crash finds the leader lease still
// held by its previous run. That one is gone (previous_self says so), so the
// new run takes the lease over at once instead of waiting out its TTL; an
// owner previous_self does not recognise is waited for as before.
TEST_F(RedisServerStoreTest, ARestartedLeaderTakesItsOwnPreviousLeaseAtOnce) {
  // The previous run's lease, with a minute left.
  ASSERT_TRUE(Raw({"HSET", prefix_ + "leader", "owner", "10.0.0.1:7210/box:111:dead", "ttl",
                   "60000"})
                  .ok());
  ASSERT_TRUE(Raw({"PEXPIRE", prefix_ + "leader", "60000"}).ok());
  RedisServerStoreOptions o;
  o.redis.url = url_;
  o.redis.prefix = prefix_;
  o.reconcile_interval = Duration::zero();
  o.leader_ttl = Seconds(20);
  o.open_timeout = Seconds(5);
  o.leader_id = "10.0.0.1:7210/box:222:live";
  std::vector<std::string> asked;
  o.previous_self = [&asked](const std::string& owner) {
    asked.push_back(owner);
    return owner == "10.0.0.1:7210/box:111:dead";
  };
  bool standby = false;
  o.on_standby = [&standby](const std::string&) { standby = true; };
  const auto start = std::chrono::steady_clock::now();
  auto store = RedisServerStore::Open(loop_, o);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_FALSE(standby) << "it waited as a standby for its own lease";
  EXPECT_LT(took, std::chrono::seconds(5));
  EXPECT_EQ(asked, std::vector<std::string>{"10.0.0.1:7210/box:111:dead"});
  EXPECT_EQ(OwnerOf("leader"), "10.0.0.1:7210/box:222:live");
  auto ttl = Raw({"PTTL", prefix_ + "leader"});
  ASSERT_TRUE(ttl.ok());
  EXPECT_GT(ttl->integer, 10000);  // its own TTL now (20 s), renewed by it
  EXPECT_LE(ttl->integer, 20000);
}

// Two servers on one Redis: exactly one leader; the standby waits in Open
// and takes over within the TTL (plus a notification's delay) once the
// leader stops renewing — here "paused", as under SIGSTOP — and the paused
// leader, woken, can claim nothing and steps down.
TEST_F(RedisServerStoreTest, StandbyTakesOverAPausedLeaderWhichIsFencedWhenItWakes) {
  const Duration ttl = Millis(1500);
  RedisServerStoreOptions o;
  o.redis.url = url_;
  o.redis.prefix = prefix_;
  o.reconcile_interval = Duration::zero();
  o.leader_ttl = ttl;
  o.leader_id = "a";
  std::vector<std::string> lost;
  o.on_lost_leadership = [&lost](const std::string& why) { lost.push_back(why); };
  auto a = RedisServerStore::Open(loop_, o);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  (*a)->Subscribe([this](const FreeEvent& e) { frees_.push_back(e); }, [](Status) {});

  std::promise<std::string> standby;
  std::promise<std::chrono::steady_clock::time_point> took_over;
  std::promise<void> finish;
  std::thread b_thread([&, o]() mutable {
    net::EventLoop loop;
    o.leader_id = "b";
    o.on_lost_leadership = nullptr;
    o.on_standby = [&standby](const std::string& leader) { standby.set_value(leader); };
    auto b = RedisServerStore::Open(loop, o);
    EXPECT_TRUE(b.ok()) << b.status().ToString();
    took_over.set_value(std::chrono::steady_clock::now());
    finish.get_future().wait();
  });
  auto standby_leader = standby.get_future();
  auto took_over_at = took_over.get_future();
  // The leader keeps renewing while the standby starts and waits.
  ASSERT_TRUE(RunLoopUntil(
      loop_,
      [&] { return standby_leader.wait_for(std::chrono::seconds(0)) == std::future_status::ready; },
      kWait));
  EXPECT_EQ(standby_leader.get(), "a");
  EXPECT_EQ(took_over_at.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout)
      << "two leaders at once";

  // Paused: the leader's loop does not run; its lease runs out.
  const auto paused_at = std::chrono::steady_clock::now();
  if (took_over_at.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
    ADD_FAILURE() << "the standby never took over";
    std::_Exit(1);  // b_thread is blocked in Open for good
  }
  const auto takeover = took_over_at.get() - paused_at;
  EXPECT_LE(takeover, ttl + std::chrono::seconds(1));
  std::cout << "takeover after "
            << std::chrono::duration_cast<std::chrono::milliseconds>(takeover).count()
            << " ms without renewal (ttl 1500 ms)" << std::endl;

  // Woken: the claim is refused in the same step that checks leadership.
  auto claimed = AwaitOn<Result<ClaimOutcome>>(
      loop_, [&](auto done) { (*a)->Claim({"lease:1:gpu:0"}, "t#1@a", Seconds(30), done); });
  ASSERT_TRUE(claimed.has_value());
  EXPECT_EQ(claimed->status().code(), StatusCode::kFailedPrecondition)
      << claimed->status().ToString();
  EXPECT_TRUE(OwnerOf("lease:1:gpu:0").empty());
  ASSERT_FALSE(lost.empty());
  std::optional<Status> appended;
  (*a)->Append("late record", [&](Status s) { appended = s; });
  (*a)->Flush();
  ASSERT_TRUE(RunLoopUntil(
      loop_, [&] { return appended.has_value(); }, kWait));
  EXPECT_EQ(appended->code(), StatusCode::kFailedPrecondition) << appended->ToString();
  EXPECT_EQ(Raw({"XLEN", prefix_ + "journal"})->integer, 0);
  EXPECT_EQ(OwnerOf("leader"), "b");
  finish.set_value();
  b_thread.join();
}

// Compaction is fenced like claims and appends: a leader whose lease is now
// someone else's (as after a pause past its TTL) cannot replace the journal
// stream its successor appends to, and learns that it was deposed.
TEST_F(RedisServerStoreTest, DeposedLeaderCannotCompactTheJournal) {
  RedisServerStoreOptions o;
  o.redis.url = url_;
  o.redis.prefix = prefix_;
  o.reconcile_interval = Duration::zero();
  o.leader_ttl = Seconds(30);
  o.leader_id = "a";
  std::vector<std::string> lost;
  o.on_lost_leadership = [&lost](const std::string& why) { lost.push_back(why); };
  auto a = RedisServerStore::Open(loop_, o);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  (*a)->Subscribe([](const FreeEvent&) {}, [](Status) {});
  auto append = [&](std::string record) {
    std::optional<Status> done;
    (*a)->Append(std::move(record), [&](Status s) { done = s; });
    (*a)->Flush();
    EXPECT_TRUE(RunLoopUntil(loop_, [&] { return done.has_value(); }, kWait));
    return done.value_or(Status(StatusCode::kDeadlineExceeded, "no answer"));
  };
  auto compact = [&](std::vector<std::string> snapshot) {
    auto done =
        AwaitOn<Status>(loop_, [&](auto cb) { (*a)->Compact(std::move(snapshot), cb); });
    return done.value_or(Status(StatusCode::kDeadlineExceeded, "no answer"));
  };
  for (const char* r : {"r1", "r2", "r3"}) ASSERT_TRUE(append(r).ok());

  // As leader: the stream becomes the snapshot.
  Status s = compact({"snap1", "snap2"});
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(Raw({"XLEN", prefix_ + "journal"})->integer, 2);
  ASSERT_TRUE(append("r4").ok());
  EXPECT_EQ(Raw({"XLEN", prefix_ + "journal"})->integer, 3);

  // Deposed: another server holds the leader key now.
  ASSERT_EQ(Raw({"HSET", prefix_ + "leader", "owner", "b"})->integer, 0);
  s = compact({"stale"});
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
  EXPECT_NE(s.message().find("not the leader"), std::string::npos) << s.ToString();
  EXPECT_EQ(Raw({"XLEN", prefix_ + "journal"})->integer, 3) << "the stream was replaced";
  auto first = Raw({"XRANGE", prefix_ + "journal", "-", "+", "COUNT", "1"});
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->elements.size(), 1u);
  EXPECT_EQ(first->elements[0].elements[1].elements[1].str, "snap1");
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_NE(lost[0].find("not the leader"), std::string::npos) << lost[0];
}

}  // namespace
}  // namespace drover::store
