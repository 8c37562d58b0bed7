#include "worker/resources/nvml.h"

#include <dlfcn.h>

#include <utility>

namespace drover::worker {
namespace {

// The subset of the public NVML C API that Drover calls, declared from
// NVIDIA's documentation (nvml.h is not needed at build time).
using nvmlReturn_t = int;
using nvmlDevice_t = void*;
constexpr nvmlReturn_t NVML_SUCCESS = 0;
constexpr nvmlReturn_t NVML_ERROR_NOT_SUPPORTED = 3;
constexpr nvmlReturn_t NVML_ERROR_TIMEOUT = 10;
constexpr nvmlReturn_t NVML_ERROR_GPU_IS_LOST = 15;
constexpr unsigned long long kXidCriticalError = 0x8;  // NOLINT(runtime/int): nvmlEventType
using nvmlEventSet_t = void*;

struct nvmlEventData_t {
  nvmlDevice_t device;
  unsigned long long eventType;  // NOLINT(runtime/int)
  unsigned long long eventData;  // NOLINT(runtime/int): the Xid
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};
constexpr unsigned int kNameBufferSize = 96;  // NVML_DEVICE_NAME_V2_BUFFER_SIZE
constexpr unsigned int kUuidBufferSize = 96;  // >= NVML_DEVICE_UUID_V2_BUFFER_SIZE (96)

struct nvmlMemory_t {
  unsigned long long total;  // NOLINT(runtime/int): the C ABI type
  unsigned long long free;   // NOLINT(runtime/int)
  unsigned long long used;   // NOLINT(runtime/int)
};

struct nvmlUtilization_t {
  unsigned int gpu;     // percent of time a kernel ran over the last sample period
  unsigned int memory;  // percent of time device memory was read or written
};

}  // namespace

struct NvmlGpuSource::Api {
  nvmlReturn_t (*Init)();
  nvmlReturn_t (*Shutdown)();
  nvmlReturn_t (*GetCount)(unsigned int*);
  nvmlReturn_t (*GetHandleByIndex)(unsigned int, nvmlDevice_t*);
  nvmlReturn_t (*GetName)(nvmlDevice_t, char*, unsigned int);
  nvmlReturn_t (*GetUuid)(nvmlDevice_t, char*, unsigned int);
  nvmlReturn_t (*GetMemoryInfo)(nvmlDevice_t, nvmlMemory_t*);
  nvmlReturn_t (*GetUtilizationRates)(nvmlDevice_t, nvmlUtilization_t*);
  const char* (*ErrorString)(nvmlReturn_t);
  // Health's, each optional (null: that check is skipped).
  nvmlReturn_t (*GetTotalEccErrors)(nvmlDevice_t, int, int, unsigned long long*);  // NOLINT
  nvmlReturn_t (*GetRetiredPagesPending)(nvmlDevice_t, int*);
  nvmlReturn_t (*GetRemappedRows)(nvmlDevice_t, unsigned int*, unsigned int*, unsigned int*,
                                  unsigned int*);
  nvmlReturn_t (*EventSetCreate)(nvmlEventSet_t*);
  nvmlReturn_t (*RegisterEvents)(nvmlDevice_t, unsigned long long, nvmlEventSet_t);  // NOLINT
  nvmlReturn_t (*EventSetWait)(nvmlEventSet_t, nvmlEventData_t*, unsigned int);
  nvmlReturn_t (*EventSetFree)(nvmlEventSet_t);

  std::string Error(const char* call, nvmlReturn_t rc) const {
    const char* text = ErrorString ? ErrorString(rc) : nullptr;
    return std::string(call) + " failed: " + (text ? text : "error") + " (" + std::to_string(rc) +
           ")";
  }
};

namespace {

template <typename Fn>
bool Resolve(void* library, const char* symbol, Fn* out, std::string* missing) {
  *out = reinterpret_cast<Fn>(dlsym(library, symbol));
  if (*out == nullptr && missing->empty()) *missing = symbol;
  return *out != nullptr;
}

}  // namespace

Result<std::unique_ptr<NvmlGpuSource>> NvmlGpuSource::Open(const std::string& library) {
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    return NotFound("cannot load " + library + ": " + (err ? err : "unknown error"));
  }
  auto api = std::make_unique<Api>();
  std::string missing;
  Resolve(handle, "nvmlInit_v2", &api->Init, &missing);
  Resolve(handle, "nvmlShutdown", &api->Shutdown, &missing);
  Resolve(handle, "nvmlDeviceGetCount_v2", &api->GetCount, &missing);
  Resolve(handle, "nvmlDeviceGetHandleByIndex_v2", &api->GetHandleByIndex, &missing);
  Resolve(handle, "nvmlDeviceGetName", &api->GetName, &missing);
  Resolve(handle, "nvmlDeviceGetUUID", &api->GetUuid, &missing);
  Resolve(handle, "nvmlDeviceGetMemoryInfo", &api->GetMemoryInfo, &missing);
  Resolve(handle, "nvmlDeviceGetUtilizationRates", &api->GetUtilizationRates, &missing);
  Resolve(handle, "nvmlErrorString", &api->ErrorString, &missing);
  std::string optional;  // a missing one skips its check
  Resolve(handle, "nvmlDeviceGetTotalEccErrors", &api->GetTotalEccErrors, &optional);
  Resolve(handle, "nvmlDeviceGetRetiredPagesPendingStatus", &api->GetRetiredPagesPending,
          &optional);
  Resolve(handle, "nvmlDeviceGetRemappedRows", &api->GetRemappedRows, &optional);
  Resolve(handle, "nvmlEventSetCreate", &api->EventSetCreate, &optional);
  Resolve(handle, "nvmlDeviceRegisterEvents", &api->RegisterEvents, &optional);
  Resolve(handle, "nvmlEventSetWait_v2", &api->EventSetWait, &optional);
  Resolve(handle, "nvmlEventSetFree", &api->EventSetFree, &optional);
  if (!missing.empty()) {
    dlclose(handle);
    return FailedPrecondition(library + " lacks the symbol " + missing +
                              " (driver too old or not NVML)");
  }
  if (nvmlReturn_t rc = api->Init(); rc != NVML_SUCCESS) {
    std::string error = api->Error("nvmlInit_v2", rc);
    dlclose(handle);
    return FailedPrecondition(error);
  }
  // From here the destructor shuts NVML down and unloads the library.
  std::unique_ptr<NvmlGpuSource> source(new NvmlGpuSource(handle, std::move(api)));
  const Api& a = *source->api_;
  unsigned int count = 0;
  if (nvmlReturn_t rc = a.GetCount(&count); rc != NVML_SUCCESS) {
    return FailedPrecondition(a.Error("nvmlDeviceGetCount_v2", rc));
  }
  for (unsigned int i = 0; i < count; ++i) {
    nvmlDevice_t device = nullptr;
    if (nvmlReturn_t rc = a.GetHandleByIndex(i, &device); rc != NVML_SUCCESS) {
      return FailedPrecondition(a.Error("nvmlDeviceGetHandleByIndex_v2", rc) + " for GPU " +
                                std::to_string(i));
    }
    source->devices_.push_back(device);
  }
  return source;
}

NvmlGpuSource::NvmlGpuSource(void* library, std::unique_ptr<Api> api)
    : library_(library), api_(std::move(api)) {}

NvmlGpuSource::~NvmlGpuSource() {
  if (events_ != nullptr && api_->EventSetFree != nullptr) api_->EventSetFree(events_);
  api_->Shutdown();
  dlclose(library_);
}

Result<std::vector<GpuInfo>> NvmlGpuSource::List() {
  std::vector<GpuInfo> gpus;
  for (size_t i = 0; i < devices_.size(); ++i) {
    const std::string where = " for GPU " + std::to_string(i);
    char name[kNameBufferSize] = {};
    char uuid[kUuidBufferSize] = {};
    nvmlMemory_t memory = {};
    if (nvmlReturn_t rc = api_->GetName(devices_[i], name, sizeof(name)); rc != NVML_SUCCESS) {
      return Unavailable(api_->Error("nvmlDeviceGetName", rc) + where);
    }
    if (nvmlReturn_t rc = api_->GetUuid(devices_[i], uuid, sizeof(uuid)); rc != NVML_SUCCESS) {
      return Unavailable(api_->Error("nvmlDeviceGetUUID", rc) + where);
    }
    if (nvmlReturn_t rc = api_->GetMemoryInfo(devices_[i], &memory); rc != NVML_SUCCESS) {
      return Unavailable(api_->Error("nvmlDeviceGetMemoryInfo", rc) + where);
    }
    name[sizeof(name) - 1] = '\0';
    uuid[sizeof(uuid) - 1] = '\0';
    gpus.push_back(GpuInfo{static_cast<int>(i), uuid, name, memory.total});
  }
  return gpus;
}

Result<std::vector<GpuSample>> NvmlGpuSource::Sample() {
  std::vector<GpuSample> samples;
  for (size_t i = 0; i < devices_.size(); ++i) {
    GpuSample sample{static_cast<int>(i), std::nullopt, std::nullopt};
    nvmlUtilization_t util = {};
    nvmlReturn_t rc = api_->GetUtilizationRates(devices_[i], &util);
    if (rc == NVML_SUCCESS) {
      sample.utilization_percent = static_cast<int>(util.gpu);
    } else if (rc != NVML_ERROR_NOT_SUPPORTED) {
      return Unavailable(api_->Error("nvmlDeviceGetUtilizationRates", rc) + " for GPU " +
                         std::to_string(i));
    }
    nvmlMemory_t memory = {};
    rc = api_->GetMemoryInfo(devices_[i], &memory);
    if (rc == NVML_SUCCESS) {
      sample.memory_used_bytes = memory.used;
    } else if (rc != NVML_ERROR_NOT_SUPPORTED) {
      return Unavailable(api_->Error("nvmlDeviceGetMemoryInfo", rc) + " for GPU " +
                         std::to_string(i));
    }
    samples.push_back(sample);
  }
  return samples;
}

std::map<int, std::string> NvmlGpuSource::Health() {
  const Api& a = *api_;
  if (!events_tried_) {
    events_tried_ = true;
    if (a.EventSetCreate != nullptr && a.RegisterEvents != nullptr && a.EventSetWait != nullptr &&
        a.EventSetCreate(&events_) == NVML_SUCCESS) {
      for (void* device : devices_) a.RegisterEvents(device, kXidCriticalError, events_);
    } else {
      events_ = nullptr;
    }
  }
  // Xid events since the last look: each marks its GPU for good.
  for (int drained = 0; events_ != nullptr && drained < 1024; ++drained) {
    nvmlEventData_t data = {};
    const nvmlReturn_t rc = a.EventSetWait(events_, &data, 0);
    if (rc == NVML_ERROR_TIMEOUT || rc != NVML_SUCCESS) break;  // a timeout: none waiting
    for (size_t i = 0; i < devices_.size(); ++i) {
      if (devices_[i] == data.device && (data.eventType & kXidCriticalError) != 0) {
        xids_[static_cast<int>(i)] = "Xid " + std::to_string(data.eventData) + " (critical)";
      }
    }
  }
  std::map<int, std::string> sick = xids_;
  for (size_t i = 0; i < devices_.size(); ++i) {
    const int index = static_cast<int>(i);
    if (sick.count(index) > 0) continue;
    auto lost = [&](nvmlReturn_t rc) {
      if (rc == NVML_ERROR_GPU_IS_LOST) sick[index] = "fallen off the bus (GPU is lost)";
      return rc == NVML_ERROR_GPU_IS_LOST;
    };
    if (a.GetTotalEccErrors != nullptr) {
      unsigned long long errors = 0;  // NOLINT(runtime/int)
      // NVML_MEMORY_ERROR_TYPE_UNCORRECTED (1), NVML_VOLATILE_ECC (0).
      nvmlReturn_t rc = a.GetTotalEccErrors(devices_[i], 1, 0, &errors);
      if (lost(rc)) continue;
      if (rc == NVML_SUCCESS && errors > 0) {
        sick[index] = std::to_string(errors) + " uncorrectable ECC error" + (errors == 1 ? "" : "s");
        continue;
      }
    }
    if (a.GetRetiredPagesPending != nullptr) {
      int pending = 0;
      nvmlReturn_t rc = a.GetRetiredPagesPending(devices_[i], &pending);
      if (lost(rc)) continue;
      if (rc == NVML_SUCCESS && pending != 0) {
        sick[index] = "retired pages pending (the GPU needs a reset)";
        continue;
      }
    }
    if (a.GetRemappedRows != nullptr) {
      unsigned int corrected = 0, uncorrected = 0, pending = 0, failed = 0;
      nvmlReturn_t rc = a.GetRemappedRows(devices_[i], &corrected, &uncorrected, &pending, &failed);
      if (lost(rc)) continue;
      if (rc == NVML_SUCCESS && failed != 0) {
        sick[index] = "a row remapping failed";
      } else if (rc == NVML_SUCCESS && pending != 0) {
        sick[index] = "row remapping pending (the GPU needs a reset)";
      }
    }
  }
  return sick;
}

}  // namespace drover::worker
