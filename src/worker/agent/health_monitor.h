// HealthMonitor: the worker's own checks of whether it should take work
// (docs/guide.md, "Unhealthy workers"). At start and then every interval,
// never two at once, on a thread of its own:
//   - the work directory's file system: read-only, or less free space
//     than the floor (`--min-free-disk`), is unhealthy;
//   - the health-check program (`--health-check`, run by `sh -c` as the
//     worker's account, in its own process group, with a timeout that
//     kills the group): a non-zero exit is unhealthy, with the first line
//     it wrote as the reason; a run past the timeout too;
//   - each offered GPU through NVML (NvmlGpuSource::Health: ECC, pending
//     retirement or remapping, critical Xid events, fallen off the bus): a
//     sick GPU is out of the offer, the others go on.
// The verdict goes to `report` on the worker's loop after every round; the
// state machine (HealthChecked) acts on changes.
//
// Threading: constructed and destroyed on the loop's thread; `report` is
// posted to the loop.
#ifndef DROVER_WORKER_AGENT_HEALTH_MONITOR_H_
#define DROVER_WORKER_AGENT_HEALTH_MONITOR_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/time.h"
#include "net/event_loop.h"

namespace drover::worker {

struct HealthOptions {
  std::string program;  // "" : none; run with `sh -c`
  Duration interval = Seconds(300);
  Duration timeout = Seconds(60);
  std::string workdir;          // its file system is checked
  uint64_t min_free_bytes = 0;  // 0: the smaller of 1 GiB and 1% of the file system
  std::string nvml_library;     // "": no GPU checks
  std::vector<int> gpus;        // the offered GPUs' indices; others are not reported
};

struct HealthVerdict {
  std::string unhealthy;                     // "": healthy
  std::string kind;                          // "disk" or "program" with `unhealthy`
  std::map<uint32_t, std::string> sick_gpus;  // offered GPU index -> why
};

// Why the file system holding `dir` makes a worker unhealthy: read-only,
// or fewer free bytes than `min_free_bytes` (0: the smaller of 1 GiB and
// 1% of its size); "" when it is fine or cannot be read.
std::string DiskTrouble(const std::string& dir, uint64_t min_free_bytes);

// The longest reason a health-check program's line gives (longer ones are
// cut, with "...").
inline constexpr size_t kMaxReasonBytes = 512;

// Why `program` (run with sh -c) says the worker is unhealthy; "" when it
// exits 0.
std::string ProgramTrouble(const std::string& program, Duration timeout);

class HealthMonitor {
 public:
  using Report = std::function<void(HealthVerdict verdict)>;
  HealthMonitor(HealthOptions options, net::EventLoop& loop, Report report);
  // Stops the thread; a program running is let finish or time out first.
  ~HealthMonitor();
  HealthMonitor(const HealthMonitor&) = delete;
  HealthMonitor& operator=(const HealthMonitor&) = delete;

 private:
  void Loop();

  HealthOptions options_;
  net::EventLoop& loop_;
  Report report_;
  // False once destroyed: a report posted before is dropped (loop thread).
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace drover::worker

#endif  // DROVER_WORKER_AGENT_HEALTH_MONITOR_H_
