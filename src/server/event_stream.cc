#include "server/event_stream.h"

#include <nlohmann/json.hpp>

#include "proto/api_json.h"
#include "server/sliced.h"

namespace drover::server {

EventStream::~EventStream() {
  *alive_ = false;
  Stop();
}

void EventStream::Attach(std::shared_ptr<net::WsSession> session, const net::Request& request) {
  std::optional<JobId> job;
  if (auto it = request.query.find("job"); it != request.query.end()) {
    Result<JobId> parsed = ParseJobId(it->second);
    if (!parsed.ok()) {
      session->Close("bad job filter: " + parsed.status().message());
      return;
    }
    job = *parsed;
  }
  bool snapshot = true;
  bool batch = false;
  bool watch = false;
  bool coalesce = false;
  bool ends = false;
  for (auto [name, flag] :
       {std::pair{"snapshot", &snapshot}, std::pair{"batch", &batch}, std::pair{"watch", &watch},
        std::pair{"coalesce", &coalesce}, std::pair{"ends", &ends}}) {
    auto it = request.query.find(name);
    if (it == request.query.end()) continue;
    if (it->second != "true" && it->second != "false") {
      session->Close(std::string("bad ") + name + ": want true or false, got \"" + it->second +
                     "\"");
      return;
    }
    *flag = it->second == "true";
  }
  if (coalesce && (!batch || snapshot || watch)) {
    session->Close(
        "coalesce=true merges the changes of a stream of live events only: it needs "
        "batch=true and snapshot=false, without watch");
    return;
  }
  if (ends && !watch) {
    session->Close("ends=true sends the ends of what a watch=true stream watches: add watch=true");
    return;
  }
  if (watch && job) {
    session->Close("watch=true follows what the subscriber names: drop job=" +
                   std::to_string(*job));
    return;
  }
  std::optional<net::Identity> viewer;
  if (request.identity && visibility_.filters && visibility_.filters(*request.identity)) {
    viewer = *request.identity;
  }
  std::vector<JobId> snapshot_jobs;
  if (job) {
    if (viewer && visibility_.sees && !visibility_.sees(*viewer, *job)) {
      session->Close("job " + std::to_string(*job) +
                     " is another user's: the server hides other users' jobs (--hide-others)");
      return;
    }
    if (!scheduler_.GetJob(*job).ok()) {
      session->Close("job " + std::to_string(*job) + " not found");
      return;
    }
    snapshot_jobs.push_back(*job);
  } else if (snapshot && !watch) {
    for (JobId j : scheduler_.Jobs()) {
      Result<core::JobInfo> info = scheduler_.GetJob(j);
      if (info.ok() && !info->done && (!viewer || visibility_.sees(*viewer, j))) {
        snapshot_jobs.push_back(j);
      }
    }
  }
  const uint64_t id = session->id();
  std::weak_ptr<bool> alive = alive_;
  if (watch) {
    session->OnText([this, alive, id](std::string text) {
      if (!alive.expired()) Watch(id, text);
    });
  } else {
    session->OnText([](std::string) {});
  }
  if (batch) {
    session->OnDrained([this, alive, id] {
      if (alive.expired()) return;
      if (auto it = subs_.find(id); it != subs_.end()) SendHeld(it->second);
    });
  }
  session->OnClose([this, alive, id](const Status&) {
    if (alive.expired()) return;
    subs_.erase(id);
    snapshots_.erase(id);
  });
  // Live events flow from now on; the snapshot follows a slice per loop
  // turn. A task that changes before its slice is reached gets its live
  // event first and then a snapshot entry with the state it has by then.
  Sub& sub = subs_[id];
  sub.session = session;
  sub.job = job;
  sub.viewer = std::move(viewer);
  if (request.identity) sub.who = *request.identity;
  sub.batch = batch;
  sub.watching = watch;
  sub.ends = ends;
  sub.coalesce = coalesce;
  if (snapshot && !watch) QueueSnapshot(id, std::move(session), std::move(snapshot_jobs));
}

bool EventStream::Wants(const Sub& sub, const TaskId& task) const {
  if (sub.watching) return sub.watched_jobs.count(task.job) || sub.watched_tasks.count(task);
  return (!sub.job || *sub.job == task.job) && Sees(sub, task.job);
}

void EventStream::Watch(uint64_t id, const std::string& text) {
  auto it = subs_.find(id);
  if (it == subs_.end()) return;
  Sub& sub = it->second;
  Result<proto::WatchRequest> request = proto::ParseWatchRequest(text);
  if (!request.ok()) {
    sub.session->Close("bad watch message: " + request.status().message());
    return;
  }
  const JobId job = request->job;
  const std::string name =
      request->task ? TaskId{job, *request->task}.ToString() : std::to_string(job);
  if (!request->watch) {
    if (request->task) {
      sub.watched_tasks.erase(TaskId{job, *request->task});
    } else {
      sub.watched_jobs.erase(job);
    }
    return;
  }
  if (sub.watched_jobs.size() + sub.watched_tasks.size() >= kMaxWatched) {
    sub.session->Close("watching more than " + std::to_string(kMaxWatched) +
                       " jobs and tasks at once");
    return;
  }
  // The id must name something now; its current state follows the watch,
  // so that a change just before it is not missed.
  Status found = scheduler_.GetJob(job).status();
  if (found.ok() && !Sees(sub, job)) {
    found =
        PermissionDenied("job " + std::to_string(job) +
                         " is another user's: the server hides other users' jobs (--hide-others)");
  }
  if (found.ok() && request->task) {
    Result<core::TaskInfo> task = scheduler_.GetTask(TaskId{job, *request->task});
    found = task.status();
    if (task.ok()) {
      sub.watched_tasks.insert(task->id);
      if (sub.ends && !core::IsTerminal(task->state)) return;  // its end follows
      core::TaskStateChanged entry{task->id, task->state, task->state, task->attempt, task->reason};
      Add(sub, core::IsTerminal(task->state)
                   ? proto::EncodeTaskEvent(entry, clock_.Now(), *task, !Reads(sub, job))
                   : proto::EncodeTaskEvent(entry, clock_.Now()));
      SendHeld(sub);
      return;
    }
  }
  if (!found.ok()) {
    const nlohmann::json error = {
        {"type", "watch_error"}, {"watch", name}, {"message", found.message()}};
    Add(sub, error.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    SendHeld(sub);
    return;
  }
  sub.watched_jobs.insert(job);
  QueueSnapshot(id, sub.session, {job});
}

void EventStream::QueueSnapshot(uint64_t id, std::shared_ptr<net::WsSession> session,
                                std::vector<JobId> jobs) {
  if (auto it = snapshots_.find(id); it != snapshots_.end()) {
    // Its slices reach these jobs in turn.
    it->second->jobs.insert(it->second->jobs.end(), jobs.begin(), jobs.end());
    return;
  }
  auto snap = std::make_unique<Snapshot>();
  snap->jobs = std::move(jobs);
  snap->session = std::move(session);
  snap->id = id;
  snapshots_[id] = std::move(snap);
  ContinueSnapshot(id);
}

void EventStream::ContinueSnapshot(uint64_t id) {
  auto it = snapshots_.find(id);
  if (it == snapshots_.end()) return;
  Snapshot& snap = *it->second;
  if (SendSnapshotSlice(snap)) {
    snapshots_.erase(it);
    return;
  }
  std::weak_ptr<bool> alive = alive_;
  auto next = [this, alive, id] {
    if (!alive.expired()) ContinueSnapshot(id);
  };
  if (!snap.paced) {
    loop_.Post(std::move(next));
    return;
  }
  ++pace_waits_;
  if (!snap.wait) snap.wait = std::make_unique<net::Timer>(loop_);
  snap.wait->ArmAfter(kPaceWait, std::move(next));
}

bool EventStream::SendSnapshotSlice(Snapshot& snap) {
  SliceBudget budget;
  const Time now = clock_.Now();
  snap.paced = false;
  auto sub = subs_.find(snap.id);
  if (sub == subs_.end()) return true;  // closed meanwhile
  struct SendAtEnd {
    EventStream& stream;
    Sub& sub;
    ~SendAtEnd() { stream.SendHeld(sub); }
  } send_at_end{*this, sub->second};
  // The subscriber stays for the whole slice: sessions close from a post.
  while (snap.job < snap.jobs.size()) {
    Result<core::JobInfo> info = scheduler_.GetJob(snap.jobs[snap.job]);
    const uint64_t count = info.ok() ? info->task_count : 0;
    while (snap.task < count) {
      if (snap.session->unsent_bytes() + sub->second.held_bytes >= pace_bytes_) {
        snap.paced = true;
        return false;
      }
      const TaskId t{snap.jobs[snap.job], static_cast<uint32_t>(snap.task++)};
      Result<core::TaskInfo> task = scheduler_.GetTask(t);
      if (task.ok() && (!sub->second.ends || core::IsTerminal(task->state))) {
        core::TaskStateChanged entry{t, task->state, task->state, task->attempt, task->reason};
        Add(sub->second, sub->second.ends
                             ? proto::EncodeTaskEvent(entry, now, *task, !Reads(sub->second, t.job))
                             : proto::EncodeTaskEvent(entry, now));
      }
      if (budget.Spent()) return false;
    }
    ++snap.job;
    snap.task = 0;
  }
  return true;
}

void EventStream::Publish(const core::TaskStateChanged& change, Time at) {
  if (subs_.empty()) return;
  std::shared_ptr<const std::string> text;
  // For watchers of the task: with its contents, and without them.
  std::shared_ptr<const std::string> with_info[2];
  for (auto& [id, sub] : subs_) {
    if (!Wants(sub, change.task)) continue;
    if (sub.ends && !core::IsTerminal(change.to)) continue;
    // With its info: the end of a watched task, and with ?ends=true that of
    // any task of a watched job (a waiter for a map's calls watches the job).
    if (sub.watching && core::IsTerminal(change.to) &&
        (sub.watched_tasks.count(change.task) ||
         (sub.ends && sub.watched_jobs.count(change.task.job)))) {
      const bool hide = !Reads(sub, change.task.job);
      std::shared_ptr<const std::string>& text_with_info = with_info[hide ? 1 : 0];
      if (!text_with_info) {
        Result<core::TaskInfo> info = scheduler_.GetTask(change.task);
        text_with_info = std::make_shared<const std::string>(
            info.ok() ? proto::EncodeTaskEvent(change, at, *info, hide)
                      : proto::EncodeTaskEvent(change, at));
      }
      pending_.push_back(Pending{id, text_with_info});
      continue;
    }
    if (sub.coalesce) {
      if (sub.unsent_changes() == 0) coalescing_.push_back(id);
      Coalesce(sub, change, at);
      continue;
    }
    if (!text) text = std::make_shared<const std::string>(proto::EncodeTaskEvent(change, at));
    pending_.push_back(Pending{id, text});
  }
  if (!pending_.empty() || !coalescing_.empty()) flush_.Request();
}

void EventStream::Coalesce(Sub& sub, const core::TaskStateChanged& change, Time at) {
  Sub::Slots& slots = sub.change_of[change.task.job];
  const size_t i = change.task.index;
  if (slots.number.size() <= i) slots.number.resize(i + 1);
  if (slots.number[i] == 0) {
    slots.number[i] = sub.changes_base + sub.changes.size() + 1;
    ++slots.waiting;
    sub.changes.emplace_back(change, at);
  } else {
    auto& [merged, when] = sub.changes[slots.number[i] - 1 - sub.changes_base];
    const core::TaskState from = merged.from;
    merged = change;
    merged.from = from;
    when = at;
  }
  if (sub.unsent_changes() > kMaxCoalesced) {
    sub.changes.clear();
    sub.change_of.clear();
    loop_.Post([session = sub.session,
                why = "not reading: changes of more than " + std::to_string(kMaxCoalesced) +
                      " tasks wait"]() mutable { session->Close(std::move(why)); });
  }
}

void EventStream::Flush() {
  flush_.Clear();
  std::vector<Pending> pending;
  pending.swap(pending_);
  std::vector<uint64_t> batching;
  for (const Pending& p : pending) {
    auto it = subs_.find(p.sub);
    if (it == subs_.end()) continue;
    if (it->second.batch && it->second.held.empty()) batching.push_back(p.sub);
    Add(it->second, *p.text);
  }
  for (uint64_t id : batching) {
    if (auto it = subs_.find(id); it != subs_.end()) SendHeld(it->second);
  }
  std::vector<uint64_t> coalescing;
  coalescing.swap(coalescing_);
  for (uint64_t id : coalescing) {
    if (auto it = subs_.find(id); it != subs_.end()) SendHeld(it->second);
  }
}

bool EventStream::StartsAMessage(const Sub& sub, const std::string& event) {
  return sub.held.empty() || sub.held.back().size() + event.size() + 2 > kMaxBatchBytes;
}

void EventStream::Add(Sub& sub, const std::string& event) {
  if (!sub.batch) {
    sub.session->SendText(event);
    return;
  }
  if (StartsAMessage(sub, event)) {
    sub.held.emplace_back().reserve(std::min(kMaxBatchBytes, 4 * event.size() + 64));
    sub.held.back() += '[';
  } else {
    sub.held.back() += ',';
  }
  sub.held.back() += event;
  sub.held_bytes += event.size() + 1;
  if (sub.held_bytes > held_limit_) {
    sub.held.clear();
    sub.held_bytes = 0;
    // Closed from a post, so that the caller's Sub stays valid (its close
    // callback forgets it).
    loop_.Post([session = sub.session,
                why = "not reading: more than " + std::to_string(held_limit_) +
                      " bytes of events wait"]() mutable { session->Close(std::move(why)); });
  }
}

void EventStream::SendHeld(Sub& sub) {
  // One message in flight at a time: what comes meanwhile joins the next
  // (a coalescing subscriber's changes meanwhile merge per task).
  if (sub.session->unsent_bytes() > 0) return;
  // kCoalescedPerDrain messages' worth of changes: encoding a backlog of
  // a million at once would hold the loop for most of a second. The rest
  // go on merging.
  while (!sub.changes.empty()) {
    const auto& [change, at] = sub.changes.front();
    std::string event = proto::EncodeTaskEvent(change, at);
    if (sub.held.size() == kCoalescedPerDrain && StartsAMessage(sub, event)) break;
    if (auto it = sub.change_of.find(change.task.job); it != sub.change_of.end()) {
      it->second.number[change.task.index] = 0;
      if (--it->second.waiting == 0) sub.change_of.erase(it);
    }
    Add(sub, event);
    sub.changes.pop_front();
    ++sub.changes_base;
  }
  if (sub.held.empty()) return;
  std::vector<std::string> held;
  held.swap(sub.held);
  sub.held_bytes = 0;
  for (std::string& text : held) {
    text += ']';
    sub.session->SendText(std::move(text));
  }
}

void EventStream::Stop() {
  snapshots_.clear();
  std::unordered_map<uint64_t, Sub> subs;
  subs.swap(subs_);
  for (auto& [id, sub] : subs) sub.session->Close("server is stopping");
}

}  // namespace drover::server
