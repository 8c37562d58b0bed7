#include "worker/resources/gpu.h"

#include "common/quantity.h"
#include "worker/resources/resources_host.h"

namespace drover::worker {

Result<std::vector<GpuInfo>> ParseManualGpus(std::string_view gpus, std::string_view gpu_type,
                                             std::string_view gpu_mem) {
  if (gpus.empty()) {
    if (!gpu_type.empty() || !gpu_mem.empty()) {
      return InvalidArgument(
          "--gpu-type and --gpu-mem need --gpus with the GPU indices (e.g. 0,1)");
    }
    return std::vector<GpuInfo>();
  }
  if (gpus == "none") return std::vector<GpuInfo>();
  Result<std::vector<int>> indices = ParseCpuList(gpus);
  if (!indices.ok() || indices->empty()) {
    return InvalidArgument("--gpus \"" + std::string(gpus) +
                           "\": expected GPU indices such as 0,1 or 0-3, or none");
  }
  uint64_t memory = 0;
  if (!gpu_mem.empty()) {
    Result<uint64_t> bytes = ParseBytes(gpu_mem);
    if (!bytes.ok()) return bytes.status().WithContext("--gpu-mem");
    memory = *bytes;
  }
  std::vector<GpuInfo> out;
  for (int index : *indices) {
    out.push_back(GpuInfo{index, "", gpu_type.empty() ? "GPU" : std::string(gpu_type), memory});
  }
  return out;
}

std::string ShortGpuName(std::string_view name) {
  for (std::string_view prefix : {"NVIDIA ", "Tesla "}) {
    if (name.starts_with(prefix)) name.remove_prefix(prefix.size());
  }
  // Drop the form factor and memory suffix: "A100-SXM4-80GB" -> "A100".
  size_t dash = name.find('-');
  if (dash != std::string_view::npos && dash > 0) name = name.substr(0, dash);
  return std::string(name);
}

}  // namespace drover::worker
