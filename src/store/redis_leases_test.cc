#include "store/redis_leases.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace drover::store {
namespace {

using ::testing::ElementsAre;

RedisReply Int(int64_t v) { return RedisReply{RedisReply::Type::kInteger, v, "", {}}; }
RedisReply Str(std::string s) { return RedisReply{RedisReply::Type::kString, 0, std::move(s), {}}; }
RedisReply Arr(std::vector<RedisReply> e) {
  return RedisReply{RedisReply::Type::kArray, 0, "", std::move(e)};
}
RedisReply Err(std::string s) { return RedisReply{RedisReply::Type::kError, 0, std::move(s), {}}; }

const Time kNow = TimeFromMicros(1'000'000'000);

TEST(RedisLeasesTest, NormaliseDropsRepeatsAndRefusesBadRequests) {
  auto keys = NormaliseLeaseRequest({"b", "a", "b", "a", "c"}, "o", Seconds(1));
  ASSERT_TRUE(keys.ok());
  EXPECT_THAT(*keys, ElementsAre("b", "a", "c"));
  EXPECT_EQ(NormaliseLeaseRequest({}, "o", std::nullopt).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(NormaliseLeaseRequest({"a"}, "", std::nullopt).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(NormaliseLeaseRequest({"a", ""}, "o", std::nullopt).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(NormaliseLeaseRequest({"a"}, "o", Micros(-1)).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(NormaliseLeaseRequest({"journal"}, "o", Seconds(1)).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(RedisLeasesTest, TtlRoundsUpToWholeMilliseconds) {
  EXPECT_EQ(TtlMillisArg(Micros(1)), "1");
  EXPECT_EQ(TtlMillisArg(Micros(1500)), "2");
  EXPECT_EQ(TtlMillisArg(Seconds(30)), "30000");
}

TEST(RedisLeasesTest, ClaimReplies) {
  const std::vector<LeaseKey> keys = {"k1", "k2"};
  auto won = ParseClaimReply(Arr({Int(1)}), keys, kNow, Seconds(3));
  ASSERT_TRUE(won.ok());
  EXPECT_TRUE(won->claimed);
  EXPECT_EQ(won->expires_at, kNow + Seconds(3));

  auto lost = ParseClaimReply(Arr({Int(0), Int(2), Str("task-a")}), keys, kNow, Seconds(3));
  ASSERT_TRUE(lost.ok());
  EXPECT_FALSE(lost->claimed);
  EXPECT_EQ(lost->conflict_key, "k2");
  EXPECT_EQ(lost->conflict_owner, "task-a");

  EXPECT_EQ(ParseClaimReply(Arr({Int(0), Int(3), Str("x")}), keys, kNow, Seconds(1)).status().code(),
            StatusCode::kInternal);
  EXPECT_EQ(ParseClaimReply(Str("?"), keys, kNow, Seconds(1)).status().code(),
            StatusCode::kInternal);
  EXPECT_EQ(ParseClaimReply(Err("BUSY script running"), keys, kNow, Seconds(1)).status().code(),
            StatusCode::kUnavailable);
  EXPECT_EQ(ParseClaimReply(Err("WRONGTYPE x"), keys, kNow, Seconds(1)).status().code(),
            StatusCode::kInternal);
}

TEST(RedisLeasesTest, IndexRepliesNameKeys) {
  const std::vector<LeaseKey> keys = {"k1", "k2", "k3"};
  auto lost = ParseKeyIndexReply(Arr({Int(1), Int(3)}), keys, "renew");
  ASSERT_TRUE(lost.ok());
  EXPECT_THAT(*lost, ElementsAre("k1", "k3"));
  EXPECT_TRUE(ParseKeyIndexReply(Arr({}), keys, "renew")->empty());
  EXPECT_FALSE(ParseKeyIndexReply(Arr({Int(0)}), keys, "renew").ok());
}

TEST(RedisLeasesTest, ListPageKeepsOnlyThisPrefixsLeases) {
  RedisKeys names("drover:", 0);
  auto page = ParseListReply(Arr({Str("17"), Str("drover:lease:1:gpu:0"), Str("t1"), Str("30000"),
                                  Int(29000), Str("drover:journal"), Str("x"), Str("1"), Int(1)}),
                             names, kNow);
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_EQ(page->next_cursor, "17");
  ASSERT_EQ(page->leases.size(), 1u);
  EXPECT_EQ(page->leases[0],
            (Lease{"lease:1:gpu:0", "t1", kNow + Millis(29000), Millis(30000)}));
  EXPECT_FALSE(ParseListReply(Arr({Str("0"), Str("k")}), names, kNow).ok());
}

TEST(RedisKeysTest, NamesAndNotifications) {
  RedisKeys names("dr*ver:", 3);
  EXPECT_EQ(names.Lease("leader"), "dr*ver:leader");
  EXPECT_EQ(names.journal(), "dr*ver:journal");
  EXPECT_EQ(names.ScanPattern(), "dr\\*ver:*");
  EXPECT_EQ(names.DelChannel(), "__keyevent@3__:del");
  EXPECT_EQ(names.ExpiredChannel(), "__keyevent@3__:expired");
  EXPECT_EQ(names.LeaseOf("dr*ver:worker:3:hb"), "worker:3:hb");
  EXPECT_EQ(names.LeaseOf("dr*ver:journal"), std::nullopt);
  EXPECT_EQ(names.LeaseOf("other:worker:3:hb"), std::nullopt);
  EXPECT_EQ(names.LeaseOf("dr*ver:"), std::nullopt);
}

}  // namespace
}  // namespace drover::store
