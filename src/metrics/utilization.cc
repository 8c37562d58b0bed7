#include "metrics/utilization.h"

#include <algorithm>
#include <cassert>
#include <nlohmann/json.hpp>

namespace drover::metrics {

UtilizationSample SampleUtilization(const core::Scheduler& scheduler, Time now) {
  UtilizationSample s;
  const int64_t us = ToMicros(now);
  s.t_ms = us >= 0 ? us / 1000 : -((-us + 999) / 1000);
  double busy_weighted = 0;
  double gpu_util_sum = 0;
  for (WorkerId id : scheduler.Workers()) {
    Result<core::WorkerInfo> w = scheduler.GetWorker(id);
    if (!w.ok() || w->lost) continue;
    ++s.workers;
    const uint64_t cores = w->resources.cpu_cores.size();
    s.cpus_total += cores;
    s.cpus_allocated += cores - std::min<uint64_t>(cores, w->free_cores.size());
    busy_weighted += static_cast<double>(w->utilization.cpu_percent) * static_cast<double>(cores);
    s.mem_total_bytes += w->resources.mem_bytes;
    s.mem_allocated_bytes += w->resources.mem_bytes - std::min(w->resources.mem_bytes,
                                                               w->free_mem_bytes);
    s.mem_used_bytes += w->utilization.mem_used_bytes;
    s.gpus_total += w->resources.gpus.size();
    for (int64_t free_share : w->gpu_free_share) {
      s.gpus_allocated += static_cast<double>(core::kWholeGpu - free_share) / core::kWholeGpu;
    }
    for (const core::GpuUtilization& g : w->utilization.gpus) gpu_util_sum += g.util_percent;
  }
  if (s.cpus_total > 0) s.cpu_busy_percent = busy_weighted / static_cast<double>(s.cpus_total);
  if (s.gpus_total > 0) s.gpu_util_percent = gpu_util_sum / static_cast<double>(s.gpus_total);
  for (JobId id : scheduler.Jobs()) {
    Result<core::JobInfo> j = scheduler.GetJob(id);
    if (!j.ok() || j->done) continue;
    s.tasks_running += j->counts[static_cast<int>(core::TaskState::kRunning)];
    s.tasks_assigned += j->counts[static_cast<int>(core::TaskState::kAssigned)];
    s.tasks_queued += j->counts[static_cast<int>(core::TaskState::kQueued)];
    s.tasks_waiting += j->counts[static_cast<int>(core::TaskState::kWaiting)];
  }
  return s;
}

UtilizationRing::UtilizationRing(size_t capacity) : buffer_(capacity) { assert(capacity > 0); }

void UtilizationRing::Add(const UtilizationSample& sample) {
  if (size_ < buffer_.size()) {
    buffer_[(start_ + size_) % buffer_.size()] = sample;
    ++size_;
    return;
  }
  buffer_[start_] = sample;
  start_ = (start_ + 1) % buffer_.size();
}

std::vector<UtilizationSample> UtilizationRing::Since(int64_t since_ms) const {
  std::vector<UtilizationSample> out;
  for (size_t i = 0; i < size_; ++i) {
    const UtilizationSample& s = buffer_[(start_ + i) % buffer_.size()];
    if (s.t_ms > since_ms) out.push_back(s);
  }
  return out;
}

nlohmann::json SampleJson(const UtilizationSample& s) {
  return {{"t_ms", s.t_ms},
          {"workers", s.workers},
          {"cpus_total", s.cpus_total},
          {"cpus_allocated", s.cpus_allocated},
          {"cpu_busy_percent", s.cpu_busy_percent},
          {"mem_total_bytes", s.mem_total_bytes},
          {"mem_allocated_bytes", s.mem_allocated_bytes},
          {"mem_used_bytes", s.mem_used_bytes},
          {"gpus_total", s.gpus_total},
          {"gpus_allocated", s.gpus_allocated},
          {"gpu_util_percent", s.gpu_util_percent},
          {"tasks_running", s.tasks_running},
          {"tasks_assigned", s.tasks_assigned},
          {"tasks_queued", s.tasks_queued},
          {"tasks_waiting", s.tasks_waiting}};
}

nlohmann::json UtilizationJson(Duration interval, size_t capacity,
                               const std::vector<UtilizationSample>& samples) {
  nlohmann::json list = nlohmann::json::array();
  for (const UtilizationSample& s : samples) list.push_back(SampleJson(s));
  return {{"interval_ms", interval.count() / 1000},
          {"capacity", capacity},
          {"samples", std::move(list)}};
}

}  // namespace drover::metrics
