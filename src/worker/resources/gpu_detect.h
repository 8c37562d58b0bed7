// Finding the GPUs: NVML first, nvidia-smi when NVML is absent or broken,
// else none.
//
//   NVML library loads and initialises  -> source "nvml"
//   otherwise (reason kept in notes)    -> nvidia-smi on PATH
//     not installed / exits non-zero    -> zero GPUs, source "none"
//     prints lines we cannot read, or   -> error: we would otherwise hide
//     hangs past the timeout               GPUs the machine has
//
// No GPU is never an error. The chosen source stays open in the result so
// the worker can sample utilization every heartbeat.
//
// Thread safety: DetectGpus may run on any thread; the returned source is
// used by one thread at a time.
#ifndef DROVER_WORKER_RESOURCES_GPU_DETECT_H_
#define DROVER_WORKER_RESOURCES_GPU_DETECT_H_

#include <memory>
#include <string>
#include <vector>

#include "common/time.h"
#include "worker/resources/gpu.h"

namespace drover::worker {

struct GpuDetectOptions {
  // Passed to dlopen; a bare name is searched on LD_LIBRARY_PATH etc.
  std::string nvml_library = "libnvidia-ml.so.1";
  // Looked up on PATH unless it contains '/'. Empty: do not try nvidia-smi.
  std::string nvidia_smi = "nvidia-smi";
  Duration nvidia_smi_timeout = Seconds(10);
};

struct GpuDetection {
  std::vector<GpuInfo> gpus;
  std::string source = "none";         // "nvml", "nvidia-smi" or "none"
  std::vector<std::string> notes;      // why a source was passed over, for the log
  std::unique_ptr<GpuSource> sampler;  // null when source is "none"
};

// Errors (only when GPUs may exist but cannot be described): the
// nvidia-smi DataLoss / DeadlineExceeded / ResourceExhausted / Internal
// errors, prefixed with what was tried and a hint about --gpus.
Result<GpuDetection> DetectGpus(const GpuDetectOptions& options);

}  // namespace drover::worker

#endif  // DROVER_WORKER_RESOURCES_GPU_DETECT_H_
