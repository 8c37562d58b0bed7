// `drover logs [-f] [--stderr] TASK`: a task's output, fetched through its
// worker, or followed live over a WebSocket until the task ends.
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/cli11.h"

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/streams.h"
#include "common/ids.h"

namespace drover::cli {

namespace {

struct LogsOptions {
  ClientFlags client;
  std::string task;
  bool follow = false;
  bool stderr_stream = false;
};

int RunLogs(const LogsOptions& o) {
  Result<TaskId> id = ParseTaskId(o.task);
  if (!id.ok()) return ReportError(id.status(), /*usage_on_invalid=*/true);
  Result<ApiClient> api = Connect(o.client);
  if (!api.ok()) return ReportError(api.status());
  const std::string stream = o.stderr_stream ? "stderr" : "stdout";
  if (o.follow) {
    Status s = FollowLog(api->StreamOptions(), id->ToString(), stream, [](std::string_view bytes) {
      std::cout.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      std::cout.flush();
    });
    if (!s.ok()) return ReportError(s);
    return kExitOk;
  }
  Result<std::string> text =
      api->GetText("/api/v1/tasks/" + id->ToString() + "/logs?stream=" + stream);
  if (!text.ok()) return ReportError(text.status());
  std::cout << *text << std::flush;
  return kExitOk;
}

}  // namespace

void AddLogsCommand(CLI::App& root, int& exit_code) {
  auto o = std::make_shared<LogsOptions>();
  CLI::App* logs = root.add_subcommand("logs", "A task's output (stdout, or --stderr)");
  AddClientFlags(*logs, o->client, /*with_json=*/false);
  logs->add_option("task", o->task, "Task id, e.g. 12.3")->required();
  logs->add_flag("-f,--follow", o->follow, "Keep printing new output until the task ends");
  logs->add_flag("--stderr", o->stderr_stream, "Show standard error instead of standard output");
  logs->callback([o, &exit_code] { exit_code = RunLogs(*o); });
}

}  // namespace drover::cli
