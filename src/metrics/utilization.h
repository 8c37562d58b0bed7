// Utilization history: one cluster-wide sample per interval, kept in a ring
// buffer by the server shell and served as GET /api/v1/utilization.
//
//   {"interval_ms":1000, "capacity":3600,
//    "samples":[{"t_ms":.., "workers":2, "cpus_total":8, "cpus_allocated":3,
//                "cpu_busy_percent":41.5, "mem_total_bytes":.., "mem_allocated_bytes":..,
//                "mem_used_bytes":.., "gpus_total":2, "gpus_allocated":1.25,
//                "gpu_util_percent":73.0, "tasks_running":3, "tasks_assigned":0,
//                "tasks_queued":12, "tasks_waiting":4}]}
//
// A sample covers the workers that are not lost. "Allocated" is what the
// scheduler handed out (cores, reserved memory, GPU hundredths / 100);
// "busy"/"used"/"util" is what the workers measured in their last heartbeat:
// cpu_busy_percent is the mean of the workers' CPU percent weighted by their
// core counts, gpu_util_percent the mean over all GPUs (0 without GPUs).
//
// SampleUtilization is a query on the core (no clock: `now` comes in); the
// timer that calls it lives in the server shell.
//
// Thread safety: UtilizationRing is not synchronised (the server's loop
// thread owns it); the functions are pure.
#ifndef DROVER_METRICS_UTILIZATION_H_
#define DROVER_METRICS_UTILIZATION_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/time.h"
#include "core/scheduler.h"

namespace drover::metrics {

struct UtilizationSample {
  int64_t t_ms = 0;
  uint32_t workers = 0;
  uint64_t cpus_total = 0;
  uint64_t cpus_allocated = 0;
  double cpu_busy_percent = 0;
  uint64_t mem_total_bytes = 0;
  uint64_t mem_allocated_bytes = 0;
  uint64_t mem_used_bytes = 0;
  uint64_t gpus_total = 0;
  double gpus_allocated = 0;
  double gpu_util_percent = 0;
  uint64_t tasks_running = 0;
  uint64_t tasks_assigned = 0;
  uint64_t tasks_queued = 0;
  uint64_t tasks_waiting = 0;
};

// The cluster as the scheduler sees it at `now`.
UtilizationSample SampleUtilization(const core::Scheduler& scheduler, Time now);

// Fixed-capacity history, oldest first; adding to a full ring drops the
// oldest sample.
class UtilizationRing {
 public:
  // `capacity` > 0.
  explicit UtilizationRing(size_t capacity);

  void Add(const UtilizationSample& sample);
  // Samples with t_ms > since_ms, oldest first (every sample for a since_ms
  // below the oldest one's time).
  std::vector<UtilizationSample> Since(int64_t since_ms) const;
  size_t size() const { return size_; }
  size_t capacity() const { return buffer_.size(); }

 private:
  std::vector<UtilizationSample> buffer_;
  size_t start_ = 0;  // index of the oldest
  size_t size_ = 0;
};

nlohmann::json SampleJson(const UtilizationSample& sample);
// The body of GET /api/v1/utilization.
nlohmann::json UtilizationJson(Duration interval, size_t capacity,
                               const std::vector<UtilizationSample>& samples);

}  // namespace drover::metrics

#endif  // DROVER_METRICS_UTILIZATION_H_
