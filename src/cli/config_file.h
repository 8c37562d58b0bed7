// Config files for the long-running commands: `drover server --config FILE`
// reads the file's [server] table, `drover worker --config FILE` its
// [worker] table, `drover up --config FILE` the [server] table as its own
// flags (proto/config_file.h parses the TOML). Each key is one of
// the command's flags without its dashes (`heartbeat_interval` or
// `heartbeat-interval` for --heartbeat-interval); a flag given on the
// command line wins over the file. An unknown table or key, a value of the
// wrong kind (a boolean for a flag that takes a value, an array for one
// that takes one value), and a value a flag refuses are errors naming the
// file and line. `drover config check FILE` checks every table of a file.
// The server's user policy (quotas, groups, fair share) has tables of its
// own in the same file: cli/policy_file.h.
//
// Thread safety: main thread only (the origins are process-wide, read by
// ReportError).
#ifndef DROVER_CLI_CONFIG_FILE_H_
#define DROVER_CLI_CONFIG_FILE_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "proto/config_file.h"

namespace CLI {
class App;
}

namespace drover::cli {

// The tables a config file may hold: the commands that read one.
inline constexpr const char* kConfigTables[] = {"server", "worker"};

struct ConfigFlags {
  std::vector<std::string> args;               // "--port=7210", in the file's key order
  std::map<std::string, std::string> origins;  // "--port" -> "FILE:3:1"
};

// OK for a table a config file may hold: [server], [worker], and the
// server's user policy ([quota.USER], [group.NAME], [fairshare]: read by
// policy_file.h). kInvalidArgument naming FILE:LINE:COL otherwise, and for
// a table inside [server] or [worker].
Status CheckTableName(const proto::ConfigSection& section, const std::string& file);

// The flags `section` gives `cmd` (the subcommand that reads it), leaving
// out those `command_line` (the command's own arguments) sets.
Result<ConfigFlags> FlagsFromSection(const CLI::App& cmd, const proto::ConfigSection& section,
                                     const std::string& file,
                                     const std::vector<std::string>& command_line);

// Reads `file` and returns the flags of its [cmd] table ([server] for up;
// none when it has none); an unknown table is an error.
Result<ConfigFlags> ReadConfigFlags(const CLI::App& cmd, const std::string& file,
                                    const std::vector<std::string>& command_line);

// The file `--config FILE` (or `--config=FILE`) names among a command's
// arguments (up to a `--`); none without one.
Result<std::optional<std::string>> ConfigPathIn(const std::vector<std::string>& args);

// Records where the flags of this run came from, and prefixes a message
// about one of them with its place in the file ("FILE:3:1: --port: ...").
void SetFlagOrigins(std::map<std::string, std::string> origins);
std::string WithFlagOrigin(const std::string& message);

}  // namespace drover::cli

#endif  // DROVER_CLI_CONFIG_FILE_H_
