// `drover status [JOB|TASK]` and `drover workers`: tables, or the API's
// JSON with --json.
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/cli11.h"

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/views.h"
#include "common/ids.h"

namespace drover::cli {

namespace {

struct StatusOptions {
  ClientFlags client;
  std::string what;   // "", "12" or "12.3"
  std::string state;  // jobs list filter
  uint32_t offset = 0;
  uint32_t limit = 1000;
};

int RunStatus(const StatusOptions& o) {
  std::string target;
  enum { kJobs, kJob, kTask } kind = kJobs;
  if (o.what.empty()) {
    target = "/api/v1/jobs" + (o.state.empty() ? "" : "?state=" + o.state);
  } else if (o.what.find('.') != std::string::npos) {
    Result<TaskId> id = ParseTaskId(o.what);
    if (!id.ok()) return ReportError(id.status(), /*usage_on_invalid=*/true);
    target = "/api/v1/tasks/" + id->ToString();
    kind = kTask;
  } else {
    Result<JobId> id = ParseJobId(o.what);
    if (!id.ok()) return ReportError(id.status(), /*usage_on_invalid=*/true);
    target = "/api/v1/jobs/" + std::to_string(*id) + "?offset=" + std::to_string(o.offset) +
             "&limit=" + std::to_string(o.limit);
    kind = kJob;
  }
  Result<ApiClient> api = Connect(o.client);
  if (!api.ok()) return ReportError(api.status());
  Result<nlohmann::json> answer = api->Get(target);
  if (!answer.ok()) return ReportError(answer.status());
  if (o.client.json) {
    std::cout << answer->dump(2) << std::endl;
    return kExitOk;
  }
  switch (kind) {
    case kJobs: std::cout << JobsView(*answer); break;
    case kJob: std::cout << JobView(*answer, NowMs()); break;
    case kTask: std::cout << TaskView(*answer, NowMs()); break;
  }
  return kExitOk;
}

struct WorkersOptions {
  ClientFlags client;
};

int RunWorkers(const WorkersOptions& o) {
  Result<ApiClient> api = Connect(o.client);
  if (!api.ok()) return ReportError(api.status());
  Result<nlohmann::json> answer = api->Get("/api/v1/workers");
  if (!answer.ok()) return ReportError(answer.status());
  if (o.client.json) {
    std::cout << answer->dump(2) << std::endl;
  } else {
    std::cout << WorkersView(*answer);
  }
  return kExitOk;
}

}  // namespace

void AddStatusCommand(CLI::App& root, int& exit_code) {
  auto s = std::make_shared<StatusOptions>();
  CLI::App* status = root.add_subcommand("status", "Jobs; one job and its tasks; or one task");
  AddClientFlags(*status, s->client, /*with_json=*/true);
  status->add_option("what", s->what, "A job id (12) or a task id (12.3); none lists jobs");
  status->add_option("--state", s->state, "Jobs list: active, done, or a task state");
  status->add_option("--offset", s->offset, "One job: first task to show");
  status->add_option("--limit", s->limit, "One job: how many tasks to show")->capture_default_str();
  status->callback([s, &exit_code] { exit_code = RunStatus(*s); });
}

void AddWorkersCommand(CLI::App& root, int& exit_code) {
  auto w = std::make_shared<WorkersOptions>();
  CLI::App* workers = root.add_subcommand("workers", "The workers and what they hold");
  AddClientFlags(*workers, w->client, /*with_json=*/true);
  workers->callback([w, &exit_code] { exit_code = RunWorkers(*w); });
}

}  // namespace drover::cli
