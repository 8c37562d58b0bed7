// Preemption by priority (preemption.h): which attempts make room for a
// waiting task of high priority, the room held for it while they end, and
// the cool-down that keeps tasks from being preempted over and over.
#include <algorithm>
#include <tuple>

#include "core/scheduler_state.h"

namespace drover::core {

Scheduler::State::VictimChoice Scheduler::State::ChooseVictims(TaskRef r,
                                                               bool ignore_cooldown) const {
  VictimChoice best;
  if (!config.preempt_priority) return best;
  const TaskGroupSpec& spec = SpecOf(r);
  const ResourceRequest& req = spec.resources;
  const bool full = policy->PreferFullGpus();
  const int64_t ceiling = int64_t{spec.priority} - config.preempt_gap;
  // (victims, highest victim priority, run time lost): lower is better.
  std::tuple<size_t, int64_t, int64_t> best_cost;
  // An attempt that may be stopped for r: not being stopped already, of a
  // preemptible group far enough below r, with its lease granted (it was
  // sent), and not cooling down unless `ignore_cooldown` (then
  // `cooldown_until` says until when it does).
  const auto eligible = [&](uint32_t a, int64_t& cooldown_until) {
    const Active& act = actives[a];
    const Task& t = task(act.task);
    if (act.lost || !act.granted || t.active != a ||
        (t.state != TaskState::kAssigned && t.state != TaskState::kRunning)) {
      return false;
    }
    if (t.flags.Any(TaskFlag::kCancel | TaskFlag::kTimedOut | TaskFlag::kLeaseLost |
                    TaskFlag::kResized | TaskFlag::kWithdraw | TaskFlag::kPreempted)) {
      return false;
    }
    const TaskGroupSpec& victim = SpecOf(act.task);
    if (!victim.preemptible || victim.priority > ceiling) return false;
    auto it = preemption.preempted.find(ExtraKey(act.task));
    if (it == preemption.preempted.end() || it->second.count < config.max_preemptions) return true;
    const int64_t until = it->second.last_us + config.preempt_cooldown.count();
    if (now_us >= until) return true;
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
  for (uint32_t w = 0; w < workers.size(); ++w) {
    if (!Schedulable(w) || !CanEverRun(w, r)) continue;
    // Room another preemption or a take-back waits for, or that a
    // reservation keeps for a task at least as high, is not to be had.
    if (preemption.On(w) != nullptr || queue_ahead.holds.count(w) != 0) continue;
    if (reservation.IsOn(w) && !reservation.IsFor(r) &&
        SpecOf(reservation.task).priority >= spec.priority) {
      continue;
    }
    const WorkerState& res = *workers[w].res;
    if (res.Fits(req, full)) continue;  // held back by something other than room
    candidates.clear();
    for (uint32_t a : workers[w].actives) {
      const Active& act = actives[a];
      // A waiter holds no room of its own: it goes with its predecessor.
      if (!act.booked || act.prev != kNone) continue;
      int64_t cooldown_until = 0;
      if (!eligible(a, cooldown_until)) continue;
      int64_t priority = SpecOf(act.task).priority;
      if (act.next != kNone) {
        if (!eligible(act.next, cooldown_until)) continue;
        priority = std::max<int64_t>(priority, SpecOf(actives[act.next].task).priority);
      }
      const Task& t = task(act.task);
      const int64_t started = t.state == TaskState::kRunning ? t.started_us : now_us;
      candidates.push_back({priority, started, IdOf(act.task), a, act.next, cooldown_until});
    }
    if (candidates.empty()) continue;
    // Lowest priority first, then the most recently started.
    std::sort(candidates.begin(), candidates.end(), [](const Candidate& x, const Candidate& y) {
      return std::make_tuple(x.priority, -x.started_us, x.id) <
             std::make_tuple(y.priority, -y.started_us, y.id);
    });
    const auto free = [&](WorkerState& state, const Candidate& c) {
      state.Free(RequestOf(actives[c.active].task), actives[c.active].alloc);
    };
    const auto take = [&](WorkerState& state, const Candidate& c) {
      return state.AllocateExact(RequestOf(actives[c.active].task), actives[c.active].alloc);
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
      lost += now_us - candidates[i].started_us;
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
      return IdOf(actives[x].task) < IdOf(actives[y].task);
    });
  }
  return best;
}

bool Scheduler::State::Preempt(TaskRef r) {
  if (!config.preempt_priority || SpecOf(r).priority < *config.preempt_priority) return false;
  if (preemption.For(r) != nullptr) return true;  // one at a time
  const VictimChoice choice = ChooseVictims(r, false);
  if (choice.worker == kNone) return false;
  const TaskId by = IdOf(r);
  const int32_t priority = SpecOf(r).priority;
  Preemption p{r, choice.worker, {}};
  for (uint32_t a : choice.actives) {
    const Active& act = actives[a];
    task(act.task).flags.Set(TaskFlag::kPreempted);
    Preempted& count = preemption.preempted[ExtraKey(act.task)];
    ++count.count;
    count.last_us = now_us;
    count.by = by;
    count.by_priority = priority;
    p.victims.emplace_back(act.task, act.attempt);
    out->push_back(KillTask{IdOf(act.task), act.attempt, workers[choice.worker].id,
                            PreemptedReason(act.task), /*hard=*/false, /*only_queued=*/false,
                            /*vacate=*/true});
  }
  preemption.in_flight.push_back(std::move(p));
  // The held worker is its reservation now: one elsewhere would hold back
  // room it will not use, and one here (for a task below it) would keep it
  // out of the room its victims free.
  if (reservation.IsFor(r) || reservation.IsOn(choice.worker)) EndReservation();
  return true;
}

void Scheduler::State::PreemptBlockedHeads() {
  if (!config.preempt_priority) return;
  const int32_t floor = *config.preempt_priority;
  WalkHeads([&](uint32_t, TaskRef r) {
    if (SpecOf(r).priority < floor) return Walk::kStop;  // and every head after it
    if (preemption.For(r) != nullptr) return Walk::kNext;
    for (uint32_t w = 0; w < workers.size(); ++w) {
      if (CanPlace(w, r)) return Walk::kNext;  // room freed: placement takes it
    }
    Preempt(r);
    return Walk::kNext;
  });
}

bool Scheduler::State::PreemptionAllows(uint32_t w, TaskRef r) {
  if (preemption.in_flight.empty()) return true;
  const Preemption* p = preemption.On(w);
  if (p == nullptr || p->preemptor == r) return true;
  const ResourceRequest& held = RequestOf(p->preemptor);
  // As it would be placed now, and with the victims' room given back.
  return AfterPlacing(w, r, [&] {
    WorkerState after = *workers[w].res;
    for (const auto& [victim, attempt] : p->victims) {
      const Task& t = task(victim);
      if (t.active == kNone) continue;
      const Active& act = actives[t.active];
      if (act.attempt == attempt && act.booked && act.worker == w) {
        after.Free(RequestOf(victim), act.alloc);
      }
    }
    return after.Fits(held, policy->PreferFullGpus());
  });
}

void Scheduler::State::VictimEnded(TaskRef r, uint32_t attempt) {
  for (Preemption& p : preemption.in_flight) {
    auto it = std::find(p.victims.begin(), p.victims.end(), std::make_pair(r, attempt));
    if (it == p.victims.end()) continue;
    p.victims.erase(it);
    // Offered to the heads even if the victim held nothing booked any more
    // (a re-offer): SettlePreemption then ends the preemption there.
    if (p.victims.empty() && Schedulable(p.worker)) MarkWorkerDirty(p.worker);
    return;
  }
}

void Scheduler::State::EndPreemption(TaskRef preemptor) {
  auto& in_flight = preemption.in_flight;
  for (auto it = in_flight.begin(); it != in_flight.end(); ++it) {
    if (!(it->preemptor == preemptor)) continue;
    const uint32_t w = it->worker;
    in_flight.erase(it);
    // Heads held back there may have room now.
    if (Schedulable(w)) MarkWorkerDirty(w);
    return;
  }
}

void Scheduler::State::DropPreemptionOn(uint32_t w) {
  auto& in_flight = preemption.in_flight;
  in_flight.erase(std::remove_if(in_flight.begin(), in_flight.end(),
                                 [&](const Preemption& p) { return p.worker == w; }),
                  in_flight.end());
}

void Scheduler::State::SettlePreemption(uint32_t w) {
  auto& in_flight = preemption.in_flight;
  for (auto it = in_flight.begin(); it != in_flight.end(); ++it) {
    if (it->worker != w || !it->victims.empty()) continue;
    // Its victims are gone and the heads were offered the room: the
    // preemptor did not take it (a higher head did, or the worker
    // changed). It may preempt again on the next Tick.
    in_flight.erase(it);
    MarkWorkerDirty(w);
    return;
  }
}

Reason Scheduler::State::PreemptedReason(TaskRef r) const {
  auto it = preemption.preempted.find(ExtraKey(r));
  if (it == preemption.preempted.end()) return why::PreemptedBy(std::nullopt, 0);
  return why::PreemptedBy(it->second.by, it->second.by_priority);
}

}  // namespace drover::core
