// `drover sim`: replay a trace through the real scheduling core, or write a
// synthetic trace (docs/sim.md). The CLI registers it with AddSimCommand
// (src/cli/cmd_sim.cc); RunSimCommand is the whole command behind the flags, usable
// from tests and benchmarks.
//
//   drover sim TRACE --cluster CLUSTER [--policy spread|pack|round-robin|all]
//              [--no-reservations] [--json] [--idle-profile]
//              [--suspend-for DUR] [--checkpoint] [--no-locality]
//              [--no-fair-share] [--half-life DUR] [--share USER=N]...
//   drover sim --generate FILE [--seed N] [--tasks N] [--gpus N] [--load X]
//              [--no-limits] [--owners N]
//
// Thread safety: RunSimCommand is a pure function of its options and the
// files they name; it writes only to `out`, `err` and the --generate file.
#ifndef DROVER_SIM_SIM_COMMAND_H_
#define DROVER_SIM_SIM_COMMAND_H_

#include <ostream>
#include <string>
#include <vector>

#include "sim/generate.h"

namespace drover::sim {

// Exit statuses, as everywhere in `drover`: 0 success; 1 a failure at run
// time (a core bug found by the replay, an unwritable file); 2 bad usage or
// a malformed trace or cluster file.
inline constexpr int kSimExitOk = 0;
inline constexpr int kSimExitFailure = 1;
inline constexpr int kSimExitUsage = 2;

struct SimCommandOptions {
  std::string trace_path;           // JSON Lines trace to replay
  std::string cluster_path;         // cluster description (JSON)
  std::string policy = "spread";    // spread | pack | round-robin | all (one table)
  bool no_reservations = false;     // replay without backfill reservations
  bool json = false;                // one JSON object per policy, one per line
  bool idle_profile = false;        // text: add where the free GPU time went
  std::string suspend_for = "10m";  // owner present this long: tasks vacated
                                    // (SimOptions::suspend_for; "0" at once)
  bool checkpoint = false;          // vacated tasks keep their progress
  bool no_locality = false;         // replay without the data-locality term
  bool no_fair_share = false;       // replay with the queues FIFO across users
  std::string half_life = "1d";     // fair share: use counts half this much later
  std::vector<std::string> shares;  // fair share: "USER=N", N > 0; others have 1
  std::string black_hole;           // a worker whose every attempt fails in 1 s
  bool no_quarantine = false;       // replay with the black-hole quarantine off
  std::string generate_path;        // non-empty: write a synthetic trace there
                                    // ("-" = `out`) instead of replaying
  GenerateOptions generate;
};

// Runs the command; the report goes to `out`, errors to `err` as one line
// "drover sim: <message>" (a malformed trace names its line and field).
// Returns one of the exit statuses above.
int RunSimCommand(const SimCommandOptions& options, std::ostream& out, std::ostream& err);

}  // namespace drover::sim

#endif  // DROVER_SIM_SIM_COMMAND_H_
