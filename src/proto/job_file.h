// Job files (TOML) and the JSON body of the submit API: both describe a
// core::JobSpec with the same structure (DESIGN.md section 8).
//
//   name = "sweep"            # required
//   user = "ana"              # optional; the server may override it
//   after = ["12", "12.3"]    # optional: jobs / tasks that must succeed first
//
//   [[task]]                  # one or more
//   id = "train"              # required, unique in the job
//   command = ["python", "train.py", "--seed", "{index}"]
//                             # required: an array of strings (argv, no
//                             # shell), or a string, which is run as
//                             # ["sh", "-c", string]
//   array = "0-7"             # optional: "0-7", "5", "0-99:2"
//   env = { FOO = "bar" }     # optional; values are strings
//   resources = { cpus = 2, mem = "4GiB", gpus = 1, gpu_mem = "16GiB",
//                 gpu_type = ["A100", "H100"], licenses = 2,
//                 labels = { os = "linux" } }
//   depends_on = ["prep"]     # ids of other [[task]] entries of this job
//   retries = 2               # extra attempts after a failure (0..1000)
//   retry_backoff = "10s"     # before the first retry, doubling after
//   timeout = "2h"            # per attempt; absent or "0" = none
//   priority = 10             # higher runs first (int32)
//   vacate_signal = "SIGUSR1" # sent first when the attempt is vacated (its
//                             # workstation's owner returned, or preemption):
//                             # SIGTERM (default), SIGINT, SIGHUP, SIGUSR1,
//                             # SIGUSR2, SIGQUIT; "USR1" works too
//   vacate_grace = "2m"       # then KILL after this long (default 30s)
//   preemptible = false       # never chosen as a priority-preemption victim
//   inputs = ["prep:train.csv"]  # which outputs of depends_on groups it
//                             # fetches: "prep" (all of prep's),
//                             # "prep:NAME", "prep:*.csv" (fnmatch, '*'
//                             # stops at '/'); absent = all, [] = none
//                             # (core/input_select.h)
//   max_output = "2GiB"       # most its outputs may add up to, like mem;
//                             # absent = the server's --max-output
//
// Resources:
//   cpus     number (2, 0.5) or string ("2", "0.5", "500m"); default 1
//   mem      string with a unit ("4GiB", "512MB") or an integer of bytes;
//            "4G" is rejected as ambiguous (common/quantity.h)
//   gpus     number (1, 0.25) or string; above 1 only whole GPUs
//   gpu_mem  like mem (per GPU)
//   gpu_type string or array of strings (accepted GPU models)
//   labels   table of strings the worker's labels must equal
//   counters table of positive integers (custom named counters), and, as a
//            shorthand, any other key whose value is an integer is a counter
//            (`licenses = 2`). A key that looks like a misspelt resource
//            (`cpu = 2`, `mems = 4`) is rejected with a suggestion instead;
//            write `counters = { cpu = 2 }` if that is really meant.
//
// Unknown keys are errors, with a suggestion when one is close. The spec is
// checked as a whole here (not left to the scheduler) so that people see
// every problem with its line: duplicate ids, unknown depends_on ids (with a
// suggestion), dependency cycles (named), inputs naming a group outside
// depends_on or a file name that could leave a directory, and
// ResourceRequest::Validate.
//
// Error messages name where: TOML errors start with `file:line:col: ` and
// then the field path; JSON errors start with the field path:
//   sweep.toml:12:14: task[1].resources.mem: memory quantity "4G" is ambiguous: ...
//   sweep.toml:7:1: task[0]: unknown key "comand" (did you mean "command"?)
//   task[1].resources.mem: memory quantity "4G" is ambiguous: ...
// All are kInvalidArgument.
//
// Thread safety: pure functions.
#ifndef DROVER_PROTO_JOB_FILE_H_
#define DROVER_PROTO_JOB_FILE_H_

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

#include "common/status.h"
#include "core/model.h"

namespace drover::proto {

// The largest job file or submit body accepted.
inline constexpr size_t kMaxJobSpecBytes = 16 * 1024 * 1024;

// The most tasks one job may have (all its groups and arrays together). A
// task costs the server ~56 bytes queued and ~1 KB once it has run (its
// records in the journal fold, its outcome; bench/README.md "loop stall"),
// so a million-task job that ran is about a gigabyte held; more is refused
// ("task: the job has N tasks, more than the limit of 1000000").
inline constexpr uint64_t kMaxJobTasks = 1'000'000;

// Parses a TOML job file; `file_name` only labels error messages.
Result<core::JobSpec> ParseJobToml(std::string_view text, std::string_view file_name);

// Parses the submit API's JSON body (the same structure as the TOML file).
Result<core::JobSpec> JobSpecFromJson(std::string_view json_text);

// The most jobs one batch submission (POST /api/v1/jobs/batch) may carry.
inline constexpr size_t kMaxBatchJobs = 10'000;

// Parses a batch submit body, {"jobs": [job, ...]}, each job the structure
// JobSpecFromJson reads. A body that is not such an object, or holds no jobs
// or more than kMaxBatchJobs, fails as a whole; otherwise each job decodes
// on its own, and a refused one's error names its field within that job
// ("task[0].resources.mem: ...").
Result<std::vector<Result<core::JobSpec>>> JobSpecBatchFromJson(std::string_view json_text);

// The canonical JSON form of `spec`: commands as arrays, cpus and gpus as
// numbers, mem and gpu_mem as integer bytes, durations as strings ("2h",
// "1.5ms"), counters in a "counters" table, `after` as strings. Parsing it
// with JobSpecFromJson gives back an equal JobSpec.
std::string JobSpecToJson(const core::JobSpec& spec);

// One [[task]] group in the same canonical form (its "id", "command",
// "resources", "retries", ...), for the task API to show what a task runs.
nlohmann::json TaskGroupSpecJson(const core::TaskGroupSpec& group);

}  // namespace drover::proto

#endif  // DROVER_PROTO_JOB_FILE_H_
