// Pieces every `drover` subcommand shares: exit codes, the one-line error
// report, and the client flags (connection + --json).
//
// Thread safety: main-thread helpers.
#ifndef DROVER_CLI_CLI_COMMON_H_
#define DROVER_CLI_CLI_COMMON_H_

#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "cli/api_client.h"
#include "cli/connection.h"
#include "common/ids.h"
#include "common/status.h"

namespace CLI {
class App;
}

namespace drover::cli {

// Exit statuses: 0 success; 1 a failure at run time (server unreachable,
// a task failed, ...); 2 bad usage or a malformed job file (nothing sent).
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// Prints "drover: <message>" on stderr and returns kExitFailure (or
// kExitUsage for kInvalidArgument when `usage_on_invalid`).
int ReportError(const Status& status, bool usage_on_invalid = false);

struct ClientFlags {
  ConnectionFlags connection;
  bool json = false;
};

// Adds the connection flags, and --json when `with_json`.
void AddClientFlags(CLI::App& app, ClientFlags& flags, bool with_json);

// Resolves the connection and makes a client. Errors as ResolveConnection.
Result<ApiClient> Connect(const ClientFlags& flags);

// Prints the "warnings" of a job submission's answer (what no attached
// worker could run) on stderr, one "drover: warning: job N: ..." line each.
void PrintSubmitWarnings(JobId job, const nlohmann::json& answer);

// The wall clock in Unix milliseconds.
int64_t NowMs();

// True when stdout is a terminal.
bool StdoutIsTty();

}  // namespace drover::cli

#endif  // DROVER_CLI_CLI_COMMON_H_
