#include "cli/core_split.h"

#include <gtest/gtest.h>

namespace drover::cli {
namespace {

TEST(CoreSplitTest, FormatsRuns) {
  EXPECT_EQ(FormatCoreList({0, 1, 2, 3, 5, 7, 8}), "0-3,5,7-8");
  EXPECT_EQ(FormatCoreList({4}), "4");
  EXPECT_EQ(FormatCoreList({}), "");
}

TEST(CoreSplitTest, GivesEachWorkerDisjointCoresFirstOnesLonger) {
  Result<std::vector<std::string>> s = SplitCores({0, 1, 2, 3, 4}, 2);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(*s, (std::vector<std::string>{"0-2", "3-4"}));
  s = SplitCores({0, 2, 4, 6}, 4);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*s, (std::vector<std::string>{"0", "2", "4", "6"}));
}

TEST(CoreSplitTest, RefusesMoreWorkersThanCores) {
  Result<std::vector<std::string>> s = SplitCores({0, 1}, 3);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("only 2 cores"), std::string::npos);
  EXPECT_FALSE(SplitCores({0, 1}, 0).ok());
}

TEST(CoreSplitTest, AvailableCoresAreSortedAndNonEmpty) {
  Result<std::vector<int>> cores = AvailableCores();
  ASSERT_TRUE(cores.ok());
  ASSERT_FALSE(cores->empty());
  EXPECT_TRUE(std::is_sorted(cores->begin(), cores->end()));
}

}  // namespace
}  // namespace drover::cli
