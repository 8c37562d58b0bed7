// WorkerState: the concrete free resources of one worker.
//
// Tracks which core ids are free, how much memory, each GPU's used share and
// used GPU memory, and the custom counters. Allocate hands out concrete ids:
// ceil(cpus) distinct cores (lowest ids first) held whole, or for a request
// below one CPU a share of one core (a core already shared, the fullest that
// has room, else a free one), with the shares on one core never above one
// CPU; whole GPUs only when nobody
// uses them, shares only on GPUs not held whole, with the shares on one GPU
// never above 1.0 and the GPU memory reserved on it never above its memory.
// Free gives exactly those ids back. No id is ever handed out twice.
//
// Thread safety: not synchronised; owned by the scheduler.
#ifndef DROVER_CORE_WORKER_STATE_H_
#define DROVER_CORE_WORKER_STATE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/ids.h"
#include "core/resources.h"

namespace drover::core {

// The concrete resources given to one task.
struct Allocation {
  CoreList cores;
  GpuGrantList gpus;
  uint64_t mem_bytes = 0;
};

// Resource dimensions, as bits, for reservations and explanations.
enum ResourceDim : uint32_t {
  kDimCores = 1,
  kDimMem = 2,
  kDimGpus = 4,
  kDimCounters = 8,
};

class WorkerState {
 public:
  WorkerState(WorkerId id, WorkerResources resources);

  WorkerId id() const { return id_; }
  const WorkerResources& resources() const { return resources_; }

  // True when the worker, completely empty, could run the request: labels
  // match, enough cores, memory, counters and matching GPUs with enough
  // memory. A request failing this never fits here.
  bool CanEverFit(const ResourceRequest& request) const;
  // True when the request fits the free resources now.
  bool Fits(const ResourceRequest& request, bool prefer_full_gpus) const;
  // Takes concrete resources for the request; false (and nothing taken) when
  // it does not fit.
  bool Allocate(const ResourceRequest& request, bool prefer_full_gpus, Allocation& out);
  // Takes exactly `alloc` (a restored task coming back); false and nothing
  // taken when any part of it is not free.
  bool AllocateExact(const ResourceRequest& request, const Allocation& alloc);
  // Gives back what Allocate/AllocateExact took for this request.
  void Free(const ResourceRequest& request, const Allocation& alloc);

  // The dimensions in which the free resources fall short of the request now
  // (0 when it fits). Labels and GPU types are not dimensions: they never
  // change, see CanEverFit.
  uint32_t Shortfall(const ResourceRequest& request) const;

  uint32_t free_core_count() const { return static_cast<uint32_t>(free_cores_.size()); }
  // Ascending.
  std::vector<uint32_t> free_cores() const;
  uint64_t free_mem() const { return free_mem_; }
  uint32_t free_whole_gpus() const { return free_whole_gpus_; }
  // Hundredths free on GPU i (resources().gpus order); 0 when held whole.
  int64_t gpu_free_share(size_t i) const;
  uint64_t gpu_free_mem(size_t i) const;
  const std::map<std::string, int64_t>& free_counters() const { return free_counters_; }
  // Largest number of whole GPUs free that match the request's type and memory.
  uint32_t MatchingFreeWholeGpus(const ResourceRequest& request) const;
  // Takes the GPU of NVML index `index` out of the offer (its worker found
  // it sick) or puts it back: nothing new is placed on a GPU that is out;
  // what holds it keeps it. An index not offered is ignored.
  void SetGpuOut(uint32_t index, bool out);
  bool gpu_out(size_t i) const { return gpus_[i].out; }
  // A request's `disk` fits the work directory's free space as the worker
  // last said (none asked: always). Part of Fits, not of CanEverFit: free
  // space comes and goes, and a task already running there stays.
  bool DiskFits(const ResourceRequest& request) const {
    return request.disk_bytes == 0 || request.disk_bytes <= resources_.disk_free_bytes;
  }
  // A request for a container image finds a runtime here, and with GPUs a
  // way to hand the container only those (none asked: always).
  bool ContainerFits(const ResourceRequest& request) const {
    return !request.container || (!resources_.container_runtime.empty() &&
                                  (request.gpus == 0 || resources_.container_gpus));
  }
  // What its heartbeat said of the free space; true when it grew (a task
  // that waited for room may fit now).
  bool SetDiskFree(uint64_t bytes) {
    const bool grew = bytes > resources_.disk_free_bytes;
    resources_.disk_free_bytes = bytes;
    return grew;
  }

 private:
  struct Gpu {
    int64_t share_used = 0;  // hundredths
    uint64_t mem_used = 0;
    bool whole = false;      // held whole by one task
    bool out = false;        // SetGpuOut: not offered (nor counted free)
  };
  bool LabelsMatch(const ResourceRequest& request) const;
  bool GpuMatches(size_t i, const ResourceRequest& request) const;
  // Index of the GPU a share goes to, or -1.
  int PickShareGpu(const ResourceRequest& request, bool prefer_full) const;
  bool CountersFit(const ResourceRequest& request) const;
  bool CoresFit(const ResourceRequest& request) const;
  // The shared core a core share goes to (the fullest with room), or -1.
  int64_t PickShareCore(const ResourceRequest& request) const;

  WorkerId id_;
  WorkerResources resources_;
  std::vector<uint32_t> free_cores_;  // descending, so back() is the lowest id
  // Cores given out in shares (not in free_cores_) -> milli-cpus used.
  std::map<uint32_t, int64_t> shared_cores_;
  uint64_t free_mem_ = 0;
  std::vector<Gpu> gpus_;
  uint32_t free_whole_gpus_ = 0;
  std::map<std::string, int64_t> free_counters_;
};

}  // namespace drover::core

#endif  // DROVER_CORE_WORKER_STATE_H_
