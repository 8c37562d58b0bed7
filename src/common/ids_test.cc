#include "common/ids.h"

#include <gtest/gtest.h>

namespace drover {
namespace {

TEST(IdsTest, TaskIdRoundTrip) {
  TaskId id{12, 3};
  EXPECT_EQ(id.ToString(), "12.3");
  Result<TaskId> parsed = ParseTaskId("12.3");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(*parsed, id);
}

TEST(IdsTest, BadTaskIdsNameTheText) {
  for (const char* bad : {"12", "12.", ".3", "a.b", "0.1", "12.3.4", "12.-1"}) {
    Result<TaskId> r = ParseTaskId(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find(std::string("\"") + bad + "\""), std::string::npos)
        << r.status().message();
  }
  EXPECT_FALSE(ParseJobId("0").ok());
  EXPECT_FALSE(ParseJobId("x").ok());
  EXPECT_EQ(*ParseJobId("42"), 42u);
}

}  // namespace
}  // namespace drover
