// HandoffStats: how long a worker's execution slot stays empty between
// tasks, measured on the worker's own clock (shared BENCH.md B3): from the
// moment the worker saw a task exit (`finished.finished_at`) to the moment
// it started the next task's process (`started.started_at`). The server
// only pairs the timestamps the worker already reports, so the figure
// includes the whole round trip worker -> server -> worker (report, core,
// journal, assign, spawn) and nothing of the server's own clock.
//
// Pairing: per worker, exits not yet followed by a start wait in order; each
// start takes the oldest waiting exit that happened before it. With one slot
// this is exactly exit -> next start; with several it is "a slot freed ->
// a slot refilled". A start with no waiting exit (an idle worker getting new
// work) is not a handoff and is not counted. Exits wait for at most
// `max_waiting` per worker (an idle worker's old exits are dropped first),
// and the last `window` samples are kept.
//
// Thread safety: none (the server's event loop).
#ifndef DROVER_SERVER_HANDOFF_STATS_H_
#define DROVER_SERVER_HANDOFF_STATS_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <unordered_map>
#include <vector>

#include "common/ids.h"
#include "common/time.h"

namespace drover::server {

struct HandoffSummary {
  uint64_t count = 0;  // samples ever taken
  // Over the kept window; zero without samples.
  int64_t p50_us = 0;
  int64_t p99_us = 0;
  int64_t max_us = 0;
};

// p50/p99/max (nearest rank) of `samples`, with `count` samples ever taken.
HandoffSummary Summarize(std::vector<int64_t> samples, uint64_t count);

class HandoffStats {
 public:
  explicit HandoffStats(size_t window = 4096, size_t max_waiting = 64)
      : window_(window), max_waiting_(max_waiting) {}

  // The worker saw a task exit at `at` (its clock).
  void Exited(WorkerId worker, Time at);
  // The worker started a task's process at `at` (its clock).
  void Started(WorkerId worker, Time at);
  // The worker left: its waiting exits no longer pair with anything.
  void Forget(WorkerId worker) { waiting_.erase(worker); }

  HandoffSummary Summary() const;

 private:
  size_t window_;
  size_t max_waiting_;
  std::unordered_map<WorkerId, std::deque<Time>> waiting_;
  std::vector<int64_t> samples_;  // ring of the last window_ samples
  size_t next_ = 0;
  uint64_t count_ = 0;
};

}  // namespace drover::server

#endif  // DROVER_SERVER_HANDOFF_STATS_H_
