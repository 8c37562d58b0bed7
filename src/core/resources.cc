#include "core/resources.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "common/quantity.h"

namespace drover::core {

Status ResourceRequest::Validate() const {
  if (cpus_milli < 0) return InvalidArgument("resources.cpus must not be negative");
  if (gpus < 0) return InvalidArgument("resources.gpus must not be negative");
  if (gpus > kWholeGpu && gpus % kWholeGpu != 0) {
    return InvalidArgument("resources.gpus " + FormatGpus(gpus) +
                           ": above one GPU only whole GPUs can be requested");
  }
  if (gpus == 0 && (gpu_mem_bytes != 0 || !gpu_types.empty())) {
    return InvalidArgument("resources.gpu_mem and gpu_type need gpus > 0");
  }
  for (const auto& [name, amount] : counters) {
    if (amount <= 0) {
      return InvalidArgument("resources counter \"" + name + "\" must be positive");
    }
  }
  return Status::Ok();
}

std::string ResourceRequest::ToString() const {
  std::string s = "cpus=" + FormatCpus(cpus_milli);
  if (mem_bytes != 0) s += " mem=" + FormatBytes(mem_bytes);
  if (gpus != 0) s += " gpus=" + FormatGpus(gpus);
  if (gpu_mem_bytes != 0) s += " gpu_mem=" + FormatBytes(gpu_mem_bytes);
  if (!gpu_types.empty()) {
    s += " gpu_type=";
    for (size_t i = 0; i < gpu_types.size(); ++i) s += (i ? "|" : "") + gpu_types[i];
  }
  for (const auto& [name, amount] : counters) s += " " + name + "=" + std::to_string(amount);
  for (const auto& [key, value] : labels) s += " " + key + "=" + value;
  if (private_network) s += " network=none";
  if (disk_bytes != 0) s += " disk=" + FormatBytes(disk_bytes);
  if (container) s += " container";
  return s;
}

Status WorkerResources::Validate() const {
  if (cpu_cores.size() > kMaxWorkerCores) {
    return InvalidArgument("worker offers " + std::to_string(cpu_cores.size()) +
                           " cores; at most " + std::to_string(kMaxWorkerCores) +
                           " are accepted");
  }
  std::set<uint32_t> cores(cpu_cores.begin(), cpu_cores.end());
  if (cores.size() != cpu_cores.size()) return InvalidArgument("worker reports a core id twice");
  if (!cores.empty() && *cores.rbegin() >= kMaxWorkerCoreId) {
    return InvalidArgument("worker reports core id " + std::to_string(*cores.rbegin()) +
                           "; ids must be below " + std::to_string(kMaxWorkerCoreId));
  }
  if (mem_bytes > kMaxWorkerMemBytes) {
    return InvalidArgument("worker offers " + FormatBytes(mem_bytes) + " of memory; at most " +
                           FormatBytes(kMaxWorkerMemBytes) + " is accepted");
  }
  if (gpus.size() > kMaxWorkerGpus) {
    return InvalidArgument("worker offers " + std::to_string(gpus.size()) + " GPUs; at most " +
                           std::to_string(kMaxWorkerGpus) + " are accepted");
  }
  std::set<uint32_t> gpu_indices;
  for (const GpuDevice& gpu : gpus) {
    if (!gpu_indices.insert(gpu.index).second) {
      return InvalidArgument("worker reports GPU index " + std::to_string(gpu.index) + " twice");
    }
    if (gpu.index >= kMaxWorkerGpuIndex) {
      return InvalidArgument("worker reports GPU index " + std::to_string(gpu.index) +
                             "; indices must be below " + std::to_string(kMaxWorkerGpuIndex));
    }
    if (gpu.memory_bytes > kMaxGpuMemBytes) {
      return InvalidArgument("worker reports GPU " + std::to_string(gpu.index) + " with " +
                             FormatBytes(gpu.memory_bytes) + "; at most " +
                             FormatBytes(kMaxGpuMemBytes) + " per GPU is accepted");
    }
  }
  for (const auto& [name, amount] : counters) {
    if (amount < 0) return InvalidArgument("worker counter \"" + name + "\" is negative");
    if (amount > kMaxWorkerCounter) {
      return InvalidArgument("worker counter \"" + name + "\" is " + std::to_string(amount) +
                             "; at most " + std::to_string(kMaxWorkerCounter) + " is accepted");
    }
  }
  return Status::Ok();
}

bool GpuModelAccepted(const std::vector<std::string>& types, std::string_view model) {
  if (types.empty()) return true;
  auto lower = [](unsigned char c) { return static_cast<char>(std::tolower(c)); };
  std::string hay(model);
  std::transform(hay.begin(), hay.end(), hay.begin(), lower);
  for (const std::string& type : types) {
    std::string needle = type;
    std::transform(needle.begin(), needle.end(), needle.begin(), lower);
    if (hay.find(needle) != std::string::npos) return true;
  }
  return false;
}

}  // namespace drover::core
