// Report views: `drover report`'s terminal text and its self-contained HTML
// page, from GET /api/v1/jobs/{id}/report (shape in metrics/job_report.h
// and docs/metrics.md). They only format; fetching is the command's job.
//
// Like views.h, missing or mistyped fields print as "-" instead of failing.
//
// Thread safety: pure functions.
#ifndef DROVER_CLI_REPORT_VIEW_H_
#define DROVER_CLI_REPORT_VIEW_H_

#include <string>

#include <nlohmann/json_fwd.hpp>

namespace drover::cli {

// A header (job, state, makespan), a task table (TASK NAME STATE WORKER
// WALL CPU PEAK MEM REQ CPUS CPU EFF MEM EFF CRIT; critical tasks marked
// "*"), the slowest tasks, the critical path ("12.0 -> 12.2 -> 12.3") and a
// text timeline `width` characters wide: one line per task, '#' while it ran
// ('=' for tasks on the critical path), '.' before.
std::string ReportText(const nlohmann::json& report, int width = 60);

// One HTML page, no external resources (inline CSS and an SVG timeline):
// the summary, the critical path, an SVG Gantt chart of the tasks (critical
// ones highlighted) and the task table. Every text from the report is
// HTML-escaped.
std::string ReportHtml(const nlohmann::json& report);

// Escapes & < > " ' for HTML text and attribute values.
std::string HtmlEscape(const std::string& text);

}  // namespace drover::cli

#endif  // DROVER_CLI_REPORT_VIEW_H_
