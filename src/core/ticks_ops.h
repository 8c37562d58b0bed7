// Timers (ticks.cc): OnTick fires what is due in State::timers (timers.h:
// retries, timeouts, lost expiry, start deadlines) and sends the renewals;
// PushTimer arms one.
//
// Internal to src/core. Thread safety: none, like Scheduler.
#ifndef DROVER_CORE_TICKS_OPS_H_
#define DROVER_CORE_TICKS_OPS_H_

#include <cstdint>

#include "core/scheduler_state.h"

namespace drover::core {

void OnTick(State& s);
void PushTimer(State& s, int64_t at_us, TimerKind kind, TaskRef r, uint32_t attempt);

}  // namespace drover::core

#endif  // DROVER_CORE_TICKS_OPS_H_
