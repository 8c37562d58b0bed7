// Black-hole quarantine (docs/design.md, "Quarantine"): a worker whose
// attempts fail quickly where the same task groups do not fail quickly on
// other workers takes nothing new for a cool-down, so one sick machine
// cannot drain a queue into failures and burn every task's retries.
//
// The evidence, per worker, is its attempts that ended within `window`
// (at most `recent` of them): quick failures (under `short_attempt`; the
// task's own failure, not a vacate, preemption or cancel) whose group
// another worker ran for longer than `short_attempt` without failing, or
// finished well, within the window (before or after), against its other
// endings (successes, slow failures). A worker with at least
// `min_failures` such failures, making at least `min_fraction` of those
// two together, is quarantined for `cooldown`, doubled for each earlier
// quarantine (at most `max_cooldown`); each quiet stretch of twice its
// last cool-down forgets one doubling, and a worker released from one
// (on probation) is quarantined again at its first quick failure, whatever
// its group, until it has done well once. A bad job that fails quickly
// everywhere is never evidence against a worker not on probation.
//
// The book is kept by worker id, not slot, so a restore can rebuild it
// before any worker is back: it gathers the journal's attempt endings
// (QuarantineBook::restored) and replays them in time order, and a worker
// rejoins in the quarantine it was in.
//
// Internal to src/core: the state (QuarantineBook) lives in State; the
// reactor functions are in quarantine_ops.h.
#ifndef DROVER_CORE_QUARANTINE_H_
#define DROVER_CORE_QUARANTINE_H_

#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/ids.h"
#include "common/time.h"

namespace drover::core {

struct QuarantineConfig {
  bool enabled = true;
  // The evidence: the last `recent` attempt endings within `window`.
  uint32_t recent = 256;
  Duration window = Seconds(30 * 60);
  // A failure this quick is a black hole's kind (a start that fails: a
  // missing mount, a broken driver); a long task's failure is not.
  Duration short_attempt = Seconds(30);
  uint32_t min_failures = 5;
  double min_fraction = 0.7;
  Duration cooldown = Seconds(10 * 60);
  Duration max_cooldown = Seconds(8 * 60 * 60);
};

struct QuarantineBook {
  struct Ended {
    int64_t at_us = 0;
    uint64_t group = 0;  // GroupKey
    bool short_failure = false;
  };
  struct PerWorker {
    std::deque<Ended> recent;  // oldest first, at most QuarantineConfig::recent
    uint32_t repeats = 0;      // quarantines so far, less those forgotten
    int64_t last_end_us = 0;   // when the last one ended (0: none)
    int64_t last_length_us = 0;
    bool probation = false;    // released, and no success since
    int64_t until_us = 0;      // quarantined until then (0: not quarantined)
    std::string why;           // the evidence, while quarantined
  };
  // Up to kSuccessWorkers distinct workers where a group last did not fail
  // quickly: an attempt that started there (evidence from `since_us`, a
  // short attempt later, unless it fails quickly first) or ended well.
  static constexpr size_t kSuccessWorkers = 4;
  struct Success {
    WorkerId worker = 0;
    int64_t since_us = 0;
  };
  std::unordered_map<WorkerId, PerWorker> workers;
  std::unordered_map<uint64_t, std::vector<Success>> successes;
  // Workers with a recent short failure of the group: judged again when
  // it succeeds somewhere else (at most kSuccessWorkers * 4 kept).
  struct FailedOn {
    int64_t last_us = 0;  // the latest of those failures
    std::vector<WorkerId> workers;
  };
  std::unordered_map<uint64_t, FailedOn> failed_on;
  // Both maps lose the groups the window has passed by once they hold
  // this many (then twice what is left, so the pruning is paid once per
  // that many insertions).
  size_t prune_at = 1024;
  // In quarantine now, joined or not (EndQuarantines on Tick ends them).
  std::vector<WorkerId> quarantined;
  uint64_t total = 0;  // quarantines since this scheduler started (a replay's not counted)

  // An attempt gathered from the journal during a restore: where, its
  // group, when it started and ended, and how (kOther: not evidence of
  // its own, as live, but its start still is).
  struct Restored {
    enum class End : uint8_t { kRunning, kSuccess, kFailure, kOther };
    WorkerId worker = 0;
    uint64_t group = 0;
    int64_t start_us = 0;
    int64_t end_us = 0;  // 0 while kRunning
    End end = End::kRunning;
  };
  std::vector<Restored> restored;  // cleared by the replay
  int64_t restored_latest_us = 0;  // the latest time among them
  size_t restored_compact_at = 4096;
  bool replaying = false;
};

// How far back a restore replays attempts: the evidence window, and twice
// the longest cool-down (a quiet stretch that long forgets a doubling).
inline Duration QuarantineHorizon(const QuarantineConfig& c) {
  return c.window + 2 * c.max_cooldown;
}

// A task group across jobs: the job's slot and the group's index.
inline uint64_t GroupKey(uint32_t job, uint16_t group) { return (uint64_t{job} << 16) | group; }

}  // namespace drover::core

#endif  // DROVER_CORE_QUARANTINE_H_
