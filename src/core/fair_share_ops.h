// Fair share (fair_share.cc): each user's decayed use, charged while its
// Active slots hold resources (HoldUse), and the standings that order the
// queues, changed only on Tick (UpdateStandings) so a walk's order is
// stable within a handling. The book is FairShareBook (fair_share.h).
//
// Internal to src/core. Thread safety: none, like Scheduler.
#ifndef DROVER_CORE_FAIR_SHARE_OPS_H_
#define DROVER_CORE_FAIR_SHARE_OPS_H_

#include <cstdint>

#include "core/scheduler_state.h"

namespace drover::core {

// Every user's standing as of now, into the queues' order.
void UpdateStandings(State& s);
void SyncFairShareUsers(State& s);
// User u's Active slot starts (hold) or stops holding `req`: the user's
// use is charged up to now. (Inline: twice per attempt, in B1's path.)
inline void HoldUse(State& s, uint32_t u, const ResourceRequest& req, bool hold) {
  if (u >= s.fair_share.user_count()) SyncFairShareUsers(s);
  if (hold) {
    s.fair_share.Hold(u, req, s.now_us);
  } else {
    s.fair_share.Release(u, req, s.now_us);
  }
}
// Restore: rebuilds use from the task records (fair_share.h, "Restarts").
// ReplayUse reads `record` before it changes task r: an assignment or
// start notes since when the attempt holds, its end charges the span
// (AddPast). FinishReplayUse charges the attempts still held up to now
// and sets the standings.
void ReplayUse(State& s, TaskRef r, const TaskRecord& record);
void FinishReplayUse(State& s);

}  // namespace drover::core

#endif  // DROVER_CORE_FAIR_SHARE_OPS_H_
