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
// Owner presence (Trace::owners, idle-desktop mode) plays the lent
// workstations: at `from` the worker is paused (WorkerPaused) and what runs
// there is suspended (holds its room, makes no progress: its finish moves
// later); at `to` it is offered again and the tasks resume; if the owner is
// still there `suspend_for` after `from`, the tasks are vacated at that
// instant (TaskFinished, vacated) and the core requeues them, to run again
// in full (or from where they were, with `checkpoint`). The core counts a
// task's time limit from its start, suspended time included (it does not
// know the task is frozen), so a task suspended past its limit is killed
// (KillTask) and fails, and what depends on it is canceled: the replay
// plays that as the workers would and counts it (OwnerFigures).
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
#include "core/scheduler.h"
#include "sim/cluster.h"
#include "sim/trace.h"
#include "sim/user_figures.h"

namespace drover::sim {

struct SimOptions {
  core::PolicyKind policy = core::PolicyKind::kSpread;
  bool reservations = true;  // SchedulerConfig::reservations (backfill)
  // Idle-desktop mode: how long tasks stay suspended while their worker's
  // owner is present before they are vacated (`drover worker
  // --suspend-for`); 0: vacated at once.
  Duration suspend_for = ::drover::Seconds(600);
  // A vacated task keeps its progress (it checkpoints): its next attempt
  // runs only what was left. Default: it runs again in full.
  bool checkpoint = false;
  // SchedulerConfig::locality: place dependents near their inputs (off
  // only to measure what it saves: drover sim --no-locality).
  bool locality = true;
  // SchedulerConfig::users.fair_share: the order among users with work
  // queued at the same priority (drover sim --no-fair-share, --half-life,
  // --share). Without groups, a share names a user.
  core::FairShareConfig fair_share;
  // A black hole (drover sim --black-hole NAME): every attempt on this
  // worker fails one second after it starts; "" : none. `quarantine`:
  // SchedulerConfig::quarantine.enabled (drover sim --no-quarantine).
  std::string black_hole;
  bool quarantine = true;
};

// What a black hole cost (SimOptions::black_hole).
struct BlackHoleFigures {
  std::string worker;  // "" : no black hole
  bool quarantine = true;
  uint64_t failed_attempts = 0;  // attempts that ran on it (each failed)
  uint64_t failed_tasks = 0;     // tasks that ended failed there
  uint64_t canceled_tasks = 0;   // dependents of those, canceled
  // GPU-seconds of the tasks that succeeded, over GPUs x makespan.
  double goodput = 0;
};

// What the result cache saved (trace "key", core/result_cache.h): tasks
// that succeeded from an earlier one's result without running.
struct CacheFigures {
  bool on = false;           // the trace has keys
  uint64_t keyed_tasks = 0;  // tasks with a key
  uint64_t reused_tasks = 0;
  double saved_gpu_s = 0;    // their GPUs x duration
  double saved_cpu_s = 0;    // their cores x duration
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
  double owner_gpu_s = 0;          // free GPUs of a worker whose owner is present
  // The part of the total above that lies after the last submit (the tail).
  double after_last_submit_gpu_s = 0;
  double total_gpu_s() const {
    return reservation_gpu_s + other_gpu_s + fragmentation_gpu_s + dependency_gpu_s +
           queue_empty_gpu_s + owner_gpu_s;
  }
};

// What the owners' presence (Trace::owners) cost, over [first submit, last
// finish]. GPU-seconds held by tasks (SimResult::gpu_utilization) are
// useful_gpu_s + suspended_gpu_s + vacated_gpu_s + timed_out_gpu_s, and
// capacity_gpu_s is suspended_gpu_s + IdleProfile::owner_gpu_s (a suspended
// task holds GPUs of a paused worker; the rest of its GPUs are free).
struct OwnerFigures {
  uint64_t presences = 0;           // owner arrivals replayed
  uint64_t suspended_attempts = 0;  // attempts frozen by an arrival
  uint64_t vacated_attempts = 0;    // attempts vacated (each requeued)
  uint64_t timed_out_tasks = 0;     // killed at their limit after a suspension
  uint64_t canceled_tasks = 0;      // canceled: a dependency timed out
  double capacity_gpu_s = 0;        // worker GPUs x time its owner was present
  double suspended_gpu_s = 0;       // GPUs held by suspended tasks x time
  double suspended_cpu_s = 0;       // cores held by suspended tasks x time
  double vacated_gpu_s = 0;         // run time of vacated attempts x GPUs: work
  double vacated_cpu_s = 0;         // thrown away (0 with SimOptions::checkpoint)
  double timed_out_gpu_s = 0;       // run time of attempts killed at their limit
  double useful_gpu_s = 0;          // GPU work of the tasks that finished
  // useful_gpu_s / (GPUs x makespan - capacity_gpu_s): the share of the
  // capacity the owners left to the pool that went into finished work.
  // Without owners it equals gpu_utilization.
  double throughput_kept = 0;
};

struct SimResult {
  core::PolicyKind policy = core::PolicyKind::kSpread;
  bool reservations = true;
  uint64_t tasks = 0;
  uint64_t jobs = 0;
  uint64_t events = 0;    // Handle calls
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
  OwnerFigures owners;
  // Data locality: bytes of their dependencies' outputs (trace "output")
  // that started attempts read, and of those the bytes held by another
  // worker than the one the attempt ran on, which cross the network.
  bool locality = true;
  uint64_t input_bytes = 0;
  uint64_t moved_bytes = 0;
  // Per task, in trace order: queue wait (every stretch it was queued: a
  // vacated task waits again), and the start of its last attempt since the
  // trace start; 0 for a task that never started (canceled). Wait
  // statistics cover the tasks that started.
  std::vector<Duration> waits;
  std::vector<Duration> starts;
  // Fair share was on (SimOptions::fair_share), and what each user of the
  // trace got (user_figures.h).
  bool fair_share = true;
  std::vector<UserFigures> users;
  // Each user's share of the pool over the busy period and over time.
  ShareFigures shares;
  BlackHoleFigures black_hole;
  CacheFigures cache;
};

// Replays `trace` on `cluster`. Errors: kInvalidArgument when a task fits no
// worker of the cluster even when empty (names its id and request), or an
// owner line names a worker the cluster lacks (names the line);
// kInternal when the core refuses an event, books a core or GPU twice, or
// leaves tasks unfinished — each a core bug, described.
Result<SimResult> Simulate(const Trace& trace, const Cluster& cluster, const SimOptions& options);

// Mean, nearest-rank p50/p95 and maximum of `waits`.
WaitStats ComputeWaitStats(const std::vector<Duration>& waits);

}  // namespace drover::sim

#endif  // DROVER_SIM_SIMULATOR_H_
