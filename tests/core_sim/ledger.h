// Ledger: the simulation's own bookkeeping of what the core has said, and
// the invariants checked against it.
//
// The driver shows the ledger every command the core emits, in order, and
// tells it what the shell side did (claims answered, grants delivered,
// workers joined, lost, drained). From that alone the ledger knows each
// task's state, attempt and concrete resources, and each worker's holdings.
// It checks, as commands arrive:
//   - state changes start from the state the ledger has and follow the
//     lifecycle (DESIGN.md section 3);
//   - no core id or whole GPU is held by two tasks at once on a worker, GPU
//     shares on one GPU stay within 100 hundredths and its reserved memory
//     within its memory, a worker's memory and counters are not exceeded,
//     and each allocation matches the request (core count, GPU count, model,
//     labels);
//   - a task is queued or placed only after its dependencies succeeded;
//   - claims go to live, undrained workers; AssignTask only after the claim
//     was granted and that grant was delivered, exactly once per attempt;
//   - no lease renewal for a lost worker.
// EndOfEvent then checks that no attempt the core ended still holds a lease
// (a lost worker's task is not requeued before its lease expired) and that
// the core's queries agree with the ledger for everything the event touched;
// FullCheck compares every task, job and worker.
//
// The first violation is kept (later ones are ignored); failed() says so.
//
// Thread safety: none; owned by one test thread.
#ifndef DROVER_TESTS_CORE_SIM_LEDGER_H_
#define DROVER_TESTS_CORE_SIM_LEDGER_H_

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/ids.h"
#include "core/commands.h"
#include "core/model.h"
#include "core/resources.h"
#include "core/scheduler.h"
#include "core_sim/lease_table.h"

namespace drover::core_sim {

class Ledger {
 public:
  // --- what the shell side did -------------------------------------------------
  // Handle returned OK for these (the ledger follows the core's view).
  void WorkerJoined(WorkerId worker, const core::WorkerResources& resources);
  void WorkerLost(WorkerId worker);
  void WorkerDrained(WorkerId worker, bool drained);
  // The store answered the claim of (task, attempt).
  void ClaimAnswered(TaskId task, uint32_t attempt, bool granted);
  // LeaseGranted for (task, attempt) is about to be handed to the core.
  void GrantDelivered(TaskId task, uint32_t attempt);

  // --- what the core said ----------------------------------------------------
  // Every command of the outbox, in order, before the shell executes it.
  void OnCommand(const core::Command& command);
  // The next event is a RetryJob of `job`: its failed and canceled tasks
  // may go back to queued or waiting, during that event only.
  void RetryAsked(JobId job) { retry_job_ = job; }
  // After the outbox was executed: lease and query checks for what changed.
  void EndOfEvent(const core::Scheduler& scheduler, const LeaseTable& leases);
  // Compares every task, job and worker with the core's queries.
  void FullCheck(const core::Scheduler& scheduler);

  // --- reading -----------------------------------------------------------------
  bool failed() const { return !violation_.empty(); }
  const std::string& violation() const { return violation_; }
  std::optional<core::TaskState> StateOf(TaskId task) const;
  uint32_t AttemptOf(TaskId task) const;
  bool IsWorkerLost(WorkerId worker) const;
  // Ids of every job seen, ascending.
  std::vector<JobId> JobIds() const;
  uint32_t TaskCount(JobId job) const;
  // Tasks not yet succeeded, failed or canceled.
  uint64_t NonTerminalTasks() const { return non_terminal_; }
  uint64_t TotalTasks() const { return total_tasks_; }
  // Counts of state changes into each state, for the test's report.
  const std::array<uint64_t, core::kTaskStateCount>& transitions() const { return transitions_; }
  // Succeeded tasks that ran again because their outputs' worker was lost.
  uint64_t reruns() const { return reruns_; }
  uint64_t retried() const { return retried_; }

 private:
  // kUnknown: a task of a job just submitted, before its first state is known.
  static constexpr uint8_t kUnknown = 255;
  struct TaskBook {
    uint8_t state = kUnknown;  // a core::TaskState, or kUnknown
    uint32_t attempt = 0;
    WorkerId worker = 0;
    bool active = false;        // assigned or running (the core holds resources)
    bool has_alloc = false;     // its TaskRecord with resources arrived
    bool claim_seen = false;
    uint32_t claim_attempt = 0; // the latest claim's attempt
    bool claim_granted = false; // the store granted it
    bool grant_delivered = false;
    bool assign_sent = false;
    std::vector<core::LeaseKey> claim_keys;
    std::vector<uint32_t> cores;
    std::vector<core::GpuGrant> gpus;
    // The latest assigned record's, kept after the attempt ends: what an
    // ended task shows it ran on.
    std::vector<uint32_t> ran_cores;
    std::vector<core::GpuGrant> ran_gpus;
  };
  struct JobBook {
    std::shared_ptr<const core::JobSpec> spec;
    std::vector<uint16_t> group_of;         // per task
    std::vector<uint32_t> group_first;      // per group
    std::vector<uint32_t> group_succeeded;  // per group
    std::vector<TaskBook> tasks;
    std::array<uint64_t, core::kTaskStateCount> counts{};
    uint32_t succeeded = 0;
  };
  struct GpuBook {
    int64_t share = 0;
    uint64_t mem = 0;
    bool whole = false;
  };
  struct WorkerBook {
    core::WorkerResources resources;
    bool lost = false;
    bool drained = false;
    // Who holds each core: one task whole, or shares (cpus below one) up to
    // one CPU in all, in core_milli.
    std::multimap<uint32_t, TaskId> core_holder;
    std::map<uint32_t, int64_t> core_milli;
    std::vector<GpuBook> gpus;  // resources.gpus order
    uint64_t mem = 0;
    std::map<std::string, int64_t> counters;
    std::set<TaskId> tasks;
  };

  void Fail(const std::string& what);
  JobBook* Job(JobId job);
  TaskBook* Task(TaskId task);
  WorkerBook* Worker(WorkerId worker);
  const core::TaskGroupSpec& SpecOf(TaskId task) const;
  // Every dependency of the task (its groups' depends_on, --after jobs and
  // tasks) succeeded.
  bool DependenciesMet(TaskId task) const;

  void OnJobRecord(const core::JobRecord& record);
  void OnStateChanged(const core::TaskStateChanged& change);
  void OnTaskRecord(const core::TaskRecord& record);
  void OnClaim(const core::ClaimLeases& claim);
  void OnAssign(const core::AssignTask& assign);
  void OnKill(const core::KillTask& kill);
  void OnRenew(const core::RenewLeases& renew);
  void OnRelease(const core::ReleaseLeases& release);
  // Books the allocation of an assigned task on its worker, checking it.
  void Book(TaskId id, TaskBook& task);
  void Unbook(TaskId id, TaskBook& task);
  void SetState(JobBook& job, TaskBook& task, uint8_t state);
  void CheckTaskAgainstCore(const core::Scheduler& scheduler, TaskId id);
  void CheckJobAgainstCore(const core::Scheduler& scheduler, JobId id);
  void CheckWorkerAgainstCore(const core::Scheduler& scheduler, WorkerId id);

  std::string violation_;
  std::map<JobId, JobBook> jobs_;
  std::map<WorkerId, WorkerBook> workers_;
  uint64_t non_terminal_ = 0;
  uint64_t reruns_ = 0;
  uint64_t retried_ = 0;  // tasks a RetryJob took out of failed or canceled
  uint64_t total_tasks_ = 0;
  std::array<uint64_t, core::kTaskStateCount> transitions_{};

  // Touched during the current event.
  std::set<TaskId> touched_tasks_;
  std::set<JobId> new_jobs_;
  std::vector<LeaseOwner> ended_attempts_;
  JobId retry_job_ = 0;  // RetryAsked, until EndOfEvent
};

}  // namespace drover::core_sim

#endif  // DROVER_TESTS_CORE_SIM_LEDGER_H_
