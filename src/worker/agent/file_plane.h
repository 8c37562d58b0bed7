// FilePlane: the worker's side of the data plane: its content-addressed
// cache of files (worker/files), the TLS file service other workers fetch
// from, the fetching of a task's inputs and uploads before it starts (peer
// to peer; through the server only when no holder could be reached), the
// collecting of a succeeded task's outputs (kept for their job until the
// server releases it), and the checkpoints saved to and restored from the
// server. The rules it carries out, and why: docs/design.md, "Data plane";
// the cache and the checked download: src/worker/files/README.md.
//
// Serving: `GET /v1/files/<sha256>` answers a file from the cache only
// against a grant (header X-Drover-Grant, net/grant.h) signed by the
// server's key for that file and for the requester named in
// X-Drover-Requester, not expired. Any other request is refused (400 / 403
// / 404) and logged with its reason.
//
// Test hook: the environment variable DROVER_TEST_CORRUPT_SERVES=N makes the
// service flip one byte of the first N files it serves (for tests of the
// fetcher's check).
//
// Thread safety: slow work (hashing, transfers) runs on threads of its own;
// everything else belongs to the loop thread. Every `done` is called on the
// loop thread, and never after the FilePlane is gone.
#ifndef DROVER_WORKER_AGENT_FILE_PLANE_H_
#define DROVER_WORKER_AGENT_FILE_PLANE_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/ids.h"
#include "common/status.h"
#include "core/model.h"
#include "net/client_options.h"
#include "net/event_loop.h"
#include "proto/messages.h"
#include "worker/exec/spare_dirs.h"  // HasEntries

namespace drover::worker {

struct FilePlaneOptions {
  std::string cache_dir;     // <workdir>/cache
  std::string tls_dir;       // <workdir>/files-tls: the service's certificate
  uint64_t cache_bytes = 0;  // 0: worker/files DefaultCacheCapacity
  std::string bind_address = "0.0.0.0";
  uint16_t port = 0;                     // 0: any free port (sent to the server in Hello)
  std::string token;                     // the cluster token
  uint64_t max_output_bytes = 0;         // a task's outputs together; 0: no limit
  Duration fetch_timeout = Seconds(30);  // without progress
  const Clock* clock = &SystemClock();   // checks grants' expiry; must outlive the plane
};

// A limit on what a task's outputs may add up to, and whose it is.
struct OutputCap {
  uint64_t bytes = 0;  // 0: none
  std::string whose;   // "the task's", "the server's --max-output"
};
// What assignment `a` caps its task's outputs at (proto::Assignment::
// max_output_bytes).
OutputCap OutputCapOf(const proto::Assignment& a);

// What the service's `GET /v1/files-stats` answers (JSON, these fields).
struct FilePlaneStats {
  uint64_t served_files = 0;
  uint64_t served_bytes = 0;
  uint64_t refused = 0;
  uint64_t fetched_files = 0;
  uint64_t fetched_bytes = 0;
  // Of those, fetched through the server (no holder could be reached).
  uint64_t relayed_files = 0;
  uint64_t relayed_bytes = 0;
};

class FilePlane {
 public:
  // Opens the cache and starts the service. Errors name the directory or
  // the port.
  static Result<std::unique_ptr<FilePlane>> Start(net::EventLoop& loop, FilePlaneOptions options);
  ~FilePlane();  // stops the service, cancels transfers, joins the threads
  FilePlane(const FilePlane&) = delete;
  FilePlane& operator=(const FilePlane&) = delete;

  uint16_t port() const;
  const std::string& fingerprint() const;

  // From each HelloAck: the server's grant key and this worker's id (the
  // requester its own grants name).
  void Attached(std::string grant_key, WorkerId self);

  // True when every input file of `a` is in the cache.
  bool HasInputs(const proto::Assignment& a);
  // True when every file uploaded from the client for `a` (a.uploads) is
  // in the cache.
  bool HasUploads(const proto::Assignment& a);
  // Fetches a.uploads the cache lacks from the server's file store (checked
  // by size and SHA-256 like inputs). `done` on the loop thread.
  void FetchUploads(const proto::Assignment& a, std::function<void(Status)> done);
  // Links a.uploads, read-only, into `task_dir`/<name> and pins them for
  // the attempt (Release unpins).
  Status LinkUploads(const proto::Assignment& a, const std::string& task_dir);
  // Fetches what the cache lacks; `done` gets the first failure: with
  // kResourceExhausted when the disk or the cache is full ("no space left
  // on device"), else kUnavailable naming the file and each source's error.
  void Fetch(const proto::Assignment& a, std::function<void(Status)> done);
  // After a failed Fetch: a's inputs whose every tried holder sent other
  // bytes than their SHA-256 (the server drops those copies and reruns
  // their producer when none is left; proto::Refused::corrupt).
  std::vector<proto::CorruptInput> CorruptInputs(const proto::Assignment& a) const;
  // Links the input files into `inputs_dir`/<from>/<name> and pins them for
  // this attempt. kNotFound when one left the cache since Fetch.
  Status LinkInputs(const proto::Assignment& a, const std::string& inputs_dir);
  // The attempt ended: its input files may be evicted again.
  void Release(TaskId task, uint32_t attempt);

  // The outputs of a succeeded task whose output directory is `dir`; a
  // refusal (a socket, a link outside, over max_output) as the error.
  // `assigned` is the cap its assignment carried (OutputCapOf); the lower
  // of it and FilePlaneOptions::max_output_bytes applies, and the refusal
  // says whose it was: "outputs are 3.0 GiB, more than max_output 2 GiB
  // (the task's)" / "(worker --max-output)".
  // The files are kept for `job` (they are kept before they enter the
  // cache, so no fetch can evict them in between); a keep that cannot be
  // recorded on disk is logged and holds until the worker stops.
  void CollectOutputs(const std::string& dir, JobId job, const OutputCap& assigned,
                      std::function<void(Result<std::vector<core::OutputFile>>)> done);

  // The jobs whose outputs the cache keeps, ascending (what the worker
  // reports after each HelloAck).
  std::vector<JobId> KeptJobs() const;
  // A copy of another worker's outputs (replicas, proto::Replicate): keeps
  // them under `job` before they arrive, then fetches them like inputs.
  void FetchCopy(JobId job, const std::vector<proto::InputFile>& files,
                 std::function<void(Status)> done);
  // The server released these jobs' outputs: they become evictable.
  void ReleaseOutputs(const std::vector<JobId>& jobs);

  // The server this worker is attached to (its address, TLS pin, token):
  // where checkpoints go and come from. Set at each HelloAck.
  void SetServer(net::ClientOptions server);

  // Saves the checkpoint directory `dir` of `attempt` of `task`: lists and
  // hashes it (ScanOutputs: a link outside or a socket refuses the save),
  // uploads what the server lacks, then checks that no file changed since
  // the listing began. `done` gets the manifest to report (CheckpointSaved)
  // when the set differs from the last one reported for this attempt or a
  // file had to be uploaded; nullopt when there is nothing new, the
  // directory is empty, or a file changed meanwhile (this round is
  // skipped: tasks should write checkpoints atomically, a temporary file
  // renamed into place); an error for a refused listing, an unreachable
  // server or a refused upload. One save per task at a time: a periodic
  // call while one runs gets nullopt at once; a `final` one (the attempt
  // ended) runs after it.
  using SaveDone = std::function<void(Result<std::optional<std::vector<core::OutputFile>>>)>;
  void SaveCheckpoint(TaskId task, uint32_t attempt, const std::string& dir, bool final,
                      SaveDone done);
  // The attempt's end was saved and reported: forget what was reported.
  void ForgetCheckpoint(TaskId task);

  // Fetches `files` from the server into the cache (checked as inputs are)
  // and copies them into `dir` (made 0700 with its parents as the executor
  // makes them: 0711) in place of what it held (an older attempt's, from
  // this worker), owned by `owner` when given. `done`:
  // OK; kNotFound when the server no longer has a file (the attempt may
  // start from nothing); else the fetch's or the copy's error.
  void RestoreCheckpoint(const std::vector<core::OutputFile>& files, const std::string& dir,
                         std::optional<std::pair<uid_t, gid_t>> owner,
                         std::function<void(Status)> done);

  FilePlaneStats stats() const;

  struct Impl;

 private:
  explicit FilePlane(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

}  // namespace drover::worker

#endif  // DROVER_WORKER_AGENT_FILE_PLANE_H_
