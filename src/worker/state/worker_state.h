// WorkerState: the worker agent's protocol logic as a pure state machine,
// in the image of the scheduling core (core/scheduler.h).
//
// The agent shell (agent.cc) owns the sockets, the executor, the timers and
// the reaper. It turns what happens into Events, each with the current
// time, hands them to Handle, and carries out the Commands appended to the
// outbox, in order. There is no I/O, no clock, no thread, no process and no
// logging in here (log lines are commands too): the same events at the same
// times always produce the same commands.
// agent.h specifies the behaviour; this is where it is decided.
//
//   link up/down, server messages,  ──► Handle ──► state change
//   task started/exited, timers                └─► Send, StartTask, PrepareTask,
//                                                  KillTask, DiscardPrepared,
//                                                  ArmTimer, SetReaperDeadline,
//                                                  ScheduleFlush, LogLine
//
// What it owns: the attempts running here (cores, GPUs, started_at, a fence
// reason once fenced), the queue-ahead successors by their predecessor, the
// local admission (Slots), the finished results not yet acknowledged and
// which of them went out on this session, the Started/Finished batch, the
// fencing policy and the last contact, the link state (established = a
// HelloAck came on the open session) and the reaper's watchdog timing.
//
// Answers the shell owes: a StartTask is answered with TaskStarted or
// TaskStartFailed, a PrepareTask that fails with TaskPrepareFailed, and a
// TaskExited is followed by its TaskReported, all before the next outside
// event (the shell handles them at once, so
// that a queue-ahead successor starts before its predecessor's Finished is
// reported). Which server to connect to, backoff, log transfers and the
// decoding of messages stay in the shell.
//
// Threading: none; one thread (the agent's loop) owns it.
#ifndef DROVER_WORKER_STATE_WORKER_STATE_H_
#define DROVER_WORKER_STATE_WORKER_STATE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "common/ids.h"
#include "common/status.h"
#include "common/time.h"
#include "core/model.h"
#include "core/resources.h"
#include "proto/messages.h"
#include "worker/exec/fencing.h"
#include "worker/exec/slots.h"

namespace drover::worker {

// ---- events ----------------------------------------------------------------

// The agent started: arms the fencing timer and the reaper's watchdog.
struct AgentBegan {};
// A session to a server is open (not yet attached): the Hello goes out.
struct LinkUp {};
// The session closed (or the attempt failed after LinkUp).
struct LinkDown {};
// A decoded message from the server. Every message counts as contact once
// attached; LogRequest, Drain and Error are the shell's (nothing here).
struct FromServer {
  proto::ServerMessage message;
  // The work directory's free space, read by the shell just now for an
  // Assign that has a task with `disk` (none otherwise): such a task is
  // refused when it asks for more than is free.
  std::optional<uint64_t> disk_free_bytes;
};
// Answer to StartTask: the process exists since `spawned` (its started_at).
// `watchdog_fences`: Reaper::fences() now, to tell later whether the
// reaper's watchdog killed the task.
struct TaskStarted {
  TaskId task;
  uint32_t attempt = 0;
  Time spawned;
  uint32_t watchdog_fences = 0;
};
// Answer to StartTask: it could not start ("command not found: x").
struct TaskStartFailed {
  TaskId task;
  uint32_t attempt = 0;
  std::string reason;
};
// Answer to PrepareTask when it failed: the queued attempt is not kept.
struct TaskPrepareFailed {
  TaskId task;
  uint32_t attempt = 0;
  std::string reason;
};
// A started attempt's process ended; `now` is its exit as seen here. Its
// room is free from now on and a queued successor starts at once (BENCH.md
// B3's handoff); what it left comes next, in TaskReported, so that reading
// and copying it (exit status, usage, result text) and the report's
// bookkeeping happen after that start.
struct TaskExited {
  TaskId task;
  uint32_t attempt = 0;
  uint32_t watchdog_fences = 0;  // Reaper::fences() now
};
// What an exited attempt left, at once after its TaskExited: it is reported
// finished as of its exit.
struct TaskReported {
  TaskId task;
  uint32_t attempt = 0;
  core::TaskOutcome outcome;
};
// Timers the state armed (ArmTimer) came due.
struct HeartbeatDue {
  std::optional<core::WorkerUtilization> utilization;  // sampled by the shell
  // The machine's available memory (MemAvailable), for
  // WorkerStateConfig::min_available_bytes; nullopt: not read.
  std::optional<uint64_t> available_bytes;
};
struct FenceDue {};
struct WatchdogDue {};
// The Started/Finished batch goes out now (after ScheduleFlush, or at once
// after a TaskReported).
struct FlushDue {};
// Idle-desktop mode (WorkerStateConfig::desktop): what the shell's idle
// detector sees, every few tens of milliseconds. `last_input`: the owner's
// latest keyboard or mouse input (nullopt: none seen); `outside_load`: the
// CPU that processes outside Drover used lately, in cores.
struct OwnerSample {
  std::optional<Time> last_input;
  double outside_load = 0;
};

// The shell's health checks (health_monitor.h) ended: why this worker
// should take no new work, or empty when it is healthy. On a change it is
// logged and the server told at once (a heartbeat); every heartbeat
// carries it, and an assignment that crossed it is refused.
struct HealthChecked {
  std::string unhealthy;
  // Its GPUs found sick (NVML index -> why): out of the offer, the others
  // go on; logged and told on a change, like `unhealthy`.
  std::map<uint32_t, std::string> sick_gpus;
  std::string kind;  // which check made it unhealthy: "disk", "program"
};

// The shell holds an assignment from the server while it fetches its input
// files (and checkpoint); the attempt is this worker's from now on: a
// Cancel, Kill or Withdraw of it before InputsFetched drops it, reported
// as never started, and its InputsFetched is then ignored.
struct InputsFetching {
  TaskId task;
  uint32_t attempt = 0;
};
// The fetch of InputsFetching ended: with `error` empty the assignment is
// handled as if it had just arrived; else it is refused with that reason.
struct InputsFetched {
  proto::Assignment assignment;
  std::string error;
  std::vector<proto::CorruptInput> corrupt;  // inputs every holder sent wrong bytes of
};

using WorkerEvent =
    std::variant<AgentBegan, LinkUp, LinkDown, FromServer, TaskStarted, TaskStartFailed,
                 TaskPrepareFailed, TaskExited, TaskReported, HeartbeatDue, FenceDue, WatchdogDue,
                 FlushDue, OwnerSample, InputsFetching, InputsFetched, HealthChecked>;

// ---- commands --------------------------------------------------------------

// Send on the open session; dropped when there is none.
struct SendMessage {
  proto::WorkerMessage message;
};
// Start the attempt now (its slot is booked). `prepared`: PrepareTask made
// it ahead (directories, inputs, parked process); otherwise make its
// directories and inputs first. Answer TaskStarted or TaskStartFailed.
struct StartTask {
  proto::Assignment assignment;
  bool prepared = false;
};
// Make a queued attempt ready to start: directories, inputs, environment,
// program, parked process. Answer TaskPrepareFailed on failure.
struct PrepareTask {
  proto::Assignment assignment;
};
// Throw away what PrepareTask made; the attempt never starts.
struct DiscardPrepared {
  TaskId task;
  uint32_t attempt = 0;
};
// Kill the running attempt: `signal` (TERM unless the task asked to be
// vacated with another), `grace`, then KILL (zero: KILL at once). A
// suspended attempt is resumed first, so the signal reaches it.
// `fenced`: the fencing policy asked, not the server.
struct KillTask {
  TaskId task;
  uint32_t attempt = 0;
  Duration grace = Duration::zero();
  bool fenced = false;
  int32_t signal = core::kDefaultVacateSignal;
};
// Idle-desktop mode: stop every process of the running attempt where it is
// (cgroup freezer, else SIGSTOP), or let it go on.
struct SuspendTask {
  TaskId task;
  uint32_t attempt = 0;
};
struct ResumeTask {
  TaskId task;
  uint32_t attempt = 0;
};
// Send `owner` (proto::Owner) on the open session; when `input_at` is set
// the shell first fills in owner.freeze_us, the time from that input to
// now, after the SuspendTasks before this command were carried out.
struct SendOwner {
  proto::Owner owner;
  std::optional<Time> input_at;
};
enum class WorkerTimer : uint8_t { kHeartbeat, kFence, kWatchdog };
// Arm (or re-arm) the timer to deliver its *Due event at `at`.
struct ArmTimer {
  WorkerTimer timer = WorkerTimer::kHeartbeat;
  Time at;
};
struct CancelTimer {
  WorkerTimer timer = WorkerTimer::kHeartbeat;
};
// Tell the reaper to kill every task unless renewed within `after`.
struct SetReaperDeadline {
  Duration after = Duration::zero();
};
// Deliver FlushDue on a later turn of the loop (once per batch).
struct ScheduleFlush {};
// A line for the worker's log ("refused 12.0#1: core 1 is in use by task
// 12.3"); the shell prefixes the worker's name.
enum class LogLevel : uint8_t { kDebug, kInfo, kWarn, kError };
struct LogLine {
  LogLevel level = LogLevel::kInfo;
  std::string text;
};

// The worker has had nothing to do for its idle timeout, told the server
// (a Drain) a heartbeat ago and still has nothing: the shell stops it.
struct Leave {
  std::string reason;  // "idle for 5m"
};

using WorkerCommand = std::variant<SendMessage, StartTask, PrepareTask, DiscardPrepared, KillTask,
                                   ArmTimer, CancelTimer, SetReaperDeadline, ScheduleFlush, LogLine,
                                   Leave, SuspendTask, ResumeTask, SendOwner>;
using WorkerOutbox = std::vector<WorkerCommand>;

// "send started 12.0#1", "start 12.0#1", "arm fence +28000ms", ... One line
// per command, for tests and debug logs. `now` turns times into offsets.
std::string DescribeCommand(const WorkerCommand& command, Time now);

// ---- the state machine -----------------------------------------------------

struct WorkerStateConfig {
  // What the Hello says of this worker.
  std::string name;
  std::string key;
  std::string agent_version;
  core::WorkerResources resources;
  // Its file service (proto::Hello::files_port); 0 / "": none.
  uint16_t files_port = 0;
  std::string files_fingerprint;
  // The shell reads batch frames from the server (proto::Hello::batches).
  bool batches = true;
  // The shell resolves numbered commands (proto::Hello::argv_ids).
  bool argv_ids = false;
  // The shell reads and writes binary frames (proto::Hello::binary).
  bool binary = false;
  SlotCapacity capacity;  // local admission
  // Until a HelloAck says otherwise.
  Duration heartbeat_interval = Seconds(2);
  Duration lease_ttl = Seconds(30);
  Duration kill_grace = Seconds(10);  // Cancel: TERM -> KILL
  // Positive: leave after this long with nothing running, queued or
  // unreported, as seen at heartbeats while attached (`drover worker
  // --idle-timeout`): a Drain goes to the server, and a heartbeat later,
  // still idle, Leave. A task that came meanwhile runs first.
  Duration idle_timeout = Duration::zero();
  // Idle-desktop mode (`drover worker --desktop`): the machine is its
  // owner's first. It offers room only after `idle_after` with no input
  // and outside load at most `max_outside_load` cores (from the start
  // too: no input seen counts from the agent's start). When the owner
  // comes back it offers nothing (proto::Owner), refuses assignments, drops
  // queue-ahead successors and suspends every running attempt at once. If
  // they are quiet again for `resume_after` within `suspend_for` of the
  // first suspension, the attempts resume (and are suspended again by the
  // next input); at `suspend_for` every attempt still here is vacated: its
  // vacate signal, its vacate grace, KILL, reported finished with
  // `vacated` and the reason "preempted: owner returned on NAME".
  struct Desktop {
    bool enabled = false;
    Duration idle_after = Seconds(15 * 60);
    Duration resume_after = Seconds(60);
    Duration suspend_for = Seconds(10 * 60);
    double max_outside_load = 0.3;
  };
  Desktop desktop;
  // Positive: when a heartbeat finds the machine's available memory below
  // this (other programs took it), the youngest running attempt is
  // suspended; still below at the next heartbeat, that one is vacated
  // (reason "preempted: memory low on NAME ..."), and so on, youngest
  // first; assignments are refused meanwhile. At or above it again, the
  // attempts suspended for memory resume (`drover worker
  // --min-available-mem`).
  uint64_t min_available_bytes = 0;
};

class WorkerState {
 public:
  // InvalidArgument for timing the fencing policy refuses (FencingPolicy::
  // Create). `now` counts as the first contact.
  static Result<WorkerState> Create(WorkerStateConfig config, Time now);

  // Handles one event at `now` (never earlier than the last) and appends
  // the commands to carry out, in order. Never fails: what does not apply
  // (a stale attempt, a message before the HelloAck) is ignored or refused
  // to the server.
  void Handle(Time now, const WorkerEvent& event, WorkerOutbox& out);

  // --- queries (for the shell and tests) ---
  bool established() const { return established_; }
  WorkerId worker_id() const { return worker_id_; }
  Duration heartbeat_interval() const { return heartbeat_; }
  // The attempt of `task` running here (started, fenced or not); 0 if none.
  uint32_t RunningAttempt(TaskId task) const;
  size_t running() const { return running_.size(); }
  size_t queued() const { return queued_.size(); }
  size_t unacked() const { return unacked_.size(); }
  // Idle-desktop mode: the owner is at the machine (nothing new is taken).
  bool owner_present() const { return owner_present_; }

 private:
  struct Running {
    uint32_t attempt = 0;
    std::string fence_reason;          // set when this worker fenced it
    std::vector<uint32_t> cores;       // as assigned: a restarted server
    std::vector<core::GpuGrant> gpus;  // may adopt the attempt with them
    Time started_at;                   // as reported in Started
    uint32_t watchdog_fences = 0;      // Reaper::fences() when it started
    int32_t vacate_signal = core::kDefaultVacateSignal;  // from its assignment
    Duration vacate_grace = Duration::zero();
    bool suspended = false;  // SuspendTask sent, no ResumeTask since
    bool memory_suspended = false;  // ... because memory was low
    // Set when it is being vacated: its report goes out `vacated` with
    // this reason ("preempted: owner returned on ws-ana").
    std::string vacate_reason;
  };

  WorkerState(WorkerStateConfig config, FencingPolicy fence, Time now);

  void OnLinkUp(WorkerOutbox& out);
  void OnLinkDown(Time now, WorkerOutbox& out);
  void OnHelloAck(Time now, const proto::HelloAck& ack, WorkerOutbox& out);
  void OnAssignment(Time now, const proto::Assignment& a, WorkerOutbox& out);
  void Enqueue(const proto::Assignment& a, WorkerOutbox& out);
  // Takes `a` by value: a queued successor's is moved in (the handoff path).
  void StartNow(Time now, proto::Assignment a, bool prepared, WorkerOutbox& out);
  void OnStopRequest(Time now, TaskId task, uint32_t attempt, Duration grace,
                     const std::string& reason, bool vacate, WorkerOutbox& out);
  void OnWithdraw(Time now, TaskId task, uint32_t attempt, const std::string& reason,
                  WorkerOutbox& out);
  void OnStarted(const TaskStarted& started, WorkerOutbox& out);
  void OnStartFailed(Time now, const TaskStartFailed& failed, WorkerOutbox& out);
  void OnPrepareFailed(Time now, const TaskPrepareFailed& failed, WorkerOutbox& out);
  void OnExited(Time now, const TaskExited& exited, WorkerOutbox& out);
  void OnReported(Time now, const TaskReported& reported, WorkerOutbox& out);
  void OnHeartbeat(Time now, const HeartbeatDue& due, WorkerOutbox& out);
  void OnHealth(const HealthChecked& e, WorkerOutbox& out);
  // The heartbeat message now (its utilization: the last one sampled).
  proto::Heartbeat MakeHeartbeat() const;
  void CheckIdle(Time now, WorkerOutbox& out);
  void OnFence(Time now, WorkerOutbox& out);
  void OnWatchdog(Time now, WorkerOutbox& out);
  void Flush(WorkerOutbox& out);
  // Idle-desktop mode (worker_state_desktop.cc).
  void OnOwnerSample(Time now, const OwnerSample& sample, WorkerOutbox& out);
  void OwnerCame(Time now, std::optional<Time> input_at, WorkerOutbox& out);
  void OwnerLeft(Time now, WorkerOutbox& out);
  // Suspends every started attempt not yet suspended; returns how many.
  size_t SuspendAll(WorkerOutbox& out);
  void ResumeAll(WorkerOutbox& out);
  void VacateAll(Time now, WorkerOutbox& out);
  void VacateOne(TaskId task, Running& run, const std::string& reason, WorkerOutbox& out);
  // Memory pressure (min_available_bytes), at each heartbeat.
  void CheckMemory(uint64_t available, WorkerOutbox& out);
  proto::Owner OwnerMessage() const;

  std::map<TaskId, proto::Assignment>::iterator FindQueued(TaskId successor);
  void DropQueued(Time now, const proto::Assignment& a, std::string reason, WorkerOutbox& out);
  // Drops the attempt if its inputs are being fetched (InputsFetching),
  // reporting it never started with `why`; false when it is not.
  bool DropFetching(Time now, TaskId task, uint32_t attempt, const std::string& why,
                    WorkerOutbox& out);
  void RecordFinished(proto::FinishedTask finished, WorkerOutbox& out);
  void PostFlush(WorkerOutbox& out);
  void Contact(Time when, WorkerOutbox& out);
  void ArmFence(WorkerOutbox& out);
  std::vector<proto::TaskAttempt> RunningAttempts() const;
  std::vector<proto::RunningTask> RunningTasks() const;

  WorkerStateConfig config_;
  Slots slots_;
  Duration heartbeat_;
  Duration lease_ttl_;
  FencingPolicy fence_;
  Time last_contact_;
  bool fence_armed_ = false;
  Time last_watchdog_tick_;

  bool established_ = false;  // a HelloAck came on the open session
  WorkerId worker_id_ = 0;

  // Started, or StartTask sent and its answer not yet in.
  std::map<TaskId, Running> running_;
  // Queue-ahead successors by their predecessor's task (at most one each;
  // the predecessor's attempt is the one in running_).
  std::map<TaskId, proto::Assignment> queued_;
  // Attempts whose inputs the shell is fetching (InputsFetching), by task.
  std::map<TaskId, uint32_t> fetching_;
  // Exited, their TaskReported not yet in (one, or none: the report comes
  // at once): when, and why fenced if so.
  struct Exited {
    proto::TaskAttempt attempt;
    Time at;
    std::string fence_reason;
    std::string vacate_reason;
  };
  std::vector<Exited> exited_;
  // The entry of the last attempt that ended, kept to be the next start's:
  // the handoff (BENCH.md B3) allocates nothing for it.
  std::map<TaskId, Running>::node_type spare_running_;
  std::map<proto::TaskAttempt, proto::FinishedTask> unacked_;
  std::set<proto::TaskAttempt> sent_this_session_;
  std::vector<proto::StartedTask> started_out_;
  std::vector<proto::FinishedTask> finished_out_;
  bool flush_posted_ = false;

  // --idle-timeout: since when no heartbeat saw work here, and whether the
  // Drain that announces leaving went out.
  std::optional<Time> idle_since_;
  bool leaving_ = false;

  // Idle-desktop mode. The owner counts as present from the start until a
  // quiet `idle_after` has passed.
  bool owner_present_ = true;
  Time owner_since_;                // when the owner came or went
  Time quiet_since_;                // the latest input or outside load over the limit
  std::optional<Time> last_input_;  // as the detector last reported it
  bool frozen_ = false;             // the attempts are suspended now
  Time resumed_at_;                 // when they were last resumed
  std::optional<Time> vacate_at_;   // this presence's vacate deadline
  // The last heartbeat found available memory below min_available_bytes.
  bool memory_low_ = false;
  // The work directory's free space as last read (a heartbeat, an Assign
  // with `disk`); none before the first reading.
  std::optional<uint64_t> disk_free_;
  // HealthChecked: why it takes no new work ("" healthy), and the
  // utilization of the last HeartbeatDue, for a heartbeat sent between.
  std::string unhealthy_;
  std::string unhealthy_kind_;
  std::map<uint32_t, std::string> sick_gpus_;
  core::WorkerUtilization utilization_;
};

}  // namespace drover::worker

#endif  // DROVER_WORKER_STATE_WORKER_STATE_H_
