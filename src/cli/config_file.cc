#include "cli/config_file.h"

#include <fstream>
#include <sstream>

#include "cli/cli11.h"
#include "cli/policy_file.h"

namespace drover::cli {

namespace {

std::map<std::string, std::string>& Origins() {
  static std::map<std::string, std::string> origins;
  return origins;
}

std::string Where(const std::string& file, const proto::ConfigEntry& entry) {
  return file + ":" + std::to_string(entry.line) + ":" + std::to_string(entry.column);
}

// Whether `command_line` sets `opt` (by any of its names).
bool SetOnCommandLine(const CLI::Option& opt, const std::vector<std::string>& command_line) {
  for (const std::string& arg : command_line) {
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-') continue;
    if (opt.check_name(arg.substr(0, arg.find('=')))) return true;
  }
  return false;
}

}  // namespace

Status CheckTableName(const proto::ConfigSection& section, const std::string& file) {
  const std::string where =
      file + ":" + std::to_string(section.line) + ":" + std::to_string(section.column);
  if (IsPolicyTable(section.name)) return Status::Ok();  // policy_file.h reads them
  bool known = false;
  for (const char* table : kConfigTables) known = known || section.name == table;
  if (!known) {
    return InvalidArgument(file + ":" + std::to_string(section.line) + ": unknown table [" +
                           section.name +
                           "]: a config file holds [server], [worker], [quota.USER], "
                           "[group.NAME] and [fairshare]");
  }
  if (!section.sub.empty()) {
    return InvalidArgument(where + ": [" + section.name + "] " + section.sub +
                           ": a table is not a value here (tables nest no deeper than [" +
                           section.name + "])");
  }
  return Status::Ok();
}

Result<ConfigFlags> FlagsFromSection(const CLI::App& cmd, const proto::ConfigSection& section,
                                     const std::string& file,
                                     const std::vector<std::string>& command_line) {
  ConfigFlags out;
  const std::string command = "drover " + cmd.get_name();
  for (const proto::ConfigEntry& entry : section.entries) {
    std::string name = entry.key;
    for (char& c : name) {
      if (c == '_') c = '-';
    }
    const std::string where = Where(file, entry) + ": [" + section.name + "] " + entry.key;
    const CLI::Option* opt = name == "help" || name == "config" || name.empty() || name[0] == '-'
                                 ? nullptr
                                 : cmd.get_option_no_throw("--" + name);
    if (opt == nullptr || opt->get_lnames().empty()) {
      return InvalidArgument(where + ": unknown key: " + command + " has no --" + name +
                             " flag (see " + command + " --help)");
    }
    const std::string flag = "--" + opt->get_lnames().front();
    if (SetOnCommandLine(*opt, command_line)) continue;
    const bool is_flag = opt->get_expected_max() == 0;  // add_flag: no value
    if (is_flag && entry.kind != proto::ConfigEntry::Kind::kBool) {
      return InvalidArgument(where + ": " + flag + " is a switch: write true or false");
    }
    if (!is_flag && entry.kind == proto::ConfigEntry::Kind::kBool) {
      return InvalidArgument(where + ": " + flag + " takes a value, not true or false");
    }
    const bool many = opt->get_expected_max() > 1;
    if (entry.kind == proto::ConfigEntry::Kind::kArray && !many) {
      return InvalidArgument(where + ": " + flag + " takes one value, not an array");
    }
    if (is_flag) {
      if (entry.values.front() == "true") out.args.push_back(flag);
    } else {
      for (const std::string& value : entry.values) out.args.push_back(flag + "=" + value);
    }
    out.origins[flag] = Where(file, entry);
  }
  return out;
}

Result<ConfigFlags> ReadConfigFlags(const CLI::App& cmd, const std::string& file,
                                    const std::vector<std::string>& command_line) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return InvalidArgument("--config " + file + ": cannot be read");
  std::ostringstream text;
  text << in.rdbuf();
  ASSIGN_OR_RETURN(std::vector<proto::ConfigSection> sections,
                   proto::ParseConfigToml(text.str(), file));
  ConfigFlags flags;
  // `drover up` is a server with local workers: it takes the server's table
  // (as its own flags; a server-only key is refused naming drover up).
  const std::string table = cmd.get_name() == "up" ? "server" : cmd.get_name();
  for (const proto::ConfigSection& section : sections) {
    RETURN_IF_ERROR(CheckTableName(section, file));
    if (section.name != table) continue;
    ASSIGN_OR_RETURN(flags, FlagsFromSection(cmd, section, file, command_line));
  }
  return flags;
}

Result<std::optional<std::string>> ConfigPathIn(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--") break;
    if (args[i].starts_with("--config=")) return std::optional<std::string>(args[i].substr(9));
    if (args[i] == "--config") {
      if (i + 1 >= args.size()) return InvalidArgument("--config needs a file");
      return std::optional<std::string>(args[i + 1]);
    }
  }
  return std::optional<std::string>();
}

void SetFlagOrigins(std::map<std::string, std::string> origins) { Origins() = std::move(origins); }

std::string WithFlagOrigin(const std::string& message) {
  for (const auto& [flag, where] : Origins()) {
    const size_t at = message.find(flag);
    if (at == std::string::npos) continue;
    // The whole flag, not the start of a longer one (--cpus in --cpus-x).
    const size_t end = at + flag.size();
    if (end < message.size() &&
        (std::isalnum(static_cast<unsigned char>(message[end])) || message[end] == '-')) {
      continue;
    }
    return where + ": " + message;
  }
  return message;
}

}  // namespace drover::cli
