// FileCache: a worker's content-addressed store of task files, the local end
// of the data plane. A file fetched from a peer (fetch.h) or produced by a
// task here (Adopt) is kept once, named by its SHA-256, and hard-linked into
// the input directory of each task that needs it.
//
//   <dir>/<sha256>                   an entry, mode 0444
//   <dir>/<sha256>.<random>.part     a fetch in progress (BeginFetch)
//
// Accounting: the cache counts the bytes of its entries against `capacity`
// (0 = no cap) and the bytes promised to fetches in progress. Room is made
// by evicting the least recently used entry that no task pins. "Recently
// used" is a logical clock (one tick per Adopt, CommitFetch and LinkInto),
// not wall time; at Open() the existing entries are ordered by their
// max(atime, mtime), ties by name.
//
// Integrity: an entry's (inode, size, mtime, ctime) are remembered when it
// is taken in. LinkInto compares them with stat() first; an entry changed
// behind the cache's back is re-hashed, and dropped if its content no longer
// matches its name. At Open() entries are trusted as found, except those
// whose mode is not 0444 (someone made them writable), which are re-hashed.
// The cache's own links are remembered, but a link added or removed by
// someone else (a task directory deleted) also changes the ctime, so the
// next LinkInto of that entry re-hashes it once.
//
// Hard links share the inode: the task's file and the cache entry are the
// same file, and making the entry 0444 makes the task's file 0444 too.
// Tasks get inputs read-only on purpose.
//
// Keeping (docs/design.md, "Data plane", retention): a succeeded task's
// outputs are kept under its job id (Keep) until the server releases the
// job (Unkeep). A kept entry is never evicted, like a pinned one; a fetch
// that cannot make room past kept and pinned entries fails as usual
// (kResourceExhausted). Keeps survive a restart: each job's are recorded
// in `<dir>/.keep/<job id>`, one SHA-256 a line, appended (one write per
// Keep call; a line torn by a crash is ignored at Open, and it belonged to
// outputs whose task was never reported); Open() reads them back before it
// evicts anything, and Unkeep removes the file.
//
// Thread safety: all methods are safe to call from any thread; one mutex
// guards the index. Hashing and copying run outside it (the entry concerned
// is held pinned meanwhile so that it cannot be evicted).
#ifndef DROVER_WORKER_FILES_FILE_CACHE_H_
#define DROVER_WORKER_FILES_FILE_CACHE_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/status.h"

namespace drover::worker {

struct FileCacheStats {
  uint64_t bytes = 0;     // of the entries present
  uint64_t capacity = 0;  // 0 = no cap
  uint64_t entries = 0;
  uint64_t hits = 0;    // Has() answered true
  uint64_t misses = 0;  // Has() answered false
  uint64_t evictions = 0;
  uint64_t kept_jobs = 0;  // jobs whose outputs are kept (Keep, not yet Unkeep)
};

class FileCache {
 public:
  // Opens the cache at `dir`, creating it (0700, parents too) if missing.
  // Removes "*.part" leftovers of interrupted fetches, indexes the files
  // named by a SHA-256 (other names are left alone, with a warning), and
  // reads back the keeps of `<dir>/.keep/`, and evicts down to
  // `capacity_bytes` if the cache is over it (never a kept entry: then it
  // stays over, with a warning). Fails when the directory cannot be created
  // or read.
  static Result<std::unique_ptr<FileCache>> Open(const std::string& dir, uint64_t capacity_bytes);

  FileCache(const FileCache&) = delete;
  FileCache& operator=(const FileCache&) = delete;
  ~FileCache();

  // Whether the entry is present; counts a hit or a miss.
  bool Has(const std::string& sha256);

  // Takes the existing file at `path` into the cache under `sha256` (which
  // the caller computed; not checked) and `size` (checked against the
  // file; a symlink is followed): a hard link when on the same file system
  // (the file becomes 0444), else a copy (0444). An existing entry makes
  // this a no-op. Makes
  // room as BeginFetch does and fails the same way (kResourceExhausted);
  // kInvalidArgument for a malformed sha256 or a size that differs.
  Status Adopt(const std::string& path, const std::string& sha256, uint64_t size);

  // Hard-links the entry at `dest`, creating its parent directories; a copy
  // (0444) when linking is impossible (EXDEV: another file system; EMLINK;
  // EPERM from protected_hardlinks). Marks the entry used. kNotFound when
  // the entry is absent or was found tampered with (then it is dropped and
  // a warning logged). `dest` must not exist (kAlreadyExists otherwise).
  Status LinkInto(const std::string& sha256, const std::string& dest);

  // A running task holds the entry: it is never evicted while pinned. Pins
  // are counted (two Pins need two Unpins) and may be taken before the
  // entry arrives (pin, then fetch). Unpin of an unpinned entry is ignored.
  void Pin(const std::string& sha256);
  void Unpin(const std::string& sha256);

  // Keeps the entries `sha256s` for `job` (adding to what it keeps): none
  // of them is evicted until Unkeep(job). As with Pin, an entry may be kept
  // before it arrives. Records the keep in `<dir>/.keep/<job>` first; when
  // that fails the keep still holds in memory (for this run only) and the
  // error is returned. kInvalidArgument for a malformed sha256 (nothing is
  // kept then).
  Status Keep(uint64_t job, const std::vector<std::string>& sha256s);
  // Drops `job`'s keep and its record: its entries that no other job keeps
  // and no task pins become evictable (they are not removed now). Unknown
  // jobs are ignored.
  void Unkeep(uint64_t job);
  // The jobs kept, ascending.
  std::vector<uint64_t> KeptJobs() const;
  // Whether some job keeps the entry.
  bool Kept(const std::string& sha256) const;

  // Makes room for `size` more bytes, evicting least recently used unpinned
  // entries, reserves them, and returns a fresh temporary path
  // "<dir>/<sha256>.<random>.part" for the caller to create and write.
  // Kept entries are not evicted either. Nothing is evicted when evicting
  // could not make enough room; then kResourceExhausted: "cache of 50 MiB
  // cannot hold 200 MiB for <sha>: 10 MiB are pinned by running tasks, 40
  // MiB are kept for unreleased jobs (drover server --keep-outputs) and 0 B
  // are being fetched".
  // Every successful BeginFetch must end in CommitFetch or AbortFetch.
  Result<std::string> BeginFetch(const std::string& sha256, uint64_t size);

  // Makes the finished temporary file 0444, renames it into place and
  // accounts it; releases the reservation. If the entry arrived meanwhile
  // (another fetch), the temporary file is removed and this succeeds. On
  // failure (a file whose size is not `size`, a rename error) the temporary
  // file is removed.
  Status CommitFetch(const std::string& part_path, const std::string& sha256, uint64_t size);

  // Removes the temporary file and releases its reservation. Never fails.
  void AbortFetch(const std::string& part_path);

  // Where the entry lives (it may not exist).
  std::string PathOf(const std::string& sha256) const;

  FileCacheStats stats() const;

 private:
  struct Fingerprint {
    ino_t ino = 0;
    uint64_t size = 0;
    int64_t mtime_ns = 0;
    int64_t ctime_ns = 0;
    friend bool operator==(const Fingerprint&, const Fingerprint&) = default;
  };
  struct Entry {
    uint64_t size = 0;
    uint64_t last_use = 0;
    Fingerprint fp;
  };

  FileCache(std::string dir, uint64_t capacity);

  static Result<Fingerprint> FingerprintOf(const std::string& path);

  // All below: mu_ held.
  void TouchLocked(const std::string& sha256, Entry& e);
  void InsertLocked(const std::string& sha256, uint64_t size, const Fingerprint& fp);
  void RemoveLocked(const std::string& sha256);  // from the index and the disk
  bool PinnedLocked(const std::string& sha256) const;
  bool KeptLocked(const std::string& sha256) const;
  void KeepLocked(uint64_t job, const std::string& sha256);
  std::string KeepPathOf(uint64_t job) const;
  // Reads `<dir>/.keep/` (at Open).
  Status LoadKeepsLocked();
  // Evicts LRU unpinned entries until `size` more bytes fit, or fails
  // without evicting anything when they cannot.
  Status MakeRoomLocked(const std::string& sha256, uint64_t size);

  const std::string dir_;
  const uint64_t capacity_;

  mutable std::mutex mu_;
  std::unordered_map<std::string, Entry> entries_;
  std::set<std::pair<uint64_t, std::string>> lru_;  // (last_use, sha256), oldest first
  std::unordered_map<std::string, int> pins_;
  std::map<uint64_t, std::set<std::string>> keeps_;  // job -> entries it keeps
  std::unordered_map<std::string, int> kept_;        // entry -> jobs keeping it
  std::map<std::string, uint64_t> reserved_;         // part path -> bytes promised
  uint64_t reserved_bytes_ = 0;
  uint64_t clock_ = 0;
  std::mt19937_64 rng_;
  FileCacheStats stats_;
};

// The default capacity: a quarter of the free space of the file system
// holding `dir` (or its nearest existing parent), at least 1 GiB unless the
// free space is smaller. 1 GiB when statvfs fails.
uint64_t DefaultCacheCapacity(const std::string& dir);

}  // namespace drover::worker

#endif  // DROVER_WORKER_FILES_FILE_CACHE_H_
