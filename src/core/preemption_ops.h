// Preemption by priority (preemption.cc): a head at or above
// preempt_priority that no worker can place chooses victims on one worker,
// vacates them and holds that worker for itself until they have ended. The
// rules and the book of preemptions in flight are in preemption.h.
//
// Internal to src/core. Thread safety: none, like Scheduler.
#ifndef DROVER_CORE_PREEMPTION_OPS_H_
#define DROVER_CORE_PREEMPTION_OPS_H_

#include <cstdint>
#include <vector>

#include "core/scheduler_state.h"

namespace drover::core {

// Victims for `r` on one worker, by the rules of preemption.h; worker
// kNone when no worker has a set that makes room. `ignore_cooldown`: as
// if no task were in its cool-down; `cooldown_until` is then the latest
// cool-down end among the victims chosen (0 when none is cooling down).
struct VictimChoice {
  uint32_t worker = kNone;
  std::vector<uint32_t> actives;  // in task id order
  int64_t cooldown_until = 0;
};
VictimChoice ChooseVictims(const State& s, TaskRef r, bool ignore_cooldown);
// `r` heads its class and no worker can place it now: it preempts if
// preemption is on and it may. True when a preemption for it is in
// flight (begun now or before).
bool Preempt(State& s, TaskRef r);
// On Tick: every class head of at least preempt_priority that no worker
// can place now preempts if it may (cool-downs end, victims appear).
void PreemptBlockedHeads(State& s);
// Placing `r` on `w` leaves the preemptor `w` is held for room once its
// victims have ended.
bool PreemptionAllows(State& s, uint32_t w, TaskRef r);
// Attempt `attempt` of the victim `r` ended (EndActive).
void VictimEnded(State& s, TaskRef r, uint32_t attempt);
// Ends the preemption in flight for `preemptor` (if any) and offers its
// worker again.
void EndPreemption(State& s, TaskRef preemptor);
// Worker slot `w` left placement: the preemption held there ends.
void DropPreemptionOn(State& s, uint32_t w);
// After `w` was offered to the heads: a preemption there whose victims
// have all ended is over (its preemptor took the room, or could not).
void SettlePreemption(State& s, uint32_t w);
// "preempted by 14.2 (priority 90)": why the victim `r` went back.
Reason PreemptedReason(const State& s, TaskRef r);

}  // namespace drover::core

#endif  // DROVER_CORE_PREEMPTION_OPS_H_
