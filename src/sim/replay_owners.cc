// Plays the workstation owners of a replay (replay.h): an owner who comes
// back suspends the tasks on their machine, then vacates them after the
// grace; one who leaves lets them run again.
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

int64_t Replay::RanUs(const Running& run) const {
  return now_us_ - run.start_us - run.suspended_us;
}

void Replay::Suspend(Running& run) {
  const core::ResourceRequest& req = trace_.RequestOf(trace_.tasks[run.task]);
  run.suspended = true;
  run.suspended_since_us = now_us_;
  run.remaining_us = run.finish_us - now_us_;
  ++run.gen;  // its Finish no longer counts
  suspended_gpus_ += req.gpus;
  suspended_cpus_milli_ += req.cpus_milli;
  ++owners_.suspended_attempts;
  const Duration limit = trace_.tasks[run.task].limit;
  if (limit > Duration::zero()) {
    const uint32_t slot = static_cast<uint32_t>(&run - running_.data());
    deadlines_.push(Finish{run.start_us + limit.count(), finish_seq_++, slot, run.gen});
  }
}

void Replay::EndSuspension(Running& run) {
  if (!run.suspended) return;
  const core::ResourceRequest& req = trace_.RequestOf(trace_.tasks[run.task]);
  run.suspended = false;
  run.suspended_us += now_us_ - run.suspended_since_us;
  suspended_gpus_ -= req.gpus;
  suspended_cpus_milli_ -= req.cpus_milli;
}

Status Replay::OwnerDue() {
  while (next_owner_ < owner_events_.size() && owner_events_[next_owner_].at_us <= now_us_) {
    const OwnerEvent e = owner_events_[next_owner_++];
    if (e.step == OwnerStep::kCome) {
      RETURN_IF_ERROR(OwnerCame(e.worker));
    } else if (e.step == OwnerStep::kLeave) {
      RETURN_IF_ERROR(OwnerLeft(e.worker));
    } else {
      std::vector<uint32_t> slots;  // Vacate delivers events, which may start tasks elsewhere
      for (uint32_t s = 0; s < running_.size(); ++s) {
        if (running_[s].active && running_[s].worker == e.worker) slots.push_back(s);
      }
      for (uint32_t s : slots) RETURN_IF_ERROR(Vacate(s));
    }
  }
  return Status::Ok();
}

Status Replay::OwnerCame(uint32_t w) {
  paused_[w] = true;
  paused_list_.push_back(w);
  paused_gpus_ += static_cast<int64_t>(cluster_.workers[w].gpus.size()) * core::kWholeGpu;
  ++owners_.presences;
  for (Running& run : running_) {
    if (run.active && run.worker == w) Suspend(run);
  }
  return Deliver(core::WorkerPaused{w + 1, true, "owner present", clock_.Now()});
}

Status Replay::OwnerLeft(uint32_t w) {
  paused_[w] = false;
  paused_list_.erase(std::find(paused_list_.begin(), paused_list_.end(), w));
  paused_gpus_ -= static_cast<int64_t>(cluster_.workers[w].gpus.size()) * core::kWholeGpu;
  for (uint32_t s = 0; s < running_.size(); ++s) {
    Running& run = running_[s];
    if (!run.active || run.worker != w || !run.suspended) continue;
    EndSuspension(run);
    run.finish_us = now_us_ + run.remaining_us;
    finishes_.push(Finish{run.finish_us, finish_seq_++, s, run.gen});
  }
  return Deliver(core::WorkerPaused{w + 1, false, "owner away", clock_.Now()});
}

// The attempt ends as the worker's vacate ends it; the task is ready again
// before the core hears of it, as the core may place it at once.
Status Replay::Vacate(uint32_t slot) {
  Running& run = running_[slot];
  EndSuspension(run);
  const uint32_t i = run.task;
  const uint32_t attempt = run.attempt;
  const core::ResourceRequest& req = trace_.RequestOf(trace_.tasks[i]);
  const int64_t ran_us = RanUs(run);
  if (!progress_us_.empty()) {
    progress_us_[i] += ran_us;
  } else {
    owners_.vacated_gpu_s += static_cast<double>(req.gpus) / core::kWholeGpu * ran_us / 1e6;
    owners_.vacated_cpu_s += static_cast<double>(req.cpus_milli) / 1000.0 * ran_us / 1e6;
  }
  ++owners_.vacated_attempts;
  const std::string& name = cluster_.workers[run.worker].name;
  const WorkerId worker = run.worker + 1;
  EndAttempt(slot);
  MakeReady(i, /*front=*/true);
  core::TaskOutcome outcome;
  outcome.signal = 15;
  outcome.usage.wall = Duration(now_us_ - start_us_[i]);
  outcome.reason = core::why::OwnerReturnedText(name);
  return Deliver(core::TaskFinished{ids_[i], attempt, std::move(outcome), worker,
                                    /*never_started=*/false, /*vacated=*/true});
}

Status Replay::BuildOwnerEvents() {
  std::unordered_map<std::string, uint32_t> index;
  for (uint32_t w = 0; w < cluster_.workers.size(); ++w) index.emplace(cluster_.workers[w].name, w);
  for (const OwnerPresence& p : trace_.owners) {
    auto it = index.find(p.worker);
    if (it == index.end()) {
      return InvalidArgument(trace_.name + ":" + std::to_string(p.line) + ": owner: no worker \"" +
                             p.worker + "\" in the cluster");
    }
    const int64_t from = p.from.count();
    const int64_t to = p.to.count();
    owner_events_.push_back(OwnerEvent{from, it->second, OwnerStep::kCome});
    // A visit no longer than suspend_for only suspends.
    if (from + options_.suspend_for.count() < to) {
      owner_events_.push_back(
          OwnerEvent{from + options_.suspend_for.count(), it->second, OwnerStep::kVacate});
    }
    owner_events_.push_back(OwnerEvent{to, it->second, OwnerStep::kLeave});
  }
  std::sort(owner_events_.begin(), owner_events_.end());
  return Status::Ok();
}

}  // namespace drover::sim::internal
