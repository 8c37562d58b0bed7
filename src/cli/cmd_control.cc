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

struct CacheForgetOptions {
  ClientFlags client;
  std::string task;
  std::string job;
  bool all = false;
};

// `drover cache forget`: one task's entry, a job's, or all of the caller's.
int RunCacheForget(const CacheForgetOptions& o) {
  const int chosen = (o.task.empty() ? 0 : 1) + (o.job.empty() ? 0 : 1) + (o.all ? 1 : 0);
  if (chosen != 1) {
    return ReportError(InvalidArgument("cache forget: name a task (12.3), --job 12, or --all"),
                       /*usage_on_invalid=*/true);
  }
  std::string target = "/api/v1/cache/forget";
  if (!o.task.empty()) {
    Result<TaskId> id = ParseTaskId(o.task);
    if (!id.ok()) return ReportError(id.status().WithContext("task"), true);
    target = "/api/v1/tasks/" + id->ToString() + "/uncache";
  } else if (!o.job.empty()) {
    Result<JobId> id = ParseJobId(o.job);
    if (!id.ok()) return ReportError(id.status().WithContext("--job"), true);
    target = "/api/v1/jobs/" + std::to_string(*id) + "/uncache";
  }
  Result<ApiClient> api = Connect(o.client);
  if (!api.ok()) return ReportError(api.status());
  Result<nlohmann::json> answer = api->Post(target);
  if (!answer.ok()) return ReportError(answer.status());
  if (o.client.json) {
    std::cout << answer->dump(2) << std::endl;
  } else {
    const uint64_t n = answer->value("forgotten", uint64_t{0});
    std::cout << "forgot " << n << (n == 1 ? " cache entry" : " cache entries") << std::endl;
  }
  return kExitOk;
}

}  // namespace

void AddCacheCommand(CLI::App& root, int& exit_code) {
  CLI::App* cache = root.add_subcommand("cache", "The result cache (tasks with cache = true)");
  cache->require_subcommand(1);
  auto o = std::make_shared<CacheForgetOptions>();
  CLI::App* forget = cache->add_subcommand(
      "forget",
      "Forget cached results: a task's (12.3), a job's, or all of yours; an identical "
      "task then runs again");
  AddClientFlags(*forget, o->client, /*with_json=*/true);
  forget->add_option("task", o->task, "Task id whose result to forget");
  forget->add_option("--job", o->job, "Forget the results of this job's tasks");
  forget->add_flag("--all", o->all, "Forget all your cached results (an admin's: everyone's)");
  forget->callback([o, &exit_code] { exit_code = RunCacheForget(*o); });
}

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
