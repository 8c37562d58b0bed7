// Adoption: what the core keeps about a restart, from the replay of the
// journal until every worker that ran something has attached again.
//
// Internal to src/core. A restarted server replays its journal (Restore,
// restore.cc), then FinishRestore turns every task last recorded assigned
// or running into an orphan attempt on the worker it ran on. When that
// worker attaches, its report is the truth (adoption.cc): attempts it does
// not list go back to their queues (TakeBackUnreported), those it lists are
// confirmed (ReconcileRunning), and attempts the journal never saw (the old
// server sent the assignment, then crashed before its record was durable)
// are adopted (Adopt, AdoptQueued), but only from a worker that may hold
// one. Meanwhile placement holds (`settling`), so a task is not placed
// twice before its worker has said what it runs.
//
// Invariants (between events):
//  - `restored_allocs`, `restored_after` and `restored_outcome_attempts`
//    hold records only during replay (Restore); FinishRestore reads and
//    empties them. `expected_workers` likewise holds what ExpectWorkers
//    said, until FinishRestore.
//  - `orphans`: the Active slots (ascending) of restored attempts whose
//    worker has not joined yet, by the worker they last ran on; such an
//    Active has worker kNone and is `lost` (its leases expire unless the
//    worker comes back). An entry may have ended since; the join checks,
//    and drops the worker's entry.
//  - `may_adopt_from`: the workers that may report attempts the journal
//    never saw: those expected at FinishRestore (ExpectWorkers, or holding
//    a restored attempt) until their first attach. Nobody else may have
//    been given an unjournaled attempt, so nobody else's report is adopted.
//  - `adopting` is true only inside the attach (OnWorkerAttached) of a
//    worker just taken out of `may_adopt_from` (BeginAttach).
//  - While `settling`, Dispatch places nothing (dirty classes and workers
//    wait); it ends (EndSettle) when every worker in `settle_waiting` has
//    attached or at `settle_until_us` (Tick), and then `settle_waiting` is
//    empty. `settle_expected` is how many it waited for at the start.
//
// Changed by Restore, ExpectWorkers and FinishRestore (restore.cc), the
// join and attach handlers (scheduler.cc), and SettleAttached and EndSettle
// (adoption.cc).
//
// Thread safety: none, like Scheduler.
#ifndef DROVER_CORE_ADOPTION_H_
#define DROVER_CORE_ADOPTION_H_

#include <cstdint>
#include <map>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "common/ids.h"
#include "core/task_queue.h"
#include "core/worker_state.h"

namespace drover::core {

struct Adoption {
  // --- during replay ---
  // The resources of tasks last recorded assigned.
  std::map<TaskRef, Allocation> restored_allocs;
  // The queue-ahead predecessor of tasks last recorded assigned (or
  // running since) behind one.
  std::map<TaskRef, std::pair<TaskId, uint32_t>> restored_after;
  // The attempt of each task's latest OutcomeRecord.
  std::map<TaskRef, uint32_t> restored_outcome_attempts;
  std::vector<WorkerId> expected_workers;  // ExpectWorkers, until FinishRestore

  // --- after FinishRestore ---
  // Restored assigned/running attempts whose worker has not joined yet, by
  // the worker they last ran on (Active slots, ascending), so a join looks
  // only at its own.
  std::unordered_map<WorkerId, std::vector<uint32_t>> orphans;
  std::unordered_set<WorkerId> may_adopt_from;
  bool adopting = false;  // during the attach of a worker in may_adopt_from
  // Placement hold after a restore (SchedulerConfig::restore_settle).
  bool settling = false;
  int64_t settle_until_us = 0;
  std::unordered_set<WorkerId> settle_waiting;  // expected, not attached yet
  uint32_t settle_expected = 0;

  // The attach of `worker` begins: `adopting` says whether its report may
  // hold attempts the journal never saw, which only its first attach may.
  void BeginAttach(WorkerId worker) { adopting = may_adopt_from.erase(worker) > 0; }
  void EndAttach() { adopting = false; }
  // While settling: `worker` attached. True when it was the last awaited.
  bool Attached(WorkerId worker) {
    settle_waiting.erase(worker);
    return settle_waiting.empty();
  }
  void StopSettling() {
    settling = false;
    settle_waiting.clear();
  }
};

}  // namespace drover::core

#endif  // DROVER_CORE_ADOPTION_H_
