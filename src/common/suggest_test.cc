#include "common/suggest.h"

#include <gtest/gtest.h>

namespace drover {
namespace {

TEST(SuggestTest, EditDistanceCountsInsertsDeletesAndReplacements) {
  EXPECT_EQ(EditDistance("", ""), 0u);
  EXPECT_EQ(EditDistance("submit", "submit"), 0u);
  EXPECT_EQ(EditDistance("sbumit", "submit"), 2u);
  EXPECT_EQ(EditDistance("statu", "status"), 1u);
  EXPECT_EQ(EditDistance("", "abc"), 3u);
}

TEST(SuggestTest, ClosestNameIsALikelyTypoOrNothing) {
  const std::vector<std::string_view> commands = {"status", "submit", "retry"};
  EXPECT_EQ(ClosestName("sbumit", commands), "submit");
  EXPECT_EQ(ClosestName("stats", commands), "status");
  EXPECT_EQ(ClosestName("NOSUCHCOMMAND", commands), "");
  EXPECT_EQ(ClosestName("x", {"y"}), "") << "as many edits as letters is no typo";
  EXPECT_EQ(ClosestName(std::string(65, 'a'), {std::string(65, 'a')}), "");
}

}  // namespace
}  // namespace drover
