#include "core/dag.h"

#include <gtest/gtest.h>

#include "core/testing/test_cluster.h"

namespace drover::core {
namespace {

using testing::TaskBuilder;

JobSpec Job(std::vector<TaskBuilder> tasks) {
  JobSpec spec;
  for (const TaskBuilder& t : tasks) spec.groups.push_back(t.Build());
  return spec;
}

TEST(DagTest, BuildsDepsAndDependents) {
  Result<GroupGraph> g = BuildGroupGraph(
      Job({TaskBuilder("prep"), TaskBuilder("train").DependsOn("prep"),
           TaskBuilder("report").DependsOn("train").DependsOn("prep")}));
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->deps[2], (std::vector<uint32_t>{1, 0}));
  EXPECT_EQ(g->dependents[0], (std::vector<uint32_t>{1, 2}));
}

TEST(DagTest, RejectsUnknownNamesDuplicatesAndCycles) {
  EXPECT_EQ(BuildGroupGraph(Job({TaskBuilder("a").DependsOn("b")})).status().message(),
            "task \"a\" depends on unknown task \"b\"");
  EXPECT_FALSE(BuildGroupGraph(Job({TaskBuilder("a"), TaskBuilder("a")})).ok());
  Result<GroupGraph> cycle = BuildGroupGraph(
      Job({TaskBuilder("a").DependsOn("c"), TaskBuilder("b").DependsOn("a"),
           TaskBuilder("c").DependsOn("b")}));
  ASSERT_FALSE(cycle.ok());
  EXPECT_NE(cycle.status().message().find("cycle"), std::string::npos);
}

TEST(ArrayRangeTest, ParsesRangesAndSteps) {
  EXPECT_EQ(ParseArrayRange("0-7")->count, 8u);
  EXPECT_EQ(ParseArrayRange("5")->first, 5);
  EXPECT_EQ(ParseArrayRange("0-99:2")->count, 50u);
  EXPECT_FALSE(ParseArrayRange("7-0").ok());
  EXPECT_EQ(ExpandCommand({"train", "--seed={index}"}, 3),
            (std::vector<std::string>{"train", "--seed=3"}));
}

}  // namespace
}  // namespace drover::core
