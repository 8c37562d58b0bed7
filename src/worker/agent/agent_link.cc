// Agent::Impl (agent_impl.h): the server link. Connecting to the servers
// in turn, with backoff and a standby's redirect; decoding each message
// and handing it on (to the state machine, the file plane, the inputs held
// for their files, a replica's fetch, a log transfer); reconnecting when
// the connection is lost.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "net/client_options.h"
#include "net/ws_session.h"
#include "proto/messages.h"
#include "proto/messages_binary.h"
#include "worker/agent/agent_impl.h"
#include "worker/exec/host_features.h"
#include "worker/state/agent_convert.h"

namespace drover::worker {

// ---- connection ----------------------------------------------------------

void Agent::Impl::Connect() {
  if (stopped_) return;
  current_ = redirect_ ? *redirect_ : servers_[next_server_ % servers_.size()];
  redirect_.reset();
  const ServerAddress& address = current_;
  const Duration heartbeat = state_->heartbeat_interval();
  net::ClientOptions options;
  options.host = address.host;
  options.port = address.port;
  options.tls = config_.tls;
  options.fingerprint = config_.fingerprint;
  options.local_socket = config_.local_socket;
  options.token = config_.token;
  // A server that accepts the connection but never finishes the handshake
  // (paused: SIGSTOP, a stalled host) must not hold the worker past its
  // fencing deadline while another server could take it: an attempt gets
  // 4 heartbeats (at least 1 s, at most connect_timeout).
  options.timeout =
      std::min<Duration>(config_.connect_timeout, std::max<Duration>(Seconds(1), 4 * heartbeat));
  options.max_ws_message_bytes = proto::kMaxMessageBytes;
  // Pings every heartbeat interval; a server silent for two intervals is
  // gone (see the fencing note in agent.h).
  options.ws_idle_timeout = 2 * heartbeat;
  server_options_ = options;
  server_options_.timeout = Seconds(30);  // file transfers: without progress
  const uint64_t gen = ++gen_;
  std::weak_ptr<bool> alive = alive_;
  link_->Connect(options, [this, alive, gen](Result<std::shared_ptr<net::WsSession>> session) {
    if (alive.expired() || !*alive.lock()) {
      if (session.ok()) (*session)->Close("worker stopped");
      return;
    }
    OnConnected(gen, std::move(session));
  });
}

void Agent::Impl::OnConnected(uint64_t gen, Result<std::shared_ptr<net::WsSession>> session) {
  if (gen != gen_) {
    if (session.ok()) (*session)->Close("superseded");
    return;
  }
  const ServerAddress& address = current_;
  if (!session.ok()) {
    spdlog::warn("worker {}: cannot reach server {}:{}: {}", name_, address.host, address.port,
                 session.status().ToString());
    ++next_server_;  // try the next one
    ScheduleReconnect();
    return;
  }
  session_ = std::move(session).value();
  argv_by_id_.clear();  // numbers are per connection
  std::weak_ptr<bool> alive = alive_;
  session_->OnText([this, alive, gen](std::string text) {
    if (!alive.expired() && *alive.lock()) OnText(gen, text);
  });
  session_->OnBinary([this, alive, gen](std::string data) {
    if (!alive.expired() && *alive.lock()) OnBinary(gen, data);
  });
  session_->OnClose([this, alive, gen](const Status& why) {
    if (!alive.expired() && *alive.lock()) OnClosed(gen, why);
  });
  Run(LinkUp{});  // the Hello
}

void Agent::Impl::OnText(uint64_t gen, const std::string& text) {
  if (gen != gen_ || !session_) return;
  OnFrame(gen, proto::DecodeServerFrame(text));
}

void Agent::Impl::OnBinary(uint64_t gen, const std::string& data) {
  if (gen != gen_ || !session_) return;
  // The server sends no other binary frames.
  if (proto::IsMessageFrame(data)) OnFrame(gen, proto::DecodeServerBinaryFrame(data));
}

void Agent::Impl::OnFrame(uint64_t gen, Result<std::vector<proto::ServerMessage>> frame) {
  if (!frame.ok()) {
    spdlog::error("worker {}: malformed message from the server, reconnecting: {}", name_,
                  frame.status().ToString());
    session_->Close("malformed message");
    return;
  }
  for (proto::ServerMessage& message : *frame) {
    if (auto* assign = std::get_if<proto::Assign>(&message)) {
      if (Status resolved = ResolveArgvIds(*assign); !resolved.ok()) {
        spdlog::error("worker {}: malformed message from the server, reconnecting: {}", name_,
                      resolved.ToString());
        session_->Close("malformed message");
        return;
      }
    }
    OnServerMessage(std::move(message));
    if (gen != gen_ || !session_) return;
  }
}

Status Agent::Impl::ResolveArgvIds(proto::Assign& assign) {
  for (proto::Assignment& a : assign.tasks) {
    if (a.argv_id == 0) continue;
    const size_t i = a.argv_id - 1;
    if (!a.argv.empty()) {
      // Numbered in order as the server sends them whole.
      if (i != argv_by_id_.size()) {
        return InvalidArgument("assignment " + a.task.ToString() + ": command number " +
                               std::to_string(a.argv_id) + " out of order (expected " +
                               std::to_string(argv_by_id_.size() + 1) + ")");
      }
      argv_by_id_.push_back(a.argv);
    } else if (i < argv_by_id_.size()) {
      a.argv = argv_by_id_[i];
    } else {
      return InvalidArgument("assignment " + a.task.ToString() + ": command number " +
                             std::to_string(a.argv_id) + " was never sent");
    }
  }
  return Status::Ok();
}

void Agent::Impl::OnServerMessage(proto::ServerMessage message) {
  std::optional<proto::ServerMessage> decoded(std::move(message));
  const bool was_established = state_->established();
  if (const auto* request = std::get_if<proto::LogRequest>(&*decoded)) {
    // Contact first (the state machine counts every message), then the
    // transfer, which is the shell's.
    proto::LogRequest copy = *request;
    Run(FromServer{std::move(*decoded)});
    return OnLogRequest(copy);
  }
  if (const auto* drain = std::get_if<proto::Drain>(&*decoded)) {
    spdlog::info("worker {}: {} by the server{}{}", name_, drain->drain ? "drained" : "undrained",
                 drain->reason.empty() ? "" : ": ", drain->reason);
  } else if (const auto* error = std::get_if<proto::Error>(&*decoded)) {
    spdlog::error("worker {}: the server refused the session: {}: {}", name_, error->code,
                  error->message);
    if (!error->leader.empty() && !was_established) {
      // A standby: its close follows; connect to the leader it named.
      Result<ServerAddress> leader = ParseServerAddress(error->leader);
      if (leader.ok()) redirect_ = *leader;
    }
  }
  if (const auto* ack = std::get_if<proto::HelloAck>(&*decoded)) {
    server_batches_ = ack->batches;
    server_binary_ = ack->binary;
    if (files_) {
      files_->Attached(ack->grant_key, ack->worker);
      files_->SetServer(server_options_);
    }
  }
  if (const auto* release = std::get_if<proto::ReleaseOutputs>(&*decoded); release && files_) {
    std::string jobs;
    for (JobId job : release->jobs) jobs += (jobs.empty() ? "" : ", ") + std::to_string(job);
    spdlog::info("worker {}: released the outputs of job(s) {}: they may be evicted now", name_,
                 jobs);
    files_->ReleaseOutputs(release->jobs);
  }
  if (const auto* copy = std::get_if<proto::Replicate>(&*decoded)) return OnReplicate(*copy);
  if (auto* assign = std::get_if<proto::Assign>(&*decoded); assign && !assign->tasks.empty()) {
    // An attempt whose input files are not all here yet reaches the state
    // machine once they are (or is refused): only then can it start.
    HoldForInputs(*assign);
    if (assign->tasks.empty()) return;
  }
  const bool hello_ack = std::holds_alternative<proto::HelloAck>(*decoded);
  std::optional<uint64_t> disk_free;
  if (const auto* assign = std::get_if<proto::Assign>(&*decoded)) {
    for (const proto::Assignment& a : assign->tasks) {
      if (a.disk_bytes > 0) {
        disk_free = FreeDiskBytes(config_.workdir);
        break;
      }
    }
  }
  Run(FromServer{std::move(*decoded), disk_free});
  if (hello_ack && !stopped_) {
    worker_id_ = state_->worker_id();
    backoff_.Reset();
    // The jobs whose outputs this cache keeps (maybe from a previous run):
    // the server releases those it no longer needs kept.
    if (files_) {
      if (std::vector<JobId> kept = files_->KeptJobs(); !kept.empty()) {
        Send(proto::OutputsKept{std::move(kept)});
      }
    }
    if (config_.on_attached) config_.on_attached();
  }
}

void Agent::Impl::OnClosed(uint64_t gen, const Status& why) {
  if (gen != gen_) return;
  const bool was_established = state_->established();
  spdlog::warn("worker {}: connection to the server lost ({}); {} tasks keep running", name_,
               why.ToString(), state_->running());
  // Refused before the HelloAck (a standby, or a server that turned this
  // worker away): go on to the leader it named, or to the next server.
  if (!was_established && !redirect_) ++next_server_;
  session_.reset();
  server_batches_ = false;
  server_binary_ = false;
  argv_by_id_.clear();
  batch_.clear();  // unacknowledged results go again in the next Hello
  Run(LinkDown{});
  logs_->Reset();
  ScheduleReconnect();
}

void Agent::Impl::ScheduleReconnect() {
  if (stopped_) return;
  // A leader a standby named, or the next server of the list, is tried at
  // once; the backoff grows only when a whole round of the list failed, so
  // that cycling through a dead leader and a standby during a takeover does
  // not push the next attempt past the new leader's start.
  const bool mid_round = redirect_.has_value() || next_server_ % servers_.size() != 0;
  reconnect_timer_.ArmAfter(mid_round ? Millis(50) : backoff_.Next(), [this] { Connect(); });
}

void Agent::Impl::Send(const proto::WorkerMessage& message) {
  if (!session_) return;
  proto::WireMessage wire = proto::EncodeForPeer(message, server_binary_);
  if (!server_batches_) {
    for (proto::WireMessage& frame : proto::FramesFor({std::move(wire)}, false)) {
      SendFrame(std::move(frame));
    }
    return;
  }
  batch_.push_back(std::move(wire));
  if (batch_posted_) return;
  batch_posted_ = true;
  std::weak_ptr<bool> alive = alive_;
  loop_.Post([this, alive] {
    if (!alive.expired() && *alive.lock()) FlushBatch();
  });
}

void Agent::Impl::FlushBatch() {
  batch_posted_ = false;
  std::vector<proto::WireMessage> messages;
  messages.swap(batch_);
  if (!session_) return;
  for (proto::WireMessage& frame : proto::FramesFor(std::move(messages), true)) {
    SendFrame(std::move(frame));
  }
}

void Agent::Impl::SendFrame(proto::WireMessage frame) {
  if (frame.binary) return session_->SendBinary(std::move(frame.bytes));
  session_->SendText(std::move(frame.bytes));
}

void Agent::Impl::OnLogRequest(const proto::LogRequest& request) {
  Result<LogTarget> target = NotFound("no such task on this worker: " + request.task.ToString());
  if (auto it = known_logs_.find(request.task); it != known_logs_.end()) {
    const KnownLog& known = it->second;
    if (request.attempt != 0 && request.attempt != known.attempt) {
      target = NotFound("attempt " + std::to_string(request.attempt) + " of " +
                        request.task.ToString() + " did not run on this worker");
    } else {
      LogTarget t;
      t.attempt = known.attempt;
      t.path = request.stream == proto::LogStream::kStdout ? known.dirs.stdout_path
                                                           : known.dirs.stderr_path;
      t.running = state_->RunningAttempt(request.task) == known.attempt;
      if (t.running) {
        // The executor makes output files with their first byte; a reader
        // that follows needs the file now.
        Status opened = runner_->OpenOutputFiles(request.task);
        if (!opened.ok()) {
          spdlog::warn("worker {}: {}", name_, opened.message());
        }
      }
      target = std::move(t);
    }
  }
  logs_->Request(request, target);
}

}  // namespace drover::worker
