// Resources: what a task asks for and what a worker offers.
//
// A ResourceRequest is the shape of one task's needs (DESIGN.md section 2):
// cpus in milli-cpus, memory in bytes, GPUs in hundredths (25 = a quarter of
// one GPU; 100, 200, ... = whole GPUs), GPU memory per GPU, accepted GPU
// models, custom named counters and label constraints. Two requests that
// compare equal form one resource class and share one queue.
//
// WorkerResources is what a worker reported when it joined: concrete CPU core
// ids, memory, GPUs (index, UUID, model, memory), counters and labels.
//
// Thread safety: plain values.
#ifndef DROVER_CORE_RESOURCES_H_
#define DROVER_CORE_RESOURCES_H_

#include <compare>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/time.h"
#include "core/small_vector.h"

namespace drover::core {

// Hundredths of a GPU that make one whole GPU.
inline constexpr int64_t kWholeGpu = 100;

struct ResourceRequest {
  int64_t cpus_milli = 1000;   // 0 allowed: the task gets no core of its own
  uint64_t mem_bytes = 0;      // 0 = no memory reservation and no limit
  int64_t gpus = 0;            // hundredths; < 100 is a share of one GPU,
                               // otherwise a multiple of 100 (whole GPUs)
  uint64_t gpu_mem_bytes = 0;  // minimum memory per GPU; for a share, the
                               // amount of that GPU's memory it reserves
  // Accepted GPU models; empty accepts any. A model matches when it occurs,
  // case-insensitively, in the GPU's model name ("A100" matches
  // "NVIDIA A100-SXM4-80GB").
  std::vector<std::string> gpu_types;
  std::map<std::string, int64_t> counters;     // e.g. {"licenses", 2}
  std::map<std::string, std::string> labels;   // worker label must equal
  // `network = "none"`: the task runs in a network namespace of its own,
  // with only loopback, so only a worker that can make one
  // (WorkerResources::private_network) is a place for it.
  bool private_network = false;
  // `disk`: the most its directory may hold, in bytes (0: no limit). It is
  // placed only where the work directory has that much free
  // (WorkerResources::disk_free_bytes): a cap per task and a check at
  // placement, not a reservation.
  uint64_t disk_bytes = 0;
  // It runs in a container image (TaskGroupSpec::image): only a worker
  // with a container runtime (WorkerResources::container_runtime) is a
  // place for it, and with GPUs one that can hand a container only its
  // own GPUs (WorkerResources::container_gpus).
  bool container = false;

  friend auto operator<=>(const ResourceRequest&, const ResourceRequest&) = default;

  // Number of distinct core ids this request is given: ceil(cpus / 1000).
  uint32_t CoreCount() const { return static_cast<uint32_t>((cpus_milli + 999) / 1000); }
  // Number of GPUs touched: whole count, or 1 for a share, or 0.
  uint32_t GpuCount() const {
    return gpus == 0 ? 0 : (gpus < kWholeGpu ? 1 : static_cast<uint32_t>(gpus / kWholeGpu));
  }
  bool IsGpuShare() const { return gpus > 0 && gpus < kWholeGpu; }
  // Below one CPU: a share of one core, which other shares may use too (the
  // CPU quota enforces each share).
  bool IsCoreShare() const { return cpus_milli > 0 && cpus_milli < 1000; }

  // Checks the numbers are in range (no negatives, whole GPUs above one,
  // counters positive). Errors say which field is wrong.
  Status Validate() const;
  // "cpus=2 mem=4 GiB gpus=0.25 gpu_mem=8 GiB gpu_type=A100 licenses=1 os=linux
  // network=none disk=20 GiB", omitting fields left at their defaults except
  // cpus.
  std::string ToString() const;
};

struct GpuDevice {
  uint32_t index = 0;  // the index CUDA_VISIBLE_DEVICES uses on that worker
  std::string uuid;
  std::string model;   // e.g. "NVIDIA A100-SXM4-80GB"
  uint64_t memory_bytes = 0;

  friend bool operator==(const GpuDevice&, const GpuDevice&) = default;
};

// Sanity bounds on what one worker may offer (WorkerResources::Validate).
// Well above today's largest machines (a few hundred threads, 8-16 GPUs,
// some TiB of memory), far below what a forged offer would claim.
inline constexpr size_t kMaxWorkerCores = 4096;
inline constexpr uint32_t kMaxWorkerCoreId = 65536;
inline constexpr uint64_t kMaxWorkerMemBytes = 64ull << 40;  // 64 TiB
inline constexpr size_t kMaxWorkerGpus = 64;
inline constexpr uint32_t kMaxWorkerGpuIndex = 1024;
inline constexpr uint64_t kMaxGpuMemBytes = 1ull << 40;  // 1 TiB per GPU
inline constexpr int64_t kMaxWorkerCounter = 1'000'000'000;

struct WorkerResources {
  std::string name;                    // host name, for people
  std::vector<uint32_t> cpu_cores;     // concrete core ids, distinct
  uint64_t mem_bytes = 0;
  std::vector<GpuDevice> gpus;         // distinct indices
  std::map<std::string, int64_t> counters;
  std::map<std::string, std::string> labels;
  // When the worker leaves (the end of a Slurm allocation, `drover worker
  // --lifetime`): only a task with a timeout that ends by then is placed
  // there. None: it stays.
  std::optional<Time> ends_at;
  // It can give a task a network namespace of its own (it may create
  // them: root, or CAP_SYS_ADMIN), for `network = "none"`.
  bool private_network = false;
  // Free space of its work directory's file system, as it last said (at
  // join, then with each heartbeat); 0: unknown (a worker that predates
  // it), where no task with `disk` is placed.
  uint64_t disk_free_bytes = 0;
  // The container runtime it found at start, for tasks with an `image`
  // ("podman 4.3.1 (runc)"); empty: none, no such task is placed there.
  std::string container_runtime;
  // It can give a container only the task's own GPUs (a CDI spec of the
  // NVIDIA container toolkit is installed); without it no task with an
  // image and GPUs is placed there.
  bool container_gpus = false;

  friend bool operator==(const WorkerResources&, const WorkerResources&) = default;

  // A task with `timeout` (zero: none) started at `from` ends before this
  // worker leaves: always when it has no end, never without a timeout.
  bool EndsInTime(Duration timeout, Time from) const {
    return !ends_at || (timeout > Duration::zero() && from + timeout <= *ends_at);
  }

  // Rejects duplicate core ids or GPU indices, negative counters, and
  // offers no machine has (a worker's claims are checked, not trusted):
  // above kMaxWorkerCores cores or a core id from kMaxWorkerCoreId, above
  // kMaxWorkerMemBytes of memory, above kMaxWorkerGpus GPUs, a GPU index
  // from kMaxWorkerGpuIndex or above kMaxGpuMemBytes, a counter above
  // kMaxWorkerCounter. The message names the value and the bound.
  Status Validate() const;
};

// Utilisation a worker reports with each heartbeat. Used by `spread` as a
// tie-breaker and shown by queries.
struct GpuUtilization {
  uint32_t index = 0;
  uint32_t util_percent = 0;
  uint64_t mem_used_bytes = 0;
  friend bool operator==(const GpuUtilization&, const GpuUtilization&) = default;
};
struct WorkerUtilization {
  uint32_t cpu_percent = 0;  // 0..100 of the whole machine
  uint64_t mem_used_bytes = 0;
  std::vector<GpuUtilization> gpus;
  // Free space of its work directory's file system now (absent: not said).
  std::optional<uint64_t> disk_free_bytes;
  friend bool operator==(const WorkerUtilization&, const WorkerUtilization&) = default;
};

// A GPU (or a share of one) given to a task.
struct GpuGrant {
  uint32_t index = 0;
  int64_t share = kWholeGpu;  // hundredths
  uint64_t mem_bytes = 0;     // GPU memory reserved on it
  friend bool operator==(const GpuGrant&, const GpuGrant&) = default;
};

// The concrete resources of one task attempt, as lists that keep a few
// entries inline (see small_vector.h): core ids and GPU grants.
using CoreList = SmallVector<uint32_t, 4>;
using GpuGrantList = SmallVector<GpuGrant, 1>;

// True when `model` is accepted by `types` (see ResourceRequest::gpu_types).
bool GpuModelAccepted(const std::vector<std::string>& types, std::string_view model);

}  // namespace drover::core

#endif  // DROVER_CORE_RESOURCES_H_
