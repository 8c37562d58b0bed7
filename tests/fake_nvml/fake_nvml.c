/*
 * A stand-in for libnvidia-ml.so.1 so the worker's NVML path can be tested
 * on machines without a GPU. It exports the nine NVML entry points Drover
 * calls, with the same C signatures, and serves fixed devices.
 *
 * Controlled by environment variables, read on every nvmlInit_v2 (devices)
 * or call (utilization), so one test process can change them between runs:
 *   FAKE_NVML_DEVICES  "0", "2", "4" ... number of devices (default 2), or
 *                      "fail-init" to make nvmlInit_v2 fail with
 *                      NVML_ERROR_DRIVER_NOT_LOADED (9).
 *   FAKE_NVML_UTIL     gpu utilization % reported for every device
 *                      (default 10 * index + 5).
 *   FAKE_NVML_HEALTH_DIR  a directory whose files make device i sick, read
 *                      on every call: "i.ecc" (its number: uncorrectable
 *                      volatile ECC errors), "i.pending" (retired pages
 *                      pending), "i.remap-failed" (a row remapping failed),
 *                      "i.lost" (every health call returns
 *                      NVML_ERROR_GPU_IS_LOST), "i.xid" (its number: one
 *                      critical Xid event, delivered once by
 *                      nvmlEventSetWait_v2, which then removes the file).
 * nvmlInit_v2 and nvmlShutdown are counted, as NVML's are: one process may
 * hold two sources.
 * Devices: "NVIDIA A100-SXM4-80GB", UUID "GPU-fake-000i", 80 GiB, i GiB used.
 *
 * Built with -DFAKE_NVML_OMIT_UTILIZATION it lacks
 * nvmlDeviceGetUtilizationRates, to test a library with a missing symbol.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t;
typedef struct FakeDevice* nvmlDevice_t;
typedef struct {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_t;
typedef struct {
  unsigned int gpu;
  unsigned int memory;
} nvmlUtilization_t;

enum {
  kSuccess = 0,
  kUninitialized = 1,
  kInvalidArgument = 2,
  kInsufficientSize = 7,
  kDriverNotLoaded = 9,
  kMaxDevices = 16,
};

struct FakeDevice {
  unsigned int index;
};

static struct FakeDevice devices[kMaxDevices];
static unsigned int device_count;
static int initialized;  /* nvmlInit_v2 calls not yet shut down */

static const unsigned long long kGiB = 1024ULL * 1024ULL * 1024ULL;

nvmlReturn_t nvmlInit_v2(void) {
  const char* spec = getenv("FAKE_NVML_DEVICES");
  if (spec != NULL && strcmp(spec, "fail-init") == 0) return kDriverNotLoaded;
  int n = spec != NULL ? atoi(spec) : 2;
  if (n < 0) n = 0;
  if (n > kMaxDevices) n = kMaxDevices;
  for (int i = 0; i < n; ++i) devices[i].index = (unsigned int)i;
  device_count = (unsigned int)n;
  ++initialized;
  return kSuccess;
}

nvmlReturn_t nvmlShutdown(void) {
  if (!initialized) return kUninitialized;
  --initialized;
  return kSuccess;
}

const char* nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
    case kSuccess:
      return "Success";
    case kUninitialized:
      return "Uninitialized";
    case kInvalidArgument:
      return "Invalid Argument";
    case kInsufficientSize:
      return "Insufficient Size";
    case kDriverNotLoaded:
      return "Driver Not Loaded";
    default:
      return "Unknown Error";
  }
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  if (!initialized) return kUninitialized;
  if (count == NULL) return kInvalidArgument;
  *count = device_count;
  return kSuccess;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  if (!initialized) return kUninitialized;
  if (index >= device_count || device == NULL) return kInvalidArgument;
  *device = &devices[index];
  return kSuccess;
}

static int Valid(nvmlDevice_t device) {
  return initialized && device >= devices && device < devices + device_count;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  if (!Valid(device) || name == NULL) return kInvalidArgument;
  const char* text = "NVIDIA A100-SXM4-80GB";
  if (strlen(text) + 1 > length) return kInsufficientSize;
  strcpy(name, text);
  return kSuccess;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  if (!Valid(device) || uuid == NULL) return kInvalidArgument;
  char text[32];
  snprintf(text, sizeof(text), "GPU-fake-%04u", device->index);
  if (strlen(text) + 1 > length) return kInsufficientSize;
  strcpy(uuid, text);
  return kSuccess;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  if (!Valid(device) || memory == NULL) return kInvalidArgument;
  memory->total = 80 * kGiB;
  memory->used = device->index * kGiB;
  memory->free = memory->total - memory->used;
  return kSuccess;
}

#ifndef FAKE_NVML_OMIT_UTILIZATION
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t* util) {
  if (!Valid(device) || util == NULL) return kInvalidArgument;
  const char* spec = getenv("FAKE_NVML_UTIL");
  util->gpu = spec != NULL ? (unsigned int)atoi(spec) : 10 * device->index + 5;
  util->memory = 0;
  return kSuccess;
}
#endif

/* ---- health: FAKE_NVML_HEALTH_DIR ---- */

enum { kTimeout = 10, kGpuIsLost = 15, kXidCriticalError = 8 };

/* The path of device `index`'s health file `what`, or 0 without the dir. */
static int HealthFile(unsigned int index, const char* what, char* path, size_t size) {
  const char* dir = getenv("FAKE_NVML_HEALTH_DIR");
  if (dir == NULL) return 0;
  snprintf(path, size, "%s/%u.%s", dir, index, what);
  return 1;
}

/* The number in the file (1 for an empty one), or -1 when it is absent. */
static long long ReadHealth(unsigned int index, const char* what) {
  char path[512];
  if (!HealthFile(index, what, path, sizeof(path))) return -1;
  FILE* f = fopen(path, "r");
  if (f == NULL) return -1;
  long long n = 1;
  if (fscanf(f, "%lld", &n) != 1) n = 1;
  fclose(f);
  return n;
}

nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, int type, int counter,
                                         unsigned long long* count) {
  if (!Valid(device) || count == NULL || type != 1 || counter != 0) return kInvalidArgument;
  if (ReadHealth(device->index, "lost") >= 0) return kGpuIsLost;
  long long n = ReadHealth(device->index, "ecc");
  *count = n > 0 ? (unsigned long long)n : 0;
  return kSuccess;
}

nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t device, int* pending) {
  if (!Valid(device) || pending == NULL) return kInvalidArgument;
  if (ReadHealth(device->index, "lost") >= 0) return kGpuIsLost;
  *pending = ReadHealth(device->index, "pending") >= 0;
  return kSuccess;
}

nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int* corrected,
                                       unsigned int* uncorrected, unsigned int* pending,
                                       unsigned int* failed) {
  if (!Valid(device) || !corrected || !uncorrected || !pending || !failed) return kInvalidArgument;
  if (ReadHealth(device->index, "lost") >= 0) return kGpuIsLost;
  *corrected = *uncorrected = *pending = 0;
  *failed = ReadHealth(device->index, "remap-failed") >= 0;
  return kSuccess;
}

typedef struct {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlEventData_t;

static int event_set;  /* the one set handed out; its address is the handle */

nvmlReturn_t nvmlEventSetCreate(void** set) {
  if (!initialized || set == NULL) return kInvalidArgument;
  *set = &event_set;
  return kSuccess;
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long types, void* set) {
  if (!Valid(device) || set != &event_set || (types & kXidCriticalError) == 0) {
    return kInvalidArgument;
  }
  return kSuccess;
}

nvmlReturn_t nvmlEventSetWait_v2(void* set, nvmlEventData_t* data, unsigned int timeout_ms) {
  (void)timeout_ms;  /* nothing waits here: an event is there or not */
  if (set != &event_set || data == NULL) return kInvalidArgument;
  for (unsigned int i = 0; i < device_count; ++i) {
    long long xid = ReadHealth(i, "xid");
    if (xid < 0) continue;
    char path[512];
    HealthFile(i, "xid", path, sizeof(path));
    remove(path);
    memset(data, 0, sizeof(*data));
    data->device = &devices[i];
    data->eventType = kXidCriticalError;
    data->eventData = (unsigned long long)xid;
    return kSuccess;
  }
  return kTimeout;
}

nvmlReturn_t nvmlEventSetFree(void* set) { return set == &event_set ? kSuccess : kInvalidArgument; }
