// Replay of journaled records into a fresh scheduler.
//
// Records set task fields directly; FinishRestore then derives everything
// else (counts, dependency counters, queues, timers) from those fields, so
// replay does not depend on re-running the original decisions.
#include <algorithm>
#include <type_traits>

#include "core/attempt_events_ops.h"
#include "core/checkpoints_ops.h"
#include "core/dispatch_ops.h"
#include "core/fair_share_ops.h"
#include "core/job_lifecycle_ops.h"
#include "core/leases_ops.h"
#include "core/quarantine_ops.h"
#include "core/queue_ahead_ops.h"
#include "core/quotas_ops.h"
#include "core/result_cache_ops.h"
#include "core/scheduler_state.h"
#include "core/ticks_ops.h"

namespace drover::core {

Status Scheduler::Restore(const Record& record) {
  State& s = *state_;
  if (!s.restoring) return FailedPrecondition("Restore after the scheduler started handling events");
  return std::visit(
      [&](const auto& r) -> Status {
        using T = std::decay_t<decltype(r)>;
        if constexpr (std::is_same_v<T, JobRecord>) {
          if (!r.spec) {  // a tombstone: the job was forgotten
            s.next_job_id = std::max(s.next_job_id, r.job + 1);
            s.restored_forgotten.insert(r.job);
            if (auto it = s.job_slots.find(r.job); it != s.job_slots.end()) DropJob(s, it->second);
            if (r.job >= s.forgotten_top) {
              s.forgotten_top = r.job;
              s.forgotten_top_us = ToMicros(r.at);
            }
            return Status::Ok();
          }
          return CreateJob(s, r.job, r.spec, r.at).status();
        } else if constexpr (std::is_same_v<T, TaskRecord>) {
          if (s.restored_forgotten.count(r.task.job)) return Status::Ok();
          ASSIGN_OR_RETURN(TaskRef ref, s.Find(r.task));
          Task& t = s.task(ref);
          Job& job = s.jobs[ref.job];
          job.changed_us = std::max(job.changed_us, ToMicros(r.at));
          // As Transition notes it live.
          if (r.state == TaskState::kQueued && r.attempt > 0 && t.attempt == r.attempt &&
              (t.state == TaskState::kAssigned || t.state == TaskState::kRunning)) {
            NotePastAttempt(s, ref, t.state, ToMicros(r.at), Reason{r.kind, r.reason});
          } else if (t.state == TaskState::kSucceeded && r.attempt == t.attempt &&
                     (r.state == TaskState::kQueued || r.state == TaskState::kWaiting)) {
            // A rerun (lineage.cc): the attempt that succeeded is history.
            NotePastAttempt(s, ref, TaskState::kRunning, ToMicros(r.at), Reason{r.kind, r.reason});
          } else if ((t.state == TaskState::kFailed || t.state == TaskState::kCanceled) &&
                     !IsTerminal(r.state) && r.attempt == t.attempt) {
            NoteRetriedAttempt(s, ref);  // RetryJob
          }
          ReplayUse(s, ref, r);  // fair share: the attempt's use, before r changes t
          NoteRestoredRecord(s, ref, r);  // quarantine evidence, likewise
          const TaskState before = t.state;
          t.state = r.state;
          t.attempt = static_cast<uint16_t>(r.attempt);
          t.failures = static_cast<uint16_t>(r.failures);
          t.worker = r.worker;
          if (r.state == TaskState::kRunning) t.started_us = ToMicros(r.at);
          // When an attempt ended (queued from assigned or running), a rerun
          // made its success history, or the task ended, as Transition sets
          // it. A queued or waiting record after one of those (dependencies
          // met or unmet again; a snapshot's current state) changes nothing.
          const bool was_active = before == TaskState::kAssigned || before == TaskState::kRunning;
          if ((r.state == TaskState::kQueued && r.attempt > 0 && was_active) ||
              (before == TaskState::kSucceeded && !IsTerminal(r.state)) || IsTerminal(r.state)) {
            t.finished_us = ToMicros(r.at);
          }
          if (r.started != Time()) t.started_us = ToMicros(r.started);
          if (!r.reason.empty()) {
            Extra& extra = s.extras[ExtraKey(ref)];
            extra.reason = r.reason;
            extra.reason_kind = r.kind;
          } else if (r.state == TaskState::kSucceeded) {
            // As Transition does live: a success clears a retry's reason.
            if (auto e = s.extras.find(ExtraKey(ref)); e != s.extras.end()) {
              e->second.reason.clear();
              e->second.reason_kind = EndKind::kNone;
            }
          }
          if (r.state == TaskState::kSucceeded) {
            // A plain success (exit 0, nothing measured) is not journaled
            // and clears the outcome live: an earlier attempt's outcome must
            // not come back with this one's success.
            auto seen = s.adoption.restored_outcome_attempts.find(ref);
            if (seen == s.adoption.restored_outcome_attempts.end() || seen->second != r.attempt) {
              if (auto e = s.extras.find(ExtraKey(ref)); e != s.extras.end()) {
                e->second.outcome.reset();
              }
            }
          }
          if (r.state == TaskState::kAssigned) {
            Allocation& alloc = s.adoption.restored_allocs[ref];
            alloc.cores = r.cores;
            alloc.gpus = r.gpus;
            alloc.mem_bytes = s.RequestOf(ref).mem_bytes;
            if (r.after_attempt != 0) {
              s.adoption.restored_after[ref] = {r.after, r.after_attempt};
            } else {
              s.adoption.restored_after.erase(ref);
            }
          } else if (r.state != TaskState::kRunning) {
            s.adoption.restored_allocs.erase(ref);
            s.adoption.restored_after.erase(ref);
          }
          if (IsTerminal(r.state)) t.ran_on = s.ran_on.Intern(r.cores, r.gpus);
          return Status::Ok();
        } else if constexpr (std::is_same_v<T, CheckpointRecord>) {
          RestoreCheckpoint(s, r);
          return Status::Ok();
        } else {
          if (s.restored_forgotten.count(r.task.job)) return Status::Ok();
          ASSIGN_OR_RETURN(TaskRef ref, s.Find(r.task));
          Job& job = s.jobs[ref.job];
          job.changed_us = std::max(job.changed_us, ToMicros(r.at));
          Extra& extra = s.extras[ExtraKey(ref)];
          extra.outcome = r.outcome;
          extra.outcome_attempt = r.attempt;
          s.adoption.restored_outcome_attempts[ref] = r.attempt;
          return Status::Ok();
        }
      },
      record);
}

void Scheduler::ExpectWorkers(std::span<const WorkerId> workers) {
  state_->adoption.expected_workers.insert(state_->adoption.expected_workers.end(), workers.begin(),
                                           workers.end());
}

void Scheduler::FinishRestore(Time now, Outbox& out) {
  State& s = *state_;
  s.restoring = false;
  s.now_us = std::max(s.now_us, ToMicros(now));
  s.out = &out;
  for (uint32_t j = 0; j < s.jobs.size(); ++j) {
    Job& job = s.jobs[j];
    if (job.forgotten) continue;
    job.counts = {};
    job.not_succeeded = 0;
    for (Group& g : job.groups) {
      g.not_succeeded = 0;
      for (uint32_t i = 0; i < g.count; ++i) {
        if (job.tasks[g.first + i].state != TaskState::kSucceeded) ++g.not_succeeded;
      }
      job.not_succeeded += g.not_succeeded;
    }
    for (Group& g : job.groups) {
      g.unmet = 0;
      for (uint32_t d : g.deps) g.unmet += job.groups[d].not_succeeded > 0 ? 1 : 0;
    }
    uint32_t external = 0;
    for (JobId after : job.spec->after_jobs) {
      if (s.jobs[s.job_slots.at(after)].not_succeeded == 0) continue;
      ++external;
      s.job_watchers[after].push_back(j);
    }
    for (const TaskId& after : job.spec->after_tasks) {
      TaskRef ref = s.Find(after).value();
      if (s.task(ref).state == TaskState::kSucceeded) continue;
      ++external;
      s.task_watchers[after].push_back(j);
    }
    for (Group& g : job.groups) {
      g.unmet += external;
      for (uint32_t i = 0; i < g.count && !g.doomed; ++i) {
        TaskState st = job.tasks[g.first + i].state;
        g.doomed = st == TaskState::kCanceled && g.unmet > 0;
      }
    }
  }
  RestoreResultCache(s);  // before the queued tasks below look their keys up
  // Jobs are restored in id order, so an --after target is complete before
  // its watchers; now place or re-arm every live task.
  for (uint32_t j = 0; j < s.jobs.size(); ++j) {
    Job& job = s.jobs[j];
    if (job.forgotten) continue;
    for (uint32_t i = 0; i < job.tasks.size(); ++i) {
      TaskRef r{j, i};
      Task& t = job.tasks[i];
      const Group& g = job.groups[t.group];
      if (t.state == TaskState::kWaiting || t.state == TaskState::kQueued) {
        t.state = g.unmet == 0 ? TaskState::kQueued : TaskState::kWaiting;
        ++job.counts[static_cast<int>(t.state)];
        if (t.state != TaskState::kQueued) continue;
        if (t.failures > 0 && t.finished_us != 0) {
          t.flags.Set(TaskFlag::kBackoff);
          PushTimer(s, t.finished_us + BackoffFor(s, r).count(), TimerKind::kRetry, r, t.attempt);
        } else {
          Enqueue(s, r, false);
        }
        continue;
      }
      ++job.counts[static_cast<int>(t.state)];
      if (IsTerminal(t.state)) continue;
      NoteRestoredRunning(s, r);
      // Assigned or running on a worker we have not heard from yet.
      const uint32_t a = NewActive(s, r, kNone, t.attempt);
      Active& act = s.actives[a];
      act.lost = true;
      act.granted = t.state == TaskState::kRunning;
      auto it = s.adoption.restored_allocs.find(r);
      if (it != s.adoption.restored_allocs.end()) act.alloc = it->second;
      s.adoption.orphans[t.worker].push_back(a);
      PushTimer(s, s.now_us + (s.config.lease_ttl + s.config.expiry_grace).count(),
                TimerKind::kLostExpiry, r, t.attempt);
    }
  }
  // Queue-ahead links whose predecessor is still assigned or running there:
  // the one behind books nothing of its own until that one ends.
  for (const auto& [r, link] : s.adoption.restored_after) {
    const Task& t = s.task(r);
    Result<TaskRef> prev = s.Find(link.first);
    if (t.active == kNone || !prev.ok()) continue;
    const Task& p = s.task(*prev);
    if (p.active == kNone || s.actives[p.active].attempt != link.second || p.worker != t.worker ||
        s.actives[p.active].next != kNone) {
      continue;
    }
    LinkBehind(s, t.active, p.active, UINT64_MAX);
  }
  s.adoption.restored_after.clear();
  s.adoption.restored_allocs.clear();
  s.adoption.restored_outcome_attempts.clear();
  s.adoption.may_adopt_from.insert(s.adoption.expected_workers.begin(),
                                   s.adoption.expected_workers.end());
  for (const auto& [worker, slots] : s.adoption.orphans) s.adoption.may_adopt_from.insert(worker);
  s.restored_forgotten.clear();
  if (s.config.restore_settle > Duration::zero()) {
    s.adoption.settle_waiting = s.adoption.may_adopt_from;
    s.adoption.settle_expected = static_cast<uint32_t>(s.adoption.settle_waiting.size());
    s.adoption.settling = !s.adoption.settle_waiting.empty();
    s.adoption.settle_until_us = s.now_us + s.config.restore_settle.count();
  }
  s.adoption.expected_workers.clear();
  FinishReplayUse(s);
  ReplayRestoredAttempts(s);
  RecountQueued(s);
  Dispatch(s);
  s.out = nullptr;
}

}  // namespace drover::core
