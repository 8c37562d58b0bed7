// Data locality (locality.cc): the producers whose output files a task
// receives (ForEachInput, a template so the visitor is inlined), how many
// bytes of them, and the worker holding most of them (NearInputs), which
// placement prefers when the policy ranks it equal.
//
// Internal to src/core. Thread safety: none, like Scheduler.
#ifndef DROVER_CORE_LOCALITY_OPS_H_
#define DROVER_CORE_LOCALITY_OPS_H_

#include <cstdint>
#include <string>

#include "core/scheduler_state.h"

namespace drover::core {

// Calls f(producer, outcome, group) for each task whose result and output
// files `r` receives, that has an outcome: the tasks of its group's
// dependency groups (`group`: the producer group's name, which r's
// `inputs` select files of) and the tasks its job names in --after
// (`group` null: all their files).
template <typename F>
void ForEachInput(const State& s, TaskRef r, F&& f) {
  if (s.extras.empty()) return;
  const Job& job = s.jobs[r.job];
  for (uint32_t d : job.groups[s.task(r).group].deps) {
    const Group& g = job.groups[d];
    for (uint32_t i = g.first; i < g.first + g.count; ++i) {
      auto it = s.extras.find(ExtraKey(TaskRef{r.job, i}));
      if (it == s.extras.end() || !it->second.outcome) continue;
      f(TaskId{job.id, i}, *it->second.outcome, &job.spec->groups[d].name);
    }
  }
  for (const TaskId& after : job.spec->after_tasks) {
    auto slot = s.job_slots.find(after.job);
    if (slot == s.job_slots.end()) continue;
    auto it = s.extras.find(ExtraKey(TaskRef{slot->second, after.index}));
    if (it == s.extras.end() || !it->second.outcome) continue;
    f(after, *it->second.outcome, static_cast<const std::string*>(nullptr));
  }
}
// The bytes of `o`'s files that r receives (see ForEachInput).
uint64_t InputBytes(const State& s, TaskRef r, const TaskOutcome& o, const std::string* group);
// How many producers ForEachInput would visit at most.
uint64_t ProducerCount(const State& s, TaskRef r);
// Worker slot `w` is the policy's choice for `r`: the worker holding the
// most of r's input bytes instead, when r fits there now and the policy
// ranks it equal within its tolerance (SchedulerConfig::locality).
uint32_t NearInputs(State& s, TaskRef r, uint32_t w);

}  // namespace drover::core

#endif  // DROVER_CORE_LOCALITY_OPS_H_
