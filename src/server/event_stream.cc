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
  if (auto it = request.query.find("snapshot"); it != request.query.end()) {
    if (it->second != "true" && it->second != "false") {
      session->Close("bad snapshot: want true or false, got \"" + it->second + "\"");
      return;
    }
    snapshot = it->second == "true";
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
  session->OnClose([this, alive, id](const Status&) {
    if (alive.expired()) return;
    subs_.erase(id);
    snapshots_.erase(id);
  });
  // Live events flow from now on; the snapshot follows a slice per loop
  // turn. A task that changes before its slice is reached gets its live
  // event first and then a snapshot entry with the state it has by then.
  subs_[id] = Sub{session, job};
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
  while (snap.job < snap.jobs.size()) {
    if (!subs_.count(snap.id)) return true;  // closed meanwhile
    Result<core::JobInfo> info = scheduler_.GetJob(snap.jobs[snap.job]);
    const uint64_t count = info.ok() ? info->task_count : 0;
    while (snap.task < count) {
      if (snap.session->unsent_bytes() >= pace_bytes_) {
        snap.paced = true;
        return false;
      }
      const TaskId t{snap.jobs[snap.job], static_cast<uint32_t>(snap.task++)};
      Result<core::TaskInfo> task = scheduler_.GetTask(t);
      if (task.ok()) {
        core::TaskStateChanged entry{t, task->state, task->state, task->attempt, task->reason};
        snap.session->SendText(proto::EncodeTaskEvent(entry, snap.now));
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
  for (const Pending& p : pending) {
    auto it = subs_.find(p.sub);
    if (it != subs_.end()) it->second.session->SendText(*p.text);
  }
}

void EventStream::Stop() {
  snapshots_.clear();
  std::unordered_map<uint64_t, Sub> subs;
  subs.swap(subs_);
  for (auto& [id, sub] : subs) sub.session->Close("server is stopping");
}

}  // namespace drover::server
