// Synthetic traces: a reproducible workload from a seed (docs/sim.md).
//
// Arrivals come in bursts (one user submitting a sweep at once; burst sizes
// 1 + exponential with mean 5, at most 64). Three bursts in four are one
// shape; the rest mix shapes. Shapes, by share of bursts:
//   0.5 GPU  15%  1 cpu, 16 GiB, 40 GiB of GPU memory
//   1 GPU    30%  2 cpus, 32 GiB
//   2 GPUs   15%  4 cpus, 64 GiB
//   4 GPUs   10%  8 cpus, 128 GiB
//   CPU only 30%  1, 2 or 4 cpus, 4 or 8 GiB
// Durations are log-normal (median 10 min, sigma 1, clamped to 30 s .. 4 h).
// One burst in ten has priority 1; one in ten bursts of three or more is a
// pipeline: a short CPU "prep" task that the rest depend on. Burst gaps are
// exponential, scaled so that the GPU work offered during the arrival window
// is `load` times what `gpus` GPUs can do in it (load above 1 keeps the
// cluster busy and a queue growing, which is what a comparison needs).
//
// With `outputs`, pipeline preps leave files their dependents read.
//
// With `resubmit`, a share of the bursts repeat earlier ones with one task
// changed, and every task has a cache `key` (trace.h).
//
// With `owners` N, the trace ends with owner-presence lines: workers gpu-1
// .. gpu-N (the standard cluster's names) have their owner present 9h-17h
// of every day from the first through two days past the last submit.
//
// Randomness is sim::Random only (no standard distributions), and numbers
// are written from integers, so a seed gives the same bytes everywhere.
//
// Thread safety: pure function.
#ifndef DROVER_SIM_GENERATE_H_
#define DROVER_SIM_GENERATE_H_

#include <cstdint>
#include <ostream>

#include "common/status.h"

namespace drover::sim {

struct GenerateOptions {
  uint64_t seed = 1;
  uint64_t tasks = 2000;
  uint32_t gpus = 16;   // GPUs of the cluster the load is sized for
  double load = 1.2;    // offered GPU work / capacity over the arrival window
  bool limits = true;   // write each task's time limit (`limit`)
  uint32_t owners = 0;  // workers gpu-1..gpu-N owner-present 9h-17h each day
  // Each pipeline's prep task leaves an output of 1 to 16 GiB (whole GiB,
  // uniform) that the rest of its burst reads (`output`; data locality).
  // Drawn from a stream of its own: the other fields stay as without it.
  bool outputs = false;
  // This share of the bursts (0 to 0.9) submits an earlier burst again, by
  // its user, with one task changed; every task then has a cache `key`
  // (the same for the same work), so the result cache reuses the rest.
  // Drawn from a stream of its own.
  double resubmit = 0;
};

// Writes a trace of exactly `options.tasks` task lines to `out` (then the
// owner lines, if any). Errors (kInvalidArgument): tasks 0 or above
// 100,000,000, gpus 0, load not in (0, 100], owners above 10,000;
// kDataLoss when the stream fails.
Status WriteSyntheticTrace(const GenerateOptions& options, std::ostream& out);

}  // namespace drover::sim

#endif  // DROVER_SIM_GENERATE_H_
