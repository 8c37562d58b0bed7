// Env: the store's one door to the file system.
//
// Every file operation the journal needs goes through this interface, in the
// manner of LevelDB's Env, so that tests can run the journal on an in-memory
// file system that injects faults (a full disk, a failing fsync, a crash
// between two steps of a compaction) without touching a real disk.
// Implementations: PosixEnv (posix_env.h) and MemoryEnv (memory_env.h).
//
// Durability model (what the journal relies on, and what MemoryEnv models):
// bytes appended to a file survive a crash only after that file's Sync();
// creating, renaming or removing a name survives a crash only after
// SyncDir() on the directory holding it.
//
// Thread safety: an Env may be shared between threads; a WritableFile
// belongs to one thread.
#ifndef DROVER_STORE_ENV_H_
#define DROVER_STORE_ENV_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"

namespace drover::store {

// A file open for appending. Not copyable; closes on destruction.
class WritableFile {
 public:
  WritableFile() = default;
  WritableFile(const WritableFile&) = delete;
  WritableFile& operator=(const WritableFile&) = delete;
  virtual ~WritableFile() = default;

  // Writes all of `data` at the end of the file. On failure (a full disk
  // is kResourceExhausted, other I/O errors kUnavailable) a prefix of
  // `data` may have been written; the caller can Truncate() it away.
  virtual Status Append(std::string_view data) = 0;

  // Makes everything appended so far durable (fsync). A failure means the
  // unsynced bytes may or may not be on disk; treat the file as suspect.
  virtual Status Sync() = 0;

  // Cuts the file to `size` bytes; later appends continue from there.
  virtual Status Truncate(uint64_t size) = 0;

  // The file's size as this handle sees it (appended bytes included).
  virtual uint64_t Size() const = 0;
};

class Env {
 public:
  Env() = default;
  Env(const Env&) = delete;
  Env& operator=(const Env&) = delete;
  virtual ~Env() = default;

  // Reads the whole file. kNotFound if it does not exist.
  virtual Result<std::string> ReadFile(const std::string& path) = 0;

  // Files an Env opens for writing are the owner's only (0600 on disk; an
  // existing file is narrowed): the journal and its snapshots hold jobs'
  // environment variables.

  // Opens `path` for appending at its end, creating it empty if missing.
  // A newly created name is durable only after SyncDir().
  virtual Result<std::unique_ptr<WritableFile>> OpenAppendable(const std::string& path) = 0;

  // Creates `path` empty, replacing any file of that name.
  virtual Result<std::unique_ptr<WritableFile>> CreateTruncated(const std::string& path) = 0;

  // Atomically replaces `to` with `from` (rename(2)). Open handles keep
  // referring to the same file under its new name.
  virtual Status Rename(const std::string& from, const std::string& to) = 0;

  // Removes `path`; kNotFound if it does not exist.
  virtual Status Remove(const std::string& path) = 0;

  virtual bool Exists(const std::string& path) = 0;

  // Creates the directory (and missing parents); OK if it already exists.
  virtual Status CreateDirs(const std::string& path) = 0;

  // Makes the creations, renames and removals of names in `dir` durable.
  virtual Status SyncDir(const std::string& dir) = 0;
};

// The directory part of `path` ("a/b/journal" -> "a/b", "journal" -> ".").
std::string DirName(const std::string& path);

// `dir` + "/" + `name`.
std::string JoinPath(std::string_view dir, std::string_view name);

}  // namespace drover::store

#endif  // DROVER_STORE_ENV_H_
