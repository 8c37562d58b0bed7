// The `drover` subcommands. Each Add*Command registers one subcommand on
// the root app (main.cc builds only the one that argv names); its callback
// stores the process exit status in `exit_code` (see cli_common.h for the
// values).
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
void AddSimCommand(CLI::App& root, int& exit_code);      // cmd_sim.cc
void AddSubmitCommand(CLI::App& root, int& exit_code);   // cmd_submit.cc
void AddRunCommand(CLI::App& root, int& exit_code);      // cmd_submit.cc
void AddCallCommand(CLI::App& root, int& exit_code);     // cmd_submit.cc
void AddStatusCommand(CLI::App& root, int& exit_code);   // cmd_status.cc
void AddWorkersCommand(CLI::App& root, int& exit_code);  // cmd_status.cc
void AddLogsCommand(CLI::App& root, int& exit_code);     // cmd_logs.cc
void AddGetCommand(CLI::App& root, int& exit_code);      // cmd_get.cc
void AddCancelCommand(CLI::App& root, int& exit_code);   // cmd_control.cc
void AddRetryCommand(CLI::App& root, int& exit_code);    // cmd_control.cc
void AddCacheCommand(CLI::App& root, int& exit_code);    // cmd_control.cc
void AddWaitCommand(CLI::App& root, int& exit_code);     // cmd_control.cc
void AddDrainCommand(CLI::App& root, int& exit_code);    // cmd_control.cc
void AddReportCommand(CLI::App& root, int& exit_code);   // cmd_report.cc
void AddConfigCommand(CLI::App& root, int& exit_code);   // cmd_config.cc
void AddDebugCommand(CLI::App& root, int& exit_code);    // cmd_config.cc
void AddAllocCommand(CLI::App& root, int& exit_code);    // cmd_alloc.cc
void AddQuotaCommand(CLI::App& root, int& exit_code);    // cmd_quota.cc
void AddUserCommand(CLI::App& root, int& exit_code);     // cmd_user.cc
void AddWhoamiCommand(CLI::App& root, int& exit_code);   // cmd_user.cc
void AddAuditCommand(CLI::App& root, int& exit_code);    // cmd_user.cc

}  // namespace drover::cli

#endif  // DROVER_CLI_COMMANDS_H_
