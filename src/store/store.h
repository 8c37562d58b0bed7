// Store: where Drover keeps "who holds what" (leases) and its durable record
// log, behind one asynchronous interface (DESIGN.md sections 4 and 6).
//
// Implementations: MemoryStore (memory_store.h, the embedded default: a map
// plus a journal file) and, later, RedisStore (hiredis on the asio loop).
// Both must pass the conformance suite in store_conformance.h.
//
// Completion: every call completes through its callback, exactly once. The
// callback may run before the call returns (MemoryStore) or later on the
// owner's event loop (RedisStore); callers must be correct either way and
// must not assume an order between a call's callback and the free events it
// causes. Callbacks may call the store again.
//
// Errors: a Status in the callback means the store could not be asked or
// did not answer (kUnavailable: retry with backoff) or the request itself is
// wrong (kInvalidArgument: empty key list, empty owner, non-positive TTL).
// Losing a race is not an error: it is a normal outcome (ClaimOutcome with
// claimed == false, RenewOutcome::lost, ReleaseOutcome::not_held).
//
// Thread safety: none. A Store belongs to one thread (the server shell's
// event loop); all calls and all callbacks happen on it.
#ifndef DROVER_STORE_STORE_H_
#define DROVER_STORE_STORE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/time.h"
#include "store/lease.h"

namespace drover::store {

// The record log as found when the store was opened.
struct Recovered {
  std::vector<std::string> records;  // snapshot records first, then appends
  uint64_t discarded_bytes = 0;      // torn tail cut off by the journal, if any
};

class Store {
 public:
  template <typename T>
  using Callback = std::function<void(Result<T>)>;
  using DoneCallback = std::function<void(Status)>;
  using FreeListener = std::function<void(const FreeEvent&)>;

  Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;
  virtual ~Store() = default;

  // ---- Leases ----

  // Registers the one listener for lease ends (replacing any earlier one);
  // `subscribed` runs once the listener is guaranteed to see every later
  // free. Subscribe before claiming, so no free can slip between a failed
  // claim and the wait for the next free (DESIGN.md section 4).
  virtual void Subscribe(FreeListener listener, DoneCallback subscribed) = 0;

  // Atomically claims every key in `keys` for `owner` with `ttl`: if each key
  // is free or already held by `owner`, all become held by `owner` and expire
  // at now + ttl; otherwise nothing changes and the outcome names one key
  // held by another owner, and that owner. Duplicate keys count once.
  virtual void Claim(std::vector<LeaseKey> keys, Owner owner, Duration ttl,
                     Callback<ClaimOutcome> done) = 0;

  // Extends the keys `owner` holds to now + ttl; reports the others as lost
  // (never claims them).
  virtual void Renew(std::vector<LeaseKey> keys, Owner owner, Duration ttl,
                     Callback<RenewOutcome> done) = 0;

  // Compare-and-delete: deletes each key `owner` holds (the listener sees a
  // kReleased free for each) and reports the others as not held.
  virtual void Release(std::vector<LeaseKey> keys, Owner owner, Callback<ReleaseOutcome> done) = 0;

  // Every live lease, sorted by key, for reconciliation.
  virtual void ListLeases(Callback<std::vector<Lease>> done) = 0;

  // ---- Record log (opaque records; the server decides their content) ----

  // Hands over the records stored before this store was opened. Call it
  // once, at startup, before appending; a second call fails with
  // kFailedPrecondition.
  virtual void TakeRecovered(Callback<Recovered> done) = 0;

  // Adds `record` to the log; `done` runs once it is durable (or with the
  // error that kept it from being so). Appends are batched: they become
  // durable together at the next Flush().
  virtual void Append(std::string record, DoneCallback done) = 0;

  // Makes every record appended so far durable as one batch (one fsync for
  // the journal) and completes their callbacks.
  virtual void Flush() = 0;

  // Replaces the whole log with `snapshot` (the server's current state),
  // atomically: after a crash the log is either the old one or the snapshot.
  // Live leases are kept. Records appended earlier are flushed first;
  // `done` may run later (a file journal in background mode compacts on
  // its helper thread), and what is appended meanwhile follows the snapshot.
  virtual void Compact(std::vector<std::string> snapshot, DoneCallback done) = 0;

  // About how many bytes the log holds; the server compacts when it grows.
  virtual uint64_t LogBytes() const = 0;
};

}  // namespace drover::store

#endif  // DROVER_STORE_STORE_H_
