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

#include "core/attempt_events_ops.h"
#include "core/checkpoints_ops.h"
#include "core/dispatch_ops.h"
#include "core/fair_share_ops.h"
#include "core/job_lifecycle_ops.h"
#include "core/lookup_ops.h"
#include "core/quotas_ops.h"
#include "core/replicas_ops.h"
#include "core/result_cache_ops.h"
#include "core/scheduler_state.h"
#include "core/ticks_ops.h"
#include "core/worker_events_ops.h"

namespace drover::core {

Scheduler::State::State(SchedulerConfig c)
    : config(std::move(c)), policy(MakePolicy(config.policy)) {
  ApplyUserPolicy(*this, UserPolicy(config.users));  // the groups' accounts (quotas.cc)
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
        if constexpr (std::is_same_v<T, WorkerJoined>) return OnWorkerJoined(s, e);
        if constexpr (std::is_same_v<T, WorkerAttached>) return OnWorkerAttached(s, e);
        if constexpr (std::is_same_v<T, WorkerHeartbeat>) return OnHeartbeat(s, e);
        if constexpr (std::is_same_v<T, WorkerLost>) return OnWorkerLost(s, e);
        if constexpr (std::is_same_v<T, WorkerDrained>) return OnDrained(s, e);
        if constexpr (std::is_same_v<T, WorkerPaused>) return OnPaused(s, e);
        if constexpr (std::is_same_v<T, JobSubmitted>) {
          Result<JobId> id = OnSubmit(s, e.job, std::move(e.spec));
          return id.ok() ? Status::Ok() : id.status();
        }
        if constexpr (std::is_same_v<T, CancelJob>) return OnCancelJob(s, e.job);
        if constexpr (std::is_same_v<T, CancelTask>) return OnCancelTask(s, e.task);
        if constexpr (std::is_same_v<T, RetryJob>) return OnRetryJob(s, e);
        if constexpr (std::is_same_v<T, ForgetCacheEntries>) return OnForgetCacheEntries(s, e);
        if constexpr (std::is_same_v<T, TaskStarted>) return OnStarted(s, e);
        if constexpr (std::is_same_v<T, TaskFinished>) return OnFinished(s, e);
        if constexpr (std::is_same_v<T, TaskRefused>) return OnRefused(s, e);
        if constexpr (std::is_same_v<T, LeaseGranted>) return OnGranted(s, e);
        if constexpr (std::is_same_v<T, CheckpointSaved>) return OnCheckpointSaved(s, e);
        if constexpr (std::is_same_v<T, OutputsReplicated>) return OnOutputsReplicated(s, e);
        if constexpr (std::is_same_v<T, LeaseRejected>) return OnRejected(s, e);
        if constexpr (std::is_same_v<T, LeaseFreed>) return OnFreed(s, e);
        if constexpr (std::is_same_v<T, UserPolicyChanged>) {
          ApplyUserPolicy(s, *e.policy);
          UpdateStandings(s);  // new shares order the queues at once
          return Status::Ok();
        }
        if constexpr (std::is_same_v<T, Tick>) {
          OnTick(s);
          return Status::Ok();
        }
      },
      event);
  Dispatch(s);
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
  Result<JobId> id = OnSubmit(s, job, std::move(spec));
  Dispatch(s);
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

uint32_t UserOf(State& s, const std::string& name) {
  auto [it, inserted] = s.user_ids.emplace(name, static_cast<uint32_t>(s.users.size()));
  if (inserted) s.users.push_back(User{AccountFor(s, name), {}});
  return it->second;
}

Reason CancelReasonOf(const State& s, TaskRef r) {
  auto it = s.extras.find(ExtraKey(r));
  if (it == s.extras.end()) return {};
  if (!it->second.cancel_reason.empty()) return it->second.cancel_reason;
  return {it->second.reason_kind, it->second.reason};
}

Reason ReasonOf(const State& s, TaskRef r) {
  auto it = s.extras.find(ExtraKey(r));
  if (it == s.extras.end()) return {};
  return {it->second.reason_kind, it->second.reason};
}

}  // namespace drover::core
