// The jiffies of one cpu line of /proc/stat ("cpu  4705 356 584 3699 23 ..."
// or "cpu3 ..."), read the one way both the utilization sampler and the
// idle-desktop detector need them.
//
// Thread safety: a pure function.
#ifndef DROVER_COMMON_PROC_STAT_H_
#define DROVER_COMMON_PROC_STAT_H_

#include <cstdint>
#include <string_view>

namespace drover {

struct CpuStatJiffies {
  uint64_t busy = 0;   // everything but idle and iowait
  uint64_t total = 0;  // user .. steal (guest time is inside user already)
};

// Adds the fields after a cpu line's label (user nice system idle iowait
// irq softirq steal) to `sum`. Old kernels' lines end after iowait; false
// when a field before that is not a number.
bool AddCpuStatFields(std::string_view fields, CpuStatJiffies& sum);

}  // namespace drover

#endif  // DROVER_COMMON_PROC_STAT_H_
