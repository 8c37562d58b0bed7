#include "cli/report_view.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <sstream>
#include <nlohmann/json.hpp>

#include "cli/table.h"
#include "cli/views.h"
#include "common/quantity.h"

namespace drover::cli {

namespace {

using nlohmann::json;

std::string Str(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key)) return "-";
  const json& v = j[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer() || v.is_number_unsigned()) return std::to_string(v.get<int64_t>());
  return "-";
}

std::optional<double> Num(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return std::nullopt;
  return j[key].get<double>();
}

std::optional<int64_t> Int(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return std::nullopt;
  return j[key].get<int64_t>();
}

std::string Secs(std::optional<double> s) {
  if (!s) return "-";
  return FormatSpan(static_cast<int64_t>(*s * 1000 + 0.5));
}

std::string Percent(std::optional<double> r) {
  if (!r) return "-";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.0f%%", *r * 100);
  return buf;
}

std::string Bytes(std::optional<int64_t> b) {
  return b && *b >= 0 ? FormatBytes(static_cast<uint64_t>(*b)) : "-";
}

// "12 MiB / 200 MiB": what a task read from and wrote to disk, where its
// cgroup counted it; "-" where not.
std::string DiskIo(const json& t) {
  const std::optional<int64_t> read = Int(t, "io_read_bytes");
  const std::optional<int64_t> written = Int(t, "io_write_bytes");
  if (!(read && *read >= 0) && !(written && *written >= 0)) return "-";
  return Bytes(read) + " / " + Bytes(written);
}

const json& Tasks(const json& report) {
  static const json kEmpty = json::array();
  return report.is_object() && report.contains("tasks") && report["tasks"].is_array()
             ? report["tasks"]
             : kEmpty;
}

std::string IdList(const json& report, const char* key, const char* sep) {
  if (!report.is_object() || !report.contains(key) || !report[key].is_array() ||
      report[key].empty()) {
    return "-";
  }
  std::string out;
  for (const json& id : report[key]) {
    if (!out.empty()) out += sep;
    out += id.is_string() ? id.get<std::string>() : "?";
  }
  return out;
}

bool Critical(const json& t) {
  return t.is_object() && t.contains("critical") && t["critical"].is_boolean() &&
         t["critical"].get<bool>();
}

std::string Worker(const json& t) {
  std::string name = Str(t, "worker_name");
  return name != "-" ? name : Str(t, "worker");
}

// The time span the timeline covers: first start to last end (or the
// latest start when nothing ended).
struct Span {
  int64_t from = 0;
  int64_t to = 0;
  bool valid = false;
};

Span TimelineSpan(const json& report) {
  Span s;
  for (const json& t : Tasks(report)) {
    std::optional<int64_t> start = Int(t, "start_ms");
    if (!start) continue;
    std::optional<double> wall = Num(t, "wall_s");
    const int64_t end = Int(t, "end_ms").value_or(*start + static_cast<int64_t>(wall.value_or(0) * 1000));
    if (!s.valid) {
      s = {*start, end, true};
    } else {
      s.from = std::min(s.from, *start);
      s.to = std::max(s.to, end);
    }
  }
  if (s.valid && s.to <= s.from) s.to = s.from + 1;
  return s;
}

int64_t EndOf(const json& t) {
  const int64_t start = Int(t, "start_ms").value_or(0);
  return Int(t, "end_ms").value_or(start + static_cast<int64_t>(Num(t, "wall_s").value_or(0) * 1000));
}

}  // namespace

std::string HtmlEscape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string ReportText(const json& report, int width) {
  std::ostringstream out;
  out << "job " << Str(report, "job") << " \"" << Str(report, "name") << "\": "
      << Str(report, "state") << ", makespan " << Secs(Num(report, "makespan_s")) << ", "
      << Tasks(report).size() << " tasks\n\n";

  Table table({"TASK", "NAME", "STATE", "WORKER", "WALL", "CPU", "PEAK MEM", "DISK R/W", "REQ CPUS",
               "CPU EFF", "MEM EFF", "TRIES", "CRIT"});
  for (const json& t : Tasks(report)) {
    const json req = t.is_object() && t.contains("requested") ? t["requested"] : json();
    std::optional<double> cpus = Num(req, "cpus");
    char cpus_text[32] = "-";
    if (cpus) std::snprintf(cpus_text, sizeof(cpus_text), "%g", *cpus);
    const bool critical = Critical(t);
    table.AddRow({Str(t, "id"), Str(t, "name"), Str(t, "state"), Worker(t), Secs(Num(t, "wall_s")),
                  Secs(Num(t, "cpu_s")), Bytes(Int(t, "peak_mem_bytes")), DiskIo(t), cpus_text,
                  Percent(Num(t, "cpu_efficiency")), Percent(Num(t, "mem_efficiency")),
                  Str(t, "attempts"), critical ? "*" : ""});
  }
  out << table.Render() << "\n";
  out << "slowest: " << IdList(report, "slowest", ", ") << "\n";
  out << "critical path (" << Secs(Num(report, "critical_path_s"))
      << "): " << IdList(report, "critical_path", " -> ") << "\n";

  const Span span = TimelineSpan(report);
  if (!span.valid || width < 10) return out.str();
  out << "\ntimeline (" << FormatSpan(span.to - span.from) << ", '=' critical)\n";
  size_t id_width = 4;
  for (const json& t : Tasks(report)) id_width = std::max(id_width, Str(t, "id").size());
  const double scale = static_cast<double>(width) / static_cast<double>(span.to - span.from);
  for (const json& t : Tasks(report)) {
    std::string id = Str(t, "id");
    id.resize(id_width, ' ');
    std::string bar(static_cast<size_t>(width), ' ');
    if (std::optional<int64_t> start = Int(t, "start_ms")) {
      const int a = std::clamp(static_cast<int>((*start - span.from) * scale), 0, width - 1);
      const int b = std::clamp(static_cast<int>((EndOf(t) - span.from) * scale), a + 1, width);
      std::fill(bar.begin(), bar.begin() + a, '.');
      const char mark = Critical(t) ? '=' : '#';
      std::fill(bar.begin() + a, bar.begin() + b, mark);
    }
    while (!bar.empty() && bar.back() == ' ') bar.pop_back();
    out << id << " |" << bar << "\n";
  }
  return out.str();
}

std::string ReportHtml(const json& report) {
  std::ostringstream h;
  const std::string title = "drover job " + Str(report, "job") + " — " + Str(report, "name");
  h << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>"
    << HtmlEscape(title) << "</title>\n<style>\n"
    << "body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}\n"
    << "h1{font-size:1.4em}table{border-collapse:collapse;margin-top:1em}\n"
    << "th,td{padding:3px 8px;border-bottom:1px solid #ddd;text-align:left;"
       "font-variant-numeric:tabular-nums}\n"
    << "tr.critical td{background:#fff3e0}.num{text-align:right}\n"
    << "svg text{font:11px monospace}.bar{fill:#5c8dd6}.bar.critical{fill:#e8590c}\n"
    << ".state-failed{color:#c92a2a}.state-succeeded{color:#2b8a3e}\n"
    << "</style></head><body>\n";
  h << "<h1>" << HtmlEscape(title) << "</h1>\n<p>state <b class=\"state-"
    << HtmlEscape(Str(report, "state")) << "\">" << HtmlEscape(Str(report, "state"))
    << "</b>, makespan " << HtmlEscape(Secs(Num(report, "makespan_s"))) << ", "
    << Tasks(report).size() << " tasks</p>\n";
  h << "<p>critical path (" << HtmlEscape(Secs(Num(report, "critical_path_s")))
    << "): <b>" << HtmlEscape(IdList(report, "critical_path", " → ")) << "</b><br>slowest: "
    << HtmlEscape(IdList(report, "slowest", ", ")) << "</p>\n";

  // The timeline: one row per task, bars on a time axis.
  const Span span = TimelineSpan(report);
  if (span.valid) {
    const int label_w = 160;
    const int chart_w = 720;
    const int row_h = 18;
    const int rows = static_cast<int>(Tasks(report).size());
    const int height = rows * row_h + 24;
    const double scale = static_cast<double>(chart_w) / static_cast<double>(span.to - span.from);
    h << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << label_w + chart_w + 10
      << "\" height=\"" << height << "\" role=\"img\" aria-label=\"timeline\">\n";
    int row = 0;
    for (const json& t : Tasks(report)) {
      const int y = row * row_h;
      h << "<text x=\"0\" y=\"" << y + 13 << "\">"
        << HtmlEscape(Str(t, "id") + " " + Str(t, "name")) << "</text>\n";
      if (std::optional<int64_t> start = Int(t, "start_ms")) {
        const double x = label_w + (*start - span.from) * scale;
        const double w = std::max(1.0, (EndOf(t) - *start) * scale);
        const bool critical = Critical(t);
        h << "<rect class=\"bar" << (critical ? " critical" : "") << "\" x=\"" << x << "\" y=\""
          << y + 3 << "\" width=\"" << w << "\" height=\"" << row_h - 6 << "\"><title>"
          << HtmlEscape(Str(t, "id") + " " + Str(t, "name") + ": " + Secs(Num(t, "wall_s")))
          << "</title></rect>\n";
      }
      ++row;
    }
    h << "<text x=\"" << label_w << "\" y=\"" << height - 6 << "\">0</text>"
      << "<text x=\"" << label_w + chart_w - 60 << "\" y=\"" << height - 6 << "\">"
      << HtmlEscape(FormatSpan(span.to - span.from)) << "</text>\n</svg>\n";
  }

  h << "<table>\n<tr><th>task</th><th>name</th><th>state</th><th>worker</th>"
    << "<th class=\"num\">wall</th><th class=\"num\">cpu</th><th class=\"num\">peak mem</th>"
    << "<th class=\"num\">disk r/w</th>"
    << "<th class=\"num\">req cpus</th><th class=\"num\">cpu eff</th>"
    << "<th class=\"num\">mem eff</th><th class=\"num\">tries</th><th>deps</th>"
    << "<th>reason</th></tr>\n";
  for (const json& t : Tasks(report)) {
    const json req = t.is_object() && t.contains("requested") ? t["requested"] : json();
    std::optional<double> cpus = Num(req, "cpus");
    char cpus_text[32] = "-";
    if (cpus) std::snprintf(cpus_text, sizeof(cpus_text), "%g", *cpus);
    std::string deps;
    if (t.is_object() && t.contains("deps") && t["deps"].is_array()) {
      for (const json& d : t["deps"]) {
        if (!deps.empty()) deps += ", ";
        deps += d.is_string() ? d.get<std::string>() : "?";
      }
    }
    const bool critical = Critical(t);
    h << "<tr" << (critical ? " class=\"critical\"" : "") << "><td>" << HtmlEscape(Str(t, "id"))
      << "</td><td>" << HtmlEscape(Str(t, "name")) << "</td><td class=\"state-"
      << HtmlEscape(Str(t, "state")) << "\">" << HtmlEscape(Str(t, "state")) << "</td><td>"
      << HtmlEscape(Worker(t)) << "</td><td class=\"num\">" << Secs(Num(t, "wall_s"))
      << "</td><td class=\"num\">" << Secs(Num(t, "cpu_s")) << "</td><td class=\"num\">"
      << Bytes(Int(t, "peak_mem_bytes")) << "</td><td class=\"num\">" << HtmlEscape(DiskIo(t))
      << "</td><td class=\"num\">" << cpus_text << "</td><td class=\"num\">"
      << Percent(Num(t, "cpu_efficiency")) << "</td><td class=\"num\">"
      << Percent(Num(t, "mem_efficiency")) << "</td><td class=\"num\">"
      << HtmlEscape(Str(t, "attempts")) << "</td><td>" << HtmlEscape(deps) << "</td><td>"
      << HtmlEscape(Str(t, "reason")) << "</td></tr>\n";
  }
  h << "</table>\n</body></html>\n";
  return h.str();
}

}  // namespace drover::cli
