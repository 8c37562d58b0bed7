// NvmlGpuSource: GPUs through NVIDIA's management library, loaded at run time
// with dlopen so that Drover builds and runs on machines without a driver.
//
// Open() loads the library, resolves the nine entry points Drover uses,
// initialises NVML and keeps the device handles, so Sample() is a handful of
// cheap library calls per GPU (no process, no re-initialisation). The
// destructor shuts NVML down and unloads the library.
//
// Thread safety: one thread at a time per object.
#ifndef DROVER_WORKER_RESOURCES_NVML_H_
#define DROVER_WORKER_RESOURCES_NVML_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "worker/resources/gpu.h"

namespace drover::worker {

inline constexpr char kNvmlLibrary[] = "libnvidia-ml.so.1";

class NvmlGpuSource final : public GpuSource {
 public:
  // Loads `library`: a bare file name goes through the dynamic loader's
  // search (LD_LIBRARY_PATH, ld.so.cache), a path is used as is.
  // Errors, all with the reason in the message:
  //   NotFound            the library cannot be loaded (no driver installed);
  //   FailedPrecondition  an entry point is missing, or nvmlInit_v2 or the
  //                       device count/handle calls fail (driver not loaded,
  //                       no permission, ...).
  static Result<std::unique_ptr<NvmlGpuSource>> Open(const std::string& library = kNvmlLibrary);

  ~NvmlGpuSource() override;

  std::string_view name() const override { return "nvml"; }
  // Name, UUID and total memory of each device. Unavailable names the index
  // and the NVML error.
  Result<std::vector<GpuInfo>> List() override;
  // Utilization (gpu %) and memory used of each device; a device that does
  // not support utilization reports nullopt. Other errors are Unavailable.
  Result<std::vector<GpuSample>> Sample() override;

  // The GPUs that are sick, by index, with why: uncorrectable ECC errors
  // (the volatile count), retired pages or remapped rows pending (the GPU
  // needs a reset), a row remapping that failed, a critical Xid event
  // (nvmlEventTypeXidCriticalError) since the first call (kept: a GPU that
  // threw one stays sick for this source's life), or one fallen off the
  // bus (NVML_ERROR_GPU_IS_LOST from any of these). A check the library
  // lacks, or a device does not support, is skipped.
  std::map<int, std::string> Health();

 private:
  struct Api;  // the resolved entry points; defined in nvml.cc

  NvmlGpuSource(void* library, std::unique_ptr<Api> api);

  void* library_;
  std::unique_ptr<Api> api_;
  std::vector<void*> devices_;  // nvmlDevice_t handles, valid until shutdown
  void* events_ = nullptr;      // Health's Xid event set; null: none (yet)
  bool events_tried_ = false;
  std::map<int, std::string> xids_;  // GPUs that threw a critical Xid
};

}  // namespace drover::worker

#endif  // DROVER_WORKER_RESOURCES_NVML_H_
