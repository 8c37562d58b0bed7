#include "server/event_stream.h"

#include "proto/api_json.h"

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
  std::vector<JobId> jobs;
  if (job) {
    if (!scheduler_.GetJob(*job).ok()) {
      session->Close("job " + std::to_string(*job) + " not found");
      return;
    }
    jobs.push_back(*job);
  } else {
    for (JobId j : scheduler_.Jobs()) {
      Result<core::JobInfo> info = scheduler_.GetJob(j);
      if (info.ok() && !info->done) jobs.push_back(j);
    }
  }
  for (JobId j : jobs) {
    Result<std::vector<TaskId>> tasks = scheduler_.JobTasks(j);
    if (!tasks.ok()) continue;
    for (const TaskId& t : *tasks) {
      Result<core::TaskInfo> info = scheduler_.GetTask(t);
      if (!info.ok()) continue;
      core::TaskStateChanged snap{t, info->state, info->state, info->attempt, info->reason};
      session->SendText(proto::EncodeTaskEvent(snap, now));
    }
  }
  const uint64_t id = session->id();
  std::weak_ptr<bool> alive = alive_;
  session->OnText([](std::string) {});
  session->OnClose([this, alive, id](const Status&) {
    if (!alive.expired()) subs_.erase(id);
  });
  subs_[id] = Sub{std::move(session), job};
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
  std::unordered_map<uint64_t, Sub> subs;
  subs.swap(subs_);
  for (auto& [id, sub] : subs) sub.session->Close("server is stopping");
}

}  // namespace drover::server
