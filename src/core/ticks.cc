// Ticks: the timers that come due (retry backoffs, timeouts, start
// deadlines, lost outputs and lost-worker expiry), the settle hold's end
// and lease renewal.
#include "common/quantity.h"
#include "core/adoption_ops.h"
#include "core/attempt_events_ops.h"
#include "core/fair_share_ops.h"
#include "core/job_lifecycle_ops.h"
#include "core/leases_ops.h"
#include "core/lineage_ops.h"
#include "core/lookup_ops.h"
#include "core/quarantine_ops.h"
#include "core/scheduler_state.h"
#include "core/ticks_ops.h"

namespace drover::core {

void PushTimer(State& s, int64_t at_us, TimerKind kind, TaskRef r, uint32_t attempt) {
  s.timers.Push(at_us, kind, r, attempt);
}

void OnTick(State& s) {
  UpdateStandings(s);  // fair share: the order among users, as of now
  while (s.timers.Due(s.now_us)) {
    const Timer timer = s.timers.Pop();
    TaskRef r = timer.task;
    Task& t = s.task(r);
    switch (timer.kind) {
      case TimerKind::kRetry:
        if (t.state == TaskState::kQueued && t.flags.Has(TaskFlag::kBackoff) &&
            t.attempt == timer.attempt) {
          t.flags.Clear(TaskFlag::kBackoff);
          Enqueue(s, r, false);
        }
        break;
      case TimerKind::kTimeout:
        if (t.state == TaskState::kRunning && s.actives[t.active].attempt == timer.attempt &&
            !t.flags.Any(TaskFlag::kTimedOut | TaskFlag::kCancel) && !s.actives[t.active].lost) {
          t.flags.Set(TaskFlag::kTimedOut);
          s.out->push_back(KillTask{s.IdOf(r), timer.attempt,
                                    s.workers[s.actives[t.active].worker].id,
                                    why::TimedOut(s.SpecOf(r).timeout)});
        }
        break;
      case TimerKind::kStartDeadline: {
        if (t.state != TaskState::kAssigned || s.actives[t.active].attempt != timer.attempt) break;
        Active& act = s.actives[t.active];
        if (act.lost || act.worker == kNone) break;  // a lost worker's attempts wait for expiry
        if (act.prev != kNone || t.flags.Has(TaskFlag::kWithdraw)) {
          // Waiting behind another on its worker, or being withdrawn: that
          // is not a failure to start; look again one bound later.
          PushTimer(s, s.now_us + s.config.start_timeout.count(), TimerKind::kStartDeadline, r,
                    timer.attempt);
          break;
        }
        const WorkerId on = s.workers[act.worker].id;
        const Duration bound = StartBoundOf(s, r);
        s.out->push_back(
            KillTask{s.IdOf(r), timer.attempt, on, why::NotStartedWithin(on, bound), true});
        const uint32_t w = act.worker;
        EmitRelease(s, act);
        EndActive(s, t.active);
        HoldRefusing(s, w);  // so the task goes elsewhere if it can
        if (t.flags.Has(TaskFlag::kCancel)) {
          t.flags.KeepOnly(TaskFlag::kStaleEntry);
          Transition(s, r, TaskState::kCanceled, CancelReasonOf(s, r));
        } else {
          NeverStarted(s, r, why::NotStartedWithinTakenBack(on, bound));
        }
        break;
      }
      case TimerKind::kOutputsLost:
        OutputsLostExpired(s, r, timer.attempt);
        break;
      case TimerKind::kLostExpiry:
        if ((t.state == TaskState::kAssigned || t.state == TaskState::kRunning) &&
            s.actives[t.active].attempt == timer.attempt && s.actives[t.active].lost) {
          LostAttemptEnded(s, r);
        }
        break;
    }
  }
  if (s.adoption.settling && s.now_us >= s.adoption.settle_until_us) EndSettle(s);
  if (!s.quarantine.quarantined.empty()) EndQuarantines(s);
  // Cool-downs end and victims appear with time: waiting heads look again.
  s.preempt_due = s.config.preempt_priority.has_value();
  if (s.now_us >= s.next_renew_us) {
    RenewAll(s);
    s.next_renew_us = s.now_us + s.config.renew_interval.count();
  }
}

}  // namespace drover::core
