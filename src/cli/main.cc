// drover: the server, the worker agent and the client in one binary
// (DESIGN.md). See docs/guide.md for usage.
#include <iostream>

#include <CLI/CLI.hpp>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/stop_signals.h"
#include "server/server_shell.h"
#include "sim/sim_cli.h"

int main(int argc, char** argv) {
  // Before any thread starts: the long-running roles take SIGINT/SIGTERM
  // through a signalfd on their event loop.
  drover::cli::BlockStopSignals();

  CLI::App app("drover: run command-line tasks and pipelines on the machines you have", "drover");
  app.set_version_flag("--version", std::string(drover::server::kServerVersion));
  app.require_subcommand(1);
  app.fallthrough(false);
  int exit_code = drover::cli::kExitOk;
  drover::cli::AddServerCommand(app, exit_code);
  drover::cli::AddWorkerCommand(app, exit_code);
  drover::cli::AddUpCommand(app, exit_code);
  drover::cli::AddSubmitCommands(app, exit_code);
  drover::cli::AddStatusCommands(app, exit_code);
  drover::cli::AddLogsCommand(app, exit_code);
  drover::cli::AddControlCommands(app, exit_code);
  drover::cli::AddReportCommand(app, exit_code);
  drover::sim::AddSimCommand(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "drover: " << e.what() << " (see drover --help)" << std::endl;
    return drover::cli::kExitUsage;
  }
  return exit_code;
}
