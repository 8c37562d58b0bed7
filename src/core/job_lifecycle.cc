// The job lifecycle: submit (a job's groups, tasks and dependencies),
// queueing, a task's success or bad end and what it does to its
// dependents, cancel and retry.
#include <algorithm>

#include "core/attempt_events_ops.h"
#include "core/dag.h"
#include "core/dispatch_ops.h"
#include "core/input_select.h"
#include "core/job_lifecycle_ops.h"
#include "core/leases_ops.h"
#include "core/lineage_ops.h"
#include "core/lookup_ops.h"
#include "core/reservation_ops.h"
#include "core/result_cache_ops.h"
#include "core/scheduler_state.h"

namespace drover::core {

Result<uint32_t> CreateJob(State& s, JobId id, std::shared_ptr<const JobSpec> spec, Time at) {
  if (!spec) return InvalidArgument("job without a spec");
  if (id == 0) id = s.next_job_id;
  if (s.job_slots.count(id)) return AlreadyExists("job " + std::to_string(id) + " exists");
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
    if (!s.job_slots.count(after)) return NotFound("--after: no job " + std::to_string(after));
  }
  for (const TaskId& after : spec->after_tasks) {
    RETURN_IF_ERROR(s.Find(after).status().WithContext("--after"));
  }

  const uint32_t slot = static_cast<uint32_t>(s.jobs.size());
  Job& job = s.jobs.emplace_back();
  job.id = id;
  job.user = UserOf(s, spec->user);
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
    group.cls = s.queues.ClassOf(spec->groups[g].resources);
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
  if (s.class_dirty.size() < s.queues.class_count()) {
    s.class_dirty.resize(s.queues.class_count(), 0);
  }
  job.not_succeeded = total;
  job.spec = std::move(spec);
  s.job_slots.emplace(id, slot);
  s.next_job_id = std::max(s.next_job_id, id + 1);
  return slot;
}

Result<JobId> OnSubmit(State& s, JobId id, std::shared_ptr<const JobSpec> spec) {
  Time at = TimeFromMicros(s.now_us);
  auto keep = spec;
  // max_queued: the whole job is refused, before anything of it is made.
  if (spec != nullptr) {
    RETURN_IF_ERROR(s.users[UserOf(s, spec->user)].account.AdmitQueued(spec->TaskCount()));
  }
  ASSIGN_OR_RETURN(uint32_t slot, CreateJob(s, id, std::move(spec), at));
  Job& job = s.jobs[slot];
  s.users[job.user].account.AddQueued(static_cast<int64_t>(job.tasks.size()));
  s.out->push_back(Persist{JobRecord{job.id, job.spec, at}});

  // External dependencies: each unmet one holds every group back; one that
  // already failed dooms the job at once.
  Reason doom;
  uint32_t external = 0;
  for (JobId after : job.spec->after_jobs) {
    const Job& dep = s.jobs[s.job_slots.at(after)];
    if (dep.not_succeeded == 0) continue;
    if (dep.counts[static_cast<int>(TaskState::kFailed)] +
            dep.counts[static_cast<int>(TaskState::kCanceled)] >
        0) {
      doom = why::DependencyJobFailed(after);
      continue;
    }
    ++external;
    s.job_watchers[after].push_back(slot);
  }
  for (const TaskId& after : job.spec->after_tasks) {
    TaskRef ref = s.Find(after).value();
    TaskState st = s.task(ref).state;
    if (st == TaskState::kSucceeded) continue;
    if (IsTerminal(st)) {
      doom = why::DependencyEnded(after, st);
      continue;
    }
    ++external;
    s.task_watchers[after].push_back(slot);
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
    DoomJob(s, slot, doom);
    return job.id;
  }
  // A whole group goes in as one run: O(1) however large the array. With
  // the result cache, each task is looked up first (result_cache.h); a hit
  // may make a later group ready, which then queued itself.
  std::vector<uint32_t> ready;
  for (uint32_t g = 0; g < job.groups.size(); ++g) {
    if (job.groups[g].unmet == 0) ready.push_back(g);
  }
  for (uint32_t g : ready) {
    const Group& group = s.jobs[slot].groups[g];
    const int32_t priority = s.jobs[slot].spec->groups[g].priority;
    const uint32_t user = s.jobs[slot].user;
    if (!s.jobs[slot].spec->groups[g].cache || !s.config.result_cache.digest) {
      s.queues.PushBackRange(group.cls, priority, user, TaskRef{slot, group.first}, group.count);
    } else {
      for (uint32_t i = group.first; i < group.first + group.count; ++i) {
        if (!TryResultCache(s, TaskRef{slot, i}))
          s.queues.PushBack(group.cls, priority, user, {slot, i});
      }
    }
    MarkClassDirty(s, group.cls);
  }
  return s.jobs[slot].id;
}

void Enqueue(State& s, TaskRef r, bool front) {
  const Job& job = s.jobs[r.job];
  const Group& g = job.groups[s.task(r).group];
  // Started again (a retry, a refusal) after its inputs' only holder was
  // lost: their producers rerun first, and it waits for them (lineage.cc).
  if (s.lost_workers > 0 && s.task(r).attempt > 0 &&
      (!g.deps.empty() || !job.spec->after_tasks.empty())) {
    const bool stale = s.task(r).flags.Has(TaskFlag::kStaleEntry);
    RerunLostInputsOf(s, r);
    if (s.task(r).state != TaskState::kQueued) {
      // Unready took it back to waiting, taking it for a task with an entry.
      if (!stale) s.task(r).flags.Clear(TaskFlag::kStaleEntry);
      return;
    }
  }
  if (g.unmet != 0) {
    s.task(r).flags.Clear(TaskFlag::kBackoff | TaskFlag::kParked);
    Transition(s, r, TaskState::kWaiting);
    return;
  }
  // The same work done before: it succeeds at once (result_cache.h).
  if (!s.task(r).flags.Has(TaskFlag::kStaleEntry) && TryResultCache(s, r)) return;
  int32_t priority = job.spec->groups[s.task(r).group].priority;
  if (s.task(r).flags.Has(TaskFlag::kStaleEntry)) {
    // Placed by backfill from behind its class head, and its entry there is
    // still queued: it goes back to that place instead of a second entry.
    s.task(r).flags.Clear(TaskFlag::kStaleEntry);
  } else if (front) {
    s.queues.PushFront(g.cls, priority, job.user, r);
  } else {
    s.queues.PushBack(g.cls, priority, job.user, r);
  }
  MarkClassDirty(s, g.cls);
}

void OnSucceeded(State& s, TaskRef r) {
  Job& job = s.jobs[r.job];
  Group& g = job.groups[s.task(r).group];
  if (--g.not_succeeded == 0) {
    for (uint32_t d : g.dependents) SatisfyGroup(s, r.job, d);
  }
  if (!s.task_watchers.empty()) {
    auto it = s.task_watchers.find(TaskId{job.id, r.index});
    if (it != s.task_watchers.end()) {
      std::vector<uint32_t> watchers = std::move(it->second);
      s.task_watchers.erase(it);
      for (uint32_t j : watchers) {
        for (uint32_t d = 0; d < s.jobs[j].groups.size(); ++d) SatisfyGroup(s, j, d);
      }
    }
  }
  if (--job.not_succeeded == 0 && !s.job_watchers.empty()) {
    auto it = s.job_watchers.find(job.id);
    if (it != s.job_watchers.end()) {
      std::vector<uint32_t> watchers = std::move(it->second);
      s.job_watchers.erase(it);
      for (uint32_t j : watchers) {
        for (uint32_t d = 0; d < s.jobs[j].groups.size(); ++d) SatisfyGroup(s, j, d);
      }
    }
  }
}

void SatisfyGroup(State& s, uint32_t j, uint32_t g) {
  Group& group = s.jobs[j].groups[g];
  if (group.unmet == 0 || --group.unmet != 0 || group.doomed) return;
  // A file its `inputs` name that a dependency did not write: running
  // cannot bring it, so its tasks fail now, without using their retries.
  const std::string missing = [&]() -> std::string {
    const Job& job = s.jobs[j];
    const TaskGroupSpec& spec = job.spec->groups[g];
    if (!spec.inputs) return {};
    static const std::vector<OutputFile> kNone;
    for (uint32_t d : group.deps) {
      const Group& dep = job.groups[d];
      const TaskGroupSpec& dep_spec = job.spec->groups[d];
      for (uint32_t i = dep.first; i < dep.first + dep.count; ++i) {
        auto it = s.extras.find(ExtraKey(TaskRef{j, i}));
        const bool has = it != s.extras.end() && it->second.outcome;
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
    if (s.task(r).state != TaskState::kWaiting) continue;
    if (!missing.empty()) {
      Transition(s, r, TaskState::kFailed, why::MissingInput(missing));
      continue;
    }
    Transition(s, r, TaskState::kQueued);
    Enqueue(s, r, false);
  }
}

void OnEndedBadly(State& s, TaskRef r, const Reason& reason) {
  Job& job = s.jobs[r.job];
  const std::vector<uint32_t> dependents = job.groups[s.task(r).group].dependents;
  for (uint32_t d : dependents) DoomGroup(s, r.job, d, reason);
  const TaskId id{job.id, r.index};
  if (!s.task_watchers.empty()) {
    auto it = s.task_watchers.find(id);
    if (it != s.task_watchers.end()) {
      std::vector<uint32_t> watchers = std::move(it->second);
      s.task_watchers.erase(it);
      for (uint32_t j : watchers) DoomJob(s, j, reason);
    }
  }
  if (!s.job_watchers.empty()) {
    auto it = s.job_watchers.find(job.id);
    if (it != s.job_watchers.end()) {
      std::vector<uint32_t> watchers = std::move(it->second);
      s.job_watchers.erase(it);
      for (uint32_t j : watchers) DoomJob(s, j, reason);
    }
  }
}

void DoomJob(State& s, uint32_t j, const Reason& reason) {
  for (uint32_t g = 0; g < s.jobs[j].groups.size(); ++g) DoomGroup(s, j, g, reason);
}

void DoomGroup(State& s, uint32_t j, uint32_t g, const Reason& reason) {
  Group& group = s.jobs[j].groups[g];
  if (group.doomed) return;
  group.doomed = true;
  for (uint32_t i = 0; i < group.count; ++i) {
    TaskRef r{j, s.jobs[j].groups[g].first + i};
    if (!IsTerminal(s.task(r).state)) Cancel(s, r, reason);
  }
}

void Cancel(State& s, TaskRef r, const Reason& reason) {
  Task& t = s.task(r);
  switch (t.state) {
    case TaskState::kWaiting:
    case TaskState::kQueued:
      // Queue entries and parked entries are dropped lazily.
      t.flags.Clear(TaskFlag::kBackoff | TaskFlag::kParked);
      if (s.reservation.IsFor(r)) EndReservation(s);
      Transition(s, r, TaskState::kCanceled, reason);
      return;
    case TaskState::kAssigned:
    case TaskState::kRunning: {
      Active& act = s.actives[t.active];
      if (act.lost) {
        t.flags.Set(TaskFlag::kCancel);  // ends when the lease is gone
        s.extras[ExtraKey(r)].cancel_reason = reason;
        return;
      }
      if (!act.granted) {
        // Nothing was sent to the worker yet: give the claim back now.
        EmitRelease(s, act);
        uint32_t a = t.active;
        EndActive(s, a);
        Transition(s, r, TaskState::kCanceled, reason);
        return;
      }
      if (!t.flags.Has(TaskFlag::kCancel)) {
        t.flags.Set(TaskFlag::kCancel);
        s.extras[ExtraKey(r)].cancel_reason = reason;
        s.out->push_back(KillTask{s.IdOf(r), act.attempt, s.workers[act.worker].id, reason});
      }
      return;
    }
    default:
      return;
  }
}

Status OnCancelJob(State& s, JobId id) {
  auto it = s.job_slots.find(id);
  if (it == s.job_slots.end()) return NotFound("no job " + std::to_string(id));
  const uint32_t j = it->second;
  for (uint32_t g = 0; g < s.jobs[j].groups.size(); ++g) s.jobs[j].groups[g].doomed = true;
  for (uint32_t i = 0; i < s.jobs[j].tasks.size(); ++i) {
    if (!IsTerminal(s.jobs[j].tasks[i].state)) Cancel(s, TaskRef{j, i}, why::CanceledByUser());
  }
  return Status::Ok();
}

Status OnCancelTask(State& s, TaskId id) {
  ASSIGN_OR_RETURN(TaskRef r, s.Find(id));
  if (IsTerminal(s.task(r).state)) {
    return FailedPrecondition("task " + id.ToString() + " already " +
                              std::string(TaskStateName(s.task(r).state)));
  }
  Cancel(s, r, why::CanceledByUser());
  return Status::Ok();
}

Result<uint64_t> Retryable(const State& s, uint32_t j) {
  const Job& job = s.jobs[j];
  const std::string name = "job " + std::to_string(job.id);
  for (JobId after : job.spec->after_jobs) {
    auto it = s.job_slots.find(after);
    if (it == s.job_slots.end()) continue;  // forgotten: it had succeeded
    const Job& dep = s.jobs[it->second];
    if (dep.counts[static_cast<int>(TaskState::kFailed)] +
            dep.counts[static_cast<int>(TaskState::kCanceled)] >
        0) {
      return FailedPrecondition(name + " was submitted --after job " + std::to_string(after) +
                                ", which has failed or canceled tasks: retry job " +
                                std::to_string(after) + " first");
    }
  }
  for (const TaskId& after : job.spec->after_tasks) {
    Result<TaskRef> dep = s.Find(after);
    if (!dep.ok()) continue;  // forgotten: it had succeeded
    const TaskState st = s.task(*dep).state;
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
  RETURN_IF_ERROR(s.users[job.user].account.AdmitQueued(n));
  return n;
}

void NoteRetriedAttempt(State& s, TaskRef r) {
  Task& t = s.task(r);
  auto p = s.past.find(ExtraKey(r));
  // One canceled while queued again was noted when it was requeued.
  const bool noted =
      p != s.past.end() && !p->second.empty() && p->second.back().attempt == t.attempt;
  if (t.attempt > 0 && !noted) {
    const bool ran = t.started_us != 0 && t.started_us <= t.finished_us;
    NotePastAttempt(s, r, ran ? TaskState::kRunning : TaskState::kAssigned, t.finished_us,
                    ReasonOf(s, r));
    p = s.past.find(ExtraKey(r));
  }
  // Its latest end is its latest attempt's, as a snapshot restores it (a
  // cancel of a queued task is no attempt's end).
  t.finished_us = p != s.past.end() && !p->second.empty() ? ToMicros(p->second.back().ended_at) : 0;
}

Status OnRetryJob(State& s, const RetryJob& e) {
  auto slot = s.job_slots.find(e.job);
  if (slot == s.job_slots.end()) return NotFound("no job " + std::to_string(e.job));
  const uint32_t j = slot->second;
  RETURN_IF_ERROR(Retryable(s, j).status());
  Job& job = s.jobs[j];
  // Its dependencies are counted again as the invariant says (unmet: those
  // not yet succeeded), and those outside the job watched again: a failure
  // dropped their watchers, and a job submitted after one failed never
  // counted it.
  uint32_t external = 0;
  auto watch = [](std::vector<uint32_t>& watchers, uint32_t j) {
    if (std::find(watchers.begin(), watchers.end(), j) == watchers.end()) watchers.push_back(j);
  };
  for (JobId after : job.spec->after_jobs) {
    auto it = s.job_slots.find(after);
    if (it == s.job_slots.end() || s.jobs[it->second].not_succeeded == 0) continue;
    ++external;
    watch(s.job_watchers[after], j);
  }
  for (const TaskId& after : job.spec->after_tasks) {
    Result<TaskRef> dep = s.Find(after);
    if (!dep.ok() || s.task(*dep).state == TaskState::kSucceeded) continue;
    ++external;
    watch(s.task_watchers[after], j);
  }
  for (Group& g : job.groups) {
    g.doomed = false;
    g.unmet = external;
    for (uint32_t d : g.deps) g.unmet += job.groups[d].not_succeeded > 0 ? 1 : 0;
  }
  const Reason reason = why::Retried(e.by);
  for (uint32_t i = 0; i < job.tasks.size(); ++i) {
    const TaskRef r{j, i};
    Task& t = s.task(r);
    if (t.state != TaskState::kFailed && t.state != TaskState::kCanceled) continue;
    NoteRetriedAttempt(s, r);
    t.failures = 0;
    t.lost = 0;
    if (job.groups[t.group].unmet != 0) {
      Transition(s, r, TaskState::kWaiting, reason);
    } else {
      Transition(s, r, TaskState::kQueued, reason);
      Enqueue(s, r, false);
    }
  }
  return Status::Ok();
}

}  // namespace drover::core
