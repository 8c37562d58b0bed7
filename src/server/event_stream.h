// EventStream: the client event stream, WebSocket /api/v1/events.
//
// Each subscriber gets, on connect, a snapshot: one task_state event per
// task (from = to = its current state) of the job named by ?job=N, or of
// every job that is not done yet when there is no filter (none with
// ?snapshot=false: the dashboard only wants to hear of changes). Then every
// TaskStateChanged the core emits for a matching task, as
// proto::EncodeTaskEvent JSON text messages. The snapshot and the live
// events are produced on the same loop thread, so a client waiting for a
// job's end cannot miss it between the two.
//
// A snapshot of a million tasks is sent a slice per loop turn (RunSliced,
// a few milliseconds each), so it does not hold the loop, and the session's send
// queue drains between slices. Live events for the subscriber start at
// once: a task that changes before the snapshot reaches it is sent its live
// event(s) and later a snapshot entry with the state it then has, so the
// last word on each task is still its current state.
//
// Live events of one turn of the loop are sent together at its end
// (Flush, which the shell calls after the core's turn, once the turn's
// assignments went to the workers; a posted flush covers any other
// caller): a worker waiting for its next task does not wait for the
// encryption and sends of the event stream. Each event goes to the
// subscribers that matched when it was published, so a client attaching
// in between gets it in its snapshot, not twice.
//
// Subscribers only read; any text they send is ignored. A subscriber that
// does not read fast enough is closed by the session's queue limit.
//
// Thread safety: none; everything runs on the server's event loop.
#ifndef DROVER_SERVER_EVENT_STREAM_H_
#define DROVER_SERVER_EVENT_STREAM_H_

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/ids.h"
#include "common/time.h"
#include "core/commands.h"
#include "core/scheduler.h"
#include "net/event_loop.h"
#include "net/http_types.h"
#include "net/ws_session.h"
#include "server/once_per_turn.h"

namespace drover::server {

class EventStream {
 public:
  EventStream(const core::Scheduler& scheduler, net::EventLoop& loop)
      : scheduler_(scheduler), loop_(loop) {}
  ~EventStream();

  // The route's open handler. A bad ?job= closes the session with the
  // reason (after the upgrade, since the WebSocket route has no error path).
  void Attach(std::shared_ptr<net::WsSession> session, const net::Request& request, Time now);

  void Publish(const core::TaskStateChanged& change, Time at);
  // Sends what Publish buffered.
  void Flush();

  void Stop();
  size_t subscriber_count() const { return subs_.size(); }

 private:
  struct Sub {
    std::shared_ptr<net::WsSession> session;
    std::optional<JobId> job;
  };
  // A snapshot being sent, a slice per loop turn (sliced.h).
  struct Snapshot {
    std::vector<JobId> jobs;
    size_t job = 0;     // index into jobs
    uint64_t task = 0;  // next task index in jobs[job]
    std::shared_ptr<net::WsSession> session;
    uint64_t id = 0;
    Time now;
  };
  // Sends the next slice; true when the snapshot is complete (or its
  // subscriber is gone).
  bool SendSnapshotSlice(Snapshot& snap);

  struct Pending {
    uint64_t sub = 0;
    std::shared_ptr<const std::string> text;
  };
  const core::Scheduler& scheduler_;
  net::EventLoop& loop_;
  std::unordered_map<uint64_t, Sub> subs_;
  std::vector<Pending> pending_;
  OncePerTurn flush_{loop_, [this] { Flush(); }};
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace drover::server

#endif  // DROVER_SERVER_EVENT_STREAM_H_
