#include "server/log_relay.h"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "net/json_text.h"

namespace drover::server {

namespace {

// Appends the part of `frame` this consumer has not seen yet.
void Take(uint64_t& received, std::string& out, const proto::LogFrame& frame) {
  const uint64_t end = frame.offset + frame.bytes.size();
  if (frame.offset > received || end <= received) return;  // a gap, or old bytes
  out.append(frame.bytes.substr(received - frame.offset));
  received = end;
}

std::string FinalText(const std::string& error) {
  nlohmann::json j = error.empty() ? nlohmann::json{{"type", "eof"}}
                                   : nlohmann::json{{"type", "error"}, {"message", error}};
  return net::JsonText(j);
}

}  // namespace

LogRelay::LogRelay(net::EventLoop& loop, const core::Scheduler& scheduler, WorkerChannel& channel,
                   Duration fetch_timeout)
    : loop_(loop), scheduler_(scheduler), channel_(channel), fetch_timeout_(fetch_timeout) {}

LogRelay::~LogRelay() {
  *alive_ = false;
  Stop();
}

void LogRelay::Install() {
  std::weak_ptr<bool> alive = alive_;
  channel_.SetLogHandlers(LogHandlers{
      [this, alive](WorkerId w, const proto::LogChunk& c) {
        if (!alive.expired()) OnChunk(w, c);
      },
      [this, alive](WorkerId w, const proto::LogFrame& f) {
        if (!alive.expired()) OnFrame(w, f);
      },
      [this, alive](WorkerId w) {
        if (!alive.expired()) OnDisconnected(w);
      }});
}

Result<LogRelay::Key> LogRelay::Resolve(const net::Request& request) {
  ASSIGN_OR_RETURN(TaskId task, ParseTaskId(request.path_params.at("id")));
  proto::LogStream stream = proto::LogStream::kStdout;
  if (auto it = request.query.find("stream"); it != request.query.end()) {
    if (it->second == "stderr") {
      stream = proto::LogStream::kStderr;
    } else if (it->second != "stdout") {
      return InvalidArgument("stream: want stdout or stderr, got \"" + it->second + "\"");
    }
  }
  ASSIGN_OR_RETURN(core::TaskInfo info, scheduler_.GetTask(task));
  // Why there is no log to ask for: its state, and its reason when it has
  // one ("failed: command not found: trian.py").
  const std::string why = std::string(core::TaskStateName(info.state)) +
                          (info.reason.empty() ? "" : ": " + info.reason);
  // A task none of whose attempts started wrote nothing, and no worker
  // keeps a log for it: it waits, or every attempt failed before its
  // program ran (no such command, no working directory, an input it could
  // not get).
  if (!info.started_at && info.outcome && info.outcome->cached_from.job != 0) {
    const std::string from = info.outcome->cached_from.ToString();
    return FailedPrecondition("task " + task.ToString() +
                              " did not run: its result came from the cache (the same inputs as " +
                              from + "); drover logs " + from + " shows that run's output");
  }
  if (!info.started_at) {
    return FailedPrecondition("task " + task.ToString() +
                              (core::IsTerminal(info.state)
                                   ? " wrote no output: it never started ("
                                   : " has written no output: it has not started yet (") +
                              why + ")");
  }
  // An assigned attempt has not started yet: its worker may not have the
  // assignment yet (it goes out once the lease claim is granted), so it
  // would not know the log. (A task queued again after an attempt that ran
  // shows that attempt's log.)
  if (!info.worker || info.attempt == 0 || info.state == core::TaskState::kAssigned) {
    return FailedPrecondition("task " + task.ToString() + " has not started attempt " +
                              std::to_string(info.attempt) + " yet (" + why + ")");
  }
  if (!channel_.connected(*info.worker)) {
    return Unavailable("worker " + std::to_string(*info.worker) + " of task " + task.ToString() +
                       " is not connected");
  }
  return Key{*info.worker, task, info.attempt, stream};
}

void LogRelay::Fetch(const net::Request& request, net::Responder respond) {
  Result<Key> key = Resolve(request);
  if (!key.ok()) return respond(net::ErrorResponse(key.status()));
  const auto& [worker, task, attempt, stream] = *key;
  const uint64_t id = next_id_++;
  auto consumer = std::make_unique<Consumer>();
  consumer->respond = std::move(respond);
  consumer->timer = std::make_unique<net::Timer>(loop_);
  const Key k = *key;
  consumer->timer->ArmAfter(fetch_timeout_, [this, k, id] {
    EndFetch(k, id,
             net::ErrorResponse(504, StatusCode::kDeadlineExceeded, "the worker did not send the log in time"));
  });
  transfers_[k].fetches[id] = std::move(consumer);
  (void)channel_.Send(worker, proto::LogRequest{task, attempt, stream, false, false, 0});
}

void LogRelay::Follow(std::shared_ptr<net::WsSession> session, const net::Request& request) {
  Result<Key> key = Resolve(request);
  if (!key.ok()) {
    session->SendText(FinalText(key.status().ToString()));
    session->Close(key.status().message());
    return;
  }
  const auto& [worker, task, attempt, stream] = *key;
  const uint64_t id = next_id_++;
  auto consumer = std::make_unique<Consumer>();
  consumer->session = session;
  const Key k = *key;
  std::weak_ptr<bool> alive = alive_;
  session->OnText([](std::string) {});
  session->OnClose([this, alive, k, id](const Status&) {
    if (alive.expired()) return;
    auto t = transfers_.find(k);
    if (t == transfers_.end() || !t->second.follows.erase(id)) return;
    if (t->second.follows.empty()) {
      const auto& [w, task, attempt, stream] = k;
      (void)channel_.Send(w, proto::LogRequest{task, attempt, stream, false, true, 0});
    }
    DropIfIdle(k);
  });
  transfers_[k].follows[id] = std::move(consumer);
  (void)channel_.Send(worker, proto::LogRequest{task, attempt, stream, true, false, 0});
}

void LogRelay::OnFrame(WorkerId worker, const proto::LogFrame& frame) {
  auto t = transfers_.find(Key{worker, frame.task, frame.attempt, frame.stream});
  if (t == transfers_.end()) return;
  for (auto& [id, c] : t->second.fetches) Take(c->received, c->bytes, frame);
  for (auto& [id, c] : t->second.follows) {
    Take(c->received, c->bytes, frame);
    const size_t cut = c->bytes.rfind('\n');
    if (cut == std::string::npos) continue;
    c->session->SendBinary(c->bytes.substr(0, cut + 1));
    c->bytes.erase(0, cut + 1);
  }
}

void LogRelay::OnChunk(WorkerId worker, const proto::LogChunk& chunk) {
  const Key key{worker, chunk.task, chunk.attempt, chunk.stream};
  auto t = transfers_.find(key);
  if (t == transfers_.end() || (!chunk.eof && chunk.error.empty())) return;
  std::vector<uint64_t> ids;
  for (auto& [id, c] : t->second.fetches) ids.push_back(id);
  for (uint64_t id : ids) {
    if (!chunk.error.empty()) {
      EndFetch(key, id, net::ErrorResponse(404, StatusCode::kNotFound, chunk.error));
      continue;
    }
    EndFetch(key, id, net::TextResponse(std::move(transfers_[key].fetches[id]->bytes)));
  }
  // A follow ends with an error, or with eof once the attempt stopped
  // running (an eof while it runs answers a concurrent fetch).
  Result<core::TaskInfo> info = scheduler_.GetTask(chunk.task);
  const bool running = info.ok() && info->attempt == chunk.attempt &&
                       (info->state == core::TaskState::kRunning ||
                        info->state == core::TaskState::kAssigned);
  if (chunk.error.empty() && running) return;
  ids.clear();
  t = transfers_.find(key);
  if (t == transfers_.end()) return;
  for (auto& [id, c] : t->second.follows) ids.push_back(id);
  for (uint64_t id : ids) EndFollow(key, id, FinalText(chunk.error));
}

void LogRelay::OnDisconnected(WorkerId worker) {
  std::vector<Key> keys;
  for (auto& [key, t] : transfers_) {
    if (std::get<0>(key) == worker) keys.push_back(key);
  }
  for (const Key& key : keys) {
    std::vector<uint64_t> fetches, follows;
    for (auto& [id, c] : transfers_[key].fetches) fetches.push_back(id);
    for (auto& [id, c] : transfers_[key].follows) follows.push_back(id);
    for (uint64_t id : fetches) {
      EndFetch(key, id,
               net::ErrorResponse(503, StatusCode::kUnavailable, "the worker disconnected"));
    }
    for (uint64_t id : follows) EndFollow(key, id, FinalText("the worker disconnected"));
  }
}

void LogRelay::EndFetch(const Key& key, uint64_t id, net::Response response) {
  auto t = transfers_.find(key);
  if (t == transfers_.end()) return;
  auto c = t->second.fetches.find(id);
  if (c == t->second.fetches.end()) return;
  std::unique_ptr<Consumer> consumer = std::move(c->second);
  t->second.fetches.erase(c);
  DropIfIdle(key);
  consumer->respond(std::move(response));
  // The timer may be the caller; let it go after the callback returns.
  loop_.Post([consumer = std::shared_ptr<Consumer>(std::move(consumer))] {});
}

void LogRelay::EndFollow(const Key& key, uint64_t id, const std::string& final_text) {
  auto t = transfers_.find(key);
  if (t == transfers_.end()) return;
  auto c = t->second.follows.find(id);
  if (c == t->second.follows.end()) return;
  std::unique_ptr<Consumer> consumer = std::move(c->second);
  t->second.follows.erase(c);
  DropIfIdle(key);
  if (!consumer->bytes.empty()) consumer->session->SendBinary(std::move(consumer->bytes));
  consumer->session->SendText(final_text);
  consumer->session->Close("end of log");
}

void LogRelay::DropIfIdle(const Key& key) {
  auto t = transfers_.find(key);
  if (t != transfers_.end() && t->second.fetches.empty() && t->second.follows.empty()) {
    transfers_.erase(t);
  }
}

void LogRelay::Stop() {
  std::map<Key, Transfer> transfers;
  transfers.swap(transfers_);
  for (auto& [key, t] : transfers) {
    for (auto& [id, c] : t.fetches) {
      c->respond(net::ErrorResponse(503, StatusCode::kUnavailable, "server is stopping"));
    }
    for (auto& [id, c] : t.follows) c->session->Close("server is stopping");
  }
}

}  // namespace drover::server
