// Simulate: replay a trace through the real scheduling core on a simulated
// clock, and measure what the schedule did to waiting times and idle GPUs.
//
// The replay plays the shell and the workers around a core::Scheduler, with
// no sockets, processes or sleeps. It is a discrete-event loop:
//
//   next instant = min(next submit, next task finish)
//     ├─ finishes due  ─► TaskFinished (exit 0)         ─┐
//     ├─ submits due   ─► JobSubmitted (one per burst)   ├─► core::Scheduler
//     └─ tick due      ─► Tick (first instant at least ─┘        │
//                          renew_interval after the last)          ▼ Outbox
//   ClaimLeases ─► LeaseGranted at once (the store never refuses here)
//   AssignTask  ─► TaskStarted at once, TaskFinished due at now + duration
//
// Tasks submitted at one instant by one user, without dependencies, form one
// job (runs of identical requests with the same limit become array groups);
// a task with dependencies is a job of its own with `--after` on them. A
// task's `limit` becomes its group's timeout, which the core uses to plan
// backfill. The core has no public "next timer deadline" query, so the only
// timer the replay drives is the renewal Tick, riding on instants that
// happen anyway; no task of a trace can fail, and none times out: a limit is
// never below the duration, and finishes are delivered before the Tick of
// the same instant, so a timeout timer finds its task already ended.
//
// Measurements, over [first submit, last finish]:
//  - queue wait of each task: from ready (submitted with its dependencies
//    done, or the moment the last one finished) to assigned;
//  - utilisation of cpus, memory and GPUs: what assigned tasks hold;
//  - GPU-seconds idle while a task that fits was waiting: after each
//    instant, the replay packs the waiting GPU tasks (class heads' classes,
//    greedily) into the free GPUs of a mirror of every worker (the core's
//    own WorkerState, booked with the exact cores and GPUs each AssignTask
//    named). Whatever fits would have used idle GPUs. It counts as "held for
//    a reservation" when the core's Explain says the class head is held back
//    by the backfill reservation, and as "other" otherwise; "other" above
//    zero means the core left a fitting task waiting for no reason.
//  - the idle profile: every free GPU-second, each in one category (see
//    IdleProfile), so the gap between the makespan and the plain area bound
//    (idle GPU-seconds / GPUs) can be attributed.
//
// Thread safety: Simulate is a pure function of its arguments.
#ifndef DROVER_SIM_SIMULATOR_H_
#define DROVER_SIM_SIMULATOR_H_

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "common/time.h"
#include "core/placement.h"
#include "sim/cluster.h"
#include "sim/trace.h"

namespace drover::sim {

struct SimOptions {
  core::PolicyKind policy = core::PolicyKind::kSpread;
  bool reservations = true;  // SchedulerConfig::reservations (backfill)
};

struct WaitStats {
  double mean_s = 0;
  double p50_s = 0;  // nearest rank
  double p95_s = 0;
  double max_s = 0;
};

// Where free GPU time went, in GPU-seconds over [first submit, last finish].
// Each free GPU-second counts in exactly one of the first five, so their sum
// is GPUs x makespan minus the GPU work: the makespan's distance from the
// plain area bound (total GPU-seconds / GPUs), times the GPUs.
struct IdleProfile {
  double reservation_gpu_s = 0;    // a waiting task fits, held for a reservation
  double other_gpu_s = 0;          // a waiting task fits, nothing holds it back
  double fragmentation_gpu_s = 0;  // GPU tasks wait, none fits the free GPUs
                                   // (a 4-GPU task and 3 GPUs free on each worker)
  double dependency_gpu_s = 0;     // no GPU task ready, some wait for dependencies
  double queue_empty_gpu_s = 0;    // no GPU task submitted and unfinished waits
  // The part of the total above that lies after the last submit (the tail).
  double after_last_submit_gpu_s = 0;
  double total_gpu_s() const {
    return reservation_gpu_s + other_gpu_s + fragmentation_gpu_s + dependency_gpu_s +
           queue_empty_gpu_s;
  }
};

struct SimResult {
  core::PolicyKind policy = core::PolicyKind::kSpread;
  bool reservations = true;
  uint64_t tasks = 0;
  uint64_t jobs = 0;
  uint64_t events = 0;  // Handle calls
  double makespan_s = 0;  // first submit to last finish
  WaitStats wait;
  // Busy fraction of the cluster's capacity over the makespan.
  double cpu_utilization = 0;
  double mem_utilization = 0;
  double gpu_utilization = 0;
  // GPU-seconds idle while a waiting task would have fitted them.
  double idle_reservation_gpu_s = 0;
  double idle_other_gpu_s = 0;
  IdleProfile idle;  // idle.reservation/other_gpu_s equal the two above
  // Per task, in trace order: queue wait, and start since the trace start.
  std::vector<Duration> waits;
  std::vector<Duration> starts;
};

// Replays `trace` on `cluster`. Errors: kInvalidArgument when a task fits no
// worker of the cluster even when empty (names its id and request);
// kInternal when the core refuses an event, books a core or GPU twice, or
// leaves tasks unfinished — each a core bug, described.
Result<SimResult> Simulate(const Trace& trace, const Cluster& cluster, const SimOptions& options);

// Mean, nearest-rank p50/p95 and maximum of `waits`.
WaitStats ComputeWaitStats(const std::vector<Duration>& waits);

}  // namespace drover::sim

#endif  // DROVER_SIM_SIMULATOR_H_
