// What the worker knows about its GPUs, and the interface behind which the
// ways of finding them out sit (NVML, nvidia-smi).
//
// GpuInfo is the static description offered to the scheduler at hello time;
// GpuSample is the live part sent with each heartbeat. Indices are NVML's
// (PCI bus order, as nvidia-smi prints them). CUDA numbers devices fastest
// first unless CUDA_DEVICE_ORDER=PCI_BUS_ID, so the executor sets that
// variable beside CUDA_VISIBLE_DEVICES for every task.
//
// Thread safety: GpuInfo/GpuSample are plain values. A GpuSource is used by
// one thread at a time.
#ifndef DROVER_WORKER_RESOURCES_GPU_H_
#define DROVER_WORKER_RESOURCES_GPU_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace drover::worker {

struct GpuInfo {
  int index = 0;
  std::string uuid;           // "GPU-5f3c..."; empty for GPUs given by hand
  std::string name;           // "NVIDIA A100-SXM4-80GB", or the --gpu-type text
  uint64_t memory_bytes = 0;  // total device memory; 0 when unknown

  friend bool operator==(const GpuInfo&, const GpuInfo&) = default;
};

struct GpuSample {
  int index = 0;
  std::optional<int> utilization_percent;     // nullopt: the device does not say
  std::optional<uint64_t> memory_used_bytes;  // nullopt: the device does not say

  friend bool operator==(const GpuSample&, const GpuSample&) = default;
};

// A way of listing GPUs and sampling their load.
class GpuSource {
 public:
  virtual ~GpuSource() = default;
  GpuSource() = default;
  GpuSource(const GpuSource&) = delete;
  GpuSource& operator=(const GpuSource&) = delete;

  // "nvml" or "nvidia-smi", for logs and WorkerResources::gpu_source.
  virtual std::string_view name() const = 0;
  // The GPUs, by index. Errors say which device or line failed.
  virtual Result<std::vector<GpuInfo>> List() = 0;
  // Utilization and memory in use, one per GPU, in List() order. Meant to be
  // called every heartbeat; errors are Unavailable (try again next time).
  virtual Result<std::vector<GpuSample>> Sample() = 0;
};

// Builds GPUs from the manual override flags
//   --gpus 0,1 (or 0-3; "none" for no GPU) --gpu-type A100 --gpu-mem 80GiB
// each GPU gets the listed index, the type as its name and the memory (see
// ParseBytes; "80G" is refused as ambiguous). The type defaults to "GPU" and
// the memory to 0 (unknown). InvalidArgument names the flag and the text;
// --gpu-type or --gpu-mem without --gpus is an error.
Result<std::vector<GpuInfo>> ParseManualGpus(std::string_view gpus, std::string_view gpu_type,
                                             std::string_view gpu_mem);

// The model part of a device name, for summaries: "NVIDIA A100-SXM4-80GB" ->
// "A100", "NVIDIA GeForce RTX 4090" -> "GeForce RTX 4090", "Tesla T4" -> "T4".
std::string ShortGpuName(std::string_view name);

}  // namespace drover::worker

#endif  // DROVER_WORKER_RESOURCES_GPU_H_
