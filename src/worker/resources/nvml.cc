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

}  // namespace drover::worker
