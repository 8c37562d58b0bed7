// Queries for the API: jobs, tasks, workers, memory.
#include <algorithm>

#include "core/attempt_events_ops.h"
#include "core/job_lifecycle_ops.h"
#include "core/quarantine_ops.h"
#include "core/queue_ahead_ops.h"
#include "core/scheduler_state.h"

namespace drover::core {

std::vector<JobId> Scheduler::Jobs() const {
  std::vector<JobId> ids;
  ids.reserve(state_->job_slots.size());
  for (const auto& [id, slot] : state_->job_slots) ids.push_back(id);
  return ids;
}

Result<JobInfo> Scheduler::GetJob(JobId id) const {
  const State& s = *state_;
  auto it = s.job_slots.find(id);
  if (it == s.job_slots.end()) return NotFound("no job " + std::to_string(id));
  const Job& job = s.jobs[it->second];
  JobInfo info;
  info.id = job.id;
  info.name = job.spec->name;
  info.user = job.spec->user;
  info.submitted_at = job.submitted;
  info.task_count = job.tasks.size();
  info.counts = job.counts;
  uint64_t terminal = 0;
  for (TaskState st : {TaskState::kSucceeded, TaskState::kFailed, TaskState::kCanceled}) {
    terminal += job.counts[static_cast<int>(st)];
  }
  info.done = terminal == job.tasks.size();
  info.cached = job.cached;
  info.cache_entries = job.cache_entries;
  return info;
}

Result<TaskInfo> Scheduler::GetTask(TaskId id) const {
  const State& s = *state_;
  ASSIGN_OR_RETURN(TaskRef r, s.Find(id));
  const Job& job = s.jobs[r.job];
  const Task& t = s.task(r);
  const TaskGroupSpec& spec = s.SpecOf(r);
  TaskInfo info;
  info.id = id;
  info.group = spec.name;
  info.private_network = spec.resources.private_network;
  info.io = spec.io;
  info.disk_bytes = spec.resources.disk_bytes;
  info.image = spec.image;
  info.array_index = spec.IndexAt(r.index - job.groups[t.group].first);
  info.state = t.state;
  info.attempt = t.attempt;
  if (t.attempt > 0) info.worker = t.worker;
  info.submitted_at = job.submitted;
  if (t.started_us != 0) info.started_at = TimeFromMicros(t.started_us);
  if (t.finished_us != 0 && !(t.state == TaskState::kRunning || t.state == TaskState::kAssigned)) {
    info.finished_at = TimeFromMicros(t.finished_us);
  }
  if (t.state == TaskState::kQueued && t.flags.Has(TaskFlag::kBackoff)) {
    info.retry_at = TimeFromMicros(t.finished_us + BackoffFor(s, r).count());
  }
  auto it = s.extras.find(ExtraKey(r));
  if (it != s.extras.end()) {
    info.reason = it->second.reason;
    info.reason_kind = it->second.reason_kind;
    info.outcome = it->second.outcome;
    info.checkpoint = it->second.checkpoint;
  }
  if (t.active != kNone) {
    info.cores = s.actives[t.active].alloc.cores;
    info.gpus = s.actives[t.active].alloc.gpus;
    const auto [after, attempt] = WaitsBehind(s, s.actives[t.active]);
    if (attempt != 0) info.after = after;
  } else if (const RanOn::Entry* ran = IsTerminal(t.state) ? s.ran_on.Get(t.ran_on) : nullptr) {
    info.cores = ran->cores;
    info.gpus = ran->gpus;
  }
  return info;
}

Result<std::vector<TaskId>> Scheduler::JobTasks(JobId id, uint32_t offset, uint32_t limit) const {
  const State& s = *state_;
  auto it = s.job_slots.find(id);
  if (it == s.job_slots.end()) return NotFound("no job " + std::to_string(id));
  const uint64_t n = s.jobs[it->second].tasks.size();
  std::vector<TaskId> ids;
  for (uint64_t i = offset; i < n && ids.size() < limit; ++i) {
    ids.push_back(TaskId{id, static_cast<uint32_t>(i)});
  }
  return ids;
}

std::vector<WorkerId> Scheduler::Workers() const {
  std::vector<WorkerId> ids;
  for (const Worker& w : state_->workers) ids.push_back(w.id);
  std::sort(ids.begin(), ids.end());
  return ids;
}

Result<WorkerInfo> Scheduler::GetWorker(WorkerId id) const {
  const State& s = *state_;
  ASSIGN_OR_RETURN(uint32_t w, s.FindWorker(id));
  const Worker& worker = s.workers[w];
  const WorkerState& res = *worker.res;
  WorkerInfo info;
  info.id = id;
  info.resources = res.resources();
  info.drained = worker.drained;
  info.lost = worker.lost;
  info.paused = worker.paused;
  info.unhealthy = worker.unhealthy;
  info.unhealthy_since = worker.unhealthy_since;
  info.sick_gpus = worker.sick_gpus;
  if (const QuarantineBook::PerWorker* q = QuarantineOf(s, id); q && worker.quarantined) {
    info.quarantine_why = q->why;
    info.quarantined_until = TimeFromMicros(q->until_us);
  }
  info.note = worker.note;
  info.note_since = worker.note_since;
  info.free_cores = res.free_cores();
  info.free_mem_bytes = res.free_mem();
  for (size_t i = 0; i < res.resources().gpus.size(); ++i) {
    info.gpu_free_share.push_back(res.gpu_free_share(i));
    info.gpu_free_mem_bytes.push_back(res.gpu_free_mem(i));
  }
  info.free_counters = res.free_counters();
  for (uint32_t a : worker.actives) info.tasks.push_back(s.IdOf(s.actives[a].task));
  std::sort(info.tasks.begin(), info.tasks.end());
  info.utilization = worker.util;
  info.last_heartbeat = worker.last_heartbeat;
  info.refusing = worker.refusing;
  info.offer_changes = worker.offer_changes;
  info.offer_changed_at = worker.offer_changed_at;
  return info;
}

Result<const TaskGroupSpec*> Scheduler::GetSpec(TaskId id) const {
  ASSIGN_OR_RETURN(TaskRef r, state_->Find(id));
  return &state_->SpecOf(r);
}

Result<std::shared_ptr<const JobSpec>> Scheduler::GetJobSpec(JobId id) const {
  auto it = state_->job_slots.find(id);
  if (it == state_->job_slots.end()) return NotFound("no job " + std::to_string(id));
  return state_->jobs[it->second].spec;
}

Result<uint64_t> Scheduler::CheckRetry(JobId id) const {
  auto it = state_->job_slots.find(id);
  if (it == state_->job_slots.end()) return NotFound("no job " + std::to_string(id));
  return Retryable(*state_, it->second);
}

std::optional<TaskId> Scheduler::NextOfClass(const ResourceRequest& request) const {
  const State& s = *state_;
  const std::optional<uint32_t> cls = s.queues.FindClass(request);
  if (!cls) return std::nullopt;
  std::optional<TaskId> next;
  s.queues.ForEach(*cls, [&](const QueueEntry& e) {
    const Task& t = s.task(e.task);
    if (t.state != TaskState::kQueued || t.flags.Any(TaskFlag::kBackoff | TaskFlag::kParked)) {
      return true;  // a dead entry, or one that does not take part now
    }
    next = s.IdOf(e.task);
    return false;
  });
  return next;
}

size_t Scheduler::QueuedWithin(Duration max_timeout, size_t cap) const {
  const State& s = *state_;
  size_t n = 0;
  for (uint32_t cls = 0; cls < s.queues.class_count() && n < cap; ++cls) {
    s.queues.ForEach(cls, [&](const QueueEntry& e) {
      const Task& t = s.task(e.task);
      const Duration limit = s.SpecOf(e.task).timeout;
      if (t.state == TaskState::kQueued && !t.flags.Any(TaskFlag::kBackoff | TaskFlag::kParked) &&
          limit > Duration::zero() && limit <= max_timeout) {
        ++n;
      }
      return n < cap;
    });
  }
  return n;
}

size_t Scheduler::ApproxBytes() const {
  const State& s = *state_;
  size_t bytes = sizeof(State) + s.queues.ApproxBytes();
  for (const Job& job : s.jobs) {
    bytes += sizeof(Job) + job.tasks.capacity() * sizeof(Task) +
             job.groups.capacity() * sizeof(Group);
  }
  bytes += s.actives.capacity() * sizeof(Active);
  for (const Active& a : s.actives) {
    if (a.alloc.cores.on_heap()) bytes += a.alloc.cores.capacity() * sizeof(uint32_t);
    if (a.alloc.gpus.on_heap()) bytes += a.alloc.gpus.capacity() * sizeof(GpuGrant);
  }
  // Reasons and results: from a sample of at most kSample entries, so a
  // status call stays cheap with a million canceled tasks (each has one).
  constexpr size_t kSample = 1024;
  size_t sampled = 0;
  size_t sampled_bytes = 0;
  for (auto it = s.extras.begin(); it != s.extras.end() && sampled < kSample; ++it, ++sampled) {
    const Extra& extra = it->second;
    sampled_bytes +=
        extra.reason.capacity() + (extra.outcome ? extra.outcome->result.capacity() : 0);
  }
  bytes += s.extras.size() * (sizeof(Extra) + 32);
  if (sampled > 0) bytes += sampled_bytes * s.extras.size() / sampled;
  bytes += s.workers.capacity() * (sizeof(Worker) + sizeof(WorkerState));
  bytes += s.timers.size() * sizeof(Timer);
  return bytes;
}

uint64_t Scheduler::QuarantineCount() const { return state_->quarantine.total; }

size_t Scheduler::ResultCacheSize() const { return state_->result_cache.entries.size(); }

}  // namespace drover::core
