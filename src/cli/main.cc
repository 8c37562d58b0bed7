// drover: the server, the worker agent and the client in one binary
// (DESIGN.md). See docs/guide.md for usage.
#include <algorithm>
#include <iostream>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/cli11.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/config_file.h"
#include "common/suggest.h"
#include "server/server_shell.h"

namespace {

// The first word where a command expects one of its subcommands and finds
// none of them, as a usage error naming it (and the nearest name); nullopt
// when every such word names one. CLI11 would take `drover sbumit --help`
// for the general help and exit 0.
std::optional<std::string> UnknownCommand(const CLI::App& app, int argc, char** argv) {
  const CLI::App* current = &app;
  std::string path = "drover";
  for (int i = 1; i < argc && current->get_require_subcommand_min() > 0; ++i) {
    const std::string_view word = argv[i];
    if (word.empty() || word[0] == '-') return std::nullopt;  // a flag: --help, --version
    std::vector<const CLI::App*> subs =
        current->get_subcommands([](const CLI::App*) { return true; });
    auto named = std::find_if(subs.begin(), subs.end(),
                              [&](const CLI::App* a) { return a->get_name() == word; });
    if (named != subs.end()) {
      current = *named;
      path += " " + std::string(word);
      continue;
    }
    std::vector<std::string_view> names;
    for (const CLI::App* a : subs) names.push_back(a->get_name());
    const std::string nearest = drover::ClosestName(word, names);
    return "drover: \"" + std::string(word) + "\" is not a command of " + path +
           (nearest.empty() ? "" : "; did you mean \"" + nearest + "\"?") + " (see " + path +
           " --help)";
  }
  return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("drover: run command-line tasks and pipelines on the machines you have", "drover");
  app.set_version_flag("--version", std::string(drover::server::kServerVersion));
  app.require_subcommand(1);
  app.fallthrough(false);
  int exit_code = drover::cli::kExitOk;
  // Every command is a fresh process, and each command's options cost
  // ~0.1-0.3 million instructions and heap pages to build: build the
  // command that the first argument names, and every command (in this
  // order) when it names none of them, so help and errors read the same.
  // A lone --version needs none (its flag is the root's).
  using AddFn = void (*)(CLI::App&, int&);
  struct Command {
    std::string_view name;
    AddFn add;
  };
  const Command commands[] = {
      {"server", drover::cli::AddServerCommand},   {"worker", drover::cli::AddWorkerCommand},
      {"up", drover::cli::AddUpCommand},           {"submit", drover::cli::AddSubmitCommand},
      {"run", drover::cli::AddRunCommand},         {"status", drover::cli::AddStatusCommand},
      {"workers", drover::cli::AddWorkersCommand}, {"logs", drover::cli::AddLogsCommand},
      {"cancel", drover::cli::AddCancelCommand},   {"wait", drover::cli::AddWaitCommand},
      {"drain", drover::cli::AddDrainCommand},     {"report", drover::cli::AddReportCommand},
      {"sim", drover::cli::AddSimCommand},         {"config", drover::cli::AddConfigCommand},
      {"alloc", drover::cli::AddAllocCommand},     {"get", drover::cli::AddGetCommand},
      {"quota", drover::cli::AddQuotaCommand},     {"user", drover::cli::AddUserCommand},
      {"whoami", drover::cli::AddWhoamiCommand},   {"audit", drover::cli::AddAuditCommand},
      {"retry", drover::cli::AddRetryCommand},     {"call", drover::cli::AddCallCommand},
      {"cache", drover::cli::AddCacheCommand},     {"debug", drover::cli::AddDebugCommand},
  };
  const std::string_view first = argc > 1 ? argv[1] : "";
  const auto chosen = std::find_if(std::begin(commands), std::end(commands),
                                   [&](const Command& c) { return c.name == first; });
  if (chosen != std::end(commands)) {
    chosen->add(app, exit_code);
  } else if (!(argc == 2 && first == "--version")) {
    for (const Command& c : commands) c.add(app, exit_code);
  }
  if (std::optional<std::string> unknown = UnknownCommand(app, argc, argv)) {
    std::cerr << *unknown << std::endl;
    return drover::cli::kExitUsage;
  }
  // The arguments, with a --config file's flags put before the command's
  // own (which win: the file's are left out where a flag is given).
  std::vector<std::string> args(argv + 1, argv + argc);
  if (CLI::App* sub =
          chosen == std::end(commands) ? nullptr : app.get_subcommand(std::string(first));
      sub != nullptr && sub->get_option_no_throw("--config") != nullptr) {
    std::vector<std::string> own(args.begin() + 1, args.end());
    drover::Result<std::optional<std::string>> path = drover::cli::ConfigPathIn(own);
    drover::Result<drover::cli::ConfigFlags> from_file =
        !path.ok() ? drover::Result<drover::cli::ConfigFlags>(path.status())
        : *path    ? drover::cli::ReadConfigFlags(*sub, **path, own)
                   : drover::cli::ConfigFlags{};
    if (!from_file.ok()) return drover::cli::ReportError(from_file.status(), true);
    drover::cli::SetFlagOrigins(from_file->origins);
    args.insert(args.begin() + 1, from_file->args.begin(), from_file->args.end());
  }
  std::reverse(args.begin(), args.end());  // CLI11 takes them last first
  try {
    app.parse(args);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // CLI11 reports an unknown flag by what it could not place after it
    // ("The following argument was not expected: true"): name the flag.
    const std::vector<CLI::App*> named =
        app.get_subcommands([&](CLI::App* a) { return a->get_name() == first; });
    if (CLI::App* sub = named.empty() ? nullptr : named.front(); sub != nullptr) {
      // The command and the subcommands named after it (`user add`): a
      // flag is known when one of them takes it.
      std::vector<CLI::App*> chain = {sub};
      std::string command(first);
      for (int i = 2; i < argc; ++i) {
        const std::string_view arg = argv[i];
        if (arg == "--") break;
        const std::vector<CLI::App*> nested =
            chain.back()->get_subcommands([&](CLI::App* a) { return a->get_name() == arg; });
        if (!nested.empty()) {
          chain.push_back(nested.front());
          command += " " + std::string(arg);
          continue;
        }
        // Flags only; "-1" is a value (--priority -1).
        if (arg.size() < 2 || arg[0] != '-' || (arg[1] >= '0' && arg[1] <= '9')) continue;
        const std::string name(arg.substr(0, arg.find('=')));
        if (name == "-h" || name == "--help" ||
            std::any_of(chain.begin(), chain.end(),
                        [&](CLI::App* a) { return a->get_option_no_throw(name) != nullptr; })) {
          continue;
        }
        std::cerr << "drover: the flag " << name << " is not expected by drover " << command
                  << " (see drover --help)" << std::endl;
        return drover::cli::kExitUsage;
      }
    }
    std::cerr << "drover: " << drover::cli::WithFlagOrigin(e.what()) << " (see drover --help)"
              << std::endl;
    return drover::cli::kExitUsage;
  }
  return exit_code;
}
