// Plays the trace's tasks through the core: submits, assignments, finishes,
// timeouts, and the accounting of what is busy or idle (replay.h).
#include "sim/replay.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <memory>
#include <optional>
#include <queue>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>

#include "core/reasons.h"

namespace drover::sim::internal {

Status Replay::Deliver(core::Event event) {
  (void)pump_.Push(std::move(event));
  return error_;
}

void Replay::Handled(const Status& status, const core::Outbox&) {
  ++events_;
  if (!status.ok() && error_.ok()) {
    error_ = Internal("the core refused an event of the replay: " + status.ToString());
    pump_.Stop();
  }
}

void Replay::Execute(core::Command& command) {
  if (!error_.ok()) return;
  if (Status s = Apply(command); !s.ok()) {
    error_ = std::move(s);
    pump_.Stop();
  }
}

Status Replay::Apply(const core::Command& command) {
  return std::visit(
      [&](const auto& c) -> Status {
        using T = std::decay_t<decltype(c)>;
        if constexpr (std::is_same_v<T, core::ClaimLeases>) {
          // The replay's store grants every claim: nothing else holds keys.
          (void)pump_.Push(core::LeaseGranted{c.task, c.attempt});
        } else if constexpr (std::is_same_v<T, core::AssignTask>) {
          return OnAssign(c);
        } else if constexpr (std::is_same_v<T, core::KillTask>) {
          return KillAtLimit(c);
        } else if constexpr (std::is_same_v<T, core::TaskStateChanged>) {
          if (c.from == core::TaskState::kWaiting && c.to == core::TaskState::kQueued) {
            const uint32_t i = TraceIndex(c.task);
            if (phase_[i] != Phase::kWaiting) {
              return Internal("task " + trace_.ids[i] + " became queued twice");
            }
            MakeReady(i);
          } else if (c.to == core::TaskState::kQueued && phase_[TraceIndex(c.task)] == Phase::kFailed) {
            // Its failure on the black hole is retried (at once when it used
            // no retry, its worker quarantined; else after a backoff, whose
            // possible ends get a Tick each).
            MakeReady(TraceIndex(c.task), /*front=*/true);
            const int64_t backoff = ::drover::Seconds(10).count();
            for (int k = 0; k < 3; ++k) wakeups_.push(now_us_ + (backoff << k) + 1);
          } else if (c.to == core::TaskState::kFailed || c.to == core::TaskState::kCanceled) {
            return OnEnded(c);
          } else if (c.to == core::TaskState::kSucceeded && c.attempt == 0) {
            return OnReused(TraceIndex(c.task));
          }
        }
        // Renewals, releases and journal records need no answer here: the
        // replay's leases never expire and nothing is restored.
        return Status::Ok();
      },
      command);
}

// Only what suspension can cause is played; any other kill or failure is
// still a core bug.
Status Replay::KillAtLimit(const core::KillTask& kill) {
  const uint32_t i = TraceIndex(kill.task);
  uint32_t slot = 0;
  while (slot < running_.size() && !(running_[slot].active && running_[slot].task == i &&
                                     running_[slot].attempt == kill.attempt)) {
    ++slot;
  }
  if (slot == running_.size() || kill.reason.kind != core::EndKind::kTimedOut ||
      (!running_[slot].suspended && running_[slot].suspended_us == 0)) {
    return Internal("the core killed " + kill.task.ToString() + " (" + kill.reason.text +
                    "), but no task of a replay can time out or be canceled unless its owner "
                    "suspended it");
  }
  Running& run = running_[slot];
  EndSuspension(run);
  const double ran_s = static_cast<double>(RanUs(run)) / 1e6;
  owners_.timed_out_gpu_s +=
      static_cast<double>(trace_.RequestOf(trace_.tasks[i]).gpus) / core::kWholeGpu * ran_s;
  const WorkerId worker = run.worker + 1;
  EndAttempt(slot);
  phase_[i] = Phase::kTimedOut;
  core::TaskOutcome outcome;
  outcome.signal = 15;  // the worker's SIGTERM
  outcome.usage.wall = Duration(now_us_ - start_us_[i]);
  (void)pump_.Push(core::TaskFinished{kill.task, kill.attempt, std::move(outcome), worker});
  return Status::Ok();
}

Status Replay::OnEnded(const core::TaskStateChanged& c) {
  const uint32_t i = TraceIndex(c.task);
  if (c.to == core::TaskState::kFailed && phase_[i] == Phase::kTimedOut) {
    ++owners_.timed_out_tasks;
    ++done_;
    return Status::Ok();
  }
  if (c.to == core::TaskState::kFailed && phase_[i] == Phase::kFailed) {
    ++black_.failed_tasks;
    ++done_;
    return Status::Ok();
  }
  if (c.to == core::TaskState::kCanceled && phase_[i] == Phase::kWaiting &&
      (owners_.timed_out_tasks > 0 || black_.failed_tasks > 0) &&
      c.kind == core::EndKind::kDependency) {
    if (trace_.RequestOf(trace_.tasks[i]).gpus > 0) --gpu_waiting_;
    phase_[i] = Phase::kCanceled;
    ++(black_.failed_tasks > 0 ? black_.canceled_tasks : owners_.canceled_tasks);
    ++done_;
    return Status::Ok();
  }
  return Internal("task " + trace_.ids[i] + " ended " + std::string(core::TaskStateName(c.to)) +
                  ": " + c.reason);
}

Status Replay::OnReused(uint32_t i) {
  if (phase_[i] != Phase::kReady) {
    return Internal("task " + trace_.ids[i] + " succeeded from the cache, but it is not queued");
  }
  const TraceTask& t = trace_.tasks[i];
  const core::ResourceRequest& req = trace_.RequestOf(t);
  --ready_count_[t.request];
  if (req.gpus > 0) --gpu_ready_;
  phase_[i] = Phase::kDone;
  ++done_;
  if (reused_.empty()) reused_.resize(trace_.tasks.size(), false);
  reused_[i] = true;
  ++cache_.reused_tasks;
  const double s = static_cast<double>(t.duration.count()) / 1e6;
  cache_.saved_gpu_s += static_cast<double>(req.gpus) / core::kWholeGpu * s;
  cache_.saved_cpu_s += static_cast<double>(req.cpus_milli) / 1000.0 * s;
  return Status::Ok();
}

void Replay::MakeReady(uint32_t i, bool front) {
  const TraceTask& t = trace_.tasks[i];
  if (phase_[i] == Phase::kWaiting && trace_.RequestOf(t).gpus > 0) --gpu_waiting_;
  phase_[i] = Phase::kReady;
  ready_us_[i] = now_us_;
  ready_[t.request].push(Ready{t.priority, front ? --front_seq_ : ready_seq_++, i, attempts_[i]});
  ++ready_count_[t.request];
  if (trace_.RequestOf(t).gpus > 0) ++gpu_ready_;
}

Status Replay::OnAssign(const core::AssignTask& a) {
  const uint32_t i = TraceIndex(a.task);
  const TraceTask& t = trace_.tasks[i];
  if (phase_[i] != Phase::kReady) {
    return Internal("the core assigned " + trace_.ids[i] + ", which is not queued");
  }
  const uint32_t w = a.worker - 1;
  const core::ResourceRequest& req = trace_.RequestOf(t);
  if (w < paused_.size() && paused_[w]) {
    return Internal("the core assigned " + trace_.ids[i] + " to " + cluster_.workers[w].name +
                    ", whose owner is present (paused)");
  }
  uint32_t slot;
  if (!free_running_.empty()) {
    slot = free_running_.back();
    free_running_.pop_back();
  } else {
    slot = static_cast<uint32_t>(running_.size());
    running_.emplace_back();
  }
  Running& run = running_[slot];
  run.worker = w;
  run.task = i;
  run.attempt = a.attempt;
  run.suspended = false;
  run.suspended_us = 0;
  run.alloc.cores.assign(a.cores.begin(), a.cores.end());
  run.alloc.gpus.assign(a.gpus.begin(), a.gpus.end());
  run.alloc.mem_bytes = a.mem_limit_bytes;
  if (w >= mirror_.size() || !mirror_[w]->AllocateExact(req, run.alloc)) {
    return Internal("the core assigned " + a.task.ToString() + " (" + trace_.ids[i] +
                    ") resources that are not free: " + core::DescribeCommand(core::Command(a)));
  }
  run.active = true;
  phase_[i] = Phase::kRunning;
  if (a.inputs) {
    for (const core::DependencyInput& in : *a.inputs) {
      for (const core::OutputFile& f : in.outputs) {
        input_bytes_ += f.size;
        if (in.outputs_on != a.worker) moved_bytes_ += f.size;
      }
    }
  }
  waited_us_[i] += now_us_ - ready_us_[i];
  start_us_[i] = now_us_;
  ++attempts_[i];
  --ready_count_[t.request];
  if (req.gpus > 0) --gpu_ready_;
  busy_cpus_milli_ += req.cpus_milli;
  busy_mem_ += run.alloc.mem_bytes;
  for (const core::GpuGrant& g : run.alloc.gpus) busy_gpus_ += g.share;
  run.start_us = now_us_;
  run.finish_us = now_us_ + t.duration.count() - (progress_us_.empty() ? 0 : progress_us_[i]);
  run.doomed = static_cast<int64_t>(w) == black_hole_;
  if (run.doomed) run.finish_us = now_us_ + ::drover::Seconds(1).count();  // it fails then
  finishes_.push(Finish{run.finish_us, finish_seq_++, slot, run.gen});
  (void)pump_.Push(core::TaskStarted{a.task, a.attempt});
  return Status::Ok();
}

void Replay::SkipStale(FinishQueue& queue) const {
  while (!queue.empty() && (!running_[queue.top().running].active ||
                            running_[queue.top().running].gen != queue.top().gen)) {
    queue.pop();
  }
}

void Replay::EndAttempt(uint32_t slot) {
  Running& run = running_[slot];
  const core::ResourceRequest& req = trace_.RequestOf(trace_.tasks[run.task]);
  mirror_[run.worker]->Free(req, run.alloc);
  busy_cpus_milli_ -= req.cpus_milli;
  busy_mem_ -= run.alloc.mem_bytes;
  for (const core::GpuGrant& g : run.alloc.gpus) busy_gpus_ -= g.share;
  run.active = false;
  ++run.gen;
  free_running_.push_back(slot);
}

Status Replay::FinishDue() {
  for (SkipStale(finishes_); !finishes_.empty() && finishes_.top().at_us == now_us_;
       SkipStale(finishes_)) {
    const uint32_t slot = finishes_.top().running;
    finishes_.pop();
    const uint32_t i = running_[slot].task;
    const uint32_t attempt = running_[slot].attempt;
    if (phase_[i] != Phase::kRunning) {
      return Internal("task " + trace_.ids[i] + " finished, but it is not running");
    }
    if (running_[slot].doomed) {
      // The black hole: the attempt fails; the core says how the task ends.
      EndAttempt(slot);
      phase_[i] = Phase::kFailed;
      ++black_.failed_attempts;
      core::TaskOutcome failed;
      failed.exit_code = 1;
      failed.usage.wall = Duration(now_us_ - start_us_[i]);
      RETURN_IF_ERROR(Deliver(core::TaskFinished{ids_[i], attempt, std::move(failed)}));
      continue;
    }
    EndAttempt(slot);
    phase_[i] = Phase::kDone;
    ++done_;
    core::TaskOutcome outcome;
    outcome.usage.wall = Duration(now_us_ - start_us_[i]);
    if (trace_.tasks[i].output_bytes != 0) {
      // One file per task, named by its trace index (the hash only has to
      // be distinct), or by its key's place: the same key, the same bytes.
      char sha[65];
      const TraceTask& made = trace_.tasks[i];
      if (made.key == TraceTask::kNoKey) {
        std::snprintf(sha, sizeof sha, "%064x", i);
      } else {
        std::snprintf(sha, sizeof sha, "%063x1", made.key);
      }
      outcome.outputs.push_back(core::OutputFile{"out", trace_.tasks[i].output_bytes, sha});
    }
    RETURN_IF_ERROR(Deliver(core::TaskFinished{ids_[i], attempt, std::move(outcome)}));
  }
  return Status::Ok();
}

// The core has no timer query, so an instant where a suspended attempt's
// limit runs out gets a Tick of its own: the kill then comes when the core
// would send it, not at whichever instant happens next.
bool Replay::DeadlineDue() {
  bool due = false;
  for (SkipStale(deadlines_); !deadlines_.empty() && deadlines_.top().at_us <= now_us_;
       SkipStale(deadlines_)) {
    deadlines_.pop();
    due = true;
  }
  return due;
}

Status Replay::SubmitDue() {
  const auto& tasks = trace_.tasks;
  while (next_submit_ < tasks.size() && tasks[next_submit_].submit.count() == now_us_) {
    const uint32_t first = static_cast<uint32_t>(next_submit_);
    const JobId job = job_first_.size() + 1;
    auto spec = std::make_shared<core::JobSpec>();
    spec->name = "sim";
    spec->user = trace_.users[tasks[first].user];
    uint32_t end = first + 1;
    if (tasks[first].deps_count > 0) {
      for (uint32_t d = 0; d < tasks[first].deps_count; ++d) {
        spec->after_tasks.push_back(ids_[trace_.deps[tasks[first].deps_begin + d]]);
      }
    } else {
      // The rest of this user's burst, up to a task with dependencies.
      while (end < tasks.size() && tasks[end].submit.count() == now_us_ &&
             tasks[end].user == tasks[first].user && tasks[end].deps_count == 0) {
        ++end;
      }
    }
    for (uint32_t i = first; i < end; ++i) {
      const TraceTask& t = tasks[i];
      // A task with a cache key is a group of its own: the key is its command.
      if (!spec->groups.empty() && t.key == TraceTask::kNoKey && !spec->groups.back().cache &&
          spec->groups.back().priority == t.priority && spec->groups.back().timeout == t.limit &&
          spec->groups.back().resources == trace_.RequestOf(t)) {
        spec->groups.back().array->count++;
      } else if (spec->groups.size() == kMaxGroupsPerJob) {
        end = i;
        break;
      } else {
        core::TaskGroupSpec& g = spec->groups.emplace_back();
        g.name = "g" + std::to_string(spec->groups.size() - 1);
        g.command = {"sim"};
        if (t.key != TraceTask::kNoKey) {
          g.cache = true;
          g.command.push_back(trace_.keys[t.key]);
        }
        g.resources = trace_.RequestOf(t);
        g.priority = t.priority;
        g.timeout = t.limit;  // the core plans backfill with it
        g.array = core::ArrayRange{0, 1, 1};
        // With a black hole every task may retry twice, as people would
        // set it up: the question is whether the black hole burns them.
        if (black_hole_ >= 0) g.retries = 2;
      }
      ids_[i] = TaskId{job, i - first};
    }
    job_first_.push_back(first);
    // Decide readiness before the core places anything: a dependency that
    // finished by now was already reported, so the core queues exactly
    // these tasks at once and lets the others wait.
    for (uint32_t i = first; i < end; ++i) {
      const TraceTask& t = tasks[i];
      bool ready = true;
      for (uint32_t d = 0; d < t.deps_count; ++d) {
        ready = ready && phase_[trace_.deps[t.deps_begin + d]] == Phase::kDone;
      }
      if (ready) {
        MakeReady(i);
      } else {
        phase_[i] = Phase::kWaiting;
        if (trace_.RequestOf(t).gpus > 0) ++gpu_waiting_;
      }
    }
    next_submit_ = end;
    RETURN_IF_ERROR(Deliver(core::JobSubmitted{job, std::move(spec)}));
  }
  return Status::Ok();
}

void Replay::Account(int64_t until_us) {
  const double dt = static_cast<double>(until_us - last_us_) / 1e6;
  cpu_area_ += static_cast<double>(busy_cpus_milli_) * dt;
  mem_area_ += static_cast<double>(busy_mem_) * dt;
  gpu_area_ += static_cast<double>(busy_gpus_) * dt;
  idle_reserved_area_ += static_cast<double>(idle_reserved_) * dt;
  idle_other_area_ += static_cast<double>(idle_other_) * dt;
  // Free GPUs of a paused worker are its owner's; Snapshot packs none there.
  int64_t owner_free = 0;
  for (uint32_t w : paused_list_) {
    for (size_t g = 0; g < mirror_[w]->resources().gpus.size(); ++g) {
      owner_free += mirror_[w]->gpu_free_share(g);
    }
  }
  idle_owner_area_ += static_cast<double>(owner_free) * dt;
  owner_capacity_area_ += static_cast<double>(paused_gpus_) * dt;
  suspended_gpu_area_ += static_cast<double>(suspended_gpus_) * dt;
  suspended_cpu_area_ += static_cast<double>(suspended_cpus_milli_) * dt;
  // The rest of the free GPUs: why nothing took them.
  const int64_t free = total_gpus_ - busy_gpus_;
  const double rest = static_cast<double>(free - owner_free - idle_reserved_ - idle_other_) * dt;
  if (gpu_ready_ > 0) {
    idle_fragmentation_area_ += rest;
  } else if (gpu_waiting_ > 0) {
    idle_dependency_area_ += rest;
  } else {
    idle_empty_area_ += rest;
  }
  if (last_us_ >= last_submit_us_) idle_tail_area_ += static_cast<double>(free) * dt;
  last_us_ = until_us;
}

bool Replay::HeldForReservation(uint32_t cls) {
  auto& heap = ready_[cls];
  while (!heap.empty() && (phase_[heap.top().task] != Phase::kReady ||
                           attempts_[heap.top().task] != heap.top().attempts)) {
    heap.pop();
  }
  if (heap.empty()) return false;
  // The core's head of the class, which fair share may have put before
  // the replay's earliest: every other task of the class is "behind" it.
  const std::optional<TaskId> head = sched_.NextOfClass(trace_.requests[cls]);
  Result<std::string> why = sched_.Explain(head ? *head : ids_[heap.top().task]);
  return why.ok() && why->rfind("held back: reservation", 0) == 0;
}

void Replay::Snapshot() {
  idle_reserved_ = 0;
  idle_other_ = 0;
  if (gpu_ready_ == 0) return;
  bool any_free = false;
  for (size_t w = 0; w < mirror_.size(); ++w) {
    for (size_t g = 0; g < mirror_[w]->resources().gpus.size() && !any_free && !paused_[w]; ++g) {
      any_free = mirror_[w]->gpu_free_share(g) > 0;
    }
  }
  if (!any_free) return;
  // Pack the waiting GPU tasks into the free room, then give it back. The
  // room is shared: each free GPU counts once. Classes nothing holds back
  // pack first, so a task the core wrongly left waiting is never hidden
  // behind one that waits for a reservation.
  std::vector<std::tuple<uint32_t, uint32_t, core::Allocation>> taken;  // class, worker
  for (int pass = 0; pass < 2; ++pass) {
    const bool reserved = pass == 1;
    for (uint32_t cls : gpu_classes_) {
      uint64_t left = ready_count_[cls];
      if (left == 0 || HeldForReservation(cls) != reserved) continue;
      const core::ResourceRequest& req = trace_.requests[cls];
      for (uint32_t w = 0; w < mirror_.size() && left > 0; ++w) {
        while (left > 0 && !paused_[w] && mirror_[w]->Fits(req, prefer_full_)) {
          core::Allocation alloc;
          if (!mirror_[w]->Allocate(req, prefer_full_, alloc)) break;
          taken.emplace_back(cls, w, std::move(alloc));
          --left;
          (reserved ? idle_reserved_ : idle_other_) += req.gpus;
        }
      }
    }
  }
  for (auto it = taken.rbegin(); it != taken.rend(); ++it) {
    mirror_[std::get<1>(*it)]->Free(trace_.requests[std::get<0>(*it)], std::get<2>(*it));
  }
}

Status Replay::CheckEverFits() const {
  std::vector<bool> checked(trace_.requests.size(), false);
  for (size_t i = 0; i < trace_.tasks.size(); ++i) {
    const uint32_t cls = trace_.tasks[i].request;
    if (checked[cls]) continue;
    checked[cls] = true;
    bool fits = false;
    for (const auto& w : mirror_) fits = fits || w->CanEverFit(trace_.requests[cls]);
    if (!fits) {
      return InvalidArgument("task \"" + trace_.ids[i] + "\" (" + trace_.requests[cls].ToString() +
                             ") fits no worker of the cluster");
    }
  }
  return Status::Ok();
}

Result<SimResult> Replay::Run() {
  const size_t n = trace_.tasks.size();
  if (cluster_.workers.empty()) return InvalidArgument("the cluster has no workers");
  for (size_t w = 0; w < cluster_.workers.size(); ++w) {
    mirror_.push_back(
        std::make_unique<core::WorkerState>(static_cast<WorkerId>(w + 1), cluster_.workers[w]));
  }
  RETURN_IF_ERROR(CheckEverFits());
  RETURN_IF_ERROR(BuildOwnerEvents());
  black_.worker = options_.black_hole;
  black_.quarantine = options_.quarantine;
  if (!options_.black_hole.empty()) {
    for (size_t w = 0; w < cluster_.workers.size(); ++w) {
      if (cluster_.workers[w].name == options_.black_hole) black_hole_ = static_cast<int64_t>(w);
    }
    if (black_hole_ < 0) {
      return InvalidArgument("--black-hole: no worker \"" + options_.black_hole +
                             "\" in the cluster");
    }
  }
  paused_.assign(cluster_.workers.size(), false);
  phase_.assign(n, Phase::kPending);
  ready_us_.assign(n, 0);
  waited_us_.assign(n, 0);
  start_us_.assign(n, 0);
  attempts_.assign(n, 0);
  if (options_.checkpoint && !owner_events_.empty()) progress_us_.assign(n, 0);
  ids_.assign(n, TaskId{});
  ready_.resize(trace_.requests.size());
  ready_count_.assign(trace_.requests.size(), 0);
  for (uint32_t c = 0; c < trace_.requests.size(); ++c) {
    if (trace_.requests[c].gpus > 0) gpu_classes_.push_back(c);
  }
  prefer_full_ = core::MakePolicy(options_.policy)->PreferFullGpus();
  total_gpus_ = static_cast<int64_t>(cluster_.TotalGpus()) * core::kWholeGpu;
  last_submit_us_ = trace_.tasks.back().submit.count();

  const int64_t first_us = trace_.tasks.front().submit.count();
  base_ = clock_.Now();
  now_us_ = last_us_ = first_us;
  clock_.Set(At(now_us_));
  for (size_t w = 0; w < cluster_.workers.size(); ++w) {
    RETURN_IF_ERROR(Deliver(core::WorkerJoined{static_cast<WorkerId>(w + 1), cluster_.workers[w]}));
  }
  RETURN_IF_ERROR(OwnerDue());  // owners present from before the first submit
  const int64_t renew_us = sched_.config().renew_interval.count();
  int64_t next_tick_us = now_us_ + renew_us;
  // Owner steps matter only while tasks are left: a suspended task has no
  // finish queued, and a queued one may wait for an owner to leave.
  for (SkipStale(finishes_), SkipStale(deadlines_);
       next_submit_ < n || !finishes_.empty() || (done_ < n && !wakeups_.empty()) ||
       (done_ < n && next_owner_ < owner_events_.size());
       SkipStale(finishes_), SkipStale(deadlines_)) {
    int64_t t = INT64_MAX;
    if (next_submit_ < n) t = trace_.tasks[next_submit_].submit.count();
    if (!finishes_.empty()) t = std::min(t, finishes_.top().at_us);
    if (!deadlines_.empty()) t = std::min(t, deadlines_.top().at_us);
    if (next_owner_ < owner_events_.size()) t = std::min(t, owner_events_[next_owner_].at_us);
    if (!wakeups_.empty()) t = std::min(t, wakeups_.top());
    Account(t);
    now_us_ = t;
    clock_.Set(At(t));
    RETURN_IF_ERROR(FinishDue());
    RETURN_IF_ERROR(OwnerDue());
    RETURN_IF_ERROR(SubmitDue());
    // The renewal Tick rides on instants that happen anyway: between them
    // the core has no timer that could change a decision (no task of a
    // trace can fail or time out, see simulator.h, but on a black hole,
    // whose retries' backoffs get wakeups of their own; and the replay's
    // leases never expire), so
    // a Tick of its own every 10 s of a simulated week would only cost time.
    bool woken = false;
    while (!wakeups_.empty() && wakeups_.top() <= t) {
      wakeups_.pop();
      woken = true;
    }
    if (DeadlineDue() || woken || t >= next_tick_us) {
      RETURN_IF_ERROR(Deliver(core::Tick{}));
      next_tick_us = t + renew_us;
    }
    Snapshot();
  }
  if (done_ != n) {
    for (size_t i = 0; i < n; ++i) {
      if (phase_[i] >= Phase::kDone) continue;
      Result<std::string> why = sched_.Explain(ids_[i]);
      return Internal("the replay ended with " + std::to_string(n - done_) +
                      " tasks unfinished, e.g. " + trace_.ids[i] + ": " +
                      (why.ok() ? *why : why.status().ToString()));
    }
  }

  SimResult r;
  r.policy = options_.policy;
  r.reservations = options_.reservations;
  r.locality = options_.locality;
  r.input_bytes = input_bytes_;
  r.moved_bytes = moved_bytes_;
  r.tasks = n;
  r.jobs = job_first_.size();
  r.events = events_;
  r.makespan_s = static_cast<double>(now_us_ - first_us) / 1e6;
  const double span = r.makespan_s > 0 ? r.makespan_s : 1;
  r.cpu_utilization = cpu_area_ / (static_cast<double>(cluster_.TotalCores()) * 1000.0 * span);
  r.mem_utilization = cluster_.TotalMemBytes() == 0
                          ? 0
                          : mem_area_ / (static_cast<double>(cluster_.TotalMemBytes()) * span);
  r.gpu_utilization =
      cluster_.TotalGpus() == 0
          ? 0
          : gpu_area_ / (static_cast<double>(cluster_.TotalGpus()) * core::kWholeGpu * span);
  r.idle_reservation_gpu_s = idle_reserved_area_ / core::kWholeGpu;
  r.idle_other_gpu_s = idle_other_area_ / core::kWholeGpu;
  r.idle.reservation_gpu_s = r.idle_reservation_gpu_s;
  r.idle.other_gpu_s = r.idle_other_gpu_s;
  r.idle.fragmentation_gpu_s = idle_fragmentation_area_ / core::kWholeGpu;
  r.idle.dependency_gpu_s = idle_dependency_area_ / core::kWholeGpu;
  r.idle.queue_empty_gpu_s = idle_empty_area_ / core::kWholeGpu;
  r.idle.owner_gpu_s = idle_owner_area_ / core::kWholeGpu;
  r.idle.after_last_submit_gpu_s = idle_tail_area_ / core::kWholeGpu;
  r.owners = owners_;
  r.owners.capacity_gpu_s = owner_capacity_area_ / core::kWholeGpu;
  r.owners.suspended_gpu_s = suspended_gpu_area_ / core::kWholeGpu;
  r.owners.suspended_cpu_s = suspended_cpu_area_ / 1000.0;
  r.waits.resize(n);
  r.starts.resize(n);
  std::vector<Duration> started;  // the waits of tasks that ran
  started.reserve(n);
  std::vector<bool> ran(n, false);
  for (size_t i = 0; i < n; ++i) {
    r.waits[i] = Duration(waited_us_[i]);
    r.starts[i] = Duration(start_us_[i]);
    ran[i] = attempts_[i] > 0;
    if (attempts_[i] > 0) started.push_back(r.waits[i]);
    if (phase_[i] == Phase::kDone && (reused_.empty() || !reused_[i])) {
      r.owners.useful_gpu_s += static_cast<double>(trace_.RequestOf(trace_.tasks[i]).gpus) /
                               core::kWholeGpu *
                               static_cast<double>(trace_.tasks[i].duration.count()) / 1e6;
    }
  }
  r.wait = ComputeWaitStats(started);
  r.black_hole = black_;
  r.cache = cache_;
  r.cache.on = !trace_.keys.empty();
  for (const TraceTask& t : trace_.tasks) r.cache.keyed_tasks += t.key != TraceTask::kNoKey ? 1 : 0;
  r.black_hole.goodput =
      cluster_.TotalGpus() == 0
          ? 0
          : r.owners.useful_gpu_s / (static_cast<double>(cluster_.TotalGpus()) * span);
  r.fair_share = options_.fair_share.enabled;
  r.users = ComputeUserFigures(trace_, r.waits, ran);
  double first_submit_s =
      trace_.tasks.empty() ? 0 : static_cast<double>(trace_.tasks.front().submit.count()) / 1e6;
  r.shares = ComputeShares(trace_, r.starts, ran, first_submit_s + r.makespan_s);
  const double lent =
      static_cast<double>(cluster_.TotalGpus()) * r.makespan_s - r.owners.capacity_gpu_s;
  r.owners.throughput_kept = lent > 0 ? r.owners.useful_gpu_s / lent : 0;
  return r;
}

}  // namespace drover::sim::internal
