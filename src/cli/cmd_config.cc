// `drover config check FILE`: every table of a config file read as its
// command would read it (cli/config_file.h), and the command's own checks
// of its flags run (`--check`: nothing starts). And `drover debug decode
// FILE`: a binary frame of the worker channel (proto/messages_binary.h),
// as a capture holds it, printed as the JSON of its messages.
#include <algorithm>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "cli/cli11.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/config_file.h"
#include "cli/policy_file.h"
#include "proto/config_file.h"
#include "proto/messages_binary.h"

namespace drover::cli {

namespace {

int CheckConfig(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return ReportError(InvalidArgument(file + ": cannot be read"), true);
  std::ostringstream text;
  text << in.rdbuf();
  Result<std::vector<proto::ConfigSection>> sections = proto::ParseConfigToml(text.str(), file);
  if (!sections.ok()) return ReportError(sections.status(), true);
  for (const proto::ConfigSection& section : *sections) {
    if (Status s = CheckTableName(section, file); !s.ok()) return ReportError(s, true);
  }
  // The server's user policy (policy_file.h), checked as a reload reads it.
  if (Result<core::UserPolicy> policy = PolicyFromSections(*sections, file); !policy.ok()) {
    return ReportError(policy.status(), true);
  }
  for (const proto::ConfigSection& section : *sections) {
    if (IsPolicyTable(section.name)) continue;
    int exit_code = kExitOk;
    CLI::App app("drover", "drover");
    if (section.name == "server") {
      AddServerCommand(app, exit_code);
    } else if (section.name == "worker") {
      AddWorkerCommand(app, exit_code);
    } else {
      return ReportError(
          InvalidArgument(file + ":" + std::to_string(section.line) + ": unknown table [" +
                          section.name + "]: a config file holds [server] and [worker]"),
          true);
    }
    CLI::App* cmd = app.get_subcommand(section.name);
    Result<ConfigFlags> flags = FlagsFromSection(*cmd, section, file, {});
    if (!flags.ok()) return ReportError(flags.status(), true);
    SetFlagOrigins(flags->origins);
    // CLI11 takes a vector of arguments last first.
    std::vector<std::string> args = {section.name};
    args.insert(args.end(), flags->args.begin(), flags->args.end());
    args.push_back("--check");
    std::reverse(args.begin(), args.end());
    try {
      app.parse(args);
    } catch (const CLI::ParseError& e) {
      std::cerr << "drover: " << WithFlagOrigin(e.what()) << std::endl;
      return kExitUsage;
    }
    if (exit_code != kExitOk) return exit_code;
    std::cout << "drover: " << file << ": [" << section.name << "]: " << section.entries.size()
              << " keys" << std::endl;
  }
  std::cout << "drover: " << file << ": ok" << std::endl;
  return kExitOk;
}

int DecodeFrame(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return ReportError(InvalidArgument(file + ": cannot be read"), true);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  Result<std::string> text = proto::DescribeBinaryFrame(bytes.str());
  if (!text.ok()) return ReportError(text.status().WithContext(file), true);
  std::cout << *text;
  return kExitOk;
}

}  // namespace

void AddDebugCommand(CLI::App& root, int& exit_code) {
  CLI::App* debug = root.add_subcommand("debug", "Tools for reading what Drover sends");
  debug->require_subcommand(1);
  CLI::App* decode = debug->add_subcommand(
      "decode", "Print a binary frame of the worker channel as the JSON of its messages");
  auto file = std::make_shared<std::string>();
  decode->add_option("FILE", *file, "The frame's bytes, as a capture holds them")->required();
  decode->callback([file, &exit_code] { exit_code = DecodeFrame(*file); });
}

void AddConfigCommand(CLI::App& root, int& exit_code) {
  CLI::App* config = root.add_subcommand("config", "Config files ([server] and [worker] tables)");
  config->require_subcommand(1);
  CLI::App* check = config->add_subcommand(
      "check", "Check every table of a config file as its command reads it; starts nothing");
  auto file = std::make_shared<std::string>();
  check->add_option("FILE", *file, "The config file")->required();
  check->callback([file, &exit_code] { exit_code = CheckConfig(*file); });
}

}  // namespace drover::cli
