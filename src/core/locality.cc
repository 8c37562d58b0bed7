// Data locality: a ready task goes where its input files already are, when
// that costs nothing else (locality_ops.h, NearInputs).
#include <algorithm>

#include "core/dispatch_ops.h"
#include "core/input_select.h"
#include "core/locality_ops.h"
#include "core/replicas_ops.h"
#include "core/scheduler_state.h"

namespace drover::core {

uint64_t InputBytes(const State& s, TaskRef r, const TaskOutcome& o, const std::string* group) {
  if (group != nullptr) return SelectedBytes(s.SpecOf(r), *group, o.outputs);
  uint64_t bytes = 0;
  for (const OutputFile& f : o.outputs) bytes += f.size;
  return bytes;
}

uint64_t ProducerCount(const State& s, TaskRef r) {
  const Job& job = s.jobs[r.job];
  uint64_t n = job.spec->after_tasks.size();
  for (uint32_t d : job.groups[s.task(r).group].deps) n += job.groups[d].count;
  return n;
}

uint32_t NearInputs(State& s, TaskRef r, uint32_t w) {
  if (!s.config.locality || s.extras.empty() || ProducerCount(s, r) > kLocalityMaxProducers) {
    return w;
  }
  // Input bytes per holding worker slot: few holders, so a flat list.
  std::vector<std::pair<uint64_t, uint32_t>> held;
  ForEachInput(s, r, [&](TaskId, const TaskOutcome& o, const std::string* group) {
    if (o.outputs.empty() || o.outputs_on == 0) return;
    const uint64_t bytes = InputBytes(s, r, o, group);
    if (bytes == 0) return;
    for (WorkerId holder : HoldersOf(o)) {
      auto slot = s.worker_slots.find(holder);
      if (slot == s.worker_slots.end()) continue;
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
    if (s.policy->Comparable(slot, w) && CanPlace(s, slot, r)) return slot;
  }
  return w;
}

}  // namespace drover::core
