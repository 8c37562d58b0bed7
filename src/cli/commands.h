// The `drover` subcommands. Each Add*Command registers one or more
// subcommands on the root app; their callbacks store the process exit
// status in `exit_code` (see cli_common.h for the values).
//
// Thread safety: main thread only.
#ifndef DROVER_CLI_COMMANDS_H_
#define DROVER_CLI_COMMANDS_H_

namespace CLI {
class App;
}

namespace drover::cli {

void AddServerCommand(CLI::App& root, int& exit_code);   // cmd_server.cc
void AddWorkerCommand(CLI::App& root, int& exit_code);   // cmd_worker.cc
void AddUpCommand(CLI::App& root, int& exit_code);       // cmd_up.cc
void AddSubmitCommands(CLI::App& root, int& exit_code);  // cmd_submit.cc: submit, run
void AddStatusCommands(CLI::App& root, int& exit_code);  // cmd_status.cc: status, workers
void AddLogsCommand(CLI::App& root, int& exit_code);     // cmd_logs.cc
void AddControlCommands(CLI::App& root, int& exit_code); // cmd_control.cc: cancel, wait, drain
void AddReportCommand(CLI::App& root, int& exit_code);   // cmd_report.cc

}  // namespace drover::cli

#endif  // DROVER_CLI_COMMANDS_H_
