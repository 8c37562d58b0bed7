// The scheduler's API: construction, Handle (the event dispatch), Submit,
// and the lookups every part uses. Worker events are in worker_events.cc,
// the job lifecycle in job_lifecycle.cc, attempt events in
// attempt_events.cc, timers in ticks.cc. Placement is in dispatch.cc,
// reservations in reservation.cc, queue-ahead in queue_ahead.cc, re-attach
// and adoption in adoption.cc, lease and resource bookkeeping in leases.cc,
// queries in scheduler_queries.cc, replay in restore.cc.
#include "core/scheduler.h"

#include <algorithm>
#include <type_traits>

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

Reason Scheduler::State::CancelReasonOf(TaskRef r) const {
  auto it = extras.find(ExtraKey(r));
  if (it == extras.end()) return {};
  if (!it->second.cancel_reason.empty()) return it->second.cancel_reason;
  return {it->second.reason_kind, it->second.reason};
}

Reason Scheduler::State::ReasonOf(TaskRef r) const {
  auto it = extras.find(ExtraKey(r));
  if (it == extras.end()) return {};
  return {it->second.reason_kind, it->second.reason};
}

}  // namespace drover::core
