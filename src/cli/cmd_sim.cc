// drover sim: the command-line wiring of the workload simulator (src/sim,
// docs/sim.md). The simulator knows nothing of the CLI; this file registers
// `sim` and runs RunSimCommand with std::cout/std::cerr, storing its exit
// status in `exit_code` as the other subcommands do.
#include <iostream>
#include <memory>

#include "cli/cli11.h"
#include "cli/commands.h"
#include "sim/sim_command.h"

namespace drover::cli {

using sim::RunSimCommand;
using sim::SimCommandOptions;

void AddSimCommand(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<SimCommandOptions>();
  CLI::App* sim = app.add_subcommand(
      "sim", "Replay a workload trace through the scheduler on a simulated clock (docs/sim.md)");
  sim->add_option("trace", opts->trace_path, "Trace to replay (JSON Lines)");
  sim->add_option("--cluster", opts->cluster_path, "Cluster description (JSON)");
  sim->add_option("--policy", opts->policy, "Placement policy, or all to compare them")
      ->check(CLI::IsMember({"spread", "pack", "round-robin", "all"}))
      ->capture_default_str();
  sim->add_flag("--no-reservations", opts->no_reservations, "Replay without backfill reservations");
  sim->add_flag("--no-locality", opts->no_locality,
                "Replay without placing dependents near their inputs (to measure what it saves)");
  sim->add_flag("--no-fair-share", opts->no_fair_share,
                "Replay with each queue FIFO across users (to compare with fair share)");
  sim->add_option("--half-life", opts->half_life,
                  "Fair share: past use counts half after this long")
      ->capture_default_str();
  sim->add_option("--share", opts->shares, "Fair share: USER=N shares of a user (default 1)")
      ->allow_extra_args(false);
  sim->add_option("--black-hole", opts->black_hole,
                  "Make this worker of the cluster a black hole: every attempt there fails 1 s "
                  "after it starts (to measure what quarantine saves)");
  sim->add_flag("--no-quarantine", opts->no_quarantine,
                "Replay with the black-hole quarantine off (to compare with it on)");
  sim->add_flag("--json", opts->json, "One JSON object per policy");
  sim->add_flag("--idle-profile", opts->idle_profile,
                "Also print where the free GPU time went (reservation, fragmentation, ...)");
  sim->add_option("--suspend-for", opts->suspend_for,
                  "Owner presence in the trace: tasks suspended this long are vacated (0: at once)")
      ->capture_default_str();
  sim->add_flag("--checkpoint", opts->checkpoint,
                "A vacated task keeps its progress (default: it runs again in full)");
  sim->add_option("--generate", opts->generate_path,
                  "Write a synthetic trace to FILE (- for stdout) instead of replaying");
  sim->add_option("--seed", opts->generate.seed, "Seed of --generate")->capture_default_str();
  sim->add_option("--tasks", opts->generate.tasks, "Tasks of --generate")->capture_default_str();
  sim->add_option("--gpus", opts->generate.gpus, "GPUs the --generate load is sized for")
      ->capture_default_str();
  sim->add_option("--load", opts->generate.load, "Offered GPU work / capacity of --generate")
      ->capture_default_str();
  sim->add_flag("--no-limits{false}", opts->generate.limits,
                "--generate writes no time limits (the scheduler then plans without them)");
  sim->add_flag("--outputs", opts->generate.outputs,
                "--generate gives each pipeline's prep an output (1-16 GiB) its dependents read");
  sim->add_option("--resubmit", opts->generate.resubmit,
                  "--generate: this share of the bursts (0-0.9) repeat an earlier one with one "
                  "task changed; every task gets a cache key, and the report what was reused");
  sim->add_option("--owners", opts->generate.owners,
                  "--generate: workers gpu-1..gpu-N have their owner present 9h-17h each day")
      ->capture_default_str();
  sim->callback([opts, &exit_code] { exit_code = RunSimCommand(*opts, std::cout, std::cerr); });
}

}  // namespace drover::cli
