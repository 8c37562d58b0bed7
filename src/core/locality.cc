// Data locality: a ready task goes where its input files already are, when
// that costs nothing else (scheduler_state.h, NearInputs).
#include <algorithm>

#include "core/input_select.h"
#include "core/scheduler_state.h"

namespace drover::core {

uint64_t Scheduler::State::InputBytes(TaskRef r, const TaskOutcome& o,
                                      const std::string* group) const {
  if (group != nullptr) return SelectedBytes(SpecOf(r), *group, o.outputs);
  uint64_t bytes = 0;
  for (const OutputFile& f : o.outputs) bytes += f.size;
  return bytes;
}

uint64_t Scheduler::State::ProducerCount(TaskRef r) const {
  const Job& job = jobs[r.job];
  uint64_t n = job.spec->after_tasks.size();
  for (uint32_t d : job.groups[task(r).group].deps) n += job.groups[d].count;
  return n;
}

uint32_t Scheduler::State::NearInputs(TaskRef r, uint32_t w) {
  if (!config.locality || extras.empty() || ProducerCount(r) > kLocalityMaxProducers) return w;
  // Input bytes per holding worker slot: few holders, so a flat list.
  std::vector<std::pair<uint64_t, uint32_t>> held;
  ForEachInput(r, [&](TaskId, const TaskOutcome& o, const std::string* group) {
    if (o.outputs.empty() || o.outputs_on == 0) return;
    const uint64_t bytes = InputBytes(r, o, group);
    if (bytes == 0) return;
    for (WorkerId holder : HoldersOf(o)) {
      auto slot = worker_slots.find(holder);
      if (slot == worker_slots.end()) continue;
      auto same = std::find_if(held.begin(), held.end(),
                               [&](const auto& h) { return h.second == slot->second; });
      if (same != held.end()) {
        same->first += bytes;
      } else {
        held.emplace_back(bytes, slot->second);
      }
    }
  });
  if (held.empty()) return w;
  // Most bytes first; among equals the lower slot, so the choice is stable.
  std::sort(held.begin(), held.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  for (const auto& [bytes, slot] : held) {
    if (bytes < kLocalityMinBytes) break;
    if (slot == w) return w;
    if (policy->Comparable(slot, w) && CanPlace(slot, r)) return slot;
  }
  return w;
}

}  // namespace drover::core
