#include "store/lease.h"

namespace drover::store {

LeaseKey GpuLeaseKey(WorkerId worker, int gpu_index) {
  return "lease:" + std::to_string(worker) + ":gpu:" + std::to_string(gpu_index);
}

LeaseKey SlotLeaseKey(WorkerId worker, const TaskId& task) {
  return "lease:" + std::to_string(worker) + ":slot:" + task.ToString();
}

LeaseKey HeartbeatKey(WorkerId worker) { return "worker:" + std::to_string(worker) + ":hb"; }

const char* FreeReasonName(FreeReason reason) {
  switch (reason) {
    case FreeReason::kReleased:
      return "released";
    case FreeReason::kExpired:
      return "expired";
  }
  return "unknown";
}

}  // namespace drover::store
