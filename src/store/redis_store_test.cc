#include "store/redis_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "store/redis_connection.h"
#include "store/redis_store_test_util.h"
#include "store/store_conformance.h"
#include "tests/redis/loop_runner.h"
#include "tests/redis/redis_server.h"

namespace drover::store {
namespace {

using ::drover::testing::RunLoopUntil;
using ::drover::testing::TestRedisServer;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::AwaitOn;
using testing::kWait;
using testing::StartStore;
using testing::UniquePrefix;

// Runs the RedisStore through the conformance suite on the shared server,
// each test under its own prefix. Time is real (Redis's TTLs are), so the
// TTL is short; Pass() runs the loop meanwhile so notifications arrive.
class RedisHarness final : public StoreHarness {
 public:
  explicit RedisHarness(std::string url) : url_(std::move(url)), prefix_(UniquePrefix()) {
    Status s = Restart();
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  ~RedisHarness() override { store_.reset(); }

  Store& store() override { return *store_; }
  Duration ttl() const override { return Millis(800); }
  void Pass(Duration d) override { drover::testing::RunLoopFor(loop_, d); }
  bool RunUntil(const std::function<bool()>& done) override {
    return RunLoopUntil(loop_, done, kWait);
  }
  bool durable() const override { return true; }
  Status Restart() override {
    store_.reset();
    ASSIGN_OR_RETURN(store_, StartStore(loop_, {.url = url_, .prefix = prefix_}));
    return Status::Ok();
  }

 private:
  net::EventLoop loop_;
  std::string url_;
  std::string prefix_;
  std::unique_ptr<RedisStore> store_;
};

std::unique_ptr<StoreHarness> MakeRedisHarness() {
  auto url = drover::testing::SharedTestRedisUrl();
  EXPECT_TRUE(url.ok()) << url.status().ToString();
  if (!url.ok()) return nullptr;
  return std::make_unique<RedisHarness>(*url);
}

INSTANTIATE_TEST_SUITE_P(Redis, StoreConformanceTest,
                         ::testing::Values(StoreConformanceParam{"redis", MakeRedisHarness}),
                         StoreConformanceParamName);

// ---- What only the RedisStore does ----

class RedisStoreTest : public ::testing::Test {
 protected:
  // A store on the shared server under a fresh prefix.
  std::unique_ptr<RedisStore> SharedStore(std::string prefix = UniquePrefix()) {
    auto url = drover::testing::SharedTestRedisUrl();
    EXPECT_TRUE(url.ok()) << url.status().ToString();
    if (!url.ok()) return nullptr;
    auto store = StartStore(loop_, {.url = *url, .prefix = std::move(prefix)});
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(store).value() : nullptr;
  }

  Result<ClaimOutcome> Claim(Store& store, std::vector<LeaseKey> keys, const Owner& owner) {
    auto r = AwaitOn<Result<ClaimOutcome>>(
        loop_, [&](auto done) { store.Claim(keys, owner, Seconds(30), done); });
    return r ? *r : Result<ClaimOutcome>(Status(StatusCode::kDeadlineExceeded, "no answer"));
  }
  Status Release(Store& store, std::vector<LeaseKey> keys, const Owner& owner) {
    auto r = AwaitOn<Result<ReleaseOutcome>>(
        loop_, [&](auto done) { store.Release(keys, owner, done); });
    if (!r) return Status(StatusCode::kDeadlineExceeded, "no answer");
    return r->status();
  }
  Status Subscribe(Store& store, std::vector<FreeEvent>* into) {
    auto s = AwaitOn<Status>(loop_, [&](auto done) {
      store.Subscribe([into](const FreeEvent& e) { into->push_back(e); }, done);
    });
    return s ? *s : Status(StatusCode::kDeadlineExceeded, "no answer");
  }
  // A raw connection to `url`'s server, for poking at Redis directly.
  Result<RedisReply> Raw(const RedisUrl& url, std::vector<std::string> argv) {
    auto conn = RedisConnection::Connect(loop_, url.host, url.port, [](Status) {}, [](Status) {});
    auto r = AwaitOn<Result<RedisReply>>(loop_, [&](auto done) { conn->Command(argv, done); });
    return r ? *r : Result<RedisReply>(Status(StatusCode::kDeadlineExceeded, "no answer"));
  }

  net::EventLoop loop_;
};

TEST_F(RedisStoreTest, CreateRefusesBadOptions) {
  auto bad_url = RedisStore::Create(loop_, {.url = "redis://h:0/0"});
  EXPECT_EQ(bad_url.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad_url.status().message(), HasSubstr("port"));
  EXPECT_EQ(RedisStore::Create(loop_, {.prefix = ""}).status().code(),
            StatusCode::kInvalidArgument);
}

TEST_F(RedisStoreTest, CallsBeforeStartAndUnreachableServerAreUnavailable) {
  auto server = TestRedisServer::Start();
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const std::string url = (*server)->url();
  (*server)->Kill();  // nobody listens on its port now

  auto store = RedisStore::Create(loop_, {.url = url});
  ASSERT_TRUE(store.ok());
  auto early = AwaitOn<Result<ClaimOutcome>>(
      loop_, [&](auto done) { (*store)->Claim({"k"}, "a", Seconds(1), done); });
  ASSERT_TRUE(early.has_value());
  EXPECT_EQ(early->status().code(), StatusCode::kUnavailable);

  auto started = AwaitOn<Status>(loop_, [&](auto done) { (*store)->Start(done); });
  ASSERT_TRUE(started.has_value());
  EXPECT_EQ(started->code(), StatusCode::kUnavailable) << started->ToString();
  EXPECT_FALSE((*store)->connected());
}

TEST_F(RedisStoreTest, PasswordIsSentAndAWrongOneIsRefused) {
  auto server = TestRedisServer::Start({"--requirepass", "s3cret"});
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const std::string base = "redis://:%s@127.0.0.1:" + std::to_string((*server)->port()) + "/0";
  auto with = [&base](const std::string& pw) {
    std::string url = base;
    return url.replace(url.find("%s"), 2, pw);
  };
  auto wrong = StartStore(loop_, {.url = with("nope")});
  EXPECT_EQ(wrong.status().code(), StatusCode::kUnauthenticated) << wrong.status().ToString();
  auto right = StartStore(loop_, {.url = with("s3cret")});
  ASSERT_TRUE(right.ok()) << right.status().ToString();
  std::vector<FreeEvent> frees;
  ASSERT_TRUE(Subscribe(**right, &frees).ok());
  ASSERT_TRUE(Claim(**right, {"k"}, "a")->claimed);
  ASSERT_TRUE(Release(**right, {"k"}, "a").ok());
  EXPECT_TRUE(RunLoopUntil(loop_, [&] { return !frees.empty(); }, kWait));
}

TEST_F(RedisStoreTest, StartTurnsKeyspaceNotificationsOnKeepingOtherFlags) {
  auto server = TestRedisServer::Start({"--notify-keyspace-events", "Kl"});
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  auto store = StartStore(loop_, {.url = (*server)->url()});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto url = ParseRedisUrl((*server)->url());
  auto flags = Raw(*url, {"CONFIG", "GET", "notify-keyspace-events"});
  ASSERT_TRUE(flags.ok());
  ASSERT_EQ(flags->elements.size(), 2u);
  for (char c : std::string("KlEgx")) {
    EXPECT_NE(flags->elements[1].str.find(c), std::string::npos) << flags->elements[1].str;
  }
}

TEST_F(RedisStoreTest, RefusedConfigFailsStartSayingWhatToConfigure) {
  auto server = TestRedisServer::Start({"--rename-command", "CONFIG", ""});
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  auto store = StartStore(loop_, {.url = (*server)->url()});
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(store.status().message(),
              HasSubstr("notify-keyspace-events must include E, g and x: add "
                        "'notify-keyspace-events Egx' to redis.conf"));
}

TEST_F(RedisStoreTest, ReconnectsAfterTheServerRestartsAndSaysSo) {
  auto server = TestRedisServer::Start();
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  auto started = StartStore(loop_, {.url = (*server)->url(),
                                    .reconnect = {Millis(20), Millis(200), 2.0, 0.5}});
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  RedisStore& store = **started;
  int reconnects = 0;
  store.SetOnReconnected([&reconnects] { ++reconnects; });
  std::vector<FreeEvent> frees;
  ASSERT_TRUE(Subscribe(store, &frees).ok());
  ASSERT_TRUE(Claim(store, {"gpu"}, "a")->claimed);

  // Killed under a call: the call was sent to a dead socket and completes
  // with kUnavailable; so does every call until the server is back.
  (*server)->Kill();
  auto in_flight = Claim(store, {"other"}, "a");
  EXPECT_EQ(in_flight.status().code(), StatusCode::kUnavailable) << in_flight.status().ToString();
  EXPECT_FALSE(store.connected());
  EXPECT_EQ(Claim(store, {"other"}, "a").status().code(), StatusCode::kUnavailable);
  auto list = AwaitOn<Result<std::vector<Lease>>>(loop_, [&](auto done) { store.ListLeases(done); });
  EXPECT_EQ(list->status().code(), StatusCode::kUnavailable);
  // An append waits through the outage and is stored after it.
  std::optional<Status> appended;
  store.Append("r", [&appended](Status s) { appended = s; });
  store.Flush();
  loop_.Poll();
  EXPECT_FALSE(appended.has_value());
  EXPECT_EQ(reconnects, 0);

  ASSERT_TRUE((*server)->Restart().ok());
  ASSERT_TRUE(RunLoopUntil(loop_, [&] { return reconnects > 0; }, kWait));
  EXPECT_EQ(reconnects, 1);
  EXPECT_TRUE(store.connected());
  ASSERT_TRUE(RunLoopUntil(loop_, [&] { return appended.has_value(); }, kWait));
  EXPECT_TRUE(appended->ok()) << appended->ToString();
  // Works again, notifications included (the subscription was renewed).
  ASSERT_TRUE(Claim(store, {"gpu"}, "b")->claimed);
  ASSERT_TRUE(Release(store, {"gpu"}, "b").ok());
  ASSERT_TRUE(RunLoopUntil(loop_, [&] { return !frees.empty(); }, kWait));
  // The bare connection cannot know who held it.
  EXPECT_THAT(frees, ElementsAre(FreeEvent{"gpu", FreeReason::kReleased, ""}));
}

TEST_F(RedisStoreTest, PrefixesSeparateDeployments) {
  auto a = SharedStore();
  auto b = SharedStore();
  ASSERT_TRUE(a && b);
  std::vector<FreeEvent> frees_a, frees_b;
  ASSERT_TRUE(Subscribe(*a, &frees_a).ok());
  ASSERT_TRUE(Subscribe(*b, &frees_b).ok());
  ASSERT_TRUE(Claim(*a, {"leader"}, "server-a")->claimed);
  ASSERT_TRUE(Claim(*b, {"leader"}, "server-b")->claimed);
  ASSERT_TRUE(Release(*a, {"leader"}, "server-a").ok());
  // b's own release is the marker: frees arrive in order on one connection.
  ASSERT_TRUE(Release(*b, {"leader"}, "server-b").ok());
  ASSERT_TRUE(RunLoopUntil(loop_, [&] { return !frees_a.empty() && !frees_b.empty(); }, kWait));
  EXPECT_THAT(frees_a, ElementsAre(FreeEvent{"leader", FreeReason::kReleased, ""}));
  EXPECT_THAT(frees_b, ElementsAre(FreeEvent{"leader", FreeReason::kReleased, ""}));
}

TEST_F(RedisStoreTest, ReservedKeyIsRefused) {
  auto store = SharedStore();
  ASSERT_TRUE(store);
  EXPECT_EQ(Claim(*store, {"journal"}, "a").status().code(), StatusCode::kInvalidArgument);
}

TEST_F(RedisStoreTest, ScriptsAreReloadedAfterTheServerForgetsThem) {
  auto store = SharedStore();
  ASSERT_TRUE(store);
  auto url = ParseRedisUrl(drover::testing::SharedTestRedisUrl().value());
  ASSERT_TRUE(Raw(*url, {"SCRIPT", "FLUSH"}).ok());
  ASSERT_TRUE(Claim(*store, {"k"}, "a")->claimed);  // EVALSHA -> NOSCRIPT -> EVAL
  EXPECT_FALSE(Claim(*store, {"k"}, "b")->claimed);
}

TEST_F(RedisStoreTest, JournalIsReadBackInPagesAndInOrder) {
  const std::string prefix = UniquePrefix();
  auto store = SharedStore(prefix);
  ASSERT_TRUE(store);
  ASSERT_TRUE(AwaitOn<Result<Recovered>>(loop_, [&](auto done) { store->TakeRecovered(done); })
                  ->ok());
  constexpr int kRecords = 2345;  // three XRANGE pages
  int acknowledged = 0;
  for (int i = 0; i < kRecords; ++i) {
    store->Append("record " + std::to_string(i), [&acknowledged](Status s) {
      EXPECT_TRUE(s.ok()) << s.ToString();
      ++acknowledged;
    });
  }
  store->Flush();
  ASSERT_TRUE(RunLoopUntil(loop_, [&] { return acknowledged == kRecords; }, kWait));
  const uint64_t bytes = store->LogBytes();
  EXPECT_GT(bytes, 0u);

  store.reset();
  store = SharedStore(prefix);
  ASSERT_TRUE(store);
  auto recovered = AwaitOn<Result<Recovered>>(loop_, [&](auto done) { store->TakeRecovered(done); });
  ASSERT_TRUE(recovered && recovered->ok());
  const auto& records = (*recovered)->records;
  ASSERT_EQ(records.size(), static_cast<size_t>(kRecords));
  for (int i = 0; i < kRecords; ++i) ASSERT_EQ(records[i], "record " + std::to_string(i));
  EXPECT_EQ(store->LogBytes(), bytes);

  auto compacted = AwaitOn<Status>(loop_, [&](auto done) { store->Compact({"snap"}, done); });
  ASSERT_TRUE(compacted && compacted->ok()) << compacted->ToString();
  EXPECT_EQ(store->LogBytes(), 4u);
}

}  // namespace
}  // namespace drover::store
