// The `sim` subcommand's command-line wiring, for the `drover` binary.
//
// The CLI calls AddSimCommand(app, exit_code) once, next to its other
// Add*Command calls; the subcommand's callback runs RunSimCommand
// (sim_command.h) with std::cout/std::cerr and stores its exit status in
// `exit_code`, as the other subcommands do.
//
// Thread safety: main thread only.
#ifndef DROVER_SIM_SIM_CLI_H_
#define DROVER_SIM_SIM_CLI_H_

namespace CLI {
class App;
}

namespace drover::sim {

// Registers `sim` with its flags on `app`. `exit_code` must outlive parsing.
void AddSimCommand(CLI::App& app, int& exit_code);

}  // namespace drover::sim

#endif  // DROVER_SIM_SIM_CLI_H_
