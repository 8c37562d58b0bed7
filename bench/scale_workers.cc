// scale_workers: the fake-worker load generator of bench/scale (shared
// BENCH.md B6). One process, one thread, N worker connections to a
// real server over the real protocol (TLS with the pinned fingerprint, or
// the server's local socket, and the cluster token from the access file).
//
// Each fake worker is the worker agent's own state machine (WorkerState:
// Hello, heartbeats, fencing, queue-ahead, batching of Started/Finished,
// resending unacknowledged results after a reconnect) with a shell that
// runs nothing: a StartTask is answered started at once, and the task
// "exits" with status 0 after a duration drawn from a seeded distribution
// (0 by default: at the next turn of the loop). So the server sees what a
// pool of real workers would send, at a cost to this process of a few
// microseconds per task.
//
//   scale_workers --access FILE --workers N --slots S [--duration-ms D]
//                 [--dist fixed|exp] [--seed X] [--expect T [--stay]] [--socket]
//
// It prints "scale_workers: N attached" on stderr once every worker has its
// HelloAck (again after each server restart), and ends when T tasks have
// been reported finished and acknowledged (--expect; with --stay it says
// "scale_workers: T finished" then and goes on), or on SIGTERM/SIGINT.
// Its last line on stdout is one JSON object: workers, attached, finished,
// duplicates (tasks reported finished more than once: an exactly-once
// ledger kept outside Drover), killed, refused, messages each way, span_s
// (first start to last finish), completions_per_s, and its own CPU (cpu_s,
// cpu_us_per_task).
#include <signal.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "net/access_file.h"
#include "net/client_options.h"
#include "net/event_loop.h"
#include "net/fd_limit.h"
#include "net/token.h"
#include "net/ws_client.h"
#include "net/ws_session.h"
#include "proto/messages.h"
#include "proto/messages_binary.h"
#include "worker/state/worker_state.h"

namespace drover::bench {
namespace {

using worker::WorkerCommand;
using worker::WorkerEvent;
using worker::WorkerOutbox;
using worker::WorkerState;
using worker::WorkerTimer;

struct Options {
  std::string access;
  int workers = 100;
  int slots = 8;
  double duration_ms = 0;
  std::string dist = "fixed";
  uint64_t seed = 1;
  uint64_t expect = 0;
  bool stay = false;
  bool socket = false;
  bool no_batches = false;  // speak as a worker from before batch frames
  bool no_binary = false;   // speak as a worker from before binary frames
};

double CpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

class Generator;

// One fake worker: WorkerState and a shell that runs nothing.
class FakeWorker {
 public:
  FakeWorker(Generator& gen, int index);
  void Connect();

 private:
  void Run(const WorkerEvent& event);
  void Execute(const WorkerCommand& command);
  void Start(const proto::Assignment& a);
  void Exit(TaskId task, uint32_t attempt, int signal);
  net::Timer& TimerOf(WorkerTimer timer);
  void OnText(uint64_t link, const std::string& text);
  void OnFrame(uint64_t link, Result<std::vector<proto::ServerMessage>> frame);
  void SendFrame(proto::WireMessage frame);
  void OnClosed(uint64_t link);
  // As the agent does: what is sent in a burst goes out in one batch frame
  // once the loop's current callbacks ran, when the server reads them.
  void FlushBatch();

  Generator& gen_;
  int index_;
  std::optional<WorkerState> state_;
  std::shared_ptr<net::WsSession> session_;
  uint64_t link_ = 0;  // bumps with each connection; stale callbacks check it
  net::Timer heartbeat_;
  net::Timer fence_;
  net::Timer watchdog_;
  net::Timer reconnect_;
  // Tasks "running" for a nonzero duration, by task: their exit timer.
  std::map<TaskId, std::pair<uint32_t, std::unique_ptr<net::Timer>>> running_;
  bool attached_ = false;
  bool server_batches_ = false;
  bool server_binary_ = false;
  std::vector<proto::WireMessage> batch_;
  bool batch_posted_ = false;
};

class Generator {
 public:
  explicit Generator(Options options) : options_(std::move(options)), rng_(options_.seed) {}

  Status Init() {
    ASSIGN_OR_RETURN(net::AccessInfo access, net::ReadAccessFile(options_.access));
    ASSIGN_OR_RETURN(client_, net::ClientOptionsFromAccess(access));
    if (options_.socket) {
      if (access.socket.empty()) {
        return InvalidArgument("--socket: the access file " + options_.access +
                               " names no local socket");
      }
      client_.local_socket = access.socket;
    }
    // Heartbeats and acknowledgments may wait behind a busy server; a fake
    // worker must not drop its link for that.
    client_.ws_idle_timeout = Seconds(120);
    client_.timeout = Seconds(120);
    for (int i = 0; i < options_.workers; ++i) {
      workers_.push_back(std::make_unique<FakeWorker>(*this, i));
    }
    return Status::Ok();
  }

  void Start() {
    for (auto& w : workers_) w->Connect();
  }

  net::EventLoop& loop() { return loop_; }
  const Options& options() const { return options_; }
  const net::ClientOptions& client() const { return client_; }
  Time Now() const { return clock_.Now(); }

  Duration DrawDuration() {
    if (options_.duration_ms <= 0) return Duration::zero();
    double ms = options_.duration_ms;
    if (options_.dist == "exp") ms = std::exponential_distribution<double>(1.0 / ms)(rng_);
    return Duration(static_cast<int64_t>(ms * 1000));
  }
  double Uniform01() { return std::uniform_real_distribution<double>(0, 1)(rng_); }

  void Attached(bool now_attached) {
    attached_ += now_attached ? 1 : -1;
    if (now_attached && attached_ == options_.workers) {
      std::cerr << "scale_workers: " << attached_ << " attached" << std::endl;
    }
  }
  void Started() {
    if (!first_start_) first_start_ = SteadyClock::now();
  }
  void Finished(TaskId task) {
    last_finish_ = SteadyClock::now();
    ++finished_;
    if (++ledger_[task] == 2) ++duplicates_;
  }
  void Killed() { ++killed_; }
  void MessageIn() { ++messages_in_; }
  void MessageOut() { ++messages_out_; }
  void FrameIn() { ++frames_in_; }
  void FrameOut() { ++frames_out_; }
  void Refused() { ++refused_; }
  void UnackedChanged(int64_t delta) {
    unacked_ += delta;
    if (options_.expect == 0 || finished_ < options_.expect || unacked_ != 0 || told_done_) return;
    if (!options_.stay) return loop_.Stop();
    told_done_ = true;
    std::cerr << "scale_workers: " << finished_ << " finished" << std::endl;
  }

  nlohmann::json Report(double cpu_s) const {
    const double span = first_start_ && last_finish_
                            ? std::chrono::duration<double>(*last_finish_ - *first_start_).count()
                            : 0.0;
    return {{"workers", options_.workers},
            {"slots", options_.slots},
            {"attached", attached_},
            {"finished", finished_},
            {"distinct_tasks", ledger_.size()},
            {"duplicates", duplicates_},
            {"killed", killed_},
            {"refused", refused_},
            {"messages_from_server", messages_in_},
            {"messages_to_server", messages_out_},
            {"frames_from_server", frames_in_},
            {"frames_to_server", frames_out_},
            {"span_s", std::round(span * 1000) / 1000},
            {"completions_per_s", span > 0 ? std::round(finished_ / span) : 0},
            {"cpu_s", std::round(cpu_s * 1000) / 1000},
            {"cpu_us_per_task", finished_ > 0 ? std::round(cpu_s * 1e7 / finished_) / 10 : 0.0}};
  }

 private:
  using SteadyClock = std::chrono::steady_clock;
  struct TaskHash {
    size_t operator()(const TaskId& t) const {
      return std::hash<uint64_t>()((static_cast<uint64_t>(t.job) << 32) ^ t.index);
    }
  };

  Options options_;
  net::EventLoop loop_;
  RealClock clock_;
  net::ClientOptions client_;
  std::mt19937_64 rng_;
  std::vector<std::unique_ptr<FakeWorker>> workers_;
  int attached_ = 0;
  uint64_t finished_ = 0;
  uint64_t duplicates_ = 0;
  uint64_t killed_ = 0;
  uint64_t refused_ = 0;
  uint64_t messages_in_ = 0;
  uint64_t messages_out_ = 0;
  uint64_t frames_in_ = 0;  // batch frames count once
  uint64_t frames_out_ = 0;
  int64_t unacked_ = 0;
  bool told_done_ = false;
  std::unordered_map<TaskId, uint32_t, TaskHash> ledger_;
  std::optional<SteadyClock::time_point> first_start_;
  std::optional<SteadyClock::time_point> last_finish_;
};

FakeWorker::FakeWorker(Generator& gen, int index)
    : gen_(gen),
      index_(index),
      heartbeat_(gen.loop()),
      fence_(gen.loop()),
      watchdog_(gen.loop()),
      reconnect_(gen.loop()) {
  worker::WorkerStateConfig config;
  config.name = "fake-" + std::to_string(index);
  config.batches = !gen_.options().no_batches;
  config.binary = !gen_.options().no_binary;
  Result<std::string> key = net::GenerateToken();
  config.key = key.ok() ? *key : config.name;
  config.agent_version = "scale_workers";
  config.resources.name = config.name;
  for (int c = 0; c < gen.options().slots; ++c) {
    config.resources.cpu_cores.push_back(static_cast<uint32_t>(c));
    config.capacity.cores.push_back(c);
  }
  config.resources.mem_bytes = uint64_t{64} << 30;
  config.capacity.memory_bytes = config.resources.mem_bytes;
  Result<WorkerState> state = WorkerState::Create(std::move(config), gen.Now());
  if (!state.ok()) {
    std::cerr << "scale_workers: " << state.status().ToString() << std::endl;
    std::exit(1);
  }
  state_.emplace(std::move(state).value());
  Run(worker::AgentBegan{});
}

void FakeWorker::Connect() {
  const uint64_t link = ++link_;
  net::ConnectWebSocket(gen_.loop(), gen_.client(), "/api/v1/worker",
                        [this, link](Result<std::shared_ptr<net::WsSession>> session) {
                          if (link != link_) return;
                          if (!session.ok()) {
                            // The server is away (a restart): try again soon, spread out.
                            reconnect_.ArmAfter(
                                Millis(100 + static_cast<int64_t>(gen_.Uniform01() * 400)),
                                [this] { Connect(); });
                            return;
                          }
                          session_ = *session;
                          session_->OnText([this, link](std::string text) { OnText(link, text); });
                          session_->OnBinary([this, link](std::string data) {
                            if (link != link_ || !proto::IsMessageFrame(data)) return;
                            gen_.FrameIn();
                            OnFrame(link, proto::DecodeServerBinaryFrame(data));
                          });
                          session_->OnClose([this, link](const Status&) { OnClosed(link); });
                          Run(worker::LinkUp{});
                        });
}

void FakeWorker::OnText(uint64_t link, const std::string& text) {
  if (link != link_) return;
  gen_.FrameIn();
  OnFrame(link, proto::DecodeServerFrame(text));
}

void FakeWorker::OnFrame(uint64_t link, Result<std::vector<proto::ServerMessage>> frame) {
  if (!frame.ok()) {
    std::cerr << "scale_workers: fake-" << index_ << ": " << frame.status().ToString() << std::endl;
    return;
  }
  for (proto::ServerMessage& message : *frame) {
    gen_.MessageIn();
    const auto* ack = std::get_if<proto::HelloAck>(&message);
    if (ack != nullptr) {
      server_batches_ = ack->batches && !gen_.options().no_batches;
      server_binary_ = ack->binary && !gen_.options().no_binary;
    }
    const bool hello_ack = ack != nullptr;
    Run(worker::FromServer{std::move(message)});
    if (hello_ack && !attached_ && state_->established()) {
      attached_ = true;
      gen_.Attached(true);
    }
    if (link != link_) return;
  }
}

void FakeWorker::FlushBatch() {
  batch_posted_ = false;
  std::vector<proto::WireMessage> messages;
  messages.swap(batch_);
  if (!session_) return;
  for (proto::WireMessage& frame : proto::FramesFor(std::move(messages), true)) {
    SendFrame(std::move(frame));
  }
}

void FakeWorker::SendFrame(proto::WireMessage frame) {
  gen_.FrameOut();
  if (frame.binary) return session_->SendBinary(std::move(frame.bytes));
  session_->SendText(std::move(frame.bytes));
}

void FakeWorker::OnClosed(uint64_t link) {
  if (link != link_) return;
  session_.reset();
  server_batches_ = false;
  server_binary_ = false;
  batch_.clear();
  if (attached_) {
    attached_ = false;
    gen_.Attached(false);
  }
  Run(worker::LinkDown{});
  reconnect_.ArmAfter(Millis(100 + static_cast<int64_t>(gen_.Uniform01() * 400)),
                      [this] { Connect(); });
}

void FakeWorker::Run(const WorkerEvent& event) {
  const int64_t unacked_before = static_cast<int64_t>(state_->unacked());
  WorkerOutbox out;
  state_->Handle(gen_.Now(), event, out);
  for (const WorkerCommand& command : out) Execute(command);
  const int64_t delta = static_cast<int64_t>(state_->unacked()) - unacked_before;
  if (delta != 0) gen_.UnackedChanged(delta);
}

net::Timer& FakeWorker::TimerOf(WorkerTimer timer) {
  switch (timer) {
    case WorkerTimer::kHeartbeat:
      return heartbeat_;
    case WorkerTimer::kFence:
      return fence_;
    case WorkerTimer::kWatchdog:
      return watchdog_;
  }
  return heartbeat_;
}

void FakeWorker::Execute(const WorkerCommand& command) {
  std::visit(
      [&](const auto& c) {
        using T = std::decay_t<decltype(c)>;
        if constexpr (std::is_same_v<T, worker::SendMessage>) {
          if (std::holds_alternative<proto::Refused>(c.message)) gen_.Refused();
          if (session_) {
            gen_.MessageOut();
            proto::WireMessage wire = proto::EncodeForPeer(c.message, server_binary_);
            if (!server_batches_) {
              for (proto::WireMessage& frame : proto::FramesFor({std::move(wire)}, false)) {
                SendFrame(std::move(frame));
              }
            } else {
              batch_.push_back(std::move(wire));
              if (!batch_posted_) {
                batch_posted_ = true;
                gen_.loop().Post([this] { FlushBatch(); });
              }
            }
          }
        } else if constexpr (std::is_same_v<T, worker::StartTask>) {
          Start(c.assignment);
        } else if constexpr (std::is_same_v<T, worker::KillTask>) {
          // Ends at once, as a process would on its signal.
          const TaskId task = c.task;
          const uint32_t attempt = c.attempt;
          running_.erase(task);
          gen_.loop().Post([this, task, attempt] { Exit(task, attempt, SIGKILL); });
        } else if constexpr (std::is_same_v<T, worker::ArmTimer>) {
          const WorkerTimer timer = c.timer;
          TimerOf(timer).ArmAfter(c.at - gen_.Now(), [this, timer] {
            switch (timer) {
              case WorkerTimer::kHeartbeat:
                return Run(worker::HeartbeatDue{});
              case WorkerTimer::kFence:
                return Run(worker::FenceDue{});
              case WorkerTimer::kWatchdog:
                return Run(worker::WatchdogDue{});
            }
          });
        } else if constexpr (std::is_same_v<T, worker::CancelTimer>) {
          TimerOf(c.timer).Cancel();
        } else if constexpr (std::is_same_v<T, worker::ScheduleFlush>) {
          gen_.loop().Post([this] { Run(worker::FlushDue{}); });
        } else if constexpr (std::is_same_v<T, worker::LogLine>) {
          if (c.level >= worker::LogLevel::kWarn) {
            std::cerr << "scale_workers: fake-" << index_ << ": " << c.text << std::endl;
          }
        }
        // PrepareTask, DiscardPrepared, SetReaperDeadline: nothing to make,
        // nothing to throw away, no reaper.
      },
      command);
}

void FakeWorker::Start(const proto::Assignment& a) {
  const TaskId task = a.task;
  const uint32_t attempt = a.attempt;
  gen_.Started();
  Run(worker::TaskStarted{task, attempt, gen_.Now(), 0});
  const Duration duration = gen_.DrawDuration();
  if (duration <= Duration::zero()) {
    gen_.loop().Post([this, task, attempt] { Exit(task, attempt, 0); });
    return;
  }
  auto timer = std::make_unique<net::Timer>(gen_.loop());
  timer->ArmAfter(duration, [this, task, attempt] { Exit(task, attempt, 0); });
  running_[task] = {attempt, std::move(timer)};
}

void FakeWorker::Exit(TaskId task, uint32_t attempt, int signal) {
  if (auto it = running_.find(task); it != running_.end() && it->second.first == attempt) {
    running_.erase(it);
  }
  if (state_->RunningAttempt(task) != attempt) return;  // already ended (killed first)
  core::TaskOutcome outcome;
  outcome.exit_code = signal != 0 ? -1 : 0;
  outcome.signal = signal;
  Run(worker::TaskExited{task, attempt, 0});
  Run(worker::TaskReported{task, attempt, outcome});
  Run(worker::FlushDue{});
  if (signal != 0) {
    gen_.Killed();
  } else {
    gen_.Finished(task);
  }
}

}  // namespace
}  // namespace drover::bench

int main(int argc, char** argv) {
  using drover::bench::Options;
  Options options;
  CLI::App app{"Fake workers for bench/scale: N connections, the real protocol, no processes"};
  app.add_option("--access", options.access, "The server's access file")->required();
  app.add_option("--workers", options.workers, "Fake workers (connections)")
      ->check(CLI::Range(1, 100000));
  app.add_option("--slots", options.slots, "Cores (one-CPU slots) per fake worker")
      ->check(CLI::Range(1, 1024));
  app.add_option("--duration-ms", options.duration_ms, "Mean task duration (0: next loop turn)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--dist", options.dist, "Duration distribution")
      ->check(CLI::IsMember({"fixed", "exp"}));
  app.add_option("--seed", options.seed, "Seed of the duration draws");
  app.add_option("--expect", options.expect,
                 "End once this many tasks were reported finished and acknowledged");
  app.add_flag("--stay", options.stay,
               "With --expect: say \"N finished\" on stderr then, and go on until a signal");
  app.add_flag("--socket", options.socket, "Connect over the server's local socket, not TCP");
  app.add_flag("--no-batches", options.no_batches,
               "Send and read one message per frame, as a worker from before batch frames");
  app.add_flag("--no-binary", options.no_binary,
               "Send and read JSON text only, as a worker from before binary frames");
  CLI11_PARSE(app, argc, argv);

  (void)drover::net::RaiseOpenFileLimit();
  signal(SIGPIPE, SIG_IGN);
  drover::bench::Generator gen(options);
  drover::Status init = gen.Init();
  if (!init.ok()) {
    std::cerr << "scale_workers: " << init.ToString() << std::endl;
    return 1;
  }
  // SIGTERM/SIGINT end the run with a report: blocked here, awaited by a
  // thread that stops the loop (Stop is safe from any thread).
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    gen.loop().Stop();
  });
  waiter.detach();

  gen.Start();
  gen.loop().Run();
  std::cout << gen.Report(drover::bench::CpuSeconds()).dump() << std::endl;
  std::fflush(stdout);
  std::_Exit(0);  // the sessions and timers go with the process
}
