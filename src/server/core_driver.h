// CoreDriver: runs the pure scheduler inside the server shell. Every input
// (a worker message, a REST call, a store callback, a timer) becomes a
// core::Event handled at the clock's current time, and the resulting outbox
// is executed in order (DESIGN.md section 1), through core::EventPump, the
// loop `drover sim` and the seeded simulation run too:
//
//   Event ──► Scheduler::Handle ──► outbox ──┬─ ClaimLeases   ─► Store::Claim ─►
//   LeaseGranted/Rejected ─┐
//     ▲                                      ├─ RenewLeases   ─► Store::Renew (one call per owner)
//     │ │                                      ├─ ReleaseLeases ─► Store::Release │ │ ├─ Persist ─►
//     EncodeRecord ─► Store::Append          │ │                                      ├─ AssignTask
//     / KillTask / TaskStateChanged ─► CommandSink │ └──────── queued events (store callbacks, free
//     events) ◄──────────────────────────────────────────┘
//
// Store callbacks may run inside the call (MemoryStore) or later; either way
// their events are queued and handled after the current outbox, never
// re-entrantly. Appends are made durable by ONE Store::Flush per loop turn
// (posted once per batch: group fsync). AfterDurable() runs a callback once
// everything appended so far is durable (the worker channel acks finished
// results with it). Assignments and kills go to the sink at once, before
// their records are durable: after a crash the workers' reports let the
// restarted core adopt what its journal never saw (core/events.h,
// WorkerAttached).
//
// Time: a Tick goes to the core every `tick_interval` (the core's renew
// interval capped at 1 s). It drives renewals, retry backoffs, timeouts and
// the lost-worker fallback, so those fire up to one tick late; placement is
// event-driven in the core and never waits for a tick.
//
// Compaction: when the log grows past `compact_bytes` (and past twice the
// last snapshot), the current state (Scheduler::Snapshot) replaces the log. The
// snapshot's records are taken on the loop a slice per turn
// (Scheduler::SnapshotSlice: taking a million tasks at once held it ~130 ms)
// and encoded on a helper thread (the only one the driver starts; joined by
// the destructor): a million records take seconds to encode, which held the
// loop ~14 s after a million-task job was canceled. Records appended
// meanwhile follow the snapshot in the new log, except those of tasks the
// slices had yet to take (Scheduler::SnapshotFollows): the snapshot holds
// what they did.
//
// Thread safety: none; everything runs on the server's event loop.
#ifndef DROVER_SERVER_CORE_DRIVER_H_
#define DROVER_SERVER_CORE_DRIVER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "common/time.h"
#include "core/event_pump.h"
#include "core/scheduler.h"
#include "net/event_loop.h"
#include "server/handoff_stats.h"
#include "server/lease_book.h"
#include "server/once_per_turn.h"
#include "store/store.h"

namespace drover::server {

// What the driver cannot do itself: talk to workers and to subscribers.
class CommandSink {
 public:
  virtual ~CommandSink() = default;
  virtual void Assign(const core::AssignTask& assign) = 0;
  virtual void Kill(const core::KillTask& kill) = 0;
  virtual void StateChanged(const core::TaskStateChanged& change, Time at) = 0;
  // A worker should copy a task's outputs (replicas). Sinks that move no
  // files (tests of other parts) ignore it.
  virtual void Replicate(const core::ReplicateOutputs&) {}
};

struct DriverOptions {
  Duration tick_interval = Seconds(1);
  uint64_t compact_bytes = 64ull << 20;  // compact once the log is larger
  // Tasks a compaction's snapshot takes per loop turn; 0: as many as about
  // 4 ms allow. Tests set a few, to change tasks between slices.
  size_t snapshot_tasks_per_slice = 0;
};

struct DriverStats {
  uint64_t events = 0;
  uint64_t ignored_events = 0;  // Handle returned an error (stale, unknown)
  uint64_t records = 0;         // Persist commands appended
  uint64_t flushes = 0;
  uint64_t append_errors = 0;
  uint64_t compactions = 0;
  uint64_t discarded_bytes = 0;  // torn journal tail found at startup
  uint64_t restored_records = 0;
  uint64_t lease_claims = 0;      // ClaimLeases sent to the store
  uint64_t lease_rejections = 0;  // ... answered "held by someone else"
  uint64_t lease_claim_errors = 0;  // ... that failed (store error)
};

class CoreDriver : private core::EventPump::Shell {
 public:
  // All references must outlive the driver.
  CoreDriver(net::EventLoop& loop, Clock& clock, core::Scheduler& scheduler, store::Store& store,
             LeaseBook& book, CommandSink& sink, DriverOptions options);
  ~CoreDriver() override;
  CoreDriver(const CoreDriver&) = delete;
  CoreDriver& operator=(const CoreDriver&) = delete;

  // Startup, before any other call: subscribes to lease frees, replays the
  // store's recovered records into the scheduler (Restore, FinishRestore),
  // learns the leases this server's previous run holds, and starts ticking.
  // Errors: a record that cannot be decoded or restored (kDataLoss), a store
  // error, or a store that answers asynchronously (not supported at startup
  // in this version).
  Status Recover();

  // Handles one event now and executes what follows from it.
  void Handle(core::Event event);

  // Submits a job (validation errors come back; nothing changes then).
  Result<JobId> Submit(std::shared_ptr<const core::JobSpec> spec);

  // Forgets a done job (retention): the scheduler drops it and a tombstone
  // record (a JobRecord without a spec) is journaled, so a restart does not bring it back
  // and compaction leaves it out. Errors: those of Scheduler::ForgetJob.
  Status ForgetJob(JobId job);
  // True for a job id that was used and whose job was forgotten.
  bool Expired(JobId job) const;

  // Runs `fn` once every record appended so far is durable, with the
  // status of that batch (an error: the outcome is unknown). kSoon starts
  // the flush at once (someone waits for the answer: a job submission)
  // instead of at the loop's idle point, where it would also wait for what
  // the rest of the turn set off (in `drover up`, the task's own start).
  enum class Flush { kAtIdle, kSoon };
  void AfterDurable(std::function<void(Status)> fn, Flush when = Flush::kAtIdle);

  // Called after each batch of events is handled (the MemoryStore expiry
  // hook re-arms its timer here).
  void SetAfterTurn(std::function<void()> fn) { after_turn_ = std::move(fn); }

  // Called with how long each flushed batch took to become durable: from
  // the Flush call to the store's ack of the batch's last append (the
  // MemoryStore's background fsync, or the Redis durability ack).
  void SetDurableObserver(std::function<void(Duration)> fn) { durable_observer_ = std::move(fn); }
  // Called with every record as it is journaled and as Recover replays it,
  // so that what the shell derives from the journal (the file store's
  // references, file_store.h) follows it. Set before Recover.
  void SetRecordObserver(std::function<void(const core::Record&)> fn) {
    record_observer_ = std::move(fn);
  }

  // Stops ticking and flushing; later events are dropped.
  void Stop();

  const core::Scheduler& scheduler() const { return scheduler_; }
  net::EventLoop& loop() { return loop_; }
  // Expires when the driver is destroyed: work posted to later loop turns
  // (RunSliced) holds it to know whether the driver is still there.
  std::weak_ptr<bool> alive() const { return alive_; }
  const DriverStats& stats() const { return stats_; }
  // Flush -> durable latency of the journal batches (the last 4096), on the
  // server's clock: what a submission answer or a result ack waits for.
  HandoffSummary sync_summary() const { return Summarize(sync_samples_, sync_count_); }
  Time Now() override;

 private:
  // core::EventPump::Shell
  void Execute(core::Command& command) override;
  void Handled(const Status& status, const core::Outbox& out) override;
  void Drained() override;
  void Claim(const core::ClaimLeases& claim);
  void Renew(const core::RenewLeases& renew);
  void Release(const core::ReleaseLeases& release);
  void Persist(const core::Record& record);
  void ScheduleFlush();
  void FlushNow();
  void MaybeCompact();
  // Runs ready_ until it is empty or the slice is spent (then once more
  // in a later turn).
  void RunReady();
  void FinishCompact(std::vector<std::string> snapshot);
  void ArmTick();

  net::EventLoop& loop_;
  Clock& clock_;
  core::Scheduler& scheduler_;
  store::Store& store_;
  LeaseBook& book_;
  CommandSink& sink_;
  DriverOptions options_;

  core::EventPump pump_{scheduler_, *this};
  bool stopped_ = false;
  // The journal flush waits for the loop to be idle: the records of
  // messages that arrived together (a worker's Finished and its next
  // Started) go out in one batch, one fsync.
  OncePerTurn flush_{loop_, [this] { FlushNow(); }, OncePerTurn::kWhenIdle};
  bool compacting_ = false;
  // Compaction takes its snapshot a slice per turn (TakeSnapshotSlice), then
  // encodes it on this thread; meanwhile every appended record that follows
  // the snapshot is also kept here.
  void TakeSnapshotSlice();
  std::thread compact_thread_;
  bool encoding_snapshot_ = false;
  std::optional<core::SnapshotCursor> snapshot_cursor_;  // while slices are taken
  std::shared_ptr<std::vector<core::Record>> snapshot_records_;
  std::vector<std::string> appended_while_encoding_;
  Time last_now_;
  DriverStats stats_;
  uint64_t next_compact_bytes_;

  // Durability bookkeeping: appends complete in order.
  uint64_t appends_issued_ = 0;
  uint64_t appends_done_ = 0;
  struct Waiter {
    uint64_t target;
    std::function<void(Status)> fn;
  };
  std::deque<Waiter> waiters_;
  // Waiters whose records are durable, with the append's status, run in
  // order a slice per turn (SliceBudget): a compaction holds back every
  // append for a tenth of a second or more, and what waited for it (the
  // assignments and acknowledgments of thousands of tasks) would otherwise
  // hold the loop as long in one callback.
  struct Ready {
    std::function<void(Status)> fn;
    Status status;
  };
  std::deque<Ready> ready_;
  bool running_ready_ = false;
  bool ready_posted_ = false;
  std::vector<int64_t> sync_samples_;  // ring, microseconds (sync_summary)
  size_t sync_next_ = 0;
  uint64_t sync_count_ = 0;
  Status last_append_status_;

  std::function<void()> after_turn_;
  std::function<void(Duration)> durable_observer_;
  std::function<void(const core::Record&)> record_observer_;
  struct PendingFlush {
    uint64_t target;  // appends_issued_ at the flush
    Time at;
  };
  std::deque<PendingFlush> flushes_in_flight_;
  std::unique_ptr<net::Timer> tick_;
  // Guards posted callbacks against running after destruction.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace drover::server

#endif  // DROVER_SERVER_CORE_DRIVER_H_
