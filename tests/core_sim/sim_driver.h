// SimDriver: a seeded random simulation of the shell and the workers around
// a real core::Scheduler, checking the core's invariants after every event.
//
// The driver plays the world faithfully (DESIGN.md sections 1-4):
//   - the store: every ClaimLeases is answered granted or, at random,
//     rejected (LeaseGranted/LeaseRejected shortly after); renewals and
//     releases go to a LeaseTable with TTLs on the simulated clock, whose
//     expiries come back as LeaseFreed (some notifications are dropped, so
//     the core's own expiry fallback is exercised too);
//   - the workers: AssignTask becomes TaskStarted after a short delay, then
//     TaskFinished after a random duration with success, exit code, OOM or
//     a signal; KillTask ends the attempt at once; a lost worker crashes (its
//     processes and reports are gone) and may rejoin later, empty;
//   - people and time: joins, heartbeats, losses, drains, submissions of
//     random jobs (arrays, dependencies, --after, priorities, GPU shares,
//     GPU types, labels, counters, quotas, retries, timeouts), cancels,
//     stale reports, clock ticks and jumps longer than the lease TTL.
// After the random phase it stops losing and draining workers, rejoins and
// undrains them all, and runs until every task is terminal.
//
// Every Handle call is one event. A Ledger (ledger.h) checks the commands as
// they come and the core's queries after each event.
//
// Thread safety: none; one test thread.
#ifndef DROVER_TESTS_CORE_SIM_SIM_DRIVER_H_
#define DROVER_TESTS_CORE_SIM_SIM_DRIVER_H_

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <queue>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "common/time.h"
#include "core/event_pump.h"
#include "core/scheduler.h"
#include "core_sim/lease_table.h"
#include "core_sim/ledger.h"

namespace drover::core_sim {

struct SimOptions {
  uint64_t seed = 1;
  uint64_t events = 100'000;       // Handle calls in the random phase
  uint32_t max_workers = 20;
  uint64_t full_check_every = 2'000;  // events between full comparisons
  // Events between restore checks: a scheduler restored from the journal
  // (every Persist so far) and one restored from Scheduler::Snapshot must
  // answer every query alike.
  uint64_t restore_check_every = 25'000;
  bool trace = false;              // print every event and command to stderr
  // Preemption by priority on (SchedulerConfig::preempt_priority): tasks of
  // priority 2 preempt those of 0 and below, with a short cool-down.
  bool preempt = false;
};

struct SimReport {
  uint64_t events = 0;        // all Handle calls, both phases
  uint64_t random_events = 0;
  uint64_t jobs = 0;
  uint64_t tasks = 0;
  uint64_t claims = 0;
  uint64_t rejections = 0;
  uint64_t assigns = 0;
  uint64_t kills = 0;
  uint64_t vacates = 0;  // kills that preempt (KillTask::vacate)
  uint64_t losses = 0;
  uint64_t rejoins = 0;
  uint64_t expiries = 0;       // slot keys that expired in the store
  uint64_t dropped_notifications = 0;
  uint64_t jumps = 0;
  uint64_t errors = 0;         // events the core refused (stale, unknown, ...)
  uint64_t restore_checks = 0;
  uint64_t sliced_snapshots = 0;  // snapshots taken in slices between events, checked
  uint64_t reruns = 0;  // succeeded tasks run again for lost outputs (lineage)
  uint64_t copies = 0;  // copies of outputs reported (replicas), accepted or not
  uint64_t retried_jobs = 0;   // RetryJob events the core took
  uint64_t retried_tasks = 0;  // tasks they took out of failed or canceled
  std::array<uint64_t, core::kTaskStateCount> transitions{};
  std::array<uint64_t, core::kTaskStateCount> final_states{};
  Duration simulated = Duration::zero();
  std::string ToString() const;
};

class SimDriver : private core::EventPump::Shell {
 public:
  explicit SimDriver(SimOptions options);
  ~SimDriver() override;
  SimDriver(const SimDriver&) = delete;
  SimDriver& operator=(const SimDriver&) = delete;

  // Runs both phases. Errors: the first violated invariant, prefixed with
  // the seed and the event index ("seed 7, event 1234 (cancel task 12.3): ...").
  Status Run();
  const SimReport& report() const { return report_; }

 private:
  enum class ActionKind : uint8_t { kAnswer, kStart, kFinish, kFreed, kReplicated };
  enum class Ending : uint8_t { kSuccess, kExitCode, kOom, kSignal, kKilled };
  // Something the world does later: the store answers, a worker reports,
  // a notification arrives.
  struct Action {
    int64_t due_us = 0;
    uint64_t seq = 0;
    ActionKind kind = ActionKind::kAnswer;
    TaskId task;
    uint32_t attempt = 0;
    WorkerId worker = 0;
    uint32_t incarnation = 0;
    uint64_t token = 0;
    bool flag = false;  // kAnswer: granted; kFreed: expired
    Ending ending = Ending::kSuccess;
    friend bool operator>(const Action& a, const Action& b) {
      return a.due_us != b.due_us ? a.due_us > b.due_us : a.seq > b.seq;
    }
  };
  struct WorkerTask {
    uint32_t attempt = 0;
    uint64_t token = 0;  // the pending action that is still valid
  };
  struct SimWorker {
    WorkerId id = 0;
    core::WorkerResources resources;
    bool alive = false;
    bool drained = false;
    uint32_t incarnation = 0;
    std::unordered_map<TaskId, WorkerTask> tasks;
  };

  // --- randomness ---
  int64_t Uniform(int64_t lo, int64_t hi);  // inclusive
  bool Chance(double p);
  Duration Between(Duration lo, Duration hi);
  core::WorkerResources RandomWorker(uint32_t n);
  core::ResourceRequest RandomRequest();
  std::shared_ptr<const core::JobSpec> RandomJob();
  bool FitsAnchor(const core::ResourceRequest& r) const;

  // --- the world ---
  // One event through the core (core::EventPump, as the server's): the
  // ledger sees each command as it is executed and checks the core after.
  Status Deliver(core::Event event);
  // core::EventPump::Shell
  Time Now() override { return clock_.Now(); }
  void Handled(const Status& status, const core::Outbox& out) override;
  void Execute(core::Command& command) override;
  void Executed() override;
  void Apply(const core::Command& command);
  void Schedule(Action action, Duration after);
  void RunAction(const Action& action);
  // Moves time forward by `d`, running due actions and lease expiries in
  // time order, then ticks (unless `tick` is false: a stalled server).
  void Advance(Duration d, bool tick = true);
  void Fail(const std::string& what);
  // Restores the journal and the live snapshot into two fresh schedulers
  // and fails on the first query they answer differently.
  void CheckRestore();
  // Takes the next slice of the snapshot being taken between events (one is
  // started at each restore check); once whole, restores it with the
  // records that followed it and compares with the journal's restore.
  void SliceSnapshot();
  // `records` restored into a fresh scheduler; null (and Fail, naming
  // `what`) when they do not restore.
  std::unique_ptr<core::Scheduler> Restored(const std::vector<core::Record>& records,
                                            const std::string& what);
  bool failed() const { return !violation_.empty() || ledger_.failed(); }
  Status Failure() const;

  // --- random steps ---
  void Step();
  void JoinNew();
  void Rejoin(SimWorker& w);
  void Lose();
  void ToggleDrain();
  void Heartbeat();
  void Submit();
  void CancelSomething();
  // A person retries a random recent job (RetryJob), checked against CheckRetry.
  void RetrySomething();
  void Stale();
  TaskId RandomTask();
  SimWorker* RandomWorkerWhere(const std::function<bool(const SimWorker&)>& pred);
  Status Drain();

  SimOptions options_;
  std::mt19937_64 rng_;
  SimulatedClock clock_;
  Time start_;
  std::unique_ptr<core::Scheduler> scheduler_;
  std::unique_ptr<core::EventPump> pump_;
  std::vector<core::Record> journal_;  // every Persist, in order
  // A snapshot being taken in slices (Scheduler::StartSnapshot), its records
  // so far and the records persisted meanwhile that follow it.
  std::optional<core::SnapshotCursor> slicing_;
  std::vector<core::Record> sliced_;
  std::vector<core::Record> sliced_follow_;
  LeaseTable leases_;
  Ledger ledger_;
  std::vector<SimWorker> workers_;  // id = index + 1
  std::priority_queue<Action, std::vector<Action>, std::greater<>> actions_;
  uint64_t action_seq_ = 0;
  uint64_t token_seq_ = 0;
  std::vector<core::ResourceRequest> request_pool_;
  std::vector<core::WorkerResources> anchors_;
  bool random_phase_ = true;
  std::string violation_;
  core::Event last_event_;  // the event being handled, described on failure
  SimReport report_;
};

}  // namespace drover::core_sim

#endif  // DROVER_TESTS_CORE_SIM_SIM_DRIVER_H_
