// FileRelay: the data plane's fallback through the server (docs/design.md,
// "Data plane"). Files move worker to worker; a worker that cannot reach
// the holder of an input (connect, TLS, timeout) asks the server to fetch
// the file from the holder into the server's file store (file_store.h),
// then downloads it from there (GET /api/v1/files/{sha256}) and checks it
// as it checks any input.
//
//   POST /api/v1/files/{sha256}/pull   {"task": "3.0", "from": 1, "wait_ms": 15000}
//
// `task` is the task whose output the file is, `from` the worker holding it
// (the assignment's source), `wait_ms` (optional, at most max_wait) how long
// to hold the request while the transfer runs. Checked before anything is
// fetched, each refusal logged with its reason:
//   400  a malformed sha256, body, task id or worker id
//   404  an unknown task, or a worker the server knows no file service of
//   403  the file is not an output of that task held by that worker (its
//        holder, or a worker with a copy): a stranger cannot make the
//        server fetch anything else
// Then:
//   200  {"sha256","size","relayed"}: the blob is in the store (at once when
//        it already was: relayed false)
//   202  {"sha256","size","received","pulling":true}: still being fetched
//        after wait_ms; ask again (the same transfer: concurrent pulls of
//        one file share it)
//   502  the holder could not be reached, refused, or sent other bytes
//        (kUnavailable; the message names the holder and why)
//   507  no space left on device (kResourceExhausted)
//
// The transfer is the one a worker makes: the holder's file service (host,
// port and certificate from its Hello, WorkerChannel::FileSourceOf), TLS
// pinned to that fingerprint, the cluster token, and a grant the server
// mints for requester "server". It runs on a thread of its own (never on
// the loop), streams into "<store>/.upload-relay-<random>" hashing on the
// way, stops beyond the expected size, syncs, and is committed
// (FileStore::Commit) only when size and SHA-256 match; a failure leaves
// no file. Relayed blobs are not referenced by any task: `keep` after a
// relay the store's unreferenced blobs older than `keep` are swept
// (FileStore::Sweep, the rule the server applies at start).
//
// Counted in stats() (and /metrics: drover_file_relay_bytes_total, the bytes
// received from holders, and drover_file_relay_files_total); the worker's
// download from the store shows in drover_http_body_bytes_total.
//
// Thread safety: everything but the transfers' own work belongs to the
// loop thread; stats() is safe from any thread.
#ifndef DROVER_SERVER_FILE_RELAY_H_
#define DROVER_SERVER_FILE_RELAY_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "common/time.h"
#include "core/scheduler.h"
#include "net/event_loop.h"
#include "net/server.h"
#include "server/file_store.h"
#include "server/worker_channel.h"

namespace drover::server {

struct FileRelayOptions {
  std::string token;                    // the cluster token (file services ask for it)
  Duration timeout = Seconds(30);       // each step of a pull: connect, handshake, each read
  Duration default_wait = Seconds(15);  // a request without wait_ms
  Duration max_wait = Seconds(60);
  Duration keep = Seconds(3600);  // relayed blobs, then swept
  const Clock* clock = &SystemClock();  // when a blob was relayed, and the sweep
};

struct FileRelayStats {
  uint64_t pulls = 0;          // transfers started
  uint64_t relayed_files = 0;  // transfers committed to the store
  uint64_t relayed_bytes = 0;  // bytes received from holders (failed transfers too)
  uint64_t failed = 0;         // transfers that failed
  uint64_t refused = 0;        // requests refused before any transfer
};

class FileRelay {
 public:
  // References must outlive this object.
  FileRelay(net::EventLoop& loop, const core::Scheduler& scheduler, const WorkerChannel& channel,
            FileStore& store, FileRelayOptions options);
  ~FileRelay();  // Stop()
  FileRelay(const FileRelay&) = delete;
  FileRelay& operator=(const FileRelay&) = delete;

  // Registers POST /api/v1/files/{sha256}/pull.
  void AddRoutes(net::Server& server);

  // Stops: transfers are told to stop and joined (one blocked in a connect
  // or a read may take up to `timeout`); waiting requests get no answer.
  void Stop();

  FileRelayStats stats() const;

  struct Transfer;  // one file being pulled (file_relay.cc)

 private:
  void Handle(const net::Request& request, net::Responder done);
  void StartTransfer(const std::string& sha256, uint64_t size, const proto::FileSource& holder,
                     const std::string& label);
  void Finished(const std::string& sha256, uint64_t id, Result<std::string> part);
  void ArmSweep();

  net::EventLoop& loop_;
  const core::Scheduler& scheduler_;
  const WorkerChannel& channel_;
  FileStore& store_;
  FileRelayOptions options_;
  bool stopped_ = false;
  std::shared_ptr<std::atomic<bool>> stopping_ = std::make_shared<std::atomic<bool>>(false);
  uint64_t next_id_ = 0;
  std::map<std::string, std::shared_ptr<Transfer>> inflight_;  // by sha256
  std::map<uint64_t, std::thread> threads_;
  std::map<std::string, Time> relayed_;  // blobs relayed, and when (for the sweep)
  net::Timer sweep_timer_;
  std::atomic<uint64_t> pulls_{0}, relayed_files_{0}, relayed_bytes_{0}, failed_{0}, refused_{0};
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace drover::server

#endif  // DROVER_SERVER_FILE_RELAY_H_
