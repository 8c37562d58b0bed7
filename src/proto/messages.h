// Messages of the worker channel and their JSON codec (DESIGN.md section 7).
//
// A worker holds one WebSocket to the server. Every text frame is one JSON
// object with a "type" (the message name below) and "v" (the protocol
// version), or, between peers that both read them (Hello::batches,
// HelloAck::batches), a batch of such messages (EncodeBatch). Log bytes
// travel in binary frames (log_frame.h).
//
//   worker -> server: hello, heartbeat, started, finished, refused,
//                     log_chunk, drain, owner, checkpoint_saved, outputs_kept
//   server -> worker: hello_ack, assign, ack, cancel, kill, withdraw,
//                     log_request, drain, error, release_outputs
//
// A session: the worker sends Hello (what it offers, what it still runs,
// which results it buffered while disconnected); the server answers HelloAck
// (or Error and closes). Then Heartbeats flow one way and Assign batches the
// other. The worker answers each assignment with Started, or Refused when its
// own admission check says no, and later Finished. The server answers
// Finished with Ack once the outcome is durable; until then the worker keeps
// the result and resends it in its next Hello. Cancel stops an attempt
// gracefully (TERM, grace period, KILL), Kill stops it at once (lease lost,
// reconciliation); both are answered by Finished as usual. Withdraw takes
// back an attempt that waits on the worker behind another (queue-ahead)
// because room for it freed elsewhere first: the worker drops it and answers
// Finished with never_started, or ignores it when the attempt has started.
//
// Encoding never fails. Strings are written as UTF-8; bytes that are not
// valid UTF-8 (in a task's result, say) are replaced by U+FFFD, so such
// strings do not round-trip byte for byte.
//
// Decoding is strict and total: it never throws and never crashes, whatever
// the input. It checks, in order: the size (kMaxMessageBytes), the nesting
// depth, the JSON syntax, "v" and "type", then every field (presence, type,
// range). The first problem found is returned as kInvalidArgument (or
// kFailedPrecondition for a version this build does not speak) with a message
// naming the field, e.g. `assign: tasks[2].cores[0]: expected an unsigned
// integer, got string`. Fields a decoder does not know are ignored, so a
// newer peer may add optional fields without bumping the version.
//
// Durations are integer microseconds ("..._us"), times integer microseconds
// since the Unix epoch ("..._at_us"), task ids strings ("12.3").
//
// Thread safety: plain values and pure functions.
#ifndef DROVER_PROTO_MESSAGES_H_
#define DROVER_PROTO_MESSAGES_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/ids.h"
#include "common/status.h"
#include "common/time.h"
#include "core/model.h"
#include "core/resources.h"

namespace drover::proto {

// The version this build speaks. A decoder rejects any other "v", except in
// Hello, which decodes whatever "v" it carries so the server can answer with
// an Error that names both versions.
inline constexpr uint32_t kProtocolVersion = 1;

// The largest text message accepted; checked before anything else. The
// transport should use the same limit for its frames.
inline constexpr size_t kMaxMessageBytes = 16 * 1024 * 1024;

// The deepest nesting of arrays and objects accepted (real messages nest
// about 5 deep); checked before parsing so hostile input cannot exhaust the
// stack.
inline constexpr int kMaxNestingDepth = 64;
// A Hello's worker name: at most this many bytes, no control characters
// (it is shown in logs, tables and the dashboard).
inline constexpr size_t kMaxWorkerNameBytes = 128;
// Commands a connection numbers (Assignment::argv_id); later ones go whole.
inline constexpr uint32_t kMaxArgvIds = 256;

// One attempt of one task.
struct TaskAttempt {
  TaskId task;
  uint32_t attempt = 0;
  friend auto operator<=>(const TaskAttempt&, const TaskAttempt&) = default;
};

// An attempt a worker still runs, with the resources its assignment gave it
// (sent in Hello, so a restarted server can adopt an attempt its journal
// never saw; "cores" and "gpus" are optional on the wire).
struct RunningTask {
  TaskId task;
  uint32_t attempt = 0;
  std::vector<uint32_t> cores;
  std::vector<core::GpuGrant> gpus;
  // Not started yet: queued behind the attempt it was assigned `after`
  // (Assignment::after); optional on the wire, false when absent.
  bool queued = false;
  friend bool operator==(const RunningTask&, const RunningTask&) = default;
};

// A finished attempt and how it ended.
struct FinishedTask {
  TaskId task;
  uint32_t attempt = 0;
  core::TaskOutcome outcome;
  Time finished_at;
  // Dropped while it waited behind another: it never ran ("never_started",
  // written only when true).
  bool never_started = false;
  // Vacated by the worker on its own (its owner came back): not the task's
  // failure ("vacated", written only when true; the outcome's reason says
  // why).
  bool vacated = false;
  friend bool operator==(const FinishedTask&, const FinishedTask&) = default;
};

// ---- worker -> server ----------------------------------------------------

// First message of every connection. The cluster token is not here: it is
// checked by the HTTP upgrade before any message flows.
struct Hello {
  uint32_t protocol_version = kProtocolVersion;  // sent as "v"
  std::string worker_name;                       // also the name in `resources` (sent once)
  WorkerId previous_id = 0;                      // the id a previous HelloAck gave it, 0 = none
  std::string agent_version;                     // drover build, for people ("0.1.0")
  // The worker's identity: a random secret it keeps in its work directory
  // (worker/identity.h). A name belongs to the first key the server saw
  // for it; a hello with another key for that name is refused. Optional on
  // the wire (a server refuses a hello without one).
  std::string key;
  // Where peers fetch this worker's files (outputs, cached inputs): the TLS
  // port of its file service and its certificate's fingerprint (the
  // server vouches for it to the fetching worker); the host is the address
  // the server sees the worker connect from. Optional on the wire; 0 / ""
  // = it serves no files.
  uint16_t files_port = 0;
  std::string files_fingerprint;
  core::WorkerResources resources;               // resources.name is not sent: the
                                                 // decoder sets it to worker_name
  std::vector<RunningTask> running;              // attempts still running here
  std::vector<FinishedTask> finished;            // results not yet acknowledged
  // It reads batch frames (EncodeBatch): the server may send it several
  // messages in one. Optional on the wire ("batches", written only when
  // true): a worker from before batches gets one message per frame.
  bool batches = false;
  // It resolves Assignment::argv_id: the server may send a command it sent
  // this connection before by its number alone. Optional on the wire
  // ("argv_ids", written only when true), as `batches`.
  bool argv_ids = false;
  // It reads and writes binary frames (messages_binary.h): the hot
  // messages in a compact form. Optional on the wire ("binary", written
  // only when true), as `batches`; binary frames flow only once the
  // HelloAck says the server reads them too.
  bool binary = false;
  friend bool operator==(const Hello&, const Hello&) = default;
};

// Periodic liveness and utilisation; `running` lets the server reconcile.
struct Heartbeat {
  core::WorkerUtilization utilization;
  std::vector<TaskAttempt> running;
  // Why this worker takes no new work by its own health checks ("/scratch
  // not mounted"); empty: healthy. Optional on the wire (absent: healthy),
  // so a server that predates it ignores it.
  std::string unhealthy;
  // Which check says so: "disk" or "program" (empty with `unhealthy`
  // empty); optional on the wire.
  std::string unhealthy_kind;
  // Its GPUs its checks found sick, by NVML index, with why ("3
  // uncorrectable ECC errors"); optional on the wire, as above.
  std::map<uint32_t, std::string> sick_gpus;
  friend bool operator==(const Heartbeat&, const Heartbeat&) = default;
};

struct StartedTask {
  TaskId task;
  uint32_t attempt = 0;
  Time started_at;
  friend bool operator==(const StartedTask&, const StartedTask&) = default;
};
// Processes started (a batch; may be one).
struct Started {
  std::vector<StartedTask> tasks;
  friend bool operator==(const Started&, const Started&) = default;
};

// Attempts ended (a batch). Each stays buffered on the worker until acked.
struct Finished {
  std::vector<FinishedTask> tasks;
  friend bool operator==(const Finished&, const Finished&) = default;
};

// The worker's admission check refused an assignment; nothing was started.
// An input file that came from `holder` with other bytes than its SHA-256
// says: that holder's copy of task `task`'s outputs is not to be trusted.
struct CorruptInput {
  TaskId task;
  WorkerId holder = 0;
  friend auto operator<=>(const CorruptInput&, const CorruptInput&) = default;
};

struct Refused {
  TaskId task;
  uint32_t attempt = 0;
  std::string reason;  // "needs 4 GiB, 1.5 GiB free"
  // Inputs it could not get because every holder sent other bytes
  // ("corrupt" on the wire; optional, absent from older workers).
  std::vector<CorruptInput> corrupt;
  friend bool operator==(const Refused&, const Refused&) = default;
};

// The worker saved the attempt's $DROVER_CHECKPOINT_DIR: these files (names
// relative to it, checked as output names) are in the server's file store
// (PUT /api/v1/files/{sha256}). Sent while the attempt runs, every
// --checkpoint-every, and once more when it ends (before its Finished),
// whenever the set changed or a file had to be uploaded; the server keeps
// the latest of the task's current attempt (core::CheckpointSaved).
struct CheckpointSaved {
  TaskId task;
  uint32_t attempt = 0;
  std::vector<core::OutputFile> files;  // never empty
  friend bool operator==(const CheckpointSaved&, const CheckpointSaved&) = default;
};

// The jobs whose outputs this worker keeps in its cache (not evictable)
// until the server releases them (ReleaseOutputs): sent right after each
// HelloAck when there are any, so that a server (restarted, or one that
// released a job while the worker was away) knows the holders. A Finished
// with outputs says the same of its task's job.
struct OutputsKept {
  std::vector<JobId> jobs;  // ascending
  friend bool operator==(const OutputsKept&, const OutputsKept&) = default;
};

// This worker holds a complete, checked copy of the outputs of attempt
// `attempt` of `task`, as a Replicate asked (core::OutputsReplicated).
struct OutputsReplicated {
  TaskId task;
  uint32_t attempt = 0;
  friend bool operator==(const OutputsReplicated&, const OutputsReplicated&) = default;
};

enum class LogStream : uint8_t { kStdout = 0, kStderr = 1 };
// "stdout" / "stderr".
std::string_view LogStreamName(LogStream stream);

// Status of a log transfer started by LogRequest. The bytes themselves come
// in binary frames (log_frame.h); this says where the stream stands.
struct LogChunk {
  TaskId task;
  uint32_t attempt = 0;
  LogStream stream = LogStream::kStdout;
  uint64_t offset = 0;  // bytes of the log sent so far (= next frame's offset)
  uint64_t size = 0;    // current size of the log file
  bool eof = false;     // true: no more frames follow (not following, or
                        // the attempt ended and everything was sent)
  std::string error;    // non-empty: the log cannot be read ("no such task")
  friend bool operator==(const LogChunk&, const LogChunk&) = default;
};

// Drain: sent by a worker that is shutting down gracefully (take no new
// tasks; running ones finish), or by the server to drain / undrain a worker.
struct Drain {
  bool drain = true;  // false = undrain (server -> worker only)
  std::string reason;
  friend bool operator==(const Drain&, const Drain&) = default;
};

// Owner: sent by a worker in idle-desktop mode whenever its owner comes or
// goes, and after every HelloAck. present = true: it offers no room (its
// tasks are suspended, then vacated); false: it offers room again. `note`
// is for people ("owner present since 14:02:10").
// `since`: when the owner came or went. `freeze_us`: on the message that
// says the owner came back, the time from their input to every task of
// this worker frozen (0: nothing was frozen); optional on the wire.
struct Owner {
  bool present = false;
  std::string note;
  Time since;
  int64_t freeze_us = 0;
  friend bool operator==(const Owner&, const Owner&) = default;
};

// ---- server -> worker ----------------------------------------------------

struct HelloAck {
  WorkerId worker = 0;          // the id the server gave this worker
  std::string server_instance;  // changes when the server restarts
  Duration heartbeat_interval = Seconds(2);
  Duration lease_ttl = Seconds(30);
  // The Ed25519 public key (64 hex digits) the server signs file grants
  // with (net/grant.h): this worker serves a file only against a grant it
  // verifies. Optional on the wire; empty = serve nothing.
  std::string grant_key;
  // The worker may send batch frames (a server reads them either way; it
  // says so when it wants them, `drover server --worker-batches`).
  // Optional on the wire, as Hello::batches.
  bool batches = false;
  // The server reads and writes binary frames (messages_binary.h), and
  // sends them to this worker when its Hello said it reads them. Optional
  // on the wire, as `batches`.
  bool binary = false;
  friend bool operator==(const HelloAck&, const HelloAck&) = default;
};

// A worker to fetch a file from (InputFile::sources).
struct FileSource {
  WorkerId worker = 0;
  std::string host;         // as the server saw it connect ("10.0.0.5", "::1")
  uint16_t port = 0;        // its file service (Hello::files_port)
  std::string fingerprint;  // its file service's certificate, pinned
  friend bool operator==(const FileSource&, const FileSource&) = default;
};

// One output of a dependency that the task gets in $DROVER_INPUTS/<from>/<name>,
// fetched (peer to peer) before the task starts and checked against sha256.
struct InputFile {
  TaskId from;  // the dependency that wrote it
  core::OutputFile file;
  std::vector<FileSource> sources;  // holders, in the order to try them
  std::string grant;                // lets this worker fetch file.sha256 (net/grant.h)
  friend bool operator==(const InputFile&, const InputFile&) = default;
};

// One task attempt to run, with everything needed to run it.
struct Assignment {
  TaskId task;
  uint32_t attempt = 0;
  std::vector<uint32_t> cores;   // pin to these core ids
  int64_t cpu_quota_milli = 0;   // CPU quota; 0 = none
  uint64_t mem_limit_bytes = 0;  // 0 = no limit
  std::vector<core::GpuGrant> gpus;
  std::vector<std::string> argv;           // already expanded ("{index}" replaced)
  // To a worker that resolves them (Hello::argv_ids): a command's number on
  // this connection, 1..kMaxArgvIds. With `argv`: remember it under this
  // number; with `argv` empty: the command sent before under it. 0: none
  // (optional on the wire, "argv_id"). The Executor's Python runner is
  // ~5 KiB in every call's command.
  uint32_t argv_id = 0;
  std::map<std::string, std::string> env;  // the job's extra environment
  Duration timeout = Duration::zero();     // zero = none
  int64_t array_index = 0;
  std::string job_name;
  std::string group_name;
  // Result strings of the tasks this one depends on, for $DROVER_INPUTS.
  std::map<TaskId, std::string> inputs;
  // The dependencies' outputs, for $DROVER_INPUTS/<task id>/ (optional on
  // the wire, "files").
  std::vector<InputFile> files;
  // The task's latest checkpoint, saved by an earlier attempt on worker
  // `checkpoint_from`: the files to fetch from the server (GET
  // /api/v1/files/{sha256}, the cluster token) and copy into
  // $DROVER_CHECKPOINT_DIR before the start, replacing what is there;
  // unless this worker saved it and its own directory for the task is not
  // empty (then that is at least as new). Optional on the wire
  // ("checkpoint", "checkpoint_from").
  std::vector<core::OutputFile> checkpoint;
  WorkerId checkpoint_from = 0;
  // Files uploaded from the client (core::TaskGroupSpec::input_files):
  // fetched from the server's file store and linked, read-only, into the
  // task's directory before the start. Optional on the wire ("uploads").
  std::vector<core::OutputFile> uploads;
  // Queue-ahead: run this attempt on the resources of `after`, an attempt
  // running on this worker, the moment that one exits (no server round
  // trip); when `after` does not run here, start at once. Optional on the
  // wire ("after": {"task", "attempt"}).
  std::optional<TaskAttempt> after;
  // How to vacate it (core::TaskGroupSpec): the first signal and the time
  // before KILL. Optional on the wire ("vacate_signal", "vacate_grace_us").
  int32_t vacate_signal = core::kDefaultVacateSignal;
  Duration vacate_grace = Seconds(30);
  // The most its outputs may add up to (0 = no limit from the server): the
  // task's `max_output` (max_output_by_task), else the server's
  // --max-output. The worker's own --max-output applies too, when lower.
  // Optional on the wire ("max_output", "max_output_by_task").
  uint64_t max_output_bytes = 0;
  bool max_output_by_task = false;
  // The job's user (core::JobSpec::user): a worker in per-user mode runs
  // the task as this user's Unix account (worker/exec/task_account.h).
  // Optional on the wire ("user", written when not empty): a server that
  // omits it leaves it empty, which such a worker refuses.
  std::string user;
  // `network = "none"`: a network namespace of its own with only loopback
  // (the server places such a task only on a worker that said it can make
  // one, core::WorkerResources::private_network). Optional on the wire
  // ("network": "none").
  bool private_network = false;
  // Disk I/O limits on the device of its directory (core::IoLimits).
  // Optional on the wire ("io": {"read_bps", "write_bps", "weight"}).
  core::IoLimits io;
  // The most its directory may hold (`disk`; 0: no limit from the task):
  // the worker stops it, failed, once it holds more. Optional on the wire
  // ("disk").
  uint64_t disk_bytes = 0;
  // The container image it runs in (core::TaskGroupSpec::image; empty:
  // none) and when to fetch it. Optional on the wire ("image",
  // "image_pull": "always" or "never", absent for "missing").
  std::string image;
  core::ImagePull image_pull = core::ImagePull::kMissing;
  friend bool operator==(const Assignment&, const Assignment&) = default;
};
struct Assign {
  std::vector<Assignment> tasks;
  friend bool operator==(const Assign&, const Assign&) = default;
};

// The server persisted these finished results; the worker may forget them.
struct Ack {
  std::vector<TaskAttempt> tasks;
  friend bool operator==(const Ack&, const Ack&) = default;
};

// Stop gracefully: TERM to the process group, grace period, then KILL.
// vacate = true: preempted by the server; use the assignment's vacate
// signal and grace instead ("vacate", written only when true).
struct Cancel {
  TaskId task;
  uint32_t attempt = 0;
  std::string reason;  // "canceled by user", "timed out after 2h"
  bool vacate = false;
  friend bool operator==(const Cancel&, const Cancel&) = default;
};
// Stop at once: KILL everything of the attempt.
struct Kill {
  TaskId task;
  uint32_t attempt = 0;
  std::string reason;  // "lease lost"
  friend bool operator==(const Kill&, const Kill&) = default;
};
// Drop the attempt if it still waits behind another; else nothing.
struct Withdraw {
  TaskId task;
  uint32_t attempt = 0;
  std::string reason;  // "room freed first on worker 2"
  friend bool operator==(const Withdraw&, const Withdraw&) = default;
};

// Asks the worker to send a task's log from `offset`. follow = false sends
// what exists, then a LogChunk with eof = true; follow = true keeps sending
// new bytes until the attempt ends (then eof) or a LogRequest with
// stop = true for the same task and stream arrives.
struct LogRequest {
  TaskId task;
  uint32_t attempt = 0;  // 0 = the latest attempt on this worker
  LogStream stream = LogStream::kStdout;
  bool follow = false;
  bool stop = false;  // true: stop sending this log (ignore the rest)
  uint64_t offset = 0;
  friend bool operator==(const LogRequest&, const LogRequest&) = default;
};

// The server no longer needs the outputs of these jobs kept on this worker
// (each job ended, and `drover server --keep-outputs` has passed since, or
// it was forgotten, or the server does not know it): the worker drops the
// keep (FileCache::Unkeep), and the files become evictable like any cached
// file.
struct ReleaseOutputs {
  std::vector<JobId> jobs;
  friend bool operator==(const ReleaseOutputs&, const ReleaseOutputs&) = default;
};

// Keep a copy of the outputs of attempt `attempt` of `task` (its job file's
// `replicas`): fetch each file like an input (from its sources, with its
// grant, checked by SHA-256) into the cache, keep it under the task's job
// like the worker's own outputs, then answer OutputsReplicated. A worker
// that cannot says why in its log and answers nothing.
struct Replicate {
  TaskId task;
  uint32_t attempt = 0;
  std::vector<InputFile> files;  // never empty
  friend bool operator==(const Replicate&, const Replicate&) = default;
};

// The server refuses the session (bad version, duplicate name) or reports a
// protocol violation, then closes the connection.
struct Error {
  std::string code;  // StatusCodeName of the cause, e.g. "failed_precondition"
  std::string message;
  // From a standby server: the leader's "host:port" to connect to instead
  // (empty when not known); optional on the wire.
  std::string leader;
  friend bool operator==(const Error&, const Error&) = default;
};

using WorkerMessage = std::variant<Hello, Heartbeat, Started, Finished, Refused, LogChunk, Drain,
                                   Owner, CheckpointSaved, OutputsKept, OutputsReplicated>;
using ServerMessage = std::variant<HelloAck, Assign, Ack, Cancel, Kill, Withdraw, LogRequest, Drain,
                                   Error, ReleaseOutputs, Replicate>;

// The "type" string of a message: "hello", "hello_ack", "log_request", ...
std::string_view MessageTypeName(const WorkerMessage& message);
std::string_view MessageTypeName(const ServerMessage& message);

// Compact JSON text. Never fails.
std::string Encode(const WorkerMessage& message);
std::string Encode(const ServerMessage& message);

// Decodes one text frame. Errors as described at the top of this file;
// never throws.
Result<WorkerMessage> DecodeWorkerMessage(std::string_view text);
Result<ServerMessage> DecodeServerMessage(std::string_view text);

// Batch frames: several encoded messages in one text frame,
// {"v":1,"type":"batch","messages":[...]}, so that what one side sends in
// a burst (a worker's Finished and Started, the server's Ack and Assign)
// costs one frame, one TLS record and one send. A peer sends them only to
// a peer that said it reads them (Hello::batches, HelloAck::batches).
// EncodeBatch joins messages already encoded (Encode), in order; a batch
// is not nested. At most kMaxBatchMessages messages, and the frame within
// kMaxMessageBytes: BatchFits says whether one more text still fits.
inline constexpr size_t kMaxBatchMessages = 1024;
std::string EncodeBatch(const std::vector<std::string>& texts);
bool BatchFits(size_t texts, size_t bytes, size_t next_bytes);
// The frames to send `texts` (encoded messages, in order) in: a text alone
// as itself, several as batches, each within the limits above.
std::vector<std::string> FramesOf(std::vector<std::string> texts);
// Decodes a frame that is one message or a batch of them, in order. An
// error in a batch names the message (`batch: messages[2]: finished: ...`)
// and fails the whole frame.
Result<std::vector<WorkerMessage>> DecodeWorkerFrame(std::string_view text);
Result<std::vector<ServerMessage>> DecodeServerFrame(std::string_view text);

}  // namespace drover::proto

#endif  // DROVER_PROTO_MESSAGES_H_
