// Agent::Impl: the agent's shell behind agent.h's Agent. One object on the
// event loop that holds the state machine (WorkerState), the server link,
// the executor (TaskRunner), the reaper and life record, the file plane,
// the log sender and the timers, and carries out the state machine's
// commands. Private to the agent: only the agent's .cc files include it
// (agent.cc: Init, Stop and Agent's calls; agent_tasks.cc: the commands
// and the tasks; agent_link.cc: the server link and its messages;
// agent_files.cc: inputs held for their files, checkpoints, replicas).
//
// Threading: agent.h's. Init, Stop and the destructor on the loop's thread
// (or while the loop is not running); every other call and callback on the
// loop. worker_id_ is atomic: worker_id() may be read from another thread.
#ifndef DROVER_WORKER_AGENT_AGENT_IMPL_H_
#define DROVER_WORKER_AGENT_AGENT_IMPL_H_

#include <spdlog/spdlog.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "net/client_options.h"
#include "net/ws_session.h"
#include "proto/messages.h"
#include "proto/messages_binary.h"
#include "worker/agent/agent.h"
#include "worker/agent/agent_logs.h"
#include "worker/agent/asio_reactor.h"
#include "worker/agent/file_plane.h"
#include "worker/agent/health_monitor.h"
#include "worker/agent/server_link.h"
#include "worker/agent/task_runner.h"
#include "worker/desktop/input_source.h"
#include "worker/desktop/outside_load.h"
#include "worker/exec/executor.h"
#include "worker/exec/life_record.h"
#include "worker/exec/reaper.h"
#include "worker/exec/task_account.h"
#include "worker/resources/gpu_lock.h"
#include "worker/resources/resources.h"
#include "worker/state/agent_convert.h"
#include "worker/state/worker_state.h"

namespace drover::worker {

// Tells the reaper and the life record of each task's process group, for
// isolation without cgroups (with cgroups, the trees are the record).
class TaskGuard final : public ProcessWatch {
 public:
  TaskGuard(LifeRecord& record, Reaper& reaper, std::string worker)
      : record_(record), reaper_(reaper), worker_(std::move(worker)) {}
  void Started(pid_t pid, const std::string& name) override {
    Note(record_.TaskStarted(pid, name));
    Note(reaper_.Watch(pid));
  }
  void Ended(pid_t pid) override {
    Note(reaper_.Forget(pid));
    Note(record_.TaskEnded(pid));
  }

 private:
  void Note(const Status& s) {
    if (s.ok() || warned_) return;
    warned_ = true;
    spdlog::error("worker {}: {}; tasks may outlive this worker if it dies", worker_, s.ToString());
  }
  LifeRecord& record_;
  Reaper& reaper_;
  std::string worker_;
  bool warned_ = false;
};

class Agent::Impl {
 public:
  Impl(net::EventLoop& loop, AgentConfig config)
      : loop_(loop),
        config_(std::move(config)),
        clock_(config_.clock ? *config_.clock : SystemClock()),
        backoff_(config_.reconnect,
                 [rng = std::make_shared<std::mt19937_64>(std::random_device{}())] {
                   return std::uniform_real_distribution<double>(0.0, 1.0)(*rng);
                 }),
        reconnect_timer_(loop),
        heartbeat_timer_(loop),
        fence_timer_(loop),
        watchdog_timer_(loop),
        owner_timer_(loop),
        checkpoint_timer_(loop) {}

  ~Impl() { Stop(); }

  Status Init();
  void Stop();
  WorkerId worker_id() const { return worker_id_.load(); }
  const std::string& summary() const { return summary_; }

 private:
  struct KnownLog {
    uint32_t attempt = 0;
    TaskDirs dirs;
    OutputCap max_output;  // from its assignment (file_plane.h)
  };

  // Hands one event to the state machine (worker_state.h) at the clock's
  // now and carries out its commands in order. An answer a command owes
  // (TaskStarted, TaskStartFailed, TaskPrepareFailed) is handled at once,
  // before the commands after it, as the state machine expects.
  void Run(const WorkerEvent& event);
  void Execute(const WorkerCommand& command);

  // Connection.
  void Connect();
  void OnConnected(uint64_t gen, Result<std::shared_ptr<net::WsSession>> session);
  void OnText(uint64_t gen, const std::string& text);
  void OnBinary(uint64_t gen, const std::string& data);
  // The messages of one frame, text or binary, in order.
  void OnFrame(uint64_t gen, Result<std::vector<proto::ServerMessage>> frame);
  void OnServerMessage(proto::ServerMessage message);
  // Gives each assignment of `assign` its numbered command, remembering
  // those sent whole; an error names a number never sent on this session.
  Status ResolveArgvIds(proto::Assign& assign);
  void OnClosed(uint64_t gen, const Status& why);
  void ScheduleReconnect();
  void Send(const proto::WorkerMessage& message);
  // Sends what Send kept for one batch frame (the server reads them:
  // HelloAck::batches): the messages of a burst, a worker's Finished and
  // Started, go out together once the loop's current callbacks ran.
  void FlushBatch();
  // A frame from proto::FramesFor, as text or binary.
  void SendFrame(proto::WireMessage frame);

  // Tasks: carrying out the state machine's commands.
  void StartTask(const proto::Assignment& assignment, bool prepared);
  void PrepareQueued(const proto::Assignment& assignment);
  void KillTask(const worker::KillTask& kill);
  void OnTaskDone(const TaskResult& result);
  // Reports an ended attempt (after its outputs were collected).
  void ReportDone(const TaskResult& result, core::TaskOutcome outcome);
  // Takes out of `assign` the attempts whose input files must be fetched
  // first; each goes to the state machine once fetched, or is refused.
  void HoldForInputs(proto::Assign& assign);
  // A copy of another worker's outputs (replicas): fetched, kept under its
  // job, then reported; a failure only logged (the server counts no copy).
  void OnReplicate(const proto::Replicate& copy);
  // The task's directories and $DROVER_INPUTS files; `queued`: also its
  // environment and program (Executor::PrepareStart), for a start later.
  Result<TaskDirs> Prepare(const proto::Assignment& assignment, bool queued);
  TaskSpec SpecOf(const proto::Assignment& assignment) const;
  void OnLogRequest(const proto::LogRequest& request);
  void ArmTimer(WorkerTimer timer, Time at);
  net::Timer& TimerOf(WorkerTimer timer);
  // Idle-desktop mode: one OwnerSample for the state machine, then again
  // after owner_poll.
  void PollOwner();
  void SendOwner(const worker::SendOwner& command);
  // Checkpoints (file_plane.h): every running attempt's directory saved
  // every checkpoint_every; an ended attempt's saved before its report.
  void SaveCheckpoints();
  void ReportAfterCheckpoint(const TaskResult& result, core::TaskOutcome outcome);
  void SendCheckpoint(TaskId task, uint32_t attempt,
                      Result<std::optional<std::vector<core::OutputFile>>> saved);

  net::EventLoop& loop_;
  AgentConfig config_;
  Clock& clock_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  bool stopped_ = false;

  // Resources and execution.
  std::vector<ServerAddress> servers_;
  std::string name_;
  std::string summary_;
  std::unique_ptr<UtilizationSampler> sampler_;
  GpuLocks gpu_locks_;  // held for the agent's life
  std::unique_ptr<AsioReactor> reactor_;
  // What outlives this life if it dies (life_record.h, reaper.h); the
  // executor tells them of each task (declared first: they outlive it).
  std::unique_ptr<LifeRecord> life_;
  std::unique_ptr<Reaper> reaper_;
  // What runs its tasks with an `image` (found at start); none: no such
  // task is placed here.
  std::optional<ContainerRuntime> container_;
  std::unique_ptr<TaskGuard> guard_;
  std::unique_ptr<TaskRunner> own_runner_;  // the Executor, when config_.task_runner is null
  TaskRunner* runner_ = nullptr;
  std::unique_ptr<LogSender> logs_;
  bool reaper_gone_ = false;

  // Idle-desktop mode (config_.desktop): where the owner's input is read,
  // and the load outside the tasks' cgroups (none: not measured).
  std::unique_ptr<InputSource> input_;
  std::unique_ptr<HealthMonitor> health_;
  std::vector<int> health_gpus_;  // the offered GPUs it watches
  std::unique_ptr<OutsideLoad> outside_;
  std::vector<std::string> task_cgroups_;
  Duration tasks_cpu_ = Duration::zero();  // CgroupCpuTime at the last load sample
  double outside_load_ = 0;
  Time next_load_at_;

  // The protocol: running, queued and unacknowledged tasks, fencing.
  std::optional<WorkerState> state_;
  // Outboxes kept for the next Run (one per level of nesting: a command's
  // answer is handled while the outer outbox is still being carried out),
  // so that the handoff's path allocates none.
  std::vector<WorkerOutbox> spare_outboxes_;
  // What PrepareTask made for each queued attempt, until it starts or is
  // discarded.
  std::map<proto::TaskAttempt, TaskDirs> prepared_;
  std::map<TaskId, KnownLog> known_logs_;
  // The data plane (config_.files): cache, file service, fetches.
  std::unique_ptr<FilePlane> files_;

  // The server link.
  std::unique_ptr<ServerLink> own_link_;  // when config_.server_link is null
  ServerLink* link_ = nullptr;
  net::Backoff backoff_;
  net::Timer reconnect_timer_;
  net::Timer heartbeat_timer_;
  net::Timer fence_timer_;
  net::Timer watchdog_timer_;
  net::Timer owner_timer_;
  net::Timer checkpoint_timer_;
  // How to reach the server of the connection in progress over HTTP (the
  // file store), and who a restored checkpoint's files belong to.
  net::ClientOptions server_options_;
  std::optional<std::pair<uid_t, gid_t>> task_owner_;
  // Per-user mode: whose a restored checkpoint is, task by task.
  std::optional<UserAccounts> accounts_;
  size_t next_server_ = 0;
  // The leader a standby named (proto::Error::leader): the next attempt
  // goes there, once; then the list goes on.
  std::optional<ServerAddress> redirect_;
  ServerAddress current_;  // the address of the attempt in progress
  uint64_t gen_ = 0;  // bumps with each connection attempt; stale callbacks check it
  std::shared_ptr<net::WsSession> session_;
  bool server_batches_ = false;     // this session's server reads batch frames
  bool server_binary_ = false;      // ... and binary frames (HelloAck::binary)
  // This session's numbered commands (proto::Assignment::argv_id), by
  // number - 1.
  std::vector<std::vector<std::string>> argv_by_id_;
  std::vector<proto::WireMessage> batch_;  // encoded messages for the next frame
  bool batch_posted_ = false;
  std::atomic<WorkerId> worker_id_{0};
};

}  // namespace drover::worker

#endif  // DROVER_WORKER_AGENT_AGENT_IMPL_H_
