// Ticks: the timers that come due (retry backoffs, timeouts, start
// deadlines, lost outputs and lost-worker expiry), the settle hold's end
// and lease renewal.
#include "common/quantity.h"
#include "core/scheduler_state.h"

namespace drover::core {

void Scheduler::State::PushTimer(int64_t at_us, TimerKind kind, TaskRef r, uint32_t attempt) {
  timers.Push(at_us, kind, r, attempt);
}

void Scheduler::State::OnTick() {
  UpdateStandings();  // fair share: the order among users, as of now
  while (timers.Due(now_us)) {
    const Timer timer = timers.Pop();
    TaskRef r = timer.task;
    Task& t = task(r);
    switch (timer.kind) {
      case TimerKind::kRetry:
        if (t.state == TaskState::kQueued && t.flags.Has(TaskFlag::kBackoff) &&
            t.attempt == timer.attempt) {
          t.flags.Clear(TaskFlag::kBackoff);
          Enqueue(r, false);
        }
        break;
      case TimerKind::kTimeout:
        if (t.state == TaskState::kRunning && actives[t.active].attempt == timer.attempt &&
            !t.flags.Any(TaskFlag::kTimedOut | TaskFlag::kCancel) && !actives[t.active].lost) {
          t.flags.Set(TaskFlag::kTimedOut);
          out->push_back(KillTask{IdOf(r), timer.attempt, workers[actives[t.active].worker].id,
                                  why::TimedOut(SpecOf(r).timeout)});
        }
        break;
      case TimerKind::kStartDeadline: {
        if (t.state != TaskState::kAssigned || actives[t.active].attempt != timer.attempt) break;
        Active& act = actives[t.active];
        if (act.lost || act.worker == kNone) break;  // a lost worker's attempts wait for expiry
        if (act.prev != kNone || t.flags.Has(TaskFlag::kWithdraw)) {
          // Waiting behind another on its worker, or being withdrawn: that
          // is not a failure to start; look again one bound later.
          PushTimer(now_us + config.start_timeout.count(), TimerKind::kStartDeadline, r,
                    timer.attempt);
          break;
        }
        const WorkerId on = workers[act.worker].id;
        const Duration bound = StartBoundOf(r);
        out->push_back(
            KillTask{IdOf(r), timer.attempt, on, why::NotStartedWithin(on, bound), true});
        const uint32_t w = act.worker;
        EmitRelease(act);
        EndActive(t.active);
        HoldRefusing(w);  // so the task goes elsewhere if it can
        if (t.flags.Has(TaskFlag::kCancel)) {
          t.flags.KeepOnly(TaskFlag::kStaleEntry);
          Transition(r, TaskState::kCanceled, CancelReasonOf(r));
        } else {
          NeverStarted(r, why::NotStartedWithinTakenBack(on, bound));
        }
        break;
      }
      case TimerKind::kOutputsLost:
        OutputsLostExpired(r, timer.attempt);
        break;
      case TimerKind::kLostExpiry:
        if ((t.state == TaskState::kAssigned || t.state == TaskState::kRunning) &&
            actives[t.active].attempt == timer.attempt && actives[t.active].lost) {
          LostAttemptEnded(r);
        }
        break;
    }
  }
  if (adoption.settling && now_us >= adoption.settle_until_us) EndSettle();
  // Cool-downs end and victims appear with time: waiting heads look again.
  preempt_due = config.preempt_priority.has_value();
  if (now_us >= next_renew_us) {
    RenewAll();
    next_renew_us = now_us + config.renew_interval.count();
  }
}

}  // namespace drover::core
