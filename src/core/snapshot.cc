// Scheduler::Snapshot and what the server's API reads beside it: past
// attempts, a job's last change, forgotten ids (scheduler.h).
//
// The snapshot is built from the scheduler's own state, not from a second
// fold of the journal: per task, the records Restore needs to set the same
// fields (restore.cc), in the order replay would meet them.
#include <algorithm>
#include <cstdint>

#include "core/queue_ahead_ops.h"
#include "core/scheduler_state.h"

namespace drover::core {

namespace {

// Built in place from every field: a copied or value-initialised record
// trips GCC's maybe-uninitialized inside the variant.
void AddTaskRecord(std::vector<Record>& out, TaskId task, TaskState state, uint32_t attempt,
                   WorkerId worker, int64_t at_us, Reason reason, uint32_t failures,
                   std::vector<uint32_t> cores = {}, std::vector<GpuGrant> gpus = {},
                   TaskId after = {}, uint32_t after_attempt = 0, int64_t started_us = 0) {
  out.emplace_back(std::in_place_type<TaskRecord>, task, state, attempt, worker,
                   TimeFromMicros(at_us), std::move(reason.text), failures, std::move(cores),
                   std::move(gpus), after, after_attempt,
                   started_us != 0 ? TimeFromMicros(started_us) : Time(), reason.kind);
}

// The records of one task, in the order replay would meet them.
void AddTask(const State& s, JobId id, uint32_t slot, uint32_t i, std::vector<Record>& out) {
  const TaskRef ref{slot, i};
  const Task& t = s.jobs[slot].tasks[i];
  const TaskId task{id, i};
  if (auto p = s.past.find(ExtraKey(ref)); p != s.past.end()) {
    for (const PastAttempt& a : p->second) {
      // The records this attempt was noted from, in their order.
      if (a.outcome) {
        out.emplace_back(std::in_place_type<OutcomeRecord>, task, a.attempt, *a.outcome,
                         a.ended_at);
      }
      const int64_t ended = ToMicros(a.ended_at);
      AddTaskRecord(out, task, a.started_at ? TaskState::kRunning : TaskState::kAssigned, a.attempt,
                    a.worker, a.started_at ? ToMicros(*a.started_at) : ended, Reason(), 0);
      AddTaskRecord(out, task, TaskState::kQueued, a.attempt, a.worker, ended,
                    Reason{a.kind, a.reason}, 0);
    }
  }
  const Extra* extra = nullptr;
  if (!s.extras.empty()) {
    if (auto e = s.extras.find(ExtraKey(ref)); e != s.extras.end()) extra = &e->second;
  }
  const Reason reason = extra ? Reason{extra->reason_kind, extra->reason} : Reason();
  if (extra && extra->outcome) {
    out.emplace_back(std::in_place_type<OutcomeRecord>, task, extra->outcome_attempt,
                     *extra->outcome, TimeFromMicros(t.finished_us));
  }
  switch (t.state) {
    case TaskState::kWaiting:
    case TaskState::kQueued:
      // As its JobRecord made it, unless it ran or was given a reason.
      if (t.attempt == 0 && t.failures == 0 && reason.empty() && t.finished_us == 0) break;
      AddTaskRecord(out, task, t.state, t.attempt, t.worker, t.finished_us, reason, t.failures, {},
                    {}, {}, 0, t.started_us);
      break;
    case TaskState::kAssigned:
    case TaskState::kRunning: {
      // The assignment with its resources, then the start.
      std::vector<uint32_t> cores;
      std::vector<GpuGrant> gpus;
      std::pair<TaskId, uint32_t> after;
      if (t.active != kNone) {
        const Active& act = s.actives[t.active];
        cores.assign(act.alloc.cores.begin(), act.alloc.cores.end());
        gpus.assign(act.alloc.gpus.begin(), act.alloc.gpus.end());
        after = WaitsBehind(s, act);
      } else if (s.restoring) {
        if (auto a = s.adoption.restored_allocs.find(ref); a != s.adoption.restored_allocs.end()) {
          cores.assign(a->second.cores.begin(), a->second.cores.end());
          gpus.assign(a->second.gpus.begin(), a->second.gpus.end());
        }
        if (auto a = s.adoption.restored_after.find(ref); a != s.adoption.restored_after.end())
          after = a->second;
      }
      const bool running = t.state == TaskState::kRunning;
      AddTaskRecord(out, task, TaskState::kAssigned, t.attempt, t.worker,
                    std::max(t.started_us, t.finished_us), running ? Reason() : reason, t.failures,
                    std::move(cores), std::move(gpus), after.first, after.second);
      if (running) {
        AddTaskRecord(out, task, TaskState::kRunning, t.attempt, t.worker, t.started_us, reason,
                      t.failures);
      }
      break;
    }
    case TaskState::kSucceeded:
    case TaskState::kFailed:
    case TaskState::kCanceled: {
      std::vector<uint32_t> cores;
      std::vector<GpuGrant> gpus;
      if (const RanOn::Entry* ran = s.ran_on.Get(t.ran_on)) {
        cores = ran->cores;
        gpus = ran->gpus;
      }
      AddTaskRecord(out, task, t.state, t.attempt, t.worker, t.finished_us, reason, t.failures,
                    std::move(cores), std::move(gpus), {}, 0, t.started_us);
      break;
    }
  }
  if (extra && extra->checkpoint) {
    out.emplace_back(std::in_place_type<CheckpointRecord>, task, *extra->checkpoint);
  }
}

}  // namespace

std::vector<Record> Scheduler::Snapshot() const {
  std::vector<Record> out;
  SnapshotCursor cursor = StartSnapshot();
  SnapshotSlice(cursor, SIZE_MAX, out);  // one slice takes every task
  return out;
}

SnapshotCursor Scheduler::StartSnapshot() const {
  SnapshotCursor cursor;
  cursor.jobs.reserve(state_->job_slots.size());
  for (const auto& [id, slot] : state_->job_slots) {
    cursor.jobs.push_back(id);
    cursor.tasks += state_->jobs[slot].tasks.size();
  }
  return cursor;
}

bool Scheduler::SnapshotSlice(SnapshotCursor& cursor, size_t max_tasks,
                              std::vector<Record>& out) const {
  const State& s = *state_;
  if (!cursor.begun) {
    cursor.begun = true;
    if (s.forgotten_top != 0 && s.forgotten_top + 1 == s.next_job_id &&
        !s.job_slots.count(s.forgotten_top)) {
      out.emplace_back(std::in_place_type<JobRecord>, s.forgotten_top, nullptr,
                       TimeFromMicros(s.forgotten_top_us));
    }
  }
  size_t taken = 0;
  while (cursor.job < cursor.jobs.size()) {
    const JobId id = cursor.jobs[cursor.job];
    auto it = s.job_slots.find(id);
    // Forgotten since the start: its tombstone follows the snapshot.
    const Job* job = it == s.job_slots.end() ? nullptr : &s.jobs[it->second];
    if (job != nullptr && !cursor.in_job) {
      out.emplace_back(std::in_place_type<JobRecord>, id, job->spec, job->submitted);
      cursor.in_job = true;
    }
    while (job != nullptr && cursor.task < job->tasks.size()) {
      if (taken == max_tasks) return false;
      AddTask(s, id, it->second, cursor.task, out);
      ++cursor.task;
      ++taken;
    }
    ++cursor.job;
    cursor.task = 0;
    cursor.in_job = false;
  }
  return true;
}

bool Scheduler::SnapshotFollows(const SnapshotCursor& cursor, const Record& record) {
  if (cursor.job >= cursor.jobs.size()) return true;
  const TaskId* task = nullptr;
  if (const auto* r = std::get_if<TaskRecord>(&record)) task = &r->task;
  if (const auto* r = std::get_if<OutcomeRecord>(&record)) task = &r->task;
  if (const auto* r = std::get_if<CheckpointRecord>(&record)) task = &r->task;
  // A job's record: a new job (after every one taken) or a tombstone.
  if (task == nullptr) return true;
  auto at = std::lower_bound(cursor.jobs.begin(), cursor.jobs.end(), task->job);
  if (at == cursor.jobs.end() || *at != task->job) return true;  // a job newer than the start
  const size_t index = static_cast<size_t>(at - cursor.jobs.begin());
  if (index != cursor.job) return index < cursor.job;
  return cursor.in_job && task->index < cursor.task;
}

std::vector<PastAttempt> Scheduler::PastAttempts(TaskId task) const {
  const State& s = *state_;
  Result<TaskRef> ref = s.Find(task);
  if (!ref.ok()) return {};
  auto it = s.past.find(ExtraKey(*ref));
  return it == s.past.end() ? std::vector<PastAttempt>() : it->second;
}

std::optional<Time> Scheduler::LastChange(JobId job) const {
  const State& s = *state_;
  auto it = s.job_slots.find(job);
  if (it == s.job_slots.end()) return std::nullopt;
  return TimeFromMicros(s.jobs[it->second].changed_us);
}

bool Scheduler::Forgotten(JobId job) const {
  const State& s = *state_;
  return job != 0 && job < s.next_job_id && !s.job_slots.count(job);
}

}  // namespace drover::core
