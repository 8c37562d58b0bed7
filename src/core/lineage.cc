// Lineage: a succeeded task whose outputs were lost with their only holder
// runs again while a dependent still needs them (lineage_ops.h).
#include <algorithm>
#include <string>
#include <vector>

#include "core/attempt_events_ops.h"
#include "core/job_lifecycle_ops.h"
#include "core/lineage_ops.h"
#include "core/replicas_ops.h"
#include "core/reservation_ops.h"
#include "core/result_cache_ops.h"
#include "core/scheduler_state.h"
#include "core/ticks_ops.h"

namespace drover::core {

namespace {

bool NotStarted(TaskState s) {
  return s == TaskState::kWaiting || s == TaskState::kQueued || s == TaskState::kAssigned;
}

bool Holds(const TaskOutcome& o, WorkerId w) {
  if (o.outputs.empty()) return false;
  return o.outputs_on == w ||
         std::find(o.replicas.begin(), o.replicas.end(), w) != o.replicas.end();
}

}  // namespace

void NoteOutputsLost(State& s, uint32_t w) {
  if (s.extras.empty()) return;
  const WorkerId id = s.workers[w].id;
  const int64_t due = s.now_us + (s.config.lease_ttl + s.config.expiry_grace).count();
  for (uint32_t j = 0; j < s.jobs.size(); ++j) {
    Job& job = s.jobs[j];
    if (job.forgotten) continue;
    for (uint32_t gi = 0; gi < job.groups.size(); ++gi) {
      const Group& g = job.groups[gi];
      // Outputs a dependent of a running job may need, and copies to keep
      // (replicas.cc) as long as the job is held.
      const bool needed = job.not_succeeded != 0 && !g.dependents.empty();
      if (!needed && job.spec->groups[gi].replicas < 2) continue;
      for (uint32_t i = g.first; i < g.first + g.count; ++i) {
        const Task& t = job.tasks[i];
        if (t.state != TaskState::kSucceeded) continue;
        auto it = s.extras.find(ExtraKey(TaskRef{j, i}));
        if (it == s.extras.end() || !it->second.outcome) continue;
        if (!Holds(*it->second.outcome, id)) continue;
        PushTimer(s, due, TimerKind::kOutputsLost, TaskRef{j, i}, t.attempt);
      }
    }
  }
  // Tasks that jobs still running name in --after receive their files too.
  // (A task both kinds of dependents wait for gets two timers; the second
  // finds it rerun already and does nothing.)
  for (const Job& watcher : s.jobs) {
    if (watcher.forgotten || watcher.not_succeeded == 0) continue;
    for (const TaskId& after : watcher.spec->after_tasks) {
      Result<TaskRef> r = s.Find(after);
      if (!r.ok() || s.jobs[r->job].forgotten) continue;
      const Task& t = s.task(*r);
      if (t.state != TaskState::kSucceeded) continue;
      auto it = s.extras.find(ExtraKey(*r));
      if (it == s.extras.end() || !it->second.outcome) continue;
      if (!Holds(*it->second.outcome, id)) continue;
      PushTimer(s, due, TimerKind::kOutputsLost, *r, t.attempt);
    }
  }
}

bool HolderGone(const State& s, TaskRef r) {
  auto it = s.extras.find(ExtraKey(r));
  if (it == s.extras.end() || !it->second.outcome) return false;
  const std::vector<WorkerId> holders = HoldersOf(*it->second.outcome);
  if (holders.empty()) return false;
  for (WorkerId h : holders) {
    if (!HolderLostPastBound(s, h)) return false;
  }
  return true;
}

std::vector<TaskRef> AwaitingOutputsOf(const State& s, TaskRef r) {
  std::vector<TaskRef> waiting;
  const Job& job = s.jobs[r.job];
  for (uint32_t d : job.groups[s.task(r).group].dependents) {
    const Group& g = job.groups[d];
    if (g.doomed) continue;  // canceled already
    for (uint32_t i = g.first; i < g.first + g.count; ++i) {
      if (NotStarted(job.tasks[i].state)) waiting.push_back(TaskRef{r.job, i});
    }
  }
  const TaskId id = s.IdOf(r);
  for (uint32_t j = 0; j < s.jobs.size(); ++j) {
    const Job& watcher = s.jobs[j];
    if (watcher.forgotten || watcher.not_succeeded == 0) continue;
    const auto& after = watcher.spec->after_tasks;
    if (std::find(after.begin(), after.end(), id) == after.end()) continue;
    for (uint32_t i = 0; i < watcher.tasks.size(); ++i) {
      if (NotStarted(watcher.tasks[i].state)) waiting.push_back(TaskRef{j, i});
    }
  }
  return waiting;
}

bool OutputsNeeded(const State& s, TaskRef r) { return !AwaitingOutputsOf(s, r).empty(); }

void OutputsLostExpired(State& s, TaskRef r, uint32_t attempt) {
  const Task& t = s.task(r);
  if (t.state != TaskState::kSucceeded || t.attempt != attempt) return;
  if (HolderGone(s, r)) {
    if (OutputsNeeded(s, r)) Rerun(s, r);
    return;
  }
  // A copy lives: the lost holders are dropped and new copies asked for.
  for (WorkerId h : HoldersOf(*s.extras.at(ExtraKey(r)).outcome)) {
    if (HolderLostPastBound(s, h)) DropHolder(s, r, h);
  }
}

void Rerun(State& s, TaskRef r, const Reason* why) {
  Task& t = s.task(r);
  Job& job = s.jobs[r.job];
  const std::vector<WorkerId> holders = HoldersOf(*s.extras.at(ExtraKey(r)).outcome);
  if (job.groups[t.group].doomed) {
    // A dependency of its own failed (or its job was canceled): it cannot
    // run again, so what has not started yet cannot get its files.
    CancelNeedersOf(s, r, why::DependencyCannotRerun(s.IdOf(r), holders));
    return;
  }
  const Reason reason = why != nullptr ? *why : why::Rerun(holders);
  // The attempt that made them is history now, as a retried one is; it
  // ends for the record now, when its outputs stopped counting.
  NotePastAttempt(s, r, TaskState::kRunning, s.now_us, reason);
  ++job.not_succeeded;
  Group& g = job.groups[t.group];
  std::vector<uint32_t> unmet_again;  // dependent groups that were ready
  if (g.not_succeeded++ == 0) {
    for (uint32_t d : g.dependents) {
      Group& dependent = job.groups[d];
      if (dependent.unmet++ == 0 && !dependent.doomed) unmet_again.push_back(d);
    }
  }
  if (g.unmet != 0) {
    Transition(s, r, TaskState::kWaiting, reason);
  } else {
    Transition(s, r, TaskState::kQueued, reason);
    // Its own inputs may have gone with the same worker (or an earlier
    // one): Enqueue reruns those producers first, and then it waits.
    Enqueue(s, r, true);
  }
  for (uint32_t d : unmet_again) {
    const Group& dependent = job.groups[d];
    for (uint32_t i = dependent.first; i < dependent.first + dependent.count; ++i) {
      if (job.tasks[i].state == TaskState::kQueued) Unready(s, TaskRef{r.job, i});
    }
  }
  // Jobs submitted --after this task wait for it again too, as a restore
  // would count them (FinishRestore).
  const TaskId id = s.IdOf(r);
  for (uint32_t j = 0; j < s.jobs.size(); ++j) {
    Job& watcher = s.jobs[j];
    if (watcher.forgotten || watcher.not_succeeded == 0 || watcher.spec->after_tasks.empty()) {
      continue;
    }
    for (const TaskId& after : watcher.spec->after_tasks) {
      if (after != id) continue;
      s.task_watchers[id].push_back(j);
      for (Group& g2 : watcher.groups) {
        if (g2.unmet++ != 0 || g2.doomed) continue;
        for (uint32_t i = g2.first; i < g2.first + g2.count; ++i) {
          if (watcher.tasks[i].state == TaskState::kQueued) Unready(s, TaskRef{j, i});
        }
      }
    }
  }
}

void CancelNeedersOf(State& s, TaskRef r, const Reason& reason) {
  for (TaskRef n : AwaitingOutputsOf(s, r)) Cancel(s, n, reason);
}

void Unready(State& s, TaskRef r) {
  Task& t = s.task(r);
  // A queued task without a backoff or a quota hold has an entry in its
  // class queue: it stays there, dead, until it reaches the head or the
  // task is queued again (Enqueue takes it back).
  if (!t.flags.Any(TaskFlag::kBackoff | TaskFlag::kParked)) t.flags.Set(TaskFlag::kStaleEntry);
  t.flags.Clear(TaskFlag::kBackoff | TaskFlag::kParked);
  if (s.reservation.IsFor(r)) EndReservation(s);
  Transition(s, r, TaskState::kWaiting);
}

void RerunLostInputsOf(State& s, TaskRef r) {
  const Job& job = s.jobs[r.job];
  for (uint32_t d : job.groups[s.task(r).group].deps) {
    const Group& dep = job.groups[d];
    for (uint32_t i = dep.first; i < dep.first + dep.count; ++i) {
      const TaskRef p{r.job, i};
      if (s.task(p).state == TaskState::kSucceeded && HolderGone(s, p)) Rerun(s, p);
    }
  }
  for (const TaskId& after : job.spec->after_tasks) {
    Result<TaskRef> p = s.Find(after);
    if (!p.ok() || s.jobs[p->job].forgotten) continue;
    if (s.task(*p).state == TaskState::kSucceeded && HolderGone(s, *p)) Rerun(s, *p);
  }
}

void NoteCorruptCopy(State& s, TaskId producer, WorkerId holder) {
  Result<TaskRef> p = s.Find(producer);
  if (!p.ok()) return;
  auto e = s.extras.find(ExtraKey(*p));
  if (e == s.extras.end() || !e->second.outcome) return;
  const TaskOutcome& o = *e->second.outcome;
  const std::vector<WorkerId> holders = HoldersOf(o);
  if (std::find(holders.begin(), holders.end(), holder) == holders.end()) return;
  if (o.cached_from.job != 0) DropCorruptSource(s, o.cached_from, holder);
  if (holders.size() > 1) {
    DropHolder(s, *p, holder);  // another copy lives; a new one is asked for
    return;
  }
  if (s.task(*p).state != TaskState::kSucceeded) return;
  const Reason reason = why::RerunCorrupt(holder);
  Rerun(s, *p, &reason);
}

}  // namespace drover::core
