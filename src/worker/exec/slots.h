// Slots: the worker's local admission accounting.
//
// The server assigns concrete resources (which cores, which GPU and what
// share of it); before starting a task the worker checks that assignment
// against what it has free, and refuses one that would double-book a core
// or a GPU or exceed its memory or CPU capacity. A refusal carries a reason
// for the server, which then reschedules the task (DESIGN.md section 5:
// defence in depth against double booking).
//
// Pure: no I/O, no clock. Threading: not synchronised; one owner thread.
#ifndef DROVER_WORKER_EXEC_SLOTS_H_
#define DROVER_WORKER_EXEC_SLOTS_H_

#include <cstdint>
#include <map>
#include <vector>

#include "common/ids.h"
#include "common/status.h"

namespace drover::worker {

struct SlotCapacity {
  std::vector<int> cores;     // core ids this worker offers
  uint64_t memory_bytes = 0;  // memory it offers to tasks
  std::vector<int> gpus;      // GPU indices, each worth 100 hundredths
};

struct GpuShare {
  int index = 0;
  int64_t hundredths = 100;  // 100 = the whole GPU
};

struct SlotRequest {
  int64_t milli_cpus = 0;  // counted against cores.size() * 1000
  // Pinned cores, held exclusively; below one CPU (milli_cpus < 1000, one
  // core) a share of that core, which other shares may hold too up to one
  // CPU in all.
  std::vector<int> cores;
  uint64_t memory_bytes = 0;
  std::vector<GpuShare> gpus;
};

class Slots {
 public:
  explicit Slots(SlotCapacity capacity);

  // Books `request` for `task`. Nothing is booked on failure:
  //   AlreadyExists      the task already holds a booking;
  //   InvalidArgument    a core or GPU this worker does not have, a share
  //                      outside 1..100, a core or GPU named twice;
  //   ResourceExhausted  a core in use, not enough GPU share, memory or CPU
  //                      (the message names what and by how much).
  Status Admit(TaskId task, SlotRequest request);

  // Frees the task's booking. NotFound if it holds none.
  Status Release(TaskId task);

  int64_t free_milli_cpus() const;
  uint64_t free_memory() const;
  // Hundredths of GPU `index` not booked; 0 for an unknown index.
  int64_t gpu_free(int index) const;
  // No task holds any of the core (whole or a share).
  bool core_free(int core) const;
  size_t admitted() const { return bookings_.size(); }

 private:
  SlotCapacity capacity_;
  std::map<int, TaskId> core_owner_;  // the last task booked on each core
  std::map<int, int64_t> core_used_;  // milli-cpus booked on each core (1000: whole)
  std::map<int, int64_t> gpu_used_;
  int64_t used_milli_ = 0;
  uint64_t used_memory_ = 0;
  std::map<TaskId, SlotRequest> bookings_;
};

}  // namespace drover::worker

#endif  // DROVER_WORKER_EXEC_SLOTS_H_
