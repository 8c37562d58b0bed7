// ServerShell: `drover server` — one event loop that wires the network, the
// store and the clock to the pure scheduling core (DESIGN.md sections 1, 4,
// 6, 7).
//
//   net::Server ── /api/v1/worker ──► WorkerChannel ─┐
//              ├── REST /api/v1/* ──► rest_api       ├─► CoreDriver ─► core::Scheduler
//              ├── /api/v1/events ──► EventStream ◄──┤        │
//              └── logs, follow   ──► LogRelay ◄─────┘        ▼
//                                                       store::Store (MemoryStore
//                                                       + journal in <state_dir>/store)
//
// State directory: token (0600, made on first start), server.crt/server.key
// (TLS identity), server-id (owner of our leases, stable across restarts),
// workers.json (worker name -> id), store/journal, api.sock (the local
// socket, while running) and api.sock.lock. The access file goes to
// `access_file` (or net's default path).
//
// Thread safety: Start, Stop and the destructor belong to the loop thread
// (or to a time when the loop is not running); the accessors may be called
// from any thread once Start returned (they return values fixed at start).
#ifndef DROVER_SERVER_SERVER_SHELL_H_
#define DROVER_SERVER_SERVER_SHELL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/status.h"
#include "common/time.h"
#include "core/scheduler.h"
#include "net/event_loop.h"
#include "store/store.h"

namespace drover::net {
class WsSession;
}  // namespace drover::net

namespace drover::server {

class CoreDriver;

inline constexpr char kServerVersion[] = "0.1.0";

struct ServerConfig {
  std::string state_dir;  // required; created if missing
  std::string bind_address = "0.0.0.0";
  uint16_t port = 7210;  // 0 picks a free port (see port())
  bool tls = true;
  core::SchedulerConfig scheduler;
  Duration heartbeat_interval = Seconds(2);
  // Also serve the API on <state_dir>/api.sock (net/local_socket.h), named
  // in the access file. A path too long for a socket only logs a warning;
  // a live server on the same socket fails Start (with open_store set, the
  // directory may be shared: it only logs a warning and serves no socket).
  bool local_socket = true;
  // Where to write the access file; empty = net's default path
  // ($XDG_STATE_HOME/drover/access.json). "-" = do not write one.
  std::string access_file;
  // A disconnected worker is declared lost after this long; zero = three
  // heartbeat intervals.
  Duration lost_grace = Duration::zero();
  // Compact the journal once it is larger than this.
  uint64_t compact_bytes = 64ull << 20;
  // Finished jobs are forgotten this long after their last change
  // (Retention, retention.h); zero keeps them forever.
  Duration keep_finished = Seconds(7 * 24 * 3600);
  // Workers keep a job's outputs this long after the job ended, then the
  // server releases them (OutputRetention, output_retention.h); never
  // longer than keep_finished. Zero: released as soon as the job ended.
  Duration keep_outputs = Seconds(24 * 3600);
  // A job holding result cache entries keeps its outputs this long after
  // it ended (at least keep_outputs, at most keep_finished; --cache-keep).
  Duration cache_keep = Seconds(7 * 24 * 3600);
  // The most output bytes result cache entries hold (--cache-max-size); 0: no cap.
  uint64_t cache_max_bytes = 0;
  // Worker messages as JSON text only (--worker-json,
  // WorkerChannelOptions::binary off).
  bool worker_json = false;
  // Batch frames with the workers that read them (--worker-batches,
  // WorkerChannelOptions::batches).
  bool worker_batches = false;
  // How often the allocation queues (alloc.h) ask Slurm and decide.
  Duration alloc_interval = Seconds(5);
  // How long GET .../logs waits for the worker.
  Duration log_fetch_timeout = Seconds(30);
  // The most a task's outputs may add up to when its spec sets no
  // max_output (`--max-output`; 0 = no limit): over it the attempt fails.
  uint64_t max_output_bytes = 64ull << 30;
  // The file store (file_store.h, <state_dir>/files): the most one upload
  // may hold.
  uint64_t max_upload_bytes = 64ull << 30;
  // Users read only their own jobs (access.h); admins and viewers read all.
  bool hide_others = false;
  // The first admin's name when <state_dir>/users.json is made (user_book.h);
  // empty: the account the server runs as.
  std::string first_admin;
  // When set, the store to run on instead of the MemoryStore in
  // <state_dir>/store (`--redis`: the RedisStore). Called once from Start,
  // before the loop runs; the store may read the scheduler (never change
  // it) as long as it lives. Its error fails Start.
  std::function<Result<std::unique_ptr<store::Store>>(net::EventLoop&, const core::Scheduler&)>
      open_store;
  // The clock every part of the server reads (the core's `now`, leases,
  // grants, retention windows, workers' silence). Must outlive the server.
  // On a virtual-time loop (net::EventLoop(SimulatedClock&)) the loop's
  // clock is used instead, and the journal is written on the loop thread.
  Clock* clock = &SystemClock();
};

class ServerShell {
 public:
  // Opens the state directory, restores the journal, binds and listens.
  // Errors: no state_dir; the token, TLS identity, worker map or journal
  // cannot be read or made; a journal record cannot be restored
  // (kDataLoss); the port cannot be bound (kUnavailable); another server
  // answers on the state directory's local socket, or is starting there
  // (kFailedPrecondition, naming the path). A failure to write
  // the access file is only logged.
  static Result<std::unique_ptr<ServerShell>> Start(net::EventLoop& loop, ServerConfig config);

  ~ServerShell();  // Stop()s
  ServerShell(const ServerShell&) = delete;
  ServerShell& operator=(const ServerShell&) = delete;

  uint16_t port() const;
  // The local socket's path; empty when there is none.
  const std::string& local_socket() const;
  const std::string& token() const;
  // SHA-256 of the certificate; empty without TLS.
  const std::string& fingerprint() const;
  // Stable id of this server (kept in the state dir as server-id).
  const std::string& server_id() const;
  // "drover worker --server HOST:PORT --token T --fingerprint F" (or
  // "--no-tls" instead of the fingerprint), HOST being this machine's name
  // when bound to all addresses.
  std::string JoinCommand() const;
  // Bytes of torn journal tail cut off at startup (0 after a clean stop).
  uint64_t discarded_bytes() const;

  // Flushes the journal, closes every connection and the listener.
  // Idempotent.
  void Stop();

  // In-process parts, for a harness that runs the server and its workers
  // in one process on one (virtual-time) loop: attaches `session` as a
  // worker's connection, as if it had come through /api/v1/worker with the
  // cluster token; and the driver of the core (submissions, the scheduler's
  // read-only view). Loop thread only.
  void AttachWorker(std::shared_ptr<net::WsSession> session);
  CoreDriver& driver();

  // Replaces the users' quotas, groups and fair share (`drover server`
  // reloading its config file on SIGHUP): the core applies it at once
  // (core::UserPolicyChanged). Loop thread only; ignored once stopped.
  void SetUserPolicy(core::UserPolicy policy);

  struct Parts;

 private:
  explicit ServerShell(std::unique_ptr<Parts> parts);
  std::unique_ptr<Parts> parts_;
};

}  // namespace drover::server

#endif  // DROVER_SERVER_SERVER_SHELL_H_
