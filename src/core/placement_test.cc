#include "core/placement.h"

#include <gtest/gtest.h>

namespace drover::core {
namespace {

TEST(PlacementPolicyTest, SpreadPrefersFewestRunningThenLowestUtilisation) {
  auto p = MakePolicy(PolicyKind::kSpread);
  p->Add(WorkerLoad{0, 2, 10, 2, 0});
  p->Add(WorkerLoad{1, 1, 90, 3, 0});
  p->Add(WorkerLoad{2, 1, 20, 3, 0});
  EXPECT_EQ(p->Choose([](uint32_t) { return true; }), 2u);
  EXPECT_EQ(p->Choose([](uint32_t s) { return s != 2; }), 1u);
  p->Update(WorkerLoad{0, 0, 10, 4, 0});
  EXPECT_EQ(p->Choose([](uint32_t) { return true; }), 0u);
  p->Remove(0);
  EXPECT_EQ(p->Choose([](uint32_t s) { return s == 0; }), kNoWorker);
}

TEST(PlacementPolicyTest, PackPrefersTheFullestWorker) {
  auto p = MakePolicy(PolicyKind::kPack);
  p->Add(WorkerLoad{0, 0, 0, 8, 2});
  p->Add(WorkerLoad{1, 3, 0, 1, 2});
  EXPECT_EQ(p->Choose([](uint32_t) { return true; }), 1u);
  EXPECT_TRUE(p->PreferFullGpus());
}

TEST(PlacementPolicyTest, RoundRobinWraps) {
  auto p = MakePolicy(PolicyKind::kRoundRobin);
  for (uint32_t s = 0; s < 3; ++s) p->Add(WorkerLoad{s, 0, 0, 1, 0});
  std::vector<uint32_t> order;
  for (int i = 0; i < 4; ++i) order.push_back(p->Choose([](uint32_t) { return true; }));
  EXPECT_EQ(order, (std::vector<uint32_t>{0, 1, 2, 0}));
  EXPECT_EQ(*ParsePolicy("round-robin"), PolicyKind::kRoundRobin);
  EXPECT_FALSE(ParsePolicy("random").ok());
}

}  // namespace
}  // namespace drover::core
