// `drover report JOB [--html FILE] [--json] [--offset N] [--limit N]`: what
// a job did, task by task (GET /api/v1/jobs/{id}/report; docs/metrics.md).
// The figures cover the whole job; the task rows are one page (the server's
// cap: server/paging.h).
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/cli11.h"

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/report_view.h"
#include "common/ids.h"

namespace drover::cli {

namespace {

struct ReportOptions {
  ClientFlags client;
  std::string job;
  std::string html;  // write the HTML page here
  uint32_t offset = 0;
  uint32_t limit = 1000;
};

int RunReport(const ReportOptions& o) {
  Result<JobId> id = ParseJobId(o.job);
  if (!id.ok()) return ReportError(id.status(), /*usage_on_invalid=*/true);
  Result<ApiClient> api = Connect(o.client);
  if (!api.ok()) return ReportError(api.status());
  Result<nlohmann::json> report =
      api->Get("/api/v1/jobs/" + std::to_string(*id) + "/report?offset=" +
               std::to_string(o.offset) + "&limit=" + std::to_string(o.limit));
  if (!report.ok()) return ReportError(report.status());
  if (!o.html.empty()) {
    std::ofstream file(o.html, std::ios::binary | std::ios::trunc);
    file << ReportHtml(*report);
    file.close();
    if (!file) {
      return ReportError(Internal("--html: cannot write " + o.html));
    }
  }
  if (o.client.json) {
    std::cout << report->dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
              << std::endl;
  } else {
    std::cout << ReportText(*report);
    const nlohmann::json tasks = report->value("tasks", nlohmann::json::array());
    const uint64_t count = report->value("task_count", uint64_t{0});
    if (tasks.is_array() && tasks.size() < count) {
      std::cout << "\n(task rows " << o.offset << ".." << o.offset + tasks.size() << " of "
                << count << "; see --offset/--limit)\n";
    }
    if (!o.html.empty()) std::cout << "\nwrote " << o.html << "\n";
  }
  return kExitOk;
}

}  // namespace

void AddReportCommand(CLI::App& root, int& exit_code) {
  auto o = std::make_shared<ReportOptions>();
  CLI::App* cmd = root.add_subcommand(
      "report", "One job's report: per-task times, CPU, memory, efficiency, critical path");
  AddClientFlags(*cmd, o->client, /*with_json=*/true);
  cmd->add_option("job", o->job, "The job id (12)")->required();
  cmd->add_option("--html", o->html, "Also write a self-contained HTML page with a timeline");
  cmd->add_option("--offset", o->offset, "First task row to show");
  cmd->add_option("--limit", o->limit, "How many task rows to show (at most 1000)")
      ->capture_default_str();
  cmd->callback([o, &exit_code] { exit_code = RunReport(*o); });
}

}  // namespace drover::cli
