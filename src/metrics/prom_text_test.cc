#include "metrics/prom_text.h"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

namespace drover::metrics {
namespace {

TEST(PromTextTest, EscapesLabelValuesAndHelp) {
  EXPECT_EQ(EscapeLabelValue("plain"), "plain");
  EXPECT_EQ(EscapeLabelValue("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
  EXPECT_EQ(EscapeHelp("x \"quoted\" \\ y\nz"), "x \"quoted\" \\\\ y\\nz");
}

TEST(PromTextTest, FormatsValuesAsPrometheusReadsThem) {
  EXPECT_EQ(FormatValue(0), "0");
  EXPECT_EQ(FormatValue(3), "3");
  EXPECT_EQ(FormatValue(-2), "-2");
  EXPECT_EQ(FormatValue(0.25), "0.25");
  EXPECT_EQ(FormatValue(0.1), "0.1");
  EXPECT_EQ(FormatValue(123456789012.0), "123456789012");
  EXPECT_EQ(FormatValue(1e300), "1e+300");
  EXPECT_EQ(FormatValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatValue(std::nan("")), "NaN");
  EXPECT_EQ(std::stod(FormatValue(1.0 / 3)), 1.0 / 3);
}

TEST(PromTextTest, ValidNames) {
  EXPECT_TRUE(ValidName("drover_tasks"));
  EXPECT_TRUE(ValidName("a:b_c9"));
  EXPECT_FALSE(ValidName("9a"));
  EXPECT_FALSE(ValidName(""));
  EXPECT_FALSE(ValidName("a-b"));
  EXPECT_TRUE(ValidName("worker", /*label=*/true));
  EXPECT_FALSE(ValidName("a:b", /*label=*/true));
}

TEST(PromTextTest, FamilyAndSamples) {
  PromWriter w;
  w.Family("drover_tasks", "Tasks by state.\nSecond line.", MetricType::kGauge);
  w.Sample("drover_tasks", {{"state", "running"}}, 3);
  w.Sample("drover_tasks", {{"state", "a\"b"}, {"worker", "w\\1"}}, 0.5);
  w.Family("drover_claims_total", "Claims.", MetricType::kCounter);
  w.Sample("drover_claims_total", {}, 7);
  EXPECT_EQ(w.Take(),
            "# HELP drover_tasks Tasks by state.\\nSecond line.\n"
            "# TYPE drover_tasks gauge\n"
            "drover_tasks{state=\"running\"} 3\n"
            "drover_tasks{state=\"a\\\"b\",worker=\"w\\\\1\"} 0.5\n"
            "# HELP drover_claims_total Claims.\n"
            "# TYPE drover_claims_total counter\n"
            "drover_claims_total 7\n");
  EXPECT_EQ(w.Take(), "");
}

TEST(PromTextTest, HistogramIsCumulativeWithInfEqualToCount) {
  PromHistogram h({0.1, 1, 10});
  h.Observe(0.05);
  h.Observe(0.1);  // upper bounds are inclusive
  h.Observe(0.5);
  h.Observe(100);  // above every bound
  EXPECT_EQ(h.count(), 4u);
  EXPECT_DOUBLE_EQ(h.sum(), 100.65);
  PromWriter w;
  w.Family("lat_seconds", "Latency.", MetricType::kHistogram);
  w.Histogram("lat_seconds", {{"kind", "x"}}, h);
  EXPECT_EQ(w.Take(),
            "# HELP lat_seconds Latency.\n"
            "# TYPE lat_seconds histogram\n"
            "lat_seconds_bucket{kind=\"x\",le=\"0.1\"} 2\n"
            "lat_seconds_bucket{kind=\"x\",le=\"1\"} 3\n"
            "lat_seconds_bucket{kind=\"x\",le=\"10\"} 3\n"
            "lat_seconds_bucket{kind=\"x\",le=\"+Inf\"} 4\n"
            "lat_seconds_sum{kind=\"x\"} 100.65\n"
            "lat_seconds_count{kind=\"x\"} 4\n");
}

TEST(PromTextTest, EmptyHistogramAndLatencyBuckets) {
  PromWriter w;
  w.Histogram("h", {}, PromHistogram(LatencyBuckets()));
  const std::string text = w.Take();
  EXPECT_NE(text.find("h_bucket{le=\"0.001\"} 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("h_bucket{le=\"+Inf\"} 0\nh_sum 0\nh_count 0\n"), std::string::npos) << text;
  const std::vector<double> b = LatencyBuckets();
  ASSERT_GE(b.size(), 10u);
  for (size_t i = 1; i < b.size(); ++i) EXPECT_LT(b[i - 1], b[i]);
  EXPECT_GE(b.back(), 60.0);
}

}  // namespace
}  // namespace drover::metrics
