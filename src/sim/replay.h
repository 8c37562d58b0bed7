// The replay behind Simulate (simulator.h): a trace played through the real
// scheduling core on a simulated clock, with the workers' books mirrored
// and every start, finish, vacate and owner visit played as the core asks.
// Internal to src/sim: replay.cc plays the tasks and accounts, and
// replay_owners.cc plays the workstation owners (suspend, vacate).
//
// Thread safety: none; one Replay runs on one thread.
#ifndef DROVER_SIM_REPLAY_H_
#define DROVER_SIM_REPLAY_H_

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <memory>
#include <optional>
#include <queue>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>

#include "common/time.h"
#include "core/event_pump.h"
#include "core/scheduler.h"
#include "core/worker_state.h"
#include "sim/simulator.h"

namespace drover::sim::internal {

// Groups per job: the core numbers groups with 16 bits; a burst of more
// distinct requests than this continues in another job.
constexpr size_t kMaxGroupsPerJob = 1024;

// kTimedOut: killed at its limit (the core then fails it); kCanceled: a
// dependency timed out. Both end the task, as kDone does.
enum class Phase : uint8_t {
  kPending, kWaiting, kReady, kRunning, kDone, kTimedOut, kCanceled,
  kFailed,  // its attempt on the black hole failed (SimOptions::black_hole)
};

// A class head candidate: priority (higher first), then readiness order
// (negative for a task put back at the front). `attempts` tells a current
// entry from one its task left behind before a vacate made it ready again.
struct Ready {
  int32_t priority = 0;
  int64_t seq = 0;
  uint32_t task = 0;
  uint32_t attempts = 0;
  friend bool operator>(const Ready& a, const Ready& b) {
    return a.priority != b.priority ? a.priority < b.priority : a.seq > b.seq;
  }
};

// A running attempt's end: its finish, or (kind deadline) the instant its
// limit runs out, where the core may kill it. An entry whose slot has moved
// on (`gen` differs: suspended, vacated, ended) is skipped.
struct Finish {
  int64_t at_us = 0;
  uint64_t seq = 0;
  uint32_t running = 0;  // slot in Replay::running_
  uint32_t gen = 0;
  friend bool operator>(const Finish& a, const Finish& b) {
    return a.at_us != b.at_us ? a.at_us > b.at_us : a.seq > b.seq;
  }
};
using FinishQueue = std::priority_queue<Finish, std::vector<Finish>, std::greater<>>;

struct Running {
  bool active = false;
  bool suspended = false;
  uint32_t worker = 0;  // index into the mirror
  uint32_t task = 0;    // trace index
  uint32_t attempt = 0;
  uint32_t gen = 0;  // bumped whenever a queued Finish stops being valid
  int64_t start_us = 0;
  int64_t finish_us = 0;     // when running
  int64_t remaining_us = 0;  // when suspended
  int64_t suspended_since_us = 0;
  int64_t suspended_us = 0;  // this attempt's suspended time, so far
  bool doomed = false;       // on the black hole: it fails at finish_us
  core::Allocation alloc;
};

// Owner presence, as the replay plays it: a worker's owner comes, the tasks
// there are vacated (suspend_for after the arrival), the owner leaves.
enum class OwnerStep : uint8_t { kCome, kVacate, kLeave };
struct OwnerEvent {
  int64_t at_us = 0;
  uint32_t worker = 0;
  OwnerStep step = OwnerStep::kCome;
  friend bool operator<(const OwnerEvent& a, const OwnerEvent& b) {
    return std::tie(a.at_us, a.worker, a.step) < std::tie(b.at_us, b.worker, b.step);
  }
};

class Replay : private core::EventPump::Shell {
 public:
  Replay(const Trace& trace, const Cluster& cluster, const SimOptions& options)
      : trace_(trace),
        cluster_(cluster),
        options_(options),
        sched_(Config(options, !trace.keys.empty())) {}

  Result<SimResult> Run();

 private:
  static core::SchedulerConfig Config(const SimOptions& options, bool cache) {
    core::SchedulerConfig c;
    // Keys stand for themselves: the replay's "hash" is the key material.
    if (cache) c.result_cache.digest = [](std::string_view bytes) { return std::string(bytes); };
    c.policy = options.policy;
    c.reservations = options.reservations;
    c.locality = options.locality;
    c.users.fair_share = options.fair_share;
    c.quarantine.enabled = options.quarantine;
    return c;
  }

  Time At(int64_t us) const { return base_ + Duration(us); }
  uint32_t TraceIndex(TaskId id) const { return job_first_[id.job - 1] + id.index; }
  // Handles `event` and what it sets off (core::EventPump); the first
  // error of the replay, if any.
  Status Deliver(core::Event event);
  // core::EventPump::Shell
  Time Now() override { return clock_.Now(); }
  void Execute(core::Command& command) override;
  void Handled(const Status& status, const core::Outbox& out) override;
  // What a command does in the replay.
  Status Apply(const core::Command& command);
  Status OnAssign(const core::AssignTask& a);
  // Task `i` succeeded from the result cache, never having run.
  Status OnReused(uint32_t i);
  Status SubmitDue();
  Status FinishDue();
  bool DeadlineDue();
  Status OwnerDue();
  Status OwnerCame(uint32_t worker);
  Status OwnerLeft(uint32_t worker);
  Status Vacate(uint32_t slot);
  Status KillAtLimit(const core::KillTask& kill);
  Status OnEnded(const core::TaskStateChanged& c);
  Status BuildOwnerEvents();
  void Suspend(Running& run);
  void EndSuspension(Running& run);
  int64_t RanUs(const Running& run) const;
  void EndAttempt(uint32_t slot);
  void SkipStale(FinishQueue& queue) const;
  void MakeReady(uint32_t task, bool front = false);
  void Account(int64_t until_us);
  void Snapshot();
  bool HeldForReservation(uint32_t cls);
  Status CheckEverFits() const;

  const Trace& trace_;
  const Cluster& cluster_;
  const SimOptions options_;
  core::Scheduler sched_;
  core::EventPump pump_{sched_, *this};
  Status error_;  // the first error; the pump stops at it
  SimulatedClock clock_;
  Time base_;           // the simulated time of trace offset 0
  int64_t now_us_ = 0;  // trace offset
  bool prefer_full_ = false;

  // Per trace task.
  std::vector<Phase> phase_;
  std::vector<int64_t> ready_us_;     // since when it is queued
  std::vector<int64_t> waited_us_;    // queued time of the attempts started
  std::vector<int64_t> start_us_;     // of its last attempt
  std::vector<uint32_t> attempts_;    // started so far
  std::vector<int64_t> progress_us_;  // kept through vacates (checkpoint only)
  std::vector<TaskId> ids_;
  std::vector<uint32_t> job_first_;  // per job (id - 1): its first trace task
  size_t next_submit_ = 0;
  uint64_t done_ = 0;
  uint64_t input_bytes_ = 0;  // SimResult::input_bytes
  uint64_t moved_bytes_ = 0;  // SimResult::moved_bytes

  // Waiting tasks per request class, in the core's class order.
  std::vector<std::priority_queue<Ready, std::vector<Ready>, std::greater<>>> ready_;
  std::vector<uint64_t> ready_count_;
  std::vector<uint32_t> gpu_classes_;
  int64_t ready_seq_ = 0;
  int64_t front_seq_ = 0;
  uint64_t gpu_ready_ = 0;
  uint64_t gpu_waiting_ = 0;  // GPU tasks submitted, waiting for dependencies
  int64_t last_submit_us_ = 0;

  // The workers as the core booked them.
  std::vector<std::unique_ptr<core::WorkerState>> mirror_;
  std::vector<Running> running_;
  std::vector<uint32_t> free_running_;
  FinishQueue finishes_;
  FinishQueue deadlines_;  // of suspended attempts with a limit
  uint64_t finish_seq_ = 0;

  // Owner presence.
  std::vector<OwnerEvent> owner_events_;  // in order
  size_t next_owner_ = 0;
  std::vector<bool> paused_;  // per worker: its owner is present
  std::vector<uint32_t> paused_list_;
  int64_t paused_gpus_ = 0;     // hundredths, of the paused workers
  int64_t suspended_gpus_ = 0;  // hundredths
  int64_t suspended_cpus_milli_ = 0;
  OwnerFigures owners_;
  // The black hole: its worker index (-1: none) and what it cost.
  int64_t black_hole_ = -1;
  BlackHoleFigures black_;
  CacheFigures cache_;
  std::vector<bool> reused_;  // per task: succeeded from the result cache
  // Instants a retry's backoff may end (a Tick is due then), soonest first.
  std::priority_queue<int64_t, std::vector<int64_t>, std::greater<>> wakeups_;

  // Accounting: what is held now, and the integrals since the first submit.
  int64_t last_us_ = 0;
  int64_t busy_cpus_milli_ = 0;
  uint64_t busy_mem_ = 0;
  int64_t busy_gpus_ = 0;
  int64_t idle_reserved_ = 0;  // hundredths, this interval
  int64_t idle_other_ = 0;
  int64_t total_gpus_ = 0;  // hundredths
  double cpu_area_ = 0;     // milli-cpu seconds
  double mem_area_ = 0;     // byte seconds
  double gpu_area_ = 0;     // hundredth seconds
  double idle_reserved_area_ = 0;
  double idle_other_area_ = 0;
  double idle_fragmentation_area_ = 0;
  double idle_dependency_area_ = 0;
  double idle_empty_area_ = 0;
  double idle_owner_area_ = 0;
  double idle_tail_area_ = 0;
  double owner_capacity_area_ = 0;  // hundredth seconds
  double suspended_gpu_area_ = 0;
  double suspended_cpu_area_ = 0;  // milli-cpu seconds

  uint64_t events_ = 0;
};

}  // namespace drover::sim::internal

#endif  // DROVER_SIM_REPLAY_H_
