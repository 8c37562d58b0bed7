#include "core_sim/lease_table.h"

#include "gtest/gtest.h"

namespace drover::core_sim {
namespace {

using core::LeaseKey;
using core::LeaseKind;

core::ClaimLeases ClaimOf(TaskId task, uint32_t attempt, std::vector<LeaseKey> keys) {
  return core::ClaimLeases{task, attempt, 1, std::move(keys), Seconds(30)};
}

TEST(LeaseTableTest, ClaimIsAllOrNothing) {
  LeaseTable t;
  const Time now = TimeFromMicros(1'000'000);
  const TaskId a{1, 0}, b{1, 1};
  ASSERT_TRUE(t.Claim(ClaimOf(a, 1, {{LeaseKind::kSlot, 1, 0, a}, {LeaseKind::kGpu, 1, 0, {}}}), now));
  EXPECT_FALSE(t.Claim(ClaimOf(b, 1, {{LeaseKind::kSlot, 1, 0, b}, {LeaseKind::kGpu, 1, 0, {}}}), now));
  EXPECT_FALSE(t.HoldsAny({b, 1}));  // nothing taken
  EXPECT_EQ(t.size(), 2u);
  EXPECT_EQ(t.Holder({LeaseKind::kGpu, 1, 0, {}})->task, a);
}

TEST(LeaseTableTest, ReleaseIsCompareAndDelete) {
  LeaseTable t;
  const Time now = TimeFromMicros(1'000'000);
  const TaskId a{1, 0};
  ASSERT_TRUE(t.Claim(ClaimOf(a, 2, {{LeaseKind::kSlot, 1, 0, a}}), now));
  EXPECT_FALSE(t.Release(core::ReleaseLeases{a, 1, 1, {{LeaseKind::kSlot, 1, 0, a}}}));  // old attempt
  EXPECT_TRUE(t.HoldsAny({a, 2}));
  EXPECT_TRUE(t.Release(core::ReleaseLeases{a, 2, 1, {{LeaseKind::kSlot, 1, 0, a}}}));
  EXPECT_FALSE(t.HoldsAny({a, 2}));
  EXPECT_EQ(t.size(), 0u);
}

TEST(LeaseTableTest, KeysExpireUnlessRenewed) {
  LeaseTable t;
  const Time start = TimeFromMicros(1'000'000);
  const TaskId a{1, 0}, b{2, 0};
  ASSERT_TRUE(t.Claim(ClaimOf(a, 1, {{LeaseKind::kSlot, 1, 0, a}, {LeaseKind::kGpu, 1, 3, {}}}), start));
  ASSERT_TRUE(t.Claim(ClaimOf(b, 1, {{LeaseKind::kSlot, 1, 0, b}}), start));
  EXPECT_EQ(*t.NextExpiry(), start + Seconds(30));
  // Renew only a's keys at +20 s.
  EXPECT_EQ(t.Renew(core::RenewLeases{1, {{LeaseKind::kSlot, 1, 0, a}, {LeaseKind::kGpu, 1, 3, {}},
                                          {LeaseKind::kSlot, 1, 0, TaskId{9, 9}}},
                                      Seconds(30)},
                    start + Seconds(20)),
            1u);  // one key did not exist
  std::vector<LeaseTable::Freed> freed;
  t.ExpireUntil(start + Seconds(30) - Micros(1), freed);
  EXPECT_TRUE(freed.empty());
  t.ExpireUntil(start + Seconds(30), freed);
  ASSERT_EQ(freed.size(), 1u);
  EXPECT_EQ(freed[0].owner.task, b);
  EXPECT_TRUE(freed[0].expired);
  EXPECT_TRUE(t.HoldsAny({a, 1}));
  freed.clear();
  t.ExpireUntil(start + Seconds(50), freed);
  ASSERT_EQ(freed.size(), 1u);  // one Freed per task, not per key
  EXPECT_EQ(freed[0].owner.task, a);
  EXPECT_EQ(t.size(), 0u);
  EXPECT_FALSE(t.NextExpiry().has_value());
}

}  // namespace
}  // namespace drover::core_sim
