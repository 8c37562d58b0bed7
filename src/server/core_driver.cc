#include "server/core_driver.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <type_traits>

#include "proto/record_codec.h"
#include "server/sliced.h"

namespace drover::server {

CoreDriver::CoreDriver(net::EventLoop& loop, Clock& clock, core::Scheduler& scheduler,
                       store::Store& store, LeaseBook& book, CommandSink& sink,
                       DriverOptions options)
    : loop_(loop),
      clock_(clock),
      scheduler_(scheduler),
      store_(store),
      book_(book),
      sink_(sink),
      options_(options),
      last_now_(clock.Now()),
      next_compact_bytes_(options.compact_bytes) {}

CoreDriver::~CoreDriver() {
  *alive_ = false;
  tick_.reset();
  // Its post, if any, finds the driver gone.
  if (compact_thread_.joinable()) compact_thread_.join();
}

Time CoreDriver::Now() {
  // The core requires time never to go backwards; a wall-clock step back is
  // absorbed here.
  last_now_ = std::max(last_now_, clock_.Now());
  return last_now_;
}

namespace {

// Decodes the recovered records on helper threads, at most two chunks
// ahead of the restore each, and lets go of each record's text once
// decoded: the restart's decoding (more than half of it at a million
// tasks, bench/README B6) runs beside the restore, on two cores, instead
// of before it on one. Helper k decodes chunks k, k + n, k + 2n, ...; the
// restore takes them in order.
class DecodeAhead {
 public:
  struct Chunk {
    size_t first = 0;  // index of records[0] in the journal
    std::vector<Result<core::Record>> records;
  };

  DecodeAhead(std::vector<std::string>& texts, size_t helpers)
      : texts_(texts), lanes_(std::max<size_t>(1, helpers)) {
    for (size_t k = 0; k < lanes_.size(); ++k) threads_.emplace_back([this, k] { Run(k); });
  }
  ~DecodeAhead() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();
  }
  DecodeAhead(const DecodeAhead&) = delete;
  DecodeAhead& operator=(const DecodeAhead&) = delete;

  // The next chunk in order; nullopt after the last.
  std::optional<Chunk> Next() {
    if (next_ * kChunk >= texts_.size()) return std::nullopt;
    Lane& lane = lanes_[next_ % lanes_.size()];
    ++next_;
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !lane.ready.empty(); });
    Chunk chunk = std::move(lane.ready.front());
    lane.ready.pop_front();
    cv_.notify_all();
    return chunk;
  }

 private:
  static constexpr size_t kChunk = 4096;
  struct Lane {
    std::deque<Chunk> ready;
  };

  void Run(size_t k) {
    Lane& lane = lanes_[k];
    for (size_t c = k; c * kChunk < texts_.size(); c += lanes_.size()) {
      Chunk chunk;
      chunk.first = c * kChunk;
      const size_t end = std::min(texts_.size(), chunk.first + kChunk);
      chunk.records.reserve(end - chunk.first);
      for (size_t i = chunk.first; i < end; ++i) {
        chunk.records.push_back(proto::DecodeRecord(texts_[i]));
        std::string().swap(texts_[i]);
      }
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return lane.ready.size() < 2 || stop_; });
      if (stop_) return;
      lane.ready.push_back(std::move(chunk));
      cv_.notify_all();
    }
  }

  std::vector<std::string>& texts_;  // each text its helper's alone
  std::vector<Lane> lanes_;
  size_t next_ = 0;  // the restore's next chunk
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::vector<std::thread> threads_;  // last: they start once the rest is built
};

}  // namespace

Status CoreDriver::Recover() {
  // Subscribe first, so no free between now and the first claim is missed.
  bool subscribed = false;
  Status sub_status;
  store_.Subscribe(
      [this](const store::FreeEvent& free) {
        std::optional<AttemptRef> a = book_.Freed(free.key);
        if (!a) return;
        // The store names the holder: a free it says was another attempt's
        // lease is not this attempt's.
        if (std::optional<AttemptRef> named = LeaseBook::ParseOwner(free.owner);
            named && !(*named == *a)) {
          return;
        }
        Handle(core::LeaseFreed{a->task, a->attempt, free.reason == store::FreeReason::kExpired});
      },
      [&](Status s) {
        subscribed = true;
        sub_status = std::move(s);
      });
  if (!subscribed) return FailedPrecondition("store subscribed asynchronously; not supported");
  RETURN_IF_ERROR(sub_status);

  std::optional<Result<store::Recovered>> recovered;
  store_.TakeRecovered([&](Result<store::Recovered> r) { recovered = std::move(r); });
  if (!recovered) return FailedPrecondition("store recovered asynchronously; not supported");
  if (!recovered->ok()) return recovered->status();
  stats_.discarded_bytes = (*recovered)->discarded_bytes;
  if (stats_.discarded_bytes > 0) {
    spdlog::warn("journal: discarded a torn tail of {} bytes (a crash during a write); "
                 "every record before it is intact",
                 stats_.discarded_bytes);
  }
  // The records are decoded a chunk ahead on a helper thread and restored
  // here in order, each record's text let go once decoded: a million
  // tasks' journal is never held twice over (bench/README.md, B6: the
  // restart's time went to fresh pages). A record that does not decode or
  // restore fails the start, so nothing half-restored ever serves. A job
  // retention forgot is dropped at its tombstone (Restore).
  std::vector<std::string>& records = (*recovered)->records;
  {
    // Two helpers: decoding costs about four times the restore.
    DecodeAhead decoded(records, records.size() > 4096 ? 2 : 1);
    while (std::optional<DecodeAhead::Chunk> chunk = decoded.Next()) {
      for (size_t j = 0; j < chunk->records.size(); ++j) {
        const size_t i = chunk->first + j;
        Result<core::Record>& record = chunk->records[j];
        if (!record.ok()) {
          return record.status().WithContext("journal record " + std::to_string(i));
        }
        Status restored = scheduler_.Restore(*record);
        if (!restored.ok()) {
          return DataLoss("journal record " + std::to_string(i) + ": " + restored.ToString());
        }
        if (record_observer_) record_observer_(*record);
      }
    }
  }
  stats_.restored_records = records.size();

  // Leases our previous run holds stay ours: we can renew and release them.
  std::optional<Result<std::vector<store::Lease>>> leases;
  store_.ListLeases([&](Result<std::vector<store::Lease>> r) { leases = std::move(r); });
  if (!leases) return FailedPrecondition("store listed leases asynchronously; not supported");
  if (!leases->ok()) return leases->status();
  for (const store::Lease& lease : **leases) {
    std::optional<AttemptRef> owner = LeaseBook::ParseOwner(lease.owner);
    if (!owner || lease.owner != book_.OwnerOf(*owner)) continue;
    if (LeaseBook::TaskOfSlotKey(lease.key)) book_.Granted(*owner, lease.key);
  }

  RETURN_IF_ERROR(pump_.Run([&](Time now, core::Outbox& out) {
    scheduler_.FinishRestore(now, out);
    return Status::Ok();
  }));
  ArmTick();
  return Status::Ok();
}

void CoreDriver::Handle(core::Event event) {
  if (stopped_) return;
  // Executing may queue more events (synchronous store callbacks); the
  // pump handles them after the whole outbox ran.
  (void)pump_.Push(std::move(event));
}

Result<JobId> CoreDriver::Submit(std::shared_ptr<const core::JobSpec> spec) {
  if (stopped_) return Unavailable("server is stopping");
  // REST handlers run from the loop, never from inside a drain.
  return pump_.Submit(std::move(spec));
}

void CoreDriver::Handled(const Status& status, const core::Outbox&) {
  ++stats_.events;
  if (!status.ok()) {
    ++stats_.ignored_events;
    spdlog::debug("core ignored an event: {}", status.ToString());
  }
}

void CoreDriver::Drained() {
  if (after_turn_) after_turn_();
}

void CoreDriver::Execute(core::Command& command) {
  std::visit(
      [&](auto& c) {
        using T = std::decay_t<decltype(c)>;
        if constexpr (std::is_same_v<T, core::ClaimLeases>) {
          Claim(c);
        } else if constexpr (std::is_same_v<T, core::AssignTask>) {
          // At once, before its record is durable: a restarted server adopts
          // an attempt its journal never saw from the worker's report
          // (core/events.h, WorkerAttached), so the handoff does not wait
          // for an fsync.
          sink_.Assign(c);
        } else if constexpr (std::is_same_v<T, core::KillTask>) {
          sink_.Kill(c);
        } else if constexpr (std::is_same_v<T, core::RenewLeases>) {
          Renew(c);
        } else if constexpr (std::is_same_v<T, core::ReleaseLeases>) {
          Release(c);
        } else if constexpr (std::is_same_v<T, core::Persist>) {
          Persist(c.record);
        } else if constexpr (std::is_same_v<T, core::ReplicateOutputs>) {
          sink_.Replicate(c);
        } else {
          sink_.StateChanged(c, last_now_);
        }
      },
      command);
}

void CoreDriver::Claim(const core::ClaimLeases& claim) {
  const AttemptRef attempt{claim.task, claim.attempt};
  ++stats_.lease_claims;
  std::string slot_key;
  for (const core::LeaseKey& k : claim.keys) {
    if (k.kind == core::LeaseKind::kSlot) slot_key = k.ToString();
  }
  std::weak_ptr<bool> alive = alive_;
  store_.Claim(LeaseBook::StoreKeys(claim.keys), book_.OwnerOf(attempt), claim.ttl,
               [this, alive, attempt, slot_key](Result<store::ClaimOutcome> outcome) {
                 if (alive.expired()) return;
                 if (outcome.ok() && outcome->claimed) {
                   book_.Granted(attempt, slot_key);
                   Handle(core::LeaseGranted{attempt.task, attempt.attempt});
                   return;
                 }
                 if (!outcome.ok()) {
                   ++stats_.lease_claim_errors;
                   spdlog::warn("claim for {}#{} failed: {}", attempt.task.ToString(),
                                attempt.attempt, outcome.status().ToString());
                 } else {
                   ++stats_.lease_rejections;
                   spdlog::info("claim for {}#{} rejected: {} held by {}",
                                attempt.task.ToString(), attempt.attempt,
                                outcome->conflict_key, outcome->conflict_owner);
                 }
                 Handle(core::LeaseRejected{attempt.task, attempt.attempt});
               });
}

void CoreDriver::Renew(const core::RenewLeases& renew) {
  for (LeaseBook::RenewBatch& batch : book_.SplitRenew(renew.keys)) {
    std::string owner = batch.owner;
    store_.Renew(std::move(batch.keys), std::move(batch.owner), renew.ttl,
                 [owner](Result<store::RenewOutcome> outcome) {
                   // A lost key also ends with a free event; the core reacts
                   // to that (LeaseFreed), so this only reports.
                   if (!outcome.ok()) {
                     spdlog::warn("renew for {} failed: {}", owner, outcome.status().ToString());
                   } else if (!outcome->lost.empty()) {
                     spdlog::warn("renew for {}: {} keys lost (first {})", owner,
                                  outcome->lost.size(), outcome->lost.front());
                   }
                 });
  }
}

void CoreDriver::Release(const core::ReleaseLeases& release) {
  const AttemptRef attempt{release.task, release.attempt};
  store_.Release(LeaseBook::StoreKeys(release.keys), book_.OwnerOf(attempt),
                 [attempt](Result<store::ReleaseOutcome> outcome) {
                   if (!outcome.ok()) {
                     spdlog::warn("release for {}#{} failed: {}", attempt.task.ToString(),
                                  attempt.attempt, outcome.status().ToString());
                   }
                 });
}

void CoreDriver::Persist(const core::Record& record) {
  if (record_observer_) record_observer_(record);
  ++stats_.records;
  ++appends_issued_;
  std::weak_ptr<bool> alive = alive_;
  std::string encoded = proto::EncodeRecord(record);
  if (encoding_snapshot_ &&
      (!snapshot_cursor_ || core::Scheduler::SnapshotFollows(*snapshot_cursor_, record))) {
    appended_while_encoding_.push_back(encoded);
  }
  store_.Append(std::move(encoded), [this, alive](Status s) {
    if (alive.expired()) return;
    ++appends_done_;
    if (!s.ok()) {
      ++stats_.append_errors;
      spdlog::error("journal append failed: {}", s.ToString());
    }
    while (!flushes_in_flight_.empty() && flushes_in_flight_.front().target <= appends_done_) {
      const Duration took = clock_.Now() - flushes_in_flight_.front().at;
      flushes_in_flight_.pop_front();
      if (durable_observer_) durable_observer_(took);
      constexpr size_t kWindow = 4096;  // for sync_summary()
      const int64_t us = std::chrono::duration_cast<std::chrono::microseconds>(took).count();
      if (sync_samples_.size() < kWindow) {
        sync_samples_.push_back(us);
      } else {
        sync_samples_[sync_next_] = us;
        sync_next_ = (sync_next_ + 1) % kWindow;
      }
      ++sync_count_;
    }
    while (!waiters_.empty() && waiters_.front().target <= appends_done_) {
      ready_.push_back({std::move(waiters_.front().fn), s});
      waiters_.pop_front();
    }
    RunReady();
  });
  ScheduleFlush();
}

void CoreDriver::RunReady() {
  // Nothing ready is the common case (every append of a batch comes here):
  // no clock read for it. A waiter that appends, on a store that completes
  // at once, comes back here: the outer call goes on with what it queued.
  if (running_ready_ || ready_.empty()) return;
  running_ready_ = true;
  SliceBudget budget;
  while (!ready_.empty()) {
    Ready next = std::move(ready_.front());
    ready_.pop_front();
    next.fn(next.status);
    // Each waiter may be a batch of work: the clock is read after each.
    if (!ready_.empty() && budget.SpentNow()) {
      if (!ready_posted_) {
        ready_posted_ = true;
        std::weak_ptr<bool> alive = alive_;
        loop_.Post([this, alive] {
          if (alive.expired()) return;
          ready_posted_ = false;
          RunReady();
        });
      }
      break;
    }
  }
  running_ready_ = false;
}

Status CoreDriver::ForgetJob(JobId job) {
  if (stopped_) return Unavailable("server is stopping");
  RETURN_IF_ERROR(scheduler_.ForgetJob(job));
  // Built in place (a copied record trips GCC's maybe-uninitialized).
  Persist(core::Record(std::in_place_type<core::JobRecord>, job, nullptr, Now()));
  return Status::Ok();
}

bool CoreDriver::Expired(JobId job) const { return scheduler_.Forgotten(job); }

void CoreDriver::AfterDurable(std::function<void(Status)> fn, Flush when) {
  if (appends_done_ >= appends_issued_) {
    if (!ready_.empty()) {
      // Behind the waiters still to run, in order.
      ready_.push_back({std::move(fn), Status::Ok()});
      return;
    }
    std::weak_ptr<bool> alive = alive_;
    loop_.Post([alive, fn = std::move(fn)] {
      if (!alive.expired()) fn(Status::Ok());
    });
    return;
  }
  waiters_.push_back({appends_issued_, std::move(fn)});
  // Group commit still: with a batch in flight, this one starts when it
  // is durable (Journal::SyncInBackground).
  if (when == Flush::kSoon && !stopped_) FlushNow();
}

void CoreDriver::ScheduleFlush() { flush_.Request(); }

void CoreDriver::FlushNow() {
  flush_.Clear();
  ++stats_.flushes;
  if (appends_issued_ > appends_done_ &&
      (flushes_in_flight_.empty() || flushes_in_flight_.back().target < appends_issued_)) {
    flushes_in_flight_.push_back({appends_issued_, clock_.Now()});
  }
  store_.Flush();
  MaybeCompact();
}

void CoreDriver::MaybeCompact() {
  if (compacting_ || stopped_ || store_.LogBytes() < next_compact_bytes_) return;
  compacting_ = true;
  encoding_snapshot_ = true;
  appended_while_encoding_.clear();
  snapshot_cursor_ = scheduler_.StartSnapshot();
  snapshot_records_ = std::make_shared<std::vector<core::Record>>();
  // About one record per task and job: growing the vector as it fills would
  // move every record taken so far (~30 ms at half a million).
  snapshot_records_->reserve(snapshot_cursor_->tasks + snapshot_cursor_->jobs.size() + 1);
  TakeSnapshotSlice();
}

void CoreDriver::TakeSnapshotSlice() {
  if (stopped_) return;
  // About 4 ms of the loop's time per turn, checked every 256 tasks.
  constexpr size_t kTasksPerCheck = 256;
  SliceBudget budget;
  bool done = false;
  if (options_.snapshot_tasks_per_slice > 0) {
    done = scheduler_.SnapshotSlice(*snapshot_cursor_, options_.snapshot_tasks_per_slice,
                                    *snapshot_records_);
  } else {
    while (
        !(done = scheduler_.SnapshotSlice(*snapshot_cursor_, kTasksPerCheck, *snapshot_records_))) {
      if (budget.SpentNow()) break;
    }
  }
  if (!done) {
    std::weak_ptr<bool> alive = alive_;
    loop_.Post([this, alive] {
      if (!alive.expired()) TakeSnapshotSlice();
    });
    return;
  }
  snapshot_cursor_.reset();
  // Encoding the records (seconds for a million tasks) runs on a helper
  // thread so the loop goes on. What is appended meanwhile follows the
  // snapshot in the new log.
  std::shared_ptr<std::vector<core::Record>> records = std::move(snapshot_records_);
  if (compact_thread_.joinable()) compact_thread_.join();  // the last one, long done
  std::weak_ptr<bool> alive = alive_;
  net::EventLoop* loop = &loop_;
  compact_thread_ = std::thread([this, loop, alive, records] {
    auto encoded = std::make_shared<std::vector<std::string>>();
    encoded->reserve(records->size());
    for (const core::Record& r : *records) encoded->push_back(proto::EncodeRecord(r));
    loop->Post([this, alive, encoded] {
      if (!alive.expired()) FinishCompact(std::move(*encoded));
    });
  });
}

void CoreDriver::FinishCompact(std::vector<std::string> snapshot) {
  encoding_snapshot_ = false;
  if (stopped_) return;
  uint64_t bytes = 0;
  for (const std::string& r : snapshot) bytes += r.size();
  for (std::string& r : appended_while_encoding_) {
    bytes += r.size();
    snapshot.push_back(std::move(r));
  }
  appended_while_encoding_.clear();
  next_compact_bytes_ = std::max(options_.compact_bytes, 2 * bytes);
  std::weak_ptr<bool> alive = alive_;
  const size_t count = snapshot.size();
  store_.Compact(std::move(snapshot), [this, alive, count, bytes](Status s) {
    if (alive.expired()) return;
    compacting_ = false;
    if (!s.ok()) {
      spdlog::error("journal compaction failed: {}", s.ToString());
      return;
    }
    ++stats_.compactions;
    spdlog::info("journal compacted to {} records ({} bytes)", count, bytes);
  });
}

void CoreDriver::ArmTick() {
  if (!tick_) tick_ = std::make_unique<net::Timer>(loop_);
  tick_->ArmAfter(options_.tick_interval, [this] {
    Handle(core::Tick{});
    ArmTick();
  });
}

void CoreDriver::Stop() {
  if (stopped_) return;
  // Make what was appended durable before going (unless frozen by the test
  // hook: that stands for a crash).
  if (flush_.pending()) FlushNow();
  stopped_ = true;
  pump_.Stop();
  tick_.reset();
}

}  // namespace drover::server
