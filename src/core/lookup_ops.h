// Lookups over Scheduler::State beyond its member accessors (task, IdOf,
// SpecOf, RequestOf, ClassOf, Find, FindWorker): a user's slot by name
// (made on first use) and the reasons kept in a task's Extra. Defined in
// scheduler.cc.
//
// Internal to src/core. Thread safety: none, like Scheduler.
#ifndef DROVER_CORE_LOOKUP_OPS_H_
#define DROVER_CORE_LOOKUP_OPS_H_

#include <cstdint>
#include <string>

#include "core/scheduler_state.h"

namespace drover::core {

uint32_t UserOf(State& s, const std::string& name);
Reason ReasonOf(const State& s, TaskRef r);
// Why a kill for a cancel was sent (Cancel), for the record that ends it.
Reason CancelReasonOf(const State& s, TaskRef r);

}  // namespace drover::core

#endif  // DROVER_CORE_LOOKUP_OPS_H_
