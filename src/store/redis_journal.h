// RedisJournal: the record log of a RedisStore, kept in one Redis stream
// (`<prefix>journal`), one entry per record with the record as field "r".
//
//   TakeRecovered  XRANGE in pages of 1000 entries ("(" + last id to go on)
//   Append         queued in memory until Flush(), with the next entry id
//   Flush          one XADD per record, pipelined on the connection; each
//                  record's callback runs on its XADD's reply
//   Compact        MULTI, DEL stream, XADD each snapshot record, EXEC: Redis
//                  applies the transaction as a whole, so a reader (or a
//                  restart from the AOF) sees the old log or the snapshot;
//                  with a fence (SetFence), one compact_fenced script that
//                  first checks the leader key, so a deposed leader's
//                  compaction changes nothing (kFailedPrecondition)
//
// Entry ids are chosen here, not by Redis: "<n>-0" with n one past the last
// id found at TakeRecovered and counting up. That makes a resend idempotent:
// Redis refuses an id not above the stream's top, so a record whose XADD
// was in flight when the connection dropped is sent again after the
// reconnection, and Redis's "equal or smaller" refusal of a resend means it
// had been stored. Records appended while disconnected wait (their
// callbacks do not run) until a Flush() with a connection, so a Redis
// restart loses no record the server appended.
//
// Durability is Redis's: a reply means the record is in Redis's memory and,
// with `appendonly yes`, in its AOF, which reaches the disk within a second
// (`appendfsync everysec`, the default) or before the reply
// (`appendfsync always`). A record whose XADD failed with kUnavailable (the
// connection dropped) may or may not have been stored.
//
// Thread safety: none; the store's loop thread.
#ifndef DROVER_STORE_REDIS_JOURNAL_H_
#define DROVER_STORE_REDIS_JOURNAL_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "store/redis_connection.h"
#include "store/store.h"

namespace drover::store {

class RedisJournal {
 public:
  explicit RedisJournal(std::string stream_key) : key_(std::move(stream_key)) {}

  // Reads the whole stream. `conn` null (disconnected): kUnavailable. A
  // second successful call: kFailedPrecondition.
  void TakeRecovered(RedisConnection* conn, Store::Callback<Recovered> done);

  // Queues `record` for the next Flush().
  void Append(std::string record, Store::DoneCallback done);

  // Sends the queued records, and those whose XADD was lost with a
  // connection; with `conn` null they stay queued.
  void Flush(RedisConnection* conn);

  // From now on each append checks, in the same atomic step, that
  // `leader_key` is held by `owner` (append_fenced); a refused one
  // completes with kFailedPrecondition ("not the leader").
  void SetFence(std::string leader_key, std::string owner) {
    fence_key_ = std::move(leader_key);
    fence_owner_ = std::move(owner);
  }

  // Completes every record not yet stored with `why` (the store is going).
  void FailAll(const Status& why);

  // Flushes, then replaces the stream with `snapshot` atomically. With a
  // fence, refused with kFailedPrecondition ("not the leader") when the
  // leader key is someone else's; the stream is then unchanged.
  void Compact(RedisConnection* conn, std::vector<std::string> snapshot, Store::DoneCallback done);

  // Bytes of records recovered, appended and compacted into the stream
  // since this journal was made (an estimate: Redis's overhead not counted).
  uint64_t LogBytes() const { return bytes_; }

 private:
  struct Recovery;
  void ReadPage(RedisConnection& conn, std::shared_ptr<Recovery> recovery, std::string start);

  struct Entry {
    std::string record;
    Store::DoneCallback done;
    bool in_flight = false;  // an XADD was sent and has not been answered
    bool resend = false;     // an earlier XADD of it may have been stored
  };
  void Send(RedisConnection& conn, uint64_t seq, Entry& entry);
  std::string Id(uint64_t seq) const { return std::to_string(seq) + "-0"; }

  std::string key_;
  std::string fence_key_;
  std::string fence_owner_;             // empty: plain XADD
  std::map<uint64_t, Entry> unstored_;  // by id, appended and not yet stored
  uint64_t next_seq_ = 1;
  bool recovered_taken_ = false;
  bool recovery_running_ = false;
  uint64_t bytes_ = 0;
};

}  // namespace drover::store

#endif  // DROVER_STORE_REDIS_JOURNAL_H_
