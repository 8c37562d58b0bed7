#include "server/event_stream.h"

#include "proto/api_json.h"
#include "server/sliced.h"

namespace drover::server {

EventStream::~EventStream() {
  *alive_ = false;
  Stop();
}

void EventStream::Attach(std::shared_ptr<net::WsSession> session, const net::Request& request,
                         Time now) {
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
  for (auto [name, flag] : {std::pair{"snapshot", &snapshot}, std::pair{"batch", &batch}}) {
    auto it = request.query.find(name);
    if (it == request.query.end()) continue;
    if (it->second != "true" && it->second != "false") {
      session->Close(std::string("bad ") + name + ": want true or false, got \"" + it->second +
                     "\"");
      return;
    }
    *flag = it->second == "true";
  }
  auto snap = std::make_unique<Snapshot>();
  if (job) {
    if (!scheduler_.GetJob(*job).ok()) {
      session->Close("job " + std::to_string(*job) + " not found");
      return;
    }
    snap->jobs.push_back(*job);
  } else if (snapshot) {
    for (JobId j : scheduler_.Jobs()) {
      Result<core::JobInfo> info = scheduler_.GetJob(j);
      if (info.ok() && !info->done) snap->jobs.push_back(j);
    }
  }
  const uint64_t id = session->id();
  std::weak_ptr<bool> alive = alive_;
  session->OnText([](std::string) {});
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
  subs_[id] = Sub{session, job, batch};
  if (!snapshot) return;
  snap->session = std::move(session);
  snap->id = id;
  snap->now = now;
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
      if (task.ok()) {
        core::TaskStateChanged entry{t, task->state, task->state, task->attempt, task->reason};
        Add(sub->second, proto::EncodeTaskEvent(entry, snap.now));
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
  for (auto& [id, sub] : subs_) {
    if (sub.job && *sub.job != change.task.job) continue;
    if (!text) text = std::make_shared<const std::string>(proto::EncodeTaskEvent(change, at));
    pending_.push_back(Pending{id, text});
  }
  if (!pending_.empty()) flush_.Request();
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
}

void EventStream::Add(Sub& sub, const std::string& event) {
  if (!sub.batch) {
    sub.session->SendText(event);
    return;
  }
  if (sub.held.empty() || sub.held.back().size() + event.size() + 2 > kMaxBatchBytes) {
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
  // One message in flight at a time: what comes meanwhile joins the next.
  if (sub.held.empty() || sub.session->unsent_bytes() > 0) return;
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
