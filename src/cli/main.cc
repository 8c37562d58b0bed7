// drover: the server, the worker agent and the client in one binary
// (DESIGN.md). See docs/guide.md for usage.
#include <algorithm>
#include <iostream>
#include <string_view>
#include <vector>

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
  // Every command is a fresh process, and each group's options cost ~0.3
  // million instructions to build: build the group that the first argument
  // names, and every group (in this order) when it names none of them or
  // when the group turns out not to have it, so help and errors read the
  // same.
  using AddFn = void (*)(CLI::App&, int&);
  struct Group {
    std::vector<std::string_view> names;
    AddFn add;
  };
  const Group groups[] = {
      {{"server"}, drover::cli::AddServerCommand},
      {{"worker"}, drover::cli::AddWorkerCommand},
      {{"up"}, drover::cli::AddUpCommand},
      {{"submit", "run"}, drover::cli::AddSubmitCommands},
      {{"status", "workers"}, drover::cli::AddStatusCommands},
      {{"logs"}, drover::cli::AddLogsCommand},
      {{"cancel", "wait", "drain"}, drover::cli::AddControlCommands},
      {{"report"}, drover::cli::AddReportCommand},
      {{"sim"}, drover::sim::AddSimCommand},
  };
  const std::string_view first = argc > 1 ? argv[1] : "";
  const Group* chosen = nullptr;
  for (const Group& g : groups) {
    if (std::find(g.names.begin(), g.names.end(), first) != g.names.end()) chosen = &g;
  }
  if (chosen != nullptr) chosen->add(app, exit_code);
  const auto has_first = [&] {
    for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
      if (sub->get_name() == first) return true;
    }
    return false;
  };
  if (chosen == nullptr || !has_first()) {
    for (const Group& g : groups) {
      if (&g != chosen) g.add(app, exit_code);
    }
  }
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
