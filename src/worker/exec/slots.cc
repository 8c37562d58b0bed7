#include "worker/exec/slots.h"

#include <algorithm>
#include <string>
#include <utility>

#include "common/quantity.h"

namespace drover::worker {

Slots::Slots(SlotCapacity capacity) : capacity_(std::move(capacity)) {
  for (int g : capacity_.gpus) gpu_used_[g] = 0;
}

int64_t Slots::free_milli_cpus() const {
  return static_cast<int64_t>(capacity_.cores.size()) * 1000 - used_milli_;
}
uint64_t Slots::free_memory() const { return capacity_.memory_bytes - used_memory_; }

int64_t Slots::gpu_free(int index) const {
  auto it = gpu_used_.find(index);
  return it == gpu_used_.end() ? 0 : 100 - it->second;
}

bool Slots::core_free(int core) const {
  return std::count(capacity_.cores.begin(), capacity_.cores.end(), core) > 0 &&
         core_used_.count(core) == 0;
}

[[gnu::hot]] Status Slots::Admit(TaskId task, SlotRequest request) {
  if (bookings_.count(task) != 0) {
    return AlreadyExists("task " + task.ToString() + " is already admitted");
  }
  // Names seen twice are found by looking back: a request names a few
  // cores and GPUs, and this runs on the handoff's path (no allocation).
  const bool share = request.cores.size() == 1 && request.milli_cpus > 0 &&
                     request.milli_cpus < 1000;
  const int64_t per_core = share ? request.milli_cpus : 1000;
  for (auto c = request.cores.begin(); c != request.cores.end(); ++c) {
    const int core = *c;
    if (std::count(capacity_.cores.begin(), capacity_.cores.end(), core) == 0) {
      return InvalidArgument("core " + std::to_string(core) + " does not exist on this worker");
    }
    if (std::find(request.cores.begin(), c, core) != c) {
      return InvalidArgument("core " + std::to_string(core) + " is named twice");
    }
    if (auto it = core_used_.find(core); it != core_used_.end() && it->second + per_core > 1000) {
      return ResourceExhausted(
          "core " + std::to_string(core) + " is in use by task " + core_owner_[core].ToString() +
          (it->second < 1000 ? " and others (" + FormatCpus(it->second) + " of it booked)" : ""));
    }
  }
  for (auto share_it = request.gpus.begin(); share_it != request.gpus.end(); ++share_it) {
    const GpuShare& g = *share_it;
    auto it = gpu_used_.find(g.index);
    if (it == gpu_used_.end()) {
      return InvalidArgument("GPU " + std::to_string(g.index) + " does not exist on this worker");
    }
    if (g.hundredths < 1 || g.hundredths > 100) {
      return InvalidArgument("GPU share " + std::to_string(g.hundredths) +
                             "/100 is outside 1..100");
    }
    if (std::any_of(request.gpus.begin(), share_it,
                    [&](const GpuShare& before) { return before.index == g.index; })) {
      return InvalidArgument("GPU " + std::to_string(g.index) + " is named twice");
    }
    if (it->second + g.hundredths > 100) {
      return ResourceExhausted("GPU " + std::to_string(g.index) + " has " +
                               FormatGpus(100 - it->second) + " free, the task asks " +
                               FormatGpus(g.hundredths));
    }
  }
  if (request.milli_cpus > free_milli_cpus()) {
    return ResourceExhausted("not enough CPU: " + FormatCpus(free_milli_cpus()) +
                             " free, the task asks " + FormatCpus(request.milli_cpus));
  }
  if (request.memory_bytes > free_memory()) {
    return ResourceExhausted("not enough memory: " + FormatBytes(free_memory()) +
                             " free, the task asks " + FormatBytes(request.memory_bytes));
  }
  for (int core : request.cores) {
    core_owner_[core] = task;
    core_used_[core] += per_core;
  }
  for (const GpuShare& g : request.gpus) gpu_used_[g.index] += g.hundredths;
  used_milli_ += request.milli_cpus;
  used_memory_ += request.memory_bytes;
  bookings_[task] = std::move(request);
  return Status::Ok();
}

[[gnu::hot]] Status Slots::Release(TaskId task) {
  auto it = bookings_.find(task);
  if (it == bookings_.end()) return NotFound("task " + task.ToString() + " holds no slot");
  const SlotRequest& r = it->second;
  const bool share = r.cores.size() == 1 && r.milli_cpus > 0 && r.milli_cpus < 1000;
  for (int core : r.cores) {
    auto used = core_used_.find(core);
    if (used == core_used_.end()) continue;
    used->second -= share ? r.milli_cpus : 1000;
    if (used->second <= 0) {
      core_used_.erase(used);
      core_owner_.erase(core);
    }
  }
  for (const GpuShare& g : r.gpus) gpu_used_[g.index] -= g.hundredths;
  used_milli_ -= r.milli_cpus;
  used_memory_ -= r.memory_bytes;
  bookings_.erase(it);
  return Status::Ok();
}

}  // namespace drover::worker
