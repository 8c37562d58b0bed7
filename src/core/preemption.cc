// Preemption by priority (preemption.h): which attempts make room for a
// waiting task of high priority, the room held for it while they end, and
// the cool-down that keeps tasks from being preempted over and over.
#include <algorithm>
#include <tuple>

#include "core/dispatch_ops.h"
#include "core/leases_ops.h"
#include "core/preemption_ops.h"
#include "core/reservation_ops.h"
#include "core/scheduler_state.h"

namespace drover::core {

VictimChoice ChooseVictims(const State& s, TaskRef r, bool ignore_cooldown) {
  VictimChoice best;
  if (!s.config.preempt_priority) return best;
  const TaskGroupSpec& spec = s.SpecOf(r);
  const ResourceRequest& req = spec.resources;
  const bool full = s.policy->PreferFullGpus();
  const int64_t ceiling = int64_t{spec.priority} - s.config.preempt_gap;
  // (victims, highest victim priority, run time lost): lower is better.
  std::tuple<size_t, int64_t, int64_t> best_cost;
  // An attempt that may be stopped for r: not being stopped already, of a
  // preemptible group far enough below r, with its lease granted (it was
  // sent), and not cooling down unless `ignore_cooldown` (then
  // `cooldown_until` says until when it does).
  const auto eligible = [&](uint32_t a, int64_t& cooldown_until) {
    const Active& act = s.actives[a];
    const Task& t = s.task(act.task);
    if (act.lost || !act.granted || t.active != a ||
        (t.state != TaskState::kAssigned && t.state != TaskState::kRunning)) {
      return false;
    }
    if (t.flags.Any(TaskFlag::kCancel | TaskFlag::kTimedOut | TaskFlag::kLeaseLost |
                    TaskFlag::kResized | TaskFlag::kWithdraw | TaskFlag::kPreempted)) {
      return false;
    }
    const TaskGroupSpec& victim = s.SpecOf(act.task);
    if (!victim.preemptible || victim.priority > ceiling) return false;
    auto it = s.preemption.preempted.find(ExtraKey(act.task));
    if (it == s.preemption.preempted.end() || it->second.count < s.config.max_preemptions)
      return true;
    const int64_t until = it->second.last_us + s.config.preempt_cooldown.count();
    if (s.now_us >= until) return true;
    cooldown_until = std::max(cooldown_until, until);
    return ignore_cooldown;
  };
  // One attempt whose room would come free, with the one waiting behind it
  // (queue-ahead), which would otherwise take that room as it ends.
  struct Candidate {
    int64_t priority;    // the higher of the two
    int64_t started_us;  // now for one not started yet: nothing lost
    TaskId id;
    uint32_t active;
    uint32_t waiter;         // kNone: none
    int64_t cooldown_until;  // 0 when neither is cooling down
  };
  std::vector<Candidate> candidates;
  for (uint32_t w = 0; w < s.workers.size(); ++w) {
    if (!Schedulable(s, w) || !CanEverRun(s, w, r)) continue;
    // Room another preemption or a take-back waits for, or that a
    // reservation keeps for a task at least as high, is not to be had.
    if (s.preemption.On(w) != nullptr || s.queue_ahead.holds.count(w) != 0) continue;
    if (s.reservation.IsOn(w) && !s.reservation.IsFor(r) &&
        s.SpecOf(s.reservation.task).priority >= spec.priority) {
      continue;
    }
    const WorkerState& res = *s.workers[w].res;
    if (res.Fits(req, full)) continue;  // held back by something other than room
    candidates.clear();
    for (uint32_t a : s.workers[w].actives) {
      const Active& act = s.actives[a];
      // A waiter holds no room of its own: it goes with its predecessor.
      if (!act.booked || act.prev != kNone) continue;
      int64_t cooldown_until = 0;
      if (!eligible(a, cooldown_until)) continue;
      int64_t priority = s.SpecOf(act.task).priority;
      if (act.next != kNone) {
        if (!eligible(act.next, cooldown_until)) continue;
        priority = std::max<int64_t>(priority, s.SpecOf(s.actives[act.next].task).priority);
      }
      const Task& t = s.task(act.task);
      const int64_t started = t.state == TaskState::kRunning ? t.started_us : s.now_us;
      candidates.push_back({priority, started, s.IdOf(act.task), a, act.next, cooldown_until});
    }
    if (candidates.empty()) continue;
    // Lowest priority first, then the most recently started.
    std::sort(candidates.begin(), candidates.end(), [](const Candidate& x, const Candidate& y) {
      return std::make_tuple(x.priority, -x.started_us, x.id) <
             std::make_tuple(y.priority, -y.started_us, y.id);
    });
    const auto free = [&](WorkerState& state, const Candidate& c) {
      state.Free(s.RequestOf(s.actives[c.active].task), s.actives[c.active].alloc);
    };
    const auto take = [&](WorkerState& state, const Candidate& c) {
      return state.AllocateExact(s.RequestOf(s.actives[c.active].task), s.actives[c.active].alloc);
    };
    WorkerState trial = res;
    for (const Candidate& c : candidates) free(trial, c);
    if (!trial.Fits(req, full)) continue;  // not even all of them make room
    trial = res;
    std::vector<size_t> chosen;  // indices into candidates
    // One victim when one makes room: the first in that order.
    for (size_t i = 0; i < candidates.size() && chosen.empty(); ++i) {
      free(trial, candidates[i]);
      if (trial.Fits(req, full)) chosen.push_back(i);
      if (!take(trial, candidates[i])) trial = res;
    }
    if (chosen.empty()) {
      // Else in that order until it fits, then spare those it does not
      // need, the highest first.
      trial = res;
      for (size_t i = 0; i < candidates.size(); ++i) {
        free(trial, candidates[i]);
        chosen.push_back(i);
        if (trial.Fits(req, full)) break;
      }
      for (size_t k = chosen.size(); k-- > 0;) {
        if (!take(trial, candidates[chosen[k]])) continue;
        if (trial.Fits(req, full)) {
          chosen.erase(chosen.begin() + static_cast<std::ptrdiff_t>(k));
        } else {
          free(trial, candidates[chosen[k]]);
        }
      }
    }
    size_t count = 0;
    int64_t top = INT64_MIN;
    int64_t lost = 0;
    int64_t cooldown_until = 0;
    for (size_t i : chosen) {
      count += candidates[i].waiter == kNone ? 1 : 2;
      top = std::max(top, candidates[i].priority);
      lost += s.now_us - candidates[i].started_us;
      cooldown_until = std::max(cooldown_until, candidates[i].cooldown_until);
    }
    const auto cost = std::make_tuple(count, top, lost);
    if (best.worker != kNone && !(cost < best_cost)) continue;  // ties: the first worker
    best_cost = cost;
    best.worker = w;
    best.cooldown_until = cooldown_until;
    best.actives.clear();
    for (size_t i : chosen) {
      best.actives.push_back(candidates[i].active);
      if (candidates[i].waiter != kNone) best.actives.push_back(candidates[i].waiter);
    }
    std::sort(best.actives.begin(), best.actives.end(), [&](uint32_t x, uint32_t y) {
      return s.IdOf(s.actives[x].task) < s.IdOf(s.actives[y].task);
    });
  }
  return best;
}

bool Preempt(State& s, TaskRef r) {
  if (!s.config.preempt_priority || s.SpecOf(r).priority < *s.config.preempt_priority) return false;
  if (s.preemption.For(r) != nullptr) return true;  // one at a time
  const VictimChoice choice = ChooseVictims(s, r, false);
  if (choice.worker == kNone) return false;
  const TaskId by = s.IdOf(r);
  const int32_t priority = s.SpecOf(r).priority;
  Preemption p{r, choice.worker, {}};
  for (uint32_t a : choice.actives) {
    const Active& act = s.actives[a];
    s.task(act.task).flags.Set(TaskFlag::kPreempted);
    Preempted& count = s.preemption.preempted[ExtraKey(act.task)];
    ++count.count;
    count.last_us = s.now_us;
    count.by = by;
    count.by_priority = priority;
    p.victims.emplace_back(act.task, act.attempt);
    s.out->push_back(KillTask{s.IdOf(act.task), act.attempt, s.workers[choice.worker].id,
                              PreemptedReason(s, act.task), /*hard=*/false, /*only_queued=*/false,
                              /*vacate=*/true});
  }
  s.preemption.in_flight.push_back(std::move(p));
  // The held worker is its reservation now: one elsewhere would hold back
  // room it will not use, and one here (for a task below it) would keep it
  // out of the room its victims free.
  if (s.reservation.IsFor(r) || s.reservation.IsOn(choice.worker)) EndReservation(s);
  return true;
}

void PreemptBlockedHeads(State& s) {
  if (!s.config.preempt_priority) return;
  const int32_t floor = *s.config.preempt_priority;
  WalkHeads(s, [&](uint32_t, TaskRef r) {
    if (s.SpecOf(r).priority < floor) return Walk::kStop;  // and every head after it
    if (s.preemption.For(r) != nullptr) return Walk::kNext;
    for (uint32_t w = 0; w < s.workers.size(); ++w) {
      if (CanPlace(s, w, r)) return Walk::kNext;  // room freed: placement takes it
    }
    Preempt(s, r);
    return Walk::kNext;
  });
}

bool PreemptionAllows(State& s, uint32_t w, TaskRef r) {
  if (s.preemption.in_flight.empty()) return true;
  const Preemption* p = s.preemption.On(w);
  if (p == nullptr || p->preemptor == r) return true;
  const ResourceRequest& held = s.RequestOf(p->preemptor);
  // As it would be placed now, and with the victims' room given back.
  return AfterPlacing(s, w, r, [&] {
    WorkerState after = *s.workers[w].res;
    for (const auto& [victim, attempt] : p->victims) {
      const Task& t = s.task(victim);
      if (t.active == kNone) continue;
      const Active& act = s.actives[t.active];
      if (act.attempt == attempt && act.booked && act.worker == w) {
        after.Free(s.RequestOf(victim), act.alloc);
      }
    }
    return after.Fits(held, s.policy->PreferFullGpus());
  });
}

void VictimEnded(State& s, TaskRef r, uint32_t attempt) {
  for (Preemption& p : s.preemption.in_flight) {
    auto it = std::find(p.victims.begin(), p.victims.end(), std::make_pair(r, attempt));
    if (it == p.victims.end()) continue;
    p.victims.erase(it);
    // Offered to the heads even if the victim held nothing booked any more
    // (a re-offer): SettlePreemption then ends the preemption there.
    if (p.victims.empty() && Schedulable(s, p.worker)) MarkWorkerDirty(s, p.worker);
    return;
  }
}

void EndPreemption(State& s, TaskRef preemptor) {
  auto& in_flight = s.preemption.in_flight;
  for (auto it = in_flight.begin(); it != in_flight.end(); ++it) {
    if (!(it->preemptor == preemptor)) continue;
    const uint32_t w = it->worker;
    in_flight.erase(it);
    // Heads held back there may have room now.
    if (Schedulable(s, w)) MarkWorkerDirty(s, w);
    return;
  }
}

void DropPreemptionOn(State& s, uint32_t w) {
  auto& in_flight = s.preemption.in_flight;
  in_flight.erase(std::remove_if(in_flight.begin(), in_flight.end(),
                                 [&](const Preemption& p) { return p.worker == w; }),
                  in_flight.end());
}

void SettlePreemption(State& s, uint32_t w) {
  auto& in_flight = s.preemption.in_flight;
  for (auto it = in_flight.begin(); it != in_flight.end(); ++it) {
    if (it->worker != w || !it->victims.empty()) continue;
    // Its victims are gone and the heads were offered the room: the
    // preemptor did not take it (a higher head did, or the worker
    // changed). It may preempt again on the next Tick.
    in_flight.erase(it);
    MarkWorkerDirty(s, w);
    return;
  }
}

Reason PreemptedReason(const State& s, TaskRef r) {
  auto it = s.preemption.preempted.find(ExtraKey(r));
  if (it == s.preemption.preempted.end()) return why::PreemptedBy(std::nullopt, 0);
  return why::PreemptedBy(it->second.by, it->second.by_priority);
}

}  // namespace drover::core
