// Lease and resource bookkeeping: the Active slots that hold a task
// attempt's concrete resources, their lease keys, renewal batched per
// worker, and the per-user usage counted against quotas.
#include <algorithm>

#include "core/scheduler_state.h"

namespace drover::core {

uint32_t Scheduler::State::NewActive(TaskRef r, uint32_t w, uint32_t attempt) {
  uint32_t a;
  if (free_actives.empty()) {
    a = static_cast<uint32_t>(actives.size());
    actives.emplace_back();
  } else {
    a = free_actives.back();
    free_actives.pop_back();
  }
  Active& act = actives[a];
  act.task = r;
  act.worker = w;
  act.attempt = attempt;
  act.granted = false;
  act.lost = false;
  act.booked = false;
  act.lease_from_us = now_us;
  act.prev = kNone;
  act.next = kNone;
  if (w != kNone) {
    act.pos = static_cast<uint32_t>(workers[w].actives.size());
    workers[w].actives.push_back(a);
    MarkLoadDirty(w);
    WorkerTasksChanged(w);
    NoteTail(w);
  }
  const ResourceRequest& req = RequestOf(r);
  users[jobs[r.job].user].account.Take(req);
  HoldUse(jobs[r.job].user, req, true);
  task(r).active = a;
  return a;
}

void Scheduler::State::EndActive(uint32_t a) {
  Active& act = actives[a];
  const TaskRef r = act.task;
  const ResourceRequest& req = RequestOf(r);
  task(r).ran_on = ran_on.Intern({act.alloc.cores.data(), act.alloc.cores.size()},
                                 {act.alloc.gpus.data(), act.alloc.gpus.size()});
  if (task(r).flags.Has(TaskFlag::kPreempted)) VictimEnded(r, act.attempt);
  if (act.worker != kNone) {
    Worker& worker = workers[act.worker];
    if (act.booked) worker.res->Free(req, act.alloc);
    // Swap-remove from the worker's list.
    uint32_t last = worker.actives.back();
    worker.actives[act.pos] = last;
    actives[last].pos = act.pos;
    worker.actives.pop_back();
    MarkLoadDirty(act.worker);
    WorkerTasksChanged(act.worker);
    if (act.booked && !worker.lost) MarkWorkerDirty(act.worker);
  }
  // Queue-ahead: the attempt waiting behind this one takes over its part of
  // the resources just freed (the worker starts it as this one exits).
  if (act.next != kNone) {
    Active& next = actives[act.next];
    UnlistWaiter(next);
    next.prev = kNone;
    if (next.worker != kNone && next.worker == act.worker) {
      next.booked = workers[next.worker].res->AllocateExact(RequestOf(next.task), next.alloc);
      NoteTail(next.worker);
    }
  }
  if (act.prev != kNone) {
    // It ended while waiting (canceled, refused, withdrawn): its predecessor
    // may take another one.
    UnlistWaiter(act);
    actives[act.prev].next = kNone;
    const uint32_t w = actives[act.prev].worker;
    if (w != kNone) {
      NoteTail(w);
      if (Schedulable(w)) MarkWorkerDirty(w);
    }
  }
  act.prev = kNone;
  act.next = kNone;
  act.booked = false;
  act.alloc.cores.clear();
  act.alloc.gpus.clear();
  act.attempt = 0;
  act.worker = kNone;
  free_actives.push_back(a);
  task(r).active = kNone;

  const uint32_t u = jobs[r.job].user;
  User& user = users[u];
  user.account.Give(req);
  HoldUse(u, req, false);
  UnparkFreed(u);
}

LeaseKeys Scheduler::State::KeysOf(const Active& act) const {
  LeaseKeys keys;
  keys.reserve(1 + act.alloc.gpus.size());
  const WorkerId worker = task(act.task).worker;
  const TaskId id = IdOf(act.task);
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

void Scheduler::State::EmitRelease(const Active& act) {
  out->emplace_back(std::in_place_type<ReleaseLeases>, IdOf(act.task), act.attempt,
                    task(act.task).worker, KeysOf(act));
}

void Scheduler::State::RenewAll() {
  for (uint32_t w = 0; w < workers.size(); ++w) {
    Worker& worker = workers[w];
    if (worker.lost || worker.actives.empty()) continue;
    RenewLeases renew{worker.id, {}, config.lease_ttl};
    // In task order, so the command does not depend on completion order.
    std::vector<std::pair<TaskId, uint32_t>> held;
    for (uint32_t a : worker.actives) {
      if (actives[a].granted && !actives[a].lost) held.push_back({IdOf(actives[a].task), a});
    }
    if (held.empty()) continue;
    std::sort(held.begin(), held.end());
    for (const auto& [id, a] : held) {
      actives[a].lease_from_us = now_us;
      const LeaseKeys keys = KeysOf(actives[a]);
      renew.keys.insert(renew.keys.end(), keys.begin(), keys.end());
    }
    out->push_back(std::move(renew));
  }
}

void Scheduler::State::MarkWorkerDirty(uint32_t w) {
  if (workers[w].dirty) return;
  workers[w].dirty = true;
  dirty_workers.push_back(w);
}

void Scheduler::State::MarkLoadDirty(uint32_t w) {
  if (workers[w].load_dirty) return;
  workers[w].load_dirty = true;
  load_dirty.push_back(w);
}

WorkerLoad Scheduler::State::LoadOf(uint32_t w) const {
  const Worker& worker = workers[w];
  uint32_t cpu = worker.util.cpu_percent;
  return WorkerLoad{w, static_cast<uint32_t>(worker.actives.size()), cpu,
                    worker.res->free_core_count(), worker.res->free_whole_gpus()};
}

void Scheduler::State::FlushLoads() {
  for (uint32_t w : load_dirty) {
    workers[w].load_dirty = false;
    if (workers[w].in_policy) policy->Update(LoadOf(w));
  }
  load_dirty.clear();
}

}  // namespace drover::core
