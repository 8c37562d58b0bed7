// FilePlane: the worker's side of the data plane (docs/design.md, "Data
// plane"): its content-addressed cache of files (worker/files), the TLS file
// service other workers fetch from, the fetching of a task's inputs before
// it starts, and the collecting of a succeeded task's outputs.
//
// Serving. `GET /v1/files/<sha256>` on its own port (TLS with this worker's
// certificate, which the server vouches for to fetchers; the cluster token
// as everywhere) answers the file from the cache, and only against a grant
// (header X-Drover-Grant, net/grant.h) signed by the server's key for that
// file and for the requester named in X-Drover-Requester, not expired. Any
// other request is refused (400 / 403 / 404) and logged with its reason.
// `GET /v1/files-stats` answers what was served (JSON).
//
// Fetching. Fetch() gets every input file of an assignment that the cache
// lacks, each from its sources in order (the holder the server named),
// verifying size and SHA-256 before the file enters the cache; the same
// file asked for by several assignments is fetched once. LinkInputs() then
// hard-links the files into the task's $DROVER_INPUTS/<task id>/ (the cached
// copy is read-only, and re-hashed before reuse if it changed), and pins
// them until Release().
//
// Outputs. CollectOutputs() lists and hashes a succeeded task's
// $DROVER_OUTPUT_DIR (worker/files/output_scan.h) and takes each file into
// the cache (a hard link: no copy), so peers can fetch it.
//
// Slow work (hashing, transfers) runs on threads of its own; every `done`
// is called on the loop thread, and never after the FilePlane is gone.
//
// Test hook: the environment variable DROVER_TEST_CORRUPT_SERVES=N makes the
// service flip one byte of the first N files it serves (for tests of the
// fetcher's check).
//
// Thread safety: everything but the threads' own work belongs to the loop
// thread.
#ifndef DROVER_WORKER_AGENT_FILE_PLANE_H_
#define DROVER_WORKER_AGENT_FILE_PLANE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/ids.h"
#include "common/status.h"
#include "core/model.h"
#include "net/event_loop.h"
#include "proto/messages.h"

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
};

struct FilePlaneStats {
  uint64_t served_files = 0;
  uint64_t served_bytes = 0;
  uint64_t refused = 0;
  uint64_t fetched_files = 0;
  uint64_t fetched_bytes = 0;
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
  // Fetches what the cache lacks; `done` gets the first failure: with
  // kResourceExhausted when the disk or the cache is full ("no space left
  // on device"), else kUnavailable naming the file and each source's error.
  void Fetch(const proto::Assignment& a, std::function<void(Status)> done);
  // Links the input files into `inputs_dir`/<from>/<name> and pins them for
  // this attempt. kNotFound when one left the cache since Fetch.
  Status LinkInputs(const proto::Assignment& a, const std::string& inputs_dir);
  // The attempt ended: its input files may be evicted again.
  void Release(TaskId task, uint32_t attempt);

  // The outputs of a succeeded task whose output directory is `dir`; a
  // refusal (a socket, a link outside, over max_output) as the error.
  void CollectOutputs(const std::string& dir,
                      std::function<void(Result<std::vector<core::OutputFile>>)> done);

  FilePlaneStats stats() const;

  struct Impl;

 private:
  explicit FilePlane(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

// True when `dir` holds at least one entry (a task left outputs).
bool HasEntries(const std::string& dir);

}  // namespace drover::worker

#endif  // DROVER_WORKER_AGENT_FILE_PLANE_H_
