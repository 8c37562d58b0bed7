// FileStore: the server's content-addressed store of files (docs/design.md,
// "Data plane"): the checkpoints that follow a task from worker to worker,
// and the files a client uploads for its tasks (input_files).
//
//   <state_dir>/files/<sha256>           a blob, mode 0400, named by its SHA-256
//   <state_dir>/files/.upload-<random>   an upload in progress (net::Server)
//
// Blobs arrive through `PUT /api/v1/files/{sha256}` (AddFileRoutes below):
// the body is streamed to a temporary file in the store's directory and
// hashed on the way (net::Server::UploadRoute), then Commit checks the hash
// against the name, syncs the file and renames it into place. A mismatch
// or a full disk leaves no file behind.
//
// References. A job's uploaded input files are held under the task index
// UINT32_MAX of the job (server_shell.cc, from its JobRecord) until the job
// is forgotten. A blob is kept while some task's latest checkpoint names it
// (SetTaskFiles, from the journal's checkpoint records as the core writes
// or replays them) and deleted when its last reference goes: the task's
// next checkpoint replaced it, or its job was forgotten (ForgetJob, from
// the job's tombstone). A blob uploaded but not (yet) referenced stays: a
// worker uploads first and names the files after. While the journal is
// replayed at start nothing is deleted; afterwards Sweep removes the
// unreferenced blobs older than a grace (uploads of a save that never
// finished).
//
// Holders. A job's files are its user's (server/access.h, "Contents"), so
// a user reads only the blobs they may read as a holder's: those they
// uploaded in this server's life (PUT), those a job of theirs names (its
// input_files, also replayed from the journal at start) or a checkpoint of
// theirs is made of, and those of the members of a group that shares its
// contents. To anyone else a held blob is absent (HEAD and GET answer 404,
// as for no blob), so a user cannot learn whether another's file is here by
// its hash, nor name it in a job: they upload it again, which is a no-op on
// the disk and makes them a holder. Admins and workers are not filtered
// (viewers may not read files at all).
//
// Thread safety: none; the server's loop thread only.
#ifndef DROVER_SERVER_FILE_STORE_H_
#define DROVER_SERVER_FILE_STORE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/ids.h"
#include "common/status.h"
#include "common/time.h"
#include "net/server.h"

namespace drover::server {

struct FileStoreStats {
  uint64_t blobs = 0;
  uint64_t bytes = 0;
  uint64_t deleted = 0;  // blobs deleted since start
};

class FileStore {
 public:
  // Opens (creates, 0700) the store in `dir`: removes leftover uploads,
  // indexes the blobs. Fails when the directory cannot be made or read.
  static Result<std::unique_ptr<FileStore>> Open(const std::string& dir);
  FileStore(const FileStore&) = delete;
  FileStore& operator=(const FileStore&) = delete;

  // Where uploads are written (the same file system as the blobs).
  const std::string& dir() const { return dir_; }
  bool Has(const std::string& sha256) const { return blobs_.count(sha256) > 0; }
  // The blob's path and size; kNotFound when absent.
  Result<std::pair<std::string, uint64_t>> Find(const std::string& sha256) const;

  // Takes the uploaded file as blob `sha256`. kInvalidArgument when the
  // upload's hash differs ("the body's SHA-256 is ..., not ..."); an error
  // naming the path when it cannot be synced or renamed
  // (kResourceExhausted with "no space left on device" for a full disk).
  // A blob already present makes this a no-op. Either way the caller's
  // temporary file is the caller's to remove (net::Server does).
  Status Commit(const net::Upload& upload, const std::string& sha256);

  // The files of `task`'s latest checkpoint (replacing its earlier list);
  // blobs left without a reference are deleted (not while replaying).
  void SetTaskFiles(TaskId task, const std::vector<std::string>& sha256s);
  // Drops the references of every task of `job`, as SetTaskFiles would.
  void ForgetJob(JobId job);
  // While true, no blob is deleted (the journal's replay at start).
  void SetReplaying(bool replaying) { replaying_ = replaying; }
  // Deletes the blobs no task references whose file is older than
  // `before`; returns how many.
  size_t Sweep(Time before);

  // Makes `user` a holder of `sha256` (a no-op when the blob is absent).
  void AddHolder(const std::string& sha256, const std::string& user);
  // Whether `user` holds `sha256` (false when the blob is absent).
  bool HeldBy(const std::string& sha256, const std::string& user) const;
  // Whose blobs a requester may read: true for a holder whose blobs they
  // may read. Empty: every blob (an admin, a worker).
  using Readable = std::function<bool(const std::string& holder)>;
  // Whether the blob is here as a requester who reads `reads` may see it:
  // Has when `reads` is empty, else some holder of it `reads` is true of.
  bool HasFor(const std::string& sha256, const Readable& reads) const;

  FileStoreStats stats() const;
  // How many references `sha256` has (tests).
  uint32_t references(const std::string& sha256) const;

 private:
  explicit FileStore(std::string dir) : dir_(std::move(dir)) {}
  void Unref(const std::string& sha256);
  void Delete(const std::string& sha256);

  const std::string dir_;
  std::unordered_map<std::string, uint64_t> blobs_;  // sha256 -> size
  std::unordered_map<std::string, uint32_t> refs_;
  std::map<TaskId, std::vector<std::string>> by_task_;
  std::unordered_map<std::string, std::vector<std::string>> holders_;  // sha256 -> users
  bool replaying_ = false;
  uint64_t bytes_ = 0;
  uint64_t deleted_ = 0;
};

// The store's routes on `server`, behind the cluster token like every route:
//   PUT  /api/v1/files/{sha256}  body streamed into the store (at most
//        `max_upload_bytes`); 201 {"sha256","size"} (200 when it was there),
//        400 for a malformed name or a body whose hash differs, 411, 413,
//        507 as net::Server::UploadRoute says
//   HEAD /api/v1/files/{sha256}  200 with X-Drover-Size, or 404 (no body)
//   GET  /api/v1/files/{sha256}  the blob, streamed from disk, or 404
// `reads_of`, when set, gives a requester's Readable: for one whose reads
// follow the holders (a user) a non-empty one, and their PUT makes them a
// holder; HEAD and GET answer 404 for a blob no holder they read holds.
void AddFileRoutes(net::Server& server, FileStore& store, uint64_t max_upload_bytes,
                   std::function<FileStore::Readable(const net::Identity&)> reads_of = nullptr);

}  // namespace drover::server

#endif  // DROVER_SERVER_FILE_STORE_H_
