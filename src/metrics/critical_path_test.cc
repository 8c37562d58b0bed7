#include "metrics/critical_path.h"

#include <gtest/gtest.h>
#include <gmock/gmock.h>

namespace drover::metrics {
namespace {

using ::testing::ElementsAre;

PathNode Node(int64_t start, int64_t end, std::vector<size_t> deps = {}) {
  PathNode n;
  n.end = end;
  n.wall = end - start;
  n.deps = std::move(deps);
  return n;
}

TEST(CriticalPathTest, EmptyWhenNothingEnded) {
  EXPECT_TRUE(CriticalPath({}).empty());
  std::vector<PathNode> nodes(2);
  nodes[1].deps = {0};
  EXPECT_TRUE(CriticalPath(nodes).empty());
}

TEST(CriticalPathTest, DiamondFollowsTheLongerBranch) {
  // prep(0..1) -> {fast(1..2), slow(1..5)} -> join(5..6)
  std::vector<PathNode> nodes = {Node(0, 1), Node(1, 2, {0}), Node(1, 5, {0}),
                                 Node(5, 6, {1, 2})};
  EXPECT_THAT(CriticalPath(nodes), ElementsAre(0, 2, 3));
  EXPECT_EQ(PathLength(nodes, CriticalPath(nodes)), 6);
  // The slow branch listed first makes no difference.
  nodes[3].deps = {2, 1};
  EXPECT_THAT(CriticalPath(nodes), ElementsAre(0, 2, 3));
}

TEST(CriticalPathTest, EndsAtTheTaskThatEndedLastEvenIfAnotherChainIsLonger) {
  // a(0..10) alone; b(0..3) -> c(3..11): c ended last, so the path is b, c
  // although a's own wall time is longer than b's.
  std::vector<PathNode> nodes = {Node(0, 10), Node(0, 3), Node(3, 11, {1})};
  EXPECT_THAT(CriticalPath(nodes), ElementsAre(1, 2));
}

TEST(CriticalPathTest, UsesWallTimesNotEndTimes) {
  // Two dependencies of d: x ran 1..9 (wall 8), y queued long, ran 8..10
  // (wall 2) and ended later. The summed wall time picks x.
  std::vector<PathNode> nodes = {Node(1, 9), Node(8, 10), Node(10, 12, {0, 1})};
  EXPECT_THAT(CriticalPath(nodes), ElementsAre(0, 2));
}

TEST(CriticalPathTest, TiesGoToTheDependencyThatEndedLaterThenTheLowerIndex) {
  std::vector<PathNode> nodes = {Node(0, 2), Node(1, 3), Node(3, 4, {0, 1})};
  EXPECT_THAT(CriticalPath(nodes), ElementsAre(1, 2));
  nodes = {Node(0, 2), Node(0, 2), Node(3, 4, {1, 0})};
  EXPECT_THAT(CriticalPath(nodes), ElementsAre(0, 2));
  // Two tasks ending last together: the lower index ends the path.
  nodes = {Node(0, 5), Node(1, 5)};
  EXPECT_THAT(CriticalPath(nodes), ElementsAre(0));
}

TEST(CriticalPathTest, LongChainDoesNotRecurse) {
  std::vector<PathNode> nodes;
  for (size_t i = 0; i < 200000; ++i) {
    nodes.push_back(Node(static_cast<int64_t>(i), static_cast<int64_t>(i) + 1));
    if (i > 0) nodes.back().deps = {i - 1};
  }
  EXPECT_EQ(CriticalPath(nodes).size(), nodes.size());
}

TEST(CriticalPathTest, BadIndicesAndCyclesAreIgnored) {
  std::vector<PathNode> nodes = {Node(0, 1, {1, 7}), Node(1, 2, {0})};
  EXPECT_THAT(CriticalPath(nodes), ElementsAre(0, 1));
}

TEST(CriticalPathTest, UnfinishedDependencyCountsWithItsWallTime) {
  std::vector<PathNode> nodes = {Node(0, 4), Node(4, 5, {0})};
  nodes[0].end.reset();  // e.g. a restored task whose end is unknown
  EXPECT_THAT(CriticalPath(nodes), ElementsAre(0, 1));
}

}  // namespace
}  // namespace drover::metrics
