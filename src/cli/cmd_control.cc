// `drover cancel JOB|TASK`, `drover retry JOB`, `drover wait JOB`,
// `drover drain [--undo] WORKER`.
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/cli11.h"

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/views.h"
#include "cli/wait_job.h"
#include "common/ids.h"

namespace drover::cli {

namespace {

struct TargetOptions {
  ClientFlags client;
  std::string target;
  bool undo = false;
  bool quiet = false;
};

int PrintAnswer(const ClientFlags& client, const Result<nlohmann::json>& answer,
                const std::string& done_line) {
  if (!answer.ok()) return ReportError(answer.status());
  std::cout << (client.json ? answer->dump(2) : done_line) << std::endl;
  return kExitOk;
}

int RunCancel(const TargetOptions& o) {
  std::string path;
  if (o.target.find('.') != std::string::npos) {
    Result<TaskId> id = ParseTaskId(o.target);
    if (!id.ok()) return ReportError(id.status(), /*usage_on_invalid=*/true);
    path = "/api/v1/tasks/" + id->ToString() + "/cancel";
  } else {
    Result<JobId> id = ParseJobId(o.target);
    if (!id.ok()) return ReportError(id.status(), /*usage_on_invalid=*/true);
    path = "/api/v1/jobs/" + std::to_string(*id) + "/cancel";
  }
  Result<ApiClient> api = Connect(o.client);
  if (!api.ok()) return ReportError(api.status());
  Result<nlohmann::json> answer = api->Post(path);
  if (!answer.ok() || o.client.json) return PrintAnswer(o.client, answer, "");
  // Canceling what has already ended is not an error (what the caller wants,
  // nothing running, holds), but it is not a cancellation either: say how it
  // ended. Exit 0 either way (docs/guide.md).
  if (answer->value("ended", false)) {
    std::string how;
    if (auto state = answer->find("state"); state != answer->end() && state->is_string()) {
      how = state->get<std::string>();
    } else if (auto counts = answer->find("counts"); counts != answer->end()) {
      for (auto& [state, n] : counts->items()) {
        how += (how.empty() ? "" : ", ") + n.dump() + " " + state;
      }
    }
    std::cout << (o.target.find('.') != std::string::npos ? "task " : "job ") << o.target
              << " had already ended (" << how << "): nothing canceled" << std::endl;
    return kExitOk;
  }
  std::cout << "canceled " << o.target << std::endl;
  return kExitOk;
}

int RunRetry(const TargetOptions& o) {
  Result<JobId> id = ParseJobId(o.target);
  if (!id.ok()) return ReportError(id.status(), /*usage_on_invalid=*/true);
  Result<ApiClient> api = Connect(o.client);
  if (!api.ok()) return ReportError(api.status());
  Result<nlohmann::json> answer = api->Post("/api/v1/jobs/" + std::to_string(*id) + "/retry");
  if (!answer.ok() || o.client.json) return PrintAnswer(o.client, answer, "");
  const uint64_t n = answer->value("retried", uint64_t{0});
  std::cout << "job " << *id << ": " << n << (n == 1 ? " task" : " tasks")
            << " queued again (drover wait " << *id << " follows it)" << std::endl;
  return kExitOk;
}

int RunWait(const TargetOptions& o) {
  Result<JobId> id = ParseJobId(o.target);
  if (!id.ok()) return ReportError(id.status(), /*usage_on_invalid=*/true);
  Result<ApiClient> api = Connect(o.client);
  if (!api.ok()) return ReportError(api.status());
  const bool quiet = o.quiet || o.client.json;
  Result<JobWatch> watch = WaitForJob(*api, *id, quiet ? Progress::kNone : Progress::kLines);
  if (!watch.ok()) return ReportError(watch.status());
  if (o.client.json) {
    // The ended job as the API has it, every task included.
    Result<nlohmann::json> info = GetJobWithAllTasks(*api, *id);
    if (!info.ok()) return ReportError(info.status());
    std::cout << info->dump(2) << std::endl;
    return watch->succeeded() ? kExitOk : kExitFailure;
  }
  std::cout << "job " << *id << ": " << watch->count("succeeded") << " succeeded, "
            << watch->count("failed") << " failed, " << watch->count("canceled") << " canceled"
            << std::endl;
  return watch->succeeded() ? kExitOk : kExitFailure;
}

int RunDrain(const TargetOptions& o) {
  if (o.target.empty() || o.target.find_first_not_of("0123456789") != std::string::npos) {
    return ReportError(InvalidArgument("worker: expected a worker id (see drover workers), got \"" +
                                       o.target + "\""),
                       /*usage_on_invalid=*/true);
  }
  Result<ApiClient> api = Connect(o.client);
  if (!api.ok()) return ReportError(api.status());
  const std::string verb = o.undo ? "undrain" : "drain";
  return PrintAnswer(o.client, api->Post("/api/v1/workers/" + o.target + "/" + verb),
                     (o.undo ? "undrained worker " : "drained worker ") + o.target);
}

}  // namespace

void AddCancelCommand(CLI::App& root, int& exit_code) {
  auto c = std::make_shared<TargetOptions>();
  CLI::App* cancel = root.add_subcommand("cancel", "Cancel a job (12) or one task (12.3)");
  AddClientFlags(*cancel, c->client, /*with_json=*/true);
  cancel->add_option("target", c->target, "Job or task id")->required();
  cancel->callback([c, &exit_code] { exit_code = RunCancel(*c); });
}

void AddRetryCommand(CLI::App& root, int& exit_code) {
  auto c = std::make_shared<TargetOptions>();
  CLI::App* retry = root.add_subcommand(
      "retry", "Run a job's failed and canceled tasks again, with their retries unused");
  AddClientFlags(*retry, c->client, /*with_json=*/true);
  retry->add_option("job", c->target, "Job id")->required();
  retry->callback([c, &exit_code] { exit_code = RunRetry(*c); });
}

void AddWaitCommand(CLI::App& root, int& exit_code) {
  auto w = std::make_shared<TargetOptions>();
  CLI::App* wait = root.add_subcommand(
      "wait", "Wait until a job ends; exit 1 if a task did not succeed");
  AddClientFlags(*wait, w->client, /*with_json=*/true);
  wait->add_option("job", w->target, "Job id")->required();
  wait->add_flag("-q,--quiet", w->quiet, "Only the final line");
  wait->callback([w, &exit_code] { exit_code = RunWait(*w); });
}

void AddDrainCommand(CLI::App& root, int& exit_code) {
  auto d = std::make_shared<TargetOptions>();
  CLI::App* drain = root.add_subcommand(
      "drain", "Stop placing tasks on a worker (running ones finish); --undo to resume");
  AddClientFlags(*drain, d->client, /*with_json=*/true);
  drain->add_option("worker", d->target, "Worker id (see drover workers)")->required();
  drain->add_flag("--undo", d->undo, "Undrain: place tasks on it again");
  drain->callback([d, &exit_code] { exit_code = RunDrain(*d); });
}

}  // namespace drover::cli
