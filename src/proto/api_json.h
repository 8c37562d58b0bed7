// JSON of the REST API (/api/v1/...) and of the client event stream.
//
// Encoders build what the server sends; decoders read it back, for the CLI
// and tests. Shapes (every time is given twice: RFC 3339 UTC with
// milliseconds, "2024-05-01T12:00:00.250Z", and Unix milliseconds in the
// field with an "_ms" suffix; absent times are null):
//
//   job:    {"id":12, "name":"sweep", "user":"ana", "submitted_at":..,
//            "submitted_at_ms":.., "task_count":10, "done":false,
//            "counts":{"waiting":0,"queued":2,...,"canceled":0}}
//   task:   {"id":"12.3", "job":12, "group":"train", "array_index":2,
//            "state":"failed", "attempt":1, "worker":3 (or null),
//            "reason":"exit code 3", "submitted_at"/"_ms", "started_at"/"_ms",
//            "finished_at"/"_ms", "retry_at"/"_ms",
//            "outcome":{"exit_code":3,"signal":0,"oom_killed":false,
//                       "wall_ms":..,"cpu_ms":..,"peak_mem_bytes":..,
//                       "io_read_bytes":.., "io_write_bytes":.. (where
//                       counted), "result":"..."} (or null),
//            "network":"none", "disk":.., "io":{"read_bps","write_bps",
//            "weight"} (where the task asked for them),
//            "cores":[0,1], "gpus":[{"index":0,"share":100,"mem_bytes":0}],
//            "contents_hidden":true (only where HideContents took them out)}
//   worker: {"id":3, "name":"gpu1", "cpu_cores":[0,1,..], "mem_bytes":..,
//            "gpus":[{"index":0,"uuid":..,"model":..,"memory_bytes":..,
//                     "free_share":100,"free_mem_bytes":..}],
//            "counters":{}, "labels":{}, "drained":false, "lost":false,
//            "free_cores":[..], "free_mem_bytes":.., "free_counters":{},
//            "tasks":["12.3"], "utilization":{"cpu_percent":..,
//            "mem_used_bytes":.., "gpus":[{"index","util_percent",
//            "mem_used_bytes"}]}, "last_heartbeat"/"_ms",
//            "refusing":false (refused an assignment, takes nothing new
//            until its next heartbeat), "offer_changes":0 (times it
//            re-attached offering other resources), "offer_changed_at"/"_ms"
//            (the last such time; only when offer_changes > 0)}
//   lists:  {"jobs":[...]}, {"tasks":[...]}, {"workers":[...]}
//   event:  {"type":"task_state", "task":"12.3", "from":"queued",
//            "to":"assigned", "attempt":1, "reason":"", "at"/"at_ms"}
//   error:  {"error":{"code":"invalid_argument", "message":"...",
//            "field":"task[1].resources.mem"}}  ("field" only when known)
//
// Times decode at millisecond precision. Decoders never throw; errors are
// kInvalidArgument naming the field.
//
// Thread safety: pure functions.
#ifndef DROVER_PROTO_API_JSON_H_
#define DROVER_PROTO_API_JSON_H_

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/time.h"
#include "core/commands.h"
#include "core/queries.h"

namespace drover::proto {

// "2024-05-01T12:00:00.250Z" (UTC, milliseconds, always 3 decimals).
std::string FormatRfc3339(Time t);

// As JSON values, for a shell that composes larger bodies (include
// <nlohmann/json.hpp> to use them).
nlohmann::json JobInfoJson(const core::JobInfo& job);
nlohmann::json TaskInfoJson(const core::TaskInfo& task);
nlohmann::json WorkerInfoJson(const core::WorkerInfo& worker);
// One attempt of a task, for GET /api/v1/tasks/{id}'s "attempts": `state` is
// what the attempt ended as ("retried" for one that sent its task back to
// the queue, "preempted" for one vacated for its workstation's owner or a
// task of higher priority) or, for the latest attempt, the task's state.
struct AttemptView {
  uint32_t attempt = 0;
  std::optional<WorkerId> worker;
  std::optional<Time> started_at;
  std::optional<Time> finished_at;
  std::string state;
  std::string reason;
  std::optional<core::TaskOutcome> outcome;
};
nlohmann::json AttemptJson(const AttemptView& attempt);

// Takes out of a task's JSON (TaskInfoJson, with the "attempts" and "spec"
// GET /api/v1/tasks/{id} adds) what only those who may read its job's
// contents see (server/access.h): each outcome's "result" (emptied),
// "outputs" (emptied), "outputs_on" and "replicas"; the checkpoint's
// "files" (emptied); the spec's "env" and "input_files". Sets
// "contents_hidden": true, so a client can say why they are missing. What
// the queue shows stays: states, reasons, times, resources, exit codes.
void HideContents(nlohmann::json& task);

// As compact JSON text.
std::string EncodeJobInfo(const core::JobInfo& job);
std::string EncodeTaskInfo(const core::TaskInfo& task);
std::string EncodeWorkerInfo(const core::WorkerInfo& worker);
std::string EncodeJobList(const std::vector<core::JobInfo>& jobs);
std::string EncodeTaskList(const std::vector<core::TaskInfo>& tasks);
std::string EncodeWorkerList(const std::vector<core::WorkerInfo>& workers);
// One event-stream message; `at` is when the change happened.
std::string EncodeTaskEvent(const core::TaskStateChanged& change, Time at);
// The same with "info": TaskInfoJson(info), for a watcher of one task that
// ended (its result and outcome without another request).
std::string EncodeTaskEvent(const core::TaskStateChanged& change, Time at,
                            const core::TaskInfo& info, bool hide_contents = false);
// The error body for `status` (which must not be OK); `field` is the field
// path the error is about, if any.
std::string EncodeErrorBody(const Status& status, std::string_view field = {});

Result<core::JobInfo> DecodeJobInfo(std::string_view text);
Result<core::TaskInfo> DecodeTaskInfo(std::string_view text);
Result<core::WorkerInfo> DecodeWorkerInfo(std::string_view text);
Result<std::vector<core::JobInfo>> DecodeJobList(std::string_view text);
Result<std::vector<core::TaskInfo>> DecodeTaskList(std::string_view text);
Result<std::vector<core::WorkerInfo>> DecodeWorkerList(std::string_view text);

struct TaskEvent {
  core::TaskStateChanged change;
  Time at;
};
Result<TaskEvent> DecodeTaskEvent(std::string_view text);

struct ApiError {
  std::string code;  // StatusCodeName, e.g. "invalid_argument"
  std::string message;
  std::string field;  // empty when the body had none
};
// Reads an error body; the CLI shows `message` (and `field`) to people.
Result<ApiError> DecodeErrorBody(std::string_view text);

// What a subscriber of the event stream opened with ?watch=true sends to
// choose what it hears of: {"watch":"12"} (every task of job 12) or
// {"watch":"12.3"} (one task), and the same with "unwatch" to stop. One
// key, a string value; anything else is refused with a reason.
struct WatchRequest {
  bool watch = true;  // false: unwatch
  JobId job = 0;
  std::optional<uint32_t> task;  // the task's index; none: the whole job
};
Result<WatchRequest> ParseWatchRequest(std::string_view text);

// POST /api/v1/allocs: an allocation queue, the workers the server may
// borrow from Slurm (server/alloc.h).
//   {"kind": "slurm", "max_workers": 4, "time_limit": "1h",
//    "idle_timeout": "5m", "server_address": "head:7210",
//    "sbatch_args": ["--partition", "gpu"], "worker_args": ["--label", "site=hpc"]}
// kind, max_workers and time_limit are required; durations as `drover
// submit --timeout` spells them; unknown keys are refused.
struct AllocQueueRequest {
  std::string kind;  // "slurm"
  uint32_t max_workers = 0;
  Duration time_limit = Duration::zero();
  Duration idle_timeout = Seconds(300);
  std::string server_address;  // HOST:PORT for the workers; empty: this host
  std::vector<std::string> sbatch_args;
  std::vector<std::string> worker_args;  // more flags for `drover worker`
};
inline constexpr uint32_t kMaxAllocWorkers = 10'000;
Result<AllocQueueRequest> ParseAllocQueueRequest(std::string_view text);

}  // namespace drover::proto

#endif  // DROVER_PROTO_API_JSON_H_
