// Event handlers and the task lifecycle. Placement is in dispatch.cc,
// reservations in reservation.cc, queue-ahead in queue_ahead.cc, re-attach
// and adoption in adoption.cc, lease and resource bookkeeping in leases.cc,
// queries in scheduler_queries.cc, replay in restore.cc.
#include "core/scheduler.h"

#include <algorithm>
#include <type_traits>

#include "common/quantity.h"
#include "core/dag.h"
#include "core/input_select.h"
#include "core/scheduler_state.h"

namespace drover::core {

Scheduler::State::State(SchedulerConfig c)
    : config(std::move(c)), policy(MakePolicy(config.policy)) {
  ApplyUserPolicy(UserPolicy(config.users));  // the groups' accounts (quotas.cc)
}

Scheduler::Scheduler(SchedulerConfig config) : state_(std::make_unique<State>(std::move(config))) {}
Scheduler::~Scheduler() = default;

const SchedulerConfig& Scheduler::config() const { return state_->config; }

Status Scheduler::Handle(Time now, Event event, Outbox& out) {
  State& s = *state_;
  s.restoring = false;
  s.now_us = std::max(s.now_us, ToMicros(now));
  s.out = &out;
  Status status = std::visit(
      [&](auto& e) -> Status {
        using T = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<T, WorkerJoined>) return s.OnWorkerJoined(e);
        if constexpr (std::is_same_v<T, WorkerAttached>) return s.OnWorkerAttached(e);
        if constexpr (std::is_same_v<T, WorkerHeartbeat>) return s.OnHeartbeat(e);
        if constexpr (std::is_same_v<T, WorkerLost>) return s.OnWorkerLost(e);
        if constexpr (std::is_same_v<T, WorkerDrained>) return s.OnDrained(e);
        if constexpr (std::is_same_v<T, WorkerPaused>) return s.OnPaused(e);
        if constexpr (std::is_same_v<T, JobSubmitted>) {
          Result<JobId> id = s.OnSubmit(e.job, std::move(e.spec));
          return id.ok() ? Status::Ok() : id.status();
        }
        if constexpr (std::is_same_v<T, CancelJob>) return s.OnCancelJob(e.job);
        if constexpr (std::is_same_v<T, CancelTask>) return s.OnCancelTask(e.task);
        if constexpr (std::is_same_v<T, RetryJob>) return s.OnRetryJob(e);
        if constexpr (std::is_same_v<T, TaskStarted>) return s.OnStarted(e);
        if constexpr (std::is_same_v<T, TaskFinished>) return s.OnFinished(e);
        if constexpr (std::is_same_v<T, TaskRefused>) return s.OnRefused(e);
        if constexpr (std::is_same_v<T, LeaseGranted>) return s.OnGranted(e);
        if constexpr (std::is_same_v<T, CheckpointSaved>) return s.OnCheckpointSaved(e);
        if constexpr (std::is_same_v<T, OutputsReplicated>) return s.OnOutputsReplicated(e);
        if constexpr (std::is_same_v<T, LeaseRejected>) return s.OnRejected(e);
        if constexpr (std::is_same_v<T, LeaseFreed>) return s.OnFreed(e);
        if constexpr (std::is_same_v<T, UserPolicyChanged>) {
          s.ApplyUserPolicy(*e.policy);
          s.UpdateStandings();  // new shares order the queues at once
          return Status::Ok();
        }
        if constexpr (std::is_same_v<T, Tick>) {
          s.OnTick();
          return Status::Ok();
        }
      },
      event);
  s.Dispatch();
  s.out = nullptr;
  return status;
}

Status Scheduler::HandleAll(Time now, std::span<Event> events, Outbox& out) {
  Status first;
  for (Event& e : events) {
    Status st = Handle(now, std::move(e), out);
    if (first.ok() && !st.ok()) first = st;
  }
  return first;
}

Result<JobId> Scheduler::Submit(Time now, std::shared_ptr<const JobSpec> spec, Outbox& out,
                                JobId job) {
  State& s = *state_;
  s.restoring = false;
  s.now_us = std::max(s.now_us, ToMicros(now));
  s.out = &out;
  Result<JobId> id = s.OnSubmit(job, std::move(spec));
  s.Dispatch();
  s.out = nullptr;
  return id;
}

// --- lookups -----------------------------------------------------------------

Result<TaskRef> Scheduler::State::Find(TaskId id) const {
  auto it = job_slots.find(id.job);
  if (it == job_slots.end()) return NotFound("no job " + std::to_string(id.job));
  if (id.index >= jobs[it->second].tasks.size()) {
    return NotFound("no task " + id.ToString());
  }
  return TaskRef{it->second, id.index};
}

Result<uint32_t> Scheduler::State::FindWorker(WorkerId id) const {
  auto it = worker_slots.find(id);
  if (it == worker_slots.end()) return NotFound("no worker " + std::to_string(id));
  return it->second;
}

uint32_t Scheduler::State::UserOf(const std::string& name) {
  auto [it, inserted] = user_ids.emplace(name, static_cast<uint32_t>(users.size()));
  if (inserted) users.push_back(User{AccountFor(name), {}});
  return it->second;
}

const std::string& Scheduler::State::CancelReasonOf(TaskRef r) const {
  auto it = extras.find(ExtraKey(r));
  if (it != extras.end() && !it->second.cancel_reason.empty()) return it->second.cancel_reason;
  return ReasonOf(r);
}

const std::string& Scheduler::State::ReasonOf(TaskRef r) const {
  static const std::string kEmpty;
  auto it = extras.find(ExtraKey(r));
  return it == extras.end() ? kEmpty : it->second.reason;
}

// --- workers -----------------------------------------------------------------

Status Scheduler::State::OnWorkerJoined(WorkerJoined& e) {
  RETURN_IF_ERROR(e.resources.Validate());
  auto it = worker_slots.find(e.worker);
  uint32_t w;
  if (it == worker_slots.end()) {
    w = static_cast<uint32_t>(workers.size());
    workers.emplace_back();
    workers[w].id = e.worker;
    worker_slots.emplace(e.worker, w);
  } else {
    w = it->second;
    if (!workers[w].lost) {
      return FailedPrecondition("worker " + std::to_string(e.worker) + " joined twice");
    }
  }
  Worker& worker = workers[w];
  // Room for a task per core, reserved (not touched) up front: growing the
  // Active table by doubling while a wave of placements fills a big pool
  // copied and faulted in twice its size (B1 at 10,000 workers).
  const size_t cores = e.resources.cpu_cores.size();
  worker.actives.reserve(cores);
  if (!worker.lost) {
    pool_cores += cores;
    if (actives.capacity() < pool_cores) {
      actives.reserve(std::max<size_t>(pool_cores, 2 * actives.capacity()));
    }
  }
  worker.res = std::make_unique<WorkerState>(e.worker, std::move(e.resources));
  NoteEnding(w);
  if (worker.lost && lost_workers > 0) --lost_workers;
  worker.lost = false;
  worker.drained = false;
  worker.paused = false;  // a desktop worker says again after its hello
  worker.refusing = false;
  worker.last_heartbeat = TimeFromMicros(now_us);
  // Tasks still on it from before (lost, leases not yet expired) keep their
  // resources booked on the new incarnation, so nothing is handed out twice.
  for (uint32_t a : worker.actives) {
    Active& act = actives[a];
    // One queued behind another holds nothing of its own until that ends.
    act.booked = act.prev == kNone && worker.res->AllocateExact(RequestOf(act.task), act.alloc);
  }
  // Restored tasks that ran here come back to it the same way (only this
  // worker's: a storm of joins costs the orphans once, not once per join).
  if (auto orphaned = adoption.orphans.find(e.worker); orphaned != adoption.orphans.end()) {
    const std::vector<uint32_t> slots = std::move(orphaned->second);
    adoption.orphans.erase(orphaned);
    for (uint32_t a : slots) {
      Active& act = actives[a];
      if (act.worker != kNone || act.attempt == 0 || !act.lost) continue;
      if (task(act.task).worker != e.worker || task(act.task).active != a) continue;
      act.worker = w;
      act.pos = static_cast<uint32_t>(worker.actives.size());
      worker.actives.push_back(a);
      act.booked = act.prev == kNone && worker.res->AllocateExact(RequestOf(act.task), act.alloc);
    }
  }
  NoteTail(w);
  policy->Add(LoadOf(w));
  worker.in_policy = true;
  MarkWorkerDirty(w);
  if (adoption.settling) SettleAttached(e.worker);
  return Status::Ok();
}

Status Scheduler::State::OnWorkerAttached(WorkerAttached& e) {
  RETURN_IF_ERROR(e.resources.Validate());
  auto it = worker_slots.find(e.worker);
  const bool joins = it == worker_slots.end() || workers[it->second].lost;
  const bool known = it != worker_slots.end() && workers[it->second].res != nullptr;
  const bool new_offer = known && !(workers[it->second].res->resources() == e.resources);
  // Only a worker the restore expected, on its first attach since, can hold
  // an attempt the journal never saw (events.h).
  adoption.BeginAttach(e.worker);
  if (joins) {
    WorkerJoined join{e.worker, e.resources};
    Status joined = OnWorkerJoined(join);
    if (!joined.ok()) {
      adoption.EndAttach();
      return joined;
    }
  }
  const uint32_t w = worker_slots.at(e.worker);
  workers[w].last_heartbeat = TimeFromMicros(now_us);
  // First what it does not hold goes: its resources are free for what it
  // reports below (adopted attempts need exactly theirs).
  TakeBackUnreported(w, e);
  // A stop sent before (cancel, timeout, lost lease) may have been lost with
  // the old connection: what it still runs of those is stopped again.
  for (const ReportedAttempt& run : e.running) {
    Result<TaskRef> r = Find(run.task);
    if (!r.ok()) continue;
    const Task& t = task(*r);
    if (t.active == kNone || actives[t.active].attempt != run.attempt || t.worker != e.worker) {
      continue;
    }
    if (t.flags.Any(TaskFlag::kLeaseLost | TaskFlag::kResized)) {
      out->push_back(KillTask{run.task, run.attempt, e.worker, "stopped before it re-attached",
                              /*hard=*/true});
    } else if (t.flags.Any(TaskFlag::kCancel | TaskFlag::kTimedOut)) {
      out->push_back(KillTask{run.task, run.attempt, e.worker,
                              t.flags.Has(TaskFlag::kCancel)
                                  ? CancelReasonOf(*r)
                                  : "timed out after " + FormatDuration(SpecOf(*r).timeout)});
    }
  }
  if (!joins && new_offer) {
    Reoffer(w, std::move(e.resources));
  } else if (joins && new_offer) {
    // Re-joined after a loss with another offer (OnWorkerJoined booked what
    // still fits on it).
    ++workers[w].offer_changes;
    workers[w].offer_changed_at = TimeFromMicros(now_us);
    StopUnfitting(w);
  }
  if (workers[w].refusing) {
    workers[w].refusing = false;  // its account is fresh: offer it work again
    SyncPolicy(w);
  }
  // Results first: a dependency that finished may make a running dependent
  // adoptable (queued) below.
  for (TaskFinished& f : e.finished) {
    f.worker = e.worker;
    Result<TaskRef> r = Find(f.task);
    if (r.ok() && Adoptable(*r, f.attempt)) Adopt(*r, w, f.attempt, nullptr);
    (void)OnFinished(f);  // a stale one (ended or superseded) changes nothing
  }
  // Started ones first: an attempt queued behind one the journal never saw
  // goes behind it once that one is adopted.
  for (const ReportedAttempt& run : e.running) {
    if (!run.queued) ReconcileRunning(w, run);
  }
  for (const ReportedAttempt& run : e.running) {
    if (run.queued) ReconcileRunning(w, run);
  }
  adoption.EndAttach();
  // Only now (its attempts adopted) may the hold end; Handle dispatches after.
  if (adoption.settling) SettleAttached(e.worker);
  return Status::Ok();
}

void Scheduler::State::Reoffer(uint32_t w, WorkerResources resources) {
  Worker& worker = workers[w];
  for (uint32_t a : worker.actives) {
    Active& act = actives[a];
    if (act.booked) worker.res->Free(RequestOf(act.task), act.alloc);
    act.booked = false;
  }
  const size_t old_cores = worker.res->resources().cpu_cores.size();
  if (resources.cpu_cores.size() > old_cores) {
    pool_cores += resources.cpu_cores.size() - old_cores;
    if (actives.capacity() < pool_cores) actives.reserve(pool_cores);
  }
  worker.res = std::make_unique<WorkerState>(worker.id, std::move(resources));
  NoteEnding(w);
  ++worker.offer_changes;
  worker.offer_changed_at = TimeFromMicros(now_us);
  StopUnfitting(w);
  NoteTail(w);
  WorkerTasksChanged(w);
  MarkLoadDirty(w);
  if (worker.in_policy) {
    policy->Remove(w);  // its load key changes with its size
    worker.in_policy = false;
  }
  SyncPolicy(w);
  if (Schedulable(w)) MarkWorkerDirty(w);
}

void Scheduler::State::StopUnfitting(uint32_t w) {
  Worker& worker = workers[w];
  const std::vector<uint32_t> on_worker = worker.actives;
  for (uint32_t a : on_worker) {
    Active& act = actives[a];
    // One waiting behind another books nothing until its predecessor ends.
    if (act.prev != kNone || act.booked) continue;
    act.booked = worker.res->AllocateExact(RequestOf(act.task), act.alloc);
    if (act.booked) continue;
    const TaskRef r = act.task;
    Task& t = task(r);
    if (t.active != a) continue;
    const std::string why =
        "worker " + std::to_string(worker.id) + " no longer offers its cores, memory or GPUs";
    if (!act.granted && !act.lost) {
      // Never sent: give the claim back and place it again.
      EmitRelease(act);
      EndActive(a);
      NeverStarted(r, why);
      continue;
    }
    if (!t.flags.Any(TaskFlag::kCancel | TaskFlag::kLeaseLost | TaskFlag::kTimedOut |
                     TaskFlag::kResized)) {
      t.flags.Set(TaskFlag::kResized);
      out->push_back(KillTask{IdOf(r), act.attempt, worker.id, why, /*hard=*/true});
    }
  }
}

void Scheduler::State::SyncPolicy(uint32_t w) {
  Worker& worker = workers[w];
  const bool want = Schedulable(w);
  if (want == worker.in_policy) return;
  if (want) {
    policy->Add(LoadOf(w));
    MarkWorkerDirty(w);
  } else {
    policy->Remove(w);
    if (reservation.IsOn(w)) reservation.active = false;
    DropPreemptionOn(w);  // its preemptor may preempt elsewhere
  }
  worker.in_policy = want;
}

Status Scheduler::State::OnHeartbeat(WorkerHeartbeat& e) {
  ASSIGN_OR_RETURN(uint32_t w, FindWorker(e.worker));
  if (workers[w].lost) return FailedPrecondition("heartbeat from lost worker");
  workers[w].util = std::move(e.utilization);
  workers[w].last_heartbeat = TimeFromMicros(now_us);
  MarkLoadDirty(w);
  if (workers[w].refusing) {
    workers[w].refusing = false;  // it has caught up (or refuses again)
    SyncPolicy(w);
  }
  return Status::Ok();
}

Status Scheduler::State::OnWorkerLost(const WorkerLost& e) {
  ASSIGN_OR_RETURN(uint32_t w, FindWorker(e.worker));
  Worker& worker = workers[w];
  if (worker.lost)
    return FailedPrecondition("worker " + std::to_string(e.worker) + " already lost");
  worker.lost = true;
  worker.lost_us = now_us;
  ++lost_workers;
  NoteOutputsLost(w);  // a dependent may need to rerun their producers (lineage.cc)
  if (worker.in_policy) policy->Remove(w);
  worker.in_policy = false;
  if (reservation.IsOn(w)) reservation.active = false;
  DropPreemptionOn(w);  // its preemptor may preempt elsewhere
  // Leases stop being renewed now; the tasks wait for them to expire.
  for (uint32_t a : worker.actives) {
    Active& act = actives[a];
    if (act.lost) continue;
    act.lost = true;
    PushTimer(act.lease_from_us + (config.lease_ttl + config.expiry_grace).count(),
              TimerKind::kLostExpiry, act.task, act.attempt);
  }
  return Status::Ok();
}

Status Scheduler::State::OnDrained(const WorkerDrained& e) {
  ASSIGN_OR_RETURN(uint32_t w, FindWorker(e.worker));
  Worker& worker = workers[w];
  worker.drained = e.drained;
  if (worker.lost) return Status::Ok();
  SyncPolicy(w);
  return Status::Ok();
}

Status Scheduler::State::OnPaused(const WorkerPaused& e) {
  ASSIGN_OR_RETURN(uint32_t w, FindWorker(e.worker));
  Worker& worker = workers[w];
  worker.paused = e.paused;
  worker.note = e.note;
  worker.note_since = e.since;
  if (worker.lost) return Status::Ok();
  SyncPolicy(w);
  return Status::Ok();
}

// --- jobs ----------------------------------------------------------------------

Result<uint32_t> Scheduler::State::CreateJob(JobId id, std::shared_ptr<const JobSpec> spec,
                                             Time at) {
  if (!spec) return InvalidArgument("job without a spec");
  if (id == 0) id = next_job_id;
  if (job_slots.count(id)) return AlreadyExists("job " + std::to_string(id) + " exists");
  ASSIGN_OR_RETURN(GroupGraph graph, BuildGroupGraph(*spec));
  uint64_t total = spec->TaskCount();
  if (total == 0 || total > UINT32_MAX) return InvalidArgument("job has no tasks or too many");
  for (const TaskGroupSpec& g : spec->groups) {
    RETURN_IF_ERROR(g.resources.Validate().WithContext("task \"" + g.name + "\""));
    if (g.command.empty()) {
      return InvalidArgument("task \"" + g.name + "\" has an empty command");
    }
    if (g.replicas == 0 || g.replicas > kMaxReplicas) {
      return InvalidArgument("task \"" + g.name + "\": replicas " + std::to_string(g.replicas) +
                             ": expected 1 to " + std::to_string(kMaxReplicas));
    }
    for (const OutputFile& f : g.input_files) {
      // The executor's own names in the task's directory.
      const std::string first = f.name.substr(0, f.name.find('/'));
      for (const char* own : {"output", "inputs", "result", "stdout", "stderr"}) {
        if (first == own) {
          return InvalidArgument("task \"" + g.name + "\": input file \"" + f.name + "\": \"" +
                                 own +
                                 "\" is Drover's own in the task's directory; upload it "
                                 "under another name");
        }
      }
      if (!IsSha256Hex(f.sha256)) {
        return InvalidArgument("task \"" + g.name + "\": input file \"" + f.name +
                               "\" was not uploaded (drover submit --input and drover run "
                               "upload them)");
      }
    }
  }
  for (JobId after : spec->after_jobs) {
    if (!job_slots.count(after)) return NotFound("--after: no job " + std::to_string(after));
  }
  for (const TaskId& after : spec->after_tasks) {
    RETURN_IF_ERROR(Find(after).status().WithContext("--after"));
  }

  const uint32_t slot = static_cast<uint32_t>(jobs.size());
  Job& job = jobs.emplace_back();
  job.id = id;
  job.user = UserOf(spec->user);
  job.submitted = at;
  job.changed_us = ToMicros(at);
  job.groups.resize(spec->groups.size());
  // Each task is written once: a million-task array is 40 MB of fresh
  // memory, and every extra pass over it showed in B1.
  job.tasks.reserve(total);
  const bool external = !spec->after_jobs.empty() || !spec->after_tasks.empty();
  uint32_t first = 0;
  for (size_t g = 0; g < spec->groups.size(); ++g) {
    Group& group = job.groups[g];
    group.first = first;
    group.count = spec->groups[g].TaskCount();
    group.not_succeeded = group.count;
    group.cls = queues.ClassOf(spec->groups[g].resources);
    group.deps = std::move(graph.deps[g]);
    group.dependents = std::move(graph.dependents[g]);
    group.unmet = static_cast<uint32_t>(group.deps.size());
    Task proto;
    proto.group = static_cast<uint16_t>(g);
    // The likely first state (OnSubmit corrects it; Restore overwrites it).
    proto.state = group.unmet == 0 && !external ? TaskState::kQueued : TaskState::kWaiting;
    job.tasks.insert(job.tasks.end(), group.count, proto);
    first += group.count;
  }
  if (class_dirty.size() < queues.class_count()) class_dirty.resize(queues.class_count(), 0);
  job.not_succeeded = total;
  job.spec = std::move(spec);
  job_slots.emplace(id, slot);
  next_job_id = std::max(next_job_id, id + 1);
  return slot;
}

Result<JobId> Scheduler::State::OnSubmit(JobId id, std::shared_ptr<const JobSpec> spec) {
  Time at = TimeFromMicros(now_us);
  auto keep = spec;
  // max_queued: the whole job is refused, before anything of it is made.
  if (spec != nullptr) {
    RETURN_IF_ERROR(users[UserOf(spec->user)].account.AdmitQueued(spec->TaskCount()));
  }
  ASSIGN_OR_RETURN(uint32_t slot, CreateJob(id, std::move(spec), at));
  Job& job = jobs[slot];
  users[job.user].account.AddQueued(static_cast<int64_t>(job.tasks.size()));
  out->push_back(Persist{JobRecord{job.id, job.spec, at}});

  // External dependencies: each unmet one holds every group back; one that
  // already failed dooms the job at once.
  std::string doom;
  uint32_t external = 0;
  for (JobId after : job.spec->after_jobs) {
    const Job& dep = jobs[job_slots.at(after)];
    if (dep.not_succeeded == 0) continue;
    if (dep.counts[static_cast<int>(TaskState::kFailed)] +
            dep.counts[static_cast<int>(TaskState::kCanceled)] >
        0) {
      doom = "dependency job " + std::to_string(after) + " failed";
      continue;
    }
    ++external;
    job_watchers[after].push_back(slot);
  }
  for (const TaskId& after : job.spec->after_tasks) {
    TaskRef ref = Find(after).value();
    TaskState st = task(ref).state;
    if (st == TaskState::kSucceeded) continue;
    if (IsTerminal(st)) {
      doom = "dependency " + after.ToString() + " " + std::string(TaskStateName(st));
      continue;
    }
    ++external;
    task_watchers[after].push_back(slot);
  }
  for (Group& g : job.groups) g.unmet += external;
  for (auto& count : job.counts) count = 0;
  for (uint32_t g = 0; g < job.groups.size(); ++g) {
    const Group& group = job.groups[g];
    TaskState initial = group.unmet == 0 && doom.empty() ? TaskState::kQueued : TaskState::kWaiting;
    job.counts[static_cast<int>(initial)] += group.count;
    if (group.count > 0 && job.tasks[group.first].state == initial) continue;  // set by CreateJob
    for (uint32_t i = 0; i < group.count; ++i) job.tasks[group.first + i].state = initial;
  }
  if (!doom.empty()) {
    DoomJob(slot, doom);
    return job.id;
  }
  // A whole group goes in as one run: O(1) however large the array.
  for (uint32_t g = 0; g < job.groups.size(); ++g) {
    const Group& group = job.groups[g];
    if (group.unmet != 0) continue;
    queues.PushBackRange(group.cls, job.spec->groups[g].priority, job.user,
                         TaskRef{slot, group.first}, group.count);
    MarkClassDirty(group.cls);
  }
  return job.id;
}

void Scheduler::State::Enqueue(TaskRef r, bool front) {
  const Job& job = jobs[r.job];
  const Group& g = job.groups[task(r).group];
  // Started again (a retry, a refusal) after its inputs' only holder was
  // lost: their producers rerun first, and it waits for them (lineage.cc).
  if (lost_workers > 0 && task(r).attempt > 0 &&
      (!g.deps.empty() || !job.spec->after_tasks.empty())) {
    const bool stale = task(r).flags.Has(TaskFlag::kStaleEntry);
    RerunLostInputsOf(r);
    if (task(r).state != TaskState::kQueued) {
      // Unready took it back to waiting, taking it for a task with an entry.
      if (!stale) task(r).flags.Clear(TaskFlag::kStaleEntry);
      return;
    }
  }
  if (g.unmet != 0) {
    task(r).flags.Clear(TaskFlag::kBackoff | TaskFlag::kParked);
    Transition(r, TaskState::kWaiting, "");
    return;
  }
  int32_t priority = job.spec->groups[task(r).group].priority;
  if (task(r).flags.Has(TaskFlag::kStaleEntry)) {
    // Placed by backfill from behind its class head, and its entry there is
    // still queued: it goes back to that place instead of a second entry.
    task(r).flags.Clear(TaskFlag::kStaleEntry);
  } else if (front) {
    queues.PushFront(g.cls, priority, job.user, r);
  } else {
    queues.PushBack(g.cls, priority, job.user, r);
  }
  MarkClassDirty(g.cls);
}

void Scheduler::State::Transition(TaskRef r, TaskState to, std::string reason) {
  Job& job = jobs[r.job];
  Task& t = job.tasks[r.index];
  TaskState from = t.state;
  const bool attempt_ended = to == TaskState::kQueued && t.attempt > 0 &&
                             (from == TaskState::kAssigned || from == TaskState::kRunning);
  // A preemptor that leaves its queue (placed, canceled) needs its room no
  // longer.
  if (from == TaskState::kQueued && to != from && !preemption.in_flight.empty()) EndPreemption(r);
  if (attempt_ended) NotePastAttempt(r, from, now_us, reason);
  // When it left its attempt, its success became history (a rerun,
  // lineage.cc) or it ended, as Restore reads it from the record.
  if (attempt_ended || from == TaskState::kSucceeded || IsTerminal(to)) t.finished_us = now_us;
  job.changed_us = now_us;
  --job.counts[static_cast<int>(from)];
  ++job.counts[static_cast<int>(to)];
  // Queued for the user's max_queued: waiting or queued (not yet assigned).
  if ((from <= TaskState::kQueued) != (to <= TaskState::kQueued)) {
    users[job.user].account.AddQueued(to <= TaskState::kQueued ? 1 : -1);
  }
  t.state = to;
  if (!reason.empty()) {
    extras[ExtraKey(r)].reason = reason;
  } else if (to == TaskState::kSucceeded && !extras.empty()) {
    auto it = extras.find(ExtraKey(r));
    if (it != extras.end()) it->second.reason.clear();
  }
  const TaskId id{job.id, r.index};
  // Both commands are built in place from their fields: a command emplaced
  // with no arguments is value-initialised, i.e. zero-filled first, and that
  // was most of this function's cost.
  {
    TaskStateChanged& changed = std::get<TaskStateChanged>(
        out->emplace_back(std::in_place_type<TaskStateChanged>, id, from, to, uint32_t{t.attempt}));
    if (!reason.empty()) changed.reason = reason;
  }
  // Every field is given: one left out (the vectors) is value-initialised,
  // which zero-fills the whole record first.
  std::vector<uint32_t> cores;
  std::vector<GpuGrant> gpus;
  std::pair<TaskId, uint32_t> after;  // queue-ahead: the attempt it waits behind
  if (to == TaskState::kAssigned && t.active != kNone) {
    const Active& act = actives[t.active];
    cores.assign(act.alloc.cores.begin(), act.alloc.cores.end());
    if (!act.alloc.gpus.empty()) gpus.assign(act.alloc.gpus.begin(), act.alloc.gpus.end());
    after = WaitsBehind(act);
  } else if (IsTerminal(to)) {
    // What it ran on, so a restored server still shows it (Restore).
    if (const RanOn::Entry* ran = ran_on.Get(t.ran_on)) {
      cores = ran->cores;
      gpus = ran->gpus;
    }
  }
  const Time started = (to == TaskState::kQueued || IsTerminal(to)) && t.started_us != 0
                           ? TimeFromMicros(t.started_us)
                           : Time();
  out->emplace_back(std::in_place_type<Persist>, std::in_place_type<TaskRecord>, id, to,
                    uint32_t{t.attempt}, t.worker, TimeFromMicros(now_us), std::move(reason),
                    uint32_t{t.failures}, std::move(cores), std::move(gpus), after.first,
                    after.second, started);
  if (to == TaskState::kSucceeded) {
    OnSucceeded(r);
  } else if (to == TaskState::kFailed || to == TaskState::kCanceled) {
    const std::string verb = to == TaskState::kFailed ? " failed" : " canceled";
    OnEndedBadly(r, "dependency " + id.ToString() + verb);
  }
}

void Scheduler::State::NotePastAttempt(TaskRef r, TaskState from, int64_t at_us,
                                       const std::string& reason) {
  const Task& t = task(r);
  PastAttempt p;
  p.attempt = t.attempt;
  p.worker = t.worker;
  if (from == TaskState::kRunning) p.started_at = TimeFromMicros(t.started_us);
  p.ended_at = TimeFromMicros(at_us);
  p.reason = reason;
  if (auto e = extras.find(ExtraKey(r));
      e != extras.end() && e->second.outcome && e->second.outcome_attempt == t.attempt) {
    p.outcome = e->second.outcome;
  }
  std::vector<PastAttempt>& kept = past[ExtraKey(r)];
  if (kept.size() >= kMaxPastAttempts) kept.erase(kept.begin());
  kept.push_back(std::move(p));
}

void Scheduler::State::OnSucceeded(TaskRef r) {
  Job& job = jobs[r.job];
  Group& g = job.groups[task(r).group];
  if (--g.not_succeeded == 0) {
    for (uint32_t d : g.dependents) SatisfyGroup(r.job, d);
  }
  if (!task_watchers.empty()) {
    auto it = task_watchers.find(TaskId{job.id, r.index});
    if (it != task_watchers.end()) {
      std::vector<uint32_t> watchers = std::move(it->second);
      task_watchers.erase(it);
      for (uint32_t j : watchers) {
        for (uint32_t d = 0; d < jobs[j].groups.size(); ++d) SatisfyGroup(j, d);
      }
    }
  }
  if (--job.not_succeeded == 0 && !job_watchers.empty()) {
    auto it = job_watchers.find(job.id);
    if (it != job_watchers.end()) {
      std::vector<uint32_t> watchers = std::move(it->second);
      job_watchers.erase(it);
      for (uint32_t j : watchers) {
        for (uint32_t d = 0; d < jobs[j].groups.size(); ++d) SatisfyGroup(j, d);
      }
    }
  }
}

void Scheduler::State::SatisfyGroup(uint32_t j, uint32_t g) {
  Group& group = jobs[j].groups[g];
  if (group.unmet == 0 || --group.unmet != 0 || group.doomed) return;
  // A file its `inputs` name that a dependency did not write: running
  // cannot bring it, so its tasks fail now, without using their retries.
  const std::string missing = [&]() -> std::string {
    const Job& job = jobs[j];
    const TaskGroupSpec& spec = job.spec->groups[g];
    if (!spec.inputs) return {};
    static const std::vector<OutputFile> kNone;
    for (uint32_t d : group.deps) {
      const Group& dep = job.groups[d];
      const TaskGroupSpec& dep_spec = job.spec->groups[d];
      for (uint32_t i = dep.first; i < dep.first + dep.count; ++i) {
        auto it = extras.find(ExtraKey(TaskRef{j, i}));
        const bool has = it != extras.end() && it->second.outcome;
        const std::string label =
            dep_spec.name +
            (dep_spec.array ? "[" + std::to_string(dep_spec.IndexAt(i - dep.first)) + "]" : "") +
            " (" + TaskId{job.id, i}.ToString() + ")";
        std::string why =
            MissingInput(spec, dep_spec.name, label, has ? it->second.outcome->outputs : kNone);
        if (!why.empty()) return why;
      }
    }
    return {};
  }();
  for (uint32_t i = 0; i < group.count; ++i) {
    // Queuing one may rerun a producer whose outputs it needs (lineage.cc):
    // then the rest wait again.
    if (group.unmet != 0) return;
    TaskRef r{j, group.first + i};
    if (task(r).state != TaskState::kWaiting) continue;
    if (!missing.empty()) {
      Transition(r, TaskState::kFailed, missing);
      continue;
    }
    Transition(r, TaskState::kQueued, "");
    Enqueue(r, false);
  }
}

void Scheduler::State::OnEndedBadly(TaskRef r, const std::string& reason) {
  Job& job = jobs[r.job];
  const std::vector<uint32_t> dependents = job.groups[task(r).group].dependents;
  for (uint32_t d : dependents) DoomGroup(r.job, d, reason);
  const TaskId id{job.id, r.index};
  if (!task_watchers.empty()) {
    auto it = task_watchers.find(id);
    if (it != task_watchers.end()) {
      std::vector<uint32_t> watchers = std::move(it->second);
      task_watchers.erase(it);
      for (uint32_t j : watchers) DoomJob(j, reason);
    }
  }
  if (!job_watchers.empty()) {
    auto it = job_watchers.find(job.id);
    if (it != job_watchers.end()) {
      std::vector<uint32_t> watchers = std::move(it->second);
      job_watchers.erase(it);
      for (uint32_t j : watchers) DoomJob(j, reason);
    }
  }
}

void Scheduler::State::DoomJob(uint32_t j, const std::string& reason) {
  for (uint32_t g = 0; g < jobs[j].groups.size(); ++g) DoomGroup(j, g, reason);
}

void Scheduler::State::DoomGroup(uint32_t j, uint32_t g, const std::string& reason) {
  Group& group = jobs[j].groups[g];
  if (group.doomed) return;
  group.doomed = true;
  for (uint32_t i = 0; i < group.count; ++i) {
    TaskRef r{j, jobs[j].groups[g].first + i};
    if (!IsTerminal(task(r).state)) Cancel(r, reason);
  }
}

void Scheduler::State::Cancel(TaskRef r, const std::string& reason) {
  Task& t = task(r);
  switch (t.state) {
    case TaskState::kWaiting:
    case TaskState::kQueued:
      // Queue entries and parked entries are dropped lazily.
      t.flags.Clear(TaskFlag::kBackoff | TaskFlag::kParked);
      if (reservation.IsFor(r)) EndReservation();
      Transition(r, TaskState::kCanceled, reason);
      return;
    case TaskState::kAssigned:
    case TaskState::kRunning: {
      Active& act = actives[t.active];
      if (act.lost) {
        t.flags.Set(TaskFlag::kCancel);  // ends when the lease is gone
        extras[ExtraKey(r)].cancel_reason = reason;
        return;
      }
      if (!act.granted) {
        // Nothing was sent to the worker yet: give the claim back now.
        EmitRelease(act);
        uint32_t a = t.active;
        EndActive(a);
        Transition(r, TaskState::kCanceled, reason);
        return;
      }
      if (!t.flags.Has(TaskFlag::kCancel)) {
        t.flags.Set(TaskFlag::kCancel);
        extras[ExtraKey(r)].cancel_reason = reason;
        out->push_back(KillTask{IdOf(r), act.attempt, workers[act.worker].id, reason});
      }
      return;
    }
    default:
      return;
  }
}

Status Scheduler::State::OnCancelJob(JobId id) {
  auto it = job_slots.find(id);
  if (it == job_slots.end()) return NotFound("no job " + std::to_string(id));
  const uint32_t j = it->second;
  for (uint32_t g = 0; g < jobs[j].groups.size(); ++g) jobs[j].groups[g].doomed = true;
  for (uint32_t i = 0; i < jobs[j].tasks.size(); ++i) {
    if (!IsTerminal(jobs[j].tasks[i].state)) Cancel(TaskRef{j, i}, "canceled by user");
  }
  return Status::Ok();
}

Status Scheduler::State::OnCancelTask(TaskId id) {
  ASSIGN_OR_RETURN(TaskRef r, Find(id));
  if (IsTerminal(task(r).state)) {
    return FailedPrecondition("task " + id.ToString() + " already " +
                              std::string(TaskStateName(task(r).state)));
  }
  Cancel(r, "canceled by user");
  return Status::Ok();
}

Result<uint64_t> Scheduler::State::Retryable(uint32_t j) const {
  const Job& job = jobs[j];
  const std::string name = "job " + std::to_string(job.id);
  for (JobId after : job.spec->after_jobs) {
    auto it = job_slots.find(after);
    if (it == job_slots.end()) continue;  // forgotten: it had succeeded
    const Job& dep = jobs[it->second];
    if (dep.counts[static_cast<int>(TaskState::kFailed)] +
            dep.counts[static_cast<int>(TaskState::kCanceled)] >
        0) {
      return FailedPrecondition(name + " was submitted --after job " + std::to_string(after) +
                                ", which has failed or canceled tasks: retry job " +
                                std::to_string(after) + " first");
    }
  }
  for (const TaskId& after : job.spec->after_tasks) {
    Result<TaskRef> dep = Find(after);
    if (!dep.ok()) continue;  // forgotten: it had succeeded
    const TaskState st = task(*dep).state;
    if (IsTerminal(st) && st != TaskState::kSucceeded) {
      return FailedPrecondition(name + " was submitted --after task " + after.ToString() +
                                ", which " + std::string(TaskStateName(st)) + ": retry job " +
                                std::to_string(after.job) + " first");
    }
  }
  uint64_t n = 0;
  for (uint32_t i = 0; i < job.tasks.size(); ++i) {
    const Task& t = job.tasks[i];
    if (t.flags.Has(TaskFlag::kCancel)) {
      return FailedPrecondition(name + ": task " + TaskId{job.id, i}.ToString() +
                                " is being canceled; retry when it has ended");
    }
    if (t.state == TaskState::kFailed || t.state == TaskState::kCanceled) ++n;
  }
  if (n == 0) return FailedPrecondition(name + " has no failed or canceled tasks");
  RETURN_IF_ERROR(users[job.user].account.AdmitQueued(n));
  return n;
}

void Scheduler::State::NoteRetriedAttempt(TaskRef r) {
  Task& t = task(r);
  auto p = past.find(ExtraKey(r));
  // One canceled while queued again was noted when it was requeued.
  const bool noted = p != past.end() && !p->second.empty() && p->second.back().attempt == t.attempt;
  if (t.attempt > 0 && !noted) {
    const bool ran = t.started_us != 0 && t.started_us <= t.finished_us;
    NotePastAttempt(r, ran ? TaskState::kRunning : TaskState::kAssigned, t.finished_us,
                    ReasonOf(r));
    p = past.find(ExtraKey(r));
  }
  // Its latest end is its latest attempt's, as a snapshot restores it (a
  // cancel of a queued task is no attempt's end).
  t.finished_us = p != past.end() && !p->second.empty() ? ToMicros(p->second.back().ended_at) : 0;
}

Status Scheduler::State::OnRetryJob(const RetryJob& e) {
  auto slot = job_slots.find(e.job);
  if (slot == job_slots.end()) return NotFound("no job " + std::to_string(e.job));
  const uint32_t j = slot->second;
  RETURN_IF_ERROR(Retryable(j).status());
  Job& job = jobs[j];
  // Its dependencies are counted again as the invariant says (unmet: those
  // not yet succeeded), and those outside the job watched again: a failure
  // dropped their watchers, and a job submitted after one failed never
  // counted it.
  uint32_t external = 0;
  auto watch = [](std::vector<uint32_t>& watchers, uint32_t j) {
    if (std::find(watchers.begin(), watchers.end(), j) == watchers.end()) watchers.push_back(j);
  };
  for (JobId after : job.spec->after_jobs) {
    auto it = job_slots.find(after);
    if (it == job_slots.end() || jobs[it->second].not_succeeded == 0) continue;
    ++external;
    watch(job_watchers[after], j);
  }
  for (const TaskId& after : job.spec->after_tasks) {
    Result<TaskRef> dep = Find(after);
    if (!dep.ok() || task(*dep).state == TaskState::kSucceeded) continue;
    ++external;
    watch(task_watchers[after], j);
  }
  for (Group& g : job.groups) {
    g.doomed = false;
    g.unmet = external;
    for (uint32_t d : g.deps) g.unmet += job.groups[d].not_succeeded > 0 ? 1 : 0;
  }
  const std::string reason = e.by.empty() ? "retried" : "retried by " + e.by;
  for (uint32_t i = 0; i < job.tasks.size(); ++i) {
    const TaskRef r{j, i};
    Task& t = task(r);
    if (t.state != TaskState::kFailed && t.state != TaskState::kCanceled) continue;
    NoteRetriedAttempt(r);
    t.failures = 0;
    t.lost = 0;
    if (job.groups[t.group].unmet != 0) {
      Transition(r, TaskState::kWaiting, reason);
    } else {
      Transition(r, TaskState::kQueued, reason);
      Enqueue(r, false);
    }
  }
  return Status::Ok();
}

// --- attempts --------------------------------------------------------------------

namespace {

Status Stale(const char* what, TaskId id, uint32_t attempt) {
  return FailedPrecondition(std::string(what) + " for " + id.ToString() + "#" +
                            std::to_string(attempt) + " which is not current");
}

}  // namespace

Status Scheduler::State::OnStarted(const TaskStarted& e) {
  ASSIGN_OR_RETURN(TaskRef r, Find(e.task));
  Task& t = task(r);
  if (t.state != TaskState::kAssigned || actives[t.active].attempt != e.attempt ||
      (e.worker != 0 && e.worker != t.worker)) {
    return Stale("started", e.task, e.attempt);
  }
  Active& act = actives[t.active];
  if (act.lost && act.worker != kNone && workers[act.worker].lost) {
    return Stale("started from a lost worker", e.task, e.attempt);
  }
  act.granted = true;  // a restored task reporting in holds its lease
  if (t.flags.Has(TaskFlag::kWithdraw)) {
    // Its predecessor ended before the withdrawal arrived: it runs here.
    t.flags.Clear(TaskFlag::kWithdraw);
    DropHold(r);
  }
  t.started_us = now_us;
  if (act.worker != kNone) WorkerTasksChanged(act.worker);  // its limit counts from now
  Transition(r, TaskState::kRunning, "");
  const Duration timeout = SpecOf(r).timeout;
  if (timeout > Duration::zero()) {
    PushTimer(now_us + timeout.count(), TimerKind::kTimeout, r, e.attempt);
  }
  return Status::Ok();
}

Duration Scheduler::State::BackoffFor(TaskRef r) const {
  Duration d = SpecOf(r).retry_backoff;
  for (uint32_t i = 1; i < task(r).failures && d < config.max_retry_backoff; ++i) d *= 2;
  return std::min(d, config.max_retry_backoff);
}

void Scheduler::State::AttemptFailed(TaskRef r, std::string reason, bool counts_as_failure) {
  Task& t = task(r);
  if (counts_as_failure) ++t.failures;
  const uint32_t retries = SpecOf(r).retries;
  if (counts_as_failure && t.failures > retries) {
    Transition(r, TaskState::kFailed, std::move(reason));
    return;
  }
  if (!counts_as_failure) {
    Transition(r, TaskState::kQueued, std::move(reason));
    Enqueue(r, true);
    return;
  }
  const Duration backoff = BackoffFor(r);
  t.flags.Set(TaskFlag::kBackoff);
  Transition(r, TaskState::kQueued,
             reason + "; retry " + std::to_string(t.failures) + " of " + std::to_string(retries) +
                 " in " + FormatDuration(backoff));
  PushTimer(now_us + backoff.count(), TimerKind::kRetry, r, t.attempt);
}

void Scheduler::State::NeverStarted(TaskRef r, std::string reason) {
  Task& t = task(r);
  t.flags.KeepOnly(TaskFlag::kStaleEntry);  // an entry left in its queue is still there
  DropHold(r);
  Transition(r, TaskState::kQueued, std::move(reason));
  Enqueue(r, true);
}

namespace {

// The outcome equals a default TaskOutcome: exit 0, nothing measured, no
// result. Such an outcome is neither journaled nor kept.
bool IsPlainSuccess(const TaskOutcome& o) {
  return o.exit_code == 0 && o.signal == 0 && !o.oom_killed && o.usage == TaskUsage{} &&
         o.result.empty() && o.reason.empty() && o.outputs.empty();
}

}  // namespace

Status Scheduler::State::OnFinished(TaskFinished& e) {
  ASSIGN_OR_RETURN(TaskRef r, Find(e.task));
  Task& t = task(r);
  if ((t.state != TaskState::kAssigned && t.state != TaskState::kRunning) ||
      actives[t.active].attempt != e.attempt || (e.worker != 0 && e.worker != t.worker)) {
    return Stale("finished", e.task, e.attempt);
  }
  TaskOutcome& o = e.outcome;
  if (o.result.size() > kMaxResultBytes) o.result.resize(kMaxResultBytes);
  // Outputs count only from a success, and are held where it ran.
  const bool succeeded = o.exit_code == 0 && o.signal == 0 && !o.oom_killed && o.reason.empty();
  if (!succeeded) o.outputs.clear();
  o.outputs_on = o.outputs.empty() ? 0 : t.worker;
  const uint32_t a = t.active;
  // Released even when restored assigned (granted unknown): a worker that
  // reports the end had the assignment, so the claim was granted, and a
  // release is compare-and-delete by owner, harmless where nothing is held.
  EmitRelease(actives[a]);
  const uint64_t limit = actives[a].alloc.mem_bytes;
  EndActive(a);
  if (e.never_started && !t.flags.Has(TaskFlag::kCancel)) {
    // Dropped from its worker's queue before it started: it never ran.
    // The worker's reason (a worker before 2026-12 sent it as the result).
    const std::string& why = !o.reason.empty() ? o.reason : o.result;
    NeverStarted(r, why.empty() ? std::string("dropped before it started") : why);
    return Status::Ok();
  }
  t.finished_us = now_us;
  t.lost = 0;
  static const TaskOutcome kEmpty;
  const bool plain = IsPlainSuccess(o);
  if (!plain) {
    out->push_back(Persist{OutcomeRecord{e.task, e.attempt, o, TimeFromMicros(now_us)}});
    Extra& extra = extras[ExtraKey(r)];
    extra.outcome = std::move(o);
    extra.outcome_attempt = e.attempt;
    jobs[r.job].changed_us = now_us;
  } else if (!extras.empty()) {
    auto it = extras.find(ExtraKey(r));
    if (it != extras.end()) it->second.outcome.reset();
  }
  const TaskOutcome& got = plain ? kEmpty : *extras[ExtraKey(r)].outcome;
  const TaskFlags flags = t.flags;
  t.flags.KeepOnly(TaskFlag::kStaleEntry);  // an entry left in its queue is still there
  if (flags.Has(TaskFlag::kWithdraw)) DropHold(r);
  if (flags.Has(TaskFlag::kCancel)) {
    Transition(r, TaskState::kCanceled, std::string(CancelReasonOf(r)));
    return Status::Ok();
  }
  if (flags.Has(TaskFlag::kPreempted) &&
      (e.vacated || got.exit_code != 0 || got.signal != 0 || got.oom_killed)) {
    // Stopped for a task of higher priority (vacated, or killed by a worker
    // that does not vacate): not its failure. One that ended well before
    // the stop reached it succeeded.
    AttemptFailed(r, PreemptedReason(r), false);
    return Status::Ok();
  }
  if (e.vacated) {
    // Its worker took the room back (the owner returned): not the task's
    // failure, and the worker's reason says so.
    AttemptFailed(r,
                  got.reason.empty() ? std::string("preempted: vacated by its worker") : got.reason,
                  false);
    return Status::Ok();
  }
  if (flags.Has(TaskFlag::kResized)) {
    // Stopped because its worker's new offer lacks its resources: not the
    // task's failure.
    AttemptFailed(r,
                  "stopped: worker " + std::to_string(e.worker ? e.worker : t.worker) +
                      " no longer offers its cores, memory or GPUs",
                  false);
    return Status::Ok();
  }
  std::string reason;
  if (flags.Has(TaskFlag::kTimedOut)) {
    reason = "timed out after " + FormatDuration(SpecOf(r).timeout);
  } else if (flags.Has(TaskFlag::kLeaseLost)) {
    reason = "lease expired while running";
  } else if (got.oom_killed) {
    reason = "OOM-killed (limit " + (limit ? FormatBytes(limit) : std::string("none")) + ", peak " +
             FormatBytes(got.usage.peak_mem_bytes) + ")";
  } else if (got.signal != 0) {
    reason = "killed by signal " + std::to_string(got.signal);
  } else if (got.exit_code == -1 && !got.reason.empty()) {
    // No exit status (no process can exit with -1): the attempt did not run
    // normally, and the worker's reason below says why.
  } else if (got.exit_code != 0) {
    reason = "exit code " + std::to_string(got.exit_code);
  }
  if (!got.reason.empty() && !flags.Any(TaskFlag::kTimedOut | TaskFlag::kLeaseLost)) {
    reason = reason.empty() ? got.reason : reason + "; " + got.reason;
  }
  if (reason.empty()) {
    Transition(r, TaskState::kSucceeded, "");
    if (!got.outputs.empty() && SpecOf(r).replicas > 1) Replicate(r);
  } else {
    AttemptFailed(r, std::move(reason), true);
  }
  return Status::Ok();
}

Status Scheduler::State::OnRefused(const TaskRefused& e) {
  ASSIGN_OR_RETURN(TaskRef r, Find(e.task));
  Task& t = task(r);
  if (t.state != TaskState::kAssigned || actives[t.active].attempt != e.attempt ||
      (e.worker != 0 && e.worker != t.worker)) {
    return Stale("refused", e.task, e.attempt);
  }
  const uint32_t w = actives[t.active].worker;
  EmitRelease(actives[t.active]);
  EndActive(t.active);
  if (w != kNone && !workers[w].lost) HoldRefusing(w);
  if (t.flags.Has(TaskFlag::kCancel)) {
    t.flags.KeepOnly(TaskFlag::kStaleEntry);
    DropHold(r);
    Transition(r, TaskState::kCanceled, std::string(CancelReasonOf(r)));
    return Status::Ok();
  }
  NeverStarted(r, "refused by worker " + std::to_string(t.worker) + ": " + e.reason);
  return Status::Ok();
}

void Scheduler::State::HoldRefusing(uint32_t w) {
  workers[w].refusing = true;
  SyncPolicy(w);
}

Status Scheduler::State::OnGranted(const LeaseGranted& e) {
  ASSIGN_OR_RETURN(TaskRef r, Find(e.task));
  Task& t = task(r);
  if (t.state == TaskState::kRunning && actives[t.active].attempt == e.attempt &&
      !actives[t.active].granted && actives[t.active].worker != kNone) {
    actives[t.active].granted = true;  // an adopted attempt: it runs already
    return Status::Ok();
  }
  if (t.state != TaskState::kAssigned || actives[t.active].attempt != e.attempt ||
      actives[t.active].granted || actives[t.active].worker == kNone) {
    return Stale("lease granted", e.task, e.attempt);
  }
  Active& act = actives[t.active];
  act.granted = true;
  if (act.lost) return Status::Ok();  // the worker is gone; wait for expiry
  const TaskGroupSpec& spec = SpecOf(r);
  const Job& job = jobs[r.job];
  // Still waiting behind another: the worker starts it as that one exits.
  const auto [after, after_attempt] = WaitsBehind(act);
  std::shared_ptr<std::vector<DependencyInput>> inputs;
  ForEachInput(r, [&](TaskId from, const TaskOutcome& o, const std::string* group) {
    // Only what its `inputs` select (all without them, and from --after).
    std::vector<OutputFile> files = group ? SelectOutputs(spec, *group, o.outputs) : o.outputs;
    if (o.result.empty() && files.empty()) return;
    if (!inputs) inputs = std::make_shared<std::vector<DependencyInput>>();
    const WorkerId on = files.empty() ? 0 : o.outputs_on;
    inputs->push_back(DependencyInput{from, o.result, std::move(files), on,
                                      on == 0 ? std::vector<WorkerId>{} : o.replicas});
  });
  out->emplace_back(std::in_place_type<AssignTask>, e.task, e.attempt, workers[act.worker].id,
                    act.alloc.cores, act.alloc.mem_bytes, act.alloc.gpus,
                    spec.IndexAt(r.index - job.groups[t.group].first), job.spec.get(), after,
                    after_attempt, t.group, std::move(inputs));
  std::get<AssignTask>(out->back()).checkpoint = CheckpointOf(r);
  if (config.start_timeout > Duration::zero()) {
    PushTimer(now_us + StartBoundOf(r).count(), TimerKind::kStartDeadline, r, e.attempt);
  }
  return Status::Ok();
}

Duration Scheduler::State::StartBoundOf(TaskRef r) const {
  uint64_t input_bytes = 0;
  ForEachInput(r, [&](TaskId, const TaskOutcome& o, const std::string* group) {
    input_bytes += InputBytes(r, o, group);
  });
  if (input_bytes == 0 || config.input_fetch_rate == 0) return config.start_timeout;
  // Whole seconds, so that the reason reads "within 50s".
  const int64_t fetch_s =
      static_cast<int64_t>((input_bytes + config.input_fetch_rate - 1) / config.input_fetch_rate);
  return config.start_timeout + Seconds(fetch_s);
}

Status Scheduler::State::OnRejected(const LeaseRejected& e) {
  ASSIGN_OR_RETURN(TaskRef r, Find(e.task));
  Task& t = task(r);
  if (t.state == TaskState::kRunning && actives[t.active].attempt == e.attempt &&
      !actives[t.active].granted && actives[t.active].worker != kNone) {
    // An adopted attempt whose keys someone else holds: it may not run on.
    // Its end comes back as TaskFinished and is retried as a lost lease.
    if (!t.flags.Any(TaskFlag::kCancel | TaskFlag::kLeaseLost | TaskFlag::kTimedOut)) {
      t.flags.Set(TaskFlag::kLeaseLost);
      out->push_back(KillTask{e.task, e.attempt, t.worker, "lease claim rejected", true});
    }
    return Status::Ok();
  }
  if (t.state != TaskState::kAssigned || actives[t.active].attempt != e.attempt ||
      actives[t.active].granted) {
    return Stale("lease rejected", e.task, e.attempt);
  }
  EndActive(t.active);
  Transition(r, TaskState::kQueued, "lease claim rejected");
  Enqueue(r, true);
  return Status::Ok();
}

void Scheduler::State::LostAttemptEnded(TaskRef r, std::string reason) {
  Task& t = task(r);
  EndActive(t.active);
  if (t.flags.Has(TaskFlag::kWithdraw)) DropHold(r);
  if (t.flags.Has(TaskFlag::kCancel)) {
    t.flags.KeepOnly(TaskFlag::kStaleEntry);
    Transition(r, TaskState::kCanceled, std::string(CancelReasonOf(r)));
    return;
  }
  const bool preempted = t.flags.Has(TaskFlag::kPreempted);
  t.flags.KeepOnly(TaskFlag::kStaleEntry);  // an entry left in its queue is still there
  if (preempted) {
    // It was being stopped for a task of higher priority anyway: gone
    // with its worker, it is not the worker's loss either.
    AttemptFailed(r, PreemptedReason(r), false);
    return;
  }
  ++t.lost;
  if (t.lost >= config.max_lost_attempts) {
    Transition(r, TaskState::kFailed, "worker lost (" + std::to_string(t.lost) + " attempts)");
    return;
  }
  AttemptFailed(r, std::move(reason), false);
}

Status Scheduler::State::OnFreed(const LeaseFreed& e) {
  ASSIGN_OR_RETURN(TaskRef r, Find(e.task));
  Task& t = task(r);
  if ((t.state != TaskState::kAssigned && t.state != TaskState::kRunning) ||
      actives[t.active].attempt != e.attempt) {
    return Status::Ok();  // our own release, or an attempt already ended
  }
  Active& act = actives[t.active];
  if (act.lost) {
    LostAttemptEnded(r);
    return Status::Ok();
  }
  if (!act.granted) return Status::Ok();  // a key vanished before the grant: the grant decides
  // The lease vanished under a live task: it may no longer run safely.
  if (!t.flags.Any(TaskFlag::kCancel | TaskFlag::kLeaseLost | TaskFlag::kTimedOut)) {
    t.flags.Set(TaskFlag::kLeaseLost);
    out->push_back(KillTask{e.task, e.attempt, workers[act.worker].id, "lease expired", true});
  }
  return Status::Ok();
}

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
                                  "timed out after " + FormatDuration(SpecOf(r).timeout)});
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
        const std::string why = "worker " + std::to_string(workers[act.worker].id) +
                                " did not start it within " + FormatDuration(StartBoundOf(r));
        out->push_back(KillTask{IdOf(r), timer.attempt, workers[act.worker].id, why, true});
        const uint32_t w = act.worker;
        EmitRelease(act);
        EndActive(t.active);
        HoldRefusing(w);  // so the task goes elsewhere if it can
        if (t.flags.Has(TaskFlag::kCancel)) {
          t.flags.KeepOnly(TaskFlag::kStaleEntry);
          Transition(r, TaskState::kCanceled, std::string(CancelReasonOf(r)));
        } else {
          NeverStarted(r, why + "; taken back");
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
