// LogRelay: task logs through the worker that ran the task.
//
//   GET /api/v1/tasks/{id}/logs?stream=stdout|stderr
//       -> LogRequest{follow=false} to the task's worker; binary log frames
//          are collected until a LogChunk with eof (or error) and returned as
//          text/plain (503 when the worker is not connected, 504 after
//          `fetch_timeout`, 404 for an unknown task or a worker-side error).
//   WS  /api/v1/tasks/{id}/logs/follow?stream=stdout|stderr
//       -> LogRequest{follow=true}; the log so far and then new output are
//          sent to the follower as binary messages of whole lines (a last
//          partial line at the end). A final text message
//          {"type":"eof"} or {"type":"error","message":...} precedes the
//          close. When the last follower of a log leaves, the worker is told
//          to stop (LogRequest{stop=true}).
//
// Frames carry their offset in the log file, so overlapping transfers of
// the same log (a fetch while someone follows) are de-duplicated per
// consumer. A LogChunk eof ends a follower only once the attempt is no
// longer running (a fetch's eof must not end a follow).
//
// Thread safety: none; everything runs on the server's event loop.
#ifndef DROVER_SERVER_LOG_RELAY_H_
#define DROVER_SERVER_LOG_RELAY_H_

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "common/ids.h"
#include "core/scheduler.h"
#include "net/event_loop.h"
#include "net/http_types.h"
#include "net/ws_session.h"
#include "proto/log_frame.h"
#include "proto/messages.h"
#include "server/worker_channel.h"

namespace drover::server {

class LogRelay {
 public:
  LogRelay(net::EventLoop& loop, const core::Scheduler& scheduler, WorkerChannel& channel,
           Duration fetch_timeout = Seconds(30));
  ~LogRelay();
  LogRelay(const LogRelay&) = delete;
  LogRelay& operator=(const LogRelay&) = delete;

  // Installs itself as the channel's log handlers.
  void Install();

  void Fetch(const net::Request& request, net::Responder respond);
  void Follow(std::shared_ptr<net::WsSession> session, const net::Request& request);

  void Stop();

 private:
  using Key = std::tuple<WorkerId, TaskId, uint32_t, proto::LogStream>;
  struct Consumer {
    uint64_t received = 0;  // bytes of the log taken so far
    std::string bytes;      // fetch: everything; follow: the unsent partial line
    net::Responder respond;                   // fetch
    std::shared_ptr<net::WsSession> session;  // follow
    std::unique_ptr<net::Timer> timer;        // fetch timeout
  };
  struct Transfer {
    std::map<uint64_t, std::unique_ptr<Consumer>> fetches;
    std::map<uint64_t, std::unique_ptr<Consumer>> follows;
  };

  // Resolves the task's worker and attempt; errors for the HTTP answer.
  Result<Key> Resolve(const net::Request& request);
  void OnChunk(WorkerId worker, const proto::LogChunk& chunk);
  void OnFrame(WorkerId worker, const proto::LogFrame& frame);
  void OnDisconnected(WorkerId worker);
  void EndFetch(const Key& key, uint64_t id, net::Response response);
  void EndFollow(const Key& key, uint64_t id, const std::string& final_text);
  void DropIfIdle(const Key& key);

  net::EventLoop& loop_;
  const core::Scheduler& scheduler_;
  WorkerChannel& channel_;
  Duration fetch_timeout_;
  std::map<Key, Transfer> transfers_;
  uint64_t next_id_ = 1;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace drover::server

#endif  // DROVER_SERVER_LOG_RELAY_H_
