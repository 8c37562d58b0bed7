#include "cli/report_view.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace drover::cli {
namespace {

using nlohmann::json;

json Task(std::string id, std::string name, int64_t start, int64_t end, bool critical) {
  return {{"id", id},
          {"name", name},
          {"state", "succeeded"},
          {"worker", 1},
          {"worker_name", "w<1>"},
          {"deps", json::array()},
          {"start_ms", start},
          {"end_ms", end},
          {"wall_s", (end - start) / 1000.0},
          {"cpu_s", 0.5},
          {"peak_mem_bytes", 1048576},
          {"requested", {{"cpus", 1.0}, {"mem_bytes", 0}, {"gpus", 0.0}}},
          {"cpu_efficiency", 0.25},
          {"mem_efficiency", nullptr},
          {"attempts", 1},
          {"critical", critical},
          {"reason", ""}};
}

json Diamond() {
  return {{"job", "7"},
          {"name", "dia<mond>"},
          {"state", "succeeded"},
          {"makespan_s", 4.0},
          {"tasks", json::array({Task("7.0", "prep", 1000, 2000, true),
                                 Task("7.1", "fast", 2000, 2500, false),
                                 Task("7.2", "slow", 2000, 4000, true),
                                 Task("7.3", "join", 4000, 5000, true)})},
          {"critical_path", json::array({"7.0", "7.2", "7.3"})},
          {"critical_path_s", 4.0},
          {"slowest", json::array({"7.2", "7.0", "7.3", "7.1"})}};
}

TEST(ReportViewTest, TextHasTableSlowestCriticalPathAndTimeline) {
  const std::string text = ReportText(Diamond(), 40);
  EXPECT_NE(text.find("job 7 \"dia<mond>\": succeeded, makespan 4.0s, 4 tasks"), std::string::npos)
      << text;
  EXPECT_NE(text.find("TASK"), std::string::npos) << text;
  EXPECT_NE(text.find("CPU EFF"), std::string::npos) << text;
  EXPECT_NE(text.find("25%"), std::string::npos) << text;
  EXPECT_NE(text.find("1 MiB"), std::string::npos) << text;
  EXPECT_NE(text.find("slowest: 7.2, 7.0, 7.3, 7.1"), std::string::npos) << text;
  EXPECT_NE(text.find("critical path (4.0s): 7.0 -> 7.2 -> 7.3"), std::string::npos) << text;
  // Timeline: 40 columns for 4 s; prep 0-10 critical, fast 10-15, slow
  // 10-30 critical, join 30-40.
  EXPECT_NE(text.find("7.0  |==========\n"), std::string::npos) << text;
  EXPECT_NE(text.find("7.1  |..........#####\n"), std::string::npos) << text;
  EXPECT_NE(text.find("7.2  |..........====================\n"), std::string::npos) << text;
  EXPECT_NE(text.find("7.3  |..............................==========\n"), std::string::npos)
      << text;
}

// What a task read and wrote, where its cgroup counted it; "-" elsewhere.
TEST(ReportViewTest, DiskReadsAndWritesShowWhereCounted) {
  json report = Diamond();
  report["tasks"][2]["io_read_bytes"] = 4096;
  report["tasks"][2]["io_write_bytes"] = 200 << 20;
  const std::string text = ReportText(report, 0);
  EXPECT_NE(text.find("DISK R/W"), std::string::npos) << text;
  EXPECT_NE(text.find("4 KiB / 200 MiB"), std::string::npos) << text;
  const std::string html = ReportHtml(report);
  EXPECT_NE(html.find("<td class=\"num\">4 KiB / 200 MiB</td>"), std::string::npos) << html;
  EXPECT_NE(html.find("<th class=\"num\">disk r/w</th>"), std::string::npos) << html;
}

TEST(ReportViewTest, MissingFieldsPrintDashes) {
  const std::string text = ReportText(json{{"job", "3"}, {"tasks", json::array({{{"id", "3.0"}}})}});
  EXPECT_NE(text.find("critical path (-): -"), std::string::npos) << text;
  EXPECT_NE(text.find("3.0"), std::string::npos) << text;
  EXPECT_EQ(text.find("timeline"), std::string::npos) << text;
  EXPECT_NO_THROW(ReportText(json("not an object")));
  EXPECT_NO_THROW(ReportHtml(json::array()));
  const json odd{{"tasks", json::array({5, {{"id", "1.0"}, {"start_ms", "x"}, {"critical", 1}}})}};
  EXPECT_NO_THROW(ReportText(odd));
  EXPECT_NO_THROW(ReportHtml(odd));
}

TEST(ReportViewTest, HtmlIsSelfContainedEscapedAndMarksTheCriticalPath) {
  const std::string html = ReportHtml(Diamond());
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("<style>"), std::string::npos);
  for (const char* external : {"<script", "<link", " src=", " href=", "url(", "@import"}) {
    EXPECT_EQ(html.find(external), std::string::npos) << external;
  }
  EXPECT_EQ(html.find("dia<mond>"), std::string::npos);
  EXPECT_NE(html.find("dia&lt;mond&gt;"), std::string::npos);
  EXPECT_NE(html.find("w&lt;1&gt;"), std::string::npos);
  EXPECT_NE(html.find("7.0 → 7.2 → 7.3"), std::string::npos);
  // Three critical bars and rows, one plain.
  size_t critical_bars = 0;
  for (size_t at = html.find("class=\"bar critical\""); at != std::string::npos;
       at = html.find("class=\"bar critical\"", at + 1)) {
    ++critical_bars;
  }
  EXPECT_EQ(critical_bars, 3u);
  EXPECT_NE(html.find("class=\"bar\""), std::string::npos);
  EXPECT_EQ(HtmlEscape("a&b<'\">"), "a&amp;b&lt;&#39;&quot;&gt;");
}

}  // namespace
}  // namespace drover::cli
