// RedisJournal: the record log of a RedisStore, kept in one Redis stream
// (`<prefix>journal`), one entry per record with the record as field "r".
//
//   TakeRecovered  XRANGE in pages of 1000 entries ("(" + last id to go on)
//   Append         queued in memory until Flush()
//   Flush          one XADD per record, pipelined on the connection; each
//                  record's callback runs on its XADD's reply
//   Compact        MULTI, DEL stream, XADD each snapshot record, EXEC: Redis
//                  applies the transaction as a whole, so a reader (or a
//                  restart from the AOF) sees the old log or the snapshot
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

  // Sends the queued records; with `conn` null their callbacks get
  // kUnavailable at once.
  void Flush(RedisConnection* conn);

  // Flushes, then replaces the stream with `snapshot` atomically.
  void Compact(RedisConnection* conn, std::vector<std::string> snapshot, Store::DoneCallback done);

  // Bytes of records recovered, appended and compacted into the stream
  // since this journal was made (an estimate: Redis's overhead not counted).
  uint64_t LogBytes() const { return bytes_; }

 private:
  struct Recovery;
  void ReadPage(RedisConnection& conn, std::shared_ptr<Recovery> recovery, std::string start);

  std::string key_;
  std::vector<std::pair<std::string, Store::DoneCallback>> queued_;
  bool recovered_taken_ = false;
  bool recovery_running_ = false;
  uint64_t bytes_ = 0;
};

}  // namespace drover::store

#endif  // DROVER_STORE_REDIS_JOURNAL_H_
