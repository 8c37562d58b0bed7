// What a worker machine offers: concrete core ids, memory, GPUs with model,
// memory and UUID, labels and custom counters — detected once at start and
// sent to the server in the worker's hello.
//
//   DetectResources(options)
//     cores    sched_getaffinity (or --cpus), capped by a cgroup CPU quota
//     memory   /proc/meminfo MemTotal, capped by a cgroup memory limit
//     GPUs     --gpus/--gpu-type/--gpu-mem if given, else NVML, else
//              nvidia-smi, else none (see gpu_detect.h)
//     labels   os, arch, then --label key=value; counters from --counter
//   FormatSummary(resources) -> "32 cores, 251.4 GiB, 4x A100 80 GiB"
//
// The /proc and /sys roots are options so tests can run on a fake tree.
// WorkerResources is a plain value with no dependency on the scheduler core;
// the agent converts it to the protocol's message.
//
// Thread safety: DetectResources may run on any thread; the values are
// plain and copyable.
#ifndef DROVER_WORKER_RESOURCES_RESOURCES_H_
#define DROVER_WORKER_RESOURCES_RESOURCES_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/time.h"
#include "worker/resources/gpu.h"
#include "worker/resources/resources_usage.h"

namespace drover::worker {

struct WorkerResources {
  std::string hostname;
  // The cores tasks may be pinned to, sorted.
  std::vector<int> cpu_ids;
  // Milli-cpus the worker may use: the number of cores, or less when a cgroup
  // CPU quota is tighter (cpu_quota_milli holds that quota).
  int64_t cpu_milli = 0;
  std::optional<int64_t> cpu_quota_milli;
  // Bytes tasks may use: MemTotal, or a tighter cgroup limit.
  uint64_t memory_bytes = 0;
  uint64_t host_memory_bytes = 0;
  std::optional<uint64_t> memory_limit_bytes;
  std::vector<GpuInfo> gpus;
  std::string gpu_source = "none";  // "nvml", "nvidia-smi", "manual" or "none"
  std::map<std::string, std::string> labels;
  std::map<std::string, int64_t> counters;
  // Things worth a log line: why a GPU source was passed over, which limit
  // applied. Not errors.
  std::vector<std::string> notes;
};

struct DetectOptions {
  std::string proc_root = "/proc";
  std::string sys_root = "/sys";
  // --cpus: a cpu list ("0-7") used instead of the affinity mask; must be a
  // subset of it.
  std::string cpus;
  std::string hostname;  // empty: gethostname()
  // --label key=value and --counter name=count, one item each.
  std::vector<std::string> labels;
  std::vector<std::string> counters;
  // --gpus/--gpu-type/--gpu-mem (see ParseManualGpus); when --gpus is set no
  // detection runs.
  std::string gpus;
  std::string gpu_type;
  std::string gpu_mem;
  // With detection: keep only part `gpu_part` of `gpu_parts` contiguous
  // shares of the detected GPUs (the first parts one GPU longer when they
  // do not divide evenly; a part may be empty). `drover up` gives each
  // local worker its own share so no GPU is offered twice.
  int gpu_part = 0;
  int gpu_parts = 1;
  // Where to look for NVML and nvidia-smi ("" skips nvidia-smi).
  std::string nvml_library = "libnvidia-ml.so.1";
  std::string nvidia_smi = "nvidia-smi";
  Duration nvidia_smi_timeout = Seconds(10);
};

// Detects everything. If `sampler` is not null it receives a
// UtilizationSampler bound to the same cores, memory cgroup and GPU source,
// for heartbeats.
// Errors: InvalidArgument for bad option values (names the flag and text);
// FailedPrecondition when --cpus asks for cores outside the affinity mask;
// DataLoss/Unavailable naming the /proc or /sys file that could not be read;
// the GPU detection errors of DetectGpus.
Result<WorkerResources> DetectResources(const DetectOptions& options,
                                        std::unique_ptr<UtilizationSampler>* sampler = nullptr);

// One line for logs and `drover workers`: "32 cores, 251.4 GiB, 4x A100 80 GiB",
// with "(quota 2.5)" after the cores when a CPU quota is tighter, GPU groups
// joined by " + ", and "no GPU" when there is none.
std::string FormatSummary(const WorkerResources& resources);

}  // namespace drover::worker

#endif  // DROVER_WORKER_RESOURCES_RESOURCES_H_
