// Journal: an append-only file of records with group fsync, torn-tail
// recovery and crash-safe compaction.
//
// Records are opaque byte strings (the server decides their content). On
// disk each is framed as
//     length  u32 little-endian   (payload bytes)
//     crc     u32 little-endian   (CRC-32C of the 4 length bytes + payload)
//     payload
// so a record is either read back whole and verified or not at all.
//
// Group commit: Append() only buffers; Sync() writes the whole batch with one
// write and one fsync and then completes the callback of every record in it.
// The caller (the server shell) calls Sync() once per turn of its event loop,
// so many state changes share one fsync.
//
// Background sync: an fsync takes milliseconds on some disks, and the owner's
// event loop should not stop for it. SyncInBackground() hands the batch to a
// helper thread and returns at once; records appended meanwhile form the next
// batch, written once this one is reaped (one batch in flight at a time, in
// order). The helper calls `wake` when done; the owner then calls
// ReapIfDone() on its own thread, which applies the outcome and runs the
// callbacks there. Sync(), Compact() and the destructor first wait for a
// batch in flight (the destructor drops its callbacks).
//
// Recovery: Open() replays every whole record. A torn tail (a partial header,
// a partial payload, a CRC mismatch — what a crash during an unsynced write
// leaves) ends the replay: the file is truncated at the last good record and
// the number of bytes cut is reported. Everything before it is intact.
//
// Compaction: Compact(snapshot) replaces the journal with the snapshot
// records: write "<path>.compact", fsync it, rename it over <path>, fsync the
// directory. A crash at any point leaves either the old journal or the new
// one, whole; Open() removes a leftover temporary file.
// CompactInBackground() does the same on the helper thread (a snapshot of a
// million records is a few hundred MB to frame, write and fsync: seconds of
// the owner's loop otherwise). It is a flight like a batch: records
// appended meanwhile are buffered and go into the new journal right after
// it is reaped.
//
// Errors: a failed write (a full disk is kResourceExhausted) fails the batch
// being written: the partial bytes are cut off again so what was durable
// stays durable and readable, and the journal stays usable (append again
// once there is room). A failed fsync (or a failed cut, or a failed
// directory sync during compaction) makes the journal *broken*: every later
// call fails with that error until the journal is reopened, because the
// kernel may have dropped the unsynced pages. A record whose callback got an
// error may or may not be replayed after a crash (an unknown outcome, like a
// timed-out request); a record whose callback got OK always is.
//
// Thread safety: one thread (the server's event loop) owns a Journal and
// makes every call; the only other thread is the helper of a background
// sync, which touches nothing but its batch and the file.
#ifndef DROVER_STORE_JOURNAL_H_
#define DROVER_STORE_JOURNAL_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/status.h"
#include "store/env.h"

namespace drover::store {

// What Open() found in an existing journal.
struct JournalReplay {
  std::vector<std::string> records;  // in append order
  uint64_t valid_bytes = 0;          // bytes of whole records kept
  uint64_t discarded_bytes = 0;      // torn tail cut off (0 after a clean stop)
};

class Journal {
 public:
  using DoneCallback = std::function<void(Status)>;

  // Largest payload accepted; a larger length field in a file is treated as
  // corruption.
  static constexpr uint32_t kMaxRecordBytes = 64u << 20;
  static constexpr size_t kHeaderBytes = 8;

  // Opens the journal at `path` (creating it, and making its name durable,
  // if missing), replays it into `*replay` and truncates a torn tail.
  // Errors: the file cannot be read, created or truncated. `env` must
  // outlive the journal.
  static Result<std::unique_ptr<Journal>> Open(Env& env, std::string path, JournalReplay* replay);

  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;
  ~Journal();

  // Buffers `record`; `done` runs at the next Sync() with its outcome. If the
  // record is larger than kMaxRecordBytes or the journal is broken, `done`
  // runs at once with that error. `done` may append again.
  void Append(std::string_view record, DoneCallback done);

  // Writes and fsyncs every buffered record as one batch, then runs their
  // callbacks with the batch's status, which it also returns. OK and cheap
  // when nothing is buffered (unless the journal is broken).
  Status Sync();

  // Starts writing and fsyncing the buffered records on a helper thread
  // (see the header comment) and returns. `wake` runs on that thread once
  // the batch is done and must make the owner call ReapIfDone() soon (post
  // it to the owner's loop); it may come after the batch was reaped
  // another way (Sync, Compact). With a batch already in flight, the
  // buffered records go out right after it is reaped. A broken journal
  // fails the buffered records at once, as Sync() does.
  void SyncInBackground(std::function<void()> wake);

  // Finishes the batch in flight, if any: applies its outcome (a failed
  // fsync breaks the journal, as in Sync()) and runs its callbacks, then
  // starts the next batch if SyncInBackground() was called meanwhile.
  void ReapBackground();
  // ReapBackground when the batch in flight is done; otherwise nothing
  // (false): a wake-up that meets a later batch than its own leaves it to
  // that batch's wake-up instead of waiting for the helper thread.
  bool ReapIfDone();

  bool sync_in_flight() const { return flight_ != nullptr; }

  // Replaces the journal's contents with `snapshot`, atomically (see the
  // header comment). Buffered records are synced into the old journal first.
  // On an error before the rename the old journal stays in use and intact;
  // after it, the journal is broken.
  Status Compact(std::vector<std::string> snapshot);
  // Compact on the helper thread: buffered records are first synced into
  // the old journal (here, as Sync() does); the snapshot is then framed,
  // written, fsynced and renamed there, and `done` runs from
  // ReapBackground() (wake as for SyncInBackground) with what Compact would
  // have returned. An error before the work starts (a record over the
  // limit, a failed sync, a broken journal) runs `done` at once.
  void CompactInBackground(std::vector<std::string> snapshot, std::function<void()> wake,
                           DoneCallback done);
  // The same with `prefix` framed before each of the first `prefixed`
  // records, as if it began each of them (a store's mark of its record
  // kind): inserting it into a million strings took ~100 ms of the owner's
  // loop; here the helper thread does it while framing.
  void CompactInBackground(std::vector<std::string> snapshot, std::string prefix, size_t prefixed,
                           std::function<void()> wake, DoneCallback done);

  // Bytes of records that are durable in the file.
  uint64_t durable_bytes() const { return durable_bytes_; }
  // Records appended and not yet synced.
  size_t pending_records() const { return pending_callbacks_.size(); }
  // Non-OK once the journal is broken.
  const Status& broken() const { return broken_; }

  // Appends the on-disk frame of `record` to `*out`. Exposed for tests.
  static void EncodeRecord(std::string_view record, std::string* out);
  // The frame of `prefix` followed by `record`, as one record.
  static void EncodeRecord(std::string_view prefix, std::string_view record, std::string* out);

 private:
  Journal(Env& env, std::string path, std::unique_ptr<WritableFile> file, uint64_t size);

  // Marks the journal broken with `status` (with context).
  void Break(const Status& status);

  // A batch written by the helper thread of a background sync.
  struct Flight {
    std::string batch;
    std::vector<DoneCallback> callbacks;
    // Set by the helper.
    Status status;      // the batch's outcome
    bool written = false;  // the write succeeded (so a failure is the fsync's)
    Status cut_status;  // cutting off a failed write
    // A compaction (CompactInBackground) instead of a batch: the snapshot,
    // and what the helper made of it.
    bool compaction = false;
    std::vector<std::string> snapshot;
    std::string prefix;  // before each of the first `prefixed` records
    size_t prefixed = 0;
    DoneCallback compact_done;
    std::unique_ptr<WritableFile> new_file;  // set once renamed over path_
    uint64_t new_bytes = 0;
    Status dir_status;  // the directory's fsync after the rename
  };
  // A record over kMaxRecordBytes in a snapshot is refused.
  static Status CheckSnapshot(const std::vector<std::string>& snapshot, size_t prefix_bytes = 0,
                              size_t prefixed = 0);
  // The writing part of a compaction (Compact, or the helper thread's for
  // CompactInBackground): frames `flight.snapshot` into the temporary file,
  // fsyncs and renames it. Touches only the Env and those files.
  void WriteCompaction(Flight& flight);
  // The owner's part after it: takes the new file into use and returns
  // what Compact returns.
  Status FinishCompaction(Flight& flight);
  // Hands `flight_` to the helper thread (starting it the first time).
  void Launch();
  // Writes and fsyncs `batch` at `offset`; on a failed write cuts it off
  // again. Touches only `file`, so the helper thread may run it.
  static void WriteBatch(WritableFile& file, uint64_t offset, Flight& flight);

  Env& env_;
  std::string path_;
  std::unique_ptr<WritableFile> file_;
  uint64_t durable_bytes_;
  std::string pending_;  // framed records not yet written
  std::vector<DoneCallback> pending_callbacks_;
  Status broken_;

  std::unique_ptr<Flight> flight_;  // the batch in flight, if any
  std::function<void()> wake_;

  // The helper thread lives as long as the journal once the first
  // background sync starts it (a thread per batch cost ~100 us of the
  // owner's loop per sync on a VM). Guarded by mu_: the handed-over batch
  // (job_*), the helper's "done" flag and stop_.
  void HelperLoop();
  std::thread helper_;
  std::mutex mu_;
  std::condition_variable cv_;
  Flight* job_flight_ = nullptr;  // set by the owner, cleared by the helper
  WritableFile* job_file_ = nullptr;
  uint64_t job_offset_ = 0;
  std::function<void()> job_wake_;
  bool job_done_ = false;  // the helper finished job_flight_
  bool stop_ = false;
  bool again_ = false;  // SyncInBackground() was called during a flight
};

}  // namespace drover::store

#endif  // DROVER_STORE_JOURNAL_H_
