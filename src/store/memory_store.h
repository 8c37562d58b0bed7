// MemoryStore: the embedded default Store — leases in a hash map, the record
// log in a journal file (DESIGN.md section 6).
//
// Leases: a claim or release of a few keys is a few hash-map operations.
// Expiry is driven from outside, with no thread and no polling: the store
// reads `clock` when a call arrives, and the shell arms one timer for
// NextExpiry() and calls ExpireDue(now) when it fires. Every call also
// expires what is due first, so a lease past its time is never reported as
// held even if the timer is late. Free events are delivered directly, each
// lease end exactly once.
//
// Persistence (Open() with a directory): the journal holds the server's
// records and, interleaved with them, the lease claims and frees, so that
// leases survive a restart: a lease found at startup is restored as held by
// its owner until now + its TTL (the time it was down does not count — the
// safe direction: a restart never frees a GPU early; a holder that died
// meanwhile loses it one TTL later). Renewals are not journaled unless they
// change the TTL. Lease changes become durable with the next Flush(), like
// records, and in order with them: a record appended after a claim is never
// durable without that claim.
//
// If a batch fails to reach the disk (a full disk), leases keep working in
// memory, the server learns of the failure through its records' callbacks,
// and the next Flush() journals the whole lease table again.
//
// Without a directory (the constructor) nothing is kept on disk; records are
// acknowledged at Flush() and dropped.
//
// Thread safety: none; one thread owns the store and runs all callbacks.
#ifndef DROVER_STORE_MEMORY_STORE_H_
#define DROVER_STORE_MEMORY_STORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/time.h"
#include "store/env.h"
#include "store/journal.h"
#include "store/store.h"

namespace drover::store {

class MemoryStore final : public Store {
 public:
  // A store that keeps nothing on disk. `clock` must outlive it.
  explicit MemoryStore(Clock& clock);

  // Opens (or creates) the state directory `dir` and replays its journal
  // ("<dir>/journal"): records become TakeRecovered()'s answer, leases are
  // restored. Errors: the journal cannot be opened, or holds a record this
  // version does not understand (kFailedPrecondition). `clock` and `env`
  // must outlive the store.
  static Result<std::unique_ptr<MemoryStore>> Open(Clock& clock, Env& env, const std::string& dir);

  ~MemoryStore() override;

  void Subscribe(FreeListener listener, DoneCallback subscribed) override;
  void Claim(std::vector<LeaseKey> keys, Owner owner, Duration ttl,
             Callback<ClaimOutcome> done) override;
  void Renew(std::vector<LeaseKey> keys, Owner owner, Duration ttl,
             Callback<RenewOutcome> done) override;
  void Release(std::vector<LeaseKey> keys, Owner owner, Callback<ReleaseOutcome> done) override;
  void ListLeases(Callback<std::vector<Lease>> done) override;

  void TakeRecovered(Callback<Recovered> done) override;
  void Append(std::string record, DoneCallback done) override;
  void Flush() override;
  void Compact(std::vector<std::string> snapshot, DoneCallback done) override;
  uint64_t LogBytes() const override;

  // From now on Flush() writes and fsyncs on a helper thread (Journal::
  // SyncInBackground) so the owner's loop does not wait for the disk; the
  // callbacks still run on the owner's thread, through `post`, which must be
  // safe to call from any thread (EventLoop::Post) and must run its function
  // on the owner's thread. The destructor then writes what is left, waiting.
  // No effect without a journal.
  void SyncInBackground(std::function<void(std::function<void()>)> post);

  // Ends every lease whose expiry is at or before `now`, delivering a
  // kExpired free event for each (after all of them are removed).
  void ExpireDue(Time now);

  // The earliest expiry among live leases; nullopt when none is held.
  std::optional<Time> NextExpiry();

  size_t lease_count() const { return leases_.size(); }

 private:
  struct Held {
    Owner owner;
    Time expires_at;
    Duration ttl;
    uint64_t serial;  // distinguishes this holding from earlier ones of the key
  };
  // An entry of the expiry heap; stale once its lease was renewed, released
  // or re-claimed (checked lazily against `leases_`).
  struct Deadline {
    Time at;
    uint64_t serial;
    LeaseKey key;
  };

  MemoryStore(Clock& clock, std::unique_ptr<Journal> journal, Recovered recovered);

  Status ReplayRecord(std::string_view record, Time now);
  void PushDeadline(const LeaseKey& key, const Held& held);
  bool IsLive(const Deadline& d) const;
  void PruneHeap();
  // Journals a lease change; errors surface through the journal's next
  // batch (the journal breaks) rather than here.
  void JournalLeaseChange(std::string record);
  void Deliver(const std::vector<FreeEvent>& events);

  Clock& clock_;
  std::unique_ptr<store::Journal> journal_;  // null without a directory
  std::optional<Recovered> recovered_;
  std::vector<DoneCallback> unjournaled_;  // appends waiting for Flush() without a journal
  FreeListener listener_;
  std::unordered_map<LeaseKey, Held> leases_;
  std::vector<Deadline> heap_;  // min-heap on `at`
  uint64_t next_serial_ = 1;
  bool lease_journal_lost_ = false;  // a lease record failed to reach the disk
  // Set by SyncInBackground(): wakes the owner to reap a background sync.
  std::function<void()> wake_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace drover::store

#endif  // DROVER_STORE_MEMORY_STORE_H_
