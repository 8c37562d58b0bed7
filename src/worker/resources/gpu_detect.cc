#include "worker/resources/gpu_detect.h"

#include "worker/resources/nvidia_smi.h"
#include "worker/resources/nvml.h"

namespace drover::worker {

Result<GpuDetection> DetectGpus(const GpuDetectOptions& options) {
  GpuDetection found;
  Result<std::unique_ptr<NvmlGpuSource>> nvml = NvmlGpuSource::Open(options.nvml_library);
  if (nvml.ok()) {
    Result<std::vector<GpuInfo>> gpus = (*nvml)->List();
    if (gpus.ok() && gpus->empty()) {
      found.notes.push_back("NVML: no GPU");
      return found;
    }
    if (gpus.ok()) {
      found.gpus = std::move(*gpus);
      found.source = "nvml";
      found.sampler = std::move(*nvml);
      return found;
    }
    found.notes.push_back("NVML: " + gpus.status().message());
  } else {
    found.notes.push_back("NVML: " + nvml.status().message());
  }

  if (options.nvidia_smi.empty()) return found;
  auto smi = std::make_unique<NvidiaSmiGpuSource>(options.nvidia_smi, options.nvidia_smi_timeout);
  Result<std::vector<GpuInfo>> gpus = smi->List();
  if (!gpus.ok()) {
    StatusCode code = gpus.status().code();
    if (code == StatusCode::kNotFound || code == StatusCode::kFailedPrecondition) {
      found.notes.push_back("nvidia-smi: " + gpus.status().message());
      return found;
    }
    return gpus.status().WithContext(
        "GPU detection (NVML unusable, then nvidia-smi failed; set GPUs by hand with "
        "--gpus/--gpu-type/--gpu-mem)");
  }
  if (gpus->empty()) {
    found.notes.push_back("nvidia-smi: no GPU");
    return found;
  }
  found.gpus = std::move(*gpus);
  found.source = "nvidia-smi";
  found.sampler = std::move(smi);
  return found;
}

}  // namespace drover::worker
