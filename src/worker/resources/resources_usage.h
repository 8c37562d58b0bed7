// UtilizationSampler: the live load figures a worker sends with each
// heartbeat — how busy its cores are, how much memory is in use, and each
// GPU's utilization and memory in use.
//
//   cpu    from /proc/stat: the busy share of the worker's cores between
//          the previous sample (or construction) and now, 0..100;
//   memory the worker's memory cgroup usage when its memory is limited by a
//          cgroup (page cache that can be dropped excluded), else MemTotal
//          minus MemAvailable;
//   GPUs   GpuSource::Sample() of the source detection chose.
//
// Each call reads two or three small files and, with NVML, makes two library
// calls per GPU, so it is cheap enough for every heartbeat.
//
// Thread safety: one thread at a time.
#ifndef DROVER_WORKER_RESOURCES_RESOURCES_USAGE_H_
#define DROVER_WORKER_RESOURCES_RESOURCES_USAGE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "worker/resources/gpu.h"

namespace drover::worker {

struct Utilization {
  double cpu_percent = 0;  // 0..100 over the worker's cores
  uint64_t memory_used_bytes = 0;
  std::vector<GpuSample> gpus;
  std::string gpu_error;  // why GPU figures are missing this time; empty if fine
};

struct SamplerConfig {
  std::string proc_root = "/proc";
  // Cores to average over; empty means the whole machine ("cpu" line).
  std::vector<int> cpu_ids;
  // The memory cgroup to report; empty means the host figure.
  std::string memory_cgroup_dir;
  int memory_cgroup_version = 0;
};

class UtilizationSampler {
 public:
  // Takes the first /proc/stat reading as the baseline; if that fails the
  // first sample covers the time since boot. `gpus` may be null (no GPU).
  UtilizationSampler(SamplerConfig config, std::unique_ptr<GpuSource> gpus);
  UtilizationSampler(const UtilizationSampler&) = delete;
  UtilizationSampler& operator=(const UtilizationSampler&) = delete;

  // Reads the figures now. Fails (NotFound/Unavailable/DataLoss naming the
  // file) only when the cpu or memory files cannot be read; a GPU failure
  // leaves `gpus` empty and says why in `gpu_error`.
  Result<Utilization> SampleUtilization();

 private:
  struct CpuTimes {
    uint64_t busy = 0;
    uint64_t total = 0;
  };
  Result<CpuTimes> ReadCpuTimes() const;

  SamplerConfig config_;
  std::unique_ptr<GpuSource> gpus_;
  CpuTimes previous_;
};

}  // namespace drover::worker

#endif  // DROVER_WORKER_RESOURCES_RESOURCES_USAGE_H_
