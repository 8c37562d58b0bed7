#include "cli/cli_common.h"

#include <unistd.h>

#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/cli11.h"
#include "cli/config_file.h"

namespace drover::cli {

int ReportError(const Status& status, bool usage_on_invalid) {
  std::string message = WithServerOrigin(
      WithFlagOrigin(status.message().empty() ? status.ToString() : status.message()));
  while (!message.empty() && message.back() == '\n') message.pop_back();
  std::cerr << "drover: " << message << std::endl;
  if (usage_on_invalid && status.code() == StatusCode::kInvalidArgument) return kExitUsage;
  return kExitFailure;
}

void PrintSubmitWarnings(JobId job, const nlohmann::json& answer) {
  auto warnings = answer.find("warnings");
  if (warnings == answer.end() || !warnings->is_array()) return;
  for (const nlohmann::json& w : *warnings) {
    if (!w.is_string()) continue;
    std::cerr << "drover: warning: job " << job << ": " << w.get<std::string>()
              << " (queued until a worker that can run it joins)" << std::endl;
  }
}

void AddClientFlags(CLI::App& app, ClientFlags& flags, bool with_json) {
  AddConnectionFlags(app, flags.connection);
  if (with_json) app.add_flag("--json", flags.json, "Print the API's JSON instead of a table");
}

Result<ApiClient> Connect(const ClientFlags& flags) {
  ASSIGN_OR_RETURN(net::ClientOptions options, ResolveConnection(flags.connection));
  return ApiClient(std::move(options));
}

int64_t NowMs() {
  return ToMicros(SystemClock().Now()) / 1000;
}

bool StdoutIsTty() { return isatty(STDOUT_FILENO) == 1; }

}  // namespace drover::cli
