// Job files (TOML) and the JSON body of the submit API: both describe a
// core::JobSpec with the same structure, read by one set of rules. Every
// key, its values and defaults: docs/guide.md, "Job files"; how the reading
// decides (a `command` string runs under `sh -c`, other integer keys in
// `resources` are counters, unknown keys are typos): src/proto/README.md.
//
// The spec is checked as a whole here (not left to the scheduler) so that
// people see every problem with its place: unknown keys (with a suggestion
// when one is close), duplicate ids, unknown depends_on ids (with a
// suggestion), dependency cycles (named), inputs naming a group outside
// depends_on or a file name that could leave a directory, and
// ResourceRequest::Validate.
//
// Every error is kInvalidArgument and names where: TOML errors start with
// `file:line:col: ` and then the field path; JSON errors start with the
// field path:
//   sweep.toml:12:14: task[1].resources.mem: memory quantity "4G" is ambiguous: ...
//   sweep.toml:7:1: task[0]: unknown key "comand" (did you mean "command"?)
//   task[1].resources.mem: memory quantity "4G" is ambiguous: ...
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
