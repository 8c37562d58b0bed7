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
// A snapshot of a million tasks is sent a slice per loop turn (a few
// milliseconds each), so it does not hold the loop, and paced by the
// session's unsent bytes: above `pace_bytes` the next slice waits
// (kPaceWait, then it looks again) until the subscriber has read enough, so
// a snapshot larger than the session's send limit (64 MiB: ~500,000 tasks)
// // still arrives whole instead of closing the session. Live events for the
// subscriber start at once: a task that changes before the snapshot reaches it is sent its live
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
// With ?batch=true each message is a JSON array of such events, in order:
// whatever was published (and snapshot entries made) while the previous
// message was being written, in arrays of at most kMaxBatchBytes. A busy
// stream needs it: a session writes one message per completion of the
// loop, so at tens of thousands of events a second one event per message
// falls behind without bound (B6 scenario c: 13.7 s of lag at p99, and
// the server's CPU per task up by 40%). The CLI, the Python client and
// the dashboard ask for it; without it, one event per message as before.
//
// With ?coalesce=true as well (and snapshot=false, no watch: the
// dashboard's stream), a task's changes that come while the subscriber's
// last message is still being written become one event: the first
// change's "from", the latest one's "to", attempt, reason and at_ms, in
// the order the tasks first changed. A follower that keeps up hears of
// every change; one that falls behind hears of each task's latest state
// with at most one event per task, instead of a backlog that grows with
// the cluster's rate (a task's queued, running and ended changes add up
// to ~700 bytes; at tens of thousands of tasks a second a slow reader
// cannot take them all). A backlog goes out kCoalescedPerDrain messages
// per drain of the session; the rest waits unencoded, still merging.
//
// With ?watch=true a subscriber starts with nothing and chooses what it
// hears of by sending proto::WatchRequest messages: {"watch":"12"} adds job
// 12 (a snapshot of its tasks follows, as for ?job=12), {"watch":"12.3"} one
// task (its current state follows at once), "unwatch" removes either. A
// watched task's terminal event (or its state, when it had already ended)
// carries "info": the task as GET /api/v1/tasks/{id} shows it, without the
// explanation, attempts and spec, so a waiter has its result at once; with
// ?ends=true so does each end of a watched job's tasks, in its snapshot
// too (a waiter for all of a job's tasks watches the job, not each). A
// client that waits for many things over one connection needs it: the
// Python client keeps one such stream and watches each task it waits for
// (a map's calls: their job), rather than opening a connection per wait. An id that names nothing is
// answered with {"type":"watch_error","watch":"12","message":"..."}; a
// message that is not a watch request closes the stream, naming what is
// wrong, as does watching more than kMaxWatched things.
//
// Other subscribers only read; any text they send is ignored. A subscriber that
// does not read fast enough is closed by the session's queue limit (or,
// batching, once `held_limit` bytes wait for it, kMaxHeldBytes by default).
//
// Thread safety: none; everything runs on the server's event loop.
#ifndef DROVER_SERVER_EVENT_STREAM_H_
#define DROVER_SERVER_EVENT_STREAM_H_

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
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
  static constexpr size_t kDefaultPaceBytes = 4u << 20;
  static constexpr Duration kPaceWait = Millis(2);
  // The largest message of a batching subscriber (a client's limit is
  // 16 MiB).
  static constexpr size_t kMaxBatchBytes = 256u << 10;
  // A coalescing subscriber's backlog: the most messages encoded per drain
  // of its session (each at most kMaxBatchBytes, a few milliseconds of
  // the loop); the rest waits unencoded, still merging.
  static constexpr size_t kCoalescedPerDrain = 4;
  // Held for a batching subscriber that does not read: beyond this it is
  // closed, as the session closes one that has 64 MiB unsent.
  static constexpr size_t kMaxHeldBytes = 64u << 20;
  // The most jobs and tasks one ?watch=true subscriber follows at once.
  static constexpr size_t kMaxWatched = 100'000;
  // The most tasks a ?coalesce=true subscriber's unsent changes name:
  // beyond this it is closed as not reading.
  static constexpr size_t kMaxCoalesced = 2'000'000;

  // `clock` stamps snapshot entries.
  EventStream(const core::Scheduler& scheduler, net::EventLoop& loop, const Clock& clock,
              size_t pace_bytes = kDefaultPaceBytes, size_t held_limit = kMaxHeldBytes)
      : scheduler_(scheduler),
        loop_(loop),
        clock_(clock),
        pace_bytes_(pace_bytes),
        held_limit_(held_limit) {}
  ~EventStream();

  // The route's open handler. A bad ?job= closes the session with the
  // reason (after the upgrade, since the WebSocket route has no error path).
  void Attach(std::shared_ptr<net::WsSession> session, const net::Request& request);

  void Publish(const core::TaskStateChanged& change, Time at);
  // Sends what Publish buffered.
  void Flush();

  // Who may see which job: a subscriber whose identity `filters` hears
  // only of the jobs `sees` allows (its snapshot, its live events, its
  // watches and its ?job=). Unset: everyone hears of every job. A watched
  // task's "info" carries its result and outputs only to a subscriber that
  // `reads` the contents of its job (server/access.h); to others it comes
  // as proto::HideContents leaves it. Unset `reads`: to everyone.
  struct Visibility {
    std::function<bool(const net::Identity&)> filters;
    std::function<bool(const net::Identity&, JobId)> sees;
    std::function<bool(const net::Identity&, JobId)> reads;
  };
  void SetVisibility(Visibility v) { visibility_ = std::move(v); }

  void Stop();
  size_t subscriber_count() const { return subs_.size(); }
  // Snapshots being sent, and how many times one waited for its
  // subscriber to read (kPaceWait).
  size_t snapshots_in_progress() const { return snapshots_.size(); }
  uint64_t pace_waits() const { return pace_waits_; }

 private:
  struct Sub {
    std::shared_ptr<net::WsSession> session;
    std::optional<JobId> job;
    std::optional<net::Identity> viewer;  // set: only the jobs it may see
    std::optional<net::Identity> who;     // who subscribed (contents: Reads)
    bool batch = false;     // ?batch=true: JSON arrays of events
    bool watching = false;  // ?watch=true: only what it watches
    bool ends = false;      // ?ends=true (with watch): only the ends of what it watches
    bool coalesce = false;  // ?coalesce=true: one event per task while writing
    // A coalescing subscriber's changes not encoded yet: per task, its
    // latest change (with the first one's `from`) and when, in the order
    // the tasks first changed; the first is number `changes_base`.
    std::deque<std::pair<core::TaskStateChanged, Time>> changes;
    uint64_t changes_base = 0;
    // Where each task's change is: per job, by task index, 1 + its number
    // (0: none), and how many of the job's wait. Dense per job, so a
    // backlog of a million tasks is never rehashed (a hash map's growth
    // held the loop ~90 ms at that size).
    struct Slots {
      std::vector<uint64_t> number;
      size_t waiting = 0;
    };
    std::unordered_map<JobId, Slots> change_of;
    size_t unsent_changes() const { return changes.size(); }
    std::unordered_set<JobId> watched_jobs;
    std::unordered_set<TaskId> watched_tasks;
    // A batching subscriber's events not sent yet, each string an array
    // without its closing bracket ("[e1,e2"), at most kMaxBatchBytes.
    std::vector<std::string> held;
    size_t held_bytes = 0;
  };
  // Whether `sub` hears of `task`'s changes.
  bool Wants(const Sub& sub, const TaskId& task) const;
  // Whether `sub` may see job `job` (Visibility).
  bool Sees(const Sub& sub, JobId job) const {
    return !sub.viewer || !visibility_.sees || visibility_.sees(*sub.viewer, job);
  }
  // Whether `sub` may read the contents of job `job` (Visibility::reads).
  bool Reads(const Sub& sub, JobId job) const {
    return !sub.who || !visibility_.reads || visibility_.reads(*sub.who, job);
  }
  // Applies a watch request from subscriber `id` (its text message).
  void Watch(uint64_t id, const std::string& text);
  // Adds `jobs` to subscriber `id`'s snapshot (starting one if none runs).
  void QueueSnapshot(uint64_t id, std::shared_ptr<net::WsSession> session, std::vector<JobId> jobs);
  // Adds `event` to what `sub` holds (batching) or sends it (otherwise).
  void Add(Sub& sub, const std::string& event);
  // Whether Add() would begin a new message of `sub`'s for `event`.
  static bool StartsAMessage(const Sub& sub, const std::string& event);
  // Sends what a batching subscriber holds (a coalescing one's changes
  // encoded first, kCoalescedPerDrain messages' worth: the rest go on
  // merging until the next), unless its session is still writing: then
  // its drained callback does.
  void SendHeld(Sub& sub);
  // Merges `change` into a coalescing subscriber's unsent changes.
  void Coalesce(Sub& sub, const core::TaskStateChanged& change, Time at);
  Visibility visibility_;

  // A snapshot being sent, a slice per loop turn (sliced.h).
  struct Snapshot {
    std::vector<JobId> jobs;
    size_t job = 0;     // index into jobs
    uint64_t task = 0;  // next task index in jobs[job]
    std::shared_ptr<net::WsSession> session;
    uint64_t id = 0;
    bool paced = false;  // the last slice stopped at pace_bytes_
    std::unique_ptr<net::Timer> wait;
  };
  // Sends the next slice; true when the snapshot is complete (or its
  // subscriber is gone).
  bool SendSnapshotSlice(Snapshot& snap);
  // Sends slices of subscriber `id`'s snapshot, one per loop turn (or after
  // kPaceWait when paced), until it is complete.
  void ContinueSnapshot(uint64_t id);

  struct Pending {
    uint64_t sub = 0;
    std::shared_ptr<const std::string> text;
  };
  const core::Scheduler& scheduler_;
  net::EventLoop& loop_;
  const Clock& clock_;
  const size_t pace_bytes_;
  const size_t held_limit_;
  uint64_t pace_waits_ = 0;
  std::unordered_map<uint64_t, Sub> subs_;
  std::unordered_map<uint64_t, std::unique_ptr<Snapshot>> snapshots_;  // by subscriber
  std::vector<Pending> pending_;
  std::vector<uint64_t> coalescing_;  // subscribers with new changes since the last Flush
  OncePerTurn flush_{loop_, [this] { Flush(); }};
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace drover::server

#endif  // DROVER_SERVER_EVENT_STREAM_H_
