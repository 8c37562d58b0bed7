// StandbyServer: what a `drover server --redis` serves while another server
// holds the leader lease (docs/redis.md, "Several servers").
//
//   RedisServerStore (standby) ── every 250 ms: new journal records,
//        │                        leader key's owner, published workers
//        ▼ Apply / ReadFailed
//   StandbyServer: records replayed ─► core::Scheduler rebuilt from its snapshot
//        │                        (a read-only copy, never handed events)
//        ▼
//   net::Server on the server's own address:
//     GET  /api/v1/jobs, /jobs/{id}, /tasks/{id}   from the copy
//     GET  /api/v1/workers                         the leader's published list
//     GET  /api/v1/status                          role "standby", leader, lag
//     GET  /healthz                                "standby"
//     any other request (POST, logs, metrics, …)   307 to the leader
//     WebSocket /api/v1/worker, events, follow     proto::Error naming the
//                                                  leader, then closed
//
// Staleness: every answer carries `X-Drover-Role: standby`,
// `X-Drover-Leader: HOST:PORT` (when the leader advertised one) and
// `X-Drover-Lag-Ms: N`, the age of the copy (time since the last successful
// read of Redis). When the copy is older than `max_lag` (Redis unreachable)
// reads are refused with 503 naming the leader instead of being served
// stale, so a read is never older than max_lag plus the leader's own
// journal flush delay.
//
// Redirects: a write answers 307 with `Location: <scheme>://LEADER<target>`
// and the JSON error body {"error": {"code": "unavailable", "message":
// "this server is a standby; the leader is at LEADER", "leader": LEADER}};
// without a known leader address (none advertised, or a takeover under way)
// it answers 503 with the same body less "leader", so clients retry.
//
// Rebuilding: Apply replays the new records into a scheduler that never
// finishes restoring (Scheduler::Restore is the fold) and, when
// anything changed, rebuilds the copy it serves from that scheduler's
// Snapshot (Restore + FinishRestore), so its cost is proportional to the live state
// (jobs and tasks not yet compacted away), paid at most once per read.
//
// Thread safety: none; everything runs on the loop thread. Start before
// the loop runs or on it; Stop and the destructor on the loop thread or
// while the loop is not running.
#ifndef DROVER_SERVER_STANDBY_SERVER_H_
#define DROVER_SERVER_STANDBY_SERVER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/time.h"
#include "core/scheduler.h"
#include "net/event_loop.h"

namespace drover::server {

struct StandbyOptions {
  std::string bind_address = "0.0.0.0";
  uint16_t port = 7210;
  bool tls = true;
  std::string cert_dir;  // the state directory: server.crt / server.key
  std::string token;     // the cluster token (required)
  // The leader's <state>/users.json (the state directory is shared): each
  // user's token is taken with its role, as on the leader, and the file is
  // read again when it changes (a user added, rotated or revoked). Empty:
  // only the cluster token is taken.
  std::string users_file;
  bool hide_others = false;  // as the leader's --hide-others
  core::SchedulerConfig scheduler;
  std::string version;
  // The oldest copy reads are served from (see "Staleness").
  Duration max_lag = Seconds(2);
  // Reads "now". Must outlive the server.
  Clock* clock = &SystemClock();
};

class StandbyServer {
 public:
  // Binds and listens. Errors as net::Server::Start (kUnavailable for a
  // port in use, naming it).
  static Result<std::unique_ptr<StandbyServer>> Start(net::EventLoop& loop,
                                                      StandbyOptions options);
  ~StandbyServer();  // Stop()s
  StandbyServer(const StandbyServer&) = delete;
  StandbyServer& operator=(const StandbyServer&) = delete;

  // One successful read of Redis: `records` follow those of earlier calls
  // (or, with `reset`, replace them all); `leader_owner` is the leader
  // key's owner (LeaderAddress says where to send writers), `workers` the
  // leader's published worker list (JSON; empty: none). A record that does
  // not decode or restore is logged and the previous copy kept (the lag
  // then grows until a later read fixes it, e.g. after a compaction).
  void Apply(bool reset, const std::vector<std::string>& records, const std::string& leader_owner,
             std::string workers);
  // A failed read: logged (once per kind of failure); the lag grows.
  void ReadFailed(const Status& why);

  // Closes the listener and every connection. Idempotent.
  void Stop();

  uint16_t port() const;
  // The leader's advertised "host:port"; empty when unknown.
  const std::string& leader() const;
  uint64_t rebuilds() const;

  // The leader lease owner of a server started with an advertised address
  // is "HOST:PORT/host:pid:nonce" (cli/cmd_server.cc); this is HOST:PORT,
  // or empty for an owner without one.
  static std::string LeaderAddress(const std::string& owner);

  struct State;

 private:
  explicit StandbyServer(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace drover::server

#endif  // DROVER_SERVER_STANDBY_SERVER_H_
