// Prometheus text exposition format, version 0.0.4 — the body of /metrics.
//
//   PromWriter w;
//   w.Family("drover_tasks", "Tasks by state.", MetricType::kGauge);
//   w.Sample("drover_tasks", {{"state", "running"}}, 3);
//   w.Family("drover_scheduling_latency_seconds", "...", MetricType::kHistogram);
//   w.Histogram("drover_scheduling_latency_seconds", {}, latency);
//   std::string body = w.Take();  // Content-Type: kPromContentType
//
// What it guarantees: one `# HELP` and one `# TYPE` line before a family's
// samples; label values escaped (backslash, double quote, newline); help
// text escaped (backslash, newline); values as Prometheus reads them
// (integers without exponent, "+Inf", "-Inf", "NaN"); histograms as
// cumulative `_bucket{le=..}` lines in increasing order ending with
// `le="+Inf"` (equal to `_count`), then `_sum` and `_count`.
// Metric and label names are the caller's constants; they must match
// [a-zA-Z_:][a-zA-Z0-9_:]* (label names without ':') — checked by
// ValidName, which the writer asserts in debug builds.
//
// Thread safety: PromWriter and PromHistogram are plain values, not
// synchronised.
#ifndef DROVER_METRICS_PROM_TEXT_H_
#define DROVER_METRICS_PROM_TEXT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace drover::metrics {

inline constexpr char kPromContentType[] = "text/plain; version=0.0.4; charset=utf-8";

enum class MetricType { kCounter, kGauge, kHistogram };

using Labels = std::vector<std::pair<std::string, std::string>>;

// A histogram with fixed upper bounds (seconds or any unit). Observations
// above the last bound land only in the implicit +Inf bucket.
class PromHistogram {
 public:
  // `bounds` strictly increasing and finite.
  explicit PromHistogram(std::vector<double> bounds);

  void Observe(double value);

  const std::vector<double>& bounds() const { return bounds_; }
  // Per bucket, NOT cumulative: counts()[i] observations in
  // (bounds[i-1], bounds[i]]; counts().back() those above every bound.
  const std::vector<uint64_t>& counts() const { return counts_; }
  double sum() const { return sum_; }
  uint64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // bounds_.size() + 1
  double sum_ = 0;
  uint64_t count_ = 0;
};

// Bounds from 1 ms to ~65 s, doubling: a latency histogram for most uses.
std::vector<double> LatencyBuckets();

class PromWriter {
 public:
  // Writes the `# HELP` and `# TYPE` lines of a family.
  void Family(std::string_view name, std::string_view help, MetricType type);
  // One sample line: `name{labels} value`.
  void Sample(std::string_view name, const Labels& labels, double value);
  // The _bucket/_sum/_count lines of one histogram of family `name`
  // (`labels` are added to each; `le` is appended to the bucket lines).
  void Histogram(std::string_view name, const Labels& labels, const PromHistogram& h);

  // The text so far; the writer is empty afterwards.
  std::string Take();

 private:
  std::string out_;
};

// "a\\b\"c\nd" -> a\\\\b\\\"c\\nd as the format wants inside "..."
std::string EscapeLabelValue(std::string_view value);
// Help text: backslash and newline escaped.
std::string EscapeHelp(std::string_view help);
// 3 -> "3", 0.25 -> "0.25", 1e300 -> "1e+300", inf -> "+Inf", nan -> "NaN".
std::string FormatValue(double value);
// True when `name` is a valid metric name (label name when `label`).
bool ValidName(std::string_view name, bool label = false);

}  // namespace drover::metrics

#endif  // DROVER_METRICS_PROM_TEXT_H_
