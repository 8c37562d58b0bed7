// MemoryEnv: an in-memory file system with fault injection, for tests.
//
// It follows env.h's durability model exactly, so a test can ask "what would
// be on disk if the machine lost power right now?": SimulateCrash() throws
// away every byte not yet Sync()ed and every name change not yet SyncDir()ed,
// and invalidates open handles. Faults:
//   - SetFreeSpace(n): appends beyond n more bytes write what fits and fail
//     with kResourceExhausted ("no space left"), like ENOSPC;
//   - FailSyncs(true): Sync()/SyncDir() fail with kUnavailable, like EIO;
//   - HoldSyncs(true): a file's Sync() waits until HoldSyncs(false), like a
//     slow disk (for a test to look at a sync in progress);
//   - CrashAfterOps(n): the machine "dies" after n more mutating operations
//     (append, sync, truncate, create, rename, remove, sync-dir): every later
//     mutating call fails with kUnavailable until SimulateCrash(). Looping n
//     over 0..MutatingOps() visits a crash between every pair of steps.
//
// Directories exist implicitly (CreateDirs always succeeds).
//
// Thread safety: all methods, handles included, are serialised by a mutex.
#ifndef DROVER_STORE_MEMORY_ENV_H_
#define DROVER_STORE_MEMORY_ENV_H_

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "store/env.h"

namespace drover::store {

class MemoryEnv final : public Env {
 public:
  MemoryEnv() = default;

  Result<std::string> ReadFile(const std::string& path) override;
  Result<std::unique_ptr<WritableFile>> OpenAppendable(const std::string& path) override;
  Result<std::unique_ptr<WritableFile>> CreateTruncated(const std::string& path) override;
  Status Rename(const std::string& from, const std::string& to) override;
  Status Remove(const std::string& path) override;
  bool Exists(const std::string& path) override;
  Status CreateDirs(const std::string& path) override;
  Status SyncDir(const std::string& dir) override;

  // --- Test controls ---

  // Replaces `path`'s contents, durably (as if written, synced and its
  // directory synced). Creates the file if missing.
  void SetFile(const std::string& path, std::string contents);

  // Names that currently exist, sorted.
  std::vector<std::string> ListFiles();

  // Limits the bytes that later appends may add; nullopt = unlimited.
  // Truncating a file gives its cut bytes back.
  void SetFreeSpace(std::optional<uint64_t> bytes);

  void FailSyncs(bool fail);
  void HoldSyncs(bool hold);

  // See the header comment; nullopt disarms.
  void CrashAfterOps(std::optional<uint64_t> ops);

  // Mutating operations performed so far (successful or failed).
  uint64_t MutatingOps();

  // Loses power: keeps only synced bytes (plus at most `keep_unsynced`
  // unsynced bytes per file, to model a torn write) and synced names.
  // Handles opened before the crash fail every later call.
  void SimulateCrash(uint64_t keep_unsynced = 0);

 private:
  struct Inode {
    std::string data;
    uint64_t synced = 0;  // bytes of `data` known to be on disk
  };
  class Handle;
  using InodePtr = std::shared_ptr<Inode>;

  // Counts a mutating operation; returns the "crashed" error when the
  // machine is down. Requires mu_.
  Status BeginMutation();
  Result<std::unique_ptr<WritableFile>> Open(const std::string& path, bool truncate);

  std::mutex mu_;
  std::map<std::string, InodePtr> names_;          // the namespace as seen now
  std::map<std::string, InodePtr> durable_names_;  // the namespace after a crash
  std::optional<uint64_t> free_space_;
  bool fail_syncs_ = false;
  bool hold_syncs_ = false;
  std::condition_variable syncs_released_;
  std::optional<uint64_t> crash_after_;
  bool down_ = false;
  uint64_t ops_ = 0;
  uint64_t epoch_ = 0;  // bumped by SimulateCrash; stale handles fail
};

}  // namespace drover::store

#endif  // DROVER_STORE_MEMORY_ENV_H_
