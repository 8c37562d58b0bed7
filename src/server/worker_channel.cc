#include "server/worker_channel.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>
#include <vector>
#include <type_traits>

#include "common/quantity.h"
#include "net/http_types.h"
#include "server/assignment.h"

namespace drover::server {
namespace {

// The longest owner note a worker's Owner message may leave on the server.
constexpr size_t kMaxOwnerNoteBytes = 256;

}  // namespace

WorkerChannel::WorkerChannel(net::EventLoop& loop, CoreDriver& driver, WorkerRegistry& registry,
                             WorkerChannelOptions options)
    : loop_(loop),
      driver_(driver),
      registry_(registry),
      options_(std::move(options)),
      silence_timer_(loop),
      pacer_(std::make_shared<net::ReadPacer>(loop, options_.reads_per_turn)) {
  if (options_.silence_limit <= Duration::zero()) {
    options_.silence_limit = std::max<Duration>(3 * options_.heartbeat_interval, Seconds(5));
  }
  Result<net::GrantSigner> signer = net::GrantSigner::Create();
  if (signer.ok()) {
    grants_ = std::make_unique<net::GrantSigner>(std::move(signer).value());
  } else {
    spdlog::error("no key for file grants, so workers serve no files: {}",
                  signer.status().ToString());
  }
  file_grants_.source_of = [this](WorkerId worker) { return FileSourceOf(worker); };
  file_grants_.grant = [this](const std::string& sha256, WorkerId requester) {
    return Grant(sha256, "w" + std::to_string(requester));
  };
}

std::string WorkerChannel::grant_key() const { return grants_ ? grants_->public_key() : ""; }

std::optional<proto::FileSource> WorkerChannel::FileSourceOf(WorkerId worker) const {
  auto it = file_sources_.find(worker);
  if (it == file_sources_.end()) return std::nullopt;
  return it->second;
}

std::string WorkerChannel::Grant(const std::string& sha256, const std::string& requester) const {
  if (!grants_) return {};
  return grants_->Sign(net::Grant{sha256, requester, options_.clock->Now() + options_.grant_ttl});
}

WorkerChannel::~WorkerChannel() {
  *alive_ = false;
  Stop();
}

void WorkerChannel::Attach(std::shared_ptr<net::WsSession> session) {
  if (stopped_) {
    session->Close("server is stopping");
    return;
  }
  const uint64_t id = session->id();
  std::weak_ptr<bool> alive = alive_;
  session->OnText([this, alive, id](std::string text) {
    if (!alive.expired()) OnText(id, text);
  });
  session->OnBinary([this, alive, id](std::string data) {
    if (!alive.expired()) OnBinary(id, data);
  });
  session->OnClose([this, alive, id](const Status& s) {
    if (!alive.expired()) OnClosed(id, s);
  });
  session->PaceReads(pacer_);
  conns_[id] = Conn{std::move(session), 0, options_.clock->Monotonic()};
  if (!silence_timer_.armed()) ArmSilenceCheck();
}

void WorkerChannel::ArmSilenceCheck() {
  silence_timer_.ArmAfter(options_.heartbeat_interval, [this] { CheckSilence(); });
}

void WorkerChannel::CheckSilence() {
  const Duration now = options_.clock->Monotonic();
  std::vector<uint64_t> silent;
  for (const auto& [id, conn] : conns_) {
    if (conn.worker != 0 && now - conn.last_heard > options_.silence_limit) silent.push_back(id);
  }
  for (uint64_t id : silent) {
    std::shared_ptr<net::WsSession> session = conns_.at(id).session;
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(now - conns_.at(id).last_heard);
    spdlog::warn("worker {} ({}) silent for {} ms; dropping its connection",
                 conns_.at(id).worker, session->remote(), ms.count());
    // Forgotten first, so the session's own close callback finds nothing.
    OnClosed(id, Unavailable("no message for " + std::to_string(ms.count()) + " ms"));
    session->Close("no heartbeat");
  }
  if (!conns_.empty() && !stopped_) ArmSilenceCheck();
}

void WorkerChannel::Reject(uint64_t conn, const Status& why) {
  auto it = conns_.find(conn);
  if (it == conns_.end()) return;
  if (it->second.rejected) return;
  it->second.rejected = true;
  spdlog::warn("worker channel {} (worker {}): {}; closing the connection",
               it->second.session->remote(), it->second.worker, net::Printable(why.ToString(), 1000));
  it->second.session->SendText(
      proto::Encode(proto::ServerMessage{proto::Error{std::string(StatusCodeName(why.code())),
                                                      why.message()}}));
  it->second.session->Close(why.message());
}

void WorkerChannel::OnText(uint64_t conn, const std::string& text) {
  auto it = conns_.find(conn);
  if (it == conns_.end() || it->second.rejected) return;
  it->second.last_heard = options_.clock->Monotonic();
  OnFrame(conn, proto::DecodeWorkerFrame(text));
}

void WorkerChannel::OnFrame(uint64_t conn, Result<std::vector<proto::WorkerMessage>> decoded) {
  if (!decoded.ok()) return Reject(conn, decoded.status());
  // A batch frame is as much work as its messages were apart.
  if (decoded->size() > 1) pacer_->Charge(decoded->size() - 1);
  for (proto::WorkerMessage& message : *decoded) {
    OnMessage(conn, message);
    auto it = conns_.find(conn);
    if (it == conns_.end() || it->second.rejected) return;
  }
}

void WorkerChannel::OnMessage(uint64_t conn, proto::WorkerMessage& message) {
  auto it = conns_.find(conn);
  const WorkerId worker = it->second.worker;
  if (it->second.admitting) {
    if (std::holds_alternative<proto::Hello>(message)) {
      return Reject(conn, FailedPrecondition("second hello"));
    }
    if (it->second.early.size() >= kMaxEarlyMessages) {
      return Reject(conn, ResourceExhausted("more than " + std::to_string(kMaxEarlyMessages) +
                                            " messages before the hello was answered"));
    }
    it->second.early.push_back(std::move(message));
    return;
  }
  if (worker == 0 && !std::holds_alternative<proto::Hello>(message)) {
    return Reject(conn, FailedPrecondition(std::string(proto::MessageTypeName(message)) +
                                           " before hello"));
  }
  std::visit(
      [&](auto& m) {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, proto::Hello>) {
          if (worker != 0) return Reject(conn, FailedPrecondition("second hello"));
          OnHello(conn, m);
        } else if constexpr (std::is_same_v<T, proto::Heartbeat>) {
          if (m.unhealthy != it->second.unhealthy) {
            if (m.unhealthy.empty()) {
              spdlog::info("worker {} is healthy again: taking work", worker);
            } else {
              spdlog::warn("worker {} is unhealthy: {}; it takes no new work", worker,
                           m.unhealthy);
              if (it->second.unhealthy.empty()) {
                const std::string kind = m.unhealthy_kind == "disk" ? "disk" : "program";
                ++health_failures_[kind];
              }
            }
            it->second.unhealthy = m.unhealthy;
          }
          if (m.sick_gpus != it->second.sick_gpus) {
            for (const auto& [index, why] : m.sick_gpus) {
              if (it->second.sick_gpus.count(index) == 0) {
                ++health_failures_["gpu"];
                spdlog::warn("worker {}: GPU {} is sick: {}; it takes no new work", worker, index,
                             why);
              }
            }
            for (const auto& [index, why] : it->second.sick_gpus) {
              if (m.sick_gpus.count(index) == 0) {
                spdlog::info("worker {}: GPU {} is well again", worker, index);
              }
            }
            it->second.sick_gpus = m.sick_gpus;
          }
          driver_.Handle(core::WorkerHeartbeat{worker, std::move(m.utilization),
                                               std::move(m.unhealthy), std::move(m.sick_gpus)});
        } else if constexpr (std::is_same_v<T, proto::Started>) {
          for (const proto::StartedTask& t : m.tasks) {
            handoffs_.Started(worker, t.started_at);
            driver_.Handle(core::TaskStarted{t.task, t.attempt, worker});
          }
        } else if constexpr (std::is_same_v<T, proto::Finished>) {
          for (const proto::FinishedTask& t : m.tasks) handoffs_.Exited(worker, t.finished_at);
          OnFinished(worker, std::move(m.tasks));
        } else if constexpr (std::is_same_v<T, proto::Refused>) {
          spdlog::info("worker {} refused {}#{}: {}", worker, m.task.ToString(), m.attempt,
                       net::Printable(m.reason, 1000));
          core::TaskRefused refused{m.task, m.attempt, worker, std::move(m.reason), {}};
          for (const proto::CorruptInput& c : m.corrupt) {
            refused.corrupt.emplace_back(c.task, c.holder);
          }
          driver_.Handle(std::move(refused));
        } else if constexpr (std::is_same_v<T, proto::LogChunk>) {
          if (log_.chunk) log_.chunk(worker, m);
        } else if constexpr (std::is_same_v<T, proto::Drain>) {
          driver_.Handle(core::WorkerDrained{worker, m.drain});
        } else if constexpr (std::is_same_v<T, proto::Owner>) {
          spdlog::info("worker {}: {}", worker, net::Printable(m.note, 200));
          if (m.freeze_us > 0) owner_freeze_.Observe(static_cast<double>(m.freeze_us) / 1e6);
          // Shown in tables and kept per worker: a line, not a message's 16 MiB.
          if (m.note.size() > kMaxOwnerNoteBytes) m.note.resize(kMaxOwnerNoteBytes);
          driver_.Handle(core::WorkerPaused{worker, m.present, std::move(m.note), m.since});
        } else if constexpr (std::is_same_v<T, proto::CheckpointSaved>) {
          OnCheckpointSaved(worker, m);
        } else if constexpr (std::is_same_v<T, proto::OutputsKept>) {
          if (outputs_kept_) outputs_kept_(worker, m.jobs);
        } else if constexpr (std::is_same_v<T, proto::OutputsReplicated>) {
          spdlog::info("worker {} holds a copy of the outputs of {}#{}", worker, m.task.ToString(),
                       m.attempt);
          // It keeps them under their job: the job's release reaches it too.
          if (outputs_kept_) outputs_kept_(worker, {m.task.job});
          driver_.Handle(core::OutputsReplicated{m.task, m.attempt, worker});
        }
      },
      message);
}

void WorkerChannel::OnBinary(uint64_t conn, const std::string& data) {
  auto it = conns_.find(conn);
  if (it == conns_.end() || it->second.rejected) return;
  it->second.last_heard = options_.clock->Monotonic();
  if (it->second.worker == 0) return Reject(conn, FailedPrecondition("binary frame before hello"));
  if (proto::IsMessageFrame(data)) return OnFrame(conn, proto::DecodeWorkerBinaryFrame(data));
  Result<proto::LogFrame> frame = proto::DecodeLogFrame(data);
  if (!frame.ok()) return Reject(conn, frame.status());
  if (log_.frame) log_.frame(it->second.worker, *frame);
}

void WorkerChannel::OnHello(uint64_t conn, proto::Hello& hello) {
  if (hello.protocol_version != proto::kProtocolVersion) {
    return Reject(conn, FailedPrecondition("protocol version " +
                                           std::to_string(hello.protocol_version) +
                                           " not supported; this server speaks " +
                                           std::to_string(proto::kProtocolVersion)));
  }
  if (hello.worker_name.empty()) return Reject(conn, InvalidArgument("hello: empty worker_name"));
  hello.resources.name = hello.worker_name;
  Status valid = hello.resources.Validate();
  if (!valid.ok()) return Reject(conn, valid.WithContext("hello: resources"));
  // The name is this worker's only if its key is the one recorded for it
  // (worker_registry.h): nobody else can take over its connection, its
  // tasks or its results.
  // Durably active before the core hears of it, so before any assignment:
  // a restarted server then waits for this worker (registry header). The
  // key, the id and the active mark of a new worker are staged, and the
  // hellos of a burst written together at the loop's idle point; until
  // then nothing of this one goes further (nor does a known worker's,
  // while any change waits: it may be its own).
  Result<WorkerId> id = registry_.Stage(hello.worker_name, hello.key);
  if (!id.ok()) return Reject(conn, id.status().WithContext("hello"));
  if (!registry_.staged() && durable_.empty()) return Admitted(conn, hello, *id);
  conns_.at(conn).admitting = true;
  admissions_.push_back(Admission{conn, std::move(hello), *id});
  registry_commit_.Request();
}

void WorkerChannel::CommitRegistry() {
  registry_commit_.Clear();
  const Status saved = registry_.Commit();
  if (!saved.ok()) spdlog::warn("worker registry: {}", saved.ToString());
  std::vector<Admission> batch;
  batch.swap(admissions_);
  if (stopped_) return;
  for (Admission& a : batch) {
    if (saved.ok()) {
      durable_.push_back(std::move(a));
    } else if (auto it = conns_.find(a.conn); it != conns_.end() && !it->second.rejected) {
      it->second.admitting = false;
      Reject(a.conn, saved.WithContext("recording the worker"));
    }
  }
  ContinueAdmissions();
}

void WorkerChannel::ContinueAdmissions() {
  admit_next_.Clear();
  if (stopped_) return;
  // A slice per turn: a thousand machines that joined at once do not hold
  // the loop for the length of all their hellos.
  for (size_t n = 0; n < kAdmissionsPerTurn && !durable_.empty(); ++n) {
    Admission a = std::move(durable_.front());
    durable_.pop_front();
    auto it = conns_.find(a.conn);
    if (it == conns_.end() || it->second.rejected) {
      // Marked active, but its connection closed before the core heard of
      // it: nothing would ever declare it lost, and a restart would wait
      // for it. (Unless it is back on another connection.)
      Result<core::WorkerInfo> info = driver_.scheduler().GetWorker(a.worker);
      if (workers_.count(a.worker) == 0 && !Admitting(a.worker) && !(info.ok() && !info->lost)) {
        registry_.StageInactive(a.worker);
        registry_commit_.Request();
      }
      continue;
    }
    it->second.admitting = false;
    std::vector<proto::WorkerMessage> early = std::move(it->second.early);
    Admitted(a.conn, a.hello, a.worker);
    for (proto::WorkerMessage& m : early) {
      auto c = conns_.find(a.conn);
      if (c == conns_.end() || c->second.rejected) break;
      OnMessage(a.conn, m);
    }
  }
  if (!durable_.empty()) admit_next_.Request();
}

bool WorkerChannel::Admitting(WorkerId worker) const {
  for (const Admission& a : durable_) {
    if (a.worker == worker) return true;
  }
  for (const Admission& a : admissions_) {
    if (a.worker == worker) return true;
  }
  return false;
}

void WorkerChannel::Admitted(uint64_t conn, proto::Hello& hello, WorkerId worker) {
  // Assignments of this turn go out on the connection they were made for
  // (or nowhere, if it is gone): whatever the worker does not report below
  // is taken back by the core, and must not reach it on the new one.
  FlushAssigns();
  // A second connection for the same worker replaces the first. The worker
  // reads nothing more from the old one (it opened this one), so what was
  // sent there and is not in this hello never arrives.
  if (auto old = workers_.find(worker); old != workers_.end() && old->second != conn) {
    auto old_conn = conns_.find(old->second);
    workers_.erase(old);
    if (old_conn != conns_.end()) {
      spdlog::warn("worker {} ({}) connected again from {}; closing the old connection", worker,
                   hello.worker_name, conns_.at(conn).session->remote());
      old_conn->second.worker = 0;
      old_conn->second.session->Close("replaced by a new connection");
    }
  }
  conns_.at(conn).worker = worker;
  workers_[worker] = conn;
  lost_timers_.erase(worker);

  Result<core::WorkerInfo> known = driver_.scheduler().GetWorker(worker);
  if (known.ok() && !known->lost) {
    spdlog::info("worker {} ({}) re-attached: {} running, {} results", worker, hello.worker_name,
                 hello.running.size(), hello.finished.size());
  } else {
    spdlog::info("worker {} ({}) joined from {}: {} cores, {} GPUs", worker, hello.worker_name,
                 conns_.at(conn).session->remote(), hello.resources.cpu_cores.size(),
                 hello.resources.gpus.size());
  }
  if (known.ok() && !(known->resources == hello.resources)) {
    spdlog::warn("worker {} ({}) offers other resources than before: {} cores, {}, {} GPUs "
                 "(was {} cores, {}, {} GPUs)",
                 worker, hello.worker_name, hello.resources.cpu_cores.size(),
                 FormatBytes(hello.resources.mem_bytes), hello.resources.gpus.size(),
                 known->resources.cpu_cores.size(), FormatBytes(known->resources.mem_bytes),
                 known->resources.gpus.size());
  }
  if (hello.files_port != 0 && !hello.files_fingerprint.empty()) {
    // Peers reach its file service at the address it connected from; one
    // on the local socket is on this machine.
    const std::string& remote = conns_.at(conn).session->remote();
    std::string host = "127.0.0.1";
    if (!remote.empty() && remote.front() == '[') {
      host = remote.substr(1, remote.find(']') - 1);
    } else if (size_t colon = remote.rfind(':');
               colon != std::string::npos && colon > 0 && remote.front() != '/') {
      host = remote.substr(0, colon);
    }
    file_sources_[worker] =
        proto::FileSource{worker, host, hello.files_port, hello.files_fingerprint};
  } else {
    file_sources_.erase(worker);
  }
  proto::HelloAck ack;
  ack.worker = worker;
  ack.grant_key = grant_key();
  ack.server_instance = options_.server_instance;
  ack.heartbeat_interval = options_.heartbeat_interval;
  ack.lease_ttl = options_.lease_ttl;
  ack.batches = options_.batches;
  ack.binary = options_.binary;
  conns_.at(conn).session->SendText(proto::Encode(proto::ServerMessage{ack}));
  conns_.at(conn).batches = options_.batches && hello.batches;
  conns_.at(conn).binary = options_.binary && hello.binary;
  conns_.at(conn).argv_ids = hello.argv_ids;

  // The worker's account of its attempts goes to the core as one event
  // (core/events.h, WorkerAttached): it joins, its results count, what it
  // runs is confirmed, adopted (an assignment the journal never saw: the
  // previous server died before it was durable) or killed, and what it
  // does not hold is taken back, all before any placement the join allows.
  core::WorkerAttached attached;
  attached.worker = worker;
  attached.resources = hello.resources;
  for (proto::RunningTask& run : hello.running) {
    attached.running.push_back(core::ReportedAttempt{run.task, run.attempt, std::move(run.cores),
                                                     std::move(run.gpus), run.queued});
  }
  proto::Ack results;
  NoteOutputs(worker, hello.finished);
  for (proto::FinishedTask& f : hello.finished) {
    results.tasks.push_back({f.task, f.attempt});
    attached.finished.push_back(core::TaskFinished{f.task, f.attempt, std::move(f.outcome), worker,
                                                   f.never_started, f.vacated});
  }
  // What the core knew before, to log what it adopted (rare: only after a
  // crash that lost assignments).
  std::map<TaskId, uint32_t> before;
  for (const core::ReportedAttempt& run : attached.running) {
    if (Result<core::TaskInfo> info = driver_.scheduler().GetTask(run.task); info.ok()) {
      before[run.task] = info->attempt;
    }
  }
  for (const core::TaskFinished& f : attached.finished) {
    if (Result<core::TaskInfo> info = driver_.scheduler().GetTask(f.task); info.ok()) {
      before[f.task] = info->attempt;
    }
  }
  driver_.Handle(std::move(attached));
  for (const auto& [task, attempt] : before) {
    Result<core::TaskInfo> info = driver_.scheduler().GetTask(task);
    if (info.ok() && info->attempt > attempt && info->worker == worker) {
      spdlog::warn("worker {}: adopted {}#{} ({}): its assignment never reached the journal",
                   worker, task.ToString(), info->attempt, core::TaskStateName(info->state));
    }
  }
  AckWhenDurable(worker, std::move(results));
}

void WorkerChannel::OnCheckpointSaved(WorkerId worker, proto::CheckpointSaved& saved) {
  for (const core::OutputFile& f : saved.files) {
    if (options_.files == nullptr || !options_.files->Has(f.sha256)) {
      // Deleted since the worker asked (superseded), or never uploaded: the
      // worker's next round uploads it again and says so.
      spdlog::warn(
          "worker {}: checkpoint of {}#{} names {} ({}), which the file store lacks; "
          "ignored",
          worker, saved.task.ToString(), saved.attempt, net::Printable(f.name, 200),
          f.sha256.substr(0, 12));
      return;
    }
  }
  driver_.Handle(core::CheckpointSaved{saved.task, saved.attempt, worker, std::move(saved.files)});
}

void WorkerChannel::NoteOutputs(WorkerId worker, const std::vector<proto::FinishedTask>& tasks) {
  if (!outputs_kept_) return;
  std::vector<JobId> jobs;
  for (const proto::FinishedTask& t : tasks) {
    if (!t.outcome.outputs.empty()) jobs.push_back(t.task.job);
  }
  if (jobs.empty()) return;
  std::sort(jobs.begin(), jobs.end());
  jobs.erase(std::unique(jobs.begin(), jobs.end()), jobs.end());
  outputs_kept_(worker, jobs);
}

void WorkerChannel::OnFinished(WorkerId worker, std::vector<proto::FinishedTask> tasks) {
  if (tasks.empty()) return;
  NoteOutputs(worker, tasks);
  proto::Ack ack;
  for (proto::FinishedTask& t : tasks) {
    ack.tasks.push_back({t.task, t.attempt});
    driver_.Handle(core::TaskFinished{t.task, t.attempt, std::move(t.outcome), worker,
                                      t.never_started, t.vacated});
  }
  AckWhenDurable(worker, std::move(ack));
}

void WorkerChannel::AckWhenDurable(WorkerId worker, proto::Ack ack) {
  if (ack.tasks.empty()) return;
  // Acknowledge once the outcome is durable; on an error the worker keeps the
  // results and sends them again with its next Hello.
  std::weak_ptr<bool> alive = alive_;
  driver_.AfterDurable([this, alive, worker, ack = std::move(ack)](Status s) {
    if (alive.expired()) return;
    if (!s.ok()) {
      spdlog::error("not acknowledging results of worker {}: {}", worker, net::Printable(s.ToString(), 1000));
      return;
    }
    (void)Send(worker, ack);
  });
}

void WorkerChannel::OnClosed(uint64_t conn, const Status& status) {
  auto it = conns_.find(conn);
  if (it == conns_.end()) return;
  const WorkerId worker = it->second.worker;
  const std::string remote = it->second.session->remote();
  conns_.erase(it);
  if (worker == 0) return;
  auto w = workers_.find(worker);
  if (w == workers_.end() || w->second != conn) return;  // replaced already
  workers_.erase(w);
  spdlog::info("worker {} disconnected ({}): {}", worker, remote, net::Printable(status.ToString(), 1000));
  handoffs_.Forget(worker);
  if (log_.disconnected) log_.disconnected(worker);
  if (stopped_) return;
  auto timer = std::make_unique<net::Timer>(loop_);
  timer->ArmAfter(options_.lost_grace, [this, worker] {
    lost_timers_.erase(worker);  // destroys this timer after the callback returns
    // Its hello is back and waits for the registry or its turn: it
    // re-attaches then, and must stay marked active.
    if (Admitting(worker)) return;
    Result<core::WorkerInfo> info = driver_.scheduler().GetWorker(worker);
    if (info.ok() && !info->lost) {
      spdlog::warn("worker {} did not come back; declaring it lost", worker);
      driver_.Handle(core::WorkerLost{worker});
      // Its tasks go elsewhere once their leases are gone, and it fences
      // them itself; a restart need not wait for it.
      registry_.StageInactive(worker);
      registry_commit_.Request();
    }
  });
  lost_timers_[worker] = std::move(timer);
}

void WorkerChannel::Assign(const core::AssignTask& assign) {
  pending_[assign.worker].push_back(
      BuildAssignment(assign, &file_grants_, options_.max_output_bytes));
  assign_flush_.Request();
}

void WorkerChannel::FlushAssigns() {
  assign_flush_.Clear();
  std::map<WorkerId, std::vector<proto::Assignment>> batches;
  batches.swap(pending_);
  for (auto& [worker, tasks] : batches) {
    // Not connected: dropped. The worker's next hello will not list it, and
    // the core takes it back then (or when the worker is declared lost).
    if (auto w = workers_.find(worker); w != workers_.end()) {
      NumberCommands(conns_.at(w->second), tasks);
    }
    (void)Send(worker, proto::Assign{std::move(tasks)});
  }
}

void WorkerChannel::NumberCommands(Conn& conn, std::vector<proto::Assignment>& tasks) {
  if (!conn.argv_ids) return;
  for (proto::Assignment& a : tasks) {
    std::string key;
    for (const std::string& arg : a.argv) key.append(arg).push_back('\0');
    if (auto it = conn.argv_sent.find(key); it != conn.argv_sent.end()) {
      a.argv_id = it->second;
      a.argv.clear();
    } else if (conn.argv_sent.size() < proto::kMaxArgvIds) {
      a.argv_id = static_cast<uint32_t>(conn.argv_sent.size() + 1);
      conn.argv_sent.emplace(std::move(key), a.argv_id);
    }
  }
}

void WorkerChannel::Kill(const core::KillTask& kill) {
  FlushAssigns();  // an Assign of this turn must reach the worker first
  proto::ServerMessage message;
  if (kill.only_queued) {
    spdlog::info("withdrawing {}#{} from worker {}: {}", kill.task.ToString(), kill.attempt,
                 kill.worker, kill.reason.text);
    message = proto::Withdraw{kill.task, kill.attempt, kill.reason.text};
  } else if (kill.hard) {
    spdlog::warn("killing {}#{} on worker {}: {}", kill.task.ToString(), kill.attempt,
                 kill.worker, kill.reason.text);
    message = proto::Kill{kill.task, kill.attempt, kill.reason.text};
  } else {
    message = proto::Cancel{kill.task, kill.attempt, kill.reason.text, kill.vacate};
  }
  Status sent = Send(kill.worker, message);
  if (!sent.ok()) {
    spdlog::warn("cannot stop {}#{} on worker {}: {}", kill.task.ToString(), kill.attempt,
                 kill.worker, sent.ToString());
  }
}

void WorkerChannel::Replicate(const core::ReplicateOutputs& copy) {
  proto::Replicate message{copy.task, copy.attempt, {}};
  const std::vector<proto::FileSource> sources = SourcesOf(file_grants_, copy.from);
  if (sources.empty()) {
    spdlog::warn("no copy of the outputs of {}#{}: no holder serves files now",
                 copy.task.ToString(), copy.attempt);
    return;
  }
  for (const core::OutputFile& file : copy.files) {
    message.files.push_back(
        proto::InputFile{copy.task, file, sources, file_grants_.grant(file.sha256, copy.to)});
  }
  spdlog::info("asking worker {} for a copy of the outputs of {}#{} ({} files)", copy.to,
               copy.task.ToString(), copy.attempt, copy.files.size());
  if (Status sent = Send(copy.to, message); !sent.ok()) {
    spdlog::warn("no copy of the outputs of {}#{} on worker {}: {}", copy.task.ToString(),
                 copy.attempt, copy.to, sent.ToString());
  }
}

Status WorkerChannel::Send(WorkerId worker, const proto::ServerMessage& message) {
  auto w = workers_.find(worker);
  if (w == workers_.end()) return Unavailable("worker " + std::to_string(worker) + " not connected");
  Conn& conn = conns_.at(w->second);
  proto::WireMessage wire = proto::EncodeForPeer(message, conn.binary);
  if (!conn.batches) {
    for (proto::WireMessage& frame : proto::FramesFor({std::move(wire)}, false)) {
      SendFrame(conn, std::move(frame));
    }
    return Status::Ok();
  }
  if (conn.out.empty()) batching_.push_back(w->second);
  conn.out.push_back(std::move(wire));
  batch_flush_.Request();
  return Status::Ok();
}

void WorkerChannel::SendFrame(Conn& conn, proto::WireMessage frame) {
  if (frame.binary) return conn.session->SendBinary(std::move(frame.bytes));
  conn.session->SendText(std::move(frame.bytes));
}

void WorkerChannel::FlushBatches() {
  batch_flush_.Clear();
  std::vector<uint64_t> ids;
  ids.swap(batching_);
  for (uint64_t id : ids) {
    auto it = conns_.find(id);
    if (it == conns_.end()) continue;  // closed meanwhile: nothing to send on
    Conn& conn = it->second;
    for (proto::WireMessage& frame : proto::FramesFor(std::exchange(conn.out, {}), true)) {
      SendFrame(conn, std::move(frame));
    }
  }
}

void WorkerChannel::Stop() {
  if (stopped_) return;
  stopped_ = true;
  silence_timer_.Cancel();
  pacer_->Clear();
  lost_timers_.clear();
  std::unordered_map<uint64_t, Conn> conns;
  conns.swap(conns_);
  workers_.clear();
  for (auto& [id, conn] : conns) conn.session->Close("server is stopping");
}

}  // namespace drover::server
