// Replicas: copies of a succeeded task's outputs on further workers, so that
// losing one worker loses no work (replicas_ops.h).
#include <algorithm>

#include "core/leases_ops.h"
#include "core/replicas_ops.h"
#include "core/scheduler_state.h"

namespace drover::core {

std::vector<WorkerId> HoldersOf(const TaskOutcome& o) {
  std::vector<WorkerId> holders;
  if (o.outputs.empty() || o.outputs_on == 0) return holders;
  holders.push_back(o.outputs_on);
  holders.insert(holders.end(), o.replicas.begin(), o.replicas.end());
  return holders;
}

bool HolderLostPastBound(const State& s, WorkerId w) {
  auto slot = s.worker_slots.find(w);
  if (slot == s.worker_slots.end()) return false;  // not seen since a restart: cannot tell
  const Worker& holder = s.workers[slot->second];
  return holder.lost &&
         s.now_us >= holder.lost_us + (s.config.lease_ttl + s.config.expiry_grace).count();
}

void Replicate(State& s, TaskRef r) {
  auto it = s.extras.find(ExtraKey(r));
  if (it == s.extras.end() || !it->second.outcome) return;
  const TaskOutcome& o = *it->second.outcome;
  const std::vector<WorkerId> holders = HoldersOf(o);
  // Copies come from the holders that are up, the original first.
  std::vector<WorkerId> from;
  for (WorkerId h : holders) {
    auto slot = s.worker_slots.find(h);
    if (slot != s.worker_slots.end() && !s.workers[slot->second].lost) from.push_back(h);
  }
  if (from.empty()) return;
  const uint32_t want = std::min(s.SpecOf(r).replicas, kMaxReplicas);
  std::vector<WorkerId> asked;
  while (holders.size() + asked.size() < want) {
    FlushLoads(s);
    const uint32_t w = s.policy->Choose([&](uint32_t slot) {
      if (!Schedulable(s, slot)) return false;
      const WorkerId id = s.workers[slot].id;
      return std::find(holders.begin(), holders.end(), id) == holders.end() &&
             std::find(asked.begin(), asked.end(), id) == asked.end();
    });
    if (w == kNoWorker) return;
    asked.push_back(s.workers[w].id);
    s.out->push_back(
        ReplicateOutputs{s.IdOf(r), s.task(r).attempt, s.workers[w].id, from, o.outputs});
  }
}

Status OnOutputsReplicated(State& s, const OutputsReplicated& e) {
  ASSIGN_OR_RETURN(TaskRef r, s.Find(e.task));
  const Task& t = s.task(r);
  auto it = s.extras.find(ExtraKey(r));
  if (t.state != TaskState::kSucceeded || t.attempt != e.attempt || it == s.extras.end() ||
      !it->second.outcome || it->second.outcome_attempt != e.attempt ||
      it->second.outcome->outputs.empty()) {
    return FailedPrecondition("copy of the outputs of " + e.task.ToString() + "#" +
                              std::to_string(e.attempt) + ", which are not current");
  }
  if (!s.worker_slots.count(e.worker)) return NotFound("no worker " + std::to_string(e.worker));
  TaskOutcome& o = *it->second.outcome;
  const std::vector<WorkerId> holders = HoldersOf(o);
  if (std::find(holders.begin(), holders.end(), e.worker) != holders.end()) {
    return FailedPrecondition("worker " + std::to_string(e.worker) + " holds the outputs of " +
                              e.task.ToString() + " already");
  }
  if (holders.size() >= std::min(s.SpecOf(r).replicas, kMaxReplicas)) {
    return FailedPrecondition("the outputs of " + e.task.ToString() + " have their copies");
  }
  o.replicas.push_back(e.worker);
  // Journaled as the outcome again, stamped with the attempt's end as a
  // snapshot stamps it: where its files are is not a change of the job's.
  s.out->push_back(Persist{OutcomeRecord{e.task, e.attempt, o, TimeFromMicros(t.finished_us)}});
  return Status::Ok();
}

void DropHolder(State& s, TaskRef r, WorkerId w) {
  Extra& extra = s.extras.at(ExtraKey(r));
  TaskOutcome& o = *extra.outcome;
  if (o.outputs_on == w) {
    if (o.replicas.empty()) return;  // the last holder: lineage's case
    o.outputs_on = o.replicas.front();
    o.replicas.erase(o.replicas.begin());
  } else {
    auto pos = std::find(o.replicas.begin(), o.replicas.end(), w);
    if (pos == o.replicas.end()) return;
    o.replicas.erase(pos);
  }
  s.out->push_back(Persist{
      OutcomeRecord{s.IdOf(r), extra.outcome_attempt, o, TimeFromMicros(s.task(r).finished_us)}});
  Replicate(s, r);
}

}  // namespace drover::core
