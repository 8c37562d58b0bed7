// Lease and resource bookkeeping: the Active slots that hold a task
// attempt's concrete resources, their lease keys, renewal batched per
// worker, and the per-user usage counted against quotas.
#include <algorithm>

#include "core/fair_share_ops.h"
#include "core/leases_ops.h"
#include "core/preemption_ops.h"
#include "core/queue_ahead_ops.h"
#include "core/quotas_ops.h"
#include "core/reservation_ops.h"
#include "core/scheduler_state.h"

namespace drover::core {

uint32_t NewActive(State& s, TaskRef r, uint32_t w, uint32_t attempt) {
  uint32_t a;
  if (s.free_actives.empty()) {
    a = static_cast<uint32_t>(s.actives.size());
    s.actives.emplace_back();
  } else {
    a = s.free_actives.back();
    s.free_actives.pop_back();
  }
  Active& act = s.actives[a];
  act.task = r;
  act.worker = w;
  act.attempt = attempt;
  act.granted = false;
  act.lost = false;
  act.booked = false;
  act.lease_from_us = s.now_us;
  act.prev = kNone;
  act.next = kNone;
  if (w != kNone) {
    act.pos = static_cast<uint32_t>(s.workers[w].actives.size());
    s.workers[w].actives.push_back(a);
    MarkLoadDirty(s, w);
    WorkerTasksChanged(s, w);
    NoteTail(s, w);
  }
  const ResourceRequest& req = s.RequestOf(r);
  s.users[s.jobs[r.job].user].account.Take(req);
  HoldUse(s, s.jobs[r.job].user, req, true);
  s.task(r).active = a;
  return a;
}

void EndActive(State& s, uint32_t a) {
  Active& act = s.actives[a];
  const TaskRef r = act.task;
  const ResourceRequest& req = s.RequestOf(r);
  s.task(r).ran_on = s.ran_on.Intern({act.alloc.cores.data(), act.alloc.cores.size()},
                                     {act.alloc.gpus.data(), act.alloc.gpus.size()});
  if (s.task(r).flags.Has(TaskFlag::kPreempted)) VictimEnded(s, r, act.attempt);
  if (act.worker != kNone) {
    Worker& worker = s.workers[act.worker];
    if (act.booked) worker.res->Free(req, act.alloc);
    // Swap-remove from the worker's list.
    uint32_t last = worker.actives.back();
    worker.actives[act.pos] = last;
    s.actives[last].pos = act.pos;
    worker.actives.pop_back();
    MarkLoadDirty(s, act.worker);
    WorkerTasksChanged(s, act.worker);
    if (act.booked && !worker.lost) MarkWorkerDirty(s, act.worker);
  }
  // Queue-ahead: the attempt waiting behind this one takes over its part of
  // the resources just freed (the worker starts it as this one exits).
  if (act.next != kNone) {
    Active& next = s.actives[act.next];
    UnlistWaiter(s, next);
    next.prev = kNone;
    if (next.worker != kNone && next.worker == act.worker) {
      next.booked = s.workers[next.worker].res->AllocateExact(s.RequestOf(next.task), next.alloc);
      NoteTail(s, next.worker);
    }
  }
  if (act.prev != kNone) {
    // It ended while waiting (canceled, refused, withdrawn): its predecessor
    // may take another one.
    UnlistWaiter(s, act);
    s.actives[act.prev].next = kNone;
    const uint32_t w = s.actives[act.prev].worker;
    if (w != kNone) {
      NoteTail(s, w);
      if (Schedulable(s, w)) MarkWorkerDirty(s, w);
    }
  }
  act.prev = kNone;
  act.next = kNone;
  act.booked = false;
  act.alloc.cores.clear();
  act.alloc.gpus.clear();
  act.attempt = 0;
  act.worker = kNone;
  s.free_actives.push_back(a);
  s.task(r).active = kNone;

  const uint32_t u = s.jobs[r.job].user;
  User& user = s.users[u];
  user.account.Give(req);
  HoldUse(s, u, req, false);
  UnparkFreed(s, u);
}

LeaseKeys KeysOf(const State& s, const Active& act) {
  LeaseKeys keys;
  keys.reserve(1 + act.alloc.gpus.size());
  const WorkerId worker = s.task(act.task).worker;
  const TaskId id = s.IdOf(act.task);
  keys.push_back(LeaseKey{LeaseKind::kSlot, worker, 0, id});
  for (const GpuGrant& g : act.alloc.gpus) {
    if (g.share >= kWholeGpu) {
      keys.push_back(LeaseKey{LeaseKind::kGpu, worker, g.index, TaskId{}});
    } else {
      keys.push_back(LeaseKey{LeaseKind::kGpuShare, worker, g.index, id});
    }
  }
  return keys;
}

void EmitRelease(State& s, const Active& act) {
  s.out->emplace_back(std::in_place_type<ReleaseLeases>, s.IdOf(act.task), act.attempt,
                      s.task(act.task).worker, KeysOf(s, act));
}

void RenewAll(State& s) {
  for (uint32_t w = 0; w < s.workers.size(); ++w) {
    Worker& worker = s.workers[w];
    if (worker.lost || worker.actives.empty()) continue;
    RenewLeases renew{worker.id, {}, s.config.lease_ttl};
    // In task order, so the command does not depend on completion order.
    std::vector<std::pair<TaskId, uint32_t>> held;
    for (uint32_t a : worker.actives) {
      if (s.actives[a].granted && !s.actives[a].lost)
        held.push_back({s.IdOf(s.actives[a].task), a});
    }
    if (held.empty()) continue;
    std::sort(held.begin(), held.end());
    for (const auto& [id, a] : held) {
      s.actives[a].lease_from_us = s.now_us;
      const LeaseKeys keys = KeysOf(s, s.actives[a]);
      renew.keys.insert(renew.keys.end(), keys.begin(), keys.end());
    }
    s.out->push_back(std::move(renew));
  }
}

void MarkWorkerDirty(State& s, uint32_t w) {
  if (s.workers[w].dirty) return;
  s.workers[w].dirty = true;
  s.dirty_workers.push_back(w);
}

void MarkLoadDirty(State& s, uint32_t w) {
  if (s.workers[w].load_dirty) return;
  s.workers[w].load_dirty = true;
  s.load_dirty.push_back(w);
}

WorkerLoad LoadOf(const State& s, uint32_t w) {
  const Worker& worker = s.workers[w];
  uint32_t cpu = worker.util.cpu_percent;
  return WorkerLoad{w, static_cast<uint32_t>(worker.actives.size()), cpu,
                    worker.res->free_core_count(), worker.res->free_whole_gpus()};
}

void FlushLoads(State& s) {
  for (uint32_t w : s.load_dirty) {
    s.workers[w].load_dirty = false;
    if (s.workers[w].in_policy) s.policy->Update(LoadOf(s, w));
  }
  s.load_dirty.clear();
}

}  // namespace drover::core
