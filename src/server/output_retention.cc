#include "server/output_retention.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

#include "common/quantity.h"

namespace drover::server {

namespace {

// `keep`, bounded by --keep-finished (zero: unbounded).
Duration Bounded(Duration keep, Duration keep_finished) {
  return keep_finished > Duration::zero() ? std::min(keep, keep_finished) : keep;
}

}  // namespace

OutputRetention::OutputRetention(const core::Scheduler& scheduler, Duration keep_outputs,
                                 Duration keep_finished, SendFn send, Duration cache_keep)
    : scheduler_(scheduler),
      keep_(Bounded(keep_outputs, keep_finished)),
      cache_keep_(Bounded(std::max(keep_outputs, cache_keep), keep_finished)),
      send_(std::move(send)) {}

Duration OutputRetention::interval() const {
  return std::clamp<Duration>(keep_ / 100, Seconds(1), Seconds(600));
}

bool OutputRetention::Due(JobId job, Time now) const {
  Result<core::JobInfo> info = scheduler_.GetJob(job);
  if (!info.ok()) return true;  // forgotten, or never known here
  if (!info->done) return false;
  const std::optional<Time> ended = scheduler_.LastChange(job);
  return !ended || now - *ended >= (info->cache_entries > 0 ? cache_keep_ : keep_);
}

void OutputRetention::Kept(WorkerId worker, const std::vector<JobId>& jobs, Time now) {
  proto::ReleaseOutputs release;
  for (JobId job : jobs) {
    if (Due(job, now)) {
      release.jobs.push_back(job);
    } else {
      holders_[job].insert(worker);
    }
  }
  if (release.jobs.empty()) return;
  std::sort(release.jobs.begin(), release.jobs.end());
  release.jobs.erase(std::unique(release.jobs.begin(), release.jobs.end()), release.jobs.end());
  spdlog::info(
      "worker {} keeps the outputs of {} job(s) past --keep-outputs ({}), forgotten or "
      "unknown; released",
      worker, release.jobs.size(), FormatDuration(keep_));
  (void)send_(worker, release);
}

size_t OutputRetention::Release(Time now) {
  std::map<WorkerId, proto::ReleaseOutputs> to;
  size_t released = 0;
  for (auto it = holders_.begin(); it != holders_.end();) {
    if (!Due(it->first, now)) {
      ++it;
      continue;
    }
    for (WorkerId worker : it->second) to[worker].jobs.push_back(it->first);
    ++released;
    it = holders_.erase(it);
  }
  for (const auto& [worker, release] : to) {
    // Not connected: its next OutputsKept brings the release.
    Status sent = send_(worker, release);
    if (!sent.ok()) {
      spdlog::debug("outputs of {} job(s) on worker {} released when it attaches again: {}",
                    release.jobs.size(), worker, sent.ToString());
    }
  }
  if (released > 0) {
    spdlog::info("released the outputs of {} job(s) that ended {} ago or more (--keep-outputs)",
                 released, FormatDuration(keep_));
  }
  return released;
}

std::string OutputRetention::ReleasedNote(TaskId task, Time now) const {
  Result<core::JobInfo> info = scheduler_.GetJob(task.job);
  if (!info.ok() || !Due(task.job, now)) return "";
  if (info->cache_entries > 0) {
    return "outputs of " + task.ToString() + " were released " + FormatDuration(cache_keep_) +
           " after job " + std::to_string(task.job) +
           " ended (drover server --cache-keep: it held result cache entries)";
  }
  return "outputs of " + task.ToString() + " were released " + FormatDuration(keep_) +
         " after job " + std::to_string(task.job) + " ended (drover server --keep-outputs)";
}

}  // namespace drover::server
