// `drover server`: the scheduler, API and journal in one process, until
// SIGINT or SIGTERM.
#include <iostream>
#include <memory>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "cli/cli_common.h"
#include "cli/cluster_flags.h"
#include "cli/commands.h"
#include "cli/stop_signals.h"
#include "net/event_loop.h"
#include "server/server_shell.h"

namespace drover::cli {

namespace {

int RunServer(const ServerFlags& flags) {
  Result<server::ServerConfig> config = MakeServerConfig(flags);
  if (!config.ok()) return ReportError(config.status(), /*usage_on_invalid=*/true);
  net::EventLoop loop;
  Result<std::unique_ptr<server::ServerShell>> shell = server::ServerShell::Start(loop, *config);
  if (!shell.ok()) return ReportError(shell.status().WithContext("server did not start"));
  Result<std::unique_ptr<StopSignals>> signals = StopSignals::Watch(loop, [&](int signo) {
    spdlog::info("signal {}: stopping", signo);
    (*shell)->Stop();
    loop.Stop();
  });
  if (!signals.ok()) return ReportError(signals.status());
  PrintListening(**shell, *config);
  loop.Run();
  (*shell)->Stop();
  std::cout << "drover: server stopped" << std::endl;
  return kExitOk;
}

}  // namespace

void AddServerCommand(CLI::App& root, int& exit_code) {
  auto flags = std::make_shared<ServerFlags>();
  CLI::App* cmd = root.add_subcommand("server", "Run the server (scheduler, API, journal)");
  AddServerFlags(*cmd, *flags, /*with_bind=*/true);
  cmd->callback([flags, &exit_code] { exit_code = RunServer(*flags); });
}

}  // namespace drover::cli
