#include "metrics/prom_text.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdio>

namespace drover::metrics {

PromHistogram::PromHistogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {
  assert(std::is_sorted(bounds_.begin(), bounds_.end()));
}

void PromHistogram::Observe(double value) {
  // First bound >= value: buckets are upper-inclusive (le).
  const size_t i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) -
                                       bounds_.begin());
  ++counts_[i];
  sum_ += value;
  ++count_;
}

std::vector<double> LatencyBuckets() {
  std::vector<double> b;
  for (double v = 0.001; v < 70; v *= 2) b.push_back(v);
  return b;
}

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      case '\n': out += "\\n"; break;
      default: out += c;
    }
  }
  return out;
}

std::string EscapeHelp(std::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (value == std::floor(value) && std::fabs(value) < 1e15) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.0f", value);
    return buf;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.17g", value);
  // Shortest text that reads back as the same double.
  for (int precision = 1; precision <= 17; ++precision) {
    char shorter[32];
    std::snprintf(shorter, sizeof(shorter), "%.*g", precision, value);
    if (std::strtod(shorter, nullptr) == value) return shorter;
  }
  return buf;
}

bool ValidName(std::string_view name, bool label) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                       (!label && c == ':');
    const bool digit = c >= '0' && c <= '9';
    if (!(alpha || (i > 0 && digit))) return false;
  }
  return true;
}

void PromWriter::Family(std::string_view name, std::string_view help, MetricType type) {
  assert(ValidName(name));
  out_ += "# HELP ";
  out_ += name;
  out_ += ' ';
  out_ += EscapeHelp(help);
  out_ += "\n# TYPE ";
  out_ += name;
  switch (type) {
    case MetricType::kCounter: out_ += " counter\n"; break;
    case MetricType::kGauge: out_ += " gauge\n"; break;
    case MetricType::kHistogram: out_ += " histogram\n"; break;
  }
}

void PromWriter::Sample(std::string_view name, const Labels& labels, double value) {
  assert(ValidName(name));
  out_ += name;
  if (!labels.empty()) {
    out_ += '{';
    for (size_t i = 0; i < labels.size(); ++i) {
      assert(ValidName(labels[i].first, /*label=*/true));
      if (i > 0) out_ += ',';
      out_ += labels[i].first;
      out_ += "=\"";
      out_ += EscapeLabelValue(labels[i].second);
      out_ += '"';
    }
    out_ += '}';
  }
  out_ += ' ';
  out_ += FormatValue(value);
  out_ += '\n';
}

void PromWriter::Histogram(std::string_view name, const Labels& labels, const PromHistogram& h) {
  const std::string base(name);
  Labels with_le = labels;
  with_le.emplace_back("le", "");
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= h.bounds().size(); ++i) {
    cumulative += h.counts()[i];
    with_le.back().second =
        i < h.bounds().size() ? FormatValue(h.bounds()[i]) : std::string("+Inf");
    Sample(base + "_bucket", with_le, static_cast<double>(cumulative));
  }
  Sample(base + "_sum", labels, h.sum());
  Sample(base + "_count", labels, static_cast<double>(h.count()));
}

std::string PromWriter::Take() {
  std::string out = std::move(out_);
  out_.clear();
  return out;
}

}  // namespace drover::metrics
