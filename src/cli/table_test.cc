#include "cli/table.h"

#include <gtest/gtest.h>

namespace drover::cli {
namespace {

TEST(TableTest, PadsColumnsToTheWidestCell) {
  Table t({"ID", "NAME", "STATE"});
  t.AddRow({"12", "sweep", "running"});
  t.AddRow({"3", "a", "queued"});
  EXPECT_EQ(t.Render(),
            "ID  NAME   STATE\n"
            "12  sweep  running\n"
            "3   a      queued\n");
}

TEST(TableTest, CountsCodePointsNotBytesAndFillsMissingCells) {
  Table t({"A", "B"});
  t.AddRow({"µs"});
  t.AddRow({"xyz", "2"});
  EXPECT_EQ(t.Render(),
            "A    B\n"
            "µs\n"
            "xyz  2\n");
}

}  // namespace
}  // namespace drover::cli
