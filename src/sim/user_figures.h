// UserFigures: what a replay gave each user of the trace (`drover sim`'s
// `users` lines and JSON `users`), to see what fair share
// (SchedulerConfig::users.fair_share) does to who waits.
//
// Thread safety: pure functions.
#ifndef DROVER_SIM_USER_FIGURES_H_
#define DROVER_SIM_USER_FIGURES_H_

#include <string>
#include <vector>

#include "common/time.h"
#include "sim/trace.h"

namespace drover::sim {

struct WaitStats;

struct UserFigures {
  std::string user;
  uint64_t tasks = 0;  // of the trace
  double cpu_s = 0;    // cores x duration of its tasks that started
  double gpu_s = 0;    // GPUs x duration of its tasks that started
  // Queue waits of its tasks that started (SimResult::waits).
  double wait_mean_s = 0;
  double wait_p95_s = 0;
  double wait_max_s = 0;
};

// One per user of `trace`, in Trace::users order. `waits` and `started`
// are per task in trace order (SimResult::waits; started: the task ran).
std::vector<UserFigures> ComputeUserFigures(const Trace& trace, const std::vector<Duration>& waits,
                                            const std::vector<bool>& started);

// Each user's share of what the pool gave (GPU-seconds; core-seconds when
// the trace asks for no GPUs): over the busy period, from the moment every
// user of the trace has submitted work to the last start of the user whose
// work starts first in full (until then every user has work waiting: the
// pool is contended by all), and in `windows` equal windows of [first
// submit, `end_s`]. A task runs [start, start + duration) of its last
// attempt. Empty when the trace has one user or the busy period is empty.
struct ShareFigures {
  double busy_from_s = 0;
  double busy_to_s = 0;
  std::vector<double> busy;  // per user, in Trace::users order; sums to 1
  struct Window {
    double from_s = 0;
    double to_s = 0;
    std::vector<double> shares;  // per user; all 0 when the pool gave nothing
  };
  std::vector<Window> windows;
  bool gpus = true;  // GPU-seconds (else core-seconds)
};
ShareFigures ComputeShares(const Trace& trace, const std::vector<Duration>& starts,
                           const std::vector<bool>& started, double end_s, size_t windows = 10);

}  // namespace drover::sim

#endif  // DROVER_SIM_USER_FIGURES_H_
